"""Opening a study, and the settings that must stay fixed for its scores to mean one thing."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.errors import StudyError
from ..core.score import Scoring
from ..core.spec import MEASUREMENT
from ..core.targets import find_block_classes
from ..system.storage import HEARTBEAT_S, open_storage
from ._attrs import ROLE_EAGER, ROLE_PLAIN
from ._store import TrialStore

#: Settings that must not change when a study is resumed: they change what a score means.
FIXED_SETTINGS = ("steps", "task", "device", "threads", "workload", "compile_cost", "torch", "measurement",
                  "allow_precision_change", "heap", "nproc", "nnodes", "data_parallel")
#: What a setting was before it was stored (studies made by earlier versions).
SETTING_DEFAULTS = {"compile_cost": "cold", "measurement": 1, "allow_precision_change": False, "heap": "pinned",
                    "nproc": 1, "nnodes": 1, "data_parallel": None}


@dataclass
class StudySettings:
    workload: str
    task: str
    device: str
    threads: int
    steps: int
    trials: int
    seed: int = 0
    trial_timeout: float | None = None
    """Seconds before a trial is stopped; None: scaled to the model (:func:`trial_timeout`)."""
    max_memory_mb: float | None = None
    measure_seconds: float = 6.0
    rounds: int = 5
    space: str = ""
    """The space's name or path as given (``--space``)."""
    heartbeat_s: int = HEARTBEAT_S
    trace_dir: str | None = None
    trial_memory_limit_mb: float | None = None
    heap: str = "pinned"
    """glibc malloc's thresholds in every trial process on CPU (tuner/system/heap.py); fixed: it moves step times."""
    compile_cost: str = "cold"
    allow_precision_change: bool = False
    """Whether the search may change numerics (``--allow-precision-change``): fixed, so that a resumed
    run without the flag never picks a lower-precision config measured with it."""
    torch: str = ""
    """The torch version that measures (the tuner's own, which every trial process runs): another
    torch compiles and runs steps differently, so its times cannot share a study."""
    measurement: int = MEASUREMENT
    """What a trial's figures mean (tuner/core/spec.py); fixed, like the torch version."""
    nproc: int = 1
    """Ranks of each training trial on each machine (``--nproc``); ``threads`` is each rank's."""
    nnodes: int = 1
    """Machines each trial's ranks span (``--nnodes``)."""
    rdzv_endpoint: str | None = None
    """Where the machines' ranks meet (``--rdzv-endpoint``); not fixed: a resumed run may meet elsewhere."""
    data_parallel: str | None = None
    """``ddp`` or ``fsdp2`` on many ranks (``--data-parallel``)."""


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


def open_study(storage: str, name: str, seed: int, create: bool = True, heartbeat_s: int = HEARTBEAT_S):
    """The study ``name`` in the storage at URL ``storage`` (see ``tuner.system.storage`` for the forms)."""
    return open_store(storage, name, seed, create, heartbeat_s).study


def open_store(storage: str, name: str, seed: int, create: bool = True, heartbeat_s: int = HEARTBEAT_S) -> TrialStore:
    """:func:`open_study` with the storage object it was opened on, for workers that write to
    trials they did not ask for (claims, dead workers' trials): see ``TrialStore``."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = make_sampler(seed)
    backend = open_storage(storage, heartbeat_s)
    if not create:
        study = optuna.load_study(study_name=name, storage=backend, sampler=sampler)
    else:
        study = optuna.create_study(
            study_name=name, storage=backend, sampler=sampler, direction="minimize", load_if_exists=True)
    return TrialStore(study, backend)


def make_sampler(seed: int):
    """The study's sampler: seeded TPE."""
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
                                         "space": settings.space, "seed": settings.seed})
        return
    _check_torch(study, stored, settings.torch)
    before = stored.get("measurement", SETTING_DEFAULTS["measurement"])
    if before != settings.measurement:
        raise StudyError(
            f"study '{study.study_name}' was measured by an older compile-tune (measurement version {before}, "
            f"now {settings.measurement}: the input schedule timed in arrival order, glibc's heap pinned, "
            "confirmation timing each config alone, its intervals from every process's mean step), "
            "so its figures cannot be mixed with new ones",
            "tune into a new --out (or --study); `compile-tune report` still rebuilds the old study's outputs",
        )
    for key in FIXED_SETTINGS:
        if key in ("workload", "torch", "measurement"):
            continue  # the same file may be reached by another path; torch and measurement: above
        if stored.get(key, SETTING_DEFAULTS.get(key)) != current[key]:
            raise StudyError(
                f"study '{study.study_name}' was measured with {key}={stored.get(key)!r}, now {key}={current[key]!r}",
                f"use the same --{key.replace('_', '-')}, or a new --out/--study for the new setting",
            )


def _check_torch(study, stored: dict, current: str) -> None:
    """Refuse to add this torch's measurements to a study measured with another torch (its eager
    reference and every score came from that one). Studies stored before the torch version was a
    setting are checked against their eager baseline's recorded environment, if any."""
    before = stored.get("torch")
    if before is None:
        before = next((t.user_attrs["environment"].get("torch") for t in study.get_trials(deepcopy=False)
                       if t.user_attrs.get("role") == ROLE_EAGER and t.user_attrs.get("environment")), None)
    if before and current and before != current:
        raise StudyError(
            f"study '{study.study_name}' was measured with torch {before}, this is torch {current}: "
            "its eager reference and scores do not carry over to another torch",
            f"tune with torch {current} into a new --out (or --study), or resume with torch {before}",
        )


def scoring_from_study(study) -> Scoring | None:
    """The study's scoring, from its storage alone (None before the eager baseline exists)."""
    settings = study.user_attrs.get("settings") or {}
    eager_step = study.user_attrs.get("eager_step_s")
    if eager_step is None or "steps" not in settings:
        return None
    return Scoring(steps=int(settings["steps"]), eager_step_s=float(eager_step),
                   max_memory_mb=settings.get("max_memory_mb"), compile_cost=settings.get("compile_cost", "cold"))


#: Without ``--trial-timeout``, a trial may take this many times plain torch.compile's trial: a
#: max-autotune compile takes 2-3 times a default one, and a hang is still stopped in minutes.
TIMEOUT_SCALE = 4.0
#: The least a scaled timeout gives, and the timeout before plain compile's trial is measured
#: (also at least 20 eager baseline trials: a model whose eager steps alone are slow compiles slowly).
MIN_TRIAL_TIMEOUT_S, FIRST_TRIAL_TIMEOUT_S = 120.0, 900.0


def trial_timeout(study, settings: StudySettings) -> float:
    """Seconds the next trial may run: ``--trial-timeout`` when given, else scaled to this model by
    what its baselines took (a fixed limit is hours too long for a small model, too short for a large one)."""
    if settings.trial_timeout is not None:
        return settings.trial_timeout
    walls: dict[str, float] = {}
    for t in study.get_trials(deepcopy=False):
        wall = t.user_attrs.get("trial_wall_s")
        if wall and t.state.name in ("COMPLETE", "FAIL") and t.user_attrs.get("role") in (ROLE_EAGER, ROLE_PLAIN):
            walls[t.user_attrs["role"]] = max(walls.get(t.user_attrs["role"], 0.0), float(wall))
    if ROLE_PLAIN in walls:
        return max(MIN_TRIAL_TIMEOUT_S, TIMEOUT_SCALE * walls[ROLE_PLAIN])
    return max(FIRST_TRIAL_TIMEOUT_S, 20 * walls.get(ROLE_EAGER, 0.0))


def has_repeated_blocks(model) -> bool:
    return bool(find_block_classes(model))
