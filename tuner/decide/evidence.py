"""What the race's processes say: the decision weighed from each candidate's record
(tuner/decide/records.py) with the measurement model of tuner/decide/stats.py.

A crowded process (its threads waited for a core: ``records.CROWDED``) is left out of the model,
and when more than :data:`BUSY` of the processes were crowded the verdict is ``undecided``: the
machine was busy.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..core.config import EAGER, PLAIN_COMPILE
from ..core.score import Scoring
from . import rides, stats
from .against_plain import AgainstPlain, beside_plain
from .eager_alone import heap_gain, process_spread
from .records import AS_STARTED, CROWDED, Record  # noqa: F401 - the race reads them here

#: The machine was busy when more than this share of the processes were crowded.
BUSY = 0.25
#: The confidence the intervals hold at together (each is taken at a higher level: stats.look_confidence).
STATED = stats.CONFIDENCE
#: The fewest rounds of its own processes before a candidate's interval is stated: with one, its own
#: spread (paired: its processes' own, not a pool's) has a degree of freedom or two, and a pooled
#: spread lent to it called a late finalist with twice plain compile's spread "compile" at one look
#: 1.2 % of the time against 0.10 % nominal (issue 57's review).
OWN_ROUNDS = 2


def weigh(records: dict[str, Record], scoring: Scoring, looks: stats.Looks, tie_margin: float = stats.TIE_MARGIN,
          confidence: float = stats.CONFIDENCE) -> dict[str, Any]:
    """The decision from the processes so far (the ``Decision`` of tuner/decide/confirm.py, plus
    ``trailing``: candidates the race may stop measuring). Each compiled candidate holds a share
    of the error rate by the order it joined in (``stats.arrival_share``, ``records`` keeping
    that order), kept whether it is dropped, failed or over the memory bound later."""
    eager = records[EAGER.key()]
    compiled = [r for r in records.values() if r.config.compiles]
    every = list(records.values())
    if compiled and all(r.failures and not r.steps for r in compiled):
        # every compiled candidate failed every round in fresh processes: a confirmed reason to stay eager
        return {"verdict": "stay_eager", "choice": EAGER.to_dict(), "machine": _machine(every), "candidates": [],
                "reason": f"no finalist was confirmed (failures in fresh processes: {_failures(compiled)})",
                "eager_step_s": statistics.fmean(s for _, s in eager.steps) if eager.steps else scoring.eager_step_s}
    if not eager.steps and eager.failures:
        return {"failed": f"eager failed every round ({_failures([eager])})", "candidates": []}
    weighed = [r for r in compiled if r.steps and not r.failures and not _over_memory(r, scoring)]
    ok = [r for r in weighed if not r.dropped]  # what may still be chosen
    machine = _machine(every)
    e_steps = _eager_levels(eager, ok)
    if not e_steps:
        # every eager process waited for a core: nothing failed, the machine measured other work
        # (seen in a test run beside a zoo run on this VM; it read "confirmation failed" before).
        # Paired, eager's side of each config's process is its level: eager alone may all be crowded.
        return {"verdict": "undecided", "choice": EAGER.to_dict(), "reason": _busy(machine), "machine": machine,
                "eager_step_s": scoring.eager_step_s, "candidates": [], "confidence": confidence,
                "tie_margin": tie_margin}
    e_step = statistics.fmean(e_steps)
    eager_total = scoring.steps * e_step
    base: dict[str, Any] = {"eager_step_s": e_step, "eager_total_s": eager_total, "confidence": confidence,
                            "tie_margin": tie_margin, "machine": machine}
    heap = heap_gain(records, confidence)
    if heap:
        base["heap"] = heap
    if not ok and not any(r.failures for r in compiled) and any(r.crowded and not r.steps for r in compiled):
        # no compiled process ran uncrowded: nothing failed, the machine measured other work
        return {**base, "verdict": "undecided", "choice": EAGER.to_dict(), "reason": _busy(machine),
                "candidates": [_eager_summary(eager, e_step, eager_total)]}
    if not ok:
        failed = [r for r in compiled if r.failures]
        why = f"failures in fresh processes: {_failures(failed)}" if failed else "over the memory bound"
        return {**base, "verdict": "stay_eager", "choice": EAGER.to_dict(),
                "reason": f"no finalist was confirmed ({why})",
                "candidates": [_eager_summary(eager, e_step, eager_total)]}
    return _weighed(_figures(records, weighed, scoring, looks, confidence, tie_margin), ok, weighed, base, looks)


def _weighed(f: _Figures, ok: list[Record], weighed: list[Record], base: dict[str, Any],
             looks: stats.Looks) -> dict[str, Any]:
    """The decision where candidates ran cleanly: ``ok`` may still be chosen, ``weighed`` are
    every candidate with figures (the dropped ones too, for the report)."""
    records, tie_margin, machine = f.records, f.tie_margin, base["machine"]
    eager = records[EAGER.key()]
    compiled = [r for r in records.values() if r.config.compiles]
    live = {r.key: f.savings[r.key] for r in ok}
    call = stats.decide(live, tie_margin * f.eager_total)
    leader = call.leader or max(live, key=lambda k: live[k].estimate)
    for k, z in call.zones.items():
        f.summaries[k]["zone"] = z
    for r in weighed:
        if r.dropped:  # its zone on the figures it was dropped with, for the report: it is not chosen
            f.summaries[r.key].update(dropped=r.dropped, zone=stats.zone(f.savings[r.key], tie_margin * f.eager_total))
    decision = {**base, "spread": f.model.sigma, "spread_df": f.model.df, "look_confidence": f.levels[leader],
                "looks": len(looks.taken), "paired": f.paired, "process_spread": process_spread(records),
                "candidates": [_eager_summary(eager, f.e_step, f.eager_total), *f.summaries.values(),
                               *(_failed_summary(r) for r in compiled if r not in weighed)],
                "trailing": [k for k in live if k not in (leader, PLAIN_COMPILE.key())
                             and live[k].high < live[leader].low]}
    if f.plain is not None:
        decision.update(f.plain.decision_fields({r.key: r.dropped for r in weighed}))
    decision.update(_verdict(call, leader, f, machine, eager))
    return decision


@dataclass
class _Figures:
    """What the model says of each candidate that ran cleanly, at one look."""

    records: dict[str, Record]
    scoring: Scoring
    model: stats.ProcessModel
    """Every candidate's processes in one fit: the spread the report states (pooled)."""
    models: dict[str, stats.ProcessModel]
    """Each candidate's own fit where processes are paired (its own spread decides), else the pooled one."""
    levels: dict[str, float]
    """Each candidate's look confidence: its share of the error rate, spent over its own looks."""
    costs: dict[str, stats.Cost]
    speedups: dict[str, stats.Interval]
    savings: dict[str, stats.Interval]
    summaries: dict[str, dict]
    e_step: float
    se_log: float
    tie_margin: float
    level_df: int
    """The degrees of freedom of eager's level (``se_log``): its processes less one."""
    paired: bool
    """Whether every candidate's processes timed eager beside it (the model is the paired one)."""
    plain: AgainstPlain | None = None
    """Each candidate against plain compile, where plain compile ran cleanly."""

    @property
    def eager_total(self) -> float:
        return self.scoring.steps * self.e_step


def _figures(records: dict[str, Record], ok: list[Record], scoring: Scoring, looks: stats.Looks, confidence: float,
             tie_margin: float) -> _Figures:
    eager = records[EAGER.key()]
    e_steps = _eager_levels(eager, ok)
    e_step = statistics.fmean(e_steps)
    paired = all(r.paired for r in ok)
    pooled = [sample for r in (ok if paired else [eager, *ok]) for sample in r.samples(eager.key)]
    model = stats.fit(pooled)
    # Paired, each candidate's processes are blocks of their own (eager's level cancels in each), so
    # its own fit is its own spread: a late finalist twice as noisy as plain compile no longer
    # borrows plain compile's many degrees of freedom and small spread (issue 57's review).
    samples = {r.key: r.samples(eager.key) if paired else pooled for r in ok}
    ridden = None
    if paired and PLAIN_COMPILE.key() in samples:
        samples[PLAIN_COMPILE.key()], ridden = rides.pooled(samples[PLAIN_COMPILE.key()],
                                                            rides.ride_samples(records, eager.key), eager.key)
    models = {r.key: stats.fit(samples[r.key]) for r in ok} if paired else {r.key: model for r in ok}
    contrasts = {r.key: models[r.key].contrast(eager.key, r.key) for r in ok}
    # every candidate that joined keeps its share of the error rate, weighed now or not (one that
    # failed a later process or ran over the memory bound had its chances to err)
    started = [r for r in records.values() if r.config.compiles]
    levels = {r.key: _look_confidence(looks, r, samples[r.key], confidence, stats.arrival_share(started.index(r)))
              for r in ok}
    # a cold compile's spread from cold compiles alone, pooled over the candidates (stats.compile_costs)
    costs = stats.compile_costs({r.key: r.compile_samples(scoring) for r in ok},
                                [r.compile_samples(scoring) for r in started if r not in ok])
    se_log = stats.pooled_log_se(e_steps)
    speedups = {r.key: contrasts[r.key].speedup(levels[r.key]) for r in ok}
    savings = {r.key: stats.saving_of(contrasts[r.key], scoring.steps, e_step, se_log, costs[r.key], levels[r.key],
                                      base_df=len(e_steps) - 1) for r in ok}
    rounds = {r.key: r.rounds for r in ok}
    if ridden and ridden.get("pooled") and PLAIN_COMPILE.key() in rounds:
        # the rounds its rides came from are rounds of its samples too (an opening that yielded after
        # its first round: plain compile's second is the first candidate's: tuner/decide/race.py)
        rounds[PLAIN_COMPILE.key()] = len(records[PLAIN_COMPILE.key()].round_set | rides.ride_rounds(records))
    for r in ok:
        if rounds[r.key] < OWN_ROUNDS:
            # One round of its own: its spread has a degree of freedom or two and at the looks'
            # confidence its interval spans 0x to 10^9x, true and of no use. No interval is stated
            # until its second round (a --budget that cut the race short after one round of
            # plain compile, or a finalist that joined a round ago).
            speedups[r.key], savings[r.key] = _no_interval(speedups[r.key]), _no_interval(savings[r.key])
    summaries = {r.key: _summary(r, speedups[r.key], savings[r.key], costs[r.key], e_step, scoring.steps)
                 for r in ok}
    if ridden and PLAIN_COMPILE.key() in summaries:
        summaries[PLAIN_COMPILE.key()]["rides"] = ridden
    for r in ok:
        if rounds[r.key] >= OWN_ROUNDS:
            summaries[r.key]["unadjusted"] = _unadjusted(contrasts[r.key], scoring.steps, e_step, se_log, costs[r.key],
                                                         len(e_steps) - 1)
    plain = None
    if any(r.key == PLAIN_COMPILE.key() for r in ok):
        plain = AgainstPlain.weigh(contrasts, costs, levels, {r.key: r.config.describe() for r in ok},
                                   {r.key for r in ok if rounds[r.key] >= OWN_ROUNDS}, scoring.steps, e_step, se_log,
                                   len(e_steps) - 1, tie_margin, direct=beside_plain(ok, OWN_ROUNDS))
        for key, row in plain.rows.items():
            summaries[key]["against_plain"] = row
    return _Figures(records, scoring, model, models, levels, costs, speedups, savings, summaries, e_step, se_log,
                    tie_margin, len(e_steps) - 1, paired, plain)


def _unadjusted(contrast: stats.Contrast, steps: int, e_step: float, se_log: float, cost: stats.Cost,
                base_df: int) -> dict[str, Any]:
    """The speedup's and the saving's intervals at :data:`STATED` itself, not at the look's confidence,
    with the log speedup's estimate, standard error and degrees of freedom: what a check against a
    known truth judges (benchmarks/full_races.py: coverage, standardized errors). No verdict reads it."""
    speedup = contrast.speedup(STATED)
    saving = stats.saving_of(contrast, steps, e_step, se_log, cost, STATED, base_df=base_df)
    return {"confidence": STATED, "log_speedup": contrast.d, "se_log": contrast.se, "df": contrast.df,
            "speedup_interval": _finite(speedup), "saving_interval_s": _finite(saving)}


def _look_confidence(looks: stats.Looks, record: Record, samples: list[stats.Sample], confidence: float,
                     share: float) -> float:
    """``record``'s look confidence: its ``share`` of the error rate spent over its own looks,
    each look's boundary at the degrees of freedom its model (``samples``) had then, so that its
    t intervals err as often as planned (tuner/decide/looks.py). A look before its
    :data:`OWN_ROUNDS`-th round of its own states no interval of it, cannot err, and hands its
    share on to the next (no degrees of freedom)."""
    own = looks.since(record.joined)
    dfs = stats.look_dfs(samples, [n + record.joined for n in own.taken])
    return own.confidence(confidence, 1 / share, [df if n >= OWN_ROUNDS else 0 for n, df in zip(own.taken, dfs)])


def _eager_levels(eager: Record, ok: list[Record]) -> list[float]:
    """Eager's mean step in every process that timed it with the heap pinned: alone and, paired,
    beside each config (which read as alone with the heap pinned: docs/zoo.md). Each is one
    sample of the level totals are made of; paired, one process of eager alone a round would
    leave it a degree of freedom after two rounds, a t quantile of 76 at the looks' confidence."""
    return [s for _, s in eager.steps] + [e for r in ok if r.paired for e in r.beside]


def _verdict(call: stats.Call, leader: str, f: _Figures, machine: dict, eager: Record) -> dict[str, Any]:
    """The verdict, its choice, its zone and its reason, in words that match what was measured."""
    margin = f"{f.tie_margin:.0%}"
    label = f.records[leader].config.describe()
    if machine["busy"]:
        return {"verdict": "undecided", "choice": EAGER.to_dict(), "best": f.summaries[leader],
                "reason": _busy(machine), "zone": None}
    if call.verdict == "compile":
        chosen, reason = _simpler(leader, f, call)
        return {"verdict": "compile", "choice": f.records[chosen].config.to_dict(), "best": f.summaries[chosen],
                "reason": reason, "zone": "compile"}
    best = f.savings[leader]
    words = _saving_words(best, f.eager_total)
    if call.verdict == "stay_eager":
        why = (f"a tie within {margin}: the best config ({label}) {words}, within {margin} of eager's total either "
               "way: compiling buys nothing worth it" if call.zone == "tie" else
               f"the best config ({label}) is slower than eager: {words}")
        return {"verdict": "stay_eager", "choice": EAGER.to_dict(), "best": f.summaries[leader], "reason": why,
                "zone": call.zone}
    # every record's rounds: paired rounds after the first look time no eager alone (tuner/decide/rounds.py)
    rounds = max((rnd for r in f.records.values() for rnd, _ in r.steps), default=0) + 1
    need = stats.rounds_to_decide(best, f.tie_margin * f.eager_total, rounds, df=f.models[leader].df)
    if not math.isfinite(best.low):
        return {"verdict": "undecided", "choice": EAGER.to_dict(), "best": f.summaries[leader], "zone": None,
                "reason": f"could not tell after one round: the best config ({label}) {words}; a second round gives "
                          "the first interval", "to_decide": {"rounds": None}}
    return {"verdict": "undecided", "choice": EAGER.to_dict(), "best": f.summaries[leader], "zone": None,
            "reason": f"could not tell: the best config ({label}) {words}, {_spans(best, f)}",
            "to_decide": {"rounds": max(rounds + 1, math.ceil(need)) if need else None}}


def _spans(s: stats.Interval, f: _Figures) -> str:
    """What an undecided saving's interval holds: a tie, and a saving or a loss beyond the margin."""
    margin_s, margin = f.tie_margin * f.eager_total, f"{f.tie_margin:.0%}"
    if margin_s <= 0:
        return "an interval that holds both a saving and a loss"
    beyond = " or ".join(w for w, out in (("a saving", s.high >= margin_s), ("a loss", s.low <= -margin_s)) if out)
    return f"an interval that holds both a tie within {margin} and {beyond} of more than that"


def _simpler(chosen: str, f: _Figures, call: stats.Call) -> tuple[str, str]:
    """The chosen config and its reason. A config beyond plain ``torch.compile`` is chosen only
    where it beats plain compile (its zone against it: tuner/decide/against_plain.py) and it or
    plain compile is a proven win over eager; otherwise plain compile where that is a proven win
    (the simpler, as good as far as the race can tell); otherwise the proven leader, its standing
    against plain compile said."""
    plain, against = PLAIN_COMPILE.key(), f.plain
    reason = f"{f.records[chosen].config.describe()} {_saving_words(f.savings[chosen], f.eager_total)}"
    if against is None:
        return chosen, reason
    plain_wins = call.zones.get(plain) == "compile"
    beats = [k for k, z in against.zones.items()
             if z == "beats" and k in call.zones and (plain_wins or call.zones[k] == "compile")]
    if beats:
        best = max(beats, key=lambda k: against.savings[k].estimate)
        return best, (f"{f.records[best].config.describe()} {_saving_words(f.savings[best], f.eager_total)}; "
                      f"{against.words(best)}")
    if chosen == plain:
        return plain, reason
    if plain_wins:
        return plain, (f"plain torch.compile {_saving_words(f.savings[plain], f.eager_total)}; "
                       f"{f.records[chosen].config.describe()} is not shown to beat it ({against.words(chosen)}): "
                       "the simpler plain torch.compile")
    return chosen, f"{reason}; {against.words(chosen)}"


def _saving_words(s: stats.Interval, eager_total: float) -> str:
    share = s.estimate / eager_total if eager_total else 0.0
    sign = "saves" if s.estimate >= 0 else "loses"
    return (f"{sign} {abs(s.estimate):.1f} s of eager's {eager_total:.1f} s ({abs(share):.1%}; {s.low:+.1f} to "
            f"{s.high:+.1f} s, {STATED:.0%} interval)" if math.isfinite(s.low) else
            f"{sign} {abs(s.estimate):.1f} s (no interval yet: one round)")


def _summary(r: Record, speedup: stats.Interval, saving: stats.Interval, cost: stats.Cost, e_step: float,
             steps: int) -> dict:
    step = e_step / speedup.estimate
    return {"config": r.config.to_dict(), "config_label": r.config.describe(), "processes": r.processes,
            "rounds": len({rnd for rnd, _ in r.steps}), "crowded": len(r.crowded),
            "speedup": speedup.estimate, "speedup_interval": _finite(speedup),
            "saving_s": saving.estimate, "saving_interval_s": _finite(saving),
            "step_s": step, "compile_time_s": cost.compile_s, "cold_compiles_s": [round(c, 3) for c in r.cold],
            **({"first_compile_s": round(r.first_compile[0], 3)} if r.first_compile else {}),
            "compile_time_warm_s": statistics.fmean(r.warm) if r.warm else None,
            "warm_compiles_s": [round(c, 3) for c in r.warm], "compile_time_se_s": cost.compile_se,
            "total_time_s": cost.compile_s + steps * step,
            "peak_memory_mb": statistics.median(r.peak_memory) if r.peak_memory else None,
            "step_rounds": [round(s, 6) for _, s in r.steps], "failures": r.failures[:3]}


def _eager_summary(r: Record, e_step: float, total: float) -> dict:
    return {"config": EAGER.to_dict(), "config_label": EAGER.describe(), "processes": r.processes,
            "rounds": len({rnd for rnd, _ in r.steps}), "crowded": len(r.crowded), "step_s": e_step,
            "speedup": 1.0, "total_time_s": total, "step_rounds": [round(s, 6) for _, s in r.steps],
            "peak_memory_mb": statistics.median(r.peak_memory) if r.peak_memory else None, "failures": r.failures[:3]}


def _failed_summary(r: Record) -> dict:
    return {"config": r.config.to_dict(), "config_label": r.config.describe(), "processes": r.processes,
            "failures": r.failures[:3], "speedup": None}


def _no_interval(i: stats.Interval) -> stats.Interval:
    return dataclasses.replace(i, low=-math.inf, high=math.inf)


def _finite(i: stats.Interval) -> list[float | None]:
    return [v if math.isfinite(v) else None for v in (i.low, i.high)]


def _machine(records: list[Record]) -> dict[str, Any]:
    processes = sum(r.processes for r in records)
    crowded = sum(len(r.crowded) for r in records)
    crowded_compiles = sum(len(r.crowded_compiles) for r in records)
    loads = [v for r in records for v in r.loads]
    waits = [v for r in records for v in r.waits]
    return {"processes": processes, "crowded": crowded, "busy": processes > 0 and crowded > BUSY * processes,
            "load": round(max(loads), 2) if loads else None,
            "core_wait_median": round(statistics.median(waits), 4) if waits else None,
            **({"crowded_compiles": crowded_compiles} if crowded_compiles else {})}


def _busy(machine: dict[str, Any]) -> str:
    return (f"the machine was busy: {machine['crowded']} of {machine['processes']} processes waited for a core "
            f"over {CROWDED:.0%} of their timing (load average {machine.get('load') or '?'}); "
            "measure again on a quiet machine")


def _over_memory(r: Record, scoring: Scoring) -> bool:
    return bool(scoring.max_memory_mb and r.peak_memory and statistics.median(r.peak_memory) > scoring.max_memory_mb)


def _failures(records) -> str:
    """``crashed x3, timeout`` over ``records``' failed processes."""
    counts = Counter(f for r in records for f in r.failures)
    return ", ".join(f"{k} x{n}" if n > 1 else k for k, n in counts.most_common()) or "no rounds"
