"""The machine compiled code is built for: the x86-64 ISA level of its CPU code, the CPU flags
that code needs, a CUDA device's compute capability; and the comparisons that refuse a ``.pt2``
(tuner/pt2/record.py) or a warm-start bundle (tuner/runtime/warmstart.py) on a machine
that lacks them, before any of its code loads.

Inductor compiles C++ with ``-march=native`` unless ``torch._inductor.config.cpp.march`` names a
target, and adds the flags of the vector ISA it picks (``-mavx512f ... -mavx512vnni``). Code built
so on a newer CPU can die with an illegal instruction on an older one of the same vector class.
A package is therefore built for a named level of the x86-64 psABI (``x86-64-v2``: SSE4.2;
``-v3``: AVX2, FMA; ``-v4``: AVX-512 F/BW/CD/DQ/VL), its vector code held to that level's width
(``cpp.simdlen``), and records the flags it requires: the level's, plus any the vector ISA adds
(inductor's 512-bit ISA on a CPU with VNNI uses ``avx512_vnni``). ``native`` builds for this very
CPU and requires every instruction-set flag it has.

Example:
    >>> highest_level(["sse4_2", "ssse3", "pni", "cx16", "lahf_lm", "popcnt"])
    'x86-64-v2'
    >>> missing_flags(["avx2", "fma"], ["fma"])
    ['avx2']
"""
from __future__ import annotations

import platform
from collections.abc import Iterable
from typing import Any

from ..core.errors import ConfigError

#: The x86-64 micro-architecture levels, each with the flags (as /proc/cpuinfo names them) it adds
#: to the one before (x86-64-v1, every x86-64 CPU, is implied). SSE3 is ``pni``, LZCNT ``abm``.
LEVELS: dict[str, tuple[str, ...]] = {
    "x86-64-v2": ("cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3"),
    "x86-64-v3": ("abm", "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "movbe", "xsave"),
    "x86-64-v4": ("avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl"),
}
#: Build for this very CPU (inductor's own ``-march=native``): it requires every instruction-set flag.
NATIVE = "native"
CHOICES = (*LEVELS, NATIVE)
#: The widest vector code inductor may emit at a level (``cpp.simdlen``): v2 has no AVX, so none.
SIMDLEN = {"x86-64-v2": 0, "x86-64-v3": 256, "x86-64-v4": 512}
#: A CUDA package's default level: its C++ is mostly the wrapper that launches the GPU's kernels,
#: so a level every x86 server of the last decade has (AVX2) costs it nothing, while the build
#: host's own (Sapphire Rapids' AVX-512) would refuse it on the same GPU behind an AMD EPYC.
PORTABLE = "x86-64-v3"
#: gcc's ``-m`` option names where /proc/cpuinfo spells the flag otherwise.
_GCC_NAMES = {"avx512vnni": "avx512_vnni", "avx512bf16": "avx512_bf16", "avx512fp16": "avx512_fp16",
              "amx-tile": "amx_tile", "amx-bf16": "amx_bf16", "amx-int8": "amx_int8", "amx-fp16": "amx_fp16",
              "avxvnni": "avx_vnni", "lzcnt": "abm", "sse3": "pni", "pclmul": "pclmulqdq", "sha": "sha_ni",
              "bmi": "bmi1"}
#: /proc/cpuinfo flags that name instructions code may use (the rest say how the CPU or the kernel
#: behaves: ``constant_tsc``, ``hypervisor``): the prefixes of the x86 ones.
_INSTRUCTION_PREFIXES = ("3dnow", "abm", "adx", "aes", "amx", "avx", "bmi", "clflushopt", "clwb", "clzero", "cmov",
                         "cx16", "cx8", "f16c", "fma", "fsgsbase", "fxsr", "gfni", "lahf_lm", "mmx", "movbe", "movdir",
                         "pclmulqdq", "pni", "popcnt", "rdpid", "rdrand", "rdseed", "rdtscp", "serialize", "sha",
                         "sse", "ssse3", "tbm", "vaes", "vpclmulqdq", "waitpkg", "xop", "xsave")


def x86() -> bool:
    return platform.machine() in ("x86_64", "AMD64")


def cpu_flags() -> list[str] | None:
    """This CPU's flags as /proc/cpuinfo lists them (``Features`` on Arm); None where unreadable."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return value.split()
    except OSError:
        return None
    return None


def cpu_model() -> str:
    """This CPU's model name, for messages (``""`` where unknown)."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    return value.strip()
    except OSError:
        pass
    return platform.processor()


def highest_level(flags: Iterable[str]) -> str | None:
    """The highest x86-64 level whose flags ``flags`` all hold; None below x86-64-v2."""
    have, best = set(flags), None
    for level in LEVELS:
        if not set(level_flags(level)) <= have:
            break
        best = level
    return best


def level_flags(level: str) -> list[str]:
    """Every flag ``level`` requires (the levels below it included)."""
    names = list(LEVELS)
    return sorted({f for name in names[:names.index(level) + 1] for f in LEVELS[name]})


def instruction_flags(flags: Iterable[str]) -> list[str]:
    """The flags that name instructions (all of them off x86, where there is no such list)."""
    if not x86():
        return sorted(set(flags))
    return sorted({f for f in flags if f.startswith(_INSTRUCTION_PREFIXES)})


def flags_of_options(options: str) -> list[str]:
    """The CPU flags a compiler command line's ``-m<feature>`` options use
    (``-mavx512vnni`` -> ``avx512_vnni``); ``-march``/``-mtune`` and ``-mno-*`` are not features."""
    found = set()
    for token in options.split():
        if token.startswith("-m") and not token.startswith(("-march", "-mtune", "-mno-")):
            name = token[2:]
            found.add(_GCC_NAMES.get(name, name))
    return sorted(found)


def required_flags(level: str, flags: Iterable[str], vector_options: str = "") -> list[str]:
    """The flags code built for ``level`` on a CPU with ``flags`` needs: the level's and those of
    the vector ISA's options, or, for :data:`NATIVE`, every instruction flag of the CPU."""
    if level == NATIVE:
        return instruction_flags(flags)
    return sorted(set(level_flags(level)) | set(flags_of_options(vector_options)))


def missing_flags(required: Iterable[str], here: Iterable[str]) -> list[str]:
    """The required flags this CPU lacks, sorted."""
    return sorted(set(required) - set(here))


def cuda_facts(device: str) -> dict[str, Any]:
    """A CUDA device's compute capability, name, and the CUDA release torch was built with."""
    import torch

    major, minor = torch.cuda.get_device_capability(device)
    return {"capability": [major, minor], "name": torch.cuda.get_device_name(device), "cuda": torch.version.cuda}


def cuda_mismatch(built: dict[str, Any], here: dict[str, Any]) -> str | None:
    """Why CUDA code built on ``built`` (:func:`cuda_facts`) cannot run on ``here``; None when it can.

    A package holds SASS (cubins) for the capability it was built on, no PTX to compile again
    (AOTInductor embeds cubins unless ``aot_inductor.emit_multi_arch_kernel`` is set). SASS for
    ``sm_XY`` runs on a GPU of the same major X and a minor of Y or above (sm_80 code runs on 8.6
    and 8.9), never on another major. From 9.0 on, Triton compiles for the arch-specific target
    (``sm_90a``, ``sm_100a``), which runs on that capability alone. The code is also linked against
    one CUDA release's runtime (a major release apart, its symbols differ).

    Example:
        >>> cuda_mismatch({"capability": [8, 0], "name": "A100", "cuda": "12.4"},
        ...               {"capability": [9, 0], "name": "H100", "cuda": "12.4"})
        'its kernels are compiled for compute capability 8.0 (A100); this GPU is 9.0 (H100)'
        >>> cuda_mismatch({"capability": [8, 0], "name": "A100", "cuda": "12.4"},
        ...               {"capability": [8, 6], "name": "A10", "cuda": "12.4"}) is None
        True
    """
    b, h = tuple(built.get("capability") or ()), tuple(here.get("capability") or ())
    if b and h and not runs_on(b, h):
        return (f"its kernels are compiled for compute capability {'.'.join(map(str, b))} ({built.get('name')}); "
                f"this GPU is {'.'.join(map(str, h))} ({here.get('name')})")
    b_cuda, h_cuda = str(built.get("cuda") or ""), str(here.get("cuda") or "")
    if b_cuda and h_cuda and b_cuda.split(".")[0] != h_cuda.split(".")[0]:
        return f"it was built with CUDA {b_cuda}; this torch runs CUDA {h_cuda}"
    return None


def runs_on(built: tuple, here: tuple) -> bool:
    """Whether SASS compiled for capability ``built`` runs on a GPU of capability ``here`` (the
    rule :func:`cuda_mismatch` states)."""
    if built[0] >= 9:  # sm_90a, sm_100a ...: the arch-specific target runs on that capability only
        return tuple(built) == tuple(here)
    return here[0] == built[0] and here[1] >= built[1]


def missing_device(device: str, count: int) -> str | None:
    """Why a process that sees ``count`` CUDA devices lacks ``device`` (``cuda:1``); None where it has it."""
    index = int(device.split(":")[1]) if ":" in device else 0
    if index < count:
        return None
    seen = ", ".join(f"cuda:{i}" for i in range(count)) or "none"
    return f"built for {device}, and this process sees {count} CUDA device{'s' if count != 1 else ''} ({seen})"


def choose_level(requested: str | None, flags: list[str] | None, device: str = "cpu") -> str:
    """The level to build for: ``requested`` where this CPU has it (the package is checked here,
    so a level above this CPU's could not be), else the highest this CPU has, at most
    :data:`PORTABLE` for a CUDA package; :data:`NATIVE` off x86 or where the flags cannot be read.
    Raises :class:`ConfigError` for a level this CPU lacks.

    Example:
        >>> choose_level(None, list(LEVELS["x86-64-v2"]))
        'x86-64-v2'
        >>> choose_level(None, [f for level in LEVELS for f in LEVELS[level]], device="cuda:0")
        'x86-64-v3'
    """
    if requested == NATIVE or (requested is None and (not x86() or flags is None)):
        return NATIVE
    if requested is not None and requested not in LEVELS:
        raise ConfigError(f"--isa {requested}: not a level", f"give one of {', '.join(CHOICES)}")
    if not x86():
        raise ConfigError(f"--isa {requested}: an x86-64 level, and this machine is {platform.machine()}",
                          "leave --isa out to build for this CPU")
    ours = highest_level(flags or [])
    if requested is None:
        if ours and device.startswith("cuda") and list(LEVELS).index(ours) > list(LEVELS).index(PORTABLE):
            return PORTABLE
        return ours or NATIVE
    lacking = missing_flags(level_flags(requested), flags) if flags is not None else []
    if lacking:
        raise ConfigError(f"--isa {requested}: this CPU lacks {', '.join(lacking)} (it has up to "
                          f"{ours or 'x86-64-v1'}), and the package is checked on the machine that builds it",
                          f"give --isa {ours}" if ours else "build it on a CPU with that level")
    return requested


def rebuild_level(level: str | None, here: list[str]) -> str | None:
    """The level to rebuild a package for so that a CPU with flags ``here`` runs it: this CPU's
    highest, or the one below ``level`` where ``level`` is within it and only the vector ISA's
    extras (``avx512_vnni``) are missing; None below x86-64-v2."""
    ours = highest_level(here)
    if level in LEVELS and ours is not None and list(LEVELS).index(level) <= list(LEVELS).index(ours):
        below = list(LEVELS)[:list(LEVELS).index(level)]
        return below[-1] if below else None
    return ours
