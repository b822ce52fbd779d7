"""What a package's code is built for, inside the build process: the inductor options that hold
its C++ to an x86-64 ISA level (tuner/runtime/machine_facts.py says why), the record the package
keeps of this machine (CPU level and flags, a GPU's capability), and the check, once it is built,
that the compiler was given that level and nothing beyond what the record requires.
"""
from __future__ import annotations

from typing import Any

from ..runtime import machine_facts as facts


def cpu_target(level: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The inductor options that build at ``level`` (``cpp.march``; ``cpp.simdlen``, so the
    vector code stays within the level), and the package's ``cpu`` record: the level, the vector
    ISA inductor picks under those options and the flags it adds, the flags the code requires,
    and this CPU's full flags and model."""
    from torch._inductor import config as inductor_config
    from torch._inductor import cpu_vec_isa

    options = {} if level == facts.NATIVE else {"cpp.march": level, "cpp.simdlen": facts.SIMDLEN[level]}
    with inductor_config.patch(options):
        isa = cpu_vec_isa.pick_vec_isa()
        vector, vector_options = (str(isa), isa.build_arch_flags()) if isa else ("", "")
    flags = facts.cpu_flags() or []
    return options, {"isa_level": level, "vector_isa": vector, "vector_options": vector_options,
                     "required_flags": facts.required_flags(level, flags, vector_options), "flags": flags,
                     "model": facts.cpu_model(), **_levels()}


def _levels() -> dict[str, Any]:
    """Every x86-64 level with all the flags it needs, lowest first: a loader that holds no table of
    its own (examples/serve_cpp) names the level to rebuild for from it."""
    return {"levels": {name: facts.level_flags(name) for name in facts.LEVELS}} if facts.x86() else {}


def gpu_record(device: str) -> dict[str, Any] | None:
    """A CUDA package's ``cuda`` record (compute capability, name, CUDA release); None on CPU."""
    return facts.cuda_facts(device) if device.startswith("cuda") else None


def off_target(used: list[str], cpu: dict[str, Any]) -> str | None:
    """Why the target options the compiler recorded (``used``, tuner/runtime/package_meta.py
    ``compiled_flags``) break the ``cpu`` record; None where they keep it (or a native build,
    which requires every flag of this CPU anyway)."""
    level = cpu["isa_level"]
    if level == facts.NATIVE:
        return None
    marches = {t for t in used if t.startswith("-march=")}
    if marches - {f"-march={level}"}:
        return f"inductor compiled with {', '.join(sorted(marches))}, not -march={level}"
    features = facts.instruction_flags(facts.flags_of_options(" ".join(t for t in used if t not in marches)))
    beyond = facts.missing_flags(features, cpu["required_flags"])
    if beyond:
        return f"inductor compiled for {', '.join(beyond)}, beyond the flags {level} and its vector ISA require"
    return None
