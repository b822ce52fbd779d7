"""A study together with the storage object it was opened on: writes to trials by number.

Optuna's ``Study`` API writes only to the trial that ``study.ask()`` handed this process
(``trial.set_user_attr``, ``study.tell``). Workers sharing a study also write to trials they
hold no ``optuna.Trial`` for: a baseline they claimed (``create``), and another worker's trial
that died (its reason, then FAIL). Those writes go through the public methods of the storage
object that ``open_store`` opened (``RDBStorage``, ``JournalStorage``), with the trial ids that
storage gives for a trial number, so nothing private of Optuna (``study._storage``,
``study._study_id``, ``trial._trial_id``) is needed.
"""
from __future__ import annotations

from typing import Any

from ..system.storage import HEARTBEAT_S, Heartbeat


class TrialStore:
    """``study`` and the storage it lives in.

    Example:
        >>> store = open_store("sqlite:///results/mlp/study.db", "mlp", seed=0)  # doctest: +SKIP
        >>> number = store.create(optuna.trial.create_trial(state=TrialState.RUNNING))  # doctest: +SKIP
        >>> store.set_user_attrs(number, {"role": "eager"})  # doctest: +SKIP
    """

    def __init__(self, study, storage) -> None:
        self.study, self.storage = study, storage
        self.study_id = storage.get_study_id_from_name(study.study_name)

    def trial_id(self, number: int) -> int:
        return self.storage.get_trial_id_from_study_id_trial_number(self.study_id, number)

    def get(self, number: int):
        """The trial as stored now (a ``FrozenTrial``)."""
        return self.storage.get_trial(self.trial_id(number))

    def create(self, template) -> int:
        """Add ``template`` (a ``FrozenTrial``, e.g. a RUNNING claim) and return its number.

        ``study.add_trial`` would do, but returns no number, and a claim must know its own.
        """
        return self.storage.get_trial_number_from_id(self.storage.create_new_trial(self.study_id, template))

    def set_user_attrs(self, number: int, attrs: dict[str, Any]) -> None:
        trial_id = self.trial_id(number)
        for name, value in attrs.items():
            self.storage.set_trial_user_attr(trial_id, name, value)

    def set_system_attr(self, number: int, name: str, value: Any) -> None:
        self.storage.set_trial_system_attr(self.trial_id(number), name, value)

    def heartbeat(self, number: int, interval: float = HEARTBEAT_S) -> Heartbeat:
        """A context that beats for trial ``number`` while this worker runs it."""
        return Heartbeat(self.storage, self.trial_id(number), interval)
