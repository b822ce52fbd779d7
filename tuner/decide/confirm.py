"""Confirm the finalists: re-measure them in fresh processes, round by round, until the
statistics can say compile, stay eager, or that they could not tell (tuner/decide/stats.py).

The search picked its finalists from one timing each; a lucky config wins that way. So
confirmation measures plain ``torch.compile`` and the finalists again in fresh processes only,
interleaved round by round (A B C A B C ...) so slow phases of the machine hit every candidate
alike. Where glibc's heap is pinned (or on a GPU), each config's process times eager beside it,
stepping both in turn, and the speedup is paired within processes (tuner/decide/stats.py:
a process's own luck, the largest noise here, cancels); elsewhere each process runs its config
alone. Eager also runs alone, first in each round (and last, unpaired), for the level totals are
made of and, on CPU with the heap pinned, once more as a user's process starts today (heap
unpinned): the pin's own gain, told apart from compile's. Every figure the verdict quotes comes
from these processes: each one's mean step is one sample of the measurement model; each
finalist's cold compile is measured twice (its search trial and the first round, which compiles
without the kept cache; later rounds compile from that cache, the warm figure). The race looks
at the figures after the rounds of :func:`stats.look_rounds` and stops at the first look that
decides; where the ``--budget`` fits no further round it looks once more, spending what the
error rate has left (:func:`stats.look_confidence`); it drops a finalist whose saving trails the
leader's beyond doubt (plain compile always runs: it is the yardstick).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypedDict

from ..core.config import EAGER, PLAIN_COMPILE, CompileConfig
from ..core.durations import BUDGET_RAN_OUT
from ..core.score import Scoring, total_time
from . import stats
from .evidence import AS_STARTED, Record, weigh
from .search import Tuner
from .verdict import SKIPPED_ATTR, finalist_configs
from .verdict import ranked as ranked_trials


class Decision(TypedDict, total=False):
    """What confirmation decided, as the study keeps it (user attribute ``confirmation``) and
    tuner/decide/verdict.py reads it (tuner/decide/evidence.py fills most of it)."""

    verdict: str
    """``compile``, ``stay_eager`` or ``undecided``; absent when eager failed every round (``failed``)."""
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
    failed: str
    finalist_keys: list[str]
    rounds: int


#: The fewest rounds before the first look: one more than it takes to see any spread.
MIN_ROUNDS = 2
#: Each confirmation process times this share of a search trial's steps (``--measure-seconds``
#: and its rounds). The spread between processes dominates here and the steps inside one barely
#: move it (3.6 s of steps instead of 0.13 s moved a process's spread from 9.5 % to 8.4 %), so
#: confirmation runs many short processes (Kalibera and Jones, "Rigorous benchmarking in
#: reasonable time").
CONFIRM_TIMING_SHARE = 0.25
#: The most processes of eager alone in a confirmation round: one pinned and one as the user's
#: process starts (paired), or two (first and last) unpaired. The budget's plan counts each as a
#: confirmation trial (they compile nothing: an overestimate).
EAGER_ALONE = 2


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
            tie_margin: float = stats.TIE_MARGIN, paired: bool = False) -> Decision:
    """Race plain compile and ``finalists`` against eager for up to ``rounds`` rounds.

    ``measure(config, label, round_=r, heap=None)`` runs one isolated process (the study's own
    trial runner); ``heap="default"`` asks for eager as a user's process starts (only with
    ``heap_apart``). ``search_cold``: config key -> the cold compile its search trial measured.
    ``paired``: each config's process is asked for eager beside it (``timing="beside"``).
    ``round_fits(trials, ran)``, under a ``--budget``, says whether one more round of that many
    processes fits, ``ran`` being the processes of the round just run (None before the first);
    when it does not, the race stops there and the decision says ``cut_short``.
    """
    candidates: list[CompileConfig] = [PLAIN_COMPILE]
    for cfg in finalists:
        if cfg.key() not in {c.key() for c in candidates}:
            candidates.append(cfg)
    records = {c.key(): Record(c) for c in [EAGER, *candidates]}
    if heap_apart:
        records[AS_STARTED] = Record(EAGER, key=AS_STARTED)
    for key, cold in (search_cold or {}).items():
        if key in records and cold:
            records[key].cold.append(float(cold))
    racing = list(candidates)
    looks = stats.look_rounds(rounds, MIN_ROUNDS)
    decision: Decision = {}
    ran, walls = 0, list[float]()
    for r in range(rounds):
        n = round_processes(len(racing), heap_apart, paired)
        if r and round_fits is not None and not round_fits(n, ran):
            log(f"  confirmation stopped after round {r}/{rounds}: the next round does not fit in the --budget")
            decision = _weigh(records, scoring, _taken(looks, r, rounds, final=True), tie_margin, walls, r)
            decision["cut_short"] = f"{r} of {rounds} rounds"
            break
        started = time.monotonic()
        order = racing if r % 2 == 0 else list(reversed(racing))
        plan = [records[EAGER.key()], *([records[AS_STARTED]] if heap_apart else []),
                *(records[c.key()] for c in order), *([] if paired else [records[EAGER.key()]])]
        for i, rec in enumerate(plan):
            heap = "default" if rec.key == AS_STARTED else None
            beside = {"timing": "beside"} if paired and rec.config.compiles else {}
            rec.add(measure(rec.config, f"confirm-{r}-{i}", round_=r, heap=heap, **beside), scoring, r)
        ran = len(plan)
        walls.append(time.monotonic() - started)
        if r + 1 not in looks:
            log(f"  confirmation round {r + 1}/{rounds} done")
            continue
        decision = _weigh(records, scoring, _taken(looks, r + 1, rounds), tie_margin, walls, r + 1)
        if decision.get("verdict") in ("compile", "stay_eager") or decision.get("failed"):
            log(f"  confirmation round {r + 1}/{rounds} done: {decision.get('verdict') or 'failed'}")
            break
        dropped = decision.pop("trailing", [])  # type: ignore[typeddict-item]
        racing = [c for c in racing if c.key() not in dropped]
        log(f"  confirmation round {r + 1}/{rounds} done: not decided yet"
            + (f"; dropped (trails the leader beyond doubt): {', '.join(records[k].config.describe() for k in dropped)}"
               if dropped else ""))
    decision.pop("trailing", None)  # type: ignore[typeddict-item]
    return decision


def round_processes(candidates: int, heap_apart: bool, paired: bool) -> int:
    """The processes of one round: each candidate's, eager alone once (paired) or twice, and eager
    as started where the heap's gain is measured apart."""
    return candidates + (1 if paired else 2) + heap_apart


def _taken(looks: list[int], done: int, rounds: int, final: bool = False) -> stats.Looks:
    """The looks taken once ``done`` rounds ran: the planned ones before it, and this one (the
    last: ``final``, or the race's last round)."""
    return stats.Looks((*(n for n in looks if n < done), done), rounds, final or done >= rounds)


def _weigh(records: dict[str, Record], scoring: Scoring, looks: stats.Looks, tie_margin: float,
           walls: list[float], done: int) -> Decision:
    decision: Decision = weigh(records, scoring, looks=looks, tie_margin=tie_margin)  # type: ignore[assignment]
    decision["rounds_done"] = done
    if walls:
        decision["round_s"] = sum(walls) / len(walls)
    to_decide = decision.get("to_decide")
    if to_decide and to_decide.get("rounds") and walls:
        to_decide["seconds"] = round(max(0.0, to_decide["rounds"] - done) * sum(walls) / len(walls), 1)
    return decision


def confirm_finalists(study, scoring: Scoring, tuner: Tuner, k: int, rounds: int, log=print,
                      round_fits: Callable[[int, int | None], bool] | None = None,
                      tie_margin: float = stats.TIE_MARGIN) -> Decision | None:
    """Re-measure the top ``k`` with eager and plain compile (:func:`confirm`); stored in the
    study so a re-run with the same finalists does not measure them again. ``round_fits``: see
    :func:`confirm`; when not even the first round fits, confirmation is skipped and says why."""
    eager, _, ranked = ranked_trials(study, scoring)
    skipped = ("--confirm 0" if k <= 0 else "--confirm-rounds 0" if rounds <= 0
               else "no correct compiled config" if not ranked
               else HOPELESS if not any(could_win(t.user_attrs, scoring) for t in ranked) else None)
    if skipped:
        study.set_user_attr(SKIPPED_ATTR, skipped)
        return None  # nothing is close to beating eager: no lead to confirm
    finalists = finalist_configs(study, scoring, k)
    keys = sorted(c.key() for c in finalists)
    stored = study.user_attrs.get("confirmation")
    if (stored and stored.get("verdict") and stored.get("finalist_keys") == keys and stored.get("rounds") == rounds
            and stored.get("tie_margin") == tie_margin
            and not stored.get("cut_short")):  # a race the --budget cut short is run again in full
        return stored
    on_gpu = tuner.settings.device.startswith("cuda")
    heap_apart = tuner.settings.heap == "pinned" and not on_gpu
    # in one process eager beside a config reads as alone only with the heap pinned (docs/zoo.md)
    paired = on_gpu or tuner.settings.heap == "pinned"
    racing = round_processes(len({c.key() for c in [PLAIN_COMPILE, *finalists]}), heap_apart, paired)
    if round_fits is not None and not round_fits(racing, None):
        log("  confirmation skipped: not even one round fits in what is left of the --budget")
        study.set_user_attr(SKIPPED_ATTR, BUDGET_RAN_OUT)
        return None
    log(f"confirming {len(finalists)} finalist(s) against eager and plain torch.compile: fresh processes, "
        f"round by round until decided (at most {rounds} rounds) ...")
    cold = {key: t.user_attrs.get("compile_time_s") for key, t in tuner.measured_by_key().items()}

    def measure(config, label, round_=0, heap=None, timing="alone"):
        # Round 0 compiles cold (a second cold compile beside the search's, and it leaves the cache
        # kept for the rounds after it, which compile warm from it: tuner/system/caches.py).
        return tuner.measure(config, label, warm=False, reuse_cache=round_ > 0, timing_share=CONFIRM_TIMING_SHARE,
                             timing=timing, check_correctness=False, heap=heap)

    try:
        decision = confirm(finalists, scoring, measure, rounds=rounds, log=log, round_fits=round_fits,
                           heap_apart=heap_apart, search_cold=cold, tie_margin=tie_margin, paired=paired)
    except Exception as exc:  # noqa: BLE001 - a broken confirmation must not cost the run its outputs
        decision = {"failed": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}
    if decision.get("failed"):
        log(f"  confirmation failed ({decision['failed']}); the verdict uses the search's figures, marked unconfirmed")
    decision.update({"finalist_keys": keys, "rounds": rounds})
    study.set_user_attr("confirmation", decision)
    study.set_user_attr(SKIPPED_ATTR, None)
    return decision
