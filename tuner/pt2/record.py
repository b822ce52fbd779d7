"""What a ``.pt2`` says about itself, and the checks that hold a serving process to it.

``compile-tune package`` writes one JSON string into AOTInductor's package metadata (key
:data:`META_KEY`), with the fields of :data:`META_FIELDS`: the torch release, device and thread
count it was built and measured for, the CPU it runs on (an x86-64 ISA level and the flags its code
requires) or the GPU (compute capability), each top-level tensor input's dtype and shape and the
bounds of its varying dimensions, the tensors the loader receives in order (for C++ callers), and
the config it was compiled from with the precision it computes in. Once built, the record is
sealed (:func:`seal`): the sha256 of every file in the archive and of the weights in its shared
object, the compiler that built it and the glibc and libstdc++ its code needs, the source
``best_config.yaml`` and the project's commit; and the archive's own digest goes beside it
(``model.pt2.sha256``, as ``sha256sum`` writes it). The metadata is read from the archive itself
before anything is loaded, so a package built for another torch, CPU, GPU or C++ runtime, or one
altered since, is refused in one line instead of crashing the process that loads its code.
"""
from __future__ import annotations

import hashlib
import json
import re
import struct
import subprocess
import zipfile
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from . import machine, toolchain

#: The key of compile-tune's record in AOTInductor's package metadata (values must be strings).
META_KEY = "compile_tune"
#: The record's schema: 2 added ``schema``, ``digests``, ``toolchain``, ``target_verified`` and
#: ``source``; a record without ``schema`` is 1. A loader refuses a schema above its own.
SCHEMA = 2
#: The archive's digest, beside it (``sha256sum -c model.pt2.sha256`` checks it too).
DIGEST_SUFFIX = ".sha256"
#: What to do about a package that is not the one built.
_COPY_AGAIN = "copy the package again from where it was built, or rebuild it with `compile-tune package RESULTS`"
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
    "schema": "the version of this record's layout (a loader refuses a newer one)",
    "digests": "sha256 of each file in the archive (members) and of the weights in each shared object (weights)",
    "toolchain": "compiler (path, version) that built it; needs: the newest glibc and libstdc++ (GLIBCXX) "
                 "symbol versions its code uses",
    "target_verified": "whether the compiler's recorded switches were found and checked against isa_level",
    "source": "best_config (path), best_config_sha256 (as it was when the package was built) and commit "
              "(the workload's git commit, null outside a repository)",
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
    if int(meta.get("schema") or 1) > SCHEMA:
        raise ConfigError(f"{path}: its record is schema {meta['schema']}, newer than this compile-tune reads "
                          f"({SCHEMA})", "upgrade compile-tune where it is loaded")
    verify(path, meta)
    device = meta.get("device", "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"{path}: built for {device}, and this process sees no CUDA device",
                          f"serve it on a GPU machine, or {rebuild}")
    absent = machine.missing_device(device, torch.cuda.device_count()) if device.startswith("cuda") else None
    if absent:
        raise ConfigError(f"{path}: {absent}", "make that GPU visible (CUDA_VISIBLE_DEVICES), or rebuild it on "
                          "one this process sees with `compile-tune package RESULTS`")
    runtime = runtime_mismatch(meta)
    if runtime:
        raise ConfigError(f"{path}: {runtime}", "load it on a machine whose C++ runtime is that new (a newer "
                          f"distribution, or conda's libstdcxx-ng first on LD_LIBRARY_PATH), or {rebuild}")
    if meta.get("cpu"):
        refuse_cpu(path, meta["cpu"], machine.cpu_flags())
    elif device == "cpu" and meta.get("cpu_isa"):  # a package built before its CPU flags were recorded
        isa, offered = meta["cpu_isa"], cpu_isas()
        if offered is not None and isa not in offered:
            raise ConfigError(f"{path}: built for CPUs with {isa} vector instructions; this CPU offers "
                              f"{', '.join(offered) or 'none'}", f"serve it on a CPU with {isa}, or {rebuild}")
    if device.startswith("cuda") and meta.get("cuda"):
        why = machine.cuda_mismatch(meta["cuda"], machine.cuda_facts(device))
        if why:
            raise ConfigError(f"{path}: built for another GPU: {why}", "rebuild it on this GPU with "
                              "`compile-tune package RESULTS` (a package holds kernels for one compute capability)")


def runtime_mismatch(meta: dict[str, Any]) -> str | None:
    """Why this machine's glibc or libstdc++ is older than the package's code needs; None where not."""
    return toolchain.toolchain_mismatch((meta.get("toolchain") or {}).get("needs") or {})


def refuse_cpu(path: Path, cpu: dict[str, Any], here: list[str] | None) -> None:
    """Refuse, in one line, code built for CPU flags (``cpu["required_flags"]``) that ``here``
    lacks; nothing where this CPU's flags cannot be read."""
    lacking = machine.missing_flags(cpu.get("required_flags") or [], here) if here is not None else []
    if not lacking:
        return
    level = cpu.get("isa_level") or "its build CPU"
    target = machine.rebuild_level(cpu.get("isa_level"), here or [])
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


# --------------------------------------------------------------------------- sealing and verifying


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def git_commit(where: Path) -> str | None:
    """The commit checked out at ``where`` (its dirty state aside); None outside a git repository."""
    try:
        proc = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else None


def seal(path: Path, extra: dict[str, Any], compiler: str) -> dict[str, Any]:
    """Complete the record of the package AOTInductor wrote at ``path`` (its metadata JSON is
    rewritten; its code and weights are not touched): ``schema``, ``digests``, ``toolchain`` and
    ``extra``; then write the archive's digest beside it. Returns the toolchain record and the
    archive's sha256."""
    members, weights, needs = _digests(path)
    tools = {"compiler": toolchain.compiler_facts(compiler), "needs": needs}
    sealed = {"schema": SCHEMA, "digests": {"members": members, "weights": weights}, "toolchain": tools, **extra}
    tmp = path.with_name(path.name + ".sealing")
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename.endswith("_metadata.json"):
                meta = json.loads(data)
                if META_KEY in meta:
                    meta[META_KEY] = json.dumps({**json.loads(meta[META_KEY]), **sealed})
                    data = json.dumps(meta).encode()
            dst.writestr(item, data)
    tmp.replace(path)
    archive = sha256_file(path)
    path.with_name(path.name + DIGEST_SUFFIX).write_text(f"{archive}  {path.name}\n")
    return {"toolchain": tools, "archive_sha256": archive}


def _digests(path: Path) -> tuple[dict[str, str], dict[str, str], dict[str, str | None]]:
    """sha256 of each member but the metadata, of the weights in each shared object, and the
    newest glibc/libstdc++ versions the shared objects need."""
    members: dict[str, str] = {}
    weights: dict[str, str] = {}
    needs: dict[str, str | None] = {"glibc": None, "glibcxx": None}
    with zipfile.ZipFile(path) as archive:
        for name in archive.namelist():
            if name.endswith("_metadata.json"):
                continue
            data = archive.read(name)
            members[name] = hashlib.sha256(data).hexdigest()
            if name.endswith(".so"):
                span = toolchain.weights_span(data)
                if span:
                    weights[name] = hashlib.sha256(data[span[0]:span[1]]).hexdigest()
                for key, version in toolchain.runtime_needs(data).items():
                    if version and (needs[key] is None or toolchain.newer(version, needs[key] or "")):
                        needs[key] = version
    return members, weights, needs


def _member(archive: zipfile.ZipFile, raw, info: zipfile.ZipInfo) -> bytes:
    """A member's bytes as stored. AOTInductor stores its files uncompressed and its loader ignores
    their CRCs, so bytes changed in place load; they are read here as it reads them, for the digest
    to say what changed (zipfile would stop at the CRC)."""
    if info.compress_type != zipfile.ZIP_STORED:
        try:
            return archive.read(info)
        except zipfile.BadZipFile:
            return b""
    raw.seek(info.header_offset + 26)
    name_len, extra_len = struct.unpack("<HH", raw.read(4))
    raw.seek(info.header_offset + 30 + name_len + extra_len)
    return raw.read(info.compress_size)


def verify(path: Path, meta: dict[str, Any]) -> None:
    """Refuse, in one line, a package whose weights, shared object or any other file differ from
    the digests its record holds, or whose archive differs from the digest beside it. A record
    without digests (schema 1) is not checked."""
    digests = meta.get("digests") or {}
    if digests:
        with zipfile.ZipFile(path) as archive, open(path, "rb") as raw:
            infos = {info.filename: info for info in archive.infolist()}
            for name, want in (digests.get("weights") or {}).items():
                data = _member(archive, raw, infos[name]) if name in infos else b""
                span = toolchain.weights_span(data) if data else None
                got = hashlib.sha256(data[span[0]:span[1]]).hexdigest() if span else None
                if got != want:
                    raise ConfigError(f"{path}: its weights (in {Path(name).name}) are not the ones it was built with: "
                                      f"sha256 {str(got)[:16]}, its record says {want[:16]}", _COPY_AGAIN)
            for name, want in (digests.get("members") or {}).items():
                got = hashlib.sha256(_member(archive, raw, infos[name])).hexdigest() if name in infos else None
                if got != want:
                    what = "shared object" if name.endswith(".so") else "file"
                    state = "missing" if got is None else "altered"
                    raise ConfigError(f"{path}: its {what} {Path(name).name} is {state}: sha256 {str(got)[:16]}, "
                                      f"its record says {want[:16]}", _COPY_AGAIN)
    beside = path.with_name(path.name + DIGEST_SUFFIX)
    if beside.exists():
        want = (beside.read_text().split() or [""])[0]
        got = sha256_file(path)
        if got != want:
            raise ConfigError(f"{path}: the archive's sha256 is {got[:16]}, {beside.name} says {want[:16]}",
                              _COPY_AGAIN)
