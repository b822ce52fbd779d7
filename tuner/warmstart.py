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
import time
import warnings
from pathlib import Path
from typing import Any

CACHE_DIRNAME = "compile_cache"
MEGA_CACHE = "mega_cache.bin"
INDUCTOR_DIR = "inductor"

_loaded: set[str] = set()


# --------------------------------------------------------------------------- in the user's process


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


# --------------------------------------------------------------------------- in a child process


def measure_start(spec, rec) -> None:
    """First step of the applied config in this fresh process (``mode="startup"``).

    With ``spec.config_path`` the config is applied from the YAML file, exactly as a user does
    (loading the bundled cache); otherwise from ``spec.config``. With ``spec.save_artifacts_to``
    the mega-cache artifacts are written there after the first step.
    """
    import torch

    from .apply import apply_config
    from .config import CompileConfig, load_tuned_config
    from .devices import sync, to_device
    from .steps import Step
    from .workload import load_workload

    workload = load_workload(spec.workload)
    model = workload.make_model().to(spec.device)
    inputs = to_device(workload.make_inputs(), spec.device)
    config = load_tuned_config(spec.config_path).config if spec.config_path else CompileConfig.from_dict(spec.config)
    sync(spec.device)
    start = time.perf_counter()
    apply_config(model, spec.config_path or config)
    loaded = time.perf_counter() - start
    stepper = Step(model, spec.task, workload)
    stepper.adopt(config)
    stepper(inputs)
    sync(spec.device)
    first = time.perf_counter() - start
    rec.update(first_step_s=first, cache_load_s=loaded)
    if spec.save_artifacts_to and hasattr(torch.compiler, "save_cache_artifacts"):
        saved = torch.compiler.save_cache_artifacts()
        if saved is not None:
            Path(spec.save_artifacts_to).write_bytes(saved[0])
    rec.update(status="ok", stage="done")


# --------------------------------------------------------------------------- in the tuner


def bundle_and_measure(settings, config_path: Path, work_dir: Path) -> dict[str, Any]:
    """Write ``compile_cache/`` beside ``config_path``; return cold and warm first-step times."""
    from .config import load_tuned_config
    from .measure import TrialSpec
    from .trial import run_isolated

    tuned = load_tuned_config(config_path)
    bundle = config_path.parent / CACHE_DIRNAME
    shutil.rmtree(bundle, ignore_errors=True)
    bundle.mkdir(parents=True)
    base = dict(workload=str(Path(settings.workload).resolve()), task=settings.task, device=settings.device,
                threads=settings.threads, mode="startup")
    cold = run_isolated(
        TrialSpec(**base, config=tuned.config.to_dict(), save_artifacts_to=str(bundle / MEGA_CACHE)),
        timeout=settings.trial_timeout, work_dir=work_dir, keep_cache=True,
    )
    if cold.get("status") != "ok":
        shutil.rmtree(bundle, ignore_errors=True)
        return {"warm_start_error": (cold.get("failure") or {}).get("raw", "cold start failed")[:300]}
    cache = Path(cold.pop("cache_dir"))
    shutil.copytree(cache, bundle / INDUCTOR_DIR, ignore=shutil.ignore_patterns("*.lock", "locks"))
    shutil.rmtree(cache, ignore_errors=True)
    warm = run_isolated(TrialSpec(**base, config={}, config_path=str(config_path)),
                        timeout=settings.trial_timeout, work_dir=work_dir)
    if warm.get("status") != "ok":
        return {"cold_start_s": cold["first_step_s"],
                "warm_start_error": (warm.get("failure") or {}).get("raw", "warm start failed")[:300]}
    size = sum(f.stat().st_size for f in bundle.rglob("*") if f.is_file())
    return {
        "cold_start_s": round(cold["first_step_s"], 3),
        "warm_start_s": round(warm["first_step_s"], 3),
        "warm_start_speedup": round(cold["first_step_s"] / warm["first_step_s"], 2) if warm["first_step_s"] else None,
        "compile_cache_mb": round(size / 2**20, 2),
    }
