"""The Optuna glue: baselines first, then the search, with no config measured twice.

Every measurement lives in the Optuna storage as trial user attributes (names in
``MEASUREMENT_ATTRS``), so a study can be resumed, inspected with optuna-dashboard, and turned
into reports without measuring anything again.
"""
from __future__ import annotations

import dataclasses
import math
import os
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .config import EAGER, PLAIN_COMPILE, CompileConfig, find_block_classes
from .errors import StudyError
from .measure import TrialSpec
from .score import Scoring
from .space import SearchSpace
from .trial import run_isolated

ROLE_EAGER, ROLE_PLAIN, ROLE_SEARCH = "eager", "plain", "search"

#: Measurements copied from the child's result into trial user attributes.
MEASUREMENT_ATTRS = (
    "compile_time_s", "first_call_s", "step_s", "eager_step_s", "speedup", "step_spread",
    "eager_step_spread", "round_ratios", "timed_steps", "peak_memory_mb", "eager_peak_memory_mb",
    "compile_peak_memory_mb", "steady_peak_memory_mb", "correct", "correctness_error", "graphs",
    "graph_breaks", "graph_break_events", "library_graph_breaks", "graph_break_details", "recompiles", "recompile_details",
    "recompile_limit_hit", "recompile_time_s", "schedule_len", "schedule_step_s",
    "schedule_eager_step_s", "regions", "region_names", "trial_wall_s", "child_wall_s", "environment",
    "trace_dir", "compile_time_warm_s", "pruned_reason", "child_import_s", "warm_compile_wall_s",
)
#: Settings that must not change when a study is resumed: they change what a score means.
FIXED_SETTINGS = ("steps", "task", "device", "threads", "workload", "compile_cost")
#: Consecutive duplicate suggestions before we hand the sampler an unmeasured config.
MAX_DUPLICATE_STREAK = 3


@dataclass
class StudySettings:
    workload: str
    task: str
    device: str
    threads: int
    steps: int
    trials: int
    seed: int = 0
    trial_timeout: float = 900.0
    max_memory_mb: float | None = None
    measure_seconds: float = 6.0
    rounds: int = 5
    space_name: str = ""
    trace_dir: str | None = None
    memory_limit_mb: float | None = None
    compile_cost: str = "cold"


@dataclass
class StudyRun:
    """What a tuning run did; the study itself holds every measurement."""

    study: Any
    scoring: Scoring
    measured: int = 0
    duplicates: int = 0
    exhausted: bool = False
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)


def open_study(storage: str, name: str, seed: int, create: bool = True):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.TPESampler(
        seed=seed,
        n_startup_trials=5,
        # Constant liar: with several workers, running trials count as bad, so two workers are
        # not handed the same config at once.
        constant_liar=True,
        constraints_func=_memory_constraint,
    )
    if not create:
        return optuna.load_study(study_name=name, storage=storage, sampler=sampler)
    return optuna.create_study(
        study_name=name, storage=storage, sampler=sampler, direction="minimize", load_if_exists=True
    )


def _memory_constraint(trial) -> list[float]:
    # > 0 means infeasible: TPE then prefers configs within --max-memory.
    return [float(trial.user_attrs.get("memory_excess_mb", 0.0))]


def check_settings(study, settings: StudySettings) -> None:
    """A resumed study must be scored the same way, or its numbers mean different things."""
    stored = study.user_attrs.get("settings")
    current = {k: getattr(settings, k) for k in FIXED_SETTINGS}
    if stored is None:
        study.set_user_attr("settings", {**current, "max_memory_mb": settings.max_memory_mb,
                                         "space": settings.space_name, "seed": settings.seed})
        return
    for key in FIXED_SETTINGS:
        if key == "workload":
            continue  # the same file may be reached by another path
        if stored.get(key) != current[key]:
            raise StudyError(
                f"study '{study.study_name}' was measured with {key}={stored.get(key)!r}, now {key}={current[key]!r}",
                f"use the same --{key.replace('_', '-')}, or a new --out/--study for the new setting",
            )


def scoring_from_study(study) -> Scoring | None:
    """The study's scoring, from its storage alone (None before the eager baseline exists)."""
    settings = study.user_attrs.get("settings") or {}
    eager_step = study.user_attrs.get("eager_step_s")
    if eager_step is None or "steps" not in settings:
        return None
    return Scoring(steps=int(settings["steps"]), eager_step_s=float(eager_step),
                   max_memory_mb=settings.get("max_memory_mb"), compile_cost=settings.get("compile_cost", "cold"))


def fail_stale_trials(study) -> int:
    """Trials left RUNNING by a killed run are marked failed so they are measured again."""
    from optuna.trial import TrialState

    stale = [t for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))]
    for t in stale:
        study._storage.set_trial_user_attr(t._trial_id, "interrupted", True)
        study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
    return len(stale)


# --------------------------------------------------------------------------- trials -> attrs


def trial_attrs(config: CompileConfig, role: str, result: dict, scoring: Scoring | None) -> dict:
    attrs: dict[str, Any] = {
        "role": role,
        "config": config.to_dict(),
        "config_key": config.key(),
        "config_label": config.describe(),
        "status": result.get("status", "failed"),
    }
    for name in MEASUREMENT_ATTRS:
        if name in result and result[name] is not None:
            attrs[name] = _finite(result[name])
    fail = result.get("failure")
    if fail:
        attrs.update(
            failure_category=fail["category"], failure_explanation=fail["explanation"],
            failure_hint=fail["hint"], failure_raw=fail["raw"], log_tail=result.get("log_tail", "")[-1500:],
        )
    if result.get("pruned_reason"):
        attrs["pruned_reason"] = result["pruned_reason"]
    if scoring is not None and attrs["status"] == "ok":
        attrs["step_time_s"] = scoring.step_time(result)
        attrs["total_time_s"] = scoring.total_time(result)
        if scoring.max_memory_mb is not None:
            attrs["memory_excess_mb"] = max(0.0, float(result.get("peak_memory_mb") or 0.0) - scoring.max_memory_mb)
    return attrs


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# --------------------------------------------------------------------------- the run


class Tuner:
    """Runs baselines and the search for one workload into one Optuna study."""

    def __init__(self, study, space: SearchSpace, settings: StudySettings, work_dir: Path,
                 on_trial: Callable[[dict], None] | None = None) -> None:
        self.study, self.space, self.settings, self.work_dir = study, space, settings, work_dir
        self.on_trial = on_trial or (lambda attrs: None)
        self._rng = random.Random(settings.seed)

    # -- measuring

    def measure(self, config: CompileConfig, label: str, compile_budget_s: float | None = None,
                warm: bool = True) -> dict:
        """One isolated trial of ``config``; with ``warm``, inductor configs also get their warm
        (cache kept) compile time measured in a second process."""
        s = self.settings
        spec = TrialSpec(
            workload=str(Path(s.workload).resolve()), config=config.to_dict(), task=s.task, device=s.device,
            threads=s.threads, seed=s.seed, measure_seconds=s.measure_seconds, rounds=s.rounds,
            memory_limit_mb=s.memory_limit_mb,
        )
        env = {}
        if s.trace_dir and config.compiles:
            # TORCH_TRACE: the structured compile trace that PyTorch's tlparse renders.
            trace = Path(s.trace_dir) / label
            env["TORCH_TRACE"] = str(trace.resolve())
        warm = warm and config.compiles and config.backend == "inductor"
        result = run_isolated(spec, timeout=s.trial_timeout, work_dir=self.work_dir, env_extra=env,
                              keep_cache=warm, compile_budget_s=compile_budget_s)
        if env:
            result["trace_dir"] = env["TORCH_TRACE"]
        if result.get("cache_dir"):
            cache = Path(result.pop("cache_dir"))
            if result.get("status") == "ok":
                result.update(self._warm_compile(spec, cache, result))
            shutil.rmtree(cache, ignore_errors=True)
        return result

    def _warm_compile(self, spec: TrialSpec, cache: Path, result: dict) -> dict:
        """The same config compiled again in a fresh process that finds the trial's cache: what
        a restart costs a user who keeps the cache."""
        warm_spec = dataclasses.replace(spec, mode="startup")
        warm = run_isolated(warm_spec, timeout=self.settings.trial_timeout, work_dir=self.work_dir, cache_dir=cache)
        if warm.get("status") != "ok":
            return {}
        return {"compile_time_warm_s": max(0.0, float(warm["first_step_s"]) - float(result.get("step_s") or 0.0)),
                "warm_compile_wall_s": warm.get("trial_wall_s")}

    def baselines(self) -> Scoring:
        """Eager and plain ``torch.compile(model)`` are always measured first, once."""
        import optuna
        from optuna.trial import TrialState

        done = {t.user_attrs.get("role"): t for t in self.study.get_trials(deepcopy=False)
                if t.state in (TrialState.COMPLETE, TrialState.FAIL) and not t.user_attrs.get("interrupted")}
        if ROLE_EAGER not in done or done[ROLE_EAGER].state != TrialState.COMPLETE:
            result = self.measure(EAGER, "eager")
            if result.get("status") != "ok":
                fail = result.get("failure") or {}
                raise StudyError(
                    f"the eager baseline failed: {fail.get('raw', 'no result')}",
                    "make the model run eagerly on its example inputs first",
                )
            eager_step = float(result["eager_step_s"])
            scoring = self._scoring(eager_step)
            attrs = trial_attrs(EAGER, ROLE_EAGER, result, scoring)
            attrs.update(speedup=1.0, compile_time_s=0.0, step_time_s=eager_step, total_time_s=scoring.eager_total)
            self.study.set_user_attr("eager_step_s", eager_step)
            self.study.add_trial(optuna.trial.create_trial(value=scoring.eager_total, user_attrs=attrs))
            self.on_trial(attrs)
        scoring = self._scoring(float(self.study.user_attrs["eager_step_s"]))
        if ROLE_PLAIN not in done:
            result = self.measure(PLAIN_COMPILE, "plain")
            attrs = trial_attrs(PLAIN_COMPILE, ROLE_PLAIN, result, scoring)
            if attrs["status"] == "ok":
                self.study.add_trial(optuna.trial.create_trial(
                    value=attrs["total_time_s"], user_attrs=attrs))
            else:
                self.study.add_trial(optuna.trial.create_trial(state=TrialState.FAIL, user_attrs=attrs))
            self.on_trial(attrs)
        return scoring

    def _scoring(self, eager_step: float) -> Scoring:
        return Scoring(steps=self.settings.steps, eager_step_s=eager_step, max_memory_mb=self.settings.max_memory_mb,
                       compile_cost=self.settings.compile_cost)

    # -- searching

    def measured_by_key(self) -> dict[str, Any]:
        from optuna.trial import TrialState

        out = {}
        for t in self.study.get_trials(deepcopy=False):
            key = t.user_attrs.get("config_key")
            if (key and not t.user_attrs.get("duplicate_of") and not t.user_attrs.get("interrupted")
                    and t.state in (TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED)):
                out.setdefault(key, t)
        return out

    def _best_total(self) -> float | None:
        """The best total time so far (eager included): the compile budget of the next trial."""
        from optuna.trial import TrialState

        values = [t.value for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                  if t.value is not None]
        return min(values) if values else None

    def search_done(self) -> int:
        return sum(1 for t in self.measured_by_key().values() if t.user_attrs.get("role") == ROLE_SEARCH)

    def search(self, scoring: Scoring, run: StudyRun) -> None:
        from optuna.trial import TrialState

        all_keys = {c.key() for c in self.space.configs()}
        streak = 0
        while self.search_done() < self.settings.trials:
            measured = self.measured_by_key()
            unmeasured = sorted(all_keys - set(measured))
            if not unmeasured:
                run.exhausted = True
                break
            if streak >= MAX_DUPLICATE_STREAK:
                # The sampler keeps proposing measured configs: hand it a fresh one.
                pick = self._rng.choice(unmeasured)
                cfg = next(c for c in self.space.configs() if c.key() == pick)
                self.study.enqueue_trial(self.space.params_for(cfg), skip_if_exists=False)
                streak = 0
            trial = self.study.ask()
            config = self.space.suggest(trial)
            key = config.key()
            if key in measured:
                prior = measured[key]
                for name, value in prior.user_attrs.items():
                    trial.set_user_attr(name, value)
                trial.set_user_attr("role", ROLE_SEARCH)
                trial.set_user_attr("duplicate_of", prior.number)
                if prior.state == TrialState.COMPLETE:
                    self.study.tell(trial, prior.value)
                else:
                    self.study.tell(trial, state=prior.state)
                run.duplicates += 1
                streak += 1
                continue
            streak = 0
            try:
                result = self.measure(config, f"trial-{trial.number}", compile_budget_s=self._best_total())
            except KeyboardInterrupt:
                trial.set_user_attr("interrupted", True)
                self.study.tell(trial, state=TrialState.FAIL)
                raise
            attrs = trial_attrs(config, ROLE_SEARCH, result, scoring)
            for name, value in attrs.items():
                trial.set_user_attr(name, value)
            if attrs["status"] == "ok":
                self.study.tell(trial, attrs["total_time_s"])
            elif attrs["status"] == "pruned":
                self.study.tell(trial, state=TrialState.PRUNED)
            else:
                self.study.tell(trial, state=TrialState.FAIL)
            run.measured += 1
            self.on_trial(attrs)


def default_threads() -> int:
    """Half the CPUs this process may use (at least 1): the rest serve the tuner, the compile
    workers and the OS, so timings are not disturbed by them."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    return max(1, cpus // 2)


def has_repeated_blocks(model) -> bool:
    return bool(find_block_classes(model))
