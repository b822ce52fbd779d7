"""A stand-in for a compiled model whose true speedup is known: the instrument that checks the
race's error rates on real processes (benchmarks/real_races.py).

A config with ``backend: "stand-in:F"`` compiles nothing: its "compiled" side runs the model's own
forward and then waits (spinning, on the timing thread) ``F - 1`` times as long as that forward
took. It is eager under another name at ``F = 1`` (an A/A race: any "compile" verdict is false)
and a known slowdown above 1 (1.05: the race should say slower). Everything else is what a real
candidate gets: its own fresh processes, timed beside eager on the same model object, cold and warm
"compiles" (a first call with nothing to build), the race's looks. Only the truth differs: it is
known, 1/F, so a race's interval can be judged without a reference measurement.

Spinning rather than sleeping: a sleep's wake-up overshoots by tens of microseconds, a few per cent
of a tiny model's step, and the truth would no longer be 1/F. The wrapper's own call and clock
reads cost about half a microsecond, 0.7 % of a 70 us step: a slowed stand-in's truth is 1/F
within that. At F = 1 there is no wrapper: the forward is the class's own, bound to the model, the very value
eager's steps swap in (tuner/measure/steps.py): both sides run the same call.
"""
from __future__ import annotations

import time
from typing import Any

#: The backend name's prefix (``stand-in:1.05``).
STAND_IN = "stand-in"


def slowdown(backend: str) -> float | None:
    """``F`` for a stand-in backend name (``stand-in`` alone: 1.0), None for a real backend."""
    if backend != STAND_IN and not backend.startswith(STAND_IN + ":"):
        return None
    factor = float(backend.partition(":")[2] or 1.0)
    if factor < 1.0:
        raise ValueError(f"backend {backend!r}: a stand-in can only slow the model down (F >= 1)")
    return factor


def stand_in(model, factor: float) -> list[tuple[str, Any]]:
    """Give ``model`` (in place, as apply_config does) a forward that runs its own and then spins
    ``factor - 1`` times as long. Returns the regions, as apply_config's target resolution does."""
    forward = type(model).forward
    if factor == 1.0:  # the class's own forward, bound: eager's very call, nothing around it
        model.forward = forward.__get__(model)
        return [("", model)]

    def slowed(*args, **kwargs):
        began = time.perf_counter()
        out = forward(model, *args, **kwargs)
        now = time.perf_counter()
        until = now + (now - began) * (factor - 1.0)
        while time.perf_counter() < until:
            pass
        return out

    model.forward = slowed
    return [("", model)]
