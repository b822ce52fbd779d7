"""Trials whose worker died: failed, marked interrupted, and their configs queued again."""
from __future__ import annotations

from ..system.storage import HEARTBEAT_S, dead_trials
from ._attrs import ROLE_SEARCH
from ._store import TrialStore

#: Times a config whose worker died is queued again before it is left to the sampler.
MAX_RETRIES = 2


def fail_stale_trials(store: TrialStore, heartbeat_s: int = HEARTBEAT_S, local_processes: bool = True) -> int:
    """Fail the running trials whose worker died, and queue their configs again; returns how many.

    Safe while other workers run: a trial is failed only when its heartbeat stopped, or (with
    ``local_processes``) when the process of this machine that ran it is gone, never merely
    because it is running. Not ``optuna.storages.fail_stale_trials``: that one fails a trial
    before anyone can write on it why it died (see ``tuner.system.storage.stale_trial_numbers``), and
    its retry callback would copy the dead trial's attributes (``interrupted`` among them) into
    the retry.
    """
    failed = 0
    for trial, reason in dead_trials(store.study, store.storage, heartbeat_s, local_processes):
        if mark_interrupted(store, trial.number, reason):
            failed += 1
            requeue(store.study, trial)
    return failed


def mark_interrupted(store: TrialStore, number: int, reason: str) -> bool:
    """Fail a trial that never finished; False when it finished (or was failed) meanwhile."""
    from optuna.exceptions import UpdateFinishedTrialError
    from optuna.trial import TrialState

    try:
        store.set_user_attrs(number, {"interrupted": True, "failure_explanation": reason})
        store.study.tell(number, state=TrialState.FAIL)
        return True
    except (UpdateFinishedTrialError, ValueError):
        return False  # another worker failed it first, or it finished (tell: "Cannot tell a ... trial")


def requeue(study, trial) -> bool:
    """Queue an interrupted search trial's config, so the next worker to ask measures it."""
    from optuna.trial import TrialState

    if trial.user_attrs.get("role") != ROLE_SEARCH or not trial.params:
        return False  # baselines are claimed again by whoever finds them missing
    key = trial.user_attrs.get("config_key")
    lost = sum(1 for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
               if t.user_attrs.get("interrupted") and t.user_attrs.get("config_key") == key)
    if lost > MAX_RETRIES:
        return False
    study.enqueue_trial(trial.params, user_attrs={"retry_of": trial.number}, skip_if_exists=False)
    return True
