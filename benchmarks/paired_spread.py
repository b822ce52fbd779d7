"""How far apart are confirmation's paired processes? The tuner's own trial processes of a config
timing eager beside it, as confirmation runs them, one after another.

    python benchmarks/paired_spread.py WORKLOAD.py [--processes 8] [--share 0.25] [--threads 2]
        [--task infer|train] [--config '{"target": "whole", "backend": "inductor"}'] [--json out.json]

Why: the paired model of tuner/decide/stats.py takes each process's ratio of eager's mean step
to the config's as one sample; the interval's width, and so how many rounds a race needs, is
set by how far those ratios differ between processes. This prints each process's ratio and its
rounds' ratios (inside one process), then the spread of the log ratio between processes (the
model's sigma once paired) and inside them. The first process compiles cold and fills the cache
the others start warm from (confirmation's round 0 and the rounds after it); it is not counted.
Run nothing else on the machine meanwhile; a figure holds at the thread count, torch version
and machine it was measured on, which are printed with it.
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuner.core.spec import TrialSpec  # noqa: E402
from tuner.decide.confirm import CONFIRM_TIMING_SHARE  # noqa: E402
from tuner.decide.trial_runner import shared_timing  # noqa: E402
from tuner.isolation.isolated import run_isolated  # noqa: E402
from tuner.study import StudySettings  # noqa: E402


def spec(a) -> TrialSpec:
    """As tuner/decide/trial_runner.py asks for a confirmation process at ``--share`` of the timing."""
    rounds, seconds = shared_timing(StudySettings.rounds, StudySettings.measure_seconds, a.share)
    return TrialSpec(workload=str(Path(a.workload).resolve()), config=json.loads(a.config), task=a.task,
                     threads=a.threads, rounds=rounds, measure_seconds=seconds, heap="pinned", timing="beside",
                     check_correctness=False)


def sd(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workload")
    p.add_argument("--processes", type=int, default=8)
    p.add_argument("--share", type=float, default=CONFIRM_TIMING_SHARE, help="of the trial's timing [confirmation's]")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--task", choices=("infer", "train"), default="infer")
    p.add_argument("--config", default='{"target": "whole", "backend": "inductor"}', help="the config, as JSON")
    p.add_argument("--json", help="write the figures here")
    a = p.parse_args()
    ratios: list[float] = []
    squares, df = 0.0, 0  # of each round's log ratio about its process's mean: the spread inside one
    with tempfile.TemporaryDirectory() as tmp:
        work, cache = Path(tmp) / "work", Path(tmp) / "cache"
        work.mkdir()
        cache.mkdir()
        for i in range(a.processes + 1):
            r = run_isolated(spec(a), timeout=3600, work_dir=work, cache_dir=cache)
            if r.get("status") != "ok" or not r.get("eager_step_mean_s"):
                print(f"process {i}: {r.get('status')} {(r.get('failure') or {}).get('raw', '')[:200]}")
                continue
            ratio = r["eager_step_mean_s"] / r["step_mean_s"]
            rounds = [x for x in r.get("round_ratios") or [] if x]
            print(f"process {i}{' (cold, not counted)' if i == 0 else ''}: {ratio:.4f}x, rounds "
                  + ", ".join(f"{x:.3f}x" for x in rounds), flush=True)
            if i:
                ratios.append(ratio)
                logs = [math.log(x) for x in rounds]
                squares += sum((x - statistics.mean(logs)) ** 2 for x in logs)
                df += max(len(logs) - 1, 0)
    import torch

    between, inside = sd([math.log(x) for x in ratios]), math.sqrt(squares / df) if df else 0.0
    print(f"\n{a.workload}: {len(ratios)} processes, share {a.share}, {a.threads} thread(s), "
          f"torch {torch.__version__}, {platform.processor() or platform.machine()}")
    print(f"speedup (mean of processes) {statistics.mean(ratios):.4f}x; between processes {between:.2%} (log sd); "
          f"a round inside one process {inside:.2%}")
    if a.json:
        Path(a.json).write_text(json.dumps({"ratios": ratios, "between": between, "inside": inside,
                                            "share": a.share, "threads": a.threads, "torch": torch.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
