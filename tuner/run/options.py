"""The options of a tuning run, defined once: ``TuneOptions`` (every knob, with its default and
its check), what a run returns (``TuneResult``), and the study settings derived from them. The
command line takes its defaults from here (tuner/cli.py), the study its settings
(:func:`study_settings`), and each trial its spec from those (tuner/decide/search.py).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.config import TunedConfig
from ..core.data_parallel import WRAPS
from ..core.durations import parse_duration
from ..core.errors import TunerError
from ..ranks.board import parse_endpoint
from ..space.autospace import AUTO
from ..study import StudyRun, StudySettings
from ..system.heap import DEFAULT as HEAP_DEFAULT
from ..system.heap import PINNED as HEAP_PINNED
from ..system.lanes import parse_parallel
from ..system.storage import HEARTBEAT_S

#: The steps a run is scored for when ``--steps`` is not given.
DEFAULT_STEPS = 10_000


@dataclass
class TuneOptions:
    """Every knob of a tuning run. Precedence: CLI flag > search-space YAML > these defaults."""

    workload: str
    space: str = AUTO
    """``auto``: built for the model (tuner/space/autospace.py); else a bundled space's name or a YAML path."""
    trials: int = 20
    steps: int = DEFAULT_STEPS
    task: str = "infer"
    device: str = "auto"
    threads: int | None = None
    out: str | None = None
    storage: str | None = None
    study_name: str | None = None
    seed: int = 0
    trial_timeout: float | None = None
    """Seconds before a trial is stopped; None scales it to the model (``study.trial_timeout``)."""
    max_memory_mb: float | None = None
    measure_seconds: float = 6.0
    rounds: int = 5
    progress: bool = True
    trace: bool = False
    trial_memory_limit_mb: float | None = None
    heap: str = HEAP_PINNED
    """CPU: glibc malloc's thresholds in every trial (tuner/system/heap.py)."""
    check: bool = True
    warm_start: bool = True
    compile_cost: str = "cold"
    objective: str = "time"
    confirm: int = 2
    confirm_rounds: int = 18
    """The most rounds confirmation may take: it looks after rounds 2, 3, 5, 8, 12 and 18 and stops at the
    first look that decides (tuner/decide/stats.py); a clear win or loss stops at round 2."""
    tie_margin: float = 0.02
    """A saving below this share of eager's total is a tie: not worth compiling for."""
    check_threads: int | None = None
    argv: list[str] = field(default_factory=list)
    workers: int = 1
    parallel: str | int = "auto"
    """Trials in flight on this machine: they compile side by side and time in turn (tuner/system/lanes.py)."""
    heartbeat_s: int = HEARTBEAT_S
    worker_index: int | None = None
    """Set in the processes ``--workers`` starts: they measure, the main process writes outputs."""
    budget: float | str | None = None
    """Bound on the whole run, confirmation and warm start included: seconds or ``"20m"`` (tuner/run/budget.py)."""
    allow_precision_change: bool = False
    """Search lower precisions too (bf16 autocast, TF32 matmuls): configs that change numerics
    (tuner/core/precision.py)."""
    nproc: int = 1
    """Ranks of each training trial on each machine, launched by torch's elastic launcher (tuner/ranks/rank.py)."""
    nnodes: int = 1
    """Machines each trial's ranks span: this one and ``nnodes - 1`` running ``compile-tune node``
    (tuner/ranks/board.py)."""
    rdzv_endpoint: str | None = None
    """``HOST:PORT`` of this machine, where the ranks of every machine meet (``nnodes`` > 1)."""
    data_parallel: str | None = None
    """``ddp`` or ``fsdp2``: how the ranks train one model (tuner/core/data_parallel.py); needs ``world`` > 1."""
    budget_deadline: float | None = None
    """When the budget ends (``time.time()``): set as the run's clock starts (by ``tune``, or earlier by
    the CLI) and handed as is to the ``--workers`` processes, so they stop starting trials with it."""

    def __post_init__(self) -> None:
        if self.trials < 0:
            raise TunerError(f"--trials must be >= 0, got {self.trials}",
                             "give how many search trials to measure, e.g. --trials 8")
        if self.steps < 1:
            raise TunerError(f"--steps must be >= 1, got {self.steps}", "give the number of steps your real run takes")
        if self.task not in ("infer", "train"):
            raise TunerError(f"--task must be infer or train, got {self.task!r}", "use --task infer or --task train")
        if self.trial_timeout is not None and self.trial_timeout <= 0:
            raise TunerError(f"--trial-timeout must be > 0 seconds, got {self.trial_timeout}",
                             "give the seconds after which a trial is stopped, e.g. --trial-timeout 900")
        if self.objective not in ("time", "pareto"):
            raise TunerError(f"--objective must be time or pareto, got {self.objective!r}",
                             "use --objective time or pareto")
        if self.compile_cost not in ("cold", "warm"):
            raise TunerError(f"--compile-cost must be cold or warm, got {self.compile_cost!r}", "use cold or warm")
        if self.threads is not None and self.threads < 1:
            raise TunerError(f"--threads must be >= 1, got {self.threads}",
                             "e.g. --threads 1 (the default is torch's own count in a fresh process, as your run gets)")
        self.parallel = parse_parallel(self.parallel)
        if self.workers < 1:
            raise TunerError(f"--workers must be >= 1, got {self.workers}")
        if self.heartbeat_s < 1:
            raise TunerError(f"--heartbeat must be >= 1 second, got {self.heartbeat_s}")
        if self.heap not in (HEAP_PINNED, HEAP_DEFAULT):
            raise TunerError(f"--heap must be {HEAP_PINNED} or {HEAP_DEFAULT}, got {self.heap!r}",
                             "use --heap pinned (the default) or --heap default")
        if not 0 <= self.tie_margin < 1:
            raise TunerError(f"--tie-margin must be a share of eager's total in [0, 1), got {self.tie_margin}",
                             "e.g. --tie-margin 0.02: a saving below 2 % of eager's total is a tie")
        if self.budget is not None:
            self.budget = parse_duration(self.budget)
        self._check_ranks()

    @property
    def world(self) -> int:
        """Ranks of each training trial in all: ``nproc`` on each of ``nnodes`` machines."""
        return self.nproc * self.nnodes

    def _check_ranks(self) -> None:
        if self.nproc < 1 or self.nnodes < 1:
            raise TunerError(f"--nproc and --nnodes must be >= 1, got {self.nproc} and {self.nnodes}",
                             "e.g. --nproc 2 --data-parallel ddp")
        ranks = f"--nproc {self.nproc}" + (f" --nnodes {self.nnodes}" if self.nnodes > 1 else "")
        if self.nnodes > 1 and not self.rdzv_endpoint:
            raise TunerError(f"--nnodes {self.nnodes} needs --rdzv-endpoint: where the machines' ranks meet",
                             "add --rdzv-endpoint HOST:PORT with this machine's name and a free port")
        if self.rdzv_endpoint and self.nnodes < 2:
            raise TunerError(f"--rdzv-endpoint {self.rdzv_endpoint} is for ranks on several machines",
                             "add --nnodes N (machines), or drop --rdzv-endpoint for ranks on this machine")
        if self.rdzv_endpoint:
            parse_endpoint(self.rdzv_endpoint)
        if self.world > 1 and self.task != "train":
            raise TunerError(f"{ranks} runs a training step on many ranks, but --task is {self.task}",
                             "add --task train, or drop --nproc")
        if self.world > 1 and self.data_parallel is None:
            raise TunerError(f"{ranks} needs --data-parallel: how the ranks train one model",
                             "add --data-parallel ddp or --data-parallel fsdp2")
        if self.data_parallel is not None and self.data_parallel not in WRAPS:
            raise TunerError(f"--data-parallel must be ddp or fsdp2, got {self.data_parallel!r}",
                             "use --data-parallel ddp or --data-parallel fsdp2")
        if self.data_parallel is not None and self.world < 2:
            raise TunerError(f"--data-parallel {self.data_parallel} needs --nproc 2 or more ranks (or --nnodes 2 "
                             "or more machines)",
                             "add --nproc N (N ranks on this machine)")
        if self.world > 1 and self.workers > 1:
            raise TunerError(f"{ranks} with --workers {self.workers}: a trial's ranks take this "
                             "machine's cores, so its trials run one at a time",
                             "use --workers 1 (and one worker per machine on a shared --storage)")
        if self.world > 1 and self.check_threads:
            raise TunerError("--check-threads calls the model from threads of one process; a config tuned on "
                             "many ranks runs one process per rank", "drop --check-threads with --nproc")
        if self.world > 1:
            self.parallel = 1  # the ranks take the machine's cores: trials run one at a time


@dataclass
class TuneResult:
    out_dir: Path
    tuned: TunedConfig | None
    """The verdict written to best_config.yaml; None for a ``--workers`` process, which decides nothing."""
    run: StudyRun
    summary: str
    timing: str = ""
    """``time: check 6 s, baselines 48 s, ...; total 6m 02s``: where this run's wall time went."""


def default(name: str) -> Any:
    """The default of the option ``name``: the command line shows and uses these."""
    f = next(f for f in dataclasses.fields(TuneOptions) if f.name == name)
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def study_settings(opts: TuneOptions, workload: str, device: str, threads: int, out_dir: Path,
                   torch_version: str) -> StudySettings:
    """The study's settings from the run's options: the one place the names are mapped."""
    return StudySettings(
        workload=workload, task=opts.task, device=device, threads=threads, steps=opts.steps,
        trials=opts.trials, seed=opts.seed, trial_timeout=opts.trial_timeout, max_memory_mb=opts.max_memory_mb,
        measure_seconds=opts.measure_seconds, rounds=opts.rounds, space=opts.space,
        trace_dir=str(out_dir / "traces") if opts.trace else None, trial_memory_limit_mb=opts.trial_memory_limit_mb,
        compile_cost=opts.compile_cost, allow_precision_change=opts.allow_precision_change,
        heartbeat_s=opts.heartbeat_s, torch=torch_version, heap=opts.heap, nproc=opts.nproc, nnodes=opts.nnodes,
        rdzv_endpoint=opts.rdzv_endpoint,
        data_parallel=opts.data_parallel,
    )
