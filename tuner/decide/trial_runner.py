"""One isolated trial of a config, started from the study's settings, and the inductor caches
its trials leave behind.

The search measures its configs through a :class:`TrialRunner`, and so does confirmation
(re-measuring a finalist from the cache its search trial kept). What it adds to
``isolated.run_isolated``: the trial's spec built from the study's settings, its timeout scaled
to the model, the compile trace directory, a second process that measures the warm compile, and
the caches kept for the configs that may still become finalists (tuner/system/caches.py), and a
config that compiles the optimizer step too started from the cache of the same config without it
(:class:`Seed`).
"""
from __future__ import annotations

import dataclasses
import math
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.config import PLAIN_COMPILE, CompileConfig
from ..core.spec import TrialSpec
from ..isolation.isolated import run_isolated
from ..study import StudySettings, measured_trials, trial_timeout
from ..system.caches import KEEP as KEEP_CACHES
from ..system.caches import KeptCaches, link_tree
from ..system.lanes import from_env as lane_fields


class TrialRunner:
    """Runs trials for one study. ``leaders()`` names the config keys of the best trials so far,
    best first: their caches are kept, the others' dropped."""

    def __init__(self, study, settings: StudySettings, work_dir: Path, leaders: Callable[[], list[str]]) -> None:
        self.study, self.settings, self.work_dir = study, settings, work_dir
        self.leaders = leaders
        self.caches = KeptCaches(work_dir)

    def measure(self, config: CompileConfig, label: str = "trial", compile_budget_s: float | None = None,
                warm: bool | None = None, reuse_cache: bool = False, timing_share: float = 1.0,
                timing: str = "beside", check_correctness: bool = True, heap: str | None = None,
                rival: CompileConfig | None = None) -> dict:
        """One isolated trial of ``config``. With ``warm``, an inductor config also gets its warm
        (cache kept) compile time measured in a second process; by default only where the score
        counts it (``--compile-cost warm``): that process costs about a compile's time.
        An inductor trial that compiled cold leaves its cache in :attr:`caches`; with
        ``reuse_cache`` (confirmation) the trial compiles from that cache when there is one, and
        says so (``compiled_from_cache``): its compile time is then the warm one, measured in the
        trial itself. ``timing_share`` scales the timing (``--measure-seconds`` and its rounds;
        confirmation times several shorter trials); ``timing`` is ``beside`` (eager and the config
        side by side) or ``alone`` (tuner/measure/timing.py). Confirmation turns the correctness
        check off (``check_correctness``: the search checked the config) and asks for eager as a
        user's process starts (``heap="default"``, the study's heap otherwise). ``rival`` (a race
        process beside eager): plain compile stepped as a third side, compiled from its kept cache
        (tuner/measure/trial.py). ``label`` names its trace."""
        s = self.settings
        if warm is None:
            warm = s.compile_cost == "warm"
        spec = dataclasses.replace(self.spec(config, timing_share, timing), check_correctness=check_correctness,
                                   heap=heap or self.settings.heap,
                                   check_cache_dir=str(self.caches.checks) if check_correctness else None)
        if rival is not None and timing == "beside":
            kept = self.caches.get(rival.key()) if rival.backend == "inductor" else None
            spec = dataclasses.replace(spec, rival=rival.to_dict(), rival_cache_dir=str(kept) if kept else None)
        env = {}
        if s.trace_dir and config.compiles:
            # TORCH_TRACE: the structured compile trace that PyTorch's tlparse renders.
            env["TORCH_TRACE"] = str((Path(s.trace_dir) / label).resolve())
        inductor = config.compiles and config.backend == "inductor"
        cached = self.caches.get(config.key()) if reuse_cache and inductor else None
        warm = warm and inductor and cached is None
        seed = self._seed(config) if inductor and cached is None else None
        seeded = seed.cache_for(self.work_dir) if seed is not None else None
        result = run_isolated(spec, timeout=trial_timeout(self.study, s), work_dir=self.work_dir, env_extra=env,
                              cache_dir=cached or seeded, keep_cache=inductor and cached is None,
                              compile_budget_s=compile_budget_s)
        if seed is not None and seeded is not None:
            result["cache_dir"] = str(seeded)  # the trial's own, as a fresh one is (kept or removed below)
            seed.compose(result)
        if env:
            result["trace_dir"] = env["TORCH_TRACE"]
        if timing_share < 1:
            result["timing_share"] = timing_share  # what the --budget's plan scales back to a whole trial
        if cached is not None:
            result["compiled_from_cache"] = True
        if result.get("cache_dir"):
            cache = Path(result.pop("cache_dir"))
            if result.get("status") == "ok":
                if warm:
                    result.update(self._warm_compile(spec, cache, result))
                self._keep_cache(config, cache)
            shutil.rmtree(cache, ignore_errors=True)
        return result

    def spec(self, config: CompileConfig, timing_share: float = 1.0, timing: str = "beside") -> TrialSpec:
        """What the trial process is asked to do: the study's settings, this config, this timing."""
        s = self.settings
        rounds, seconds = shared_timing(s.rounds, s.measure_seconds, timing_share)
        return TrialSpec(
            workload=str(Path(s.workload).resolve()), config=config.to_dict(), task=s.task, device=s.device,
            threads=s.threads, seed=s.seed, measure_seconds=seconds, rounds=rounds,
            trial_memory_limit_mb=s.trial_memory_limit_mb, heap=s.heap, timing=timing, **lane_fields(),
            nproc=s.nproc, nnodes=s.nnodes, rdzv_endpoint=s.rdzv_endpoint, data_parallel=s.data_parallel,
            # a rank waits this long in one collective before the trial fails as a hang: half the
            # trial's timeout, which is scaled to the model's measured step and compile
            collective_timeout_s=max(60.0, trial_timeout(self.study, s) / 2),
        )

    def _seed(self, config: CompileConfig) -> Seed | None:
        """Where ``config`` compiles the optimizer step too: the same config without it, where its
        cache is kept and a trial of it measured its cold and its warm compile (plain compile's
        baseline under a ``--budget``); None otherwise (the trial compiles cold, as any other)."""
        if not config.compile_optimizer:
            return None
        base = dataclasses.replace(config, compile_optimizer=False)
        cache = self.caches.get(base.key())
        if cache is None:
            return None
        for trial in measured_trials(self.study):
            a = trial.user_attrs
            if (a.get("config_key") == base.key() and a.get("status") == "ok" and not a.get("compile_seeded")
                    and a.get("compile_time_s") and a.get("compile_time_warm_s") is not None):
                return Seed(base, cache, float(a["compile_time_s"]), float(a["compile_time_warm_s"]),
                            a.get("compile_peak_memory_mb"))
        return None

    def _keep_cache(self, config: CompileConfig, cache: Path) -> None:
        """Keep the cache of a config that may become a finalist; drop those that fell behind."""
        self.caches.keep(config.key(), cache)
        self.caches.prune([PLAIN_COMPILE.key(), config.key(), *self.leaders()[:KEEP_CACHES]])

    def _warm_compile(self, spec: TrialSpec, cache: Path, result: dict) -> dict:
        """The same config compiled again in a fresh process that finds the trial's cache: what
        a restart costs a user who keeps the cache."""
        warm = run_isolated(dataclasses.replace(spec, mode="startup"), timeout=trial_timeout(self.study, self.settings),
                            work_dir=self.work_dir, cache_dir=cache)
        if warm.get("status") != "ok":
            return {}
        return {"compile_time_warm_s": max(0.0, float(warm["first_step_s"]) - float(result.get("step_s") or 0.0)),
                "warm_compile_wall_s": warm.get("trial_wall_s")}


@dataclass(frozen=True)
class Seed:
    """A config that compiles the optimizer step too (``+optimizer``) compiles its model's graphs
    exactly as the same config without it does: the same graphs, the same inductor settings, the
    same cache keys. Its search trial starts from a copy of that config's kept cache, finds those
    graphs (a warm compile) and compiles the optimizer step cold; its cold compile, what a first run
    of it costs, is then what the trial measured plus the base's cold compile less its warm one.
    On the zoo's GPT-2 training (2026-12-07, AMD EPYC) ``+optimizer`` compiled cold in 119 s, 73 s
    of them plain compile's graphs (10 s warm): about 60 s of a 186 s search trial. A trial that
    found none of the base's graphs compiled cold after all and is left as it measured."""

    base: CompileConfig
    cache: Path
    cold_s: float
    warm_s: float
    compile_peak_memory_mb: float | None = None

    def cache_for(self, work_dir: Path) -> Path:
        """The trial's own cache directory, holding the base's entries (hard links: inductor writes
        an entry once, by its key, so neither cache changes the other's)."""
        own = Path(tempfile.mkdtemp(prefix="inductor-cache-", dir=work_dir))
        link_tree(self.cache, own)
        return own

    def compose(self, result: dict[str, Any]) -> None:
        """The trial's cold compile from what it measured (``compile_seeded`` says how), and the
        compile's peak memory at least the base's (a cold compile of the graphs it found)."""
        if result.get("status") != "ok" or result.get("compile_time_s") is None:
            return
        found, measured = int(result.get("fxgraph_cache_hits") or 0), float(result["compile_time_s"])
        note: dict[str, Any] = {"base": self.base.describe(), "graphs_found": found, "measured_s": round(measured, 3)}
        if found:
            result["compile_time_s"] = measured + max(0.0, self.cold_s - self.warm_s)
            note.update(base_cold_s=round(self.cold_s, 3), base_warm_s=round(self.warm_s, 3))
            if self.compile_peak_memory_mb:
                peak = max(float(result.get("compile_peak_memory_mb") or 0.0), float(self.compile_peak_memory_mb))
                result["compile_peak_memory_mb"] = peak
                result["peak_memory_mb"] = max(float(result.get("peak_memory_mb") or 0.0), peak)
        result["compile_seeded"] = note


def shared_timing(rounds: int, measure_seconds: float, share: float) -> tuple[int, float]:
    """A trial's timing rounds and seconds at ``share`` of the study's (confirmation's shorter
    processes): at least two rounds, so each side goes first once."""
    return (max(2, math.ceil(rounds * share)) if share < 1 else rounds), measure_seconds * share
