"""A stand-in for a compiled model whose truth is known: the instrument that checks the race's
error rates on real processes (benchmarks/full_races.py). What its backend name means is in
tuner/core/known_truth.py: eager under another name (``stand-in``), the config slowed by F
(``stand-in:F``), eager slowed by F in the stand-in's own processes (``stand-in-fast:F``, a known
speedup), and optionally a first call that sleeps D seconds (``@D``, a compile of known cost,
varying by :data:`COMPILE_NOISE` between processes as a real cold compile does).
Everything else is what a real candidate gets: its own fresh processes, timed beside eager (and
plain compile, its rival) on the same model object, the race's looks. Only the truth differs: it
is known, so a race's intervals can be judged without a reference measurement.

**The spin's own noise.** A slowed side runs the forward and then spins. Until 2026-12-07 it spun
``F - 1`` times *that call's* forward, so each step's ratio was exactly F and the stand-in's
noise was a copy of eager's: a process's ratio spread like an A/A race's, never like a different
program's. Now the spin is ``share x`` the mean of the side's *previous* forwards in this
process (the last :data:`WINDOW`), so it tracks the process's drift (the truth stays F in
expectation) without copying the call's own luck, and ``share = F - 1 + e``, with ``e`` drawn
once per process, N(0, :data:`PROCESS_NOISE`), from the system's entropy (the trial seeds
Python's generator alike in every process): each process's ratio has an effect of its own, as a
compiled model's has, and the ratio of means is still F on average over processes (linear in
``e``; the paired model's geometric mean is off by ``sd^2 / 2F^2``, under 0.01 %).

A spin reads the clock until its deadline, so a preemption during it costs nothing, where it would
delay real work; and it leaves the caches as it found them. So a stand-in cannot show the
interference of a compiled model stepped beside eager (docs/benchmarks.md: eager reads 3-6 %
slower beside a compiled small model): the races of plain compile under another name, real code on
both sides, are the check on that.

The spin slows the forward, not the rest of a step (no_grad, the call path, the clock reads around
it: 5-12 % of a tiny convnet's 165 us step, measured on this VM), so over a whole step a side
slowed by F runs ``1 + (F - 1) x share`` times as long, ``share`` the forward's part of the step;
benchmarks/full_races.py measures it per workload and benchmarks/race_table.py states the truth so.

Spinning rather than sleeping: a sleep's wake-up overshoots by tens of microseconds. The wrapper's
own call and clock reads cost a fraction of a microsecond; :func:`_overhead` measures them once per
process and the spin's deadline is that much earlier, so the wrapped side's truth holds to a
tenth of a microsecond or so, under 0.1 % of the steps the benchmark races. A side that is not
slowed is the class's own forward, bound to the model, the very value eager's steps swap in
(tuner/measure/steps.py): no wrapper at all.
"""
from __future__ import annotations

import collections
import random
import statistics
import time
from typing import Any

from ..core.known_truth import StandIn

#: The spread of a delayed stand-in's compile between processes: a cold compile's is 3-5 % here
#: (tuner/decide/stats.py, ``compile_costs``), whose spread is pooled over the race's candidates: a
#: stand-in whose "compile" is a first call of a few milliseconds, varying by half of itself, would
#: widen every candidate's compile interval, plain compile's too.
COMPILE_NOISE = 0.04
#: The previous forwards of a side whose mean sizes its spin.
WINDOW = 32
#: The spread of each process's own slowdown, as a share of the forward (see the module's text):
#: 1 % a process, of the order of the paired spread of this machine's A/A processes (1.4-2.3 %).
PROCESS_NOISE = 0.01


def stand_in(model, spec: StandIn) -> tuple[Any, Any, Any]:
    """Give ``model`` (in place, as apply_config does) the stand-in's forward. Returns the entry
    tuner/measure/steps.py swaps: ``(model, the config's forward, eager's forward)``."""
    own = type(model).forward.__get__(model)
    config_side = own if spec.slower == 1.0 else spun(own, spec.slower - 1.0)
    eager_side = own if spec.faster == 1.0 else spun(own, spec.faster - 1.0)
    model.forward = config_side
    if spec.delay_s > 0:
        _delay_first_call(model, spec.delay_s)
    return model, config_side, eager_side


def spun(forward, extra: float, noise: float = PROCESS_NOISE, draw: float | None = None,
         fixed_s: float | None = None, early_s: float | None = None):
    """``forward`` followed by a spin of ``extra`` (plus this process's own draw) times the mean of
    its previous :data:`WINDOW` forwards. ``draw``: the process's deviation (a test's; else drawn);
    ``fixed_s``: spin that long instead (:func:`_overhead`'s probe); ``early_s``: end the spin that
    much early (:func:`_overhead` by default)."""
    share = max(0.0, extra + (random.SystemRandom().gauss(0.0, noise) if draw is None else draw))
    window: collections.deque[float] = collections.deque(maxlen=WINDOW)
    total = 0.0
    clock = time.perf_counter
    early = _overhead() if early_s is None else early_s

    def slowed(*args, **kwargs):
        nonlocal total
        began = clock()
        out = forward(*args, **kwargs)
        now = clock()
        took = now - began
        mean = total / len(window) if window else took
        if len(window) == WINDOW:
            total -= window[0]
        window.append(took)
        total += took
        until = now + (share * mean if fixed_s is None else fixed_s) - early
        while clock() < until:
            pass
        return out

    return slowed


#: Probe spin of :func:`_overhead`: long enough to absorb the wrapper's work inside it.
_PROBE_SPIN_S = 5e-6
_OVERHEAD: list[float] = []


def _overhead() -> float:
    """What the wrapper adds to a call beyond its spin and the forward (its own call, the clock read
    that ends the spin, its return), in seconds: a wrapped call that does nothing and spins
    :data:`_PROBE_SPIN_S` against the bare call, the median of 15 batches, once per process."""
    if _OVERHEAD:
        return _OVERHEAD[0]

    def nothing():
        return None

    probe = spun(nothing, 0.0, draw=0.0, fixed_s=_PROBE_SPIN_S, early_s=0.0)
    clock, n = time.perf_counter, 200
    extra = []
    for _ in range(15):
        began = clock()
        for _ in range(n):
            nothing()
        bare = clock() - began
        began = clock()
        for _ in range(n):
            probe()
        extra.append((clock() - began - bare) / n - _PROBE_SPIN_S)
    _OVERHEAD.append(min(max(statistics.median(extra), 0.0), 2e-6))
    return _OVERHEAD[0]


def _delay_first_call(model, seconds: float, noise: float = COMPILE_NOISE) -> None:
    """The model's next call sleeps ``seconds`` first, times ``1 + e`` with ``e`` this process's own
    draw, N(0, ``noise``) (a forward pre-hook that removes itself, so no later call pays for it): the
    trial's compile stage times that call as the compile."""
    handles: list = []
    took = seconds * max(0.0, 1.0 + random.SystemRandom().gauss(0.0, noise))

    def first_call(module, args):
        handles.pop().remove()
        time.sleep(took)

    handles.append(model.register_forward_pre_hook(first_call))
