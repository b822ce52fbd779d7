"""Calibration: how often the stated 95 % interval holds a re-measured speedup, and how often a
workload's verdict repeats, on real processes.

    python benchmarks/calibration.py [--repeats 5] [--remeasure-rounds 4] [--out /tmp/calibration]
        [--json calibration.json] [--write-docs] [WORKLOAD.py[:TASK] ...]

For each workload: ``compile-tune`` tunes it once (search and confirmation), then its confirmation
is run again ``--repeats - 1`` times on the same study (the stored confirmation is cleared and the
same command run again: the search is done, so only the confirmation runs, from fresh
processes). Each run's ``best_config.yaml`` states a verdict and, for the config it quotes (the
recommended one, or the best compiled one), a speedup and its 95 % interval. Then every quoted
config is re-measured by ``benchmarks/remeasure.py``, which shares none of the tuner's measuring
code (``--remeasure-rounds`` rounds of fresh processes, eager alone twice a round), and the table
says, per workload: the runs, their verdicts, how often the modal verdict repeated, and how
often the stated interval held the re-measured speedup (and overlapped the re-measure's own 95 %
interval). ``--write-docs`` rewrites the table in docs/benchmarks.md. Run it on a quiet machine:
every run times processes, and nothing else should share the cores.
"""
from __future__ import annotations

import argparse
import collections
import datetime
import json
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import optuna
import yaml

ROOT = Path(__file__).resolve().parent.parent
#: Workloads whose compiled configs come within 5 % of eager, so that confirmation runs (the MLP
#: examples lose by more: their confirmation is skipped and states no interval)
DEFAULT = ["tests/workloads/fusable.py", "tests/workloads/fusable_schedule.py", "examples/tiny_transformer.py",
           "examples/tiny_transformer.py:train"]
DOCS = ROOT / "docs" / "benchmarks.md"
MARK = ("<!-- calibration-table: written by benchmarks/calibration.py -->", "<!-- /calibration-table -->")


def tune(workload: str, task: str, out: Path, steps: int, trials: int) -> float:
    cmd = [sys.executable, "-m", "tuner", workload, "--task", task, "--space", "quick", "--trials", str(trials),
           "--steps", str(steps), "--out", str(out), "--no-warm-start", "--no-progress"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    return time.perf_counter() - start


def clear_confirmation(out: Path) -> None:
    """Forget the stored confirmation, so the same command confirms again in fresh processes."""
    db = out / "study.db"
    summaries = optuna.study.get_all_study_summaries(f"sqlite:///{db}")
    study = optuna.load_study(study_name=summaries[0].study_name, storage=f"sqlite:///{db}")
    study.set_user_attr("confirmation", None)


def stated(best: dict) -> dict:
    m = best.get("measured") or {}
    label = m.get("best_compiled") if best.get("verdict") != "compile" else _label(best.get("config") or {})
    return {"verdict": best.get("verdict"), "label": label, "speedup": m.get("speedup"),
            "interval": m.get("speedup_interval"), "confirmed": m.get("confirmed"), "reason": m.get("reason"),
            "rounds": m.get("confirm_rounds"), "saving_interval_s": m.get("saving_interval_s")}


def _label(cfg: dict) -> str:
    options = " ".join(f"{k}={v}" for k, v in sorted((cfg.get("options") or {}).items()))
    return f"{cfg.get('target', 'whole')}/{cfg.get('backend')}/{cfg.get('mode') or 'default'} {options}".strip()


def remeasure(workload: str, task: str, results: Path, rounds: int, out_json: Path) -> dict:
    cmd = [sys.executable, str(ROOT / "benchmarks" / "remeasure.py"), workload, "--results", str(results),
           "--rounds", str(rounds), "--task", task, "--json", str(out_json)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0 or not out_json.exists():
        return {"error": proc.stderr[-500:]}
    return json.loads(out_json.read_text())


def calibrate(spec: str, args: argparse.Namespace) -> dict:
    workload, _, task = spec.partition(":")
    task = task or "infer"
    name = f"{Path(workload).stem}-{task}"
    out = args.out / name
    shutil.rmtree(out, ignore_errors=True)
    runs, walls = [], []
    for r in range(args.repeats):
        if r:
            clear_confirmation(out)
        walls.append(tune(workload, task, out, args.steps, args.trials))
        best = yaml.safe_load((out / "best_config.yaml").read_text())
        shutil.copy(out / "best_config.yaml", out / f"best_config.run{r}.yaml")
        runs.append(stated(best))
        print(f"  {name} run {r + 1}/{args.repeats}: {runs[-1]['verdict']}, {runs[-1]['label']} "
              f"{runs[-1]['speedup']} {runs[-1]['interval']} ({walls[-1]:.0f} s)", flush=True)
    # one re-measure per quoted config: a results folder whose best_config.yaml quotes it
    remeasured = {}
    for r, run in enumerate(runs):
        if run["label"] in remeasured or not run["label"]:
            continue
        folder = out / f"quote{r}"
        folder.mkdir(exist_ok=True)
        for f in ("trials.csv",):
            if (out / f).exists():
                shutil.copy(out / f, folder / f)
        shutil.copy(out / f"best_config.run{r}.yaml", folder / "best_config.yaml")
        remeasured[run["label"]] = remeasure(workload, task, folder, args.remeasure_rounds, folder / "remeasure.json")
        got = remeasured[run["label"]]
        print(f"  {name} re-measured {run['label']}: {got.get('remeasured_speedup')} {got.get('speedup_interval')}",
              flush=True)
    for run in runs:
        got = remeasured.get(run["label"]) or {}
        point, theirs = got.get("remeasured_speedup"), got.get("speedup_interval")
        lo, hi = run["interval"] or (None, None)
        run["remeasured"] = point
        run["remeasured_interval"] = theirs
        run["holds"] = None if point is None or lo is None or hi is None else lo <= point <= hi
        run["overlaps"] = None if not theirs or lo is None or hi is None else not (hi < theirs[0] or theirs[1] < lo)
    verdicts = collections.Counter(r["verdict"] for r in runs)
    held = [r["holds"] for r in runs if r["holds"] is not None]
    overlapped = [r["overlaps"] for r in runs if r["overlaps"] is not None]
    return {"workload": name, "runs": runs, "verdicts": dict(verdicts),
            "repeat_rate": verdicts.most_common(1)[0][1] / len(runs),
            "held": sum(held), "checked": len(held), "overlapped": sum(overlapped), "overlap_checked": len(overlapped),
            "median_wall_s": sorted(walls)[len(walls) // 2]}


def table(rows: list[dict], args: argparse.Namespace) -> str:
    import torch

    lines = [f"Measured on {platform.processor() or platform.machine()}, torch {torch.__version__}, "
             f"{datetime.date.today().isoformat()}; {args.repeats} runs per workload (--steps {args.steps}), "
             f"re-measured over {args.remeasure_rounds} rounds. `python benchmarks/calibration.py` rebuilds it.", "",
             "| workload | runs | verdicts | verdict repeats | stated 95 % interval holds the re-measure | "
             "intervals overlap | time per confirmation run |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        verdicts = ", ".join(f"{k} x{n}" for k, n in sorted(r["verdicts"].items()))
        lines.append(f"| {r['workload']} | {len(r['runs'])} | {verdicts} | {r['repeat_rate']:.0%} | "
                     f"{r['held']} of {r['checked']} | {r['overlapped']} of {r['overlap_checked']} | "
                     f"{r['median_wall_s']:.0f} s |")
    held = sum(r["held"] for r in rows)
    checked = sum(r["checked"] for r in rows)
    lines += ["", f"In all: the stated interval held the re-measured speedup in {held} of {checked} runs"
              + (f" ({held / checked:.0%})." if checked else ".")]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("workloads", nargs="*", default=DEFAULT)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--remeasure-rounds", type=int, default=4)
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--out", type=Path, default=Path("/tmp/calibration"))
    p.add_argument("--json", type=Path)
    p.add_argument("--write-docs", action="store_true")
    args = p.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rows = []
    for spec in args.workloads:
        print(f"calibrating {spec} ...", flush=True)
        rows.append(calibrate(spec, args))
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1, default=str))
    text = table(rows, args)
    print(text)
    if args.write_docs:
        page = DOCS.read_text()
        head, _, rest = page.partition(MARK[0])
        _, _, tail = rest.partition(MARK[1])
        if not rest:
            head, tail = page.rstrip() + "\n\n## Calibration: how sure the verdicts are\n\n", "\n"
        DOCS.write_text(f"{head}{MARK[0]}\n{text}\n{MARK[1]}{tail}")


if __name__ == "__main__":
    main()
