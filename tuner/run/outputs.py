"""A run's outputs: best_config.yaml, trials.csv, report.html and report.md, written from the
study, and written again from storage alone (``compile-tune report``) without running a trial."""
from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from ..core.config import TunedConfig
from ..core.errors import TunerError
from ..decide.verdict import pick_best
from ..export.best_config import save_tuned_config
from ..study import ROLE_EAGER, measured_trials, scoring_from_study


def eager_done(study) -> bool:
    """Whether the study holds a measured eager baseline (every verdict needs it)."""
    return bool(measured_trials(study, roles=(ROLE_EAGER,)))


#: What writing the reports imports (pandas, matplotlib, Optuna's importances): about a second.
REPORT_MODULES = ("tuner.report", "tuner.report._data", "tuner.report._html", "tuner.report._markdown",
                  "matplotlib.figure", "matplotlib.backends.backend_svg", "optuna.importance")


def import_report_modules(until: Callable[[], bool]) -> None:
    """Import what the reports need, one module at a time, until ``until()`` says to stop: the
    time a run waits for its trial launcher anyway, and no trial is being timed in it."""
    for name in REPORT_MODULES:
        if until():
            return
        try:
            importlib.import_module(name)
        except ImportError:
            return  # the reports will say what is missing


def write_outputs(study, tuned: TunedConfig, out_dir: Path) -> None:
    from ..report import write_reports, write_trials_csv  # pandas: imported after the launcher starts

    save_tuned_config(tuned, out_dir / "best_config.yaml")
    write_trials_csv(study, out_dir / "trials.csv")
    write_reports(study, tuned, scoring_from_study(study), out_dir)


def rebuild_outputs(out_dir: str | Path, storage: str | None = None, study_name: str | None = None):
    """Write every output of a finished run again from its study storage alone; no trial is run.

    Returns ``(study, tuned)``. Example: ``rebuild_outputs("results/mlp")`` (``compile-tune report``).
    """
    from ..report import open_saved_study

    study = open_saved_study(out_dir, storage, study_name)
    tuned = pick_saved(study)
    write_outputs(study, tuned, Path(out_dir))
    return study, tuned


def pick_saved(study) -> TunedConfig:
    """:func:`pick_best` for a study read back from storage."""
    scoring = scoring_from_study(study)
    if scoring is None or not eager_done(study):
        raise TunerError(f"study '{study.study_name}' has no eager baseline yet, so there is nothing to report",
                         "run compile-tune on the model with this --out to measure it")
    device = (study.user_attrs.get("settings") or {}).get("device", "cpu")
    return pick_best(study, scoring, device)
