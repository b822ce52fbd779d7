"""Is eager timed inside a tuner trial the eager a user runs? Four ways of timing eager, side by side.

Every speedup of a search trial is eager's step over the config's step, both timed in the
trial's own process, which also holds the compiled model; confirmation times eager alone in
trial processes of its own; benchmarks/remeasure.py times eager in a fresh interpreter with its
own loop. If these disagree by more than two fresh processes of one kind do, the tuner's figures
are biased. Per round, in an order reversed every other round:

- ``trial eager``: the tuner's own trial of eager alone (``EAGER``), forked from its launcher as in a run;
- ``trial beside``: the tuner's trial of plain torch.compile: eager timed beside the compiled model;
- ``trial eager fresh``: the tuner's eager trial in a fresh interpreter (``COMPILE_TUNE_FORK_SERVER=0``);
- ``alone`` and ``alone2``: eager in a fresh interpreter with a loop of its own (no tuner code but
  the workload loader): the reference, and its pair as the noise floor.

    python benchmarks/eager_bias.py benchmarks/zoo/resnet50.py --rounds 3 [--task train] [--threads 2]

Prints each kind's median step and its ratio to ``alone``. Run nothing else on the machine meanwhile.
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
KINDS = ("alone", "trial eager", "trial beside", "trial eager fresh", "alone2")


def alone_child(workload: str, task: str, threads: int, steps: int) -> None:
    """A fresh interpreter: the model alone, eager, its own loop; prints the median step (s)."""
    import torch

    sys.path.insert(0, str(ROOT))
    from tuner.user.workload import call_model, load_workload

    torch.set_num_threads(threads)
    w = load_workload(workload)
    torch.manual_seed(0)
    model, inputs = w.make_model(), w.make_inputs()
    if task == "train":
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step():
            opt.zero_grad(set_to_none=True)
            w.loss_fn(call_model(model, inputs), inputs).backward()
            opt.step()
    else:
        model.eval()

        def step():
            with torch.no_grad():
                call_model(model, inputs)
    for _ in range(3):
        step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    print(json.dumps({"step_s": statistics.median(times)}))


def run_alone(a, steps: int) -> float | None:
    proc = subprocess.run([sys.executable, __file__, "--child", a.workload, a.task, str(a.threads), str(steps)],
                          capture_output=True, text=True)
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])["step_s"]
    except (IndexError, ValueError, KeyError):
        print(proc.stderr[-1500:], file=sys.stderr)
        return None


def run_trial(a, config: dict, work: Path, cache: Path, fresh: bool) -> dict:
    sys.path.insert(0, str(ROOT))
    from tuner.core.spec import TrialSpec
    from tuner.isolation.isolated import run_isolated

    spec = TrialSpec(workload=str(Path(a.workload).resolve()), config=config, task=a.task, threads=a.threads)
    if fresh:
        os.environ["COMPILE_TUNE_FORK_SERVER"] = "0"
    try:
        return run_isolated(spec, timeout=1800, work_dir=work, cache_dir=cache)
    finally:
        os.environ.pop("COMPILE_TUNE_FORK_SERVER", None)


def one(a, kind: str, work: Path, cache: Path, steps: int) -> float | None:
    if kind.startswith("alone"):
        return run_alone(a, steps)
    config = {"target": "whole", "backend": "inductor"} if kind == "trial beside" else {"target": "none"}
    result = run_trial(a, config, work, cache, fresh=kind == "trial eager fresh")
    if result.get("status") != "ok":
        print(f"  {kind}: {result.get('status')} {(result.get('failure') or {}).get('raw', '')[:200]}")
        return None
    return float(result["eager_step_s"])


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        alone_child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workload")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--task", choices=("infer", "train"), default="infer")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--steps", type=int, default=30, help="timed steps of each alone process [30]")
    p.add_argument("--json", help="write the figures here")
    a = p.parse_args()
    figures: dict[str, list[float]] = {k: [] for k in KINDS}
    with tempfile.TemporaryDirectory() as tmp:
        work, cache = Path(tmp) / "work", Path(tmp) / "cache"
        work.mkdir()
        cache.mkdir()
        for r in range(a.rounds):
            order = KINDS if r % 2 == 0 else tuple(reversed(KINDS))
            for kind in order:
                step = one(a, kind, work, cache, a.steps)
                if step is not None:
                    figures[kind].append(step)
                print(f"round {r + 1} {kind:18s} {'-' if step is None else f'{step * 1e3:.2f} ms'}", flush=True)
    return report(a, figures)


def report(a, figures: dict[str, list[float]]) -> int:
    ref_steps = figures["alone"] + figures["alone2"]
    ref = statistics.median(ref_steps) if ref_steps else None
    pairs = [abs(x / y - 1) for x, y in zip(figures["alone"], figures["alone2"])]
    import torch

    print(f"\n{a.workload}: task {a.task}, {a.threads} thread(s), torch {torch.__version__}, {a.rounds} round(s)")
    print(f"noise floor (alone vs alone2, max over rounds): {max(pairs) * 100:.1f} %" if pairs else "no noise floor")
    out = {"workload": a.workload, "threads": a.threads, "task": a.task, "noise_floor": max(pairs) if pairs else None}
    for kind in KINDS:
        steps = figures[kind]
        if not steps or ref is None:
            continue
        med = statistics.median(steps)
        print(f"  {kind:18s} median {med * 1e3:8.2f} ms  ({min(steps) * 1e3:.2f}-{max(steps) * 1e3:.2f})  "
              f"/ alone {med / ref:.3f}x")
        out[kind] = {"median_s": med, "over_alone": med / ref, "steps": steps}
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
