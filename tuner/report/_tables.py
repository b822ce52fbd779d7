"""Tables from the study: ``trials.csv`` and the terminal summary."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ..core.data_parallel import resolved
from ..core.shapes import choice_of as dynamic_choice_of
from ..core.spec import PER_RANK
from ._fmt import text, truthy

#: trials.csv columns, in order (others follow).
COLUMNS = [
    "number", "role", "state", "config_label", "target", "backend", "mode", "dynamic", "fullgraph", "options", "dynamo",
    "precision",
    "total_time_s", "compile_time_s", "step_time_s", "speedup", "step_spread", "peak_memory_mb",
    "eager_peak_memory_mb", "correct", "graphs", "graph_breaks", "recompiles", "recompile_time_s",
    "failure_category", "failure_explanation", "failure_hint", "failure_raw", "duplicate_of", "interrupted",
    "regions", "step_s", "eager_step_s", "first_call_s", "trial_wall_s", "trace_dir", "compile_time_warm_s",
    "pruned_reason", "regional_note", "not_searched", "slowest_rank", "rank_spread",
]
_DETAIL_COLUMNS = ("graph_break_details", "recompile_details", "round_ratios", "region_names", "environment",
                   "config", "log_tail", "correctness_error")


def trials_frame(study) -> pd.DataFrame:
    """One row per trial (every state), measurements as columns named like the user attributes."""
    rows = []
    wrap = (study.user_attrs.get("settings") or {}).get("data_parallel")  # on many ranks: ddp or fsdp2
    for t in study.get_trials(deepcopy=False):
        attrs = dict(t.user_attrs)
        cfg = attrs.get("config") or {}
        row = {"number": t.number, "state": t.state.name, "value": t.value}
        row.update({k: v for k, v in attrs.items() if k not in _DETAIL_COLUMNS})
        row.update(
            target=cfg.get("target"), backend=cfg.get("backend"), mode=cfg.get("mode"),
            dynamic=dynamic_choice_of(cfg), fullgraph=cfg.get("fullgraph"),
            options=json.dumps(cfg.get("options") or {}, sort_keys=True),
            dynamo=json.dumps(cfg.get("dynamo") or {}, sort_keys=True),
            precision=cfg.get("precision"),  # set: the trial changed numerics (tuner/core/precision.py)
            correctness_error=attrs.get("correctness_error"),
        )
        row.update(_rank_columns(row.pop("ranks", None), cfg, wrap))
        rows.append(row)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return pd.DataFrame(columns=COLUMNS)
    # Every documented column is present, even when no trial filled it (e.g. no failures yet).
    for column in COLUMNS:
        if column not in frame.columns:
            frame[column] = None
    return frame[COLUMNS + [c for c in frame.columns if c not in COLUMNS]]


def _rank_columns(ranks, cfg: dict, wrap: str | None) -> dict:
    """On many ranks: each rank's figures (``rank0_step_s``, ...) and the searched DDP/FSDP2
    settings (``ddp_bucket_cap_mb``, ...) as columns of their own; nothing for one process."""
    if not ranks:
        return {}
    out = {f"rank{r['rank']}_{name}": r.get(name) for r in ranks for name in PER_RANK}
    if wrap:  # the defaults too: a config at DDP's defaults has no settings of its own
        out.update({f"{wrap}_{k}": v for k, v in resolved(cfg.get("data_parallel") or {}, wrap).items() if k != "wrap"})
    return out


def measured(frame: pd.DataFrame) -> pd.DataFrame:
    """Trials that measured something themselves: repeats of a measured config, and suggestions
    the search left out (``not_searched``), are not."""
    if frame.empty or "duplicate_of" not in frame:
        return frame
    own = frame["duplicate_of"].isna()
    if "not_searched" in frame:
        own &= frame["not_searched"].isna()
    return frame[own]


def write_trials_csv(study, path: Path) -> Path:
    trials_frame(study).to_csv(path, index=False)
    return path


def summary_table(frame: pd.DataFrame, top: int = 10) -> str:
    """Measured configs, best total first; failures after, with their category."""
    if frame.empty:
        return "(no trials)"
    rows = measured(frame)
    ok = rows[rows["state"] == "COMPLETE"].sort_values("total_time_s")
    failed = rows[rows["state"].isin(("FAIL", "PRUNED"))]
    lines = []
    if not ok.empty:
        show = ok.head(top)
        table = pd.DataFrame({
            "#": show["number"],
            "config": show["config_label"],
            "total s": show["total_time_s"].map(lambda v: f"{v:,.1f}"),
            "compile s": show["compile_time_s"].map(lambda v: f"{v:.1f}"),
            "step ms": show["step_time_s"].map(lambda v: f"{v * 1e3:.2f}"),
            "speedup": show["speedup"].map(lambda v: f"{v:.2f}x"),
            "mem MB": show["peak_memory_mb"].map(lambda v: "" if pd.isna(v) else f"{v:.0f}"),
            "breaks": show.get("graph_breaks", pd.Series(index=show.index, dtype=float)).map(
                lambda v: "" if pd.isna(v) else f"{int(v)}"),
        })
        lines.append(table.to_string(index=False))
    if not failed.empty:
        lines.append("")
        lines.append("failed or pruned:")
        for _, row in failed.iterrows():
            if row["state"] == "PRUNED" and row.get("pruned_reason"):
                lines.append(f"  #{row['number']} {row.get('config_label')}: pruned - {text(row.get('pruned_reason'))}")
                continue
            category = failure_category(row)
            lines.append(f"  #{row['number']} {row.get('config_label')}: {category} - "
                         f"{text(row.get('failure_explanation'))}")
    return "\n".join(lines)


def failure_category(row) -> str:
    """The category a failed (or pruned) trial row is shown under."""
    category = text(row.get("failure_category"))
    if category:
        return category
    if row.get("state") == "PRUNED":
        return "pruned"
    return "interrupted" if truthy(row.get("interrupted")) else "unknown"
