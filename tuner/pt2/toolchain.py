"""The C++ toolchain behind a ``.pt2``: the compiler that builds it (and whether it knows the x86-64
level asked for), and the C runtime its shared object needs against what this machine has.

A named level (``-march=x86-64-v3``) needs gcc 11 or clang 12; gcc 10 stops with "bad value
('x86-64-v3') for '-march=' switch" after export has run and inductor has generated the code. So the
level is tried once, on an empty file with the flags inductor will add, before anything is exported.

A shared object names the symbol versions it needs (``.gnu.version_r``: ``GLIBC_2.34`` from
libc, ``GLIBCXX_3.4.30`` from libstdc++); a libstdc++ that lacks one fails ``dlopen`` with a line
that names neither the package nor what to do. The highest of each is read from the ELF file here
(no ``objdump`` needed) and kept in the package's record, to refuse it in one line where this
machine's are older.

Example:
    >>> newer("3.4.30", "3.4.29"), newer("2.34", "2.36")
    (True, False)
"""
from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from ..system.user_cache import cache_file, write_whole

#: The ELF section types that list the symbol versions a file needs and defines (GNU extensions).
_VERNEED, _VERDEF = 0x6FFFFFFE, 0x6FFFFFFD
_SYMTAB, _DYNSYM = 2, 11
#: The symbols AOTInductor puts around the weights it embeds in the shared object.
_WEIGHTS = (b"_binary_constants_bin_start", b"_binary_constants_bin_end")
#: Bumped when the probe's command changes, so an old cached answer is not reused.
_PROBE_FORMAT = 1


def newer(a: str, b: str) -> bool:
    """Whether dotted version ``a`` is above ``b``."""
    return _key(a) > _key(b)


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def cpp_compiler(env: dict[str, str] | None = None) -> str:
    """The C++ compiler inductor will run in a fresh process with ``env`` (the trial's): ``CXX``, else
    ``g++`` (``clang++`` on macOS), as torch's ``config.cpp.cxx`` reads it at import."""
    env = dict(os.environ if env is None else env)
    name = env.get("CXX") or ("clang++" if sys.platform == "darwin" else "g++")
    return shutil.which(name) or name


def compiler_facts(compiler: str) -> dict[str, str]:
    """``path`` (resolved) and ``version`` of ``compiler`` (``""`` where it does not say)."""
    path = shutil.which(compiler) or compiler
    version = ""
    try:
        version = subprocess.run([path, "-dumpfullversion", "-dumpversion"], capture_output=True, text=True,
                                 timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return {"path": path, "version": version}


def check_level(level: str, options: str, compiler: str | None = None) -> None:
    """Raise :class:`ConfigError` where ``compiler`` cannot build C++ for ``-march=level`` with the
    vector ISA's ``options``. Tried on an empty file once per compiler, level and options (the
    answer is cached in ``~/.cache/compile-tune``)."""
    compiler = compiler or cpp_compiler()
    facts = compiler_facts(compiler)
    flags = [f"-march={level}", *options.split()]
    said = _probe(facts, flags)
    if said is None:
        return
    named = f"{facts['path']} ({'version ' + facts['version'] if facts['version'] else 'version unknown'})"
    raise ConfigError(f"the C++ compiler {named} cannot build for -march={level}: {said}",
                      "give --isa native (this CPU only) or a level it knows, or set CXX to gcc >= 11 or "
                      "clang >= 12, which know the x86-64-v2/v3/v4 levels")


def _probe(facts: dict[str, str], flags: list[str]) -> str | None:
    """None where the compiler builds an empty file with ``flags``, else its first error line."""
    cache = _probe_cache(facts, flags)
    if cache is not None and cache.exists():
        try:
            return json.loads(cache.read_text())["said"]
        except (OSError, ValueError, KeyError):
            pass
    with tempfile.TemporaryDirectory(prefix="compile-tune-cxx-") as tmp:
        source = Path(tmp) / "empty.cpp"
        source.write_text("int compile_tune_probe() { return 0; }\n")
        try:
            proc = subprocess.run([facts["path"], *flags, "-c", str(source), "-o", str(Path(tmp) / "empty.o")],
                                  capture_output=True, text=True, timeout=120)
            errors = [line.strip() for line in proc.stderr.splitlines() if "error" in line.lower()]
            said = None if proc.returncode == 0 else (errors or proc.stderr.strip().splitlines() or ["failed"])[0]
        except (OSError, subprocess.SubprocessError) as exc:
            said = f"it could not be run ({exc})"
    if cache is not None:
        write_whole(cache, {"said": said, "flags": flags, **facts})
    return said[:300] if said else None


def _probe_cache(facts: dict[str, str], flags: list[str]) -> Path | None:
    try:
        stat = os.stat(facts["path"])
    except OSError:
        return None
    return cache_file("cxx-probe", [_PROBE_FORMAT, os.path.realpath(facts["path"]), stat.st_size, stat.st_mtime_ns,
                                    facts["version"], flags])


# --------------------------------------------------------------------------- ELF: what a shared object needs


def _sections(data: bytes) -> list[tuple[int, int, int, int, int, int]]:
    """(type, addr, offset, size, link, info) of each section of a 64-bit little-endian ELF file."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    out = []
    for i in range(shnum):
        _, kind, _, addr, offset, size, link, info = struct.unpack_from("<IIQQQQII", data, shoff + i * shentsize)
        out.append((kind, addr, offset, size, link, info))
    return out


def _string(data: bytes, table: int, at: int) -> str:
    end = data.index(b"\0", table + at)
    return data[table + at:end].decode(errors="replace")


def version_needs(data: bytes) -> dict[str, list[str]]:
    """The symbol versions the ELF file ``data`` needs, by library (``{"libc.so.6": ["GLIBC_2.34", ...]}``)."""
    sections = _sections(data)
    needs: dict[str, list[str]] = {}
    for kind, _, offset, _, link, count in sections:
        if kind != _VERNEED:
            continue
        strings = sections[link][2]
        at = offset
        for _ in range(count):
            _, cnt, file, aux, nxt = struct.unpack_from("<HHIII", data, at)
            names, here = needs.setdefault(_string(data, strings, file), []), at + aux
            for _ in range(cnt):
                _, _, _, name, anext = struct.unpack_from("<IHHII", data, here)
                names.append(_string(data, strings, name))
                here += anext
            at += nxt
    return needs


def version_defs(data: bytes) -> list[str]:
    """The symbol versions the ELF file ``data`` defines (a libstdc++: ``GLIBCXX_3.4`` ... ``GLIBCXX_3.4.30``)."""
    sections, found = _sections(data), []
    for kind, _, offset, _, link, count in sections:
        if kind != _VERDEF:
            continue
        strings, at = sections[link][2], offset
        for _ in range(count):
            _, _, _, cnt, _, aux, nxt = struct.unpack_from("<HHHHIII", data, at)
            if cnt:
                found.append(_string(data, strings, struct.unpack_from("<I", data, at + aux)[0]))
            at += nxt
    return found


def highest(versions: list[str], prefix: str) -> str | None:
    """The highest of ``versions`` named ``PREFIX_x.y.z``, as ``x.y.z``; None where none is."""
    tails = [v[len(prefix) + 1:] for v in versions if v.startswith(prefix + "_")]
    mine = [t for t in tails if re.fullmatch(r"[\d.]+", t)]
    return max(mine, key=_key) if mine else None


def runtime_needs(data: bytes) -> dict[str, str | None]:
    """The newest glibc and libstdc++ (``GLIBCXX``) symbol versions the shared object ``data`` needs."""
    needs = version_needs(data)
    every = [v for names in needs.values() for v in names]
    return {"glibc": highest(every, "GLIBC"), "glibcxx": highest(every, "GLIBCXX")}


def weights_span(data: bytes) -> tuple[int, int] | None:
    """The file offsets of the weights AOTInductor embedded in the shared object ``data`` (between
    its ``_binary_constants_bin_start`` and ``_end`` symbols); None where it embeds none."""
    sections = _sections(data)
    found: dict[bytes, int] = {}
    for kind, _, offset, size, link, _ in sections:
        if kind not in (_SYMTAB, _DYNSYM):
            continue
        strings = sections[link][2]
        for at in range(offset, offset + size, 24):
            name, _, _, shndx, value, _ = struct.unpack_from("<IBBHQQ", data, at)
            if not name or shndx == 0 or shndx >= len(sections):
                continue
            key = data[strings + name:data.index(b"\0", strings + name)]
            if key in _WEIGHTS:
                _, addr, base, _, _, _ = sections[shndx]
                found[key] = value - addr + base
    if len(found) != 2:
        return None
    return found[_WEIGHTS[0]], found[_WEIGHTS[1]]


# --------------------------------------------------------------------------- this machine


def glibc_here() -> str | None:
    """This process's glibc release (``"2.36"``); None off glibc."""
    try:
        said = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError, AttributeError):
        return None
    return said.split()[-1] if said.startswith("glibc") else None


def libstdcxx_here() -> tuple[str | None, str | None]:
    """The libstdc++ this process loads (its path) and the highest ``GLIBCXX`` version it defines."""
    path = _loaded("libstdc++.so")
    if path is None:
        import ctypes

        try:
            ctypes.CDLL("libstdc++.so.6")
        except OSError:
            return None, None
        path = _loaded("libstdc++.so")
    if path is None:
        return None, None
    try:
        return path, highest(version_defs(Path(path).read_bytes()), "GLIBCXX")
    except (OSError, ValueError, struct.error):
        return path, None


def _loaded(name: str) -> str | None:
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                parts = line.split(maxsplit=5)
                if len(parts) == 6 and name in Path(parts[5].strip()).name:
                    return parts[5].strip()
    except OSError:
        pass
    return None


def toolchain_mismatch(needs: dict[str, Any]) -> str | None:
    """Why this machine's C runtime cannot load a shared object that ``needs`` (:func:`runtime_needs`);
    None where it can, or where this machine's versions cannot be read."""
    glibcxx = needs.get("glibcxx")
    if glibcxx:
        path, have = libstdcxx_here()
        if have and newer(glibcxx, have):
            return f"its code needs libstdc++ with GLIBCXX_{glibcxx}; this process's ({path}) has up to GLIBCXX_{have}"
    glibc, have_c = needs.get("glibc"), glibc_here()
    if glibc and have_c and newer(glibc, have_c):
        return f"its code needs glibc {glibc}; this machine has glibc {have_c}"
    return None
