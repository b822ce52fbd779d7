"""The packaged model, inside its processes: ``mode="package"`` exports the workload's model with
``torch.export`` and compiles it ahead of time with AOTInductor into a ``.pt2``;
``mode="package_check"`` loads that file in a fresh process, as serving code does, and checks it.

Export takes each varying input dimension as a ``Dim`` with the bounds the workload declares in
``input_dims()``, or else the range the example inputs and the schedule showed
(tuner/pt2/bounds.py); a bf16 config's forward is exported under its autocast, as
``apply_config`` runs it. AOTInductor then compiles it with the tuned config's inductor options
(its mode's options folded in), its C++ held to an x86-64 ISA level (tuner/pt2/build_target.py),
float32 matmuls at the config's precision (TF32 is fixed in inductor's templates at this point),
and compile-tune's record as the package's metadata (tuner/pt2/record.py). A config
AOTInductor refuses gives way to the nearest one it takes (tuner/pt2/attempts.py), each
refusal recorded. Where export cannot take the model (data-dependent code, an unsupported call),
the result names the line that stopped it and nothing is written.

The check builds the model again from the same seed (the weights the package holds), loads the
package with its input checks on (a package for another CPU or GPU is refused there, before its
code loads), compares its outputs with eager on every distinct input and at probe sizes the
schedule never showed (inside the bounds: it must match eager, at the config's precision's
tolerance; outside: it must refuse, not answer wrongly or die), and times its load, its first call,
and its steps beside eager's in arrival order over the schedule. Eager runs at the process's own
float32 matmul precision, the package at its config's, switched per side as a trial does.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import statistics
import time
import traceback
from pathlib import Path
from typing import Any

from ..core.config import CompileConfig
from ..core.errors import TunerError
from ..core.precision import MATMUL_PRECISION
from ..core.spec import TrialSpec
from ..measure.correctness import TOLERANCE, compare
from ..measure.devices import timed
from ..measure.mix import timing_mix
from ..measure.setup import prepare
from ..runtime.apply_precision import autocast_forward, set_matmul_precision
from ..user.diagnose import classify_exception
from ..user.workload import call_model
from . import machine, toolchain
from .attempts import Attempt, inductor_configs, package_attempts
from .bounds import (
    PackageShapes,
    Probe,
    dynamic_shapes,
    flat_input_names,
    package_shapes,
    probes,
    reaches_one,
)
from .build_target import cpu_target, gpu_record, level_cpu, off_target
from .load import load_package
from .record import META_KEY, compiled_flags, git_commit, seal, sha256_file

#: Timed rounds of the check, each a pass of eager then the package over the schedule (or a
#: block of steps on the example inputs).
CHECK_ROUNDS = 5


def build_package(spec: TrialSpec, rec) -> None:
    config = CompileConfig.from_dict(spec.config)
    ready = prepare(spec)
    assert spec.package_path is not None
    calls = [ready.inputs, *(ready.schedule or [])]
    try:
        shapes = package_shapes(ready.inputs, calls, ready.workload.make_input_dims())
    except ValueError as exc:
        rec.update(status="failed", failure={"category": "bad_input_dims", "raw": str(exc)},
                   export_error=f"{ready.workload.path}: {exc}")
        return
    rec.update(dynamic_dims=shapes.record()["dims"], shapes=shapes.record(), shapes_said=shapes.said())
    rec.stage("export")
    start = time.perf_counter()
    exported = _export(ready, config, calls, shapes, rec)
    if exported is None:
        return
    rec.update(export_s=time.perf_counter() - start)
    rec.stage("aoti_compile")
    flags = machine.cpu_flags()
    level = machine.choose_level(spec.package_isa, flags, spec.device)
    with level_cpu(level, flags):  # inductor's vector ISA and GEMM templates: the level's features alone
        target, cpu = cpu_target(level, flags)
        rec.update(isa_level=level, cpu=cpu)
        meta = _metadata(spec, ready.inputs, shapes, cpu)
        _compile_first_that_packages(spec, exported, package_attempts(config), target, meta, reaches_one(shapes), rec)


def _export(ready, config: CompileConfig, calls: list, shapes: PackageShapes, rec):
    """The model exported over its varying dims (its forward under bf16 autocast where the config
    computes in bf16, as ``apply_config`` runs it); None, with export's refusal in ``rec``."""
    import torch
    from torch.fx.experimental import _config as fx_config

    if config.precision == "bf16":
        ready.model.forward = autocast_forward(ready.model.forward, ready.model, "bf16")
    args, kwargs = _split(ready.inputs)
    try:
        with torch.no_grad(), fx_config.patch(backed_size_oblivious=reaches_one(shapes)):  # type: ignore[attr-defined]
            return torch.export.export(ready.model, args, kwargs, strict=False,
                                       dynamic_shapes=dynamic_shapes(ready.inputs, calls, shapes))
    except Exception as exc:  # noqa: BLE001 - export's refusal is the finding
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        rec.update(status="failed", failure=classify_exception(exc).to_dict(), export_stopped_at=_stopping_line(exc),
                   export_error=f"{type(exc).__name__}: {first}")
        return None


def _compile_first_that_packages(spec: TrialSpec, exported, attempts: list[Attempt], target: dict[str, Any],
                                 meta: dict[str, Any], one: bool, rec) -> None:
    """Compile ``exported`` with AOTInductor under each attempt in turn (tuner/pt2/attempts.py)
    until one packages; each refusal is recorded (``refused``: the attempt and its error's first line).
    A compiler that fails on its own options stops the loop (no config is to blame), and so does a
    second config failing with the first one's error (the rest would too)."""
    import torch

    refused: list[dict[str, Any]] = []
    for attempt in attempts:
        record = {**meta, "config": attempt.config.describe(), "config_change": attempt.change,
                  "fold_at_runtime": attempt.fold_at_runtime, "precision": attempt.config.precision,
                  "matmul_precision": MATMUL_PRECISION.get(attempt.config.precision or "")}
        start = time.perf_counter()
        try:
            with _matmul_precision(attempt.config.precision):  # tf32 is fixed in inductor's templates here
                path = torch._inductor.aoti_compile_and_package(
                    exported, package_path=spec.package_path,
                    inductor_configs={**inductor_configs(attempt.config), **target,
                                      "aot_inductor.metadata": {META_KEY: json.dumps(record)},
                                      # on, weights stay swappable (load_package(...).load_weights): what
                                      # inductor folds into constants of its own is folded again at load
                                      "aot_inductor.use_runtime_constant_folding": attempt.fold_at_runtime,
                                      **({"aot_inductor.check_lowerbound": False} if one else {})})
        except Exception as exc:  # noqa: BLE001 - a refused config is a finding; the next one is tried
            refused.append({**attempt.to_dict(), "error": f"{type(exc).__name__}: {_first_line(exc)}"})
            rec.update(refused=refused)
            stop = toolchain_failure(exc, target) or same_error(refused)
            if stop:
                rec.update(status="failed", failure=stop)
                return
            continue
        _seal(spec, Path(path), meta, attempt, time.perf_counter() - start, refused, rec)
        return
    last = f"the last ({refused[-1]['change']}) with {refused[-1]['error']}" if refused else "none was tried"
    rec.update(status="failed", failure={"category": "aoti_compile",
                                         "raw": f"AOTInductor refused every config tried ({len(refused)}), {last}"})


def _seal(spec: TrialSpec, path: Path, meta: dict[str, Any], attempt: Attempt, took: float,
          refused: list[dict[str, Any]], rec) -> None:
    """Check the built package's target, then complete its record: digests, toolchain, source."""
    used = compiled_flags(path)
    verified, wrong = off_target(used, meta["cpu"])
    if wrong:
        path.unlink(missing_ok=True)
        rec.update(status="failed", failure={"category": "package_target", "raw": wrong}, compiled_with=used)
        return
    sealed = seal(path, {"target_verified": verified, "source": _source(spec)}, compiler=get_cpp_compiler())
    rec.update(aoti_compile_s=took, package_path=str(path), input_order=meta["input_order"],
               package_mb=os.path.getsize(path) / 2**20, packaged=attempt.to_dict(), refused=refused,
               compiled_with=used, target_verified=verified, toolchain=sealed["toolchain"],
               archive_sha256=sealed["archive_sha256"], status="ok", stage="done")


def toolchain_failure(exc: BaseException, target: dict[str, Any]) -> dict[str, Any] | None:
    """The failure to record where ``exc`` is the C++ compiler refusing its own options or missing
    (no config is to blame, and the next would fail alike); None otherwise."""
    from torch._inductor.exc import CppCompileError, InvalidCxxCompiler

    seen: set[int] = set()
    chain: BaseException | None = exc
    while chain is not None and id(chain) not in seen:
        seen.add(id(chain))
        if isinstance(chain, InvalidCxxCompiler) or (
                isinstance(chain, CppCompileError) and _OPTION_ERROR.search(str(chain))):
            facts = toolchain.compiler_facts(get_cpp_compiler())
            said = next((line.strip() for line in str(chain).splitlines() if _OPTION_ERROR.search(line)),
                        _first_line(chain))
            level = target.get("cpp.march", "native")
            return {"category": "toolchain", "compiler": facts, "raw": (
                f"the C++ compiler {facts['path']} (version {facts['version'] or 'unknown'}) refused the build "
                f"for -march={level}: {said[:300]}")}
        chain = chain.__cause__ or chain.__context__
    return None


#: A compiler's complaint about its command line, not the code: gcc's and clang's wording.
_OPTION_ERROR = re.compile(r"bad value \(.*\) for '-march=|unrecognized (command[- ]line )?option|"
                           r"unknown target CPU|unsupported option|invalid value .* in '-march")


def same_error(refused: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The failure to record where the last two configs tried failed with the same error: the
    error is not the config's, and every config after them would meet it too."""
    if len(refused) < 2 or refused[-1]["error"] != refused[-2]["error"]:
        return None
    both = f"{refused[-2]['change']} and {refused[-1]['change']}"
    return {"category": "aoti_compile", "raw": f"AOTInductor refused {both} with the same error, so no config is to "
            f"blame and the rest were not tried: {refused[-1]['error']}"}


def get_cpp_compiler() -> str:
    from torch._inductor.cpp_builder import get_cpp_compiler as compiler

    return compiler()


def _source(spec: TrialSpec) -> dict[str, Any]:
    """Where the package came from: its best_config.yaml's digest and the workload's git commit."""
    config = Path(spec.config_path) if spec.config_path else None
    return {"best_config": str(config) if config else None,
            "best_config_sha256": sha256_file(config) if config and config.exists() else None,
            "commit": git_commit(Path(spec.workload).parent)}


@contextlib.contextmanager
def _matmul_precision(precision: str | None):
    """The config's float32 matmul precision for the duration (tf32: ``"high"``), as a trial compiles."""
    import torch

    before = set_matmul_precision(precision, warn=False)
    try:
        yield
    finally:
        if before is not None:
            torch.set_float32_matmul_precision(before)


def _metadata(spec: TrialSpec, inputs: Any, shapes: PackageShapes, cpu: dict[str, Any]) -> dict[str, Any]:
    """compile-tune's record inside the package, all but the config's fields (tuner/pt2/record.py
    ``META_FIELDS`` says what each is)."""
    import torch

    top = {name: value for name, value in (inputs.items() if isinstance(inputs, dict) else
                                          enumerate(inputs if isinstance(inputs, (tuple, list)) else (inputs,)))}
    tensors = {str(k): {"dtype": str(v.dtype), "shape": list(v.shape)} for k, v in top.items()
               if isinstance(v, torch.Tensor)}
    return {"torch": torch.__version__, "device": spec.device, "threads": spec.threads,
            "cpu_isa": cpu["vector_isa"], "cpu": cpu, "cuda": gpu_record(spec.device), "tensors": tensors,
            **shapes.record(), "input_order": flat_input_names(inputs), "keyword_inputs": isinstance(inputs, dict)}


def check_package(spec: TrialSpec, rec) -> None:
    import torch

    ready = prepare(spec)
    assert spec.package_path is not None
    ready.model.eval()
    mix = timing_mix(ready.inputs, ready.schedule)
    rec.stage("load")
    eager_precision = torch.get_float32_matmul_precision()
    start = time.perf_counter()
    try:
        package = load_package(spec.package_path)  # as serving code loads it (tuner.load_package), checks on
    except TunerError as exc:  # refused before any of its code loaded: the parent says it as it is
        rec.update(status="failed", failure={"category": "package_refused", "raw": exc.message},
                   refused_load={"message": exc.message, "hint": exc.hint})
        return
    rec.update(load_s=time.perf_counter() - start)
    sides = Sides(ready.model, package, eager_precision)
    precision = package.metadata.get("precision")
    with torch.no_grad():
        first, _ = timed(lambda: sides.package(ready.inputs), spec.device)
        rec.update(first_call_s=first)
        rec.stage("correctness")
        tol = spec.tolerance or TOLERANCE["infer"]
        for entry in mix:
            problem = compare(sides.eager(entry.inputs), sides.package(entry.inputs), tol=tol, precision=precision)
            if problem:
                rec.update(correct=False, correctness_error=f"{entry.label}: {problem}", status="ok", stage="done")
                return
        rec.update(correct=True, checked_inputs=len(mix))
        calls = [ready.inputs, *(ready.schedule or [])]
        shapes = package_shapes(ready.inputs, calls, ready.workload.make_input_dims())
        checked = [_probe(sides, probe, tol, precision, rec) for probe in probes(ready.inputs, calls, shapes)]
        rec.update(probes=checked, matmul_precision=sides.precisions)
        wrong = next((c for c in checked if not c["ok"]), None)
        if wrong:
            rec.update(correct=False, correctness_error=f"{wrong['probe']}: {wrong['outcome']}", status="ok",
                       stage="done")
            return
        rec.stage("timing")
        eager_s, package_s = _alternate(sides, ready.schedule or [ready.inputs] * 8, spec.device)
    rec.update(eager_step_s=eager_s, step_s=package_s, speedup=eager_s / package_s, status="ok", stage="done")


class Sides:
    """Eager and the package called each under its own float32 matmul precision, as a trial
    switches them (tuner/measure/steps.py): eager under the process's own (the float32 reference),
    the package under what ``load_package`` set for its precision (tf32: ``"high"``)."""

    def __init__(self, model, package, eager_precision: str) -> None:
        import torch

        self.model, self._package = model, package
        self.precisions = {"eager": eager_precision, "package": torch.get_float32_matmul_precision()}

    def eager(self, inputs: Any) -> Any:
        self.use("eager")
        return call_model(self.model, inputs)

    def package(self, inputs: Any) -> Any:
        self.use("package")
        return call_model(self._package, inputs)

    def use(self, side: str) -> None:
        import torch

        if torch.get_float32_matmul_precision() != self.precisions[side]:
            torch.set_float32_matmul_precision(self.precisions[side])


def _probe(sides: Sides, probe: Probe, tol, precision: str | None, rec) -> dict[str, Any]:
    """Call the package at an unseen size: inside its bounds it must match eager; outside them it
    must refuse (or, unbounded there, match eager). A crash ends this process, and the check's
    stage names the probe that did it."""
    rec.stage(f"probe {probe.label}")
    try:
        got = sides.package(probe.inputs)
    except Exception as exc:  # noqa: BLE001 - a refusal is the expected answer outside the bounds
        said = f"refused: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
        return {"probe": probe.label, "inside": probe.inside, "ok": not probe.inside, "outcome": said}
    problem = compare(sides.eager(probe.inputs), got, tol=tol, precision=precision)
    return {"probe": probe.label, "inside": probe.inside, "ok": not problem,
            "outcome": f"answered, differs from eager: {problem}" if problem else "matches eager"}


def _alternate(sides: Sides, inputs: list, device: str) -> tuple[float, float]:
    """Mean step of eager and of the package, each over the inputs in arrival order, alternately."""
    for item in inputs[:2]:  # warm both: allocator, caches
        sides.eager(item), sides.package(item)
    times: dict[str, list[float]] = {"eager": [], "package": []}
    for r in range(CHECK_ROUNDS):
        order = [("eager", sides.model), ("package", sides._package)]
        for name, fn in order if r % 2 == 0 else reversed(order):
            sides.use(name)
            took = sum(timed(lambda x=item, f=fn: call_model(f, x), device)[0] for item in inputs)
            times[name].append(took / len(inputs))
    return statistics.median(times["eager"]), statistics.median(times["package"])


def _split(inputs: Any) -> tuple[tuple, dict]:
    if isinstance(inputs, dict):
        return (), dict(inputs)
    return (tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)), {}


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:300]


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
