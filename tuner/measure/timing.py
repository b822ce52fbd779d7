"""Steady step times of a trial: eager and compiled side by side, or the compiled side alone.

**Side by side** (``spec.timing == "beside"``, the search, and confirmation's paired processes):
step by step, each input stepped eager and compiled in turn, which goes first flipped every step
(A B B A), so machine drift hits both alike; the speedup is the ratio of the mix's weighted step
times measured in one process. Blocks of each side in turn (16 steps of BERT a side, ~4 s) let
drift hit one side: rounds of one process read 0.87x-1.23x and processes differed by 5.3 %
once paired, 2.0 % step by step (docs/statistics.md).

**Alone** (``"alone"``): only the config's own side is timed, as a user's process runs it;
confirmation runs eager so, and every config so where glibc's heap is not pinned: timing eager
beside a compiled model in one process with the heap as it starts does not give what either runs
alone (GPT-2 training here: 1.09-1.18x in one process, 1.01x in processes running one thing
each; with the heap pinned, 0.97x-1.01x eager beside over alone on seven workloads: docs/zoo.md).
Confirmation's other processes time beside, for the paired model of tuner/decide/stats.py.

**Arrival order.** Without an input schedule, each round times a block of steps on the example
inputs. With one, each round replays a window of the schedule in arrival order (windows move
on round by round and cover the whole schedule), one step per input, as the user's run calls
the model: grouping equal shapes into blocks flatters whichever side suffers more from a shape
change (BERT over 16 request lengths: 1.09x grouped, 1.06x in arrival order, in one process).
Each step's time is filed under its input's signature; a side's figure is the schedule's
weighted mean of per-signature medians (tuner/measure/mix.py).

**Three sides** (``rival``): a race process of a candidate beyond plain compile steps plain compile
too (tuner/measure/steps.py ``RIVAL``), so the candidate is compared with plain compile in one
process, as it is with eager, instead of through eager across processes (two contrasts' variance,
tuner/decide/against_plain.py). The order of the sides runs through every permutation step by
step (for two sides, A B then B A as before), so each side follows each other equally often and
what one leaves in the caches is charged to all alike.
"""
from __future__ import annotations

import contextlib
import gc
import itertools
import math
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from .devices import timed
from .mix import MixEntry, signature, weighted
from .steps import RIVAL

#: Most steps of one input in one block (without a schedule).
MOST_PER_BLOCK = 50
#: Untimed steps of each side before the timed ones (A B B A ...), at most, and the time they
#: may take: a tiny convnet's first steps after the collection took 0.6-0.8 ms, 0.27 ms, 0.12 ms,
#: then 70 us; a model whose step takes 20 ms or more settles in one pair.
SETTLING_PAIRS = 4
SETTLING_S = 0.02
#: ``on``: leave Python's collector as it is while steps are timed (benchmarks/collector.py compares
#: the two); read when timing starts, so a forked trial sees its own request's environment.
GC_ENV = "COMPILE_TUNE_TIMING_GC"


@dataclass
class Timing:
    """Steady step times over the mix: per entry, every eager and every compiled time."""

    mix: list[MixEntry]
    eager: list[list[float]]
    compiled: list[list[float]]
    round_ratios: list[float | None]
    arrival_order: bool = False
    rival: list[list[float]] | None = None
    """The rival's times per entry, where the process stepped one (plain compile beside a candidate)."""
    collections: list[float] = field(default_factory=list)
    """Each of Python's collections while steps were timed, its pause (seconds): none unless
    ``COMPILE_TUNE_TIMING_GC=on``."""

    @property
    def alone(self) -> bool:
        return not any(self.eager)

    @property
    def eager_mix_s(self) -> float | None:
        return None if self.alone else weighted([statistics.median(t) for t in self.eager], self.mix)

    @property
    def compiled_mix_s(self) -> float:
        return weighted([statistics.median(t) for t in self.compiled], self.mix)

    def compiled_median_for(self, inputs: Any) -> float | None:
        sig = signature(inputs)
        for entry, times in zip(self.mix, self.compiled):
            if signature(entry.inputs) == sig and times:
                return statistics.median(times)
        return None

    def figures(self) -> dict[str, Any]:
        eager, compiled = self.eager_mix_s, self.compiled_mix_s
        per_input = []
        for e, et, ct in zip(self.mix, self.eager, self.compiled):
            row = {"input": e.label, "weight": round(e.weight, 4), "step_s": statistics.median(ct)}
            if et:
                row.update(eager_step_s=statistics.median(et), speedup=statistics.median(et) / statistics.median(ct))
            per_input.append(row)
        return {
            "timing": "alone" if self.alone else "beside",
            "arrival_order": self.arrival_order,
            "eager_step_s": eager,
            "step_s": compiled,
            # what a run pays: the mean, tail included (garbage collection, page faults, periodic
            # work); the median above ranks configs robustly, the mean is what totals are made of
            "step_mean_s": weighted([statistics.mean(t) for t in self.compiled], self.mix),
            "eager_step_mean_s": None if self.alone else weighted([statistics.mean(t) for t in self.eager], self.mix),
            "step_spread": weighted([_spread(t) for t in self.compiled], self.mix),
            "eager_step_spread": None if self.alone else weighted([_spread(t) for t in self.eager], self.mix),
            "speedup": eager / compiled if eager and compiled > 0 else None,
            "round_ratios": self.round_ratios,
            "timed_steps": sum(len(t) for t in self.compiled),
            "timing_gc_collections": len(self.collections),
            "timing_gc_pause_s": sum(self.collections),
            "mix": per_input[:50],
            **self._rival_figures(),
        }

    def _rival_figures(self) -> dict[str, Any]:
        if not self.rival or not any(self.rival):
            return {}
        step = weighted([statistics.median(t) for t in self.rival], self.mix)
        return {"rival_step_s": step, "rival_step_mean_s": weighted([statistics.mean(t) for t in self.rival], self.mix),
                "rival_speedup": step / self.compiled_mix_s if self.compiled_mix_s > 0 else None}


def time_steps(step, mix: list[MixEntry], schedule: list | None, rounds: int, measure_seconds: float,
               estimates: list[float], device: str, alone: bool = False, rival: bool = False) -> Timing:
    """Time ``step`` over ``mix`` for ``rounds`` rounds within about ``measure_seconds``:
    side by side with eager, or (``alone``) the step's own mode only; with ``rival``, the step's
    rival (plain compile) as a third side. ``estimates`` are eager's step times per mix entry,
    which size the blocks."""
    rounds = max(1, rounds)
    sides: list[bool | str] = [True] if alone else [False, True, *([RIVAL] if rival else [])]
    # a rival's side is timed on top: eager's and the config's keep the steps a process of two sides
    # gives them, so its contrast with eager is as precise as in any other process
    per_side = measure_seconds / (len(sides[:2]) * rounds)
    blocks = (_arrival_windows(schedule, mix, estimates, rounds, per_side) if schedule
              else _blocks(mix, estimates, per_side) * rounds)
    index = {signature(e.inputs): i for i, e in enumerate(mix)}
    times: dict[bool | str, list[list[float]]] = {side: [[] for _ in mix] for side in (False, True, RIVAL)}
    orders = list(itertools.permutations(sides))
    ratios: list[float | None] = []
    first = blocks[0][0][0]
    with _no_garbage_collection() as collections:
        # the first steps after the stages before timing (and the collection) run on cold caches:
        # 0.6-0.8 ms for a 70 us step, and the first timed step was always eager's
        settle = max(1, min(SETTLING_PAIRS, math.ceil(SETTLING_S / max(min(estimates, default=1.0), 1e-6))))
        for k in range(settle):
            for side in orders[k % len(orders)]:
                with step.mode(side):
                    step(first)
        for r in range(rounds):
            ratios.append(_time_round(step, blocks[r], r, orders, index, times, device, alone))
    return Timing(mix, times[False], times[True], ratios, arrival_order=bool(schedule),
                  rival=times[RIVAL] if rival else None, collections=collections)


def _time_round(step, blocks: list[list[Any]], r: int, orders: list[tuple[bool | str, ...]], index: dict,
                times: dict, device: str, alone: bool) -> float | None:
    """One round's steps into ``times``; eager's sum over the config's (None alone)."""
    sums = {False: 0.0, True: 0.0, RIVAL: 0.0}
    items = [item for inputs in blocks for item in inputs]
    for k, item in enumerate(items):
        # every side step by step, the order moving on each step (A B, B A; with three sides all
        # six orders): drift lasting a few steps hits every side alike, where a block of each
        # side let it hit one
        for side in orders[(r + k) % len(orders)]:
            with step.mode(side):
                took = timed(lambda x=item: step(x), device)[0]
            times[side][index[signature(item)]].append(took)
            sums[side] += took
    return None if alone or not sums[True] else sums[False] / sums[True]


@contextlib.contextmanager
def _no_garbage_collection():
    """Python's collector off while steps are timed, as ``timeit`` does. A collection starts after a
    fixed count of allocations, both sides' together, so in a process stepping eager and the config
    in turn it lands on whichever side's step crosses the count, not the side that allocated: with
    it on, the timing does not measure what a side's own allocations cost, it charges one side a
    pause. Once (a tiny convnet, 70 us a step) a 0.7 ms pause fell on the 20th eager step in 6 of 8
    processes and races of eager against eager said "compile" (benchmarks/real_races.py).
    Collected first, so no garbage of the stages before is left for the steps.

    Off, by measurement (benchmarks/collector.py, 2026-12-07, ``43388a0``; 2-core Intel Xeon,
    2 threads, torch 2.13.0+cpu; 8 processes a mode, confirmation's share): left on, a process took
    one collection while timing (none in MLP training), 0.07-0.45 ms, at most
    0.35 % (tiny transformer) and 0.56 % (tiny convnet) of the config's timed time were it all
    charged to the config. Speedup on over off (Welch 95 %): tiny transformer 0.992x (0.972-1.012,
    16 processes a mode), tiny convnet 1.040x (0.968-1.117), MLP training 1.014x (0.939-1.095),
    eager against eager 0.997x (0.964-1.032): no difference, and off hides from a run's time at
    most those pauses (docs/statistics.md, *The collector while timing*). ``COMPILE_TUNE_TIMING_GC=on``
    leaves it on."""
    was = gc.isenabled()
    pauses: list[float] = []
    began: list[float] = []
    gc.collect()

    def note(phase: str, _info: dict) -> None:  # each collection's pause, where the collector is left on
        if phase == "start":
            began[:] = [time.perf_counter()]
        elif began:
            pauses.append(time.perf_counter() - began.pop())

    if os.environ.get(GC_ENV) != "on":
        gc.disable()
    gc.callbacks.append(note)
    try:
        yield pauses
    finally:
        gc.callbacks.remove(note)
        if was:
            gc.enable()


def _blocks(mix: list[MixEntry], estimates: list[float], per_side: float) -> list[list[list[Any]]]:
    """One round's blocks, one per mix entry: k steps of its inputs, k sized to its step time."""
    share = per_side / len(mix)
    least = 3 if len(mix) == 1 else 2
    counts = [max(least, min(int(share / max(est, 1e-5)), MOST_PER_BLOCK)) for est in estimates]
    return [[[e.inputs] * k for e, k in zip(mix, counts)]]


def _arrival_windows(schedule: list, mix: list[MixEntry], estimates: list[float], rounds: int,
                     per_side: float) -> list[list[list[Any]]]:
    """Per round, one window of the schedule in arrival order. Windows follow on from each other
    (wrapping round), together at least one whole pass, so every input of the schedule is timed;
    each at least two steps per distinct input long, as many as the blocks time without a schedule."""
    by_sig = {signature(e.inputs): est for e, est in zip(mix, estimates)}
    mean_step = sum(by_sig[signature(item)] for item in schedule) / len(schedule)
    # at least two steps per distinct input a round, as the blocks time without a schedule
    least = min(2 * len(mix), len(schedule))
    fits = min(int(per_side / max(mean_step, 1e-5)), 4 * len(schedule))
    width = max(math.ceil(len(schedule) / rounds), fits, least, 2)
    windows = []
    for r in range(rounds):
        start = r * width
        windows.append([[schedule[(start + i) % len(schedule)] for i in range(width)]])
    return windows


def _spread(times: list[float]) -> float:
    """Interquartile range relative to the median: robust to the odd slow step."""
    if len(times) < 4:
        return 0.0
    q = statistics.quantiles(times, n=4)
    med = statistics.median(times)
    return (q[2] - q[0]) / med if med else 0.0
