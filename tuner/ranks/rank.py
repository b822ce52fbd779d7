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
import re

from ..core.data_parallel import resolved
from ..core.spec import TrialSpec
from ..measure.correctness import compare, digest
from ..measure.setup import seed_all
from ..measure.tree import map_tensors, named_leaves
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
    every rank's parameters must be those most ranks hold, bit for bit (:func:`ranks_apart`): DDP
    keeps one model on every rank, which only its gradient all-reduce keeps so when each rank's
    data differ, which the check also checks (:func:`batches_differ`)."""
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
    # every rank joins the comparisons, whatever it found itself, or the others would wait for it;
    # the rank that records a drift is the first it names (the trial's failure names them all)
    apart, who = ranks_apart(_gather(_digests(compiled[1])))
    how += "; parameters identical on every rank (SHA-256 of each)" + batches_differ(_gather(_batch_digest(inputs)))
    return problem or (apart if who and rank() == who[0] else None), how


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


def _digests(params: dict) -> dict[str, str]:
    """A SHA-256 of each parameter (tuner/measure/correctness.py's ``digest``): what the ranks send
    each other to compare their models, not the parameters."""
    return {name: digest(p) for name, p in params.items()}


def _batch_digest(inputs) -> str:
    import torch

    return "".join(digest(t) for _, t in named_leaves(inputs) if isinstance(t, torch.Tensor))


def _gather(value) -> list:
    """``value`` from every rank, in rank order."""
    import torch.distributed as dist

    every: list = [None] * dist.get_world_size()
    dist.all_gather_object(every, value)
    return every


def ranks_apart(every: list[dict[str, str]]) -> tuple[str | None, list[int]]:
    """The ranks whose parameters (``every``: each rank's digests, in rank order) are not those most
    ranks hold, in words (or None), and which they are. Where no model is held by more ranks than
    any other (2 ranks that disagree), no rank can be told the odd one: every rank is named.

    Example:
        >>> ranks_apart([{"w": "b"}, {"w": "a"}, {"w": "a"}])[1]
        [0]
        >>> ranks_apart([{"w": "a"}, {"w": "b"}])[0].split(" after")[0]
        "ranks 0 and 1's parameters differ from each other (no model is held by more ranks than another)"
    """
    held: dict[tuple, list[int]] = {}
    for r, theirs in enumerate(every):
        held.setdefault(tuple(sorted(theirs.items())), []).append(r)
    if len(held) == 1:
        return None, []
    largest = sorted(held.values(), key=len, reverse=True)
    if len(largest[0]) > len(largest[1]):
        reference = largest[0]
        apart = [r for r in range(len(every)) if r not in reference]
        whose = f"those of {_ranks(reference)} (held by the most ranks)"
    else:
        reference, apart = [0], list(range(len(every)))
        whose = "each other (no model is held by more ranks than another)"
    ours = every[reference[0]]
    first = next(r for r in apart if every[r] != ours)
    theirs = every[first]
    differ = [name for name in ours if theirs.get(name) != ours[name]]
    return (f"{_ranks(apart)}'s parameters differ from {whose} after {CHECK_STEPS} steps on each rank's own data: "
            f"rank {first} differs from rank {reference[0]} in {len(differ)} of {len(ours)} parameters (SHA-256 "
            f"of each), first {differ[0] if differ else '(a parameter only one holds)'}"), apart


def batches_differ(every: list[str]) -> str:
    """What the check found of the ranks' batches (``every``: each rank's batch digest): DDP's
    all-reduce is seen to keep the ranks one only where their batches differ (inputs a shuffle
    leaves as they were, such as a batch of one value, reach every rank alike)."""
    alike: dict[str, list[int]] = {}
    for r, batch in enumerate(every):
        alike.setdefault(batch, []).append(r)
    same = [ranks for ranks in alike.values() if len(ranks) > 1]
    if not same:
        return "; every rank's batch differs from the others' (SHA-256 of each)"
    return (f"; but {' and '.join(_ranks(ranks) for ranks in same)} got the same batch (the workload's inputs are "
            "the same in any order): their gradients need no all-reduce to agree, so this does not show that "
            "DDP keeps them one")


def _ranks(ranks: list[int]) -> str:
    """``rank 2``, ``ranks 0 and 1``, ``ranks 0, 1 and 3``."""
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    return "ranks " + ", ".join(str(r) for r in ranks[:-1]) + f" and {ranks[-1]}"


#: How a collective that waited past the process group's timeout ends, in torch 2.13: gloo raises
#: RuntimeError("[.../gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 5000ms for recv
#: operation to complete"); NCCL's watchdog sets DistBackendError("[PG ID 0 ... Rank 1] Watchdog caught
#: collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, ...) ran for 5037 milliseconds
#: before timing out.") on the work, raised where the rank waits on it (ProcessGroupNCCL.cpp,
#: ``WorkNCCL::checkTimeout``). Only these: a "timeout" elsewhere (inductor's autotune
#: ``TimeoutError``, NCCL's "communicator aborted") is no rank waiting for another.
_COLLECTIVE_TIMEOUT = re.compile(r"Timed out waiting \d+ms for (?:recv|send) operation to complete"
                                 r"|Watchdog caught collective operation timeout: .* ran for \d+ milliseconds")


def collective_timeout(exc: BaseException) -> BaseException | None:
    """The collective's timeout behind ``exc`` (itself, or what it was raised from), or None: an
    exception of the types a collective raises (``torch.distributed.DistError`` and its subclasses,
    or gloo's RuntimeError) whose message is gloo's or NCCL's own timeout message."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if type(exc) is RuntimeError or _is_dist_error(exc):
            if _COLLECTIVE_TIMEOUT.search(str(exc)):
                return exc
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return None


def _is_dist_error(exc: BaseException) -> bool:
    import torch.distributed as dist

    return isinstance(exc, dist.DistError)


def hang_failure(exc: BaseException, spec: TrialSpec, stage: str):
    """A collective that timed out (:func:`collective_timeout`), in words: which rank waited, where,
    for how long; or None. The tuner names the rank it waited for (tuner/ranks/group.py)."""
    timeout = collective_timeout(exc)
    if timeout is None:
        return None
    text = f"{type(timeout).__name__}: {timeout}"
    return failure("rank_hang", f"rank {rank()} waited {spec.collective_timeout_s:.0f} s in a collective during "
                                f"stage {stage} for a rank that never joined it: {text[:300]}")


def collectives_started() -> int | None:
    """How many collectives this rank has started on its process group (torch's sequence number,
    DDP's own all-reduces included), or None before it joined one. Ranks take the same collectives
    in the same order, so the rank with the fewest is the one behind."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return None
    try:
        group = dist.distributed_c10d._get_default_group()
        return int(group._get_sequence_number_for_group())  # type: ignore[attr-defined]  # bound, not in the stubs
    except (RuntimeError, AttributeError):  # a backend that keeps no sequence number
        return None
