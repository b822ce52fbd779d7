"""What a package's code is built for, inside the build process: the inductor options that hold
its C++ to an x86-64 ISA level (tuner/pt2/machine.py says why), the vector ISA held to
that level's own features, the record the package keeps of this machine (CPU level and flags, a
GPU's capability), and the check, once it is built, that the compiler was given that level and
nothing beyond what the record requires.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from . import machine as facts

#: torch's CPU feature tests (``torch.cpu``) that inductor's vector ISA choice and its GEMM
#: templates read, and the /proc/cpuinfo flags each needs.
_FEATURE_TESTS = {
    "_is_avx2_supported": ("avx2",),
    "_is_avx512_supported": ("avx512f", "avx512bw", "avx512vl", "avx512dq"),
    "_is_avx512_bf16_supported": ("avx512_bf16",),
    "_is_vnni_supported": ("avx512_vnni",),
    "_is_amx_tile_supported": ("amx_tile",),
    "_is_amx_fp16_supported": ("amx_fp16",),
}


@contextlib.contextmanager
def level_cpu(level: str, flags: list[str] | None) -> Iterator[None]:
    """Inductor sees a CPU of ``level``'s features alone (those of ``flags`` the level includes) for
    the duration: at x86-64-v4 ``pick_vec_isa`` takes the first 512-bit ISA this CPU offers, which
    on Sapphire Rapids is AMX (``-mamx-tile ... -mavx512vnni -mavx512bf16``), code an AMD EPYC with
    x86-64-v4 cannot run. Nothing changes for :data:`~tuner.pt2.machine.NATIVE`."""
    if level == facts.NATIVE or flags is None:
        yield
        return
    import torch
    from torch._inductor import cpu_vec_isa

    allowed = set(flags) & set(facts.level_flags(level))
    saved = {name: getattr(torch.cpu, name) for name in _FEATURE_TESTS}
    for name, needs in _FEATURE_TESTS.items():
        setattr(torch.cpu, name, lambda needs=needs: set(needs) <= allowed)
    _forget_isa_choice(cpu_vec_isa)
    try:
        yield
    finally:
        for name, test in saved.items():
            setattr(torch.cpu, name, test)
        _forget_isa_choice(cpu_vec_isa)


def _forget_isa_choice(cpu_vec_isa) -> None:
    """Inductor caches the ISAs it found (``valid_vec_isa_list``) and, on each ISA object, whether
    it builds and which extras (bf16, amx-fp16) it took: cleared, so the next pick asks again."""
    cpu_vec_isa.valid_vec_isa_list.cache_clear()
    for isa in cpu_vec_isa.supported_vec_isa_list:
        for cls in type(isa).__mro__:
            clear = getattr(cls.__dict__.get("__bool__"), "cache_clear", None)
            if clear is not None:
                clear()
        for extra in ("_is_avx512_bf16_supported", "_is_amx_fp16_supported"):
            isa.__dict__.pop(extra, None)


def cpu_target(level: str, flags: list[str] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The inductor options that build at ``level`` (``cpp.march``; ``cpp.simdlen``, so the
    vector code stays within the level), and the package's ``cpu`` record: the level, the vector
    ISA inductor picks under those options and the flags it adds, the flags the code requires,
    and this CPU's full flags (``flags``, this CPU's by default) and model. Call it inside
    :func:`level_cpu` so that the vector ISA is the level's."""
    from torch._inductor import config as inductor_config
    from torch._inductor import cpu_vec_isa

    options = {} if level == facts.NATIVE else {"cpp.march": level, "cpp.simdlen": facts.SIMDLEN[level]}
    with inductor_config.patch(options):
        isa = cpu_vec_isa.pick_vec_isa()
        vector, vector_options = (str(isa), isa.build_arch_flags()) if isa else ("", "")
    flags = facts.cpu_flags() if flags is None else flags
    return options, {"isa_level": level, "vector_isa": vector, "vector_options": vector_options,
                     "required_flags": facts.required_flags(level, flags or [], vector_options), "flags": flags or [],
                     "model": facts.cpu_model(), **_levels()}


def _levels() -> dict[str, Any]:
    """Every x86-64 level with all the flags it needs, lowest first: a loader that holds no table of
    its own (examples/serve_cpp) names the level to rebuild for from it."""
    return {"levels": {name: facts.level_flags(name) for name in facts.LEVELS}} if facts.x86() else {}


def gpu_record(device: str) -> dict[str, Any] | None:
    """A CUDA package's ``cuda`` record (compute capability, name, CUDA release); None on CPU."""
    return facts.cuda_facts(device) if device.startswith("cuda") else None


def off_target(used: list[str], cpu: dict[str, Any]) -> tuple[bool, str | None]:
    """Whether the target options the compiler recorded (``used``, tuner/pt2/record.py
    ``compiled_flags``) could be checked against the ``cpu`` record, and why they break it (None
    where they keep it). Nothing recorded (clang's producer string, no line tables, compressed
    debug sections) is not a pass: the first is False. A native build requires every flag of this
    CPU anyway, so only whether anything was recorded is said."""
    if not used:
        return False, None
    level = cpu["isa_level"]
    if level == facts.NATIVE:
        return True, None
    marches = {t for t in used if t.startswith("-march=")}
    if not marches:
        return False, None
    if marches - {f"-march={level}"}:
        return True, f"inductor compiled with {', '.join(sorted(marches))}, not -march={level}"
    features = facts.instruction_flags(facts.flags_of_options(" ".join(t for t in used if t not in marches)))
    beyond = facts.missing_flags(features, cpu["required_flags"])
    if beyond:
        return True, f"inductor compiled for {', '.join(beyond)}, beyond the flags {level} and its vector ISA require"
    return True, None
