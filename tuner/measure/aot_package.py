"""The packaged model, inside its processes: ``mode="package"`` exports the workload's model with
``torch.export`` and compiles it ahead of time with AOTInductor into a ``.pt2``;
``mode="package_check"`` loads that file in a fresh process, as serving code does, and checks it.

Export takes each varying input dimension as a ``Dim`` with the bounds the workload declares in
``input_dims()``, or else the range the example inputs and the schedule showed
(tuner/measure/package_shapes.py), the tuned config's inductor options (its mode's options folded
in) as AOTInductor's ``inductor_configs``, and compile-tune's record as the package's metadata
(tuner/runtime/package_meta.py). Where export cannot take the model (data-dependent code, an
unsupported call), the result names the line that stopped it and nothing is written.

The check builds the model again from the same seed (the weights the package holds), loads the
package with its input checks on, compares its outputs with eager on every distinct input and at
probe sizes the schedule never showed (inside the bounds: it must match eager; outside: it must
refuse, not answer wrongly or die), and times its load, its first call, and its steps beside
eager's in arrival order over the schedule.
"""
from __future__ import annotations

import json
import os
import statistics
import time
import traceback
from pathlib import Path
from typing import Any

from ..core.config import CompileConfig
from ..core.spec import TrialSpec
from ..diagnose import classify_exception
from ..runtime.package_meta import META_KEY, cpu_isa
from ..runtime.packaged import load_package
from ..workload import call_model
from .correctness import TOLERANCE, compare
from .devices import timed
from .mix import timing_mix
from .package_shapes import (
    PackageShapes,
    Probe,
    dynamic_shapes,
    flat_input_names,
    package_shapes,
    probes,
    reaches_one,
)
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
    try:
        shapes = package_shapes(ready.inputs, calls, ready.workload.make_input_dims())
    except ValueError as exc:
        rec.update(status="failed", failure={"category": "bad_input_dims", "raw": str(exc)},
                   export_error=f"{ready.workload.path}: {exc}")
        return
    rec.update(dynamic_dims=shapes.record()["dims"], shapes=shapes.record(), shapes_said=shapes.said())
    rec.stage("export")
    start = time.perf_counter()
    one = reaches_one(shapes)
    from torch.fx.experimental import _config as fx_config
    try:
        with torch.no_grad(), fx_config.patch(backed_size_oblivious=one):  # type: ignore[attr-defined]
            exported = torch.export.export(ready.model, args, kwargs, strict=False,
                                           dynamic_shapes=dynamic_shapes(ready.inputs, calls, shapes))
    except Exception as exc:  # noqa: BLE001 - export's refusal is the finding
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        rec.update(status="failed", failure=classify_exception(exc).to_dict(), export_stopped_at=_stopping_line(exc),
                   export_error=f"{type(exc).__name__}: {first}")
        return
    rec.update(export_s=time.perf_counter() - start)
    rec.stage("aoti_compile")
    meta = _metadata(spec, config, ready.inputs, shapes)
    start = time.perf_counter()
    path = torch._inductor.aoti_compile_and_package(
        exported, package_path=spec.package_path,
        inductor_configs={**_inductor_configs(config), "aot_inductor.metadata": {META_KEY: json.dumps(meta)},
                          # weights stay swappable (load_package(...).load_weights): what inductor folds
                          # into constants of its own is folded again from them at load
                          "aot_inductor.use_runtime_constant_folding": True,
                          **({"aot_inductor.check_lowerbound": False} if one else {})})
    rec.update(aoti_compile_s=time.perf_counter() - start, package_path=str(path), input_order=meta["input_order"],
               package_mb=os.path.getsize(path) / 2**20, status="ok", stage="done")


def _metadata(spec: TrialSpec, config: CompileConfig, inputs: Any, shapes: PackageShapes) -> dict[str, Any]:
    """compile-tune's record inside the package (tuner/runtime/package_meta.py reads it)."""
    import torch

    top = {name: value for name, value in (inputs.items() if isinstance(inputs, dict) else
                                          enumerate(inputs if isinstance(inputs, (tuple, list)) else (inputs,)))}
    tensors = {str(k): {"dtype": str(v.dtype), "shape": list(v.shape)} for k, v in top.items()
               if isinstance(v, torch.Tensor)}
    return {"torch": torch.__version__, "device": spec.device, "cpu_isa": cpu_isa() if spec.device == "cpu" else None,
            "tensors": tensors, **shapes.record(), "input_order": flat_input_names(inputs),
            "precision": config.precision, "config": config.describe(), "keyword_inputs": isinstance(inputs, dict)}


def check_package(spec: TrialSpec, rec) -> None:
    import torch

    ready = prepare(spec)
    assert spec.package_path is not None
    ready.model.eval()
    mix = timing_mix(ready.inputs, ready.schedule)
    rec.stage("load")
    start = time.perf_counter()
    package = load_package(spec.package_path)  # as serving code loads it (tuner.load_package), checks on
    rec.update(load_s=time.perf_counter() - start)
    with torch.no_grad():
        first, _ = timed(lambda: call_model(package, ready.inputs), spec.device)
        rec.update(first_call_s=first)
        rec.stage("correctness")
        tol = spec.tolerance or TOLERANCE["infer"]
        for entry in mix:
            problem = compare(call_model(ready.model, entry.inputs), call_model(package, entry.inputs), tol=tol)
            if problem:
                rec.update(correct=False, correctness_error=f"{entry.label}: {problem}", status="ok", stage="done")
                return
        rec.update(correct=True, checked_inputs=len(mix))
        calls = [ready.inputs, *(ready.schedule or [])]
        shapes = package_shapes(ready.inputs, calls, ready.workload.make_input_dims())
        checked = [_probe(ready.model, package, probe, tol, rec) for probe in probes(ready.inputs, calls, shapes)]
        rec.update(probes=checked)
        wrong = next((c for c in checked if not c["ok"]), None)
        if wrong:
            rec.update(correct=False, correctness_error=f"{wrong['probe']}: {wrong['outcome']}", status="ok",
                       stage="done")
            return
        rec.stage("timing")
        eager_s, package_s = _alternate(ready.model, package, ready.schedule or [ready.inputs] * 8, spec.device)
    rec.update(eager_step_s=eager_s, step_s=package_s, speedup=eager_s / package_s, status="ok", stage="done")


def _probe(model, package, probe: Probe, tol, rec) -> dict[str, Any]:
    """Call the package at an unseen size: inside its bounds it must match eager; outside them it
    must refuse (or, unbounded there, match eager). A crash ends this process, and the check's
    stage names the probe that did it."""
    rec.stage(f"probe {probe.label}")
    try:
        got = call_model(package, probe.inputs)
    except Exception as exc:  # noqa: BLE001 - a refusal is the expected answer outside the bounds
        said = f"refused: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
        return {"probe": probe.label, "inside": probe.inside, "ok": not probe.inside, "outcome": said}
    problem = compare(call_model(model, probe.inputs), got, tol=tol)
    return {"probe": probe.label, "inside": probe.inside, "ok": not problem,
            "outcome": f"answered, differs from eager: {problem}" if problem else "matches eager"}


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
