"""Is a compiled model safe to call from several threads at once?

torch.compile's known trouble with threads is not crashes: its config is thread-local, the
first call from several threads compiles the same frame several times, and duplicate compiles
can use up the recompile budget, after which calls run eagerly without a word. This check runs
the chosen config from N threads at once on ONE model object (first calls included, since that
is where threads collide), compares every output with eager, and counts compiles.
"""
from __future__ import annotations

import threading
from typing import Any

CALLS_PER_THREAD = 20


def measure_threads(spec, rec) -> None:
    """In a child process (``mode="threads"``): N threads x CALLS_PER_THREAD calls."""
    import copy

    import torch
    from torch._dynamo.utils import counters

    from .apply import apply_config
    from .config import CompileConfig
    from .correctness import TOLERANCE, compare
    from .diagnose import DynamoLogCapture
    from .devices import to_device
    from .workload import call_model, load_workload

    n = int(spec.check_threads or 2)
    workload = load_workload(spec.workload)
    model = workload.make_model().to(spec.device).eval()
    eager = copy.deepcopy(model)
    inputs = [to_device(x, spec.device) for x in (workload.make_schedule() or [workload.make_inputs()])]
    with torch.no_grad():
        expected = [call_model(eager, x) for x in inputs]
    config = CompileConfig.from_dict(spec.config)
    apply_config(model, config)
    counters.clear()
    mismatches, errors = [], []
    barrier = threading.Barrier(n)
    lock = threading.Lock()

    def worker(index: int) -> None:
        barrier.wait()  # all threads make their first call together
        for call in range(CALLS_PER_THREAD):
            k = (index + call) % len(inputs)
            try:
                with torch.no_grad():
                    out = call_model(model, inputs[k])
                problem = compare(expected[k], out, tol=TOLERANCE["infer"])
            except Exception as exc:  # an error in a thread is a finding, not a crash of the check
                with lock:
                    errors.append(f"thread {index}, call {call}: {type(exc).__name__}: {str(exc)[:200]}")
                continue
            if problem:
                with lock:
                    mismatches.append(f"thread {index}, call {call}, input {k}: {problem}")

    with DynamoLogCapture() as logs:
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    distinct_shapes = len({repr([getattr(v, "shape", v) for v in (x.values() if isinstance(x, dict) else x)])
                           for x in inputs})
    rec.update(thread_check=verdict({
        "threads": n,
        "calls": n * CALLS_PER_THREAD,
        "mismatches": len(mismatches),
        "errors": len(errors),
        "examples": (mismatches + errors)[:5],
        "frames_compiled": int(counters["frames"].get("total", 0)),
        "graphs": int(counters["stats"].get("unique_graphs", 0)),
        "distinct_input_shapes": distinct_shapes,
        "recompile_limit_hit": logs.recompile_limit_hit,
        "config": config.describe(),
    }), status="ok", stage="done")


def verdict(found: dict[str, Any]) -> dict[str, Any]:
    if found["mismatches"] or found["errors"]:
        found["verdict"] = "unsafe"
        found["advice"] = ("outputs differed from eager or calls failed under threads: give each thread its own "
                           "compiled model, or serve from several processes")
    elif found["recompile_limit_hit"]:
        found["verdict"] = "unsafe"
        found["advice"] = ("threads used up the recompile limit with duplicate compiles; later calls ran "
                           "eagerly: warm the model up on one thread first, or use dynamic=True")
    else:
        found["verdict"] = "safe"
        dup = found["frames_compiled"] > found["distinct_input_shapes"] and found["config"] != "eager (no compile)"
        found["advice"] = ("correct from several threads; first calls compiled the same frame more than once, "
                           "so warm it up on one thread before serving" if dup else
                           "correct from several threads")
    return found


def check_threads(workload_path: str, config, threads: int = 4, *, device: str = "cpu",
                  torch_threads: int = 1, timeout: float = 900.0, work_dir=None) -> dict[str, Any]:
    """Run the thread check in a fresh process; returns the findings with a ``verdict``.

    Example:
        >>> found = tuner.check_threads("examples/mlp.py", "results/mlp/best_config.yaml", threads=4)  # doctest: +SKIP
        >>> found["verdict"]  # doctest: +SKIP
        'safe'
    """
    import tempfile
    from pathlib import Path

    from .apply import coerce_config
    from .measure import TrialSpec
    from .trial import run_isolated

    cfg = coerce_config(config)
    spec = TrialSpec(workload=str(Path(workload_path).resolve()), config=cfg.to_dict(), device=device,
                     threads=torch_threads, mode="threads", check_threads=threads)
    with tempfile.TemporaryDirectory(prefix="compile-tune-threads-") as tmp:
        result = run_isolated(spec, timeout=timeout, work_dir=Path(work_dir or tmp))
    if result.get("status") != "ok":
        fail = result.get("failure") or {}
        return {"threads": threads, "verdict": "unsafe", "advice": f"the check failed: {fail.get('category')}",
                "examples": [fail.get("raw", "")[:300]]}
    return result["thread_check"]


def format_thread_check(found: dict[str, Any]) -> str:
    line = f"thread check ({found.get('threads')} threads at once, one model object): {found.get('verdict')}"
    if "calls" in found:
        line += (f" - {found['calls']} calls, {found['mismatches']} mismatches, {found['errors']} errors, "
                 f"{found['frames_compiled']} frame compiles for {found['distinct_input_shapes']} input shape(s)")
    lines = [line, f"  {found.get('advice', '')}"]
    lines += [f"  e.g. {e}" for e in found.get("examples", [])[:3]]
    return "\n".join(lines)
