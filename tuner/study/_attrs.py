"""What a trial stores: its role, its config and the measurements, as Optuna user attributes."""
from __future__ import annotations

import math
from typing import Any

from ..core.config import CompileConfig
from ..core.score import Scoring
from ..core.spec import MEASURED, Role

ROLE_EAGER, ROLE_PLAIN, ROLE_SEARCH = Role.EAGER, Role.PLAIN, Role.SEARCH

#: Measurements copied from the child's result into trial user attributes (tuner/core/spec.py).
MEASUREMENT_ATTRS = MEASURED


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


def is_void(trial) -> bool:
    """A trial that measured nothing: a lost claim, a repeat, one whose worker died, or a suggestion
    the search left out (``not_searched``: a dimension that cannot work, tuner/decide/dead_ends.py)."""
    return bool(trial.user_attrs.get("duplicate_of") is not None or trial.user_attrs.get("interrupted")
                or trial.user_attrs.get("not_searched"))


def measured_trials(study_or_trials, states: tuple[str, ...] = ("COMPLETE",), roles: tuple[str, ...] = ()) -> list:
    """The one trial filter: trials that measured something themselves (not :func:`is_void`), in
    ``states`` (names of Optuna ``TrialState``s) and, when given, of one of ``roles``.

    Example:
        >>> eager = measured_trials(study, roles=(ROLE_EAGER,))  # doctest: +SKIP
    """
    trials = study_or_trials.get_trials(deepcopy=False) if hasattr(study_or_trials, "get_trials") else study_or_trials
    return [t for t in trials if t.state.name in states and not is_void(t)
            and (not roles or t.user_attrs.get("role") in roles)]
