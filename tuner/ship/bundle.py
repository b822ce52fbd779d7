"""Write the warm-start bundle beside ``best_config.yaml`` and time a cold and a warm start.

The bundle is the inductor cache the best config's search trial compiled into, kept through
the run (tuner/system/caches.py): the kernels, FX graph and AOTAutograd entries of that very compile, so
no compile is repeated for it; its cold start is that trial's cold compile plus a step. Where no
such cache was kept (a resumed run, a non-inductor backend), the config is compiled once more in a
fresh process that also saves PyTorch's portable cache artifacts. Either way the first step is
then timed from the bundle in a fresh process, loaded as ``apply_config`` loads it (see
tuner/runtime/warmstart.py), which proves the bundle works before anyone relies on it. The
bundle's kernels are compiled for this CPU (``-march=native``): it records the CPU's flags
(``cpu.json``), and a CPU lacking any of them compiles cold instead of loading it.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import shutil
import statistics
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..core.spec import TrialSpec
from ..export.best_config import load_tuned_config, save_tuned_config
from ..isolation.isolated import run_isolated
from ..runtime import precompiled
from ..runtime.warmstart import (
    CACHE_DIRNAME,
    CPU_FILE,
    DIGEST_KEY,
    INDUCTOR_DIR,
    MEGA_CACHE,
    bundle_digest,
    cpu_record,
)

_LOCKS = shutil.ignore_patterns("*.lock", "locks")
#: Fresh processes each start, the bundle's and the precompiled forward's, is timed in before the
#: precompiled one is chosen (:func:`choose_start`): two fresh processes of one start differ by 5-20 %
#: on a shared machine, as much as the gain (about 0.8 s of 2 s on examples/tiny_transformer.py).
START_PROCESSES = 3


def bundle_and_measure(settings, config_path: Path, work_dir: Path, kept_cache: Path | None = None,
                       timeout: float = 900.0, more_fit: Callable[[int], bool] = lambda n: True) -> dict[str, Any]:
    """Write ``compile_cache/`` beside ``config_path``; return cold and warm first-step times.
    ``kept_cache``: the inductor cache the config's search trial compiled into, if kept;
    ``timeout``: seconds each of its processes may run (the run's trial timeout); ``more_fit(n)``:
    whether ``n`` more start processes fit (a ``--budget``) beyond the first of each start."""
    tuned = load_tuned_config(config_path)
    bundle = config_path.parent / CACHE_DIRNAME
    shutil.rmtree(bundle, ignore_errors=True)
    bundle.mkdir(parents=True)
    base = dict(workload=str(Path(settings.workload).resolve()), task=settings.task, device=settings.device,
                threads=settings.threads, heap=settings.heap)
    run = functools.partial(run_isolated, timeout=timeout, work_dir=work_dir)
    cold = _fill(bundle, tuned, base, kept_cache, run)
    if "warm_start_error" in cold:
        shutil.rmtree(bundle, ignore_errors=True)
        return cold
    saved = _precompile(bundle, tuned, base, run)
    # its kernels are -march=native code: a CPU lacking a flag of this one must not load them
    (bundle / CPU_FILE).write_text(json.dumps(cpu_record()))
    # The warm start below loads the bundle as a user would, which needs its hash in the YAML.
    digest = bundle_digest(bundle)
    measured = {**tuned.measured, DIGEST_KEY: digest, **saved}
    warm = _start(config_path, tuned, measured, base, run, with_="bundle")
    if warm.get("status") != "ok" or warm.get("cache_refused"):
        why = warm.get("cache_refused") or (warm.get("failure") or {}).get("raw", "warm start failed")
        return {"cold_start_s": cold["first_step_s"], DIGEST_KEY: digest, "warm_start_error": why[:300]}
    size = sum(f.stat().st_size for f in bundle.rglob("*") if f.is_file())
    counters = warm.get("cache_counters") or {}
    found = {
        "warm_start_cache": counters,
        "warm_start_missed": _missed(counters),
        "cold_start_s": round(cold["first_step_s"], 3),
        "warm_start_s": round(warm["first_step_s"], 3),
        "compile_cache_mb": round(size / 2**20, 2),
        DIGEST_KEY: digest,
        **saved,
    }
    if precompiled.MODULE_KEY in saved:
        start = functools.partial(_start, config_path, tuned, measured, base, run)
        found.update(_race_starts(found, start, int(tuned.tuned_on.get("steps") or settings.steps), more_fit))
    # the race, where run, replaced the bundle's one start by the median of its own
    warm_s = found["warm_start_s"]
    found["warm_start_speedup"] = round(cold["first_step_s"] / warm_s, 2) if warm_s else None
    save_tuned_config(dataclasses.replace(tuned, measured={**tuned.measured, **found}), config_path)
    return found


def _fill(bundle: Path, tuned, base: dict, kept_cache: Path | None, run) -> dict[str, Any]:
    """The bundle's caches: the search trial's kept cache, or a cold compile in a fresh process
    that saves them; the cold start's first step, or ``warm_start_error``."""
    searched = _searched_cold_start(tuned.measured)
    if kept_cache is not None and kept_cache.is_dir() and searched is not None:
        shutil.copytree(kept_cache, bundle / INDUCTOR_DIR, ignore=_LOCKS)
        return {"first_step_s": searched}
    cold = run(TrialSpec(**base, mode="startup", config=tuned.config.to_dict(),
                         save_artifacts_to=str(bundle / MEGA_CACHE)), keep_cache=True)
    if cold.get("status") != "ok":
        return {"warm_start_error": (cold.get("failure") or {}).get("raw", "cold start failed")[:300]}
    cache = Path(cold.pop("cache_dir"))
    shutil.copytree(cache, bundle / INDUCTOR_DIR, ignore=_LOCKS)
    shutil.rmtree(cache, ignore_errors=True)
    return cold


def _precompile(bundle: Path, tuned, base: dict, run) -> dict[str, Any]:
    """Save the precompiled forward into the bundle where the config allows one
    (tuner/runtime/precompiled.py), compiled from the bundle's own cache; what it recorded, or
    ``precompile_skipped`` with the reason."""
    why = precompiled.not_precompilable(tuned.config, base["task"], tuned.measured.get("graph_breaks"))
    if why:
        return {"precompile_skipped": why}
    cache = Path(tempfile.mkdtemp(prefix="precompile-cache-", dir=bundle.parent))
    try:
        shutil.copytree(bundle / INDUCTOR_DIR, cache, dirs_exist_ok=True)
        got = run(TrialSpec(**base, mode="precompile", config=tuned.config.to_dict(),
                            package_path=str(bundle / precompiled.PRECOMPILED)), cache_dir=cache)
        if got.get("status") != "ok":
            (bundle / precompiled.PRECOMPILED).unlink(missing_ok=True)
            raw = (got.get("failure") or {}).get("raw", "failed")
            return {"precompile_skipped": f"saving it failed: {raw.splitlines()[0][:200] if raw else 'failed'}"}
        # what the save added to the cache (its AOTAutograd and FX entries) travels with the bundle
        shutil.copytree(cache, bundle / INDUCTOR_DIR, dirs_exist_ok=True, ignore=_LOCKS)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return {precompiled.MODULE_KEY: got["precompiled_module"], "guard_check_us": got["guard_check_us"],
            "dynamo_guard_check_us": got.get("dynamo_guard_check_us"),
            "schedule_guard_misses": got["schedule_guard_misses"], "schedule_inputs": got["schedule_inputs"]}


def _start(config_path: Path, tuned, measured: dict, base: dict, run, with_: str) -> dict[str, Any]:
    """A fresh process's first step with the config applied from ``config_path`` as a user applies
    it, warm from the bundle alone or from the precompiled forward (``with_``)."""
    measured = {**measured, precompiled.CHOICE_KEY: with_}
    save_tuned_config(dataclasses.replace(tuned, measured=measured), config_path)
    return run(TrialSpec(**base, mode="startup", config={}, config_path=str(config_path)))


def _race_starts(found: Mapping[str, Any], start: Callable[..., dict], steps: int,
                 more_fit: Callable[[int], bool]) -> dict[str, Any]:
    """The precompiled start against the bundle's, fresh processes in turn (the bundle's first is
    ``found["warm_start_s"]``), up to :data:`START_PROCESSES` each while the precompiled one may
    still win and the budget allows; then :func:`choose_start`. A precompiled start that failed,
    differs from eager or whose guards the workload's schedule leaves is not raced at all."""
    if found.get("schedule_guard_misses"):
        return {precompiled.CHOICE_KEY: "bundle", "precompiled_error": f"{found['schedule_guard_misses']} of the "
                f"{found['schedule_inputs']} inputs of the workload's schedule fail its guards (shapes it was not "
                "compiled for): each run would leave it for torch.compile at the first of them"}
    guards_s = steps * _extra_guard_us(found) / 1e6
    bundle, ahead = [float(found["warm_start_s"])], []
    while True:
        started = start(with_="precompiled")
        refused = _not_used(started)
        if refused:
            return {precompiled.CHOICE_KEY: "bundle", "precompiled_error": refused}
        ahead.append(float(started["first_step_s"]))
        if len(ahead) == START_PROCESSES or max(ahead) + guards_s >= min(bundle) or not more_fit(2):
            return choose_start(bundle, ahead, guards_s)
        again = start(with_="bundle")
        if again.get("status") == "ok" and not again.get("cache_refused"):
            bundle.append(float(again["first_step_s"]))


def _not_used(started: Mapping[str, Any]) -> str | None:
    """Why a precompiled start cannot be chosen: it failed, fell back or differs from eager."""
    if started.get("status") != "ok" or not started.get("precompiled_used"):
        why = started.get("precompiled_refused") or (started.get("failure") or {}).get("raw") or "not used"
        return str(why)[:300]
    if started.get("precompiled_mismatch"):
        return f"differs from eager: {started['precompiled_mismatch']}"[:300]
    return None


def choose_start(bundle: list[float], ahead: list[float], guards_s: float) -> dict[str, Any]:
    """``precompiled`` only when every precompiled first step, its extra guard time over the run's
    steps added, beat every bundle first step with :data:`START_PROCESSES` of each: under no
    difference that order has a chance of 1 in 20 (a one-sided rank test at 5 %), so a gain inside
    the spread of fresh processes keeps the bundle, the start that needs no new code path."""
    saving = statistics.median(bundle) - statistics.median(ahead) - guards_s
    won = len(ahead) >= START_PROCESSES and len(bundle) >= START_PROCESSES and max(ahead) + guards_s < min(bundle)
    return {"warm_start_s": round(statistics.median(bundle), 3),
            "precompiled_start_s": round(statistics.median(ahead), 3), "precompiled_saving_s": round(saving, 3),
            "start_processes": {"bundle": [round(s, 3) for s in bundle], "precompiled": [round(s, 3) for s in ahead]},
            precompiled.CHOICE_KEY: "precompiled" if won else "bundle"}


def _extra_guard_us(found: Mapping[str, Any]) -> float:
    """Microseconds a call of the precompiled forward spends on guards beyond torch.compile's own."""
    dynamo = found.get("dynamo_guard_check_us")
    return max(0.0, float(found["guard_check_us"]) - (float(dynamo) if dynamo is not None else 0.0))


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
