"""``compile-tune package RESULTS``: the winner of an inference run as a ``.pt2`` that starts
without compiling, verified before it is recommended.

Two fresh processes (tuner/pt2/build.py): one exports the workload's model with
``torch.export`` (the schedule's varying dimensions as ``Dim``s) and compiles it with AOTInductor
under the tuned inductor options and precision into ``model.pt2`` beside ``best_config.yaml``, its
C++ for an x86-64 ISA level (``--isa``; the highest this CPU has by default), falling back to the
nearest config AOTInductor takes where it refuses the tuned one (said, with each refusal); one loads
that file as serving code would (``tuner.load_package``: a CPU or GPU it was not built for is
refused there in one line), checks its outputs against eager on every distinct input, and times its
load, its first call and its steps beside eager's. The figures go into the
study, so ``best_config.yaml`` and both reports carry them (``measured.package``), next to the JIT
config's cold compile and warm start. A package whose outputs differ, or whose steps are slower
than the JIT config's beyond the noise, is kept but not recommended, and says why.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..core.config import CompileConfig
from ..core.errors import TunerError
from ..core.spec import TrialSpec
from ..export._common import _mode_options
from ..export.best_config import load_tuned_config
from ..isolation.isolated import run_isolated
from ..report import open_saved_study
from ..run.outputs import rebuild_outputs
from . import machine, toolchain
from .load import PACKAGE_NAME
from .record import DIGEST_SUFFIX

#: A package step may trail the JIT config's by this much (or the run's noise floor, if larger)
#: and still be recommended: two processes of the same config differ about this much here.
STEP_TOLERANCE = 0.05


def package_results(results: str | Path, timeout: float = 1800.0, log: Callable[[str], None] = print,
                    best_compiled: bool = False, isa: str | None = None) -> dict:
    """Build, check and record the package of the run in ``results``; returns its record.
    ``best_compiled``: under a stay-eager verdict, package the best compiled config anyway (an
    ahead-of-time package starts without compiling, which the JIT verdict had to pay for).
    ``isa``: the x86-64 level its C++ is built for (``x86-64-v2`` / ``-v3`` / ``-v4``, or ``native``
    for this very CPU); None: the highest this CPU has (tuner/runtime/machine.py).
    Raises :class:`TunerError` (exit code 2) where there is nothing to package, export or
    AOTInductor refuses, this CPU lacks the level asked for, or the C++ compiler cannot build for it
    (checked on an empty file before anything is exported)."""
    flags = machine.cpu_flags()
    machine.choose_level(isa, flags)  # a level this CPU lacks: refused before anything is read
    results = Path(results)
    tuned = load_tuned_config(results / "best_config.yaml")
    level = machine.choose_level(isa, flags, str(tuned.tuned_on.get("device") or "cpu"))
    _check_compiler(level, flags)
    study = open_saved_study(results, None, None)
    config = _packaged_config(results, tuned, study, best_compiled)
    settings = study.user_attrs.get("settings") or {}
    out = results / PACKAGE_NAME
    out.unlink(missing_ok=True)
    out.with_name(out.name + DIGEST_SUFFIX).unlink(missing_ok=True)
    # the run's thread count and heap, so the package's steps compare with the JIT config's
    base = dict(workload=str(Path(settings["workload"]).resolve()), task="infer", device=settings.get("device", "cpu"),
                threads=settings.get("threads") or 1, heap=settings.get("heap", "pinned"),
                package_path=str(out.resolve()))
    work = results / "work"
    log(f"exporting {Path(base['workload']).name} with torch.export and compiling it with AOTInductor "
        f"({config.describe()}) for {level} CPUs ...")
    built = run_isolated(TrialSpec(**base, config=config.to_dict(), mode="package", package_isa=level,
                                   config_path=str((results / "best_config.yaml").resolve())),
                         timeout=timeout, work_dir=work)
    for refused in built.get("refused") or []:
        log(f"  AOTInductor refused {refused['change']} ({refused['config_label']}): {refused['error'][:200]}")
    if built.get("status") != "ok":
        out.unlink(missing_ok=True)
        raise _build_refusal(built)
    packaged = CompileConfig.from_dict(built["packaged"]["config"])
    _say_built(built, packaged, config, log)
    checked = run_isolated(TrialSpec(**base, config=packaged.to_dict(), mode="package_check"), timeout=timeout,
                           work_dir=work)
    if checked.get("status") != "ok":
        raise _check_refusal(out, checked)
    for probe in checked.get("probes") or []:
        log(f"  {'inside' if probe['inside'] else 'outside'} its bounds, {probe['probe']}: {probe['outcome']}")
    record = _record(tuned.measured, config, built, checked)
    if config is not tuned.config:  # beside _record's notes, if any
        record["note"] = "; ".join(filter(None, [
            f"the run's verdict is stay eager; this packages its best compiled config ({config.describe()}) "
            "on request (--best-compiled)", record.get("note")]))
    study.set_user_attr("package", {"config_key": packaged.key(), "config_label": packaged.describe(), **record})
    rebuild_outputs(results)
    log(package_line(record))
    return record


def _check_compiler(level: str, flags: list[str] | None) -> None:
    """Refuse, before anything is exported, a C++ compiler that cannot build for ``level`` with the
    vector ISA flags inductor will add there (tuner/pt2/toolchain.py)."""
    if level == machine.NATIVE:
        return
    from torch._inductor import config as inductor_config

    from .build_target import cpu_target, level_cpu

    with level_cpu(level, flags), inductor_config.patch({"cpp.vec_isa_ok": True}):  # flags, not test kernels
        options = cpu_target(level, flags)[1]["vector_options"]
    toolchain.check_level(level, options)


def _say_built(built: dict, packaged: CompileConfig, tuned: CompileConfig, log: Callable[[str], None]) -> None:
    change = built["packaged"]["change"]
    if change != "as tuned":
        log(f"  packaged the nearest config AOTInductor takes: {change} ({packaged.describe()}), not "
            f"{tuned.describe()}; checking that one")
    log(f"  {PACKAGE_NAME}: {built['package_mb']:.1f} MB, export {built['export_s']:.1f} s, AOTInductor "
        f"{built['aoti_compile_s']:.1f} s, C++ for {built['isa_level']} CPUs; the shapes it takes:")
    if not built.get("target_verified"):
        log(f"  not verified: no compiler switches were found in its shared object (clang, "
            f"AOT_INDUCTOR_ENABLE_LINE_TABLES=0 or compressed debug sections), so that it was built for "
            f"{built['isa_level']} alone is unchecked (target_verified: false)")
    for line in built.get("shapes_said") or []:
        log(f"    {line}")
    for lost in not_carried(tuned, built):
        log(f"  not carried: {lost['setting']} = {lost['value']}: {lost['why']}")
    log("  loading it in a fresh process to check it ...")


def _build_refusal(built: dict) -> TunerError:
    category = (built.get("failure") or {}).get("category")
    if category == "package_target":
        return TunerError(f"the package's C++ was not built for the ISA level asked: {built['failure']['raw']}",
                          "give --isa native to build for this CPU only")
    if category == "toolchain":
        return TunerError(built["failure"]["raw"][:400], "give --isa native (this CPU only) or a level the compiler "
                          "knows, or set CXX to gcc >= 11 or clang >= 12")
    if category == "aoti_compile":
        return TunerError(f"{built['failure']['raw'][:300]}", "serve with tuner.apply_config(model, "
                          "best_config.yaml) (JIT); the refusals are listed above")
    return TunerError(_refusal(built), "serve with tuner.apply_config(model, best_config.yaml) (JIT), or change "
                                       "that line so export can trace it (`compile-tune check MODEL.py` shows why)")


def _check_refusal(out: Path, checked: dict) -> TunerError:
    refused = checked.get("refused_load")
    if refused:  # load_package's own one line, as a server would see it
        return TunerError(refused["message"], refused.get("hint"))
    where = f" at {checked['stage']}" if str(checked.get("stage", "")).startswith("probe") else ""
    return TunerError(f"{out}: the package was written but failed to load or run{where}: "
                      f"{(checked.get('failure') or {}).get('raw', 'no result')[:300]}",
                      "serve with tuner.apply_config(model, best_config.yaml) (JIT)")


def _packaged_config(results: Path, tuned, study, best_compiled: bool) -> CompileConfig:
    """The config to package, or :class:`TunerError` saying why there is none."""
    config: CompileConfig | None = tuned.config
    if tuned.verdict != "compile":
        config = _best_compiled(study) if best_compiled else None
        if config is None:
            verdict = tuned.verdict.replace("_", " ")
            raise TunerError(f"{results}: the verdict is {verdict}: there is no compiled config to package",
                             "serve the model as it is, or give --best-compiled to package the best compiled "
                             "config anyway")
    assert config is not None
    settings = study.user_attrs.get("settings") or {}
    if settings.get("task", "infer") != "infer":
        raise TunerError(f"{results}: a {settings.get('task')} run; a package serves inference only",
                         "tune the serving workload with --task infer, then package that run")
    return config


def _best_compiled(study) -> CompileConfig | None:
    from ..decide.verdict import ranked
    from ..study import scoring_from_study

    scoring = scoring_from_study(study)
    best = ranked(study, scoring)[2] if scoring is not None else []
    return CompileConfig.from_dict(best[0].user_attrs["config"]) if best else None


def _refusal(built: dict) -> str:
    where = built.get("export_stopped_at")
    why = built.get("export_error") or (built.get("failure") or {}).get("raw", "no result")
    return (f"torch.export cannot take the model: stopped at {where}: {why}" if where
            else f"torch.export cannot take the model: {why}")


def _record(measured: Mapping[str, Any], config: CompileConfig, built: dict, checked: dict) -> dict[str, Any]:
    """The package's record in ``measured.package``; ``config``: the config the package was asked for."""
    jit = measured.get("speedup_vs_eager") or measured.get("best_compiled_speedup")
    speedup = checked.get("speedup")
    # the spread between fresh processes the confirmation measured (log scale, about a share)
    tolerance = max(STEP_TOLERANCE, float(measured.get("process_spread") or measured.get("spread") or 0.0))
    record: dict[str, Any] = {
        "path": PACKAGE_NAME, "package_mb": round(built["package_mb"], 1), "export_s": round(built["export_s"], 2),
        "aoti_compile_s": round(built["aoti_compile_s"], 2), "load_s": round(checked["load_s"], 3),
        "first_call_s": round(checked["first_call_s"], 3), "step_ms": round(checked["step_s"] * 1e3, 3),
        "speedup_vs_eager": round(speedup, 3) if speedup else None, "jit_speedup_vs_eager": jit,
        "correct": bool(checked.get("correct")), "checked_inputs": checked.get("checked_inputs"),
        "dynamic_dims": built.get("dynamic_dims") or {},
        "shapes": built.get("shapes_said") or [], "input_order": built.get("input_order") or [],
        "probes": [{k: p[k] for k in ("probe", "inside", "outcome")} for p in checked.get("probes") or []],
        "not_carried": not_carried(config, built), "inputs_checked": True,
        "isa_level": built.get("isa_level"), "required_cpu_flags": (built.get("cpu") or {}).get("required_flags"),
        "target_verified": bool(built.get("target_verified")), "archive_sha256": built.get("archive_sha256"),
        "toolchain": built.get("toolchain"),
        "packaged": {k: built["packaged"][k] for k in ("config_label", "change", "fold_at_runtime")},
        "refused": [{k: r[k] for k in ("change", "config_label", "error")} for r in built.get("refused") or []],
    }
    notes = []
    if config.target != "whole":
        notes.append(f"the whole model is packaged; the JIT config compiles target {config.target!r}")
    if built["packaged"]["change"] != "as tuned":
        notes.append(f"AOTInductor refused the tuned config; packaged {built['packaged']['change']}")
    if notes:
        record["note"] = "; ".join(notes)
    record.update(_recommendation(checked, speedup, jit, tolerance))
    return record


def _recommendation(checked: dict, speedup: float | None, jit: float | None, tolerance: float) -> dict[str, Any]:
    if not checked.get("correct"):
        return {"recommended": False, "why": f"its outputs differ from eager: {checked.get('correctness_error')}"}
    if speedup and jit and speedup < jit * (1 - tolerance):
        return {"recommended": False, "why": f"its steps run {speedup:.2f}x eager against the JIT config's "
                                             f"{jit:.2f}x, beyond the {tolerance:.0%} noise"}
    steps = f"{speedup:.2f}x eager (JIT {jit:.2f}x)" if speedup and jit else "timed"
    return {"recommended": True, "why": f"matches eager on every distinct input; steps {steps}"}


def not_carried(config: CompileConfig, built: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The tuned settings the package does not hold, each with why: what AOTInductor cannot hold
    at all, and, where it refused ``config`` and a nearer one was packaged (``built["packaged"]``),
    what that one dropped (tf32 and bf16 are carried: the build compiles at the config's precision)."""
    lost: list[dict[str, Any]] = []
    if config.backend != "inductor":
        lost.append({"setting": "backend", "value": config.backend, "why": "AOTInductor compiles with inductor: the "
                     "package runs inductor's code at its default options, not the measured backend's"})
    if config.target != "whole":
        lost.append({"setting": "target", "value": config.target, "why": "the whole model is packaged as one graph"})
    mode = config.mode if config.backend == "inductor" and config.mode != "default" else None
    options = {**_mode_options(mode), **config.options}  # a mode is a named set of options: torch's own
    if options.get("triton.cudagraphs"):
        lost.append({"setting": "triton.cudagraphs", "value": True, "why": f"part of {config.mode or 'the options'}; "
                     "a package runs without CUDA graphs: capture them in the serving code"})
    for kind in ("mark_dynamic", "mark_unbacked"):
        if getattr(config, kind, None):
            lost.append({"setting": kind, "value": getattr(config, kind), "why": "a package's varying dims are its "
                         "Dims (input_dims() or the schedule's range), not per-call marks"})
    for name, value in (config.dynamo or {}).items():
        lost.append({"setting": f"dynamo.{name}", "value": value, "why": "export traces without Dynamo's settings"})
    if config.dynamic is not None:
        lost.append({"setting": "dynamic", "value": config.dynamic, "why": "a package's shapes are its Dims"})
    return lost + _dropped(config, built or {})


def _dropped(config: CompileConfig, built: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What the packaged config lacks of ``config`` where AOTInductor refused it."""
    packaged = built.get("packaged")
    if not packaged or packaged["change"] == "as tuned":
        return []
    why = f"AOTInductor refused the tuned config ({(built.get('refused') or [{}])[0].get('error', '?')[:160]}); " \
          f"packaged {packaged['change']}"
    got = CompileConfig.from_dict(packaged["config"])
    lost = []
    if (got.mode or "default") != (config.mode or "default"):
        lost.append({"setting": "mode", "value": config.mode, "why": why})
    lost += [{"setting": f"options.{name}", "value": value, "why": why} for name, value in config.options.items()
             if name not in got.options]
    return lost


def package_line(record: dict) -> str:
    """The one line the terminal and the reports give a package."""
    head = (f"package {record['path']}: load {record['load_s']:.2f} s, first call {record['first_call_s']:.2f} s, "
            f"step {record['step_ms']:.1f} ms")
    return f"{head}; {'recommended' if record.get('recommended') else 'NOT recommended'}: {record.get('why')}"
