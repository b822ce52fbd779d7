"""Does a run under --budget end within its budget?

Runs the tuner under a budget on a run that would take longer without one (the README example:
8 trials of the quick space on the tiny transformer, about 3-4 minutes unbounded here, with
confirmation and the warm start on) under 2 minutes, and reports the wall time of the whole command
against the budget, the phases it cut short or skipped, and where the time went:

    python benchmarks/budget.py [examples/tiny_transformer.py] [--budget 2m] [--space quick] [--trials 8] [--unbounded]

Target: wall time within 5 % of the budget (at most 1.05 x). ``--unbounded`` also runs the same
command without a budget, to show how long the run would otherwise take (much longer: every
trial, every confirmation round). Wall times are of the whole ``compile-tune`` process, start-up
included, as a user waits for it. Do not run it while other jobs load the machine: the budget
holds either way, but the figures then say little about a quiet one.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuner.core.durations import BUDGET_ATTR, budget_line, format_duration, parse_duration  # noqa: E402


def run(workload: str, space: str, trials: int, budget: str | None, out: Path) -> tuple[float, dict]:
    """Wall seconds of one ``compile-tune`` run, and its study's user attributes."""
    cmd = [sys.executable, "-m", "tuner", workload, "--space", space, "--trials", str(trials), "--out", str(out),
           "--no-progress"]
    if budget is not None:
        cmd += ["--budget", budget]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"exit {proc.returncode}: {' '.join(cmd[2:])}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    import optuna

    study = optuna.load_study(study_name=Path(workload).stem, storage=f"sqlite:///{out / 'study.db'}")
    # the terminal's line: the study keeps the figures the reports show, written before the last write ended
    timing = next((line for line in proc.stdout.splitlines() if line.startswith("time:")), "")
    return wall, {**study.user_attrs, "timing": timing}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workload", nargs="?", default="examples/tiny_transformer.py")
    p.add_argument("--budget", default="2m", help="the --budget to run under [2m]")
    p.add_argument("--space", default="quick")
    p.add_argument("--trials", type=int, default=8)
    p.add_argument("--unbounded", action="store_true", help="also run without a budget, for comparison")
    args = p.parse_args()
    budget_s = parse_duration(args.budget)
    tmp = Path(tempfile.mkdtemp(prefix="budget-"))
    try:
        wall, attrs = run(args.workload, args.space, args.trials, args.budget, tmp / "bounded")
        record = attrs.get(BUDGET_ATTR) or {}
        ratio = wall / budget_s
        print(f"budget {format_duration(budget_s)}: the run took {format_duration(wall)} ({wall:.1f} s), "
              f"{ratio:.3f} x the budget (target <= 1.05 x: {'met' if ratio <= 1.05 else 'MISSED'})")
        print(f"  {budget_line(record) if record else 'no budget record in the study'}")
        print(f"  cut short: {', '.join(f'{k} ({v})' for k, v in (record.get('cut_short') or {}).items()) or 'nothing'}"
              f"; skipped: {', '.join(record.get('skipped') or []) or 'nothing'}")
        print(f"  {attrs['timing']}")
        if args.unbounded:
            wall, attrs = run(args.workload, args.space, args.trials, None, tmp / "unbounded")
            print(f"without a budget the same run took {format_duration(wall)} ({wall:.1f} s)")
            print(f"  {attrs['timing']}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
