"""A training trial on many ranks (``TrialSpec.world`` > 1), inside each rank (started by
tuner/ranks/main.py). The rank joins its process group (gloo on the CPU, NCCL on GPUs, one
GPU per rank), wraps the model with the config's data-parallel settings
(tuner/runtime/parallel_wrap.py) and runs the one trial of tuner/measure/trial.py; the tuner merges
the ranks' figures (tuner/ranks/group.py). Every rank takes the same steps in the same order: the
step counts a trial sizes from its own timings are agreed first (the largest over the ranks), or
the ranks would wait for each other in a collective forever.

A rank that fails records why and when (tuner/ranks/main.py) and exits non-zero, so the launcher
stops the others; a rank that waits in one collective longer than ``spec.collective_timeout_s``
fails as a hang. The timed stages start on every rank at once (:func:`line_up`). The correctness
check feeds each rank its own data, so that only DDP's gradient all-reduce keeps the ranks' models
one (:func:`check_ranks`).
"""
from __future__ import annotations

import dataclasses
import os

from ..core.data_parallel import resolved
from ..core.spec import TrialSpec
from ..measure.correctness import compare, digest
from ..measure.setup import seed_all
from ..measure.tree import map_tensors
from ..user.diagnose import failure

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
        torch.cuda.set_device(torch.device(spec.device))  # this rank's GPU (tuner/ranks/main.py)
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


def line_up(spec: TrialSpec) -> None:
    """Every rank waits for the others here (``dist.barrier``), before the timed stages: a rank that
    finished compiling first would otherwise time its first steps waiting for the others."""
    if spec.world <= 1:
        return
    import torch
    import torch.distributed as dist

    if spec.device.startswith("cuda"):  # NCCL's barrier on this rank's own GPU
        dist.barrier(device_ids=[torch.device(spec.device).index or 0])
    else:
        dist.barrier()


def check_ranks(step, saved, config, entry_inputs, stochastic: bool, spec: TrialSpec, tol: float):
    """``(problem or None, how it was checked)`` on many ranks: from the state saved before the
    first step, :data:`CHECK_STEPS` eager steps and as many compiled, on every rank, each rank on
    its own data (:func:`rank_inputs`, the trial's seed plus the rank), as data-parallel training
    feeds it. Each rank's losses and parameters must match eager's within the tolerance, and (DDP)
    every rank's parameters must be rank 0's bit for bit (:func:`_ranks_apart`): DDP keeps one model
    on every rank, which only its gradient all-reduce keeps so when each rank's data differ."""
    import torch

    how = f"{CHECK_STEPS} steps from the same state as eager on every rank, each on its own data"
    if stochastic and config.backend == "inductor":
        torch._dynamo.reset()
        step.compile(dataclasses.replace(config, options={**config.options, "fallback_random": True}))
        how += "; recompiled with fallback_random=True (inductor's own random numbers differ from eager's)"
    seed = spec.seed + rank()
    inputs = rank_inputs(entry_inputs, seed)
    eager = _steps_from(saved, step, inputs, compiled=False, seed=seed)
    compiled = _steps_from(saved, step, inputs, compiled=True, seed=seed)
    problem = compare(eager[0], compiled[0], tol=tol, precision=config.precision)
    if problem:
        problem = f"rank {rank()}: loss over the steps {problem}"
    else:
        problem = compare(eager[1], compiled[1], tol=tol, precision=config.precision)
        problem = problem and f"rank {rank()}: after {CHECK_STEPS} steps, {problem}"
    if spec.data_parallel != "ddp":
        return problem, how + " (FSDP2: each rank's own shard)"
    # every rank joins the comparison, whatever it found itself, or the others would wait for it;
    # the ranks that hold other parameters than rank 0 record it (the trial's failure names them)
    apart, who = _ranks_apart(compiled[1])
    return problem or (apart if rank() in who else None), how + "; parameters identical on every rank (SHA-256 of each)"


def rank_inputs(inputs, seed: int):
    """This rank's own batch for the check: the workload's inputs with each tensor's elements
    shuffled by a generator seeded with ``seed`` (the trial's seed plus the rank). The values stay
    the workload's (token ids stay in the vocabulary, labels keep their ignore index); tensors of
    one size get one order, so inputs and their targets stay paired. Left as they are: bool tensors
    (masks), tensors with non-finite values (additive masks) and single values."""
    import torch

    def shuffle(t):
        if t.numel() < 2 or t.dtype == torch.bool or (t.is_floating_point() and not bool(t.isfinite().all())):
            return t
        order = torch.randperm(t.numel(), generator=torch.Generator().manual_seed(seed)).to(t.device)
        return t.reshape(-1)[order].reshape(t.shape)

    return map_tensors(shuffle, inputs)


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


def _ranks_apart(params: dict) -> tuple[str | None, list[int]]:
    """The ranks whose parameters are not rank 0's, bit for bit, in words (or None), and which they
    are. Each rank sends a SHA-256 of each parameter (tuner/measure/correctness.py's ``digest``),
    not the parameters."""
    import torch.distributed as dist

    mine = {name: digest(p) for name, p in params.items()}
    every: list = [None] * dist.get_world_size()
    dist.all_gather_object(every, mine)
    ours = every[0]
    apart = {r: [name for name in ours if theirs.get(name) != ours[name]] for r, theirs in enumerate(every) if r}
    apart = {r: names for r, names in apart.items() if names}
    if not apart:
        return None, []
    first = min(apart)
    who = ", ".join(str(r) for r in apart)
    return (f"rank{'s' if len(apart) > 1 else ''} {who}'s parameters differ from rank 0's after {CHECK_STEPS} steps "
            f"on each rank's own data: rank {first} in {len(apart[first])} of {len(ours)} parameters (SHA-256 of "
            f"each), first {apart[first][0]}"), list(apart)


def hang_failure(text: str, spec: TrialSpec, stage: str):
    """A collective that timed out (the error's text), in words: which rank waited, where, for how
    long; or None."""
    lowered = text.lower()  # gloo's "Timed out", NCCL's "Watchdog caught collective operation timeout"
    if not any(s in lowered for s in ("timed out", "timeout", "watchdog", "distbackenderror")):
        return None
    return failure("rank_hang", f"rank {rank()} waited {spec.collective_timeout_s:.0f} s in a collective during "
                                f"stage {stage} for a rank that never joined it: {text[:300]}")
