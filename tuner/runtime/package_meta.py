"""What a ``.pt2`` says about itself, and the checks that hold a serving process to it.

``compile-tune package`` writes one JSON string into AOTInductor's package metadata (key
:data:`META_KEY`), with the fields of :data:`META_FIELDS`: the torch release, device and thread
count it was built and measured for, the CPU it runs on (an x86-64 ISA level and the flags its code
requires) or the GPU (compute capability), each top-level tensor input's dtype and shape and the
bounds of its varying dimensions, the tensors the loader receives in order (for C++ callers), and
the config it was compiled from with the precision it computes in. The metadata is read from the
archive itself before anything is loaded, so a package built for another torch, CPU or GPU is
refused in one line instead of crashing the process that loads its code.
"""
from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from . import machine_facts

#: The key of compile-tune's record in AOTInductor's package metadata (values must be strings).
META_KEY = "compile_tune"
#: Every field of compile-tune's record, and what it holds (examples/serve_cpp reads them all).
META_FIELDS = {
    "torch": "the torch release it was built with (a package serves that release only)",
    "device": "cpu, or the CUDA device it was built on",
    "threads": "the thread count it was measured with",
    "cpu_isa": "inductor's vector ISA for its kernels (avx2, avx512 ...); older loaders check only this",
    "cpu": "isa_level, vector_isa, vector_options, required_flags (what its code needs), flags (the build "
           "CPU's, all of them), model, levels (each x86-64 level's flags, for a loader with no table of its own)",
    "cuda": "capability, name and cuda (release) of the GPU it was built for; null on CPU",
    "tensors": "each top-level tensor input's dtype and example shape",
    "dims": "each varying dimension's [min, max]",
    "dims_from": "where each bound came from: input_dims() or the schedule's range",
    "fixed": "each top-level tensor input's example shape (its dims not in dims are fixed at it)",
    "input_order": "the tensors the loader takes, in order",
    "keyword_inputs": "whether the model takes its inputs by keyword",
    "config": "the config it was compiled from, in words",
    "config_change": "how that config differs from the tuned one ('as tuned' where it does not)",
    "fold_at_runtime": "AOTInductor's runtime constant folding: its weights can be swapped (load_weights)",
    "precision": "the config's precision: null, bf16 (autocast inside the package) or tf32",
    "matmul_precision": "the float32 matmul precision it was compiled and is run at ('high' for tf32), or null",
}


class PackageInputError(ValueError):
    """An input the package was not built for: wrong dtype, device, rank, or a size outside its
    bounds. Raised before the package runs, so the process goes on serving."""


def read_metadata(path: Path) -> dict[str, Any] | None:
    """compile-tune's record of the package at ``path``, read from the archive (no kernels loaded);
    None for a package built without one."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if n.endswith("_metadata.json")]
            for name in names:
                meta = json.loads(archive.read(name))
                if META_KEY in meta:
                    return {**json.loads(meta[META_KEY]), "aoti": {k: v for k, v in meta.items() if k != META_KEY}}
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable .pt2 package ({exc})",
                          "write it again with `compile-tune package RESULTS`") from exc
    return None


def refuse_mismatch(path: Path, meta: dict[str, Any]) -> None:
    """Refuse, in one line, a package built for another torch release or device, for CPU
    instructions this CPU lacks, or for another GPU: its code would fail to load or kill the
    process (an illegal instruction) once it runs."""
    import torch

    built, here = str(meta.get("torch", "")).split("+")[0], torch.__version__.split("+")[0]
    rebuild = "rebuild it here with `compile-tune package RESULTS`"
    if built and built != here:
        raise ConfigError(f"{path}: built for torch {meta['torch']}, this process runs torch {torch.__version__}",
                          f"load it under torch {built}, or {rebuild}")
    device = meta.get("device", "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"{path}: built for {device}, and this process sees no CUDA device",
                          f"serve it on a GPU machine, or {rebuild}")
    if meta.get("cpu"):
        refuse_cpu(path, meta["cpu"], machine_facts.cpu_flags())
    elif device == "cpu" and meta.get("cpu_isa"):  # a package built before its CPU flags were recorded
        isa, offered = meta["cpu_isa"], cpu_isas()
        if offered is not None and isa not in offered:
            raise ConfigError(f"{path}: built for CPUs with {isa} vector instructions; this CPU offers "
                              f"{', '.join(offered) or 'none'}", f"serve it on a CPU with {isa}, or {rebuild}")
    if device.startswith("cuda") and meta.get("cuda"):
        why = machine_facts.cuda_mismatch(meta["cuda"], machine_facts.cuda_facts(device))
        if why:
            raise ConfigError(f"{path}: built for another GPU: {why}", "rebuild it on this GPU with "
                              "`compile-tune package RESULTS` (a package holds kernels for one compute capability)")


def refuse_cpu(path: Path, cpu: dict[str, Any], here: list[str] | None) -> None:
    """Refuse, in one line, code built for CPU flags (``cpu["required_flags"]``) that ``here``
    lacks; nothing where this CPU's flags cannot be read."""
    lacking = machine_facts.missing_flags(cpu.get("required_flags") or [], here) if here is not None else []
    if not lacking:
        return
    level = cpu.get("isa_level") or "its build CPU"
    target = machine_facts.rebuild_level(cpu.get("isa_level"), here or [])
    how = f"`compile-tune package RESULTS --isa {target}`" if target else "`compile-tune package RESULTS`"
    raise ConfigError(f"{path}: built for {level} ({cpu.get('model') or 'another CPU'}) and needs "
                      f"{', '.join(lacking)}, which this CPU lacks: its code would die with an illegal instruction",
                      f"rebuild it with {how}, or build it on this machine")


def cpu_isa() -> str:
    """The vector instruction set inductor compiles CPU kernels for here, under the config in
    force (``""`` for none)."""
    from torch._inductor import cpu_vec_isa

    return str(cpu_vec_isa.pick_vec_isa() or "")


def cpu_isas() -> list[str] | None:
    """The vector instruction sets this CPU offers, from its flags (no test kernel compiled)."""
    try:
        from torch._inductor import config as inductor_config
        from torch._inductor import cpu_vec_isa
    except ImportError:
        return None
    with inductor_config.patch({"cpp.vec_isa_ok": True}):
        return [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()]


#: The producer string gcc writes into a shared library's debug info: the compiler, then the
#: target options it was given (``-march=x86-64-v3 -mavx2 ...``; ``-march=native`` expanded).
_PRODUCER = re.compile(rb"GNU C[\w+]* [\d.]+((?: -[\w=.,+-]+)+)")


def compiled_flags(path: Path) -> list[str]:
    """The target options (``-march=...``, ``-m<feature>``) the package's shared libraries were
    compiled with, as the compiler recorded them in their debug info (gcc does, with the ``-g1``
    inductor builds with); ``[]`` where none is recorded. Reads the archive; loads nothing."""
    found: set[str] = set()
    with zipfile.ZipFile(path) as archive:
        for name in (n for n in archive.namelist() if n.endswith(".so")):
            with archive.open(name) as member:
                tail = b""
                for block in iter(lambda: member.read(1 << 20), b""):
                    chunk = tail + block
                    for hit in _PRODUCER.finditer(chunk):
                        found.update(t for t in hit.group(1).decode().split() if t.startswith("-m"))
                    tail = chunk[-4096:]
    return sorted(found)


def check_inputs(meta: dict[str, Any], args: tuple, kwargs: dict) -> None:
    """Raise :class:`PackageInputError` naming the input, for a top-level tensor the package was
    not built for (dtype, device, rank, a fixed size, or a size outside a varying dim's bounds)."""
    import torch

    given = dict(kwargs)
    given.update({str(i): a for i, a in enumerate(args)})
    for name, want in (meta.get("tensors") or {}).items():
        value = given.get(name)
        if not isinstance(value, torch.Tensor):
            if value is None and name not in given:
                raise PackageInputError(f"input {name!r} is missing; the package takes {_signature(meta)}")
            continue
        if str(value.dtype) != want["dtype"]:
            raise PackageInputError(f"input {name!r} is {value.dtype}; the package was built for {want['dtype']}")
        if value.device.type != meta.get("device", "cpu").split(":")[0]:
            raise PackageInputError(f"input {name!r} is on {value.device}; the package runs on {meta.get('device')}")
        shape, bounds = list(want["shape"]), (meta.get("dims") or {}).get(name, {})
        if value.dim() != len(shape):
            raise PackageInputError(f"input {name!r} has {value.dim()} dims; the package takes {len(shape)} "
                                    f"({_dims_text(name, shape, bounds)})")
        for d, size in enumerate(value.shape):
            lo, hi = bounds.get(str(d), (shape[d], shape[d]))
            if not lo <= size <= hi:
                raise PackageInputError(f"input {name!r} dim {d} is {size}; the package takes "
                                        f"{_dims_text(name, shape, bounds)}")


def _dims_text(name: str, shape: list[int], bounds: dict[str, list[int]]) -> str:
    parts = []
    for d, n in enumerate(shape):
        lo, hi = bounds.get(str(d), (n, n))
        parts.append(f"dim {d} {lo}..{hi}" if lo != hi else f"dim {d} = {n}")
    return f"{name}: " + ", ".join(parts) + " (widen them with input_dims() in the workload and package again)"


def _signature(meta: dict[str, Any]) -> str:
    return ", ".join(meta.get("tensors") or {}) or "no tensor inputs"
