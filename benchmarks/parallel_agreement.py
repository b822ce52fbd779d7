"""Do trials that compiled in parallel (``--parallel 2``) time the same as trials measured alone?

Tunes the same workload over every config of a space twice in one run, alone (``--parallel 1``)
and in two lanes (``--parallel 2``), at one thread so that a core is left to compile on, and
prints per config the step time, speedup and compile time of both, their differences, and each
run's wall time.

    python benchmarks/parallel_agreement.py [examples/tiny_transformer.py] [--space quick]

Read the differences against the noise of one config between fresh processes on this machine:
10-20 % for a step time, a few % for a compile time (README, "Measuring"). On a 2-core machine a
lane compiles on one core instead of two, so its compile times read high: the step times and
speedups are what the timing slot keeps clean.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def tune(workload: str, space: str, lanes: int, out: Path) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "tuner", workload, "--space", space, "--trials", "100", "--steps", "100000",
           "--threads", "1", "--parallel", str(lanes), "--out", str(out), "--no-progress", "--confirm", "0",
           "--no-warm-start", "--no-check"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"exit {proc.returncode}: {' '.join(cmd[2:])}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name=Path(workload).stem, storage=f"sqlite:///{out / 'study.db'}")
    by_config = {t.user_attrs["config_label"]: t.user_attrs for t in study.get_trials(deepcopy=False)
                 if t.state.name == "COMPLETE" and t.user_attrs.get("duplicate_of") is None}
    return wall, by_config


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workload", nargs="?", default="examples/tiny_transformer.py")
    p.add_argument("--space", default="quick")
    args = p.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="parallel-agreement-"))
    try:
        alone_wall, alone = tune(args.workload, args.space, 1, scratch / "alone")
        lanes_wall, lanes = tune(args.workload, args.space, 2, scratch / "lanes")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"{args.workload}, space {args.space}, 1 thread: alone {alone_wall:.0f} s, two lanes {lanes_wall:.0f} s "
          f"({lanes_wall / alone_wall:.2f}x)")
    print(f"{'config':44} {'step ms alone/lanes':>21} {'speedup alone/lanes':>21} {'compile s alone/lanes':>23}")
    step_diffs, speedup_diffs, compile_diffs = [], [], []
    for label in sorted(set(alone) & set(lanes)):
        a, b = alone[label], lanes[label]
        step_diffs.append(b["step_s"] / a["step_s"] - 1)
        speedup_diffs.append(b["speedup"] / a["speedup"] - 1)
        if a.get("compile_time_s"):
            compile_diffs.append(b["compile_time_s"] / a["compile_time_s"] - 1)
        print(f"{label[:44]:44} {a['step_s'] * 1e3:9.3f} /{b['step_s'] * 1e3:9.3f} {a['speedup']:9.2f}x/{b['speedup']:9.2f}x "
              f"{a['compile_time_s']:10.1f} /{b['compile_time_s']:10.1f}")
    for name, diffs in (("step time", step_diffs), ("speedup", speedup_diffs), ("compile time", compile_diffs)):
        if diffs:
            print(f"{name}: lanes vs alone, median {statistics.median(diffs):+.1%}, "
                  f"largest {max(diffs, key=abs):+.1%} over {len(diffs)} config(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
