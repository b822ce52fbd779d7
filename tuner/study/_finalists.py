"""Are the configs we compare at the end comparable at all?"""
from __future__ import annotations

from ._attrs import ROLE_EAGER, ROLE_PLAIN, ROLE_SEARCH, measured_trials

#: The best search configs that, with the baselines, must share hardware to be compared.
FINALISTS = 3


def hardware_mismatch(study) -> str | None:
    """A warning when the finalists were measured on different hardware; None when they were not.

    The finalists are the ``FINALISTS`` fastest search configs and both baselines (eager is the
    reference every step time is scored against). Hardware is host, device name and torch
    version, from each trial's ``environment``.

    >>> hardware_mismatch(study)  # doctest: +SKIP
    'finalists were measured on different hardware: #0, #1, #4 on gpu-a (NVIDIA H100, torch 2.13.0); ...'
    """
    done = measured_trials(study)
    baselines = [t for t in done if t.user_attrs.get("role") in (ROLE_EAGER, ROLE_PLAIN)]
    best = sorted((t for t in done if t.user_attrs.get("role") == ROLE_SEARCH), key=lambda t: t.value)
    where: dict[tuple, list[int]] = {}
    for t in sorted(baselines + best[:FINALISTS], key=lambda t: t.number):
        env = t.user_attrs.get("environment") or {}
        where.setdefault((env.get("host"), env.get("device_name"), env.get("torch")), []).append(t.number)
    if len(where) < 2:
        return None
    parts = [f"#{', #'.join(map(str, numbers))} on {host} ({device}, torch {torch})"
             for (host, device, torch), numbers in where.items()]
    return ("finalists were measured on different hardware: " + "; ".join(parts)
            + "; their times are not comparable: confirm the winner on the machine you will run on")
