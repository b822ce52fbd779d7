"""The whole pipeline for one workload: check it, search, pick the winner, write the outputs.

workload -> search space -> baselines + search (isolated trials) -> verdict -> best_config.yaml,
trials.csv and a summary.
"""
from __future__ import annotations

import datetime
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import EAGER, CompileConfig, TunedConfig, save_tuned_config
from .errors import TunerError
from .report import summary_table, trials_frame, write_trials_csv
from .score import Scoring, break_even_steps
from .space import load_space
from .storage import HEARTBEAT_S, redact, scrub
from .study import (ROLE_EAGER, ROLE_PLAIN, StudyRun, StudySettings, Tuner, check_settings, default_threads,
                    fail_stale_trials, has_repeated_blocks, open_study)
from .workload import load_workload, validate_workload

DEFAULT_STEPS = 10_000


@dataclass
class TuneOptions:
    """Every knob of a tuning run. Precedence: CLI flag > search-space YAML > these defaults."""

    workload: str
    space: str = "default"
    trials: int = 20
    steps: int = DEFAULT_STEPS
    task: str = "infer"
    device: str = "auto"
    threads: int | None = None
    out: str | None = None
    storage: str | None = None
    study_name: str | None = None
    seed: int = 0
    trial_timeout: float = 900.0
    max_memory_mb: float | None = None
    measure_seconds: float = 6.0
    rounds: int = 5
    progress: bool = True
    argv: list[str] = field(default_factory=list)
    workers: int = 1
    heartbeat: int = HEARTBEAT_S
    worker_index: int | None = None
    """Set in the processes ``--workers`` starts: they measure, the main process writes outputs."""

    def __post_init__(self) -> None:
        if self.trials < 0:
            raise TunerError(f"--trials must be >= 0, got {self.trials}")
        if self.steps < 1:
            raise TunerError(f"--steps must be >= 1, got {self.steps}", "give the number of steps your real run takes")
        if self.task not in ("infer", "train"):
            raise TunerError(f"--task must be infer or train, got {self.task!r}")
        if self.trial_timeout <= 0:
            raise TunerError(f"--trial-timeout must be > 0 seconds, got {self.trial_timeout}")
        if self.threads is not None and self.threads < 1:
            raise TunerError(f"--threads must be >= 1, got {self.threads}")
        if self.workers < 1:
            raise TunerError(f"--workers must be >= 1, got {self.workers}")
        if self.heartbeat < 1:
            raise TunerError(f"--heartbeat must be >= 1 second, got {self.heartbeat}")


@dataclass
class TuneResult:
    out_dir: Path
    tuned: TunedConfig
    run: StudyRun
    summary: str


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise TunerError(f"--device {device}: CUDA is not available on this machine", "use --device cpu")
    if device != "cpu" and not device.startswith("cuda"):
        raise TunerError(f"--device must be auto, cpu or cuda[:N], got {device!r}")
    return device


def tune(opts: TuneOptions, log=print) -> TuneResult:
    """Run (or resume) a study and write ``best_config.yaml``, ``trials.csv`` into the out dir."""
    workload = load_workload(opts.workload)
    validate_workload(workload, opts.task)
    device = resolve_device(opts.device)
    threads = opts.threads or default_threads()
    space = load_space(opts.space).restrict(
        device=device, task=opts.task, has_blocks=has_repeated_blocks(workload.make_model()))
    out_dir = Path(opts.out or Path("results") / workload.name)
    out_dir.mkdir(parents=True, exist_ok=True)
    storage = opts.storage or f"sqlite:///{(out_dir / 'study.db').resolve()}"
    settings = StudySettings(
        workload=str(workload.path), task=opts.task, device=device, threads=threads, steps=opts.steps,
        trials=opts.trials, seed=opts.seed, trial_timeout=opts.trial_timeout, max_memory_mb=opts.max_memory_mb,
        measure_seconds=opts.measure_seconds, rounds=opts.rounds, space_name=opts.space,
        heartbeat_s=opts.heartbeat,
    )
    worker = opts.worker_index or 0
    study = open_study(storage, opts.study_name or workload.name, opts.seed + worker, heartbeat=opts.heartbeat)
    check_settings(study, settings)
    stale = fail_stale_trials(study, opts.heartbeat)
    n_configs = len(space.configs())
    if opts.worker_index is None:
        study.set_user_attr("command", scrub(" ".join(opts.argv), storage) if opts.argv else "")
        log(f"compile-tune: {workload.name} ({opts.task}) on {device}, {threads} thread(s); space "
            f"'{opts.space}' has {n_configs} configs; scoring {opts.steps:,} steps; study "
            f"'{study.study_name}' in {redact(storage)}")
        for note in space.skipped:
            log(f"  skipped {note}")
    sys.stdout.flush()
    if stale:
        log(f"  resumed: {stale} interrupted trial(s) will be measured again")

    progress = _Progress(opts.trials, enabled=opts.progress, log=log)
    tuner = Tuner(study, space, settings, out_dir / "work", on_trial=progress.update, worker=worker, log=log)
    run = StudyRun(study=study, scoring=None)  # type: ignore[arg-type]
    progress.start(tuner.search_done())
    try:
        if opts.workers > 1:
            from .workers import run_workers

            run_workers(opts, device, tuner, run, progress)
        else:
            run.scoring = tuner.baselines()
            tuner.search(run.scoring, run)
            tuner.finish_baselines(run.scoring)
    except KeyboardInterrupt:
        run.interrupted = True
    finally:
        progress.close()
    if opts.worker_index is not None:
        return TuneResult(out_dir=out_dir, tuned=None, run=run, summary="")  # type: ignore[arg-type]
    if run.scoring is None:
        raise TunerError("interrupted before the eager baseline was measured", "run the same command again")
    tuned = pick_best(study, run.scoring, device)
    write_outputs(study, tuned, out_dir)
    frame = trials_frame(study)
    summary = summary_table(frame)
    if run.exhausted:
        run.notes.append(f"all {n_configs} configs of the space are measured")
    if run.interrupted:
        run.notes.append("interrupted: run the same command again to continue the study")
    return TuneResult(out_dir=out_dir, tuned=tuned, run=run, summary=summary)


def pick_best(study, scoring: Scoring, device: str) -> TunedConfig:
    """The fastest correct config within the memory bound; eager unless something beats it."""
    from optuna.trial import TrialState

    trials = [t for t in study.get_trials(deepcopy=False)
              if t.state == TrialState.COMPLETE and not t.user_attrs.get("duplicate_of")]
    eager = next(t for t in trials if t.user_attrs.get("role") == ROLE_EAGER)
    plain = next((t for t in trials if t.user_attrs.get("role") == ROLE_PLAIN), None)
    candidates = [t for t in trials if t.user_attrs.get("role") != ROLE_EAGER
                  and t.user_attrs.get("correct") and not scoring.over_memory(t.user_attrs)]
    best = min(candidates, key=lambda t: t.value, default=None)
    tuned_on = dict(eager.user_attrs.get("environment") or {})
    tuned_on.update(device=device, date=datetime.date.today().isoformat(), steps=scoring.steps,
                    task=study.user_attrs.get("settings", {}).get("task"))
    eager_total = eager.value
    if best is None or best.value >= eager_total:
        measured = {"eager_step_time_ms": scoring.eager_step_s * 1e3, "total_time_s": eager_total,
                    "best_compiled": best.user_attrs.get("config_label") if best else None,
                    "best_compiled_total_time_s": best.value if best else None,
                    "reason": "no compiled config beat eager over the scored steps"}
        return TunedConfig(EAGER, "stay_eager", measured, tuned_on)
    a = best.user_attrs
    step = a["step_time_s"]
    measured: dict[str, Any] = {
        "speedup_vs_eager": a["speedup"],
        "speedup_vs_plain_compile": (a["speedup"] / plain.user_attrs["speedup"]) if plain else None,
        "total_time_s": best.value,
        "eager_total_time_s": eager_total,
        "plain_compile_total_time_s": plain.value if plain else None,
        "compile_time_s": a.get("compile_time_s"),
        "step_time_ms": step * 1e3,
        "eager_step_time_ms": scoring.eager_step_s * 1e3,
        "step_spread": a.get("step_spread"),
        "peak_memory_mb": a.get("peak_memory_mb"),
        "eager_peak_memory_mb": a.get("eager_peak_memory_mb"),
        "break_even_steps": break_even_steps(a.get("compile_time_s") or 0.0, scoring.eager_step_s, step),
        "graph_breaks": a.get("graph_breaks"),
        "recompiles": a.get("recompiles"),
        "trial": best.number,
    }
    return TunedConfig(CompileConfig.from_dict(a["config"]), "compile", _rounded(measured), tuned_on)


def _rounded(d: dict) -> dict:
    return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in d.items()}


def write_outputs(study, tuned: TunedConfig, out_dir: Path) -> None:
    save_tuned_config(tuned, out_dir / "best_config.yaml")
    write_trials_csv(study, out_dir / "trials.csv")


class _Progress:
    """A tqdm bar over search trials, showing the best total time so far."""

    def __init__(self, total: int, enabled: bool, log=print) -> None:
        self.total, self.enabled, self.bar, self.best, self.log = total, enabled, None, None, log

    def start(self, done: int) -> None:
        if not self.enabled:
            return
        from tqdm import tqdm

        self.bar = tqdm(total=self.total, initial=min(done, self.total), desc="trials", unit="trial",
                        file=sys.stderr, dynamic_ncols=True)

    def update(self, attrs: dict) -> None:
        total = attrs.get("total_time_s")
        if attrs.get("status") == "ok" and total is not None and (self.best is None or total < self.best[0]):
            self.best = (total, attrs.get("config_label"), attrs.get("speedup"))
        if attrs.get("status") == "ok":
            last = (f"{attrs.get('speedup', 0):.2f}x, compile {attrs.get('compile_time_s', 0):.1f} s, "
                    f"total {attrs.get('total_time_s', 0):.1f} s")
        else:
            last = f"failed: {attrs.get('failure_category')} ({attrs.get('failure_explanation')})"
        line = f"  {attrs.get('role'):6s} {attrs.get('config_label')}: {last}"
        if self.bar is None:
            self.log(line)
            return
        if attrs.get("role") == "search":
            self.bar.update(1)
        if self.best:
            self.bar.set_postfix_str(f"best {self.best[0]:.1f}s {self.best[1]} ({self.best[2]:.2f}x)")
        self.bar.write(line)

    def write(self, line: str) -> None:
        (self.bar.write if self.bar is not None else self.log)(line)

    def advance_to(self, done: int) -> None:
        """Search trials finished so far (by any worker)."""
        if self.bar is not None and min(done, self.total) > self.bar.n:
            self.bar.update(min(done, self.total) - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
