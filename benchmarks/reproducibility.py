"""Do two tuning runs with different seeds agree?

Runs the tuner twice on the same workload with different sampler seeds (confirmation on) and
compares the configs they recommend by their confirmed totals:

    python benchmarks/reproducibility.py [examples/tiny_transformer.py] [--space quick] [--trials 5]

Target: confirmed totals differ by less than 5 %. Totals are compared both as measured and
relative to each run's own confirmed eager total: on a shared machine the eager step time itself
drifts 10-20 % between runs made minutes apart, and that drift is not the tuner's doing.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def run(workload: str, space: str, trials: int, steps: int, seed: int, confirm: int, out: Path) -> dict:
    cmd = [sys.executable, "-m", "tuner", workload, "--space", space, "--trials", str(trials), "--steps", str(steps),
           "--seed", str(seed), "--out", str(out), "--confirm", str(confirm), "--no-progress", "--no-warm-start",
           "--no-check"]
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
    tuned = yaml.safe_load((out / "best_config.yaml").read_text())
    tuned["wall_s"] = time.perf_counter() - start
    return tuned


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workload", nargs="?", default="examples/tiny_transformer.py")
    p.add_argument("--space", default="quick")
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--steps", type=int, default=100000)
    p.add_argument("--confirm", type=int, default=2)
    p.add_argument("--seeds", type=int, nargs=2, default=(1, 2))
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="repro-"))
    runs = []
    for seed in args.seeds:
        tuned = run(args.workload, args.space, args.trials, args.steps, seed, args.confirm, tmp / f"seed{seed}")
        m = tuned["measured"]
        label = " ".join(f"{k}={v}" for k, v in tuned["config"].items() if v not in (None, {}, False))
        runs.append(tuned)
        print(f"seed {seed}: {tuned['verdict']} {label}: total {m['total_time_s']:.1f} s "
              f"(eager {m.get('eager_total_time_s', m['total_time_s']):.1f} s, "
              f"confirmed={m.get('confirmed', False)}), run took {tuned['wall_s']:.0f} s")
    a, b = (r["measured"] for r in runs)
    absolute = abs(a["total_time_s"] - b["total_time_s"]) / min(a["total_time_s"], b["total_time_s"])
    rel_a = a["total_time_s"] / a.get("eager_total_time_s", a["total_time_s"])
    rel_b = b["total_time_s"] / b.get("eager_total_time_s", b["total_time_s"])
    relative = abs(rel_a - rel_b) / min(rel_a, rel_b)
    same = runs[0]["config"] == runs[1]["config"] and runs[0]["verdict"] == runs[1]["verdict"]
    print(f"same recommendation: {same}")
    print(f"confirmed totals differ by {absolute * 100:.1f} % as measured, {relative * 100:.1f} % relative to "
          f"each run's eager total (target < 5 %)")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
