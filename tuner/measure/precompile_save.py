"""Inside the process (``mode="precompile"``): trace and compile the whole model's forward ahead of
time and save it into the warm-start bundle (tuner/runtime/precompiled.py says what it is).

Compiled from the bundle's own inductor cache, so the kernels are found, not built again. Also
times its guard check, the work every call of a precompiled forward does before the compiled code
runs, beside the check ``torch.compile``'s own cache entry runs for the same forward, so
tuner/ship/bundle.py can weigh the difference against the start-up it saves.
"""
from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from ..core.config import CompileConfig
from ..runtime import precompiled
from ..user.workload import split_inputs
from .setup import prepare

#: Guard checks per timed block, and blocks: microseconds each, so a few thousand calls settle it.
CALLS, BLOCKS = 200, 5


def save_precompiled(spec, rec) -> None:
    import torch

    ready = prepare(spec, schedule=True)
    model, inputs = ready.model.eval(), ready.inputs
    args, kwargs = split_inputs(inputs)
    with torch.no_grad():
        fn = precompiled.save(model, CompileConfig.from_dict(spec.config), args, kwargs, Path(spec.package_path))
        schedule = ready.schedule or []
        # the workload's other inputs: each one outside the guards would leave the precompiled forward
        misses = sum(not fn.guard_check(model, *a, **k) for a, k in map(split_inputs, schedule))
        rec.update(precompiled_module=type(model).__module__, guard_check_us=_guard_check_us(fn, model, args, kwargs),
                   dynamo_guard_check_us=_dynamo_guard_check_us(model, spec.config, args, kwargs,
                                                                fn.prepare_f_locals(model, *args, **kwargs)),
                   schedule_guard_misses=misses, schedule_inputs=len(schedule), status="ok", stage="done")


def _guard_check_us(fn, model, args: tuple, kwargs: dict) -> float:
    """Median microseconds of one guard check at the example inputs (binding the arguments included)."""
    if not fn.guard_check(model, *args, **kwargs):
        raise RuntimeError("the precompiled forward's guards fail at the very inputs it was compiled for")
    return _median_us(lambda: fn.guard_check(model, *args, **kwargs))


def _dynamo_guard_check_us(model, config: dict, args: tuple, kwargs: dict, f_locals: dict) -> float | None:
    """Median microseconds of the guard check ``torch.compile``'s own cache entry runs on every call
    of the same forward: what a compiled model pays anyway. None when no entry is found (then the
    precompiled forward's check is counted in full against it)."""
    import torch

    compiled: Any = torch.compile(model.forward, **CompileConfig.from_dict(config).compile_kwargs())
    compiled(*args, **kwargs)
    entries = torch._C._dynamo.eval_frame._debug_get_cache_entry_list(type(model).forward.__code__)
    checks = [entry.guard_manager.check for entry in entries]
    check = next((check for check in checks if check(f_locals)), None)
    return _median_us(lambda: check(f_locals)) if check else None


def _median_us(check) -> float:
    blocks = []
    for _ in range(BLOCKS):
        began = time.perf_counter()
        for _ in range(CALLS):
            check()
        blocks.append((time.perf_counter() - began) / CALLS * 1e6)
    return round(statistics.median(blocks), 2)
