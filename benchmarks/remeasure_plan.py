"""What the tuner said, read as data for benchmarks/remeasure.py: the verdict and the config from
best_config.yaml, the best compiled config from trials.csv when the verdict is stay eager, and
what the workload file defines (its ``TASK`` constant, a ``loss_fn``), read from its source
without running it. No tuner code: the YAML and CSV files themselves."""
from __future__ import annotations

import ast
import csv
import json
from pathlib import Path
from typing import Any

import yaml


def best_compiled_from_csv(results: Path, label: str | None) -> dict | None:
    """For a "stay eager" verdict: the best compiled config, found in trials.csv by its label
    (``measured.best_compiled``): its ``config_key`` column is the whole config as JSON; without
    it, the config columns (enough unless the config marks input dimensions). None if not found."""
    path = results / "trials.csv"
    if not label or not path.is_file():
        return None
    with path.open(newline="") as f:
        row = next((r for r in csv.DictReader(f) if r.get("config_label") == label and r.get("state") == "COMPLETE"),
                   None)
    if row is None:
        return None
    try:
        cfg = json.loads(row.get("config_key") or "null")
    except json.JSONDecodeError:
        cfg = None
    if isinstance(cfg, dict) and cfg.get("target"):
        return {"compile_optimizer": False, **cfg}
    dynamic = {"True": True, "False": False, "": None}
    if row.get("dynamic", "") not in dynamic:
        return None
    cfg = {"target": row["target"], "backend": row["backend"], "mode": row.get("mode") or None,
           "dynamic": dynamic[row.get("dynamic", "")], "fullgraph": row.get("fullgraph") == "True",
           "options": json.loads(row.get("options") or "{}"), "compile_optimizer": "+optimizer" in label.split()}
    if json.loads(row.get("dynamo") or "{}"):
        cfg["dynamo"] = json.loads(row["dynamo"])
    if row.get("precision"):
        cfg["precision"] = row["precision"]
    return cfg


def _top_level(workload: str) -> list[ast.stmt]:
    try:
        return ast.parse(Path(workload).read_text()).body
    except (OSError, SyntaxError):
        return []


def defines(workload: str, name: str) -> bool:
    """Whether the workload file defines ``name`` at module level (read without importing it)."""
    for node in _top_level(workload):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name) == name for a in node.names):
            return True
    return False


def task_constant(workload: str) -> str | None:
    """A module-level ``TASK = "train"`` in the workload file, read without importing it."""
    for node in _top_level(workload):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "TASK" for t in node.targets):
            if isinstance(node.value, ast.Constant) and node.value.value in ("infer", "train"):
                return node.value.value
    return None


def read_verdict(results: Path) -> dict:
    """What best_config.yaml says: verdict, config to re-measure, threads, task, confirmed range."""

    path = results / "best_config.yaml"
    data = yaml.safe_load(path.read_text())
    measured, tuned_on = data.get("measured") or {}, data.get("tuned_on") or {}
    plan: dict[str, Any] = {"path": str(path), "verdict": data.get("verdict", "compile"), "tuned_on": tuned_on,
                            "confirmed": measured.get("confirmed"), "config": None, "label": None,
                            # the process environment its `env` export asks for: glibc malloc's thresholds
                            "malloc_env": {k: v for k, v in ((data.get("exports") or {}).get("env") or {})
                                           .get("variables", {}).items() if k.startswith("MALLOC_")}}
    cfg = data.get("config") or {}
    if plan["verdict"] == "compile" and cfg.get("target") != "none":
        plan.update(config=str(path), label=_label(cfg), compile_optimizer=bool(cfg.get("compile_optimizer")))
        rng = measured.get("speedup_interval") or [measured.get("speedup_vs_eager")] * 2
        plan["reference"] = rng if None not in rng else None
        plan["reference_what"] = ("confirmed 95 % interval" if measured.get("speedup_interval")
                                  else "unconfirmed search figure")
    else:
        best = best_compiled_from_csv(results, measured.get("best_compiled"))
        if best is not None:
            plan.update(config=best, label=measured.get("best_compiled"),
                        compile_optimizer=best["compile_optimizer"])
        point = measured.get("best_compiled_speedup")
        rng = measured.get("speedup_interval") or [point, point]
        plan["reference"] = rng if None not in rng and best is not None else None
        plan["reference_what"] = ("best compiled config's confirmed 95 % interval" if measured.get("confirmed")
                                  else "best compiled config's search figure (stay eager)")
    return plan


def _label(cfg: dict) -> str:
    label = f"{cfg.get('target')}/{cfg.get('backend')}"
    if cfg.get("backend") == "inductor":
        label += f"/{cfg.get('mode') or 'default'}"
    return label + (f" dynamic={cfg['dynamic']}" if cfg.get("dynamic") is not None else "")


