"""Confirm: the run's race (tuner/decide/race.py) opened right after the baselines, eager
against plain ``torch.compile`` (:func:`open_race`), and joined by the search's finalists once the
search has picked them (:func:`confirm_finalists`), round by round until the statistics can say
compile, stay eager, or that they could not tell (tuner/decide/stats.py).

The search picked its finalists from one timing each; a lucky config wins that way. So the race
measures plain ``torch.compile`` and the finalists again in fresh processes only, interleaved
round by round (A B C A B C ...) so slow phases of the machine hit every candidate alike. Where
glibc's heap is pinned (or on a GPU), each config's process times eager beside it, stepping both
in turn, and the speedup is paired within processes (tuner/decide/stats.py: a process's own
luck, the largest noise here, cancels); elsewhere each process runs its config alone. Eager also
runs alone, first in each round (and last, unpaired), for the level totals are made of and, on
CPU with the heap pinned, once more as a user's process starts today (heap unpinned): the pin's
own gain, told apart from compile's. Every figure the verdict quotes comes from these processes:
each one's mean step is one sample of the measurement model; a finalist's cold compile is
measured twice after it was chosen (its first two rounds; plain compile's baseline trial counts
as one of its two), later rounds compile from the kept cache, the warm figure. The race looks at
the figures after the rounds of :func:`stats.look_rounds` and stops at the first look that
settles it; where the ``--budget`` fits no further round it looks once more, spending what the
error rate has left (:func:`stats.look_confidence`); it drops a finalist whose saving trails the
leader's beyond doubt (plain compile always runs: it is the yardstick).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypedDict

from ..core.config import PLAIN_COMPILE, CompileConfig
from ..core.durations import BUDGET_RAN_OUT
from ..core.score import Scoring, total_time
from ..study import ROLE_EAGER, ROLE_PLAIN, measured_trials
from . import stats
from .race import Race
from .rounds import EAGER_ALONE, EAGER_ALONE_ROUNDS, MIN_ROUNDS, PAIRED_PER_ROUND, round_processes  # noqa: F401 - the budget's plan reads them here
from .search import Tuner
from .verdict import SKIPPED_ATTR, finalist_configs
from .verdict import ranked as ranked_trials
from .waiting import Waiting, estimated_total


class Decision(TypedDict, total=False):
    """What confirmation decided, as the study keeps it (user attribute ``confirmation``) and
    tuner/decide/verdict.py reads it (tuner/decide/evidence.py fills most of it)."""

    verdict: str
    """``compile``, ``stay_eager`` or ``undecided``; absent when eager failed every round (``failed``)."""
    zone: str | None
    """Where the deciding saving's interval lies: ``compile``, ``tie`` or ``slower`` (tuner/decide/stats.py)."""
    so_far: bool
    """A look of a race still running, stored as the answer so far (tuner/decide/race.py)."""
    later_looks: str
    """The last look did not decide: this is the last one that did (:meth:`Race.final`)."""
    racing: list[str]
    choice: dict[str, Any]
    """The chosen config (eager's unless the verdict is ``compile``)."""
    reason: str
    best: dict[str, Any]
    """The chosen config's figures; for any other verdict the best compiled one's."""
    candidates: list[dict[str, Any]]
    eager_step_s: float
    eager_total_s: float
    spread: float
    """The spread between processes (log scale), pooled over every process of the confirmation."""
    spread_df: int
    confidence: float
    look_confidence: float
    looks: int
    tie_margin: float
    heap: dict[str, Any]
    """Eager pinned against eager as a user's process starts: ``gain`` and its ``interval``."""
    machine: dict[str, Any]
    """Whether other work crowded the processes: ``crowded`` of ``processes``, ``busy``, ``load``."""
    to_decide: dict[str, Any]
    """For ``undecided``: about how many rounds, and seconds, would decide."""
    rounds_done: int
    round_s: float
    cut_short: str
    """``2 of 12 rounds``: the ``--budget`` stopped the race."""
    looks_closed: str
    """Why a race asked for more rounds ran none: its last look spent what was left of the error
    rate (:meth:`Race.run`)."""
    failed: str
    finalist_keys: list[str]
    rounds: int


#: Each confirmation process times this share of a search trial's steps (``--measure-seconds``
#: and its rounds). The spread between processes dominates here and the steps inside one barely
#: move it (3.6 s of steps instead of 0.13 s moved a process's spread from 9.5 % to 8.4 %), so
#: confirmation runs many short processes (Kalibera and Jones, "Rigorous benchmarking in
#: reasonable time").
CONFIRM_TIMING_SHARE = 0.25


#: How much faster a config's steps may run in fresh processes than its one search trial said,
#: for confirmation to be worth running. Seen on ViT-B/16: plain compile 0.92x of eager in its
#: search trial (2026-12-02, the AMD machine), 1.04x (1.02x-1.06x) confirmed on the Intel one the
#: day before; fresh processes here differ by up to 20 %. Until then any config more than 5 %
#: behind eager in the search ended the run as "stay eager, unconfirmed".
SEARCH_DOUBT = 1.20
#: Why confirmation was skipped when no compiled config could win even so.
HOPELESS = f"no compiled config beats eager even with steps {SEARCH_DOUBT:.2f}x faster than searched"


def could_win(attrs: dict[str, Any], scoring: Scoring) -> bool:
    """Whether a searched config beats eager's total if its steps are :data:`SEARCH_DOUBT` times
    faster than its search trial measured (its compile time is stable to a few %: kept as is)."""
    step = scoring.step_time(attrs)
    return step is not None and total_time(scoring.compile_time(attrs), scoring.steps,
                                           step / SEARCH_DOUBT) < scoring.eager_total


def confirm(finalists: list[CompileConfig], scoring: Scoring, measure: Callable[..., dict],
            rounds: int = 12, log=print, round_fits: Callable[[int, int | None], bool] | None = None,
            heap_apart: bool = True, search_cold: dict[str, float] | None = None,
            tie_margin: float = stats.TIE_MARGIN, paired: bool = False, per_round: int = 1) -> Decision:
    """Race plain compile and ``finalists`` against eager from the start, for up to ``rounds``
    rounds (a :class:`~tuner.decide.race.Race` of one stretch; its module text has the rules).

    ``measure(config, label, round_=r, heap=None)`` runs one isolated process (the study's own
    trial runner); ``heap="default"`` asks for eager as a user's process starts (only with
    ``heap_apart``). ``search_cold``: config key -> the cold compile its search trial measured (only
    plain compile's counts: a finalist's search figures are where the search's luck is).
    ``paired``: each config's process is asked for eager beside it (``timing="beside"``);
    ``per_round``: each candidate's processes a round (a run's paired race times three).
    ``round_fits(trials, ran)``, under a ``--budget``, says whether one more round of that many
    processes fits, ``ran`` being the processes of the round just run (None before the first);
    when it does not, the race stops there and the decision says ``cut_short``.
    """
    def measure_(config, label, round_=0, heap=None, reuse_cache=False, **timing):
        return measure(config, label, round_=round_, heap=heap, **timing)

    race = Race(scoring, measure_, rounds=rounds, heap_apart=heap_apart, paired=paired, tie_margin=tie_margin, log=log,
                per_round=per_round)
    race.join([PLAIN_COMPILE, *finalists], cold=search_cold)
    race.run(round_fits)
    return race.final()  # type: ignore[return-value]


def join_searched(race: Race, attrs: dict[str, Any] | None, scoring: Scoring, log=print, hold: bool = False) -> bool:
    """The config a search trial just measured joins the run's race, that trial one of its
    processes where it was timed as one (the race's share of the steps, eager beside it:
    ``Race.join``), unless it failed, computed wrongly, ran over the memory bound or cannot win
    (:func:`could_win`); where a candidate beyond plain compile already races undecided against it
    (``Race.slots``), or ``hold`` says the search measures more first, it waits, best first, for
    its turn (tuner/decide/waiting.py). Whether it joined now."""
    if (not attrs or attrs.get("status") != "ok" or not attrs.get("correct") or scoring.over_memory(attrs)
            or not could_win(attrs, scoring) or attrs.get("duplicate_of") is not None):
        return False
    config = CompileConfig.from_dict(attrs["config"])
    behind = behind_plain(attrs, race, scoring)
    if behind:
        log(f"  {config.describe()} does not join the race: {behind}")
        return False
    if race.spent is not None:
        # the race's looks are closed (a look spent the error rate): no round would measure it
        log(f"  {config.describe()}: measured once, by its search trial; the race runs no more rounds (its look "
            f"after round {race.spent} spent the error rate), so it is not compared with plain torch.compile")
        return False
    share = float(attrs.get("timing_share") or 1.0)
    opened = dict(attrs) if math.isclose(share, CONFIRM_TIMING_SHARE) else None
    total, reading = estimated_total(attrs, scoring, _plain_speedup(race))
    rival = attrs.get("rival_speedup")
    race.wait(Waiting(config, opened, total, reading, float(rival) if rival else None))
    joined = [] if hold else race.admit()
    if hold:
        log(f"  {config.describe()} waits to race ({reading}): the search measures more configs first, then the "
            "race takes the best of them first")
    elif config.key() not in race.records:
        log(f"  {config.describe()} waits to race ({reading}): a candidate beyond plain torch.compile races "
            "undecided against it first; the best waiting one joins when it is decided")
    return config.key() in {c.key() for c in joined}


def _plain_row(race: Race) -> dict[str, Any] | None:
    """Plain compile's row of the race's last look, where it has a speedup, or None."""
    return next((c for c in race.decision.get("candidates") or []
                 if c.get("config") == PLAIN_COMPILE.to_dict() and c.get("speedup")), None)


def _plain_speedup(race: Race) -> float | None:
    """Plain compile's speedup over eager as the race's last look measured it, or None."""
    plain = _plain_row(race)
    return float(plain["speedup"]) if plain else None


#: How many of the race's paired spreads a search trial's own speedup may be too low by, at most,
#: before it is taken as unable to beat plain compile (:func:`behind_plain`). A search trial in a
#: run that races times eager beside its config, so its speedup varies by the race's paired spread
#: (2-4 % here), not by the 10-20 % between processes that :data:`SEARCH_DOUBT` allows.
PAIRED_DOUBT = 4.0
#: The least paired spread :func:`behind_plain` assumes (a race that measured less is lucky).
LEAST_SPREAD = 0.02


def behind_plain(attrs: dict[str, Any], race: Race, scoring: Scoring) -> str | None:
    """Why a searched config cannot beat plain compile, or None: even with its trial's reading
    :data:`PAIRED_DOUBT` paired spreads better, its total (its trial's compile and the scored steps)
    is over plain compile's as the race measures it. The reading is its steps against plain
    compile's stepped in the same process (``rival_speedup``) where the trial stepped both, else
    its speedup against eager beside it, at eager's level in the race. Racing it would cost two
    rounds of its own to drop it: on the README example, ``whole/aot_eager`` at 0.87x of eager took
    two rounds beside plain compile's 1.54x, and two ``blocks`` configs at 0.80x plain compile's
    steps in their own trials were raced in turn, four rounds, because the reading against eager,
    widened, still reached plain (2026-12-07)."""
    plain = _plain_row(race)
    if not race.paired or plain is None or not plain.get("total_time_s"):
        return None
    spread = max(float(race.decision.get("spread") or 0.0), LEAST_SPREAD)
    e_step = float(race.decision.get("eager_step_s") or scoring.eager_step_s)
    doubt = math.exp(PAIRED_DOUBT * spread)
    rival, speedup = attrs.get("rival_speedup"), attrs.get("speedup")
    if rival:
        plain_step = e_step / float(plain["speedup"])
        best_case = scoring.compile_time(attrs) + scoring.steps * plain_step / (float(rival) * doubt)
        reading = f"its trial ran {float(rival):.2f}x plain compile's steps, stepped in the same process"
    elif speedup:
        best_case = scoring.compile_time(attrs) + scoring.steps * e_step / (float(speedup) * doubt)
        reading = (f"its trial ran {float(speedup):.2f}x eager's steps, plain compile "
                   f"{float(plain['speedup']):.2f}x")
    else:
        return None
    if best_case <= float(plain["total_time_s"]):
        return None
    return (f"{reading}; even {PAIRED_DOUBT:.0f} paired spreads ({spread:.1%} each) faster, its total "
            f"({best_case:.1f} s) is over plain compile's ({float(plain['total_time_s']):.1f} s)")


def new_race(study, scoring: Scoring, tuner: Tuner, k: int, rounds: int, log=print,
             tie_margin: float = stats.TIE_MARGIN, on_look: Callable[[dict], None] | None = None,
             eager_alone: bool = True) -> Race:
    """The run's race: planned for plain compile and ``k`` finalists, timed as this machine
    allows (paired where the heap is pinned or on a GPU); each decided look is stored in the
    study (user attribute ``confirmation``, finalists as they stand) before ``on_look`` sees it.
    ``eager_alone``: a paired race times eager alone in its first rounds (off under a ``--budget``:
    ``rounds.NOT_TIMED``)."""
    on_gpu = tuner.settings.device.startswith("cuda")
    heap_apart = tuner.settings.heap == "pinned" and not on_gpu
    # in one process eager beside a config reads as alone only with the heap pinned (docs/zoo.md)
    paired = on_gpu or tuner.settings.heap == "pinned"

    def measure(config, label, round_=0, heap=None, timing="alone", reuse_cache=False, rival=None):
        # A candidate's first rounds compile without the kept cache (the cold figure, taken after it
        # was chosen) and keep theirs for the rounds after them, which compile warm from it
        # (tuner/system/caches.py).
        return tuner.measure(config, label, warm=False, reuse_cache=reuse_cache, timing_share=CONFIRM_TIMING_SHARE,
                             timing=timing, check_correctness=False, heap=heap, **({"rival": rival} if rival else {}))

    race = Race(scoring, measure, rounds=rounds, heap_apart=heap_apart, paired=paired, tie_margin=tie_margin, log=log,
                per_round=PAIRED_PER_ROUND if paired else 1, beside_plain=paired,
                eager_alone_rounds=EAGER_ALONE_ROUNDS if eager_alone else 0)

    def store(decision: dict) -> None:
        study.set_user_attr("confirmation", {**decision, "finalist_keys": race.finalist_keys, "rounds": rounds,
                                             "so_far": True})
        study.set_user_attr(SKIPPED_ATTR, None)
        if on_look is not None:
            on_look(decision)

    race.on_look = store
    return race


def _baseline(study, role: str):
    """The baseline trial of ``role`` (eager's or plain compile's), or None."""
    return next(iter(measured_trials(study, roles=(role,))), None)


def _eager_baseline(study) -> dict[str, Any] | None:
    """Eager's baseline trial, whole (what :meth:`Race.take_eager_baseline` weighs), or None."""
    eager = _baseline(study, ROLE_EAGER)
    return dict(eager.user_attrs) if eager is not None else None


def open_race(study, scoring: Scoring, tuner: Tuner, k: int, rounds: int, log=print,
              round_fits: Callable[[int, int | None], bool] | None = None, tie_margin: float = stats.TIE_MARGIN,
              on_look: Callable[[dict], None] | None = None,
              started: Callable[[Race], None] | None = None, yield_after: int | None = None,
              eager_alone: bool = True, shorten: Callable[[Race], bool] | None = None) -> Race | None:
    """Race eager against plain compile right after the baselines, until a look decides: the run's
    first answer, minutes in, before the search. The opening ends sooner where its last look
    estimates that the race's rounds cannot decide it (tuner/decide/stats.py's
    ``rounds_to_decide``), or the ``--budget`` fits no more; the search then takes the time, and
    the race a round between its trials while it looks able to decide. The opening used to end
    after 3 rounds: the zoo's ViT-B/16, a near tie (2026-12-05), then searched, a finalist joined
    and the race ran out of budget undecided, where its other run raced on and called the tie at
    round 8. None where there is no race to run (``--confirm 0``, ``--confirm-rounds 0``, plain
    compile failed its trial or cannot win: :func:`could_win`). ``started(race)`` is told the race
    before its first round. ``yield_after``: the opening ends after that many rounds, decided or
    not, where the race's candidates carry plain compile in their processes (``Race.rides``): the
    search's candidates then decide it as they race (the zoo's Llama training, --budget 10m,
    2026-12-07: an opening of three 134 s rounds to call a 1.02x, and nothing searched).
    ``shorten(race)``, asked after the first round: whether the opening yields there, plain compile
    riding in the first candidate's processes from its second round on (``Race.rides_after``), where
    only that leaves the search's first candidate the time to be compared with plain compile (the
    run's clock says: tuner/run/racing.py). The first answer then comes with that candidate's first
    round, a search trial later."""
    plain = _baseline(study, ROLE_PLAIN)
    if (k <= 0 or rounds <= 0 or plain is None or plain.user_attrs.get("status") != "ok"
            or not could_win(plain.user_attrs, scoring)):  # its compile outweighs any step it could save
        return None
    race = new_race(study, scoring, tuner, k, rounds, log, tie_margin, on_look, eager_alone)
    race.join([PLAIN_COMPILE], cold={PLAIN_COMPILE.key(): plain.user_attrs.get("compile_time_s") or 0.0},
              baseline=dict(plain.user_attrs))
    race.take_eager_baseline(_eager_baseline(study))
    if started is not None:  # the run sees its race from its first look on (what follows an answer is priced from it)
        started(race)
    until = (f"for {yield_after} rounds (then the search's candidates join, plain torch.compile stepped in their "
             "processes)") if yield_after and race.beside_plain else \
        "until a look decides (the search follows and its finalists join the race)"
    log(f"racing eager against plain torch.compile in fresh processes, round by round {until} ...")
    try:
        yields = bool(yield_after and race.beside_plain)
        if yields and shorten is not None:
            race.run(round_fits, until=1)
            if race.done == 1 and not race.decision and shorten(race):
                race.rides_after = 1
                log("  race round 1 done: the opening yields to the search's first candidate now, plain torch.compile "
                    "stepped in its processes as its second round (a second round of its own would leave the "
                    "candidate no time to be compared with it)")
                return race
        race.run(round_fits, until=yield_after if yields else rounds)
    except Exception as exc:  # noqa: BLE001 - the search goes on; confirmation tries a race of its own
        log(f"  the race failed ({type(exc).__name__}: {exc}".splitlines()[0][:300] + "); the search goes on")
        return None
    return race


def confirm_finalists(study, scoring: Scoring, tuner: Tuner, k: int, rounds: int, log=print,
                      round_fits: Callable[[int, int | None], bool] | None = None,
                      tie_margin: float = stats.TIE_MARGIN, race: Race | None = None,
                      on_look: Callable[[dict], None] | None = None, eager_alone: bool = True) -> Decision | None:
    """The search's top ``k`` join the run's ``race`` (:func:`open_race`'s; a new one where the
    run has none, as when it resumes a study), which runs on until a look settles it. Stored in
    the study, so a re-run of a finished study with the same finalists does not measure them
    again. ``round_fits``: see :func:`confirm`; when not even the first round fits, confirmation
    is skipped and says why."""
    eager, _, ranked = ranked_trials(study, scoring)
    skipped = ("--confirm 0" if k <= 0 else "--confirm-rounds 0" if rounds <= 0
               else "no correct compiled config" if not ranked
               else HOPELESS if not any(could_win(t.user_attrs, scoring) for t in ranked) else None)
    if skipped and (race is None or not race.done):
        study.set_user_attr(SKIPPED_ATTR, skipped)
        return None  # nothing is close to beating eager: no lead to confirm
    # the search's lead is one process's figure: a race already under way goes on with plain
    # compile alone rather than end on a hopeless search
    finalists = [] if skipped else finalist_configs(study, scoring, k)
    keys = sorted(c.key() for c in finalists)
    if race is None:
        stored = study.user_attrs.get("confirmation")
        if (stored and stored.get("verdict") and stored.get("finalist_keys") == keys
                and stored.get("rounds") == rounds and stored.get("tie_margin") == tie_margin
                and not stored.get("cut_short")):  # a race the --budget cut short is run again in full
            return stored
        race = new_race(study, scoring, tuner, k, rounds, log, tie_margin, on_look, eager_alone)
        plain = tuner.measured_by_key().get(PLAIN_COMPILE.key())
        race.join([PLAIN_COMPILE], cold={PLAIN_COMPILE.key(): plain.user_attrs.get("compile_time_s") or 0.0}
                  if plain is not None else None, baseline=dict(plain.user_attrs) if plain is not None else None)
        race.take_eager_baseline(_eager_baseline(study))
    race.finalist_keys = keys
    # a finalist waiting for its turn joins when one frees, its search trial one of its processes
    waiting = {w.config.key() for w in race.waiting}
    joined = race.join([c for c in finalists if c.key() not in waiting])
    log(f"confirming {len(joined)} more finalist(s) against eager and plain torch.compile ({len(race.racing)} "
        f"racing): fresh processes, round by round until decided (at most {rounds} rounds of the race; "
        f"{race.done} run) ...")
    try:
        race.run(round_fits)
        decision = dict(race.final())
    except Exception as exc:  # noqa: BLE001 - a broken confirmation must not cost the run its outputs
        decision = {"failed": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}
    if not decision and not race.done:
        study.set_user_attr(SKIPPED_ATTR, BUDGET_RAN_OUT)
        return None
    if decision.get("failed"):
        log(f"  confirmation failed ({decision['failed']}); the verdict uses the search's figures, marked unconfirmed")
    decision.update({"finalist_keys": keys, "rounds": rounds})
    study.set_user_attr("confirmation", decision)
    study.set_user_attr(SKIPPED_ATTR, None)
    return decision  # type: ignore[return-value]
