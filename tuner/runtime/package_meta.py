"""What a ``.pt2`` says about itself, and the checks that hold a serving process to it.

``compile-tune package`` writes one JSON string into AOTInductor's package metadata (key
:data:`META_KEY`): the torch release, device and CPU instruction set it was built for, each
top-level tensor input's dtype and shape, the bounds of its varying dimensions, the names of the
tensors the loader receives in its order (for C++ callers), and the precision it computes in.
The metadata is read from the archive itself before anything is loaded, so a package built for
another torch is refused in one line instead of crashing the process that loads its kernels.
"""
from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError

#: The key of compile-tune's record in AOTInductor's package metadata (values must be strings).
META_KEY = "compile_tune"


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
    """Refuse, in one line, a package built for another torch release, device or CPU
    instruction set: its kernels would fail to load or crash the process."""
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
    isa = meta.get("cpu_isa")
    if device == "cpu" and isa:
        offered = cpu_isas()
        if offered is not None and isa not in offered:
            raise ConfigError(f"{path}: built for CPUs with {isa} vector instructions; this CPU offers "
                              f"{', '.join(offered) or 'none'}", f"serve it on a CPU with {isa}, or {rebuild}")


def cpu_isa() -> str:
    """The vector instruction set inductor compiles CPU kernels for here (``""`` for none)."""
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
