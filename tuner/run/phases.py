"""One run of one workload, phase by phase: the study opened, the model checked, the baselines
and the search measured, the verdict confirmed and written, then the extras (warm start, thread
check) and the summary. A ``--workers`` process runs :meth:`Run.as_worker`: the measuring only.

Every phase that follows the eager baseline writes the outputs before it can fail, so what was
measured is never lost (tuner/run/pipeline.py builds the Run and its settings).
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.config import PLAIN_COMPILE, TunedConfig
from ..core.durations import BUDGET_ATTR, PHASE_ATTR, budget_line, time_line
from ..core.errors import TunerError
from ..decide.confirm import CONFIRM_TIMING_SHARE
from ..decide.race import Race
from ..decide.search import Tuner
from ..decide.verdict import SKIPPED_ATTR, pick_best
from ..isolation.forkserver import ready as launcher_ready
from ..isolation.isolated import check_model
from ..measure.check import format_check
from ..ship.bundle import bundle_and_measure
from ..space.autospace import Choice
from ..space.repair import add_repairs
from ..space.search_space import SearchSpace
from ..study import (
    StudyRun,
    StudySettings,
    check_settings,
    fail_stale_trials,
    open_store,
    scoring_from_study,
    trial_timeout,
)
from ..system.interrupts import check as stop_if_interrupted
from ..system.storage import redact, scrub
from .budget import Plan
from .clock import RunClock
from .options import TuneOptions, TuneResult
from .outputs import eager_done, import_report_modules, write_outputs
from .progress import Progress
from .racing import RaceSteps
from .thread_check import check_threads
from .workers import lane_plan, run_workers


@dataclass
class Run(RaceSteps):
    """One run of one workload; its fields are what every phase reads."""

    opts: TuneOptions
    log: Callable[[str], None]
    workload: Any
    device: str
    threads: int
    space: SearchSpace
    choices: list[Choice]
    out_dir: Path
    storage: str
    settings: StudySettings
    clock: RunClock
    failure: Exception | None = None
    """An error of the measuring phases, raised again once the outputs are written."""
    race: Race | None = None
    """The run's race, opened after the baselines (tuner/decide/race.py); the finalists join it."""
    searched: bool = False
    """Whether the search is over (a decided look then says what follows it, not a search)."""
    study: Any = field(init=False, default=None)
    tuner: Tuner = field(init=False)
    run: StudyRun = field(init=False)
    progress: Progress = field(init=False)

    @property
    def races(self) -> bool:
        """Whether the run races eager against plain compile (and its finalists) in fresh processes."""
        return self.opts.objective == "time" and self.opts.confirm > 0 and self.opts.confirm_rounds > 0

    @property
    def main(self) -> bool:
        """The run that writes the outputs (not a ``--workers`` process)."""
        return self.opts.worker_index is None

    # ----------------------------------------------------------------------------- the phases

    def execute(self) -> TuneResult:
        """The whole run: every phase, the outputs after each that changes them."""
        self.open()
        self.measure()
        tuned = self.decide()
        tuned = self.warm_start(tuned)
        tuned = self.thread_check(tuned)
        if self.clock.cuts_unreported():  # a phase skipped after the last write: the reports must say so
            tuned = self.write()
        return self.result(tuned)

    def as_worker(self) -> TuneResult:
        """A ``--workers`` process: it measures trials into the shared study and writes nothing."""
        self.open()
        self.measure()
        if self.failure is not None:
            raise self.failure
        return TuneResult(out_dir=self.out_dir, tuned=None, run=self.run, summary="")

    def open(self) -> None:
        """The study (resumed where it was left), the announcement, the model check, the tuner."""
        worker = self.opts.worker_index or 0
        store = open_store(self.storage, self.opts.study_name or self.workload.name, self.opts.seed + worker,
                           heartbeat_s=self.opts.heartbeat_s)
        self.study = store.study
        check_settings(self.study, self.settings)
        stale = fail_stale_trials(store, self.opts.heartbeat_s)
        if self.main:
            self._announce()
        sys.stdout.flush()
        if stale:
            self.log(f"  resumed: {stale} interrupted trial(s) will be measured again")
        if self.opts.check and self.main and not self.checks_after_opening:
            self._check()
        self._repair()
        opts, clock = self.opts, self.clock
        clock.plan = lambda: Plan.for_run(self.study.get_trials(deepcopy=False), opts)  # what is left costs
        self.progress = Progress(opts.trials, enabled=opts.progress, log=self.log,
                                 timing=lambda done: clock.progress_text(clock.plan().left_s(opts.trials - done)))
        self.tuner = Tuner(store, self.space, self.settings, self.out_dir / "work", on_trial=self.progress.update,
                           worker=worker, log=self.log, warm_plain=clock.bounded,
                           baseline_share=CONFIRM_TIMING_SHARE if self.races else 1.0)
        self.run = StudyRun(study=self.study, scoring=None)  # type: ignore[arg-type]

    def _announce(self) -> None:
        opts, space, log = self.opts, self.space, self.log
        self.study.set_user_attr("command", scrub(" ".join(opts.argv), self.storage) if opts.argv else "")
        # what "searched N of M" counts against: plain compile is measured whether the space holds it or not
        keys = {c.key() for c in space.configs()} | {PLAIN_COMPILE.key()}
        self.study.set_user_attr("space_configs", len(keys))
        machines = f" on {opts.nnodes} machines" if opts.nnodes > 1 else ""
        ranks = f"{opts.world} ranks{machines} ({opts.data_parallel}) x " if opts.world > 1 else ""
        log(f"compile-tune: {self.workload.name} ({opts.task}) on {self.device}, {ranks}{self.threads} thread(s); "
            f"space '{opts.space}' has {len(space.configs())} configs; scoring {opts.steps:,} steps; study "
            f"'{self.study.study_name}' in {redact(self.storage)}")
        for choice in self.choices:
            log(f"  {choice.text()}")
        if self.choices and space.skipped:
            log(f"  {len(space.skipped)} choice(s) left out: `compile-tune space {self.workload.path.name}` says why")
        for note in ([] if self.choices else space.skipped):
            log(f"  skipped {note}")
        for dim, why in ({} if self.choices else space.reasons).items():
            log(f"  added {dim}: {why}")
        for note in space.notes:
            log(f"  note: {note}")

    @property
    def checks_after_opening(self) -> bool:
        """Whether the model check waits for the race's opening: the answer first. The check
        (Dynamo traces over the input schedule, for every ``dynamic`` setting) only shapes the
        search, which follows the opening; before the race it took 62 s of the zoo's BERT server's
        9 minutes to a first answer (docs/zoo.md, measurement 10). ``--workers`` runs check first:
        their workers search from the start."""
        return self.races and self.opts.workers <= 1 and self.opts.worker_index is None

    def _repair(self) -> None:
        """The settings that can lift a break the model check found join the space."""
        repaired = add_repairs(self.space, self.study.user_attrs.get("model_check"))
        if repaired and self.main:
            self.log("\n".join(repaired + [f"  with them the space has {len(self.space.configs())} configs"]))

    def _check(self) -> None:
        with self.clock.phase("check"):
            found = check_model(str(self.workload.path), self.opts.task, self.out_dir / "work", self.device,
                                self.threads)
        self.log(format_check(found, self.workload.name))
        self.study.set_user_attr("model_check", found)
        sys.stdout.flush()

    def measure(self) -> None:
        """The baselines and the search, here or in ``--workers`` processes. An interrupt ends
        them; an error is kept in :attr:`failure` until the outputs of what was measured exist."""
        self.progress.start(self.tuner.search_done())
        try:
            self._baselines_and_search()
            stop_if_interrupted()  # a Ctrl-C held through the last trial's storage writes still stops the run
        except KeyboardInterrupt:
            self.run.interrupted = True
        except Exception as exc:  # noqa: BLE001 - re-raised once the outputs of what was measured are written
            self.failure = exc
        finally:
            self.progress.close()
        done, run = self.tuner.search_done(), self.run
        if self.clock.bounded and self.failure is None and not (run.interrupted or run.exhausted) \
                and done < self.opts.trials:
            self.clock.cut_short("search", f"{done} of {self.opts.trials} trials")

    def _baselines_and_search(self) -> None:
        opts, clock, tuner, run = self.opts, self.clock, self.tuner, self.run
        lanes = lane_plan(opts, self.device)
        if lanes.lanes > 1 and opts.workers > 1:
            with clock.phase("search"):
                run_workers(opts, self.device, tuner, run, self.progress, lanes)
            return
        import_report_modules(until=launcher_ready)  # the seconds a first trial waits for the launcher
        with clock.phase("baselines"):
            run.scoring = tuner.baselines()
        ran = "the baselines" if self.checks_after_opening else "the model check and the baselines"
        overrun = clock.overrun(ran)  # they run whatever the budget says
        if overrun:
            self.log(f"  {overrun}")
            run.notes.append(overrun)
        self._open_race()
        if self.opts.check and self.checks_after_opening:
            self._check()
            self._repair()
        if lanes.lanes > 1:  # the search in lanes, which find the baselines measured
            with clock.phase("search"):
                run_workers(opts, self.device, tuner, run, self.progress, lanes)
            return
        with clock.phase("search"):
            tuner.search(run.scoring, run, fits=self._search_trial_fits if clock.bounded else None,
                         between=self._race_between)
        self.searched = True
        with clock.phase("baselines"):
            tuner.finish_baselines(run.scoring)

    def decide(self) -> TunedConfig:
        """Confirm the finalists and write the verdict: from here on best_config.yaml and the
        reports exist whatever happens next (an unconfirmed verdict says why)."""
        run, study = self.run, self.study
        if run.scoring is None and eager_done(study):
            run.scoring = scoring_from_study(study)  # stopped while plain torch.compile was measured
        if run.scoring is None:
            if self.failure is not None:
                raise self.failure
            raise TunerError("interrupted before the eager baseline was measured", "run the same command again")
        study.set_user_attr("objective", self.opts.objective)
        if run.interrupted or self.failure is not None:
            study.set_user_attr(SKIPPED_ATTR, "interrupted" if self.failure is None else "stopped by an error")
        elif self.opts.objective == "time":
            self._confirm()
        tuned = self.write()
        if self.failure is not None:
            self.tuner.caches.clear()
            raise self.failure
        return tuned

    def warm_start(self, tuned: TunedConfig) -> TunedConfig:
        """Save the chosen config's compile cache beside best_config.yaml and time a cold against
        a warm start, where it fits in the budget."""
        clock = self.clock
        warm = tuned.verdict == "compile" and self.opts.warm_start and not self.run.interrupted
        if warm and self.opts.world > 1:
            # its cold/warm start is timed in one process, which cannot wrap a model for many ranks
            self.log("  warm start: not saved for a config tuned on many ranks (--nproc) yet")
            warm = False
        kept = self.tuner.caches.get(tuned.config.key()) if warm else None
        plan = clock.plan()
        if warm and clock.fits("warm start", plan.warm_start_s if kept else plan.warm_start_without_cache_s(),
                               self.log):
            def save_and_time() -> None:
                self.log("saving the compile cache beside best_config.yaml and timing a cold vs warm start ...")
                each_s = plan.warm_start_process_s or plan.compiled_s
                started = bundle_and_measure(self.settings, self.out_dir / "best_config.yaml", self.out_dir / "work",
                                             kept_cache=kept, timeout=trial_timeout(self.study, self.settings),
                                             more_fit=lambda n: clock.has_room(n * each_s))
                self.study.set_user_attr("warm_start", {"config_key": tuned.config.key(), **started})

            with clock.phase("warm start"):
                saved = self._optional("saving the warm start", save_and_time)
            if saved:
                tuned = self.write()
        if not self.run.interrupted:  # bundled now; an interrupted run confirms from the caches on resume
            self.tuner.caches.clear()
        return tuned

    def thread_check(self, tuned: TunedConfig) -> TunedConfig:
        """``--check-threads N``: call the chosen config from N threads at once."""
        n, clock = self.opts.check_threads, self.clock
        if not n or self.run.interrupted or not clock.fits("thread check", clock.plan().compiled_s, self.log):
            return tuned

        def check() -> None:
            self.log(f"checking the chosen config from {n} threads at once ...")
            found = check_threads(str(self.workload.path), tuned.config, n, device=self.device,
                                  torch_threads=self.threads, timeout=trial_timeout(self.study, self.tuner.settings),
                                  work_dir=self.out_dir / "work")
            self.study.set_user_attr("thread_check", {"config_key": tuned.config.key(), **found})

        with clock.phase("thread check"):
            checked = self._optional("the thread check", check)
        return self.write() if checked else tuned

    def result(self, tuned: TunedConfig) -> TuneResult:
        """The summary table and the run's notes, as the command line prints them."""
        from ..report import summary_table, trials_frame  # pandas: not imported before the launcher starts

        run, clock = self.run, self.clock
        summary = summary_table(trials_frame(self.study))
        if run.exhausted:
            run.notes.append(f"all {len(self.space.configs())} configs of the space are measured")
        if run.interrupted:
            run.notes.append("interrupted: run the same command again to continue the study")
        # The study keeps the phase times the written reports show (``compile-tune report`` rebuilds
        # the same files from it); the terminal line adds the time the last write itself took.
        timing = time_line(clock.phase_seconds())
        record = clock.budget_record()
        if record is not None:  # bounded
            run.notes.append(budget_line(record))
        return TuneResult(out_dir=self.out_dir, tuned=tuned, run=run, summary=summary, timing=timing)

    # ----------------------------------------------------------------------------- helpers

    def write(self) -> TunedConfig:
        """Pick the verdict and write every output; the reports show this run's phase times so far.
        Each run stores its own phase times and budget record (a resumed run replaces them)."""
        with self.clock.phase("outputs"):
            self.study.set_user_attr(PHASE_ATTR, self.clock.phase_seconds())
            self.study.set_user_attr(BUDGET_ATTR, self.clock.budget_record())
            self.clock.mark_reported()
            tuned = pick_best(self.study, self.run.scoring, self.device)
            write_outputs(self.study, tuned, self.out_dir)
        return tuned

    def _optional(self, what: str, step: Callable[[], None]) -> bool:
        """Run an extra after the verdict is written; its failure is a note, not a lost run."""
        try:
            step()
            return True
        except KeyboardInterrupt:
            self.run.interrupted = True
        except Exception as exc:  # noqa: BLE001 - the verdict and outputs stand without the extra
            line = f"{what} failed: {type(exc).__name__}: {exc}".splitlines()[0][:300]
            self.log(f"  {line}")
            self.run.notes.append(line)
        return False
