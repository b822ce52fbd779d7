"""The baselines every run measures first, once among any number of workers: eager, which every
score needs, and plain ``torch.compile(model)``, the yardstick of every config beyond it.

A worker claims a baseline with a running trial before measuring it; the others see the claim and
wait for eager (not for plain compile), and a claim whose worker died is failed and queued again
(tuner/system/storage.py). A mixin of :class:`~tuner.decide.search.Tuner`, whose measuring and
storing it uses.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from ..core.config import EAGER, PLAIN_COMPILE, CompileConfig
from ..core.errors import StudyError
from ..core.score import Scoring
from ..study import ROLE_EAGER, ROLE_PLAIN, StudySettings, TrialStore, is_void, measured_trials, trial_attrs
from ..system.interrupts import interruptible
from ..system.storage import OWNER_ATTR, owner, worker_label


class Baselines:
    """Eager's and plain compile's baseline trials, claimed among workers."""

    store: TrialStore
    study: Any
    settings: StudySettings
    poll_s: float
    on_trial: Callable[[dict], None]

    def recover(self) -> int:  # pragma: no cover - the Tuner's
        raise NotImplementedError

    def _interruptible(self, number: int, config: CompileConfig, label: str,
                       compile_budget_s: float | None = None) -> dict:  # pragma: no cover - the Tuner's
        raise NotImplementedError

    def _finish(self, number: int, attrs: dict, value: float | None,
                pruned: bool = False) -> bool:  # pragma: no cover - the Tuner's
        raise NotImplementedError


    def baselines(self) -> Scoring:
        """Eager and plain ``torch.compile(model)`` are measured first, once, by one worker.

        Other workers wait for eager (every score needs its step time), not for plain.
        """
        self._baseline(ROLE_EAGER, EAGER, None, wait=True)
        scoring = self._scoring(float(self.study.user_attrs["eager_step_s"]))
        self._baseline(ROLE_PLAIN, PLAIN_COMPILE, scoring, wait=False)
        return scoring

    def finish_baselines(self, scoring: Scoring) -> None:
        """After the search: plain must be measured, also when the worker that claimed it died."""
        self._baseline(ROLE_PLAIN, PLAIN_COMPILE, scoring, wait=True)

    def _baseline(self, role: str, config: CompileConfig, scoring: Scoring | None, wait: bool) -> None:
        while True:
            self.recover()
            state = self._baseline_state(role)
            if state == "done" or (state == "claimed" and not wait):
                return
            if state == "claimed":
                with interruptible():
                    time.sleep(self.poll_s)
                continue
            number = self._claim_baseline(role, config)
            if number is not None:
                with self.store.heartbeat(number, self.settings.heartbeat_s):
                    if self._measure_baseline(number, role, config, scoring):
                        return

    def _baseline_state(self, role: str, mine: int | None = None) -> str:
        """``done``, ``claimed`` (running elsewhere, or claimed before ``mine``) or ``free``."""
        from optuna.trial import TrialState

        trials = [t for t in measured_trials(self.study, ("COMPLETE", "FAIL", "RUNNING", "WAITING"), roles=(role,))
                  if t.number != mine]
        if any(t.state == TrialState.COMPLETE or (t.state == TrialState.FAIL and role == ROLE_PLAIN)
               for t in trials):
            return "done"
        if any(t.state == TrialState.RUNNING and t.number < (math.inf if mine is None else mine) for t in trials):
            return "claimed"
        return "free"

    def _claim_baseline(self, role: str, config: CompileConfig) -> int | None:
        """A running trial that says "I measure this"; None when another worker got there first."""
        import optuna
        from optuna.trial import TrialState

        template = optuna.trial.create_trial(
            state=TrialState.RUNNING, system_attrs={OWNER_ATTR: owner()},
            user_attrs={"role": role, "config_key": config.key(), "config_label": config.describe(),
                        "worker": worker_label()})
        number = self.store.create(template)
        rival = self._baseline_state(role, mine=number)
        if rival == "free":
            return number
        self._yield(number)
        return None

    def _yield(self, number: int, to: int | None = None) -> None:
        """Give up a claim that another worker made first (it stays in the study as a duplicate)."""
        from optuna.trial import TrialState

        if to is None:
            role = self.store.get(number).user_attrs.get("role")
            same = [t for t in self.study.get_trials(deepcopy=False)
                    if t.user_attrs.get("role") == role and not is_void(t) and t.number != number]
            to = min(t.number for t in same)
        self.store.set_user_attrs(number, {"duplicate_of": to})
        self.study.tell(number, state=TrialState.FAIL)

    def _measure_baseline(self, number: int, role: str, config: CompileConfig, scoring: Scoring | None) -> bool:
        result = self._interruptible(number, config, role)
        if role == ROLE_EAGER:
            if result.get("status") != "ok":
                self._finish(number, trial_attrs(config, role, result, None), None)
                fail = result.get("failure") or {}
                raise StudyError(
                    f"the eager baseline failed: {fail.get('raw', 'no result')}",
                    "make the model run eagerly on its example inputs first",
                )
            eager_step = float(result["eager_step_s"])
            scoring = self._scoring(eager_step)
            attrs = trial_attrs(EAGER, ROLE_EAGER, result, scoring)
            attrs.update(speedup=1.0, compile_time_s=0.0, step_time_s=eager_step, total_time_s=scoring.eager_total)
            # Before the trial completes: workers waiting for eager read it as soon as it does.
            self.study.set_user_attr("eager_step_s", eager_step)
        else:
            attrs = trial_attrs(config, role, result, scoring)
        attrs["worker"] = worker_label()
        if not self._finish(number, attrs, attrs["total_time_s"] if attrs["status"] == "ok" else None):
            return False
        self.on_trial(attrs)
        return True

    def _scoring(self, eager_step: float) -> Scoring:
        return Scoring(steps=self.settings.steps, eager_step_s=eager_step, max_memory_mb=self.settings.max_memory_mb,
                       compile_cost=self.settings.compile_cost)
