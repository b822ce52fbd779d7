"""Table rows shared by the HTML and Markdown reports.

A numeric cell is ``(shown text, sort value)``; Markdown keeps the text, HTML sorts on the value.
"""
from __future__ import annotations

import json

import pandas as pd

from ..core.shapes import settings_text as shape_settings_text
from ._data import ReportData, trial_state
from ._fmt import count, megabytes, millis, missing, number, ratio, seconds, text, truthy
from ._tables import failure_category

TRIAL_HEADERS = ("#", "role", "config", "state", "total", "compile", "step", "speedup", "spread", "peak memory",
                 "correct", "graph breaks", "recompiles", "note")
FAILURE_HEADERS = ("#", "config", "state", "category", "what happened", "what to do", "message")
DIMENSION_HEADERS = ("setting", "value", "trials", "failed", "median total", "best total")
DYNAMIC_HEADERS = ("dynamic", "config", "recompiles", "compile (recompiles included)", "step over the schedule",
                   "total")
#: Raw failure messages are cut to this many characters in tables (trials.csv has them whole).
RAW_CHARS = 240


def _num(shown: str, value) -> tuple[str, str]:
    v = number(value)
    return shown, "" if v is None else repr(v)


def seeded_note(seeded) -> str:
    """How a compile that started from another config's cache was made a cold one
    (``compile_seeded``: tuner/decide/trial_runner.py ``Seed``), or ""."""
    if not isinstance(seeded, dict) or seeded.get("base_cold_s") is None:
        return ""
    extra = float(seeded["base_cold_s"]) - float(seeded["base_warm_s"])
    return (f"compile: {float(seeded['measured_s']):.1f} s measured, {seeded['base']}'s {seeded['graphs_found']} "
            f"graph(s) found in its cache, plus their cold compile ({extra:+.1f} s)")


def ordered_trials(data: ReportData) -> pd.DataFrame:
    """Completed trials best total first, then the rest by trial number."""
    frame = data.frame
    done = frame[(frame["state"] == "COMPLETE") & frame["total_time_s"].notna()].sort_values(["total_time_s", "number"])
    rest = frame.drop(done.index).sort_values("number")
    return pd.concat([done, rest])


def trial_rows(data: ReportData, numeric: bool = True) -> tuple[list[list], list[str]]:
    best = data.best_row()
    rows, classes = [], []
    for _, r in ordered_trials(data).iterrows():
        state = trial_state(r)
        repeat = not missing(r.get("duplicate_of"))
        if repeat:
            note = f"repeat of #{int(float(r['duplicate_of']))}"
        elif not missing(r.get("not_searched")):
            note = "left out: " + text(r.get("not_searched")).split(": ", 1)[-1]
        elif state != "ok":
            note = failure_category(r)
        else:
            note = text(r.get("regional_note")) if not missing(r.get("regional_note")) else ""
            note = "; ".join(filter(None, [note, seeded_note(r.get("compile_seeded"))]))
            if not missing(r.get("rank_spread")):  # on many ranks: the spread the slowest rank sets
                note = "; ".join(filter(None, [note, f"slowest rank {int(float(r['slowest_rank']))}, ranks "
                                                     f"{float(r['rank_spread']) * 100:.1f} % apart"]))
        cells = [
            _num(str(int(r["number"])), r["number"]), text(r.get("role")), text(r.get("config_label")), state,
            _num(seconds(r.get("total_time_s")), r.get("total_time_s")),
            _num(seconds(r.get("compile_time_s")), r.get("compile_time_s")),
            _num(millis(r.get("step_time_s")), r.get("step_time_s")),
            _num(ratio(r.get("speedup")), r.get("speedup")),
            _num("" if missing(r.get("step_spread")) else f"{float(r['step_spread']) * 100:.1f} %",
                 r.get("step_spread")),
            _num(megabytes(r.get("peak_memory_mb")), r.get("peak_memory_mb")),
            "" if missing(r.get("correct")) else ("yes" if truthy(r.get("correct")) else "no"),
            _num(count(r.get("graph_breaks")), r.get("graph_breaks")),
            _num(count(r.get("recompiles")), r.get("recompiles")),
            note,
        ]
        rows.append(cells if numeric else [c[0] if isinstance(c, tuple) else c for c in cells])
        is_best = best is not None and not repeat and int(r["number"]) == int(best["number"])
        classes.append("best" if is_best else ("failed" if state not in ("ok",) else ""))
    return rows, classes


def failure_rows(data: ReportData) -> list[list]:
    rows = []
    for _, r in data.failed.iterrows():
        raw = " ".join(text(r.get("failure_raw")).split())
        rows.append([
            str(int(r["number"])), text(r.get("config_label")), trial_state(r), failure_category(r),
            text(r.get("failure_explanation")) or _unfinished_text(r), text(r.get("failure_hint")),
            raw if len(raw) <= RAW_CHARS else raw[:RAW_CHARS] + "...",
        ])
    return rows


def _unfinished_text(r) -> str:
    state = r.get("state")
    if state == "PRUNED":
        return "the study stopped this trial early (pruned)"
    if state in ("RUNNING", "WAITING") or truthy(r.get("interrupted")):
        return "the run was interrupted while this trial ran; rerunning the command measures it again"
    return ""


def dimension_rows(data: ReportData) -> list[list]:
    return [[r["dimension"], r["value"], str(r["trials"]), str(r["failed"]),
             seconds(r["median_total_s"]), seconds(r["best_total_s"])] for r in data.dimension_values()]


def dynamic_rows(data: ReportData) -> list[list]:
    """Completed trials over an input schedule, by how they handle shapes: the ``dynamic`` choice
    (``marked``: exactly the input dimensions that vary; ``marked_unbacked``: those reaching 0 or 1
    unbacked) and the schedule's Dynamo settings (``recompile_limit``, ``automatic_dynamic_shapes``;
    tuner/core/shapes.py); empty unless more than one way was measured."""
    frame = data.frame
    done = frame[(frame["state"] == "COMPLETE") & frame["total_time_s"].notna() & frame["backend"].notna()]
    if "schedule_len" not in done.columns:
        return []
    done = done[done["schedule_len"].notna() & done["duplicate_of"].isna()]
    shapes = {i: _shape_handling(r) for i, r in done.iterrows()}
    if len(set(shapes.values())) < 2:
        return []
    rows = []
    for i, r in done.sort_values(["total_time_s"]).iterrows():
        rows.append([shapes[i], text(r.get("config_label")), count(r.get("recompiles")),
                     seconds(r.get("compile_time_s")), millis(r.get("step_time_s")), seconds(r.get("total_time_s"))])
    return rows


def _shape_handling(r) -> str:
    """``null (automatic)``, ``False recompile_limit=16``, ``marked_unbacked``, ..."""
    dynamo = r.get("dynamo")
    settings = shape_settings_text(json.loads(dynamo) if isinstance(dynamo, str) and dynamo else {})
    return ("null (automatic)" if missing(r.get("dynamic")) else text(r.get("dynamic"))) + settings
