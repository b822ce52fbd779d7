"""The whole pipeline for one workload: check it, search, pick the winner, write the outputs.

workload -> search space -> baselines + search (isolated trials) -> verdict -> best_config.yaml,
trials.csv, report.html, report.md and a summary.
"""
from __future__ import annotations

import dataclasses
import logging
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .autospace import AUTO, Choice, ModelFacts, build_auto_space
from .budget import BUDGET_ATTR, BUDGET_RAN_OUT, PHASE_ATTR, Plan, RunClock, budget_line, parse_duration, time_line
from .bundle import bundle_and_measure
from .config import TunedConfig
from .confirm import confirm_finalists
from .errors import TunerError
from .forkserver import ready as launcher_ready
from .interrupts import check as stop_if_interrupted
from .interrupts import deferred
from .isolated import check_model, preload_workload, prestart_launcher
from .isolated import default_threads as launcher_threads
from .lanes import parse_parallel
from .measure.check import format_check
from .outputs import eager_done, import_report_modules, write_outputs
from .progress import Progress
from .repair import add_repairs
from .runtime.marks import distinct_shapes, varying_dims
from .search import Tuner
from .space import SearchSpace, load_space
from .storage import HEARTBEAT_S, redact, scrub
from .study import (
    StudyRun,
    StudySettings,
    check_settings,
    default_threads,
    fail_stale_trials,
    open_store,
    scoring_from_study,
    trial_timeout,
)
from .targets import find_blocks
from .threads import check_threads
from .verdict import SKIPPED_ATTR, pick_best
from .workers import lane_plan, run_workers
from .workload import load_workload, validate_workload

DEFAULT_STEPS = 10_000
#: Where a run's lines for the user go when no ``log`` is given (a library caller): INFO records
#: of the ``tuner.pipeline`` logger. The command line passes ``print`` instead.
logger = logging.getLogger(__name__)


@dataclass
class TuneOptions:
    """Every knob of a tuning run. Precedence: CLI flag > search-space YAML > these defaults."""

    workload: str
    space: str = AUTO
    """``auto``: built for the model (tuner/autospace.py); else a bundled space's name or a YAML path."""
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
    heap: str = "pinned"
    check: bool = True
    warm_start: bool = True
    compile_cost: str = "cold"
    objective: str = "time"
    confirm: int = 2
    confirm_rounds: int = 3
    check_threads: int | None = None
    argv: list[str] = field(default_factory=list)
    workers: int = 1
    parallel: str | int = "auto"
    """Trials in flight on this machine: they compile side by side and time in turn (tuner/lanes.py)."""
    heartbeat: int = HEARTBEAT_S
    worker_index: int | None = None
    """Set in the processes ``--workers`` starts: they measure, the main process writes outputs."""
    budget: float | str | None = None
    """Bound on the whole run, confirmation and warm start included: seconds or ``"20m"`` (tuner/budget.py)."""
    allow_precision_change: bool = False
    """Search lower precisions too (bf16 autocast, TF32 matmuls): configs that change numerics (tuner/precision.py)."""
    budget_deadline: float | None = None
    """When the budget ends (``time.time()``): set as the run's clock starts (by ``tune``, or earlier by
    the CLI) and handed as is to the ``--workers`` processes, so they stop starting trials with it."""

    def __post_init__(self) -> None:
        if self.trials < 0:
            raise TunerError(f"--trials must be >= 0, got {self.trials}", "give how many search trials to measure, e.g. --trials 8")
        if self.steps < 1:
            raise TunerError(f"--steps must be >= 1, got {self.steps}", "give the number of steps your real run takes")
        if self.task not in ("infer", "train"):
            raise TunerError(f"--task must be infer or train, got {self.task!r}", "use --task infer or --task train")
        if self.trial_timeout is not None and self.trial_timeout <= 0:
            raise TunerError(f"--trial-timeout must be > 0 seconds, got {self.trial_timeout}",
                             "give the seconds after which a trial is stopped, e.g. --trial-timeout 900")
        if self.objective not in ("time", "pareto"):
            raise TunerError(f"--objective must be time or pareto, got {self.objective!r}", "use --objective time or pareto")
        if self.compile_cost not in ("cold", "warm"):
            raise TunerError(f"--compile-cost must be cold or warm, got {self.compile_cost!r}", "use cold or warm")
        if self.threads is not None and self.threads < 1:
            raise TunerError(f"--threads must be >= 1, got {self.threads}",
                             "e.g. --threads 1 (the default is torch's own count in a fresh process, as your run gets)")
        self.parallel = parse_parallel(self.parallel)
        if self.workers < 1:
            raise TunerError(f"--workers must be >= 1, got {self.workers}")
        if self.heartbeat < 1:
            raise TunerError(f"--heartbeat must be >= 1 second, got {self.heartbeat}")
        if self.budget is not None:
            self.budget = parse_duration(self.budget)


@dataclass
class TuneResult:
    out_dir: Path
    tuned: TunedConfig
    run: StudyRun
    summary: str
    timing: str = ""
    """``time: check 6 s, baselines 48 s, ...; total 6m 02s``: where this run's wall time went."""


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

    Progress lines go to ``log``; by default to the ``tuner.pipeline`` logger at INFO, so a library
    caller sees them through ``logging`` and nothing is printed (the command line passes ``print``).

    Example:
        >>> import logging; logging.basicConfig(level=logging.INFO)  # doctest: +SKIP
        >>> result = tune(TuneOptions("examples/mlp.py", space="quick", trials=4))  # doctest: +SKIP
    """
    log = log or logger.info
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
    except TunerError:
        if created:  # a file that is not a workload leaves no folder behind
            shutil.rmtree(out_dir, ignore_errors=True)
        raise
    preload_workload(str(workload.path), device)
    threads = opts.threads or launcher_threads() or default_threads()
    # --workers processes measure at the same thread count, and stop at the same deadline
    opts = dataclasses.replace(opts, threads=threads, budget_deadline=clock.deadline)
    space, choices = search_space(opts, workload, device)
    storage = opts.storage or f"sqlite:///{(out_dir / 'study.db').resolve()}"
    settings = StudySettings(
        workload=str(workload.path), task=opts.task, device=device, threads=threads, steps=opts.steps,
        trials=opts.trials, seed=opts.seed, trial_timeout=opts.trial_timeout, max_memory_mb=opts.max_memory_mb,
        measure_seconds=opts.measure_seconds, rounds=opts.rounds, space_name=opts.space,
        trace_dir=str(out_dir / "traces") if opts.trace else None, memory_limit_mb=opts.trial_memory_limit_mb,
        compile_cost=opts.compile_cost, allow_precision_change=opts.allow_precision_change,
        heartbeat_s=opts.heartbeat, torch=_torch_version(), heap=opts.heap,
    )
    # From here on a Ctrl-C stops the run between two storage writes, never inside one: see
    # tuner.interrupts. It lands while a trial's child is awaited, and the outputs are written.
    with deferred():
        return _run_study(opts, log, workload, device, threads, space, choices, out_dir, storage, settings, clock)


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
    # input schedule's Dynamo settings (tuner/shapes.py), the precisions of --allow-precision-change.
    space.restrict(device=device, task=opts.task, has_blocks=found.cls is not None, blocks_note=found.reason,
                   varying_dims=varying, shapes=distinct_shapes(calls),
                   allow_precision_change=opts.allow_precision_change)
    if choices:  # what restrict added: the input schedule's Dynamo settings (tuner/shapes.py)
        choices += [Choice(dim, space.dynamo[dim.removeprefix("dynamo.")], why) for dim, why in space.reasons.items()]
    if choices and space.precision != [None]:
        choices.append(Choice("precision", space.precision, "--allow-precision-change: changes numerics"))
    return space, choices


def _run_study(opts: TuneOptions, log, workload, device: str, threads: int, space, choices: list[Choice],
               out_dir: Path, storage: str, settings: StudySettings, clock: RunClock) -> TuneResult:
    worker = opts.worker_index or 0
    store = open_store(storage, opts.study_name or workload.name, opts.seed + worker, heartbeat=opts.heartbeat)
    study = store.study
    check_settings(study, settings)
    stale = fail_stale_trials(store, opts.heartbeat)
    n_configs = len(space.configs())
    if opts.worker_index is None:
        study.set_user_attr("command", scrub(" ".join(opts.argv), storage) if opts.argv else "")
        log(f"compile-tune: {workload.name} ({opts.task}) on {device}, {threads} thread(s); space "
            f"'{opts.space}' has {n_configs} configs; scoring {opts.steps:,} steps; study "
            f"'{study.study_name}' in {redact(storage)}")
        for choice in choices:
            log(f"  {choice.text()}")
        if choices and space.skipped:
            log(f"  {len(space.skipped)} choice(s) left out: `compile-tune space {workload.path.name}` says why")
        for note in ([] if choices else space.skipped):
            log(f"  skipped {note}")
        for dim, why in ({} if choices else space.reasons).items():
            log(f"  added {dim}: {why}")
        for note in space.notes:
            log(f"  note: {note}")
    sys.stdout.flush()
    if stale:
        log(f"  resumed: {stale} interrupted trial(s) will be measured again")

    if opts.check and opts.worker_index is None:
        with clock.phase("check"):
            found = check_model(str(workload.path), opts.task, out_dir / "work", device, threads)
        log(format_check(found, workload.name))
        study.set_user_attr("model_check", found)
        sys.stdout.flush()
    repaired = add_repairs(space, study.user_attrs.get("model_check"))  # breaks a Dynamo setting can lift
    if repaired and opts.worker_index is None:
        n_configs = len(space.configs())
        log("\n".join(repaired + [f"  with them the space has {n_configs} configs"]))

    clock.plan = lambda: Plan.for_run(study.get_trials(deepcopy=False), opts)  # what is left costs, so far
    progress = Progress(opts.trials, enabled=opts.progress, log=log,
                        timing=lambda done: clock.progress_text(clock.plan().left_s(opts.trials - done)))
    tuner = Tuner(store, space, settings, out_dir / "work", on_trial=progress.update, worker=worker, log=log)
    tuner.warm_plain = clock.bounded
    run = StudyRun(study=study, scoring=None)  # type: ignore[arg-type]
    progress.start(tuner.search_done())
    failure: Exception | None = None
    try:
        _measure(opts, device, tuner, run, progress, clock, log)
        stop_if_interrupted()  # a Ctrl-C held through the last trial's storage writes still stops the run
    except KeyboardInterrupt:
        run.interrupted = True
    except Exception as exc:  # noqa: BLE001 - re-raised once the outputs of what was measured are written
        failure = exc
    finally:
        progress.close()
    done = tuner.search_done()
    if clock.bounded and failure is None and not (run.interrupted or run.exhausted) and done < opts.trials:
        clock.cut_short("search", f"{done} of {opts.trials} trials")
    if opts.worker_index is not None:
        if failure is not None:
            raise failure
        return TuneResult(out_dir=out_dir, tuned=None, run=run, summary="")  # type: ignore[arg-type]
    if run.scoring is None and eager_done(study):
        run.scoring = scoring_from_study(study)  # stopped while plain torch.compile was measured
    if run.scoring is None:
        if failure is not None:
            raise failure
        raise TunerError("interrupted before the eager baseline was measured", "run the same command again")
    # From here on the eager baseline exists: best_config.yaml and the reports are written whatever
    # happens next (an unconfirmed verdict says why it is unconfirmed).
    study.set_user_attr("objective", opts.objective)
    if run.interrupted or failure is not None:
        study.set_user_attr(SKIPPED_ATTR, "interrupted" if failure is None else "stopped by an error")
    elif opts.objective == "time":
        _confirm(study, run, tuner, opts, clock, log)
    tuned = _write(study, run, device, out_dir, clock)
    if failure is not None:
        tuner.caches.clear()
        raise failure
    warm = tuned.verdict == "compile" and opts.warm_start and not run.interrupted
    kept = tuner.caches.get(tuned.config.key()) if warm else None
    plan = clock.plan()
    if warm and clock.fits("warm start", plan.warm_start_s if kept else plan.warm_start_without_cache_s(), log):
        def warm_start() -> None:
            log("saving the compile cache beside best_config.yaml and timing a cold vs warm start ...")
            started = bundle_and_measure(settings, out_dir / "best_config.yaml", out_dir / "work", kept_cache=kept,
                                         timeout=trial_timeout(study, settings))
            study.set_user_attr("warm_start", {"config_key": tuned.config.key(), **started})

        with clock.phase("warm start"):
            started_ok = _optional("saving the warm start", warm_start, run, log)
        if started_ok:
            tuned = _write(study, run, device, out_dir, clock)
    if not run.interrupted:  # the warm start bundled the chosen config's; an interrupted run confirms from them
        tuner.caches.clear()
    if opts.check_threads and not run.interrupted and clock.fits("thread check", clock.plan().compiled_s, log):
        def thread_check() -> None:
            log(f"checking the chosen config from {opts.check_threads} threads at once ...")
            found = check_threads(str(workload.path), tuned.config, opts.check_threads, device=device,
                                  torch_threads=threads, timeout=trial_timeout(study, tuner.settings),
                                  work_dir=out_dir / "work")
            study.set_user_attr("thread_check", {"config_key": tuned.config.key(), **found})

        with clock.phase("thread check"):
            checked = _optional("the thread check", thread_check, run, log)
        if checked:
            tuned = _write(study, run, device, out_dir, clock)
    if clock.cuts_unreported():  # a phase skipped after the last write: the reports must say so
        tuned = _write(study, run, device, out_dir, clock)
    from .report import summary_table, trials_frame  # pandas: not imported before the launcher starts

    frame = trials_frame(study)
    summary = summary_table(frame)
    if run.exhausted:
        run.notes.append(f"all {n_configs} configs of the space are measured")
    if run.interrupted:
        run.notes.append("interrupted: run the same command again to continue the study")
    # The study keeps the phase times the written reports show (``compile-tune report`` rebuilds
    # the same files from it); the terminal line adds the time the last write itself took.
    timing = time_line(clock.phase_seconds())
    if clock.bounded:
        run.notes.append(budget_line(clock.budget_record()))
    return TuneResult(out_dir=out_dir, tuned=tuned, run=run, summary=summary, timing=timing)


def _measure(opts: TuneOptions, device: str, tuner: Tuner, run: StudyRun, progress: Progress, clock: RunClock,
             log) -> None:
    """The baselines and the search: here, or in ``--workers`` processes (which measure both)."""
    lanes = lane_plan(opts, device)
    if lanes.lanes > 1:
        with clock.phase("search"):
            run_workers(opts, device, tuner, run, progress, lanes)
        return
    import_report_modules(until=launcher_ready)  # the seconds a first trial waits for the launcher
    with clock.phase("baselines"):
        run.scoring = tuner.baselines()
    overrun = clock.overrun("the model check and the baselines")  # they run whatever the budget says
    if overrun:
        log(f"  {overrun}")
        run.notes.append(overrun)
    with clock.phase("search"):
        tuner.search(run.scoring, run, fits=clock.search_trial_fits if clock.bounded else None)
    with clock.phase("baselines"):
        tuner.finish_baselines(run.scoring)


def _confirm(study, run: StudyRun, tuner: Tuner, opts: TuneOptions, clock: RunClock, log) -> None:
    """Confirm the finalists, a round at a time while rounds fit in the budget."""
    try:
        with clock.phase("confirmation"):
            decision = confirm_finalists(study, run.scoring, tuner, opts.confirm, opts.confirm_rounds, log,
                                         round_fits=clock.round_fits if clock.bounded else None)
        if study.user_attrs.get(SKIPPED_ATTR) == BUDGET_RAN_OUT:
            clock.skip("confirmation")
        elif decision and decision.get("cut_short"):
            clock.cut_short("confirmation", decision["cut_short"])
        stop_if_interrupted()
    except KeyboardInterrupt:
        run.interrupted = True
        study.set_user_attr(SKIPPED_ATTR, "interrupted")


def _write(study, run: StudyRun, device: str, out_dir: Path, clock: RunClock) -> TunedConfig:
    """Pick the verdict and write every output; the reports show this run's phase times so far."""
    with clock.phase("outputs"):
        _record_time(study, clock)
        clock.mark_reported()
        tuned = pick_best(study, run.scoring, device)
        write_outputs(study, tuned, out_dir)
    return tuned


def _record_time(study, clock: RunClock) -> None:
    """Store the phase times and the budget's record in the study, for the reports written next.
    Each run stores its own (a resumed run replaces the figures): they say what this run cost."""
    study.set_user_attr(PHASE_ATTR, clock.phase_seconds())
    study.set_user_attr(BUDGET_ATTR, clock.budget_record())


def _optional(what: str, step, run: StudyRun, log) -> bool:
    """Run an extra after the verdict is written; its failure is a note, not a lost run."""
    try:
        step()
        return True
    except KeyboardInterrupt:
        run.interrupted = True
    except Exception as exc:  # noqa: BLE001 - the verdict and outputs stand without the extra
        line = f"{what} failed: {type(exc).__name__}: {exc}".splitlines()[0][:300]
        log(f"  {line}")
        run.notes.append(line)
    return False
