"""The whole pipeline for one workload: check it, search, pick the winner, write the outputs.

workload -> search space -> baselines + search (isolated trials) -> verdict -> best_config.yaml,
trials.csv, report.html, report.md and a summary.
"""
from __future__ import annotations

import dataclasses
import datetime
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .check import format_check
from .confirm import confirm
from .config import EAGER, CompileConfig, TunedConfig, save_tuned_config
from .errors import TunerError
from .report import open_saved_study, summary_table, trials_frame, write_reports, write_trials_csv
from .score import Scoring, break_even_steps
from .space import load_space
from .storage import HEARTBEAT_S, redact, scrub
from .study import (ROLE_EAGER, ROLE_PLAIN, StudyRun, StudySettings, Tuner, check_settings, default_threads,
                    fail_stale_trials, has_repeated_blocks, open_study, scoring_from_study)
from .threads import check_threads
from .warmstart import bundle_and_measure
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
    trace: bool = False
    trial_memory_limit_mb: float | None = None
    check: bool = True
    warm_start: bool = True
    compile_cost: str = "cold"
    objective: str = "time"
    confirm: int = 2
    confirm_rounds: int = 3
    check_threads: int | None = None
    argv: list[str] = field(default_factory=list)
    workers: int = 1
    heartbeat: int = HEARTBEAT_S
    worker_index: int | None = None
    """Set in the processes ``--workers`` starts: they measure, the main process writes outputs."""

    def __post_init__(self) -> None:
        if self.trials < 0:
            raise TunerError(f"--trials must be >= 0, got {self.trials}", "give how many search trials to measure, e.g. --trials 8")
        if self.steps < 1:
            raise TunerError(f"--steps must be >= 1, got {self.steps}", "give the number of steps your real run takes")
        if self.task not in ("infer", "train"):
            raise TunerError(f"--task must be infer or train, got {self.task!r}", "use --task infer or --task train")
        if self.trial_timeout <= 0:
            raise TunerError(f"--trial-timeout must be > 0 seconds, got {self.trial_timeout}",
                             "give the seconds after which a trial is stopped, e.g. --trial-timeout 900")
        if self.objective not in ("time", "pareto"):
            raise TunerError(f"--objective must be time or pareto, got {self.objective!r}", "use --objective time or pareto")
        if self.compile_cost not in ("cold", "warm"):
            raise TunerError(f"--compile-cost must be cold or warm, got {self.compile_cost!r}", "use cold or warm")
        if self.threads is not None and self.threads < 1:
            raise TunerError(f"--threads must be >= 1, got {self.threads}", "e.g. --threads 1 (the default is half the CPUs)")
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
    """Run (or resume) a study and write ``best_config.yaml``, ``trials.csv`` and the reports into the out dir."""
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
        trace_dir=str(out_dir / "traces") if opts.trace else None, memory_limit_mb=opts.trial_memory_limit_mb,
        compile_cost=opts.compile_cost,
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

    if opts.check and opts.worker_index is None:
        found = check_model(str(workload.path), opts.task, out_dir / "work", device, threads)
        log(format_check(found, workload.name))
        study.set_user_attr("model_check", found)
        sys.stdout.flush()

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
    study.set_user_attr("objective", opts.objective)
    if not run.interrupted and opts.objective == "time":
        try:
            confirm_finalists(study, run.scoring, tuner, opts.confirm, opts.confirm_rounds, log)
        except KeyboardInterrupt:
            run.interrupted = True
    tuned = pick_best(study, run.scoring, device)
    write_outputs(study, tuned, out_dir)
    if tuned.verdict == "compile" and opts.warm_start and not run.interrupted:
        log("saving the compile cache beside best_config.yaml and timing a cold vs warm start ...")
        started = bundle_and_measure(settings, out_dir / "best_config.yaml", out_dir / "work")
        study.set_user_attr("warm_start", {"config_key": tuned.config.key(), **started})
        tuned = pick_best(study, run.scoring, device)
        write_outputs(study, tuned, out_dir)
    if opts.check_threads and not run.interrupted:
        log(f"checking the chosen config from {opts.check_threads} threads at once ...")
        found = check_threads(str(workload.path), tuned.config, opts.check_threads, device=device,
                              torch_threads=threads, timeout=opts.trial_timeout, work_dir=out_dir / "work")
        study.set_user_attr("thread_check", {"config_key": tuned.config.key(), **found})
        tuned = pick_best(study, run.scoring, device)
        write_outputs(study, tuned, out_dir)
    frame = trials_frame(study)
    summary = summary_table(frame)
    if run.exhausted:
        run.notes.append(f"all {n_configs} configs of the space are measured")
    if run.interrupted:
        run.notes.append("interrupted: run the same command again to continue the study")
    return TuneResult(out_dir=out_dir, tuned=tuned, run=run, summary=summary)


def check_model(workload_path: str, task: str, work_dir: Path, device: str = "cpu", threads: int = 1,
                timeout: float = 600.0) -> dict:
    """Run the quick model check (tuner/check.py) in its own process."""
    from .measure import TrialSpec
    from .trial import run_isolated

    spec = TrialSpec(workload=str(Path(workload_path).resolve()), config={}, task=task, device=device,
                     threads=threads, mode="check")
    result = run_isolated(spec, timeout=timeout, work_dir=work_dir)
    if result.get("status") != "ok":
        fail = result.get("failure") or {}
        return {"graph_breaks": [], "trace_error": f"the check itself failed: {fail.get('category')}: "
                f"{(fail.get('raw') or '')[:200]}", "fullgraph_possible": False, "seconds": result.get("trial_wall_s", 0)}
    return result["check"]


def _ranked(study, scoring: Scoring):
    """(eager trial, plain trial, correct compiled trials within the memory bound, best first)."""
    from optuna.trial import TrialState

    trials = [t for t in study.get_trials(deepcopy=False)
              if t.state == TrialState.COMPLETE and not t.user_attrs.get("duplicate_of")]
    eager = next(t for t in trials if t.user_attrs.get("role") == ROLE_EAGER)
    plain = next((t for t in trials if t.user_attrs.get("role") == ROLE_PLAIN), None)
    candidates = [t for t in trials if t.user_attrs.get("role") != ROLE_EAGER
                  and t.user_attrs.get("correct") and not scoring.over_memory(t.user_attrs)]
    return eager, plain, sorted(candidates, key=lambda t: t.value)


def finalist_configs(study, scoring: Scoring, k: int) -> list[CompileConfig]:
    return [CompileConfig.from_dict(t.user_attrs["config"]) for t in _ranked(study, scoring)[2][:k]]


def confirm_finalists(study, scoring: Scoring, tuner: Tuner, k: int, rounds: int, log=print) -> dict | None:
    """Re-measure the top ``k`` with eager and plain compile (tuner/confirm.py); stored in the
    study so a re-run with the same finalists does not measure them again."""
    eager, _, ranked = _ranked(study, scoring)
    if k <= 0 or rounds <= 0 or not ranked or ranked[0].value > eager.value * 1.05:
        return None  # nothing is close to beating eager: no lead to confirm
    finalists = finalist_configs(study, scoring, k)
    keys = sorted(c.key() for c in finalists)
    stored = study.user_attrs.get("confirmation")
    if stored and stored.get("finalist_keys") == keys and stored.get("rounds") == rounds:
        return stored
    log(f"confirming {len(finalists)} finalist(s) with eager and plain torch.compile: {rounds} interleaved "
        f"rounds in fresh processes ...")
    def measure(config, label):
        return tuner.measure(config, label, warm=scoring.compile_cost == "warm")

    decision = confirm(finalists, scoring, measure, rounds=rounds, log=log)
    decision.update(finalist_keys=keys, rounds=rounds)
    study.set_user_attr("confirmation", decision)
    return decision


def pick_best(study, scoring: Scoring, device: str) -> TunedConfig:
    """The fastest correct config within the memory bound; eager unless something beats it.
    When the finalists were confirmed, the confirmed medians decide (see tuner/confirm.py).
    Warm-start and thread-check figures stored for the chosen config are attached."""
    tuned = _pick_best(study, scoring, device)
    key = tuned.config.key()
    started = study.user_attrs.get("warm_start") or {}
    if started.get("config_key") == key:
        tuned = dataclasses.replace(tuned, measured={
            **tuned.measured, **{k: v for k, v in started.items() if k != "config_key"}})
    regional = regional_saving(study)
    if regional:
        tuned = dataclasses.replace(tuned, measured={**tuned.measured, "regional_compile": regional})
    threads = study.user_attrs.get("thread_check") or {}
    if threads.get("config_key") == key:
        tuned = dataclasses.replace(tuned, thread_check={k: v for k, v in threads.items() if k != "config_key"})
    return tuned


def regional_saving(study) -> dict | None:
    """Compile time of regional (blocks) vs whole-model compiles of otherwise equal configs."""
    from optuna.trial import TrialState

    by_rest: dict[str, dict[str, float]] = {}
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        cfg = t.user_attrs.get("config") or {}
        if t.user_attrs.get("duplicate_of") is not None or cfg.get("target") not in ("whole", "blocks"):
            continue
        rest = CompileConfig.from_dict({**cfg, "target": "whole"}).key()
        by_rest.setdefault(rest, {})[cfg["target"]] = float(t.user_attrs.get("compile_time_s") or 0.0)
    pairs = [(v["whole"], v["blocks"]) for v in by_rest.values() if "whole" in v and "blocks" in v]
    if not pairs:
        return None
    import statistics

    whole, blocks = statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
    return {"pairs": len(pairs), "whole_compile_s": round(whole, 3), "blocks_compile_s": round(blocks, 3),
            "saving_s": round(whole - blocks, 3)}


def _pick_best(study, scoring: Scoring, device: str) -> TunedConfig:
    eager, _, candidates = _ranked(study, scoring)
    tuned_on = dict(eager.user_attrs.get("environment") or {})
    tuned_on.update(device=device, date=_measured_on(study), steps=scoring.steps,
                    task=study.user_attrs.get("settings", {}).get("task"))
    if study.user_attrs.get("objective") == "pareto":
        return _pick_pareto(study, scoring, eager, candidates, tuned_on)
    confirmation = study.user_attrs.get("confirmation")
    if confirmation and confirmation.get("finalist_keys") == sorted(
            c.key() for c in finalist_configs(study, scoring, len(confirmation["finalist_keys"]))):
        return _from_confirmation(confirmation, scoring, tuned_on, study)
    return _pick_time(study, scoring, eager, candidates, tuned_on)


def _pick_time(study, scoring: Scoring, eager, candidates, tuned_on: dict) -> TunedConfig:
    """The fastest of ``candidates`` (best first), if it beats eager on total time."""
    best = candidates[0] if candidates else None
    plain = next((t for t in study.get_trials(deepcopy=False) if t.user_attrs.get("role") == ROLE_PLAIN
                  and t.state.name == "COMPLETE" and t.user_attrs.get("duplicate_of") is None), None)
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


def pareto_front(points: list[tuple[float, float, Any]]) -> list[tuple[float, float, Any]]:
    """(total time, peak memory, item) points that no other point beats on both, fastest first."""
    front, lowest = [], float("inf")
    for total, memory, item in sorted(points, key=lambda p: (p[0], p[1])):
        if memory < lowest:
            front.append((total, memory, item))
            lowest = memory
    return front


def knee(front: list[tuple[float, float, Any]]):
    """The documented pick from a Pareto front: scale total time and peak memory each to [0, 1]
    over the front, and take the point with the smallest sum (closest to "fastest and leanest");
    ties go to the faster point."""
    if len(front) == 1:
        return front[0]
    t_lo, t_hi = front[0][0], front[-1][0]
    m_lo, m_hi = min(p[1] for p in front), max(p[1] for p in front)

    def scaled(p):
        return ((p[0] - t_lo) / ((t_hi - t_lo) or 1.0)) + ((p[1] - m_lo) / ((m_hi - m_lo) or 1.0))

    return min(front, key=lambda p: (scaled(p), p[0]))


def _pick_pareto(study, scoring: Scoring, eager, candidates, tuned_on: dict) -> TunedConfig:
    points = [(t.value, float(t.user_attrs.get("peak_memory_mb") or 0.0), t) for t in [eager, *candidates]]
    front = pareto_front(points)
    total, memory, chosen = knee(front)
    listed = [{"config": t.user_attrs.get("config_label"), "total_time_s": round(v, 3), "peak_memory_mb": round(m, 1)}
              for v, m, t in front]
    if chosen is eager:
        measured = {"total_time_s": eager.value, "peak_memory_mb": memory, "pareto_front": listed,
                    "reason": "eager is the knee of the time/memory Pareto front"}
        return TunedConfig(EAGER, "stay_eager", _rounded(measured), tuned_on)
    tuned = _pick_time(study, scoring, eager, [chosen], tuned_on)
    return dataclasses.replace(tuned, measured={**tuned.measured, "pareto_front": listed,
                                                "reason": "the knee of the time/memory Pareto front"})


def _from_confirmation(decision: dict, scoring: Scoring, tuned_on: dict, study) -> TunedConfig:
    by_key = {CompileConfig.from_dict(c["config"]).key(): c for c in decision["candidates"]}
    eager = by_key["none"]
    plain = by_key.get(CompileConfig().key())
    base = {"confirmed": True, "confirm_rounds": decision.get("rounds"), "reason": decision["reason"],
            "eager_total_time_s": eager["total_time_s"], "eager_step_time_ms": decision["eager_step_s"] * 1e3,
            "eager_total_time_range_s": [eager["total_time_min_s"], eager["total_time_max_s"]]}
    if decision["verdict"] == "stay_eager":
        best = decision.get("best") or {}
        measured = {**base, "total_time_s": eager["total_time_s"], "best_compiled": best.get("config_label"),
                    "best_compiled_total_time_s": best.get("total_time_s")}
        return TunedConfig(EAGER, "stay_eager", _rounded(measured), tuned_on)
    chosen = decision["best"]
    step = decision["eager_step_s"] / chosen["speedup"]
    measured = {
        **base,
        "speedup_vs_eager": chosen["speedup"],
        "speedup_range": [chosen["speedup_min"], chosen["speedup_max"]],
        "speedup_vs_plain_compile": chosen["speedup"] / plain["speedup"] if plain and plain.get("speedup") else None,
        "total_time_s": chosen["total_time_s"],
        "total_time_range_s": [chosen["total_time_min_s"], chosen["total_time_max_s"]],
        "plain_compile_total_time_s": plain["total_time_s"] if plain else None,
        "compile_time_s": chosen["compile_time_s"],
        "step_time_ms": step * 1e3,
        "peak_memory_mb": chosen["peak_memory_mb"],
        "eager_peak_memory_mb": eager["peak_memory_mb"],
        "break_even_steps": break_even_steps(chosen["compile_time_s"] or 0.0, decision["eager_step_s"], step),
    }
    config = CompileConfig.from_dict(chosen["config"])
    trial = next((t for t in _ranked(study, scoring)[2] if t.user_attrs.get("config_key") == config.key()), None)
    if trial is not None:
        measured.update(trial=trial.number, graph_breaks=trial.user_attrs.get("graph_breaks"),
                        recompiles=trial.user_attrs.get("recompiles"))
    return TunedConfig(config, "compile", _rounded(measured), tuned_on)


def _rounded(d: dict) -> dict:
    return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in d.items()}


def _measured_on(study) -> str:
    """The day the last trial finished: rebuilding the outputs later keeps the date the numbers came from."""
    ends = [t.datetime_complete for t in study.get_trials(deepcopy=False) if t.datetime_complete]
    return max(ends).date().isoformat() if ends else datetime.date.today().isoformat()


def write_outputs(study, tuned: TunedConfig, out_dir: Path) -> None:
    save_tuned_config(tuned, out_dir / "best_config.yaml")
    write_trials_csv(study, out_dir / "trials.csv")
    write_reports(study, tuned, scoring_from_study(study), out_dir)


def rebuild_outputs(out_dir: str | Path, storage: str | None = None, study_name: str | None = None):
    """Write every output of a finished run again from its study storage alone; no trial is run.

    Returns ``(study, tuned)``. Example: ``rebuild_outputs("results/mlp")`` (``compile-tune report``).
    """
    study = open_saved_study(out_dir, storage, study_name)
    tuned = pick_saved(study)
    write_outputs(study, tuned, Path(out_dir))
    return study, tuned


def pick_saved(study) -> TunedConfig:
    """:func:`pick_best` for a study read back from storage."""
    scoring = scoring_from_study(study)
    from optuna.trial import TrialState

    eager_done = any(t.user_attrs.get("role") == ROLE_EAGER and t.state == TrialState.COMPLETE
                     for t in study.get_trials(deepcopy=False))
    if scoring is None or not eager_done:
        raise TunerError(f"study '{study.study_name}' has no eager baseline yet, so there is nothing to report",
                         "run compile-tune on the model with this --out to measure it")
    device = (study.user_attrs.get("settings") or {}).get("device", "cpu")
    return pick_best(study, scoring, device)


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
