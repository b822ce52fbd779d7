"""The first call of a fresh process three ways: cold compile, compile-tune's warm-start bundle, and
torch's ahead-of-time precompile, side by side.

- ``cold``: ``torch.compile(model, fullgraph=True)`` and its first call, on an empty inductor cache
  (what a run pays without a bundle);
- ``bundle``: the same, with the inductor cache directory and PyTorch's portable cache artifacts
  (``torch.compiler.load_cache_artifacts``) of a first compile restored first: what compile-tune's
  warm-start bundle gives ``apply_config`` (tuner/runtime/warmstart.py); Dynamo still traces;
- ``precompile``: ``torch.compile(model.forward, fullgraph=True).aot_compile(...)`` saved with
  ``save_compiled_function`` once, then ``torch.compiler.load_compiled_function`` and its first
  call, on an empty inductor cache: no tracing (torch's experimental AOT precompile);
- ``precompile+cache``: the same with the bundle's inductor cache directory restored first.

Each sample is a fresh process that builds the model, then times from before the compile (or
the load) to the end of its first call, and checks the output against eager. The three alternate
in rotating order, ``--rounds`` times; a ratio's 95 % interval is a t-interval on the rounds'
log ratios. Shares no code with compile-tune's measuring: its own processes, its own timing.

    python benchmarks/precompile.py examples/tiny_transformer.py --rounds 5
    .venv-torch-2.14.1/bin/python benchmarks/precompile.py examples/tiny_transformer.py --rounds 5

Run nothing else on the machine meanwhile.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODES = ("cold", "bundle", "precompile", "precompile+cache")


def _load(workload: str):
    spec = importlib.util.spec_from_file_location("workload", workload)
    module = importlib.util.module_from_spec(spec)
    sys.modules["workload"] = module  # the precompiled guards name the model's class by its module
    spec.loader.exec_module(module)
    return module


def _build(workload: str):
    """The workload's model in eval mode and its example inputs as ``(args, kwargs)``."""
    import torch

    w = _load(workload)
    torch.manual_seed(0)
    model = w.build_model().eval()
    inputs = w.example_inputs()
    return model, *(((), dict(inputs)) if isinstance(inputs, dict) else (tuple(inputs), {}))


def child(mode: str, workload: str, work: Path) -> dict:
    """One fresh process: build, then time the compile (or load) and the first call."""
    import torch

    model, args, kwargs = _build(workload)
    with torch.no_grad():
        expected = model(*args, **kwargs)
    with torch.no_grad():
        if mode == "bundle":
            began = time.perf_counter()
            torch.compiler.load_cache_artifacts((work / "mega.bin").read_bytes())
            out = torch.compile(model, fullgraph=True)(*args, **kwargs)
        elif mode.startswith("precompile"):
            began = time.perf_counter()
            with open(work / "precompiled.bin", "rb") as f:
                fn = torch.compiler.load_compiled_function(f)
            out = fn(model, *args, **kwargs)
        else:
            began = time.perf_counter()
            out = torch.compile(model, fullgraph=True)(*args, **kwargs)
        first = time.perf_counter() - began
    match = torch.allclose(_tensor(out), _tensor(expected), atol=1e-4, rtol=1e-4)
    return {"mode": mode, "first_call_s": first, "match": bool(match)}


def _tensor(out):
    import torch

    if isinstance(out, torch.Tensor):
        return out
    return next(v for v in (out.values() if isinstance(out, dict) else out) if isinstance(v, torch.Tensor))


def prepare(workload: str, work: Path) -> None:
    """Once: a cold compile that leaves the bundle (cache directory + portable artifacts), and the
    precompiled function."""
    import torch

    model, args, kwargs = _build(workload)
    with torch.no_grad():
        torch.compile(model, fullgraph=True)(*args, **kwargs)
        artifacts = torch.compiler.save_cache_artifacts()
        assert artifacts is not None, "no cache artifacts were saved"
        (work / "mega.bin").write_bytes(artifacts[0])
        compiled = torch.compile(model.forward, fullgraph=True).aot_compile((args, kwargs))
        compiled.save_compiled_function(str(work / "precompiled.bin"))


def run_child(argv: list[str], cache: Path, threads: int) -> dict:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache), OMP_NUM_THREADS=str(threads))
    done = subprocess.run([sys.executable, __file__, *argv], capture_output=True, text=True, env=env, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"{argv[:2]} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def interval(ratios: list[float]) -> tuple[float, float, float]:
    """Geometric mean of ``ratios`` with its 95 % t-interval (rounds as samples)."""
    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), math.nan, math.nan
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tuner.decide.stats import t_quantile  # the t quantile only: no measuring code

    half = t_quantile(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workload")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--child", choices=(*MODES, "prepare"), help=argparse.SUPPRESS)
    p.add_argument("--work", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        work = Path(a.work)
        if a.child == "prepare":
            prepare(a.workload, work)
            print(json.dumps({"prepared": True}))
        else:
            print(json.dumps(child(a.child, a.workload, work)))
        return 0
    import torch

    root = Path(tempfile.mkdtemp(prefix="precompile-"))
    work, bundle_cache = root / "work", root / "bundle-cache"
    work.mkdir()
    run_child([a.workload, "--child", "prepare", "--work", str(work)], bundle_cache, a.threads)
    samples: dict[str, list[float]] = {m: [] for m in MODES}
    for r in range(a.rounds):
        for mode in MODES[r % len(MODES):] + MODES[:r % len(MODES)]:  # rotate who goes first
            cache = root / f"cache-{r}-{mode}"
            if mode in ("bundle", "precompile+cache"):
                shutil.copytree(bundle_cache, cache)
            else:
                cache.mkdir()
            got = run_child([a.workload, "--child", mode, "--work", str(work)], cache, a.threads)
            assert got["match"], f"{mode}: first call differs from eager"
            samples[mode].append(got["first_call_s"])
            shutil.rmtree(cache, ignore_errors=True)
            print(f"round {r + 1} {mode}: {got['first_call_s']:.2f} s", flush=True)
    shutil.rmtree(root, ignore_errors=True)
    cpu = platform.processor() or platform.machine()
    print(f"\n{a.workload}, torch {torch.__version__}, {a.threads} threads, {cpu}, {os.cpu_count()} cores, "
          f"{a.rounds} rounds of fresh processes (median first call; ratio's 95 % interval):")
    for mode in MODES:
        print(f"  {mode:10s} {statistics.median(samples[mode]):7.2f} s  "
              f"({', '.join(f'{s:.2f}' for s in samples[mode])})")
    for mode in MODES[1:]:
        g, lo, hi = interval([c / s for c, s in zip(samples["cold"], samples[mode])])
        print(f"  cold over {mode}: {g:.1f}x ({lo:.1f}x-{hi:.1f}x)")
    for mode in MODES[2:]:
        g, lo, hi = interval([b / s for b, s in zip(samples["bundle"], samples[mode])])
        print(f"  bundle over {mode}: {g:.2f}x ({lo:.2f}x-{hi:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
