"""Write the warm-start bundle beside ``best_config.yaml`` and time a cold and a warm start.

The bundle is the inductor cache the best config's search trial compiled into, kept through
the run (tuner/system/caches.py): the kernels, FX graph and AOTAutograd entries of that very compile, so
no compile is repeated for it; its cold start is that trial's cold compile plus a step. Where no
such cache was kept (a resumed run, a non-inductor backend), the config is compiled once more in a
fresh process that also saves PyTorch's portable cache artifacts. Either way the first step is
then timed from the bundle in a fresh process, loaded as ``apply_config`` loads it (see
tuner/runtime/warmstart.py), which proves the bundle works before anyone relies on it.
"""
from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .core.spec import TrialSpec
from .export.best_config import load_tuned_config, save_tuned_config
from .isolated import run_isolated
from .runtime.warmstart import CACHE_DIRNAME, DIGEST_KEY, INDUCTOR_DIR, MEGA_CACHE, bundle_digest

_LOCKS = shutil.ignore_patterns("*.lock", "locks")


def bundle_and_measure(settings, config_path: Path, work_dir: Path, kept_cache: Path | None = None,
                       timeout: float = 900.0) -> dict[str, Any]:
    """Write ``compile_cache/`` beside ``config_path``; return cold and warm first-step times.
    ``kept_cache``: the inductor cache the config's search trial compiled into, if kept;
    ``timeout``: seconds each of its processes may run (the run's trial timeout)."""
    tuned = load_tuned_config(config_path)
    bundle = config_path.parent / CACHE_DIRNAME
    shutil.rmtree(bundle, ignore_errors=True)
    bundle.mkdir(parents=True)
    base = dict(workload=str(Path(settings.workload).resolve()), task=settings.task, device=settings.device,
                threads=settings.threads, heap=settings.heap, mode="startup")
    searched = _searched_cold_start(tuned.measured)
    cold: dict[str, Any]
    if kept_cache is not None and kept_cache.is_dir() and searched is not None:
        cold = {"first_step_s": searched}
        shutil.copytree(kept_cache, bundle / INDUCTOR_DIR, ignore=_LOCKS)
    else:
        cold = run_isolated(
            TrialSpec(**base, config=tuned.config.to_dict(), save_artifacts_to=str(bundle / MEGA_CACHE)),
            timeout=timeout, work_dir=work_dir, keep_cache=True,
        )
        if cold.get("status") != "ok":
            shutil.rmtree(bundle, ignore_errors=True)
            return {"warm_start_error": (cold.get("failure") or {}).get("raw", "cold start failed")[:300]}
        cache = Path(cold.pop("cache_dir"))
        shutil.copytree(cache, bundle / INDUCTOR_DIR, ignore=_LOCKS)
        shutil.rmtree(cache, ignore_errors=True)
    # The warm start below loads the bundle as a user would, which needs its hash in the YAML.
    digest = bundle_digest(bundle)
    save_tuned_config(dataclasses.replace(tuned, measured={**tuned.measured, DIGEST_KEY: digest}), config_path)
    warm = run_isolated(TrialSpec(**base, config={}, config_path=str(config_path)),
                        timeout=timeout, work_dir=work_dir)
    if warm.get("status") != "ok" or warm.get("cache_refused"):
        why = warm.get("cache_refused") or (warm.get("failure") or {}).get("raw", "warm start failed")
        return {"cold_start_s": cold["first_step_s"], DIGEST_KEY: digest, "warm_start_error": why[:300]}
    size = sum(f.stat().st_size for f in bundle.rglob("*") if f.is_file())
    counters = warm.get("cache_counters") or {}
    return {
        "warm_start_cache": counters,
        "warm_start_missed": _missed(counters),
        "cold_start_s": round(cold["first_step_s"], 3),
        "warm_start_s": round(warm["first_step_s"], 3),
        "warm_start_speedup": round(cold["first_step_s"] / warm["first_step_s"], 2) if warm["first_step_s"] else None,
        "compile_cache_mb": round(size / 2**20, 2),
        DIGEST_KEY: digest,
    }


def _missed(counters: Mapping[str, int]) -> str | None:
    """Why a warm start compiled after all, from its cache counters; None when every graph hit."""
    misses = counters.get("fxgraph_miss", 0) + counters.get("fxgraph_bypass", 0)
    if not counters or not misses:
        return None
    return (f"{misses} of {misses + counters.get('fxgraph_hit', 0)} graphs compiled again (inductor's FX-graph "
            "cache missed: another torch, device, config or inductor option than the bundle was compiled with)")


def _searched_cold_start(measured: Mapping[str, Any]) -> float | None:
    """The first step of a cold start, as the search measured it: the cold compile plus a step."""
    compile_s, step_ms = measured.get("compile_time_s"), measured.get("step_time_ms")
    if compile_s is None or step_ms is None or measured.get("compile_cost", "cold") != "cold":
        return None
    return float(compile_s) + float(step_ms) / 1000
