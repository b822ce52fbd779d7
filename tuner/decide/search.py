"""One worker's run: baselines first, then the search, with no config measured twice.

Any number of workers may run a :class:`Tuner` on one study at once (``--workers``, or the same
command on several machines): a worker claims a baseline or a config with a running trial
before measuring it, the others see the claim and measure something else, and a claim whose
worker died (no heartbeat, see ``tuner.system.storage``) is failed and queued again.
"""
from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.config import BLOCKS, PLAIN_COMPILE, CompileConfig
from ..core.score import Scoring
from ..space.moves import first_moves
from ..space.search_space import SearchSpace
from ..study import (
    ROLE_PLAIN,
    ROLE_SEARCH,
    StudyRun,
    StudySettings,
    TrialStore,
    fail_stale_trials,
    mark_interrupted,
    measured_trials,
    requeue,
    trial_attrs,
)
from ..system.caches import KeptCaches
from ..system.interrupts import check as stop_if_interrupted
from ..system.interrupts import interruptible
from ..system.storage import OWNER_ATTR, owner, worker_label
from .baselines import Baselines
from .dead_ends import blocks_dead_end, regional_note
from .trial_runner import TrialRunner

#: Consecutive duplicate suggestions before we hand the sampler an unmeasured config.
MAX_DUPLICATE_STREAK = 3
#: Trial attribute: its worker read the other claims on its config and decided to measure it.
SETTLED_ATTR = "claim_settled"
#: How long a claim waits for a higher claim on its config to settle (it reads right after claiming).
SETTLE_WAIT_S = 30.0


class Tuner(Baselines):
    """Runs baselines and the search for one workload into one Optuna study.

    Several Tuners (processes, machines) may share the study; ``worker`` numbers the local ones
    so their samplers start apart. ``store`` is the study with its storage (``open_store``);
    lines for the user go to ``log`` (default: this module's logger). ``warm_plain``: measure plain
    torch.compile's warm compile too (one short process from its cache): under a ``--budget`` it
    sizes what confirmation, whose trials compile warm, will cost. ``baseline_share``: the share
    of the timing the baselines and the search trials take; a run that races gives them its
    race's (the race's figures decide, and plain compile's baseline trial and each candidate's
    search trial are race processes: tuner/decide/race.py). :attr:`last_measured` holds the
    attributes of the last search trial this worker measured (what the run's race takes in).
    """

    def __init__(self, store: TrialStore, space: SearchSpace, settings: StudySettings, work_dir: Path,
                 on_trial: Callable[[dict], None] | None = None, worker: int = 0,
                 log: Callable[[str], None] | None = None, warm_plain: bool = False,
                 baseline_share: float = 1.0) -> None:
        self.store, self.study = store, store.study
        self.space, self.settings, self.work_dir = space, settings, work_dir
        self.on_trial = on_trial or (lambda attrs: None)
        self.log = log or logging.getLogger(__name__).info
        self._rng = random.Random(settings.seed + worker)
        self.runner = TrialRunner(self.study, settings, work_dir, self._leaders)
        self.poll_s = min(2.0, float(settings.heartbeat_s))
        self.warm_plain = warm_plain
        self.baseline_share = baseline_share
        #: Why ``blocks`` configs are no longer searched (tuner/decide/dead_ends.py), once they are not.
        self._not_searched: str | None = None
        self.last_measured: dict[str, Any] | None = None

    # -- measuring

    def measure(self, config: CompileConfig, label: str = "trial", compile_budget_s: float | None = None,
                warm: bool | None = None, reuse_cache: bool = False, timing_share: float = 1.0,
                timing: str = "beside", check_correctness: bool = True, heap: str | None = None,
                rival: CompileConfig | None = None) -> dict:
        """One isolated trial of ``config`` (:meth:`TrialRunner.measure`, tuner/decide/trial_runner.py)."""
        return self.runner.measure(config, label, compile_budget_s, warm, reuse_cache, timing_share, timing,
                                   check_correctness, heap, rival)

    @property
    def caches(self) -> KeptCaches:
        """The inductor caches the trials kept, for confirmation and the warm start."""
        return self.runner.caches

    def _leaders(self) -> list[str]:
        """Config keys of the measured trials, best total time first."""
        best = sorted((t for t in self.measured_by_key().values() if t.value is not None), key=lambda t: t.value)
        return [t.user_attrs["config_key"] for t in best]

    def _compile_budget(self) -> float | None:
        """How long the next trial's compile may run before it is pruned (it cannot win).

        Under ``--compile-cost cold`` the trial's own (cold) compile is what the score counts, so a
        compile longer than the best total so far cannot win. Under ``warm`` the score counts the
        warm compile, measured afterwards in a second process, and it is not bounded by the cold
        one (on CPU the cold compile is mostly C++ builds a warm start skips): a cold compile over
        the best total may still win warm. No budget is safe there, so warm studies prune nothing
        at compile time; ``--trial-timeout`` still stops runaway compiles.
        """
        if self.settings.compile_cost == "warm":
            return None
        return self._best_total()

    def _best_total(self) -> float | None:
        """The best total time so far (eager included)."""
        from optuna.trial import TrialState

        values = [t.value for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                  if t.value is not None]
        return min(values) if values else None

    def recover(self) -> int:
        """Fail and queue again the trials of workers that stopped beating."""
        return fail_stale_trials(self.store, self.settings.heartbeat_s, local_processes=False)

    def _finish(self, number: int, attrs: dict, value: float | None, pruned: bool = False) -> bool:
        """Store a measurement; False when another worker declared the trial dead meanwhile."""
        from optuna.exceptions import UpdateFinishedTrialError
        from optuna.trial import TrialState

        try:
            self.store.set_user_attrs(number, attrs)
            if value is None:
                self.study.tell(number, state=TrialState.PRUNED if pruned else TrialState.FAIL)
            else:
                self.study.tell(number, value)
            return True
        except (UpdateFinishedTrialError, ValueError):
            if self.store.get(number).state == TrialState.RUNNING:
                raise  # not a lost claim: a real error
        self.log(f"  trial #{number} ({attrs.get('config_label')}) was declared dead by another worker "
                 f"(heartbeat missed); its result is dropped and its config measured again")
        return False

    def _interruptible(self, number: int, config: CompileConfig, label: str,
                       compile_budget_s: float | None = None) -> dict:
        warm = True if label == ROLE_PLAIN and self.warm_plain else None
        share = self.baseline_share  # a search trial too: in a run that races, it is the candidate's first process
        try:
            rival = PLAIN_COMPILE if self._rivals(config, label) else None
            return self.measure(config, label, compile_budget_s, warm=warm, timing_share=share, rival=rival)
        except KeyboardInterrupt:
            if mark_interrupted(self.store, number, "interrupted (Ctrl-C)"):
                requeue(self.study, self.store.get(number))
            raise

    def _rivals(self, config: CompileConfig, label: str) -> bool:
        """Whether a search trial steps plain compile beside its config (tuner/measure/steps.py's
        rival): in a run that races with paired processes the trial is the candidate's first race
        process (tuner/decide/race.py ``join``), so it is its first sample against plain compile too."""
        s = self.settings
        paired = s.device.startswith("cuda") or s.heap == "pinned"
        return (self.baseline_share < 1 and paired and label != ROLE_PLAIN and config.compiles
                and config.key() != PLAIN_COMPILE.key() and self.caches.get(PLAIN_COMPILE.key()) is not None)

    # -- searching

    def measured_by_key(self, trials: list | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for t in measured_trials(self.study if trials is None else trials, ("COMPLETE", "FAIL", "PRUNED")):
            if t.user_attrs.get("config_key"):
                out.setdefault(t.user_attrs["config_key"], t)
        return out

    def search_done(self, trials: list | None = None) -> int:
        return sum(1 for t in self.measured_by_key(trials).values() if t.user_attrs.get("role") == ROLE_SEARCH)

    def search(self, scoring: Scoring, run: StudyRun, fits: Callable[[], bool] | None = None,
               between: Callable[[], None] | None = None) -> None:
        """Measure search trials until the study holds ``settings.trials`` of them, the space is
        exhausted, or ``fits()`` (the ``--budget``: tuner/run/budget.py) says the next one does not fit.
        ``between()`` runs after each trial measured here (the run's race takes a round there)."""
        from optuna.trial import TrialState

        all_keys = {c.key() for c in self.space.configs()}
        streak = 0
        while True:
            stop_if_interrupted()  # a Ctrl-C held through duplicate suggestions stops here
            self.recover()
            trials = self.study.get_trials(deepcopy=False)
            measured = self.measured_by_key(trials)
            done = self.search_done(trials)
            running = {t.user_attrs["config_key"] for t in trials if t.state == TrialState.RUNNING
                       and t.user_attrs.get("role") == ROLE_SEARCH and t.user_attrs.get("config_key")}
            if done >= self.settings.trials:
                break
            dead = self._dead_end(trials, run)
            unmeasured = sorted(all_keys - set(measured) - running - dead)
            if not unmeasured and not running:
                run.exhausted = True
                break
            if fits is not None and not fits():
                break  # the rest of the run (confirmation, warm start) needs what is left
            if not unmeasured or done + len(running) >= self.settings.trials:
                with interruptible():
                    time.sleep(self.poll_s)  # the last configs are being measured by other workers
                continue
            move = self._coordinate_move(trials, set(unmeasured)) if streak == 0 else None
            if move is not None:
                self.study.enqueue_trial(self.space.params_for(move), skip_if_exists=False)
            elif streak >= MAX_DUPLICATE_STREAK:
                # The sampler keeps proposing measured configs: hand it a fresh one.
                pick = self._rng.choice(unmeasured)
                cfg = next(c for c in self.space.configs() if c.key() == pick)
                self.study.enqueue_trial(self.space.params_for(cfg), skip_if_exists=False)
                streak = 0
            measured_one = self._search_trial(scoring, run)
            streak = 0 if measured_one else streak + 1
            if measured_one and between is not None:
                between()

    def _dead_end(self, trials: list, run: StudyRun) -> set[str]:
        """Keys of the configs left out because regional compilation cannot work here; the reason
        goes into the run's notes once."""
        why = blocks_dead_end(trials)
        if why is None:
            return set()
        if why not in run.notes:
            run.notes.append(why)
            self.log("  " + why)
        self._not_searched = why
        return {c.key() for c in self.space.configs() if c.target == BLOCKS}

    def _coordinate_move(self, trials: list, unmeasured: set[str]) -> CompileConfig | None:
        """The first search trials change one setting at a time: of plain ``torch.compile``
        first, every one, then of the best config so far.

        With a budget of a handful of trials, TPE would spend them all on its random start-up;
        changing one dimension at a time (the moves measured to win on workloads like this one
        first: tuner/space/moves.yaml; then target, backend, mode, dynamic, the options)
        finds the settings that matter in few trials, and TPE learns from these trials like from
        any other. Plain compile's every neighbour comes first because one measurement is noisy
        (10-20 % between processes, more than good configs differ): a walk that moved to the
        first config that timed faster would follow noise, and leave the settings after it
        untried; all of them measured against one base says which ones matter. When every
        neighbour of the best config is measured, the walk ends and TPE takes over.
        """
        done = [t for t in measured_trials(trials, roles=(ROLE_PLAIN, ROLE_SEARCH)) if t.user_attrs.get("correct")]
        if not done:
            return None
        plain = [t for t in done if t.user_attrs.get("role") == ROLE_PLAIN]
        best = min(done, key=lambda t: t.value)
        for base in [*plain[:1], best]:
            config = CompileConfig.from_dict(base.user_attrs["config"])
            for neighbour in first_moves(config, self.space.neighbours(config), self.settings.task,
                                         self.settings.device):
                if neighbour.key() in unmeasured:
                    return neighbour
        return None

    def _search_trial(self, scoring: Scoring, run: StudyRun) -> bool:
        """Ask for a config and measure it; False when it was measured or claimed already, or is
        left out (:meth:`_dead_end`)."""
        from optuna.trial import TrialState

        trial = self.study.ask()
        self.store.set_system_attr(trial.number, OWNER_ATTR, owner())
        with self.store.heartbeat(trial.number, self.settings.heartbeat_s):
            config = self.space.suggest(trial)
            key = config.key()
            skip = (self._not_searched if config.target == BLOCKS else None) or self.space.pointless(config)
            if skip:
                trial.set_user_attr("not_searched", skip)
                self.study.tell(trial, state=TrialState.PRUNED)
                return False
            for name, value in (("role", ROLE_SEARCH), ("config_key", key), ("config_label", config.describe()),
                                ("worker", worker_label())):
                trial.set_user_attr(name, value)
            # Read after our claim is visible: of two workers on one config, both see the
            # other's claim or one sees none; the lower trial number keeps it.
            trials = self.study.get_trials(deepcopy=False)
            prior = self.measured_by_key(trials).get(key)
            if prior is not None:
                self._copy_duplicate(trial, prior)
                run.duplicates += 1
                return False
            rival = min((t.number for t in trials if t.number < trial.number and _claims(t, key)), default=None)
            if rival is None:
                rival = self._settled_rival(trial.number, key, trials)
            if rival is not None:
                self._yield(trial.number, to=rival)
                run.duplicates += 1
                return False
            trial.set_user_attr(SETTLED_ATTR, True)  # decided to measure: a lower claim read after ours yields
            result = self._interruptible(trial.number, config, f"trial-{trial.number}", self._compile_budget())
            attrs = trial_attrs(config, ROLE_SEARCH, result, scoring)
            attrs["worker"] = worker_label()
            note = regional_note(attrs)
            if note:
                attrs["regional_note"] = note
            total = attrs["total_time_s"] if attrs["status"] == "ok" else None
            if self._finish(trial.number, attrs, total, pruned=attrs["status"] == "pruned"):
                run.measured += 1
                self.last_measured = attrs
                self.on_trial(attrs)
            return True

    def _settled_rival(self, number: int, key: str, trials: list) -> int | None:
        """A higher-numbered claim on ``key`` that decided to measure: it read the trials before
        our claim was visible (so it saw none), and we claimed after it did, so only we can see
        both. Each such claim is waited for until it settles (measures: we yield to it) or gives
        way (to us). Seen in the suite under load: two lanes measured one config, the lower claim
        keeping it by the number while the higher had not seen it."""
        from optuna.trial import TrialState

        higher = [t.number for t in trials if t.number > number and _claims(t, key)]
        deadline = time.monotonic() + SETTLE_WAIT_S
        while higher:
            for n in list(higher):
                t = self.store.get(n)
                if t.state != TrialState.RUNNING:
                    higher.remove(n)  # it gave way (a duplicate) or is over
                elif t.user_attrs.get(SETTLED_ATTR):
                    return n
            if higher and time.monotonic() > deadline:
                return higher[0]  # still undecided after the wait: yield rather than measure twice
            if higher:
                time.sleep(0.05)
        return None

    def _copy_duplicate(self, trial, prior) -> None:
        """Tell the sampler what a repeated config measured, without measuring it again."""
        from optuna.trial import TrialState

        for name, value in prior.user_attrs.items():
            if name not in ("worker", "retry_of"):  # who and why measured it, not what was measured
                trial.set_user_attr(name, value)
        trial.set_user_attr("role", ROLE_SEARCH)
        trial.set_user_attr("duplicate_of", prior.number)
        if prior.state == TrialState.COMPLETE:
            self.study.tell(trial, prior.value)
        else:
            self.study.tell(trial, state=prior.state)


def _claims(trial, key: str) -> bool:
    from optuna.trial import TrialState

    return (trial.state == TrialState.RUNNING and trial.user_attrs.get("role") == ROLE_SEARCH
            and trial.user_attrs.get("config_key") == key)
