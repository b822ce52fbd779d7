"""Confirm the finalists: re-measure them side by side before anything is recommended.

One timing per config during the search favours lucky configs on a noisy machine. So after the
search the top few configs and plain ``torch.compile`` are measured again against eager, each in
fresh processes, interleaved round by round (A B C A B C ...) so slow phases of the machine hit
every candidate alike. They compile from the cache their search trial left (tuner/system/caches.py):
the step times are re-measured (each config alone in its process, eager in processes of its
own), the cold compile time is the search's. The verdict is decided on the medians; the spread
across rounds, and never less than two eager processes differ by, is the noise. A lead inside
the noise is not a lead: the simpler choice wins (eager over any compile, plain
``torch.compile`` over a tuned config).
"""
from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict

from ..core.config import EAGER, PLAIN_COMPILE, CompileConfig
from ..core.durations import BUDGET_RAN_OUT
from ..core.score import Scoring, total_time
from .search import Tuner
from .verdict import SKIPPED_ATTR, finalist_configs
from .verdict import ranked as ranked_trials


@dataclass
class Confirmed:
    """Confirmation figures of one config."""

    config: CompileConfig
    speedups: list[float] = field(default_factory=list)
    """Per round: that round's eager alone over this config's step timed alone in its process."""
    compile_times: list[float] = field(default_factory=list)
    eager_steps: list[float] = field(default_factory=list)
    """Eager's own entry: its step in each process of eager alone, in the order they ran."""
    alone: dict[int, list[float]] = field(default_factory=dict)
    """Eager's own entry: round -> its steps in that round's processes of eager alone."""
    peak_memory: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    totals: list[float] = field(default_factory=list)
    warm_compiles: list[float] = field(default_factory=list)
    """Compile times of a restart that keeps the cache (tuner/system/caches.py)."""
    steps: dict[int, float] = field(default_factory=dict)
    """Round -> this config's step time, timed alone in its process (eager: the mean of the
    round's processes of eager alone)."""
    floor_s: float = 0.0
    """The least noise any total has: the eager-versus-eager spread between processes, at this total."""
    floor: float = 0.0
    """The noise floor as a fraction (two eager-alone processes of a round differ by this much)."""

    @property
    def ok(self) -> bool:
        return bool(self.speedups) and not self.failures

    def median(self, values: list[float]) -> float | None:
        return statistics.median(values) if values else None

    def total(self) -> float:
        """The median total; only asked of an entry with totals (eager's once it ran, an ``ok``
        one's, a racing one's that has them), so never None."""
        return statistics.median(self.totals)

    def summary(self) -> dict[str, Any]:
        return {
            "config": self.config.to_dict(),
            "config_label": self.config.describe(),
            "rounds": len(self.speedups),
            "speedup": self.median(self.speedups),
            # the confirmed range: the rounds' range, never narrower than the noise floor allows
            "speedup_min": self._speedup_bound(min, -1),
            "speedup_max": self._speedup_bound(max, +1),
            "speedup_rounds": [round(s, 4) for s in self.speedups],
            "compile_time_s": self.median(self.compile_times),
            "compile_time_warm_s": self.median(self.warm_compiles),
            "total_time_s": self.median(self.totals),
            "total_time_min_s": min(self.totals) if self.totals else None,
            "total_time_max_s": max(self.totals) if self.totals else None,
            "noise_s": self.noise_s,
            "peak_memory_mb": self.median(self.peak_memory),
            "failures": self.failures[:3],
        }

    def _speedup_bound(self, pick, sign: int) -> float | None:
        """The low (sign -1) or high (+1) end of the confirmed speedup: the rounds' extreme, or the
        median moved by half the noise floor (as :attr:`noise_s` moves a total), whichever is wider."""
        if not self.speedups:
            return None
        med = statistics.median(self.speedups)
        floored = med / (1 + self.floor / 2) if sign < 0 else med * (1 + self.floor / 2)
        return pick(pick(self.speedups), floored)

    @property
    def noise_s(self) -> float:
        """How far one measurement may be off: half the range of the per-round totals, and never
        less than the noise floor (:attr:`floor_s`), which 2-3 rounds alone can miss."""
        spread = (max(self.totals) - min(self.totals)) / 2 if len(self.totals) > 1 else 0.0
        return max(spread, self.floor_s)


class Decision(TypedDict, total=False):
    """What confirmation decided, as the study keeps it (user attribute ``confirmation``) and
    tuner/decide/verdict.py reads it."""

    verdict: str
    """``compile`` or ``stay_eager``; absent when the rounds could not decide (``failed``)."""
    choice: dict[str, Any]
    """The chosen config (eager's for ``stay_eager``)."""
    reason: str
    clear: bool
    """Whether more rounds could not change the verdict (every margin at least CLEAR x its noise)."""
    best: dict[str, Any]
    """The chosen config's summary (``Confirmed.summary``); for ``stay_eager`` the best compiled one."""
    candidates: list[dict[str, Any]]
    eager_step_s: float
    """Eager's step, from its processes alone."""
    noise_floor: float
    """The largest relative difference between a round's two eager-alone processes."""
    rounds_done: int
    cut_short: str
    """``2 of 3 rounds``: the ``--budget`` stopped the race."""
    failed: str
    finalist_keys: list[str]
    rounds: int


#: Rounds before the ranking may be called settled: one more than it takes to see any noise.
MIN_ROUNDS = 2
#: Each confirmation trial times this share of a search trial's steps (``--measure-seconds`` and
#: its rounds). What confirmation adds is fresh processes: one config's step
#: time varies 10-20 % between processes and far less within one, so the rounds, not the steps
#: per round, carry its weight; two rounds still time more steps per config than the search did.
CONFIRM_TIMING_SHARE = 0.6
#: Processes of eager alone in each confirmation round: eager's own figure and
#: the noise floor. The budget's plan counts each as a confirmation trial (they compile nothing: an
#: overestimate).
EAGER_ALONE = 2
#: A margin counts as clear at this many times its measured noise.
CLEAR = 2.0


def confirm(finalists: list[CompileConfig], scoring: Scoring, measure: Callable[..., dict],
            rounds: int = 3, log=print, round_fits: Callable[[int, int | None], bool] | None = None
            ) -> Decision:
    """Measure plain compile and ``finalists`` against eager, interleaved, for up to ``rounds``
    rounds: a race. After :data:`MIN_ROUNDS` rounds it stops as soon as the decision rests only
    on margins of at least :data:`CLEAR` times their noise, and a finalist that trails the leader
    that clearly is not measured again (plain compile always is: it is the yardstick a tuned
    config must beat). A close call runs every round.

    Every process runs one thing, as a user's does: each config is timed alone in its process
    (``timing="alone"``, tuner/measure/timing.py), and eager runs in :data:`EAGER_ALONE` processes
    of its own each round, the first and the last of the round. A config's speedup in a round is
    the mean of that round's eager pair over its step, so drift across the round falls on both
    sides alike. (The search's ratios, timed side by side in one process, are cheaper but on
    GPT-2 training read 1.09-1.18x where processes of their own read 1.01x: docs/zoo.md.)
    The pair's spread is the noise floor: what two fresh processes running the same thing differ
    by, which 2-3 rounds alone do not show, and no total's noise is taken as less.

    ``measure(config, label, first=...)`` runs one isolated trial (the study's own trial runner);
    ``first`` is True in a config's first round (where its warm compile is worth measuring).
    ``round_fits(trials, ran)``, under a ``--budget``, says whether one more round of that many
    trials fits, ``ran`` being the trials of the round just run (None before the first): what they
    took sizes the next round better than the search's trials estimate it. When it does not fit,
    the race stops there and the decision says ``cut_short``.
    Returns the per-config summaries and the decision with its reason.
    """
    candidates: list[CompileConfig] = [EAGER, PLAIN_COMPILE]
    for cfg in finalists:
        if cfg.key() not in {c.key() for c in candidates}:
            candidates.append(cfg)
    results = {c.key(): Confirmed(c) for c in candidates}
    racing = [c for c in candidates if c.compiles]
    decision: Decision = {}
    ran = 0  # trials in the round before
    for r in range(rounds):
        if r and round_fits is not None and not round_fits(len(racing) + EAGER_ALONE, ran):
            log(f"  confirmation stopped after round {r}/{rounds}: the next round does not fit in the --budget")
            decision["cut_short"] = f"{r} of {rounds} rounds"
            break
        order = racing if r % 2 == 0 else list(reversed(racing))
        order = [EAGER, *order, EAGER]
        for i, cfg in enumerate(order):
            result = measure(cfg, f"confirm-{r}-{i}", first=r == 0)
            _record(results[cfg.key()], result, scoring, r)
        ran = len(order)
        decision = _decide_now(results, scoring)
        decision["rounds_done"] = r + 1
        if r + 1 < rounds and r + 1 >= MIN_ROUNDS and decision.get("clear"):
            log(f"  confirmation round {r + 1}/{rounds} done: the ranking is settled, no more rounds")
            break
        dropped = _trailing(results, racing) if r + 1 >= MIN_ROUNDS else []
        racing = [c for c in racing if c.key() not in dropped]
        log(f"  confirmation round {r + 1}/{rounds} done"
            + (f"; dropped (trails the leader clearly): {', '.join(results[k].config.describe() for k in dropped)}"
               if dropped else ""))
    return decision


def _record(entry: Confirmed, result: dict, scoring: Scoring, round_: int) -> None:
    """One confirmation trial's figures into its config's entry (``round_`` counts from 0)."""
    if result.get("status") != "ok":
        entry.failures.append((result.get("failure") or {}).get("category", "failed"))
        return
    step = float(result["step_s"])
    entry.peak_memory.append(float(result.get("peak_memory_mb") or 0.0))
    if not entry.config.compiles:  # eager alone: first and last process of the round
        entry.eager_steps.append(step)
        entry.alone.setdefault(round_, []).append(step)
        entry.steps[round_] = statistics.mean(entry.alone[round_])
        return
    entry.steps[round_] = step
    entry.compile_times.append(scoring.compile_time(result))
    if result.get("compile_time_warm_s") is not None:
        entry.warm_compiles.append(float(result["compile_time_warm_s"]))


def _decide_now(results: dict[str, Confirmed], scoring: Scoring) -> Decision:
    """:func:`decide` on the rounds measured so far. Each config's speedup in a round is that
    round's eager alone over its step alone; every total's noise is at least the eager pair's
    (:func:`confirm`)."""
    eager = results[EAGER.key()]
    compiled = [e for e in results.values() if e.config.compiles]
    if not any(e.steps for e in compiled):
        # Every compiled candidate failed every round in fresh processes: a confirmed reason to stay eager.
        return {"choice": EAGER.to_dict(), "verdict": "stay_eager", "clear": True,
                "reason": f"no finalist was confirmed (failures in fresh processes: {_failures(compiled)})",
                "eager_step_s": scoring.eager_step_s, "candidates": [e.summary() for e in results.values()]}
    if not eager.eager_steps:
        return decide(results, scoring.eager_step_s, scoring)  # eager failed every round: decide() says so
    eager_step = statistics.median(eager.eager_steps)
    floor = _pair_floor(eager)
    eager.speedups = [1.0] * len(eager.steps)  # one per round
    eager.compile_times = [0.0] * len(eager.speedups)
    eager.totals = [total_time(0.0, scoring.steps, s) for s in eager.eager_steps]
    eager.floor_s = floor / 2 * scoring.steps * eager_step
    for entry in compiled:
        # compile_times were recorded with steps, round by round; a round without its eager alone is not counted
        rounds = [(eager.steps[r], step, c) for (r, step), c in zip(sorted(entry.steps.items()), entry.compile_times)
                  if r in eager.steps]
        entry.speedups = [e / s for e, s, _ in rounds]
        entry.totals = [total_time(c, scoring.steps, eager_step / speedup)
                        for (_, _, c), speedup in zip(rounds, entry.speedups)]
        med = entry.median(entry.speedups)
        entry.floor_s = floor / 2 * scoring.steps * eager_step / med if med else 0.0
        entry.floor = floor
    decision = decide(results, eager_step, scoring)
    decision["noise_floor"] = floor
    return decision


def _pair_floor(eager: Confirmed) -> float:
    """The largest relative difference between the two eager-alone processes of a round: what two
    fresh processes running the same thing differ by here (0 before a pair is complete)."""
    pairs = [steps[:2] for steps in eager.alone.values() if len(steps) >= 2]
    return max((abs(a / b - 1) for a, b in pairs if b > 0), default=0.0)


def _trailing(results: dict[str, Confirmed], racing: list[CompileConfig]) -> list[str]:
    """Finalists (not eager or plain compile) that trail the fastest by CLEAR times the noise."""
    alive = [results[c.key()] for c in racing if results[c.key()].totals]
    if not alive:
        return []
    leader = min(alive, key=lambda e: e.total())
    yardsticks = {EAGER.key(), PLAIN_COMPILE.key()}
    return [e.config.key() for e in alive if e.config.key() not in yardsticks and e is not leader
            and e.total() - leader.total() > CLEAR * (e.noise_s + leader.noise_s)]


def decide(results: dict[str, Confirmed], eager_step: float, scoring: Scoring) -> Decision:
    """The confirmed verdict, or ``{"failed": why, ...}`` when the rounds cannot decide (eager,
    the yardstick, failed every round): the verdict then falls back to the search's figures."""
    eager = results[EAGER.key()]
    if not eager.totals:
        return {"failed": f"eager failed every round ({_failures([eager])})", "eager_step_s": eager_step,
                "candidates": [e.summary() for e in results.values()]}
    plain = results.get(PLAIN_COMPILE.key())
    ok = [e for e in results.values() if e.ok and e.config.compiles
          and not (scoring.max_memory_mb and (e.median(e.peak_memory) or 0) > scoring.max_memory_mb)]
    best = min(ok, key=lambda e: e.total(), default=None)
    eager_total = eager.total()
    decision: Decision = {
        "eager_step_s": eager_step,
        "candidates": [e.summary() for e in results.values()],
    }
    if best is None:
        failed = [e for e in results.values() if e.config.compiles and not e.ok]
        why = (f"failures in fresh processes: {_failures(failed)}" if failed else "over the memory bound")
        decision.update({"choice": EAGER.to_dict(), "verdict": "stay_eager",
                         "reason": f"no finalist was confirmed ({why})", "clear": True})
        return decision
    lead = eager_total - best.total()
    noise = best.noise_s + eager.noise_s
    if lead <= noise:
        why = (f"the best config ({best.config.describe()}) beats eager by {lead:.1f} s, inside the measured noise "
               f"of {noise:.1f} s: not a real win" if lead >= 0 else
               f"the best config ({best.config.describe()}) is {-lead:.1f} s slower than eager (noise {noise:.1f} s)")
        decision.update({"choice": EAGER.to_dict(), "verdict": "stay_eager", "reason": why, "best": best.summary(),
                         "clear": _separated(eager, [eager, *ok])})
        return decision
    chosen = best
    reason = f"beats eager by {lead:.1f} s (noise {noise:.1f} s)"
    if plain is not None and plain.ok and best is not plain:
        plain_lead = plain.total() - best.total()
        plain_noise = best.noise_s + plain.noise_s
        if plain_lead <= plain_noise and plain.total() < eager_total - (plain.noise_s + eager.noise_s):
            chosen = plain
            reason = (f"{best.config.describe()} leads plain torch.compile by only {plain_lead:.1f} s, inside the "
                      f"noise of {plain_noise:.1f} s: the simpler plain torch.compile is recommended")
        else:
            reason += f"; beats plain torch.compile by {plain_lead:.1f} s (noise {plain_noise:.1f} s)"
    decision.update({"choice": chosen.config.to_dict(), "verdict": "compile", "reason": reason,
                     "best": chosen.summary(), "clear": _separated(chosen, [eager, *ok])})
    return decision


def _separated(chosen: Confirmed, others: list[Confirmed]) -> bool:
    """Whether ``chosen`` is CLEAR times the noise away from every other candidate: more rounds
    could not change the decision, so the race may stop."""
    return all(abs(e.total() - chosen.total()) > CLEAR * (e.noise_s + chosen.noise_s)
               for e in others if e is not chosen)


def _failures(entries) -> str:
    """``crashed x3, timeout`` over ``entries``' failed rounds."""
    from collections import Counter

    counts = Counter(f for e in entries for f in e.failures)
    return ", ".join(f"{k} x{n}" if n > 1 else k for k, n in counts.most_common()) or "no rounds"


def from_cache(result: dict, cold_compile_s: float | None) -> dict:
    """A confirmation trial's result as the score reads it: a trial that compiled from the kept
    cache measured the warm compile; its cold compile is the one measured cold before."""
    if result.get("status") != "ok" or not result.get("compiled_from_cache"):
        return result
    result["compile_time_warm_s"] = result.get("compile_time_s")
    if cold_compile_s is not None:
        result["compile_time_s"] = float(cold_compile_s)
    return result


def confirm_finalists(study, scoring: Scoring, tuner: Tuner, k: int, rounds: int, log=print,
                      round_fits: Callable[[int, int | None], bool] | None = None) -> Decision | None:
    """Re-measure the top ``k`` with eager and plain compile (tuner/decide/confirm.py); stored in the
    study so a re-run with the same finalists does not measure them again. ``round_fits``: see
    :func:`confirm`; when not even the first round fits, confirmation is skipped and says why."""
    eager, _, ranked = ranked_trials(study, scoring)
    skipped = ("--confirm 0" if k <= 0 else "--confirm-rounds 0" if rounds <= 0
               else "no correct compiled config" if not ranked
               else "nothing within 5 % of eager" if ranked[0].value > eager.value * 1.05 else None)
    if skipped:
        study.set_user_attr(SKIPPED_ATTR, skipped)
        return None  # nothing is close to beating eager: no lead to confirm
    finalists = finalist_configs(study, scoring, k)
    keys = sorted(c.key() for c in finalists)
    stored = study.user_attrs.get("confirmation")
    if (stored and stored.get("verdict") and stored.get("finalist_keys") == keys and stored.get("rounds") == rounds
            and not stored.get("cut_short")):  # a race the --budget cut short is run again in full
        return stored
    racing = len({c.key() for c in [PLAIN_COMPILE, *finalists]}) + EAGER_ALONE
    if round_fits is not None and not round_fits(racing, None):
        log("  confirmation skipped: not even one round fits in what is left of the --budget")
        study.set_user_attr(SKIPPED_ATTR, BUDGET_RAN_OUT)
        return None
    log(f"confirming {len(finalists)} finalist(s) against eager and plain torch.compile: up to {rounds} "
        f"interleaved rounds in fresh processes ...")
    cold = {key: t.user_attrs.get("compile_time_s") for key, t in tuner.measured_by_key().items()}

    def measure(config, label, first=False):
        # From the search trial's cache where it was kept (tuner/system/caches.py): the compile measured
        # is then the warm one, and the cold one is the search's. Without a cache (a resumed run)
        # the trial compiles cold, and its first round times the warm compile in a second process.
        result = tuner.measure(config, label, warm=first or scoring.compile_cost == "warm", reuse_cache=True,
                               timing_share=CONFIRM_TIMING_SHARE, timing="alone")
        return from_cache(result, cold.get(config.key()))

    try:
        decision = confirm(finalists, scoring, measure, rounds=rounds, log=log, round_fits=round_fits)
    except Exception as exc:  # noqa: BLE001 - a broken confirmation must not cost the run its outputs
        decision = {"failed": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}
    if decision.get("failed"):
        log(f"  confirmation failed ({decision['failed']}); the verdict uses the search's figures, marked unconfirmed")
    decision.update({"finalist_keys": keys, "rounds": rounds})
    study.set_user_attr("confirmation", decision)
    study.set_user_attr(SKIPPED_ATTR, None)
    return decision
