"""The ``--budget``: how long a whole run may take, what still fits in it, and where the time went.

A run is model check -> baselines -> search -> confirmation -> warm start -> (thread check),
with the outputs written in between. Under a budget the model check and the baselines always
run (no verdict exists without eager); the search starts a trial only while that trial and a
reserve for what must follow fit in what is left; confirmation runs a round only while a round
fits (the verdict before the warm start: a round may use the warm start's reserve); the warm
start and the thread check run only when they fit.
Every estimate comes from what this study's trials took (:class:`Plan`), so a slow model gets a
larger reserve than a fast one.

Everything here is data and arithmetic: the run asks, the clock answers. How durations are
written and read is tuner/core/durations.py.
"""
from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..core.spec import Role
from ..decide.confirm import CONFIRM_TIMING_SHARE, EAGER_ALONE, MIN_ROUNDS, PAIRED_PER_ROUND
from ..system.heap import PINNED as HEAP_PINNED
from .options import TuneOptions

#: Seconds kept back for writing best_config.yaml, trials.csv and the reports at the end.
OUTPUT_RESERVE_S = 5.0
#: Confirmation rounds the search leaves room for: the race's minimum, so a cut search still gets
#: an interval. The first of them compiles every finalist cold (a second cold compile beside the
#: search's: tuner/decide/confirm.py) and is reserved as such; before 2026-12-02 it was counted
#: warm, and on the zoo's BERT server (--budget 12m and 25m) only one round fit: one round states
#: no interval (tuner/decide/evidence.py).
CONFIRM_RESERVE_ROUNDS = MIN_ROUNDS
#: The confirmation rounds in the search's reserve, widened by what the estimates have missed by:
#: a search trial that fits only at the estimate can leave the second round, and so the interval,
#: out. Seen on the zoo's ViT-B/16 (--budget 6m, 2026-12-02): the cold round took 130 s against
#: 117 s estimated, and the second round did not fit. A search trial less is the price.
CONFIRM_RESERVE_MARGIN = 1.2
#: The share of a ``--budget`` the search leaves to confirmation at least (besides the warm start and
#: outputs), so a larger budget buys rounds, not only search trials (the zoo's BERT server at 30m,
#: 2026-12-02: search 943 s, 4 rounds, undecided). At 6-minute budgets two rounds are about this.
CONFIRM_BUDGET_SHARE = 0.5
#: Without a kept cache (a resumed run) the warm start compiles cold once more first: at most
#: about one compiled trial.
WARM_START_TRIALS = 1.0
#: Fresh processes the warm start runs, each a start, the model's build, a warm compile and a
#: step (:func:`warm_start_wall`): its first step from the bundle, and for inference also the
#: precompiled forward's save and its first step (tuner/ship/bundle.py; an upper bound: only a whole
#: model in one graph is precompiled). Before 2026-12-02 it was reserved as a whole confirmation
#: trial: 69 s on the zoo's GPT-2 training, whose warm start takes about 20 s.
WARM_START_PROCESSES = {"infer": 3, "train": 1}
#: A warm compile (a fresh process that finds the cache) as a share of the cold one, until one is
#: measured (:func:`warm_share`). It skips code generation and the C++ builds, not Dynamo's tracing. Measured on 2 CPU
#: cores: 0.11-0.14 (inference and training of a 4-block model, ../shared/TORCH_COMPILE_FACTS.md
#: section 2), 0.07 (examples/tiny_transformer.py), 0.34 for a whole first step at start-up (the
#: README's warm-start row); on a GPU, tracing is a larger share. 0.35 stays above all of them.
WARM_COMPILE_SHARE = 0.35

def trial_walls(trials: Iterable[Any], search_share: float = 1.0
                ) -> tuple[list[float], list[float], list[float], list[float]]:
    """``(every trial, compiled trials, confirmation trials, cold confirmation trials)``: wall
    seconds of the trials measured so far (Optuna trials or anything with ``user_attrs``), as a
    search trial timing ``search_share`` of the steps would take them (a run that races times its
    search trials as race processes), and what a confirmation trial of each compiled one would
    take, warm and in the first (cold) round.
    A trial's time includes its warm-compile process when it had one;
    failed and pruned trials count too (they cost time as well). Repeats and interrupted trials
    are left out: they copy or lost another trial's figures."""
    measured = _measured(trials)
    share = warm_share(measured)
    every, compiled, confirming, cold = [], [], [], []
    for a in measured:
        wall = float(a["trial_wall_s"]) + float(a.get("warm_compile_wall_s") or 0.0)
        whole = wall + timed_s(a) * (search_share / _share(a) - 1)
        every.append(whole)
        if a.get("role") != Role.EAGER:
            compiled.append(whole)
            confirming.append(confirm_trial_wall(a, share))
            cold.append(confirm_trial_wall(a, cold=True))
    return every, compiled, confirming, cold


def _measured(trials: Iterable[Any]) -> list[dict]:
    """The attributes of the trials whose wall time counts: not repeats, not interrupted."""
    return [t.user_attrs for t in trials if t.user_attrs.get("duplicate_of") is None
            and not t.user_attrs.get("interrupted") and t.user_attrs.get("trial_wall_s") is not None]


def warm_share(attrs: list[dict]) -> float:
    """A warm compile's share of the cold one: the median over the trials whose warm compile was
    measured (under a ``--budget``, plain torch.compile's is), :data:`WARM_COMPILE_SHARE` before."""
    shares = [float(a["compile_time_warm_s"]) / float(a["compile_time_s"]) for a in attrs
              if a.get("compile_time_warm_s") is not None and float(a.get("compile_time_s") or 0.0) > 0]
    return statistics.median(shares) if shares else WARM_COMPILE_SHARE


def confirm_trial_wall(attrs: dict, share: float = WARM_COMPILE_SHARE, cold: bool = False) -> float:
    """A confirmation trial of a measured config: it compiles from the cache its search trial
    kept (its warm compile, or ``share`` of the cold one where none was measured; ``cold``: the
    first round's, which compiles cold) and times :data:`CONFIRM_TIMING_SHARE` of the steps; the
    rest of the trial (start, checks) as before."""
    wall = float(attrs["trial_wall_s"])
    cold_s = compile_spent_s(attrs)
    compile_s = cold_s if cold else _warm_compile_s(attrs, share)
    # confirmation skips the correctness check (the search checked the config): a float64 model
    # and its run, seconds on a real model
    rest = max(0.0, wall - cold_s - float(attrs.get("correctness_s") or 0.0))
    timed = min(rest, timed_s(attrs)) if attrs.get("timed_steps") else rest
    # only the timing shrinks: the process's start, the model's build and the warm-up do not
    return compile_s + (rest - timed) + min(1.0, CONFIRM_TIMING_SHARE / _share(attrs)) * timed


def compile_spent_s(attrs: dict) -> float:
    """The seconds a trial's process spent compiling cold: its cold compile, or where it started from
    the cache of the same config without the optimizer step (``compile_seeded``,
    tuner/decide/trial_runner.py) what it measured, which a later cold process of it spends too."""
    seeded = attrs.get("compile_seeded") or {}
    if seeded.get("base_cold_s") is not None:
        return float(seeded["measured_s"])
    return float(attrs.get("compile_time_s") or 0.0)


def _share(attrs: dict) -> float:
    """The share of the whole timing a trial took (a baseline of a run that races takes the race's)."""
    return float(attrs.get("timing_share") or 1.0)


def _warm_compile_s(attrs: dict, share: float) -> float:
    warm = attrs.get("compile_time_warm_s")
    return float(warm) if warm is not None else share * float(attrs.get("compile_time_s") or 0.0)


def warm_start_wall(attrs: dict, share: float = WARM_COMPILE_SHARE) -> float:
    """One process of the warm start for a measured config: starting it (the trial's wall less
    its child's), importing torch, building the model, a warm compile and a step. A trial
    measured before ``setup_s`` was recorded: a whole confirmation trial, as before."""
    if attrs.get("setup_s") is None or attrs.get("child_wall_s") is None:
        return confirm_trial_wall(attrs, share)
    start = max(0.0, float(attrs["trial_wall_s"]) - float(attrs["child_wall_s"]))
    return (start + float(attrs.get("child_import_s") or 0.0) + float(attrs["setup_s"])
            + _warm_compile_s(attrs, share) + float(attrs.get("step_s") or 0.0))


def timed_s(attrs: dict) -> float:
    """Seconds a search trial spent in its timed steps: the config's, and eager's beside them."""
    steps = float(attrs.get("timed_steps") or 0)
    beside = attrs.get("timing", "beside") == "beside" and attrs.get("role") != Role.EAGER
    return steps * (float(attrs.get("step_s") or 0.0) + (float(attrs.get("eager_step_s") or 0.0) if beside else 0.0))


@dataclass(frozen=True)
class Plan:
    """What the rest of a run costs, estimated from the trials measured so far (medians)."""

    trial_s: float | None
    """One trial, baselines included; None before any was measured."""
    compiled_trial_s: float | None
    """One trial of a config that compiles (what the warm start runs at most)."""
    confirm_trial_s: float | None = None
    """One confirmation trial (:func:`confirm_trial_wall`)."""
    confirm_cold_trial_s: float | None = None
    """One confirmation trial of the first round, which compiles cold (``cold=True``)."""
    confirm_trials: int = 0
    """Trials in a confirmation round (plain compile's and the finalists' processes, three each where
    paired, and eager alone twice: pinned and as started); 0 when off."""
    eager_alone: int = EAGER_ALONE
    """Processes of eager alone in a confirmation round's first rounds (none under a ``--budget``
    where the race is paired: tuner/decide/race.py, ``NOT_TIMED``)."""
    reserve_rounds: int = CONFIRM_RESERVE_ROUNDS
    """The race's rounds the search leaves room for: a paired finalist's first look comes after one
    round (tuner/decide/race.py: ``Race.first_look_after``), an unpaired one's after two."""
    eager_alone_s: float | None = None
    """One eager-alone process of confirmation: the eager baseline's trial with
    :data:`CONFIRM_TIMING_SHARE` of its timing (:func:`confirm_trial_wall`)."""
    warm_start: bool = False
    warm_start_process_s: float | None = None
    """One process of the warm start (:func:`warm_start_wall`, median over the compiled trials)."""
    warm_start_processes: int = 1
    output_s: float = OUTPUT_RESERVE_S

    @classmethod
    def for_run(cls, trials: Iterable[Any], opts: TuneOptions) -> Plan:
        """The plan of a run with these options (a ``TuneOptions``): confirmation is on for the
        time objective with rounds to run; the warm start as the options say."""
        confirming = opts.objective == "time" and opts.confirm_rounds > 0
        # the race pairs its processes where the heap is pinned or on a GPU (tuner/decide/confirm.py)
        paired = opts.heap == HEAP_PINNED or str(opts.device).startswith("cuda")
        # a run that races times its search trials as race processes (tuner/run/phases.py)
        races = confirming and opts.confirm > 0
        return cls.from_trials(trials, confirm=opts.confirm if confirming else 0, warm_start=opts.warm_start,
                               task=opts.task, per_round=PAIRED_PER_ROUND if paired else 1,
                               search_share=CONFIRM_TIMING_SHARE if races else 1.0,
                               eager_alone=not (paired and opts.budget is not None))

    @classmethod
    def from_trials(cls, trials: Iterable[Any], confirm: int = 0, warm_start: bool = False,
                    task: str = "infer", per_round: int = 1, search_share: float = 1.0,
                    eager_alone: bool = True) -> Plan:
        """``confirm``: finalists confirmation will re-measure (0 when it is off); ``per_round``:
        each candidate's processes in a round (:data:`PAIRED_PER_ROUND` where the race pairs them);
        ``search_share``: the share of the steps a search trial times; ``eager_alone``: whether
        the race's first rounds time eager alone."""
        trials = list(trials)
        every, compiled, confirming, cold = trial_walls(trials, search_share)
        eager = [confirm_trial_wall(t.user_attrs) for t in trials if t.user_attrs.get("role") == Role.EAGER
                 and t.user_attrs.get("trial_wall_s") is not None]
        measured = _measured(trials)
        share = warm_share(measured)
        starts = [warm_start_wall(a, share) for a in measured if a.get("role") != Role.EAGER]
        median = statistics.median
        alone = EAGER_ALONE if eager_alone else 0
        return cls(trial_s=median(every) if every else None, compiled_trial_s=median(compiled) if compiled else None,
                   confirm_trial_s=median(confirming) if confirming else None,
                   confirm_cold_trial_s=median(cold) if cold else None,
                   eager_alone_s=median(eager) if eager else None,
                   confirm_trials=per_round * (1 + confirm) + alone if confirm > 0 else 0, eager_alone=alone,
                   reserve_rounds=1 if per_round >= PAIRED_PER_ROUND else CONFIRM_RESERVE_ROUNDS, warm_start=warm_start,
                   warm_start_process_s=median(starts) if starts else None,
                   warm_start_processes=WARM_START_PROCESSES.get(task, 1))

    @property
    def compiled_s(self) -> float:
        """One compiled trial (one trial when no compiled one was measured yet)."""
        return self.compiled_trial_s if self.compiled_trial_s is not None else (self.trial_s or 0.0)

    def confirm_round_s(self, trials: int | None = None, each_s: float | None = None, cold: bool = False) -> float:
        """One confirmation round of ``trials`` confirmation trials; ``each_s``: what one took in the
        round before, measured (the estimate from the search's trials until then); ``cold``: the
        first round, whose compiles are cold."""
        n = self.confirm_trials if trials is None else trials
        if each_s is not None:
            return n * each_s
        estimate = self.confirm_cold_trial_s if cold else self.confirm_trial_s
        each_s = estimate if estimate is not None else self.compiled_s
        alone = min(n, self.eager_alone)  # eager alone compiles nothing: a share of the eager baseline's trial
        return (n - alone) * each_s + alone * (self.eager_alone_s if self.eager_alone_s is not None else each_s)

    @property
    def warm_start_s(self) -> float:
        """The warm start from the cache the chosen config's search trial kept."""
        if not self.warm_start:
            return 0.0
        if self.warm_start_process_s is not None:
            return self.warm_start_processes * self.warm_start_process_s
        return self.confirm_trial_s if self.confirm_trial_s is not None else self.compiled_s

    def warm_start_without_cache_s(self) -> float:
        """The warm start when no cache was kept: a cold compile first."""
        return WARM_START_TRIALS * self.compiled_s if self.warm_start else 0.0

    @property
    def reserve_s(self) -> float:
        """What must still fit once the search stops: confirmation's minimum rounds, the warm
        start and the outputs."""
        if not self.confirm_trials:
            return self.warm_start_s + self.output_s
        first = self.confirm_round_s(each_s=None, cold=True)
        rounds = first + (self.reserve_rounds - 1) * self.confirm_round_s()
        return CONFIRM_RESERVE_MARGIN * rounds + self.warm_start_s + self.output_s

    def search_reserve_s(self, budget_s: float | None = None, raced_s: float = 0.0) -> float:
        """What the search leaves once it stops: :attr:`reserve_s`, and with confirmation on under a
        ``budget_s``, at least :data:`CONFIRM_BUDGET_SHARE` of it for confirmation, less the
        ``raced_s`` the race has had already (its opening, before the search: one race, one share)."""
        if not self.confirm_trials or budget_s is None:
            return self.reserve_s
        return max(self.reserve_s, CONFIRM_BUDGET_SHARE * budget_s - raced_s + self.warm_start_s + self.output_s)

    def search_trial_fits(self, left_s: float, budget_s: float | None = None, raced_s: float = 0.0,
                          joiner: tuple[int, int] | None = None) -> bool:
        """Whether one more search trial and what must follow it fit in ``left_s`` of ``budget_s``.
        ``joiner``: where the run's race has decided an answer, the ``(cold, warm)`` processes the
        trial's config would run with the race until its first look (``Race.joiner_processes``):
        that, the warm start and the outputs are all that must follow, priced from the race's
        state (plain compile warm, no eager alone after the first rounds, the candidates that
        really race). Before it, the worst case and a share of the budget for the race
        (:meth:`search_reserve_s`): the zoo's GPT-2 training at --budget 10m reserved more than the
        whole budget that way, and 13 of 14 runs of measurement 12 searched nothing."""
        if joiner is None:
            return (self.trial_s or 0.0) + self.search_reserve_s(budget_s, raced_s) <= left_s
        return (self.trial_s or 0.0) + self.joiner_s(*joiner) + self.warm_start_s + self.output_s <= left_s

    def joiner_s(self, cold: int, warm: int) -> float:
        """``cold`` cold and ``warm`` warm confirmation processes, widened by what the estimates
        have missed by (:data:`CONFIRM_RESERVE_MARGIN`)."""
        cold_s = self.confirm_cold_trial_s if self.confirm_cold_trial_s is not None else self.compiled_s
        warm_s = self.confirm_trial_s if self.confirm_trial_s is not None else self.compiled_s
        return CONFIRM_RESERVE_MARGIN * (cold * cold_s + warm * warm_s)

    def warm_after_cold(self, each_s: float, trials: int) -> float:
        """A confirmation trial of a later round, from ``each_s`` measured in the first, whose
        ``trials`` processes compiled cold: the estimated cold compiles taken out, warm ones put
        back. Seen on the zoo's GPT-2 training (--budget 8m, 2026-12-02): sized as the cold round
        (2 min 4 s), the second round did not fit in the 2 min 12 s left, and one round states no
        interval."""
        if self.confirm_cold_trial_s is None or self.confirm_trial_s is None or not trials:
            return each_s
        compiled = max(0, trials - min(trials, self.eager_alone))
        saved = compiled * max(0.0, self.confirm_cold_trial_s - self.confirm_trial_s)
        return max(each_s * trials - saved, 0.0) / trials or each_s

    def without_eager_alone(self, each_s: float, ran: int, trials: int) -> float:
        """A process of a round of ``trials``, from ``each_s`` measured over the ``ran`` of the
        round before, where the next round has fewer: the processes left out are taken as eager
        alone (a paired race times it in its first rounds only: tuner/decide/rounds.py), whose cost
        (:attr:`eager_alone_s`) comes off. A dropped candidate's process costs more than that: the
        estimate errs long, as a budget's should."""
        left_out = ran - trials
        if left_out <= 0 or trials <= 0 or not self.eager_alone:
            return each_s  # (under a --budget no round times eager alone: a process is a process)
        alone_s = self.eager_alone_s if self.eager_alone_s is not None else 0.0
        return max(each_s * ran - left_out * alone_s, 0.0) / trials or each_s

    def confirm_round_fits(self, left_s: float, trials: int, each_s: float | None = None) -> bool:
        """Whether one more confirmation round fits beside the outputs. The verdict comes first:
        a round may use the warm start's reserve (the warm start then runs only if it still
        fits). Seen on the zoo's ResNet-50 (--budget 6m, 2026-12-02): a fourth round of 55 s
        would likely have decided; it did not fit beside the warm start's reserve in the 49 s
        left, and the verdict was undecided with no warm start run either."""
        return self.confirm_round_s(trials, each_s) + self.output_s <= left_s

    def left_s(self, search_trials_left: int) -> float | None:
        """About how long the rest of the run takes; None before any trial was measured."""
        if self.trial_s is None:
            return None
        return max(0, search_trials_left) * self.trial_s + self.reserve_s
