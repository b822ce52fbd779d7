"""The Optuna glue that runs nothing: trial attributes, fixed settings, recovery of dead workers' trials.

Every measurement lives in the Optuna storage as trial user attributes (names in
``MEASUREMENT_ATTRS``), so a study can be resumed, inspected with optuna-dashboard, and turned
into reports without measuring anything again. Several workers may share one study; see
tuner/decide/search.py for how they keep out of each other's way and ``_recovery`` for dead workers.
Reports read a finished study through this package alone, without importing the runner.

Example:
    >>> study = open_study("sqlite:///results/mlp/study.db", "mlp", seed=0)  # doctest: +SKIP
    >>> hardware_mismatch(study) is None  # doctest: +SKIP
    True
"""
from __future__ import annotations

from ._attrs import MEASUREMENT_ATTRS, ROLE_EAGER, ROLE_PLAIN, ROLE_SEARCH, is_void, measured_trials, trial_attrs
from ._finalists import FINALISTS, hardware_mismatch
from ._recovery import MAX_RETRIES, fail_stale_trials, mark_interrupted, requeue
from ._settings import (
    FIXED_SETTINGS,
    StudyRun,
    StudySettings,
    check_settings,
    has_repeated_blocks,
    make_sampler,
    open_store,
    open_study,
    scoring_from_study,
    trial_timeout,
)
from ._store import TrialStore

__all__ = [
    "MEASUREMENT_ATTRS", "ROLE_EAGER", "ROLE_PLAIN", "ROLE_SEARCH", "is_void", "measured_trials", "trial_attrs",
    "FINALISTS", "hardware_mismatch", "MAX_RETRIES", "fail_stale_trials", "mark_interrupted", "requeue",
    "FIXED_SETTINGS", "StudyRun", "StudySettings", "check_settings", "has_repeated_blocks",
    "make_sampler", "open_store", "open_study", "scoring_from_study", "trial_timeout", "TrialStore",
]
