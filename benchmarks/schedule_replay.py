"""Re-measure configs over a workload's input schedule, independently of the tuner.

Each config runs in fresh processes, applied with ``tuner.apply_config`` as a user applies it,
and replays the real run: ``input_schedule()`` cycled in order. Per process it reports the cold
first pass (compiles and recompiles included) and the steady mean step time over whole cycles.
Configs are interleaved round by round (A B C D, D C B A, ...) so machine drift hits all alike.
The tuner's own trial code is not used, so this checks its verdict.

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
    from tuner.workload import call_model, load_workload

    torch.set_num_threads(threads)
    w = load_workload(workload)
    model = w.make_model().eval()
    schedule = w.make_schedule()
    if config:
        model = tuner.apply_config(model, config)
    with torch.no_grad():
        start = time.perf_counter()
        for item in schedule:
            call_model(model, item)
        first_pass = time.perf_counter() - start
        for item in schedule:  # a steady warm-up cycle
            call_model(model, item)
        start = time.perf_counter()
        for _ in range(cycles):
            for item in schedule:
                call_model(model, item)
        steady = (time.perf_counter() - start) / (cycles * len(schedule))
    return {"first_pass_s": first_pass, "steady_step_s": steady, "threads": torch.get_num_threads()}


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
    configs = {"eager": {}}
    for d in args.dynamic:
        configs[f"dynamic={d}"] = {"target": args.target, "backend": args.backend, "dynamic": parse[d]}
    runs: dict[str, list[dict]] = {name: [] for name in configs}
    names = list(configs)
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else reversed(names):
            runs[name].append(run_child(args.workload, configs[name], args.cycles, threads))
            print(f"round {r + 1}: {name}: {runs[name][-1]}", flush=True)
    eager_step = statistics.median(x["steady_step_s"] for x in runs["eager"] if "steady_step_s" in x)
    print(f"\n{args.workload}, {threads} thread(s), {args.rounds} fresh processes per config, "
          f"schedule cycled {args.cycles} times")
    print(f"{'config':16s} {'steady step ms':>15s} {'vs eager':>9s} {'first pass s':>13s} {'total s @ steps':>16s}")
    totals = {}
    for name, results in runs.items():
        ok = [x for x in results if "steady_step_s" in x]
        if not ok:
            print(f"{name:16s} failed: {results[0].get('error')}")
            continue
        step = statistics.median(x["steady_step_s"] for x in ok)
        first = statistics.median(x["first_pass_s"] for x in ok)
        # the first pass costs its time instead of len(schedule) steady steps
        totals[name] = first + (args.steps - 0) * step
        print(f"{name:16s} {step * 1e3:15.3f} {eager_step / step:8.3f}x {first:13.2f} {totals[name]:16.1f}")
    fastest_step = min((n for n in totals if n != "eager"), key=lambda n: statistics.median(
        x["steady_step_s"] for x in runs[n] if "steady_step_s" in x), default=None)
    fastest_total = min(totals, key=totals.get) if totals else None
    print(f"fastest steady step: {fastest_step}; fastest total over {args.steps:,} steps: {fastest_total}")
    if args.results:
        import yaml

        best = yaml.safe_load((Path(args.results) / "best_config.yaml").read_text())
        cfg = best["config"]
        chosen = "eager" if best["verdict"] == "stay_eager" else f"dynamic={json.dumps(cfg.get('dynamic'))}"
        print(f"the tuner chose: {chosen} ({best['verdict']}); "
              f"{'agrees' if chosen == fastest_total else 'DISAGREES'} with the fastest total")


if __name__ == "__main__":
    main()
