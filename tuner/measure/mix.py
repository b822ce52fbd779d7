"""The shape mix a trial is timed over: the inputs of the user's real run, by how often they occur.

A real run does not call the model on one shape. ``input_schedule()`` lists the inputs a run
sees, each as often as it occurs; a config's step time is the weighted mean over the distinct
shapes of that list, timed side by side with eager for each shape. Scoring a config on
``example_inputs()`` alone would credit a ``dynamic=None`` config with its static kernel while
most real steps run its dynamic one, and credit a config past the recompile limit with compiled
speed for shapes that in fact run eagerly. Without a schedule the mix is ``example_inputs()``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .tree import named_leaves


@dataclass
class MixEntry:
    """One distinct input signature of the run."""

    label: str
    """Where it comes from: ``example_inputs()`` or ``input_schedule()[i]`` (first occurrence)."""
    inputs: Any
    weight: float
    """The share of the run's steps with this signature (weights sum to 1)."""
    count: int = 1


def signature(inputs: Any) -> str:
    """What Dynamo's guards see of an input: the shape and dtype of every tensor, the value of
    everything else (a Python int in the inputs is specialised on like a shape)."""
    import torch

    parts = []
    for _, leaf in named_leaves(inputs):
        if isinstance(leaf, torch.Tensor):
            parts.append(f"{tuple(leaf.shape)}:{str(leaf.dtype).removeprefix('torch.')}")
        else:
            parts.append(repr(leaf))
    return "|".join(parts)


def timing_mix(example_inputs: Any, schedule: list | None) -> list[MixEntry]:
    """The distinct inputs to time and their weights, in first-seen order."""
    if not schedule:
        return [MixEntry("example_inputs()", example_inputs, 1.0, 1)]
    entries: dict[str, MixEntry] = {}
    for i, item in enumerate(schedule):
        sig = signature(item)
        if sig in entries:
            entries[sig].count += 1
        else:
            entries[sig] = MixEntry(f"input_schedule()[{i}]", item, 0.0, 1)
    for entry in entries.values():
        entry.weight = entry.count / len(schedule)
    return list(entries.values())


def weighted(values: list[float], mix: list[MixEntry]) -> float:
    """The run's mean step time from per-entry step times."""
    return sum(v * e.weight for v, e in zip(values, mix))
