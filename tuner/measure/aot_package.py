"""The packaged model, inside its processes: ``mode="package"`` exports the workload's model with
``torch.export`` and compiles it ahead of time with AOTInductor into a ``.pt2``;
``mode="package_check"`` loads that file in a fresh process, as serving code does, and checks it.

Export takes the dimensions that vary over the example inputs and the input schedule as ``Dim``s
(with the range seen), the tuned config's inductor options (its mode's options folded in) as
AOTInductor's ``inductor_configs``. Where export cannot take the model (data-dependent code, an
unsupported call), the result names the line that stopped it and nothing is written.

The check builds the model again from the same seed (the weights the package holds), compares the
package's outputs with eager on every distinct input, and times its load, its first call, and its
steps beside eager's in arrival order over the schedule.
"""
from __future__ import annotations

import os
import statistics
import time
import traceback
from pathlib import Path
from typing import Any

from ..core.config import CompileConfig
from ..core.spec import TrialSpec
from ..diagnose import classify_exception
from ..runtime.marks import varying_dims
from ..runtime.packaged import load_package
from ..workload import call_model
from .correctness import TOLERANCE, compare
from .devices import timed
from .mix import timing_mix
from .setup import prepare

#: Timed rounds of the check, each a pass of eager then the package over the schedule (or a
#: block of steps on the example inputs).
CHECK_ROUNDS = 5


def build_package(spec: TrialSpec, rec) -> None:
    import torch

    config = CompileConfig.from_dict(spec.config)
    ready = prepare(spec)
    assert spec.package_path is not None
    calls = [ready.inputs, *(ready.schedule or [])]
    args, kwargs = _split(ready.inputs)
    dims = varying_dims(calls)
    rec.update(dynamic_dims={k: {str(d): r for d, r in v.items()} for k, v in dims.items()})
    rec.stage("export")
    start = time.perf_counter()
    try:
        with torch.no_grad():
            exported = torch.export.export(ready.model, args, kwargs, strict=False,
                                           dynamic_shapes=_dynamic_shapes(ready.inputs, calls, dims))
    except Exception as exc:  # noqa: BLE001 - export's refusal is the finding
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        rec.update(status="failed", failure=classify_exception(exc).to_dict(), export_stopped_at=_stopping_line(exc),
                   export_error=f"{type(exc).__name__}: {first}")
        return
    rec.update(export_s=time.perf_counter() - start)
    rec.stage("aoti_compile")
    start = time.perf_counter()
    path = torch._inductor.aoti_compile_and_package(exported, package_path=spec.package_path,
                                                    inductor_configs=_inductor_configs(config))
    rec.update(aoti_compile_s=time.perf_counter() - start, package_path=str(path),
               package_mb=os.path.getsize(path) / 2**20, status="ok", stage="done")


def check_package(spec: TrialSpec, rec) -> None:
    import torch

    ready = prepare(spec)
    assert spec.package_path is not None
    ready.model.eval()
    mix = timing_mix(ready.inputs, ready.schedule)
    rec.stage("load")
    start = time.perf_counter()
    package = load_package(spec.package_path)  # as serving code loads it (tuner.load_package)
    rec.update(load_s=time.perf_counter() - start)
    with torch.no_grad():
        first, _ = timed(lambda: call_model(package, ready.inputs), spec.device)
        rec.update(first_call_s=first)
        rec.stage("correctness")
        for entry in mix:
            problem = compare(call_model(ready.model, entry.inputs), call_model(package, entry.inputs),
                              tol=spec.tolerance or TOLERANCE["infer"])
            if problem:
                rec.update(correct=False, correctness_error=f"{entry.label}: {problem}", status="ok", stage="done")
                return
        rec.update(correct=True, checked_inputs=len(mix))
        rec.stage("timing")
        eager_s, package_s = _alternate(ready.model, package, ready.schedule or [ready.inputs] * 8, spec.device)
    rec.update(eager_step_s=eager_s, step_s=package_s, speedup=eager_s / package_s, status="ok", stage="done")


def _alternate(model, package, inputs: list, device: str) -> tuple[float, float]:
    """Mean step of eager and of the package, each over the inputs in arrival order, alternately."""
    for item in inputs[:2]:  # warm both: allocator, caches
        call_model(model, item), call_model(package, item)
    sides: dict[str, list[float]] = {"eager": [], "package": []}
    for r in range(CHECK_ROUNDS):
        order = [("eager", model), ("package", package)]
        for name, fn in order if r % 2 == 0 else reversed(order):
            took = sum(timed(lambda x=item, f=fn: call_model(f, x), device)[0] for item in inputs)
            sides[name].append(took / len(inputs))
    return statistics.median(sides["eager"]), statistics.median(sides["package"])


def _split(inputs: Any) -> tuple[tuple, dict]:
    if isinstance(inputs, dict):
        return (), dict(inputs)
    return (tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)), {}


def _dynamic_shapes(inputs: Any, calls: list, dims: dict[str, dict[int, list[int]]]) -> Any:
    """``dynamic_shapes`` in the inputs' own structure: a ``Dim`` per varying dimension, with the
    range the schedule showed. Dimensions whose sizes are equal in every call (``input_ids`` and
    ``attention_mask`` over a sequence) share one ``Dim``, as export requires of equal sizes; a
    minimum of 1 is left to export's own choice (it specialises 0 and 1)."""
    from torch.export import Dim

    if not dims:
        return None
    shared: dict[tuple, Any] = {}

    def dim_for(name: str, d: int, lo: int, hi: int) -> Any:
        sizes = tuple(_size(call, name, d) for call in calls)
        if sizes not in shared:
            shared[sizes] = Dim(f"input_{_safe(name)}_dim{d}", min=lo, max=hi) if lo >= 2 else Dim.DYNAMIC
        return shared[sizes]

    def spec_for(name: str) -> dict[int, Any] | None:
        found = dims.get(name)
        return {d: dim_for(name, d, lo, hi) for d, (lo, hi) in found.items()} if found else None

    if isinstance(inputs, dict):
        return {name: spec_for(str(name)) for name in inputs}
    items = inputs if isinstance(inputs, (tuple, list)) else (inputs,)
    return tuple(spec_for(str(i)) for i in range(len(items)))


def _size(call: Any, name: str, d: int) -> int | None:
    value = call.get(name) if isinstance(call, dict) else (call if not isinstance(call, (tuple, list)) else
                                                            call[int(name)] if int(name) < len(call) else None)
    shape = getattr(value, "shape", None)
    return int(shape[d]) if shape is not None and d < len(shape) else None


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name) or "input"


def _inductor_configs(config: CompileConfig) -> dict[str, Any]:
    """The tuned inductor options for AOTInductor, the mode's own options folded in (a mode is a
    named set of options)."""
    if config.backend != "inductor":
        return {}
    options: dict[str, Any] = {}
    if config.mode and config.mode != "default":
        import torch._inductor

        options.update(torch._inductor.list_mode_options(config.mode))
    options.update(config.options)
    options.pop("triton.cudagraphs", None)  # CUDA graphs are the serving code's business, not the package's
    return options


def _stopping_line(exc: BaseException) -> str | None:
    """``file:line: code`` of the deepest frame outside torch and this package where export
    stopped: the model's line (export runs the model's Python, so its frames are in the traceback)."""
    import torch

    ours = (str(Path(torch.__file__).parent), str(Path(__file__).resolve().parent.parent))
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(ours)]
    if not frames:
        return None
    frame = frames[-1]
    return f"{frame.filename}:{frame.lineno}: {(frame.line or '').strip()}"
