"""The one workload setup of a trial process, whatever it runs (a trial, the model check, the
thread check, a start-up timing; confirmation rounds are trials): the same seed, device and
train/eval mode everywhere, so that what one mode finds holds for the others.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from ..core.spec import TrialSpec
from ..user.workload import Workload, load_workload
from .devices import to_device


@dataclass
class Prepared:
    workload: Workload
    model: Any
    """Built with the spec's seed, on its device, in train mode for ``task="train"``, else eval."""
    inputs: Any
    schedule: list | None
    """The workload's input schedule on the device, or None (none given, or not asked for)."""


def seed_all(seed: int) -> None:
    """The same random state before anything that must repeat (CPU and CUDA)."""
    import torch

    random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def prepare(spec: TrialSpec, *, schedule: bool = True) -> Prepared:
    """Load ``spec.workload`` and build its model and inputs for this process.

    Example:
        >>> ready = prepare(TrialSpec(workload="examples/mlp.py", config={}))  # doctest: +SKIP
        >>> ready.model.training
        False
    """
    seed_all(spec.seed)
    workload = load_workload(spec.workload)
    model = workload.make_model().to(spec.device)
    model.train(spec.task == "train")
    inputs = to_device(workload.make_inputs(), spec.device)
    steps = to_device(workload.make_schedule(), spec.device) if schedule else None
    return Prepared(workload, model, inputs, steps)
