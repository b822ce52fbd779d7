"""Start warm: ship the compiled artifacts of the best config beside ``best_config.yaml``.

A user pays the compile cost at every start of their job unless the compiler's caches survive.
After tuning we compile the best config once more in a fresh process and keep two things in
``compile_cache/`` next to the YAML file:

- ``mega_cache.bin``: PyTorch's portable cache artifacts (``torch.compiler.save_cache_artifacts``:
  FX graph and AOTAutograd cache entries);
- ``inductor/``: the inductor cache directory of that compile. On CPU (torch 2.13) the artifacts
  above do not carry the compiled C++ kernels, so the first call would still rebuild them; the
  directory does carry them.

``apply_config`` loads both (when the torch version and device type match; otherwise it warns and
compiles cold). We measure the first step of the applied config from a cold start and from the
warm start, each in a fresh process, and record both.
"""
from __future__ import annotations

import shutil
import warnings
from pathlib import Path

CACHE_DIRNAME = "compile_cache"
MEGA_CACHE = "mega_cache.bin"
INDUCTOR_DIR = "inductor"

_loaded: set[str] = set()


def load_warm_start(config_path: Path, tuned_on: dict) -> bool:
    """Load the cache bundled beside ``config_path`` into this process; True if loaded."""
    import torch

    bundle = Path(config_path).parent / CACHE_DIRNAME
    if not bundle.is_dir() or str(bundle.resolve()) in _loaded:
        return False
    tuned_torch, tuned_device = tuned_on.get("torch"), str(tuned_on.get("device", ""))
    here_device = "cuda" if torch.cuda.is_available() else "cpu"
    if tuned_torch != torch.__version__ or tuned_device.split(":")[0] != here_device:
        warnings.warn(
            f"{bundle}: compiled with torch {tuned_torch} on {tuned_device}, this is torch {torch.__version__} "
            f"on {here_device}; skipping the saved compile cache (the first call compiles cold)",
            stacklevel=3,
        )
        return False
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    if (bundle / INDUCTOR_DIR).is_dir():
        shutil.copytree(bundle / INDUCTOR_DIR, cache_dir(), dirs_exist_ok=True)
    if (bundle / MEGA_CACHE).is_file() and hasattr(torch.compiler, "load_cache_artifacts"):
        torch.compiler.load_cache_artifacts((bundle / MEGA_CACHE).read_bytes())
    _loaded.add(str(bundle.resolve()))
    return True
