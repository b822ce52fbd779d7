"""The stand-in backends: configs whose truth is known, named as backends, so a search space can
list them and a real run can race them (benchmarks/full_races.py). What a name means lives here,
with no torch, so the space file checks it (tuner/space/space_file.py) and the trial applies it
(tuner/measure/stand_in.py) from one reading.

- ``stand-in``: eager under another name (an A/A candidate): truth a speedup of 1, no compile.
- ``stand-in:F`` (F >= 1): the config's side spins ``F - 1`` times its forward longer: truth 1/F.
- ``stand-in-fast:F`` (F >= 1): eager's side in the stand-in's own processes spins ``F - 1`` times
  the forward longer, the config's side runs the bare forward: truth a speedup of F.
- a suffix ``@D`` on any of them (``stand-in-fast:1.10@2.5``): the config's first call sleeps D
  seconds on average (each process draws its own, 4 % apart, as cold compiles vary), a compile of
  known cost.

A spin slows the forward alone, not the rest of a step (the call path, no_grad, the clock reads):
over a whole step a side slowed by F runs ``1 + (F - 1) x share`` times as long, ``share`` the
forward's part of the step (benchmarks/full_races.py measures it; :attr:`StandIn.speedup` is the
forward's).

>>> parse("stand-in-fast:1.10@2.5")
StandIn(slower=1.0, faster=1.1, delay_s=2.5)
>>> parse("inductor") is None, parse("stand-in").speedup, round(parse("stand-in:1.25").speedup, 2)
(True, 1.0, 0.8)
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigError

#: A stand-in's name starts with this (``stand-in``, ``stand-in:1.05``, ``stand-in-fast:1.05@2``).
STAND_IN = "stand-in"
#: The name of a stand-in whose eager side is the slower one (truth: a speedup).
FAST = "stand-in-fast"


@dataclass(frozen=True)
class StandIn:
    """One stand-in backend, as its name says it."""

    slower: float = 1.0
    """The config's side runs this many times as long as eager's forward (the truth is 1/slower)."""
    faster: float = 1.0
    """Eager's side, in the stand-in's own processes, runs this many times as long as the config's."""
    delay_s: float = 0.0
    """The config's first call sleeps this long: its compile time, known."""

    @property
    def speedup(self) -> float:
        """The true speedup of the forward over eager's: eager's mean forward over the config's, in one process."""
        return self.faster / self.slower


def is_stand_in(backend: str) -> bool:
    """Whether ``backend`` names a stand-in (well formed or not)."""
    return backend == STAND_IN or backend.startswith((STAND_IN + ":", STAND_IN + "@", FAST + ":", FAST + "@"))


def parse(backend: str) -> StandIn | None:
    """The stand-in ``backend`` names, None for a real backend; a malformed stand-in name is a
    :class:`ConfigError` that says the rule."""
    if not is_stand_in(backend):
        return None
    name, _, delay = backend.partition("@")
    kind, _, factor = name.partition(":")
    rule = "stand-in[:F] or stand-in-fast:F, F >= 1, with an optional @D, the first call's delay in seconds >= 0"
    try:
        f = float(factor) if factor else 1.0
        d = float(delay) if delay else 0.0
    except ValueError:
        raise ConfigError(f"backend {backend!r}: a stand-in is named {rule}", "e.g. stand-in-fast:1.05@2.5") from None
    if f < 1.0 or d < 0.0 or (kind == FAST and not factor):
        raise ConfigError(f"backend {backend!r}: a stand-in is named {rule}, got F={f:g}, D={d:g}",
                          "stand-in:F slows the config down, stand-in-fast:F slows eager down")
    return StandIn(faster=f, delay_s=d) if kind == FAST else StandIn(slower=f, delay_s=d)
