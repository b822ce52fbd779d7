"""Start warm: load the compiled artifacts saved beside ``best_config.yaml``, safely.

A user pays the compile cost at every start of their job unless the compiler's caches survive.
After tuning, the best config is compiled once more in a fresh process and two things are kept
in ``compile_cache/`` next to the YAML file (tuner/ship/bundle.py):

- ``mega_cache.bin``: PyTorch's portable cache artifacts (``torch.compiler.save_cache_artifacts``:
  FX graph and AOTAutograd cache entries);
- ``inductor/``: the inductor cache directory of that compile. On CPU (torch 2.13) the artifacts
  above do not carry the compiled C++ kernels, so the first call would still rebuild them; the
  directory does carry them.

- ``cpu.json``: the CPU the kernels were compiled on (its flags and model). Inductor compiles
  them with ``-march=native``, for that very CPU: on one that lacks any of its instruction flags
  they could die with an illegal instruction, so such a CPU does not load the bundle (its first
  call compiles cold). The bundle is for the machine it was made on, or its twins.

Both caches are code: ``mega_cache.bin`` is unpickled and the kernels are shared libraries that get
loaded. So the bundle is loaded only when its SHA-256 matches the one recorded in
``best_config.yaml`` when it was written (``measured.compile_cache_sha256``), and its files go to
a cache directory of their own (keyed by that hash), never into the user's global inductor
cache: what a results folder brings in stays apart from the user's own compiles.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path

from ..pt2 import machine

CACHE_DIRNAME = "compile_cache"
MEGA_CACHE = "mega_cache.bin"
INDUCTOR_DIR = "inductor"
DIGEST_KEY = "compile_cache_sha256"
CPU_FILE = "cpu.json"
_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"

_loaded: set[str] = set()


def bundle_digest(bundle: Path) -> str:
    """SHA-256 over every file of the bundle: its path inside the bundle and its bytes."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(bundle).rglob("*") if p.is_file()):
        digest.update(path.relative_to(bundle).as_posix().encode() + b"\0")
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()


def bundle_cache_dir(digest: str) -> Path:
    """The inductor cache directory a bundle is loaded into: one per bundle content."""
    return Path(tempfile.gettempdir()) / f"compile-tune-warm-start-{digest[:16]}"


def load_warm_start(config_path: Path, tuned_on: dict, measured: dict) -> bool:
    """Load the bundle beside ``config_path`` into this process; True if it is loaded (now or by
    an earlier call) and verified.

    Refused, with a warning naming the reason, when the bundle was made by another torch or on
    another device type, when ``best_config.yaml`` records no hash for it, when its files do
    not match that hash, or when this CPU lacks an instruction flag of the CPU its kernels were
    compiled for; the first call then compiles cold.
    """
    import torch

    bundle = Path(config_path).parent / CACHE_DIRNAME
    if not bundle.is_dir():
        return False
    if str(bundle.resolve()) in _loaded:
        return True
    tuned_torch, tuned_device = tuned_on.get("torch"), str(tuned_on.get("device", ""))
    here_device = "cuda" if torch.cuda.is_available() else "cpu"
    if tuned_torch != torch.__version__ or tuned_device.split(":")[0] != here_device:
        return _refuse(bundle, f"compiled with torch {tuned_torch} on {tuned_device}, this is torch "
                               f"{torch.__version__} on {here_device}")
    expected = measured.get(DIGEST_KEY)
    if not expected:
        return _refuse(bundle, f"{config_path} records no {DIGEST_KEY} for it, so it cannot be verified")
    if bundle_digest(bundle) != expected:
        return _refuse(bundle, f"its files do not match the {DIGEST_KEY} in {config_path} (changed after it "
                               "was written, or copied from another run)")
    lacking = _lacking_cpu_flags(bundle)
    if lacking:
        return _refuse(bundle, f"its kernels were compiled for the CPU it was made on ({lacking[0]}), which has "
                               f"{', '.join(lacking[1:])}; this CPU lacks them (the kernels would die with an "
                               "illegal instruction)")
    own = bundle_cache_dir(expected)
    if (bundle / INDUCTOR_DIR).is_dir():
        shutil.copytree(bundle / INDUCTOR_DIR, own, dirs_exist_ok=True)
    own.mkdir(parents=True, exist_ok=True)
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    before = os.environ.get(_CACHE_ENV)  # torch sets it to its default on first use
    if before and Path(before).resolve() not in (own.resolve(), Path(default_cache_dir()).resolve()):
        warnings.warn(f"{bundle}: {_CACHE_ENV} was {before}; this process now caches compiles in {own}, the "
                      "bundle's own cache directory", stacklevel=3)
    os.environ[_CACHE_ENV] = str(own)  # inductor reads it at every cache lookup
    if (bundle / MEGA_CACHE).is_file() and hasattr(torch.compiler, "load_cache_artifacts"):
        torch.compiler.load_cache_artifacts((bundle / MEGA_CACHE).read_bytes())
    _loaded.add(str(bundle.resolve()))
    return True


def cpu_record() -> dict:
    """What ``cpu.json`` holds: this CPU's flags, the instruction flags ``-march=native`` code may
    use, and its model (tuner/ship/bundle.py writes it)."""
    flags = machine.cpu_flags()
    return {"flags": flags, "required_flags": machine.instruction_flags(flags or []),
            "model": machine.cpu_model()}


def _lacking_cpu_flags(bundle: Path) -> list[str]:
    """[the bundle's CPU model, *the instruction flags this CPU lacks]; [] where none is lacking
    or either side's flags are unknown."""
    try:
        record = json.loads((bundle / CPU_FILE).read_text())
    except (OSError, ValueError):
        return []  # a bundle written before its CPU was recorded
    here = machine.cpu_flags()
    if here is None or not record.get("required_flags"):
        return []
    lacking = machine.missing_flags(record["required_flags"], here)
    return [record.get("model") or "another CPU", *lacking] if lacking else []


def _refuse(bundle: Path, why: str) -> bool:
    warnings.warn(f"{bundle}: not loading the saved compile cache: {why}; the first call compiles cold",
                  stacklevel=4)
    return False
