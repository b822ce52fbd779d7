"""The whole pipeline for one workload: check it, search, pick the winner, write the outputs.

workload -> search space -> baselines + search (isolated trials) -> verdict -> best_config.yaml,
trials.csv, report.html, report.md and a summary.
"""
from __future__ import annotations

import dataclasses
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

from ..core.errors import TunerError
from ..core.targets import find_blocks
from ..isolation.isolated import default_threads, preload_workload, prestart_launcher
from ..ranks.board import board as rank_board
from ..ranks.board import close_boards
from ..runtime.marks import distinct_shapes, varying_dims
from ..space.autospace import AUTO, Choice, ModelFacts, build_auto_space
from ..space.search_space import SearchSpace, load_space
from ..system.interrupts import deferred
from ..user.workload import load_workload, validate_workload
from .clock import RunClock
from .options import DEFAULT_STEPS, TuneOptions, TuneResult, study_settings
from .phases import Run

#: How long a run on several machines (--nnodes) waits for the others to join its board.
NODES_WAIT_S = 300.0

__all__ = ["DEFAULT_STEPS", "TuneOptions", "TuneResult", "resolve_device", "search_space", "tune"]

#: Where a run's lines for the user go when no ``log`` is given (a library caller): INFO records
#: of the ``tuner.run.pipeline`` logger. The command line passes ``print`` instead.
logger = logging.getLogger(__name__)


def _torch_version() -> str:
    import torch

    return str(torch.__version__)


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise TunerError(f"--device {device}: CUDA is not available on this machine", "use --device cpu")
    if device != "cpu" and not device.startswith("cuda"):
        raise TunerError(f"--device must be auto, cpu or cuda[:N], got {device!r}")
    return device


def tune(opts: TuneOptions, log: Callable[[str], None] | None = None) -> TuneResult:
    """Run (or resume) a study and write ``best_config.yaml``, ``trials.csv`` and the reports into the out dir.

    Progress lines go to ``log``; by default to the ``tuner.run.pipeline`` logger at INFO, so a library
    caller sees them through ``logging`` and nothing is printed (the command line passes ``print``).

    Example:
        >>> import logging; logging.basicConfig(level=logging.INFO)  # doctest: +SKIP
        >>> result = tune(TuneOptions("examples/mlp.py", space="quick", trials=4))  # doctest: +SKIP
    """
    log = log or logger.info
    assert not isinstance(opts.budget, str)  # __post_init__ parsed it to seconds
    clock = RunClock(opts.budget, opts.budget_deadline)
    out_dir = Path(opts.out or Path("results") / Path(opts.workload).stem)
    created = not out_dir.exists()
    if Path(opts.workload).is_file():
        # The trial launcher imports torch, Dynamo and inductor (seconds) while this process loads
        # the workload, builds the space and opens the study; it reports the default thread count.
        out_dir.mkdir(parents=True, exist_ok=True)
        prestart_launcher(out_dir / "work", check=opts.check and opts.worker_index is None)
    try:
        workload = load_workload(opts.workload)
        validate_workload(workload, opts.task)
        device = resolve_device(opts.device)
        if opts.world > 1:
            _check_ranks_possible(device, opts.nproc)
        if opts.nnodes > 1:  # the other machines join the board before the first trial needs their ranks
            rank_board(opts.rdzv_endpoint or "", opts.nnodes).wait_for_nodes(NODES_WAIT_S, log)
    except TunerError:
        if created:  # a file that is not a workload leaves no folder behind
            shutil.rmtree(out_dir, ignore_errors=True)
        raise
    preload_workload(str(workload.path), device)
    # on many ranks, each rank gets its share of the machine's threads, as torchrun users set it
    threads = opts.threads or max(1, default_threads() // opts.nproc)
    # --workers processes measure at the same thread count, and stop at the same deadline
    opts = dataclasses.replace(opts, threads=threads, budget_deadline=clock.deadline)
    space, choices = search_space(opts, workload, device)
    storage = opts.storage or f"sqlite:///{(out_dir / 'study.db').resolve()}"
    settings = study_settings(opts, str(workload.path), device, threads, out_dir, _torch_version())
    # From here on a Ctrl-C stops the run between two storage writes, never inside one: see
    # tuner.system.interrupts. It lands while a trial's child is awaited, and the outputs are written.
    try:
        with deferred():
            run = Run(opts, log, workload, device, threads, space, choices, out_dir, storage, settings, clock)
            return run.as_worker() if opts.worker_index is not None else run.execute()
    finally:
        close_boards()  # the other machines' `compile-tune node` exit


def search_space(opts: TuneOptions, workload, device: str) -> tuple[SearchSpace, list[Choice]]:
    """The space this run searches, and why each dimension (``auto`` only: a named space's file
    says its own why): ``auto`` is built for the model, a named space or YAML file is loaded; both
    are then restricted to what can work on this device and task."""
    model = workload.make_model()
    found = find_blocks(model)
    calls = [workload.make_inputs(), *(workload.make_schedule() or [])]
    varying = varying_dims(calls)
    choices: list[Choice] = []
    if opts.space == AUTO:
        space, choices = build_auto_space(ModelFacts(
            device, opts.task, blocks={found.name: found.instances} if found.cls else {}, block_note=found.reason,
            varying_dims=varying, has_parameters=any(True for _ in model.parameters())))
    else:
        space = load_space(opts.space)
    # The auto space already fits, so restrict drops nothing from it; it keeps one rule for both: the
    # input schedule's Dynamo settings (tuner/core/shapes.py), the precisions of --allow-precision-change.
    space.restrict(device=device, task=opts.task, has_blocks=found.cls is not None, blocks_note=found.reason,
                   varying_dims=varying, shapes=distinct_shapes(calls),
                   allow_precision_change=opts.allow_precision_change, data_parallel=opts.data_parallel)
    if choices:  # what restrict added: the input schedule's Dynamo settings (tuner/core/shapes.py)
        choices += [Choice(dim, _values(space, dim), why) for dim, why in space.reasons.items()]
    if choices and space.precision != [None]:
        choices.append(Choice("precision", space.precision, "--allow-precision-change: changes numerics"))
    return space, choices


def _values(space: SearchSpace, dim: str) -> list:
    """The choices of a dimension :meth:`SearchSpace.restrict` added (``dynamo.X``, ``data_parallel.X``)."""
    group, _, name = dim.partition(".")
    return (space.data_parallel if group == "data_parallel" else space.dynamo)[name]


def _check_ranks_possible(device: str, nproc: int) -> None:
    """``--nproc``: this torch can run a process group on ``device`` (gloo on the CPU, NCCL on GPUs,
    one GPU per rank), or a one-line error says what is missing."""
    import torch
    import torch.distributed as dist

    cuda = device.startswith("cuda")
    if not dist.is_available() or not (dist.is_nccl_available() if cuda else dist.is_gloo_available()):
        raise TunerError(f"--nproc {nproc}: this torch ({torch.__version__}) has no {'NCCL' if cuda else 'gloo'} "
                         f"process group for {device}", "install a torch build with torch.distributed")
    if cuda and torch.cuda.device_count() < nproc:
        raise TunerError(f"--nproc {nproc} on {device}: each rank needs a GPU of its own, this machine has "
                         f"{torch.cuda.device_count()}", f"use --nproc {torch.cuda.device_count()} or fewer")
