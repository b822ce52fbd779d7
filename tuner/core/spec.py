"""What a trial is asked to do (``TrialSpec``), and what its figures mean (``MEASUREMENT``).

The spec travels as JSON from the tuner to the trial process (tuner/isolation/isolated.py ->
tuner/measure/), so both sides share this one definition and nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, TypedDict

#: What a trial's figures mean. Bump it when a change makes old figures incomparable with new
#: ones; a study keeps the version it was started with (tuner/study/_settings.py).
#: 2: one model per trial, step times over the input schedule's mix, absolute peak memory,
#:    correctness from the same random state.
#: 3: the input schedule timed in arrival order; confirmation times each config alone in its
#:    process and divides eager alone by it.
#: 4: confirmation scores each process's mean step (not the median) through the measurement
#:    model of tuner/decide/stats.py, with two cold compiles per finalist and eager as started.
MEASUREMENT = 4


class Role(str, Enum):
    """What a trial of a study is for; stored as its ``role`` attribute (a plain string)."""

    EAGER = "eager"
    """The eager baseline: the yardstick, both sides of its timing eager."""
    PLAIN = "plain"
    """Plain ``torch.compile(model)``: the config a tuned one must beat."""
    SEARCH = "search"
    """A config the search suggested."""

    __str__ = str.__str__  # "eager", as stored, not "Role.EAGER"


@dataclass
class TrialSpec:
    """Everything the child needs; travels as JSON."""

    workload: str
    config: dict
    task: str = "infer"
    device: str = "cpu"
    threads: int = 1
    seed: int = 0
    warmup: int = 3
    rounds: int = 5
    measure_seconds: float = 6.0
    heap: str = "pinned"
    """``pinned``: glibc malloc's thresholds pinned on CPU (tuner/system/heap.py); ``default``: as the C
    library starts."""
    timing: str = "beside"
    """``beside``: eager and the config timed side by side in the process (the search);
    ``alone``: the config's own steps only, as a user's process runs them (confirmation)."""
    rival: dict | None = None
    """A race process of a candidate beyond plain compile (``timing="beside"``): this config, plain
    compile, compiled too after the candidate's compile is measured and stepped as a third side, so
    the candidate is compared with it in one process (tuner/measure/timing.py)."""
    rival_cache_dir: str | None = None
    """The rival's kept inductor cache, which it compiles from (warm) where there is one."""
    check_cache_dir: str | None = None
    """The inductor cache the run's correctness checks share: a check that compiles its forwards
    again with ``fallback_random`` compiles into it, after everything timed, so a config whose
    forwards are another checked config's (``+optimizer`` and plain compile) compiles them warm."""
    tolerance: float | None = None
    check_correctness: bool = True
    """Compare the config with eager after timing. Confirmation turns it off: the search checked
    each finalist already, and a confirmation process is a sample of step time, nothing else."""
    run_schedule: bool = True
    mode: str = "trial"
    """``trial`` measures a config; ``check`` runs the quick model check (tuner/measure/check.py);
    ``startup`` times the first step of an applied config (tuner/measure/startup.py); ``package``
    and ``package_check`` build and check the ahead-of-time compiled model (tuner/pt2/build.py)."""
    package_path: str | None = None
    """``package`` mode: write the AOTInductor ``.pt2`` here; ``package_check``: load and check it
    (tuner/pt2/build.py)."""
    package_isa: str | None = None
    """``package`` mode: the x86-64 ISA level its C++ is built for (``x86-64-v3``), or ``native``
    (this CPU); None: the highest level this CPU has (tuner/pt2/machine.py)."""
    config_path: str | None = None
    """``startup`` mode: apply the config from this best_config.yaml, as a user would."""
    save_artifacts_to: str | None = None
    """``startup`` mode: write torch's compile cache artifacts here after the first step."""
    check_part: int = 0
    check_parts: int = 1
    """``check`` mode: run the ``check_part``-th of ``check_parts`` shares of the check's traces
    (the parts run side by side, each in its own process: :func:`tuner.core.shapes.merge_check_parts`)."""
    check_threads: int | None = None
    """``threads`` mode: how many threads call the model at once (tuner/measure/threads.py)."""
    trial_memory_limit_mb: float | None = None
    """A hard cap on the process's data memory: allocations beyond it fail instead of
    dragging the whole machine into the out-of-memory killer."""
    timing_slot: str | None = None
    """Lanes (``--parallel``): a lock file; the trial's timed stages wait for it, so only one trial
    of the machine (or of the GPU) times at once while others compile (tuner/measure/slot.py)."""
    timing_cores: list[int] | None = None
    """Lanes: the CPU cores the trial times on, holding the slot."""
    compile_cores: list[int] | None = None
    """Lanes: the CPU cores the trial compiles (and does everything untimed) on."""
    nproc: int = 1
    """Ranks of a training trial (``--nproc``): launched by torch's elastic launcher, each a
    process of ``threads`` threads (tuner/ranks/rank.py)."""
    nnodes: int = 1
    """Machines the ranks span (``--nnodes``): ``nproc`` ranks on each, met at ``rdzv_endpoint``
    (tuner/ranks/board.py); 1: every rank on this machine, on loopback."""
    rdzv_endpoint: str | None = None
    """``HOST:PORT`` of torch's c10d rendezvous when ``nnodes`` > 1; the tuner's board is at PORT + 1."""
    data_parallel: str | None = None
    """``ddp`` or ``fsdp2`` with ``world`` > 1; the config's ``data_parallel`` holds its settings."""
    rank_cache: str = "shared"
    """On many ranks: ``shared``, the ranks compile into the trial's one inductor cache directory
    (a rank finds the graphs another wrote); ``own``, a directory per rank, as ranks without a shared
    file system compile (benchmarks/rank_cache.py compares them)."""
    collective_timeout_s: float = 300.0
    """On many ranks: how long a rank waits in one collective for the others before the trial
    fails as a hang (the process group's timeout)."""

    @property
    def world(self) -> int:
        """Ranks in all: ``nproc`` on each of ``nnodes`` machines."""
        return self.nproc * self.nnodes


#: Each rank's figures kept in ``ranks`` (trials.csv's ``rank<N>_<name>`` columns).
PER_RANK = ("step_s", "eager_step_s", "compile_time_s", "peak_memory_mb", "fxgraph_cache_hits")


def rank_path(out, rank: int):
    """Where rank ``rank`` of a trial on many ranks writes its result, beside the trial's own."""
    from pathlib import Path

    out = Path(out)
    return out.with_name(f"{out.stem}.rank{rank}{out.suffix}")  # its own .tmp beside it (Recorder.flush)


#: In a rank on a machine that is not the tuner's: ``HOST:PORT`` of the tuner's board, and the trial's id there.
BOARD_ENV, TRIAL_ENV = "COMPILE_TUNE_BOARD", "COMPILE_TUNE_TRIAL"


def board_key(trial: str, rank: int) -> str:
    """The key under which rank ``rank`` of ``trial`` posts its result on the tuner's board
    (tuner/ranks/board.py) when its machine is not the tuner's."""
    return f"{trial}/rank{rank}"


class Measurement(TypedDict, total=False):
    """What a trial process returns (its result JSON, written stage by stage: tuner/measure/) and
    the tuner adds to it: every key that a study keeps as a trial attribute (``MEASURED``), plus
    ``status`` and ``failure``. A failed trial has the keys of the stages it finished."""

    status: str
    """``ok``, ``failed`` or ``pruned``."""
    failure: dict[str, Any]
    """A failed trial's category, explanation, hint and raw error (tuner/user/diagnose.py)."""
    compile_time_s: float
    first_call_s: float
    step_s: float
    """The config's steady step time over the run's mix of inputs (seconds)."""
    eager_step_s: float | None
    """Eager's, timed side by side in the same process; None when the config was timed alone."""
    step_mean_s: float
    """The mean step over the mix, tail included: what a race's totals are made of."""
    eager_step_mean_s: float | None
    core_wait_share: float
    """The share of the timed stage the process waited for a core (tuner/measure/contention.py)."""
    steal_share: float
    load_average: float
    compile_wait_share: float
    """The same share during the compile: a crowded compile reads high."""
    speedup: float | None
    step_spread: float
    eager_step_spread: float | None
    round_ratios: list[float | None]
    timed_steps: int
    peak_memory_mb: float
    eager_peak_memory_mb: float
    compile_peak_memory_mb: float
    steady_peak_memory_mb: float
    correct: bool
    correctness_error: str | None
    graphs: int
    backend_graphs: int
    """The graphs AOTAutograd compiled (inductor, aot_eager): Dynamo's graphs, split further by
    DDPOptimizer at DDP's gradient buckets on many ranks."""
    graph_breaks: int
    fxgraph_cache_hits: int
    fxgraph_cache_misses: int
    graph_break_events: int
    library_graph_breaks: int
    graph_break_details: list[dict[str, Any]]
    recompiles: int
    recompile_details: list[dict[str, Any]]
    recompile_limit_hit: bool
    recompile_time_s: float
    schedule_len: int
    schedule_step_s: float
    schedule_eager_step_s: float | None
    regions: int | None
    region_names: list[str]
    trial_wall_s: float
    child_wall_s: float
    environment: dict[str, Any]
    trace_dir: str
    compile_time_warm_s: float
    compile_seeded: dict[str, Any]
    """A config that compiles the optimizer step too, started from the cache of the same config
    without it (tuner/decide/trial_runner.py ``Seed``): the base, the graphs it found, the compile
    measured, and the base's cold and warm compiles that made ``compile_time_s`` a cold one."""
    pruned_reason: str
    child_import_s: float
    setup_s: float
    """Building the model and its inputs in the trial process (the budget's warm-start estimate)."""
    correctness_s: float
    """The correctness check (search trials only: confirmation's processes skip it)."""
    warm_compile_wall_s: float
    mix: list[dict[str, Any]]
    stochastic: bool
    correctness_check: str
    baseline_memory_mb: float
    slot_wait_s: float
    timing_cores: list[int]
    timing: str
    """``beside`` or ``alone`` (tuner/measure/timing.py)."""
    timing_share: float
    """The share of ``--measure-seconds`` and its rounds the trial timed, where under 1 (a race's
    processes, and the baselines of a run that races)."""
    arrival_order: bool
    ranks: list[dict[str, Any]]
    """On many ranks: each rank's figures (step, eager step, compile time, peak memory); the trial's
    own figures are the slowest rank's (tuner/ranks/rank.py)."""
    slowest_rank: int
    rank_spread: float
    """(slowest - fastest) / fastest of the ranks' compiled step times."""
    rival: dict[str, Any]
    """A race process's (a search trial's too, in a run that races) third side: plain compile's
    config, stepped beside eager and the candidate (tuner/measure/trial.py ``_hold_rival``)."""
    rival_step_s: float
    rival_step_mean_s: float
    """The rival's mean step: with the candidate's, its direct comparison with plain compile, and
    with eager's, a ride of plain compile (tuner/decide/records.py). Before 2026-12-07 a search
    trial's were not stored, and a candidate's first process was neither."""
    rival_speedup: float | None
    rival_compile_s: float
    rival_left_out: str
    stage_s: dict[str, float]
    """Seconds per stage of the trial process (setup, compile, memory, rival, timing, correctness;
    the last stage's run to the end), where its wall time went."""


#: The measurements a study keeps as trial attributes: every key of :class:`Measurement` but the
#: outcome itself (``status``, ``failure``), which the trial's state and failure columns hold.
MEASURED = tuple(k for k in Measurement.__annotations__ if k not in ("status", "failure"))
