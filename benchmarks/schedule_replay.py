"""Re-measure configs over a workload's input schedule, independently of the tuner.

Each config runs in fresh processes, applied with ``tuner.apply_config`` as a user applies it,
and replays the real run: ``input_schedule()`` cycled in order. Per process it reports the cold
first pass (compiles and recompiles included) and the steady speedup: whole cycles of the config
alternated with whole cycles of eager in the same process. Configs are interleaved round by
round (A B C, C B A, ...) so machine drift hits all alike. The tuner's trial code is not used,
so this checks its verdict.

    python benchmarks/schedule_replay.py examples/hf_bert_requests.py --dynamic null true false \\
        --results results/hf_bert_requests --rounds 3
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(workload: str, config: dict, cycles: int, threads: int) -> dict:
    import torch

    sys.path.insert(0, str(ROOT))
    import tuner
    from tuner.core.targets import target_modules
    from tuner.user.workload import call_model, load_workload

    torch.set_num_threads(threads)
    w = load_workload(workload)
    model = w.make_model().eval()
    schedule = w.make_schedule()
    regions = [m for _, m in target_modules(model, config["target"])] if config else []
    if config:
        model = tuner.apply_config(model, config)
    compiled = [m.__dict__["forward"] for m in regions]

    def cycle(use_compiled: bool) -> float:
        # Eager cycles call the model's own forward: the compiled one is taken off for the cycle.
        for m, f in zip(regions, compiled):
            if use_compiled:
                m.forward = f
            else:
                m.__dict__.pop("forward", None)
        start = time.perf_counter()
        for item in schedule:
            call_model(model, item)
        return time.perf_counter() - start

    with torch.no_grad():
        first_pass = cycle(True)
        cycle(True), cycle(False)  # a steady warm-up cycle of each
        # Cycles of the config and of eager alternate in this process, so the ratio is measured
        # side by side; the absolute step times drift 10-20 % from process to process.
        times = {True: [], False: []}
        for i in range(cycles):
            for use_compiled in ((True, False) if i % 2 == 0 else (False, True)):
                times[use_compiled].append(cycle(use_compiled))
    n = len(schedule)
    return {"first_pass_s": first_pass, "steady_step_s": statistics.median(times[True]) / n,
            "eager_step_s": statistics.median(times[False]) / n,
            "speedup": statistics.median(times[False]) / statistics.median(times[True]),
            "threads": torch.get_num_threads()}


def run_child(workload: str, config: dict, cycles: int, threads: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="replay-cache-") as cache:  # a cold compile, like a first run
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache, OMP_NUM_THREADS=str(threads))
        out = subprocess.run([sys.executable, __file__, "--child", workload, json.dumps(config), str(cycles),
                              str(threads)], capture_output=True, text=True, env=env, timeout=1800)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))))
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workload")
    p.add_argument("--dynamic", nargs="+", default=["null", "true", "false"])
    p.add_argument("--target", default="whole")
    p.add_argument("--backend", default="inductor")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cycles", type=int, default=20)
    p.add_argument("--threads", type=int, default=None, help="default: what a fresh process gets")
    p.add_argument("--steps", type=int, default=100_000, help="steps of the real run, for total time")
    p.add_argument("--results", help="a tuner output folder: compare with its best_config.yaml")
    args = p.parse_args()
    threads = args.threads
    if threads is None:
        threads = int(subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                                     capture_output=True, text=True).stdout.strip())
    parse = {"null": None, "true": True, "false": False}
    configs = {}
    for d in args.dynamic:
        configs[f"dynamic={d}"] = {"target": args.target, "backend": args.backend, "dynamic": parse[d]}
    runs: dict[str, list[dict]] = {name: [] for name in configs}
    names = list(configs)
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else reversed(names):
            runs[name].append(run_child(args.workload, configs[name], args.cycles, threads))
            print(f"round {r + 1}: {name}: {runs[name][-1]}", flush=True)
    eager_step = statistics.median(x["eager_step_s"] for r in runs.values() for x in r if "eager_step_s" in x)
    print(f"\n{args.workload}, {threads} thread(s), {args.rounds} fresh processes per config, each timing "
          f"{args.cycles} cycles of the schedule against eager cycles in the same process")
    print(f"{'config':16s} {'speedup':>8s} {'range':>15s} {'first pass s':>13s} {'total s @ steps':>16s}")
    totals = {"eager": args.steps * eager_step}
    speedups = {}
    for name, results in runs.items():
        ok = [x for x in results if "speedup" in x]
        if not ok:
            print(f"{name:16s} failed: {results[0].get('error')}")
            continue
        speedups[name] = statistics.median(x["speedup"] for x in ok)
        first = statistics.median(x["first_pass_s"] for x in ok)
        lo, hi = min(x["speedup"] for x in ok), max(x["speedup"] for x in ok)
        # total = the first pass (compiles included) + the rest of the steps at the steady speed
        totals[name] = first + args.steps * eager_step / speedups[name]
        print(f"{name:16s} {speedups[name]:7.3f}x {lo:7.3f}-{hi:.3f}x {first:13.2f} {totals[name]:16.1f}")
    print(f"{'eager':16s} {1.0:7.3f}x {'':>15s} {0.0:13.2f} {totals['eager']:16.1f}")
    fastest_total = min(totals, key=totals.get)
    print(f"fastest steady step: {max(speedups, key=speedups.get) if speedups else None}; "
          f"fastest total over {args.steps:,} steps: {fastest_total}")
    ranges = {n: (min(x["speedup"] for x in runs[n] if "speedup" in x), max(x["speedup"] for x in runs[n]
                                                                             if "speedup" in x)) for n in speedups}
    if fastest_total in ranges:
        ties = [n for n in ranges if n != fastest_total and ranges[n][1] >= ranges[fastest_total][0]]
        if ties:
            print(f"inside the noise: the speedup ranges of {fastest_total} and {', '.join(ties)} overlap")
    if args.results:
        import yaml

        best = yaml.safe_load((Path(args.results) / "best_config.yaml").read_text())
        cfg = best["config"]
        chosen = "eager" if best["verdict"] == "stay_eager" else f"dynamic={json.dumps(cfg.get('dynamic'))}"
        print(f"the tuner chose: {chosen} ({best['verdict']}); "
              f"{'agrees' if chosen == fastest_total else 'DISAGREES'} with the fastest total")


if __name__ == "__main__":
    main()
