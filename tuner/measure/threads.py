"""Inside the trial process (``mode="threads"``): is a compiled model safe to call from several threads at once?

torch.compile's known trouble with threads is not crashes: its config is thread-local, the
first call from several threads compiles the same frame several times, and duplicate compiles
can use up the recompile budget, after which calls run eagerly without a word. This check runs
the chosen config from N threads at once on ONE model object (first calls included, since that
is where threads collide), compares every output with eager, and counts compiles.
"""
from __future__ import annotations

import copy
import threading
from typing import Any

from ..core.config import CompileConfig
from ..runtime.apply import apply_config
from ..user.diagnose import DynamoLogCapture
from ..user.workload import call_model
from .correctness import TOLERANCE, compare
from .mix import signature
from .setup import prepare

CALLS_PER_THREAD = 20


def measure_threads(spec, rec) -> None:
    """In a child process (``mode="threads"``): N threads x CALLS_PER_THREAD calls."""
    import torch
    from torch._dynamo.utils import counters

    n = int(spec.check_threads or 2)
    ready = prepare(spec)
    model = ready.model.eval()  # the check calls the model from threads, as a server does
    eager = copy.deepcopy(model)
    inputs = ready.schedule or [ready.inputs]
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
                problem = compare(expected[k], out, tol=TOLERANCE["infer"], precision=config.precision)
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
    distinct_shapes = len({signature(x) for x in inputs})
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
