"""Dimensions the search stops spending trials on: regional compilation that cannot work here.

A ``blocks`` config can compile nothing (the block's code is never called through the compiled
forward), run into Dynamo's recompile limit (the instances need more compiles than it allows, so
the rest run eager), or compile and still run at eager's speed. Any of these in one trial says
the same of every ``blocks`` config of the space, whatever its other settings: the search leaves
them out from then on and says why once, in the run's notes. Read from the study alone, so every
worker of a shared study agrees.
"""
from __future__ import annotations

from ..core.config import BLOCKS
from ..study import ROLE_SEARCH, measured_trials

#: Regional trials below this speedup over eager (the spread between good configs here) have
#: shown no effect.
NO_EFFECT_SPEEDUP = 1.05
#: Trials at eager's speed before ``blocks`` is called no effect (one could be noise).
NO_EFFECT_TRIALS = 2


def regional_note(attrs: dict) -> str | None:
    """What went wrong with one ``blocks`` trial's compile, in words, or None."""
    if (attrs.get("config") or {}).get("target") != BLOCKS or attrs.get("status") != "ok":
        return None
    if attrs.get("graphs") == 0:
        return "compiled nothing: no graph was compiled, so every step ran the model's own code"
    if attrs.get("recompile_limit_hit"):
        return "ran into the recompile limit: the blocks need more compiles than Dynamo allows, the rest ran eager"
    return None


def blocks_dead_end(trials: list) -> str | None:
    """Why ``target=blocks`` is not searched further, or None while it may still pay off."""
    tried = [t for t in measured_trials(trials, ("COMPLETE",), roles=(ROLE_SEARCH,))
             if (t.user_attrs.get("config") or {}).get("target") == BLOCKS]
    for t in tried:
        note = regional_note(t.user_attrs)
        if note:
            return f"target={BLOCKS} is not searched further: trial {t.number} {note}"
    speedups = [float(t.user_attrs["speedup"]) for t in tried if t.user_attrs.get("speedup")]
    if len(speedups) >= NO_EFFECT_TRIALS and max(speedups) < NO_EFFECT_SPEEDUP:
        return (f"target={BLOCKS} is not searched further: its {len(speedups)} trials ran at eager's speed "
                f"(best {max(speedups):.2f}x)")
    return None
