"""A training trial on many ranks (``TrialSpec.world`` > 1), inside each rank (started by
tuner/measure/rank_main.py). The rank joins its process group (gloo on the CPU, NCCL on GPUs, one
GPU per rank), wraps the model with the config's data-parallel settings
(tuner/runtime/parallel_wrap.py) and runs the one trial of tuner/measure/trial.py; the tuner merges
the ranks' figures (tuner/rank_group.py). Every rank takes the same steps in the same order: the
step counts a trial sizes from its own timings are agreed first (the largest over the ranks), or
the ranks would wait for each other in a collective forever.

A rank that fails records why and exits non-zero, so the launcher stops the others; a rank that
waits in one collective longer than ``spec.collective_timeout_s`` fails as a hang.
"""
from __future__ import annotations

import dataclasses
import os

from ..core.data_parallel import resolved
from ..core.spec import TrialSpec
from ..diagnose import failure
from .correctness import compare
from .setup import seed_all

#: Steps both sides take from the same state in the correctness check of a trial on many ranks.
CHECK_STEPS = 3


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


# --------------------------------------------------------------------------- in each rank


def join_group(spec: TrialSpec) -> None:
    """This rank's process group, with the spec's collective timeout (gloo, or NCCL on GPUs)."""
    import datetime

    import torch
    import torch.distributed as dist

    cuda = spec.device.startswith("cuda")
    if cuda:
        torch.cuda.set_device(torch.device(spec.device))  # this rank's GPU (tuner/measure/rank_main.py)
    dist.init_process_group("nccl" if cuda else "gloo",
                            timeout=datetime.timedelta(seconds=spec.collective_timeout_s))


def wrap_for_ranks(spec: TrialSpec, config, model):
    """What a step calls: ``model`` in one process, its data-parallel wrapper on many ranks."""
    if spec.world <= 1:
        return model
    from ..runtime.parallel_wrap import wrap

    return wrap(model, resolved(config.data_parallel, spec.data_parallel or "ddp"), spec.device)


def agree_max(values: list[float], spec: TrialSpec) -> list[float]:
    """The largest of each value over the ranks (one process: the values as they are)."""
    if spec.world <= 1 or not values:
        return values
    import torch
    import torch.distributed as dist

    tensor = torch.tensor(values, dtype=torch.float64, device=spec.device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return tensor.tolist()


def check_ranks(step, saved, config, entry_inputs, stochastic: bool, spec: TrialSpec, tol: float):
    """``(problem or None, how it was checked)`` on many ranks: from the state saved before the
    first step, :data:`CHECK_STEPS` eager steps and as many compiled, on every rank; each rank's
    losses and parameters must match eager's within the tolerance, and (DDP) every rank's
    parameters must be identical to rank 0's, bit for bit: DDP keeps one model on every rank."""
    import torch

    how = f"{CHECK_STEPS} steps from the same state as eager on every rank"
    if stochastic and config.backend == "inductor":
        torch._dynamo.reset()
        step.compile(dataclasses.replace(config, options={**config.options, "fallback_random": True}))
        how += "; recompiled with fallback_random=True (inductor's own random numbers differ from eager's)"
    eager = _steps_from(saved, step, entry_inputs, compiled=False, seed=spec.seed)
    compiled = _steps_from(saved, step, entry_inputs, compiled=True, seed=spec.seed)
    where = f"rank {rank()}: "
    problem = compare(eager[0], compiled[0], tol=tol, precision=config.precision)
    if problem:
        return where + "loss over the steps " + problem, how
    problem = compare(eager[1], compiled[1], tol=tol, precision=config.precision)
    if problem:
        return where + f"after {CHECK_STEPS} steps, " + problem, how
    if spec.data_parallel == "ddp":
        how += "; parameters identical on every rank"
        return _ranks_apart(compiled[1]), how
    return None, how + " (FSDP2: each rank's own shard)"


def _steps_from(saved, step, inputs, compiled: bool, seed: int):
    import torch

    saved.restore()
    seed_all(seed)
    losses = []
    with step.mode(compiled):
        for _ in range(CHECK_STEPS):
            losses.append(step(inputs).detach().clone())
    params = {name: _local(p).detach().clone() for name, p in step.model.named_parameters()}
    return torch.stack(losses), params


def _local(tensor):
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def _ranks_apart(params: dict) -> str | None:
    """The first rank whose parameters are not rank 0's, and where, or None."""
    import torch.distributed as dist

    mine = {name: (float(p.double().sum()), float(p.double().square().sum())) for name, p in params.items()}
    every: list = [None] * dist.get_world_size()
    dist.all_gather_object(every, mine)
    for other, theirs in enumerate(every[1:], start=1):
        apart = [name for name in every[0] if every[0][name] != theirs.get(name)]
        if apart:
            return (f"rank {other}'s parameters differ from rank 0's after {CHECK_STEPS} steps "
                    f"({len(apart)} of {len(every[0])}, first {apart[0]}: sum {theirs[apart[0]][0]:.6g} against "
                    f"{every[0][apart[0]][0]:.6g})")
    return None


def hang_failure(text: str, spec: TrialSpec, stage: str):
    """A collective that timed out (the error's text), in words: which rank waited, where, for how
    long; or None."""
    if not any(s in text for s in ("Timed out", "timed out", "Timeout", "DistBackendError")):
        return None
    return failure("rank_hang", f"rank {rank()} waited {spec.collective_timeout_s:.0f} s in a collective during "
                                f"stage {stage} for a rank that never joined it: {text[:300]}")
