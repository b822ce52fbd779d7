"""Write the warm-start bundle beside ``best_config.yaml`` and time a cold and a warm start.

After tuning, the best config is compiled once more in a fresh process and its compiled
artifacts are kept in ``compile_cache/`` (see tuner/runtime/warmstart.py for what is in it and
how ``apply_config`` loads it). The first step is then timed from a cold start and from the
bundle, each in a fresh process.
"""
from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

from .config import load_tuned_config, save_tuned_config
from .isolated import run_isolated
from .runtime.warmstart import CACHE_DIRNAME, DIGEST_KEY, INDUCTOR_DIR, MEGA_CACHE, bundle_digest
from .spec import TrialSpec


def bundle_and_measure(settings, config_path: Path, work_dir: Path) -> dict[str, Any]:
    """Write ``compile_cache/`` beside ``config_path``; return cold and warm first-step times."""
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
    # The warm start below loads the bundle as a user would, which needs its hash in the YAML.
    digest = bundle_digest(bundle)
    save_tuned_config(dataclasses.replace(tuned, measured={**tuned.measured, DIGEST_KEY: digest}), config_path)
    warm = run_isolated(TrialSpec(**base, config={}, config_path=str(config_path)),
                        timeout=settings.trial_timeout, work_dir=work_dir)
    if warm.get("status") != "ok" or warm.get("cache_refused"):
        why = warm.get("cache_refused") or (warm.get("failure") or {}).get("raw", "warm start failed")
        return {"cold_start_s": cold["first_step_s"], DIGEST_KEY: digest, "warm_start_error": why[:300]}
    size = sum(f.stat().st_size for f in bundle.rglob("*") if f.is_file())
    return {
        "cold_start_s": round(cold["first_step_s"], 3),
        "warm_start_s": round(warm["first_step_s"], 3),
        "warm_start_speedup": round(cold["first_step_s"] / warm["first_step_s"], 2) if warm["first_step_s"] else None,
        "compile_cache_mb": round(size / 2**20, 2),
        DIGEST_KEY: digest,
    }
