"""Everything a report shows, gathered once from the study (storage only, nothing measured).

The HTML, Markdown and plots all read one :class:`ReportData`, so they cannot disagree.
"""
from __future__ import annotations

import json
import statistics
import warnings
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..core.durations import BUDGET_ATTR, PHASE_ATTR, budget_line, format_duration
from ..core.score import total_time
from ..core.spec import Role
from ..space.repair import effects as repair_effects
from ..space.repair import remaining
from ..study import hardware_mismatch, measured_trials
from ..user.diagnose import unique_breaks, unique_recompiles
from ._fmt import missing, number, text, truthy
from ._tables import measured, trials_frame

#: Completed search trials needed before Optuna's parameter importances mean anything.
MIN_TRIALS_FOR_IMPORTANCE = 5
#: Config dimensions compared value by value (``options.*`` are added per study).
DIMENSIONS = ("target", "backend", "mode", "dynamic", "fullgraph", "precision")


@dataclass
class Line:
    """A config's cost over a run: total(steps) = compile_s + steps * step_s."""

    label: str
    compile_s: float
    step_s: float

    def total(self, steps: float) -> float:
        return total_time(self.compile_s, steps, self.step_s)


@dataclass
class ReportData:
    """What one study measured, in the shape the reports need."""

    name: str
    tuned: Any
    """The :class:`tuner.core.config.TunedConfig` picked from this study."""
    scoring: Any
    """The study's :class:`tuner.core.score.Scoring`."""
    frame: pd.DataFrame
    """Every trial (``trials_frame``), repeats and failures included."""
    settings: dict = field(default_factory=dict)
    command: str = ""
    environment: dict = field(default_factory=dict)
    dates: tuple[str, str] | None = None
    graph_breaks: list[dict] = field(default_factory=list)
    recompiles: list[dict] = field(default_factory=list)
    importances: dict[str, float] | None = None
    hardware_warning: str | None = None
    """Set when the finalists were measured on different machines (see tuner.study)."""
    phase_seconds: dict = field(default_factory=dict)
    """The latest run's wall seconds per phase and its ``total`` (tuner/run/clock.py)."""
    budget: dict | None = None
    """What the latest run's ``--budget`` did, when it had one."""
    repairs: list[dict] = field(default_factory=list)
    """Per Dynamo setting searched, its trials against those without it (tuner/space/repair.py)."""
    unrepaired: list[dict] = field(default_factory=list)
    """The graph breaks no searched Dynamo setting removed, with why they stay."""

    @property
    def measured(self) -> pd.DataFrame:
        return measured(self.frame)

    @property
    def complete(self) -> pd.DataFrame:
        """Measured trials that finished with numbers, best total first."""
        rows = self.measured
        rows = rows[(rows["state"] == "COMPLETE") & rows["total_time_s"].notna()]
        return rows.sort_values(["total_time_s", "number"])

    @property
    def failed(self) -> pd.DataFrame:
        rows = self.measured
        return rows[rows["state"].isin(("FAIL", "PRUNED", "RUNNING", "WAITING"))].sort_values("number")

    @property
    def compile_verdict(self) -> bool:
        return self.tuned.verdict == "compile"

    def role_row(self, role: str) -> pd.Series | None:
        rows = self.measured[self.measured["role"] == role]
        return None if rows.empty else rows.iloc[0]

    def best_row(self) -> pd.Series | None:
        """The picked config's trial; under "stay eager", the best compiled one (if any)."""
        m = self.tuned.measured
        rows = self.complete[self.complete["role"] != Role.EAGER]
        if self.compile_verdict and "trial" in m:
            rows = rows[rows["number"] == m["trial"]]
        elif m.get("best_compiled"):
            rows = rows[rows["config_label"] == m["best_compiled"]]
        else:
            return None
        return None if rows.empty else rows.iloc[0]

    def line(self, row: pd.Series | None, label: str) -> Line | None:
        if row is None or row.get("state") != "COMPLETE" or missing(row.get("step_time_s")):
            return None
        return Line(label, self.scoring.compile_time(row), float(row["step_time_s"]))

    def dimension_values(self) -> list[dict]:
        """Per search dimension with two or more values: median and best total per value."""
        rows = self.measured
        rows = rows[(rows["role"] != Role.EAGER) & rows["state"].isin(("COMPLETE", "FAIL")) & rows["target"].notna()]
        if rows.empty:
            return []
        # Every trial here has a config, so a missing value is the setting's None (dynamic=None: automatic).
        values = pd.DataFrame({d: rows[d].map(lambda v: "None" if missing(v) else str(v)) for d in DIMENSIONS},
                              index=rows.index)
        values.loc[rows["backend"] != "inductor", "mode"] = None
        values.loc[(rows["backend"] == "inductor") & values["mode"].isin(("", "None")), "mode"] = "default"
        for name, column in _option_columns(rows).items():
            values[f"options.{name}"] = column
        for name, column in _dynamo_columns(rows).items():
            values[f"dynamo.{name}"] = column
        for column in [c for c in rows.columns if c.startswith(("ddp_", "fsdp2_"))]:  # on many ranks
            values[f"data_parallel.{column.partition('_')[2]}"] = rows[column].map(lambda v: None if missing(v)
                                                                                   else str(v))
        out = []
        for dim in values.columns:
            present = values[dim].dropna()
            if present.nunique() < 2:
                continue
            for value, group in present.groupby(present, sort=True):
                sub = rows.loc[group.index]
                ok = sub[(sub["state"] == "COMPLETE") & sub["total_time_s"].notna()]["total_time_s"].astype(float)
                out.append({
                    "dimension": dim, "value": value, "trials": len(sub),
                    "failed": int((sub["state"] != "COMPLETE").sum()),
                    "median_total_s": statistics.median(ok) if len(ok) else None,
                    "best_total_s": float(ok.min()) if len(ok) else None,
                })
        return out


def collect(study, tuned, scoring) -> ReportData:
    """Gather a :class:`ReportData` from an Optuna study and the config picked from it."""
    trials = study.get_trials(deepcopy=False)
    own = [t for t in trials if not t.user_attrs.get("duplicate_of")]
    environment = next((t.user_attrs["environment"] for t in own if t.user_attrs.get("role") == Role.EAGER
                        and t.user_attrs.get("environment")), None)
    if environment is None:
        environment = next((t.user_attrs["environment"] for t in own if t.user_attrs.get("environment")), {})
    starts = [t.datetime_start for t in trials if t.datetime_start]
    ends = [t.datetime_complete for t in trials if t.datetime_complete]
    dates = (min(starts).strftime("%Y-%m-%d %H:%M"), max(ends or starts).strftime("%Y-%m-%d %H:%M")) if starts else None
    finished_attrs = [dict(t.user_attrs, number=t.number) for t in measured_trials(trials, ("COMPLETE", "FAIL"))]
    data = ReportData(
        name=study.study_name, tuned=tuned, scoring=scoring, frame=trials_frame(study),
        settings=dict(study.user_attrs.get("settings") or {}), command=study.user_attrs.get("command") or "",
        environment=dict(environment), dates=dates,
        graph_breaks=unique_breaks(finished_attrs), recompiles=unique_recompiles(finished_attrs),
        importances=_importances(study),
        hardware_warning=_hardware_warning(study),
        phase_seconds=dict(study.user_attrs.get(PHASE_ATTR) or {}), budget=study.user_attrs.get(BUDGET_ATTR),
        repairs=repair_effects(finished_attrs),
    )
    data.unrepaired = remaining(finished_attrs, data.repairs) if data.repairs else []
    return data


def _hardware_warning(study) -> str | None:
    return hardware_mismatch(study)


def _importances(study) -> dict[str, float] | None:
    """Optuna's parameter importances over the search trials, or None when too few to mean anything.

    Baselines (no params) and repeats (the same measurement twice) are left out, and so are
    settings with one value: they cannot explain any difference.
    """
    import optuna

    trials = [t for t in measured_trials(study) if t.params and t.value is not None]
    varied = sorted({name for t in trials for name in t.params
                     if len({repr(u.params.get(name)) for u in trials}) > 1})
    if len(trials) < MIN_TRIALS_FOR_IMPORTANCE or not varied:
        return None
    search = optuna.create_study(direction="minimize")
    search.add_trials(trials)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = optuna.importance.get_param_importances(
                search, params=varied, evaluator=optuna.importance.PedAnovaImportanceEvaluator())
    except (ValueError, RuntimeError, ZeroDivisionError, ImportError):
        return None  # e.g. every trial scored the same: no variance to attribute
    return {k: float(v) for k, v in result.items()} or None


def _option_columns(rows: pd.DataFrame) -> dict[str, pd.Series]:
    """``options`` JSON -> one column per option name (an option a config leaves unset: "default")."""
    parsed = rows["options"].map(lambda s: json.loads(s) if isinstance(s, str) and s else {})
    names = sorted({k for d in parsed for k in d})
    inductor = rows["backend"] == "inductor"
    out = {}
    for name in names:
        column = parsed.map(lambda d, name=name: str(d[name]) if name in d else "default")
        out[name] = column.where(inductor, None)
    return out


def _dynamo_columns(rows: pd.DataFrame) -> dict[str, pd.Series]:
    """``dynamo`` JSON -> one column per Dynamo setting (unset: "default"); every backend has them."""
    if "dynamo" not in rows:
        return {}
    parsed = rows["dynamo"].map(lambda s: json.loads(s) if isinstance(s, str) and s else {})
    return {name: parsed.map(lambda d, n=name: str(d[n]) if n in d else "default")
            for name in sorted({k for d in parsed for k in d})}


def environment_rows(data: ReportData) -> list[tuple[str, str]]:
    """(label, value) pairs for the environment section, in reading order."""
    env, s = data.environment, data.settings
    when = ""
    if data.dates:
        first, last = data.dates
        when = first if first == last else f"{first} to {last[11:] if first[:10] == last[:10] else last}"
    rows = [
        ("torch", text(env.get("torch"))),
        ("device", text(env.get("device") or s.get("device"))),
        ("device name", text(env.get("device_name"))),
        ("CPU", text(env.get("cpu"))),
        ("threads", text(env.get("threads") or s.get("threads"))),
        ("python", text(env.get("python"))),
        ("host", text(env.get("host"))),
        ("date", when),
        ("command", data.command),
        ("workload", text(s.get("workload"))),
        ("task", text(s.get("task"))),
        ("scored steps", f"{int(s['steps']):,}" if "steps" in s else ""),
        ("search space", text(s.get("space"))),
        ("max memory", f"{s['max_memory_mb']:,.0f} MB" if number(s.get("max_memory_mb")) else "none"),
        ("seed", text(s.get("seed"))),
        ("study", data.name),
    ]
    return [(k, v) for k, v in rows if v]


def time_rows(data: ReportData) -> list[tuple[str, str]]:
    """(phase, wall time) of the latest run, in run order, the total last."""
    return [(phase, format_duration(float(s))) for phase, s in data.phase_seconds.items() if number(s) is not None]


def budget_text(data: ReportData) -> str:
    """``budget 5m: used 4m 52s; cut short: search (3 of 8 trials)``, or "" without a budget."""
    return budget_line(data.budget) if data.budget else ""


def trial_state(row) -> str:
    """The state column as a person reads it."""
    state = text(row.get("state")).lower()
    if state == "fail" and truthy(row.get("interrupted")):
        return "interrupted"
    return {"complete": "ok", "fail": "failed"}.get(state, state)
