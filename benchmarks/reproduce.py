"""Does the tuned config's claimed speedup hold when a user applies it?

Builds the workload's model in fresh processes (one per repeat), applies
``best_config.yaml`` with ``tuner.apply_config`` exactly as training code would, and times
eager and applied steps alternately, round by round. Prints the measured speedup next to the
one the tuner claimed.

    python benchmarks/reproduce.py examples/tiny_transformer.py results/tiny_transformer [--repeats 3]
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(workload_path: str, config_path: str, threads: int, rounds: int, steps: int) -> dict:
    import torch

    sys.path.insert(0, str(ROOT))
    import tuner
    from tuner.user.workload import call_model, load_workload

    torch.set_num_threads(threads)
    w = load_workload(workload_path)
    model = w.make_model().eval()
    inputs = w.make_inputs()
    eager = copy.deepcopy(model)
    t = time.perf_counter()
    applied = tuner.apply_config(model, config_path)
    with torch.no_grad():
        call_model(applied, inputs)
        first_call = time.perf_counter() - t
        for _ in range(3):
            call_model(applied, inputs)
            call_model(eager, inputs)
        eager_times, applied_times = [], []
        for r in range(rounds):
            order = [(eager, eager_times), (applied, applied_times)]
            for m, sink in order if r % 2 == 0 else reversed(order):
                for _ in range(steps):
                    s = time.perf_counter()
                    call_model(m, inputs)
                    sink.append(time.perf_counter() - s)
    return {
        "first_call_s": first_call,
        "eager_ms": statistics.median(eager_times) * 1e3,
        "applied_ms": statistics.median(applied_times) * 1e3,
        "speedup": statistics.median(eager_times) / statistics.median(applied_times),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workload")
    p.add_argument("results", help="the tuning run's output folder (holds best_config.yaml)")
    p.add_argument("--repeats", type=int, default=3, help="fresh processes to measure in")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--steps", type=int, default=30, help="steps per round and model")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    import yaml

    config_path = str(Path(args.results) / "best_config.yaml")
    tuned = yaml.safe_load(Path(config_path).read_text())
    threads = int(tuned.get("tuned_on", {}).get("threads", 1))
    if args.child:
        print(json.dumps(child(args.workload, config_path, threads, args.rounds, args.steps)))
        return 0
    claimed = (tuned.get("measured") or {}).get("speedup_vs_eager", 1.0)
    print(f"config: {tuned['config']} (verdict {tuned['verdict']}), threads={threads}")
    speedups = []
    for i in range(args.repeats):
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=tempfile.mkdtemp(prefix="reproduce-"),
                   OMP_NUM_THREADS=str(threads), PYTHONPATH=str(ROOT))
        out = subprocess.run([sys.executable, __file__, args.workload, args.results, "--child",
                              "--rounds", str(args.rounds), "--steps", str(args.steps)],
                             capture_output=True, text=True, env=env, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        speedups.append(r["speedup"])
        print(f"  process {i + 1}: eager {r['eager_ms']:.3f} ms, applied {r['applied_ms']:.3f} ms, "
              f"speedup {r['speedup']:.3f}x, first call {r['first_call_s']:.1f} s")
    measured = statistics.median(speedups)
    print(f"claimed speedup {claimed:.3f}x, reproduced {measured:.3f}x "
          f"(median of {len(speedups)} processes), ratio reproduced/claimed {measured / claimed:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
