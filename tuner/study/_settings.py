"""Opening a study, and the settings that must stay fixed for its scores to mean one thing."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ..config import find_block_classes
from ..errors import StudyError
from ..score import Scoring
from ..storage import HEARTBEAT_S, open_storage

#: Settings that must not change when a study is resumed: they change what a score means.
FIXED_SETTINGS = ("steps", "task", "device", "threads", "workload", "compile_cost")
#: What a setting was before it was stored (studies made by earlier versions).
SETTING_DEFAULTS = {"compile_cost": "cold"}


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
    heartbeat_s: int = HEARTBEAT_S
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


def open_study(storage: str, name: str, seed: int, create: bool = True, heartbeat: int = HEARTBEAT_S):
    """The study ``name`` in the storage at URL ``storage`` (see ``tuner.storage`` for the forms)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = make_sampler(seed)
    backend = open_storage(storage, heartbeat)
    if not create:
        return optuna.load_study(study_name=name, storage=backend, sampler=sampler)
    return optuna.create_study(
        study_name=name, storage=backend, sampler=sampler, direction="minimize", load_if_exists=True
    )


def make_sampler(seed: int):
    """The study's sampler: seeded TPE. benchmarks/search_quality.py replays it."""
    import warnings

    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # constraints_func: still the documented API
        return optuna.samplers.TPESampler(
            seed=seed,
            n_startup_trials=5,
            # Constant liar: with several workers, running trials count as bad, so two workers are
            # not handed the same config at once.
            constant_liar=True,
            constraints_func=_memory_constraint,
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
        if stored.get(key, SETTING_DEFAULTS.get(key)) != current[key]:
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
