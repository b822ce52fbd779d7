"""How much of the tuner's wall time is measurement, and where the rest goes.

Runs one real tuning run, as a default run makes it (the model check on), and compares its wall
time with the time spent inside trial processes measuring (compile + timing + checks), read back
from the study:

    python benchmarks/overhead.py [examples/tiny_transformer.py] [--space quick] [--trials 4] [--no-check]

Target: wall time <= 1.10 x the time inside trial processes, the model check's process counted as
overhead (it traces the model for the report's graph breaks and dynamic shapes: measurement of
a kind, so the ratio with it counted as measurement is printed too). The rest is split into
process start-up and imports (trials fork from a launcher that imported torch once), the
parent's own work (Optuna storage, sampling, writing reports), and when it happens: before the
first trial, between trials, after the last. The part before and after is fixed per run (about
3 s on 2 cores: importing torch, Dynamo and inductor once, the reports), so a short run shows a
larger ratio: ``examples/mlp.py --no-check`` measures for about 15 s.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workload", nargs="?", default="examples/tiny_transformer.py")
    p.add_argument("--space", default="quick")
    p.add_argument("--trials", type=int, default=4)
    p.add_argument("--steps", type=int, default=100000)
    p.add_argument("--no-check", dest="check", action="store_false", help="leave out the model check (a run's default)")
    args = p.parse_args()
    out = Path(tempfile.mkdtemp(prefix="overhead-"))
    cmd = [sys.executable, "-m", "tuner", args.workload, "--space", args.space, "--trials", str(args.trials),
           "--steps", str(args.steps), "--out", str(out), "--no-progress", "--confirm", "0", "--no-warm-start"]
    if not args.check:
        cmd.append("--no-check")
    began = datetime.now()  # naive local time, as Optuna stamps trials
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
    wall = time.perf_counter() - start
    ended = datetime.now()

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name=Path(args.workload).stem, storage=f"sqlite:///{out / 'study.db'}")
    measuring = imports = process = warm = 0.0
    n = 0
    for t in study.get_trials(deepcopy=False):
        a = t.user_attrs
        if a.get("duplicate_of") is not None or "trial_wall_s" not in a:
            continue
        n += 1
        child, child_import = float(a.get("child_wall_s") or 0.0), float(a.get("child_import_s") or 0.0)
        measuring += child - child_import
        imports += child_import
        process += float(a["trial_wall_s"]) - child
        warm += float(a.get("warm_compile_wall_s") or 0.0)
    check = (study.user_attrs.get("model_check") or {}).get("seconds", 0.0) if args.check else 0.0
    parent = wall - measuring - imports - process - warm - check
    print(f"run: {' '.join(cmd[2:])}")
    print(f"trial processes: {n}; tuner wall time {wall:.1f} s")
    print(f"  measuring inside trials (compile, timing, checks): {measuring:6.1f} s")
    print(f"  warm-cache compile processes (part of the product): {warm:6.1f} s")
    print(f"  imports inside trial processes (torch):            {imports:6.1f} s")
    print(f"  process start-up and result hand-off:              {process:6.1f} s")
    print(f"  model check process (graph breaks, dynamic shapes): {check:6.1f} s")
    print(f"  parent: start-up, storage, sampling, reports:      {parent:6.1f} s")
    stamped = sorted((t.datetime_start, t.datetime_complete) for t in study.get_trials(deepcopy=False)
                     if t.datetime_start and t.datetime_complete and t.user_attrs.get("duplicate_of") is None)
    if stamped:
        before = (stamped[0][0] - began).total_seconds()
        after = (ended - stamped[-1][1]).total_seconds()
        between = sum(max(0.0, (b[0] - a[1]).total_seconds()) for a, b in zip(stamped, stamped[1:]))
        print(f"  of the wall time: {before:.1f} s before the first trial (start-up, the model check), "
              f"{between:.1f} s between trials ({between / max(1, len(stamped) - 1):.2f} s each), "
              f"{after:.1f} s after the last (reports, exit)")
    measured = measuring + warm
    print(f"wall / measurement = {wall / measured:.3f} (target <= 1.10)"
          + (f"; with the model check counted as measurement: {wall / (measured + check):.3f}" if check else ""))
    shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
