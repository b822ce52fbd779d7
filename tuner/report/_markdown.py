"""``report.md``: the verdict and the tables in GitHub Markdown, for pasting into a PR or issue."""
from __future__ import annotations

import tuner.report._rows as rows_of  # the same tables as report.html, in Markdown

from ._data import ReportData, budget_text, environment_rows, time_rows
from ._repair_section import markdown as repair_section
from ._verdict_text import verdict


def cell(value) -> str:
    """Table-safe text: no line breaks, pipes escaped, Markdown/HTML specials neutralised."""
    s = " ".join(str(value).split())
    for ch in ("\\", "|", "*", "`", "<", ">", "[", "]"):
        s = s.replace(ch, "\\" + ch)
    return s


def code(value) -> str:
    """Inline code that survives backticks in the value, inside a table cell."""
    s = " ".join(str(value).split()).replace("|", "\\|")
    if not s:
        return ""
    fence = "``" if "`" in s else "`"
    return f"{fence} {s} {fence}" if fence == "``" else f"`{s}`"


def table(headers, rows) -> str:
    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        lines.append("| " + " | ".join(c if isinstance(c, _Raw) else cell(c) for c in row) + " |")
    return "\n".join(lines)


class _Raw(str):
    """Cell text that is already Markdown (e.g. inline code)."""


def render_markdown(data: ReportData) -> str:
    v = verdict(data.tuned, data.hardware_warning, failed=len(data.failed))
    out = [f"# compile-tune report: {cell(data.name)}", "", f"## {cell(v.headline)}", "", cell(v.sentence), ""]
    out += [table(("", "value", "compared with"), v.facts), ""]
    if v.compile:
        out += ["```python", "import tuner", 'model = tuner.apply_config(model, "best_config.yaml")', "```", ""]
    out += ["## All trials", "", "Best total first; repeats of a measured config reuse its measurement.", ""]
    rows, _ = rows_of.trial_rows(data, numeric=False)
    out += [table(rows_of.TRIAL_HEADERS, rows), ""]
    dims = rows_of.dimension_rows(data)
    out += ["## Which settings mattered", ""]
    out += [table(rows_of.DIMENSION_HEADERS, dims) if dims else "No setting was tried with more than one value.", ""]
    if data.importances:
        out += ["Optuna parameter importances (PED-ANOVA): "
                + ", ".join(f"{cell(k)} {val:.2f}" for k, val in data.importances.items()) + ".", ""]
    failures = rows_of.failure_rows(data)
    out += ["## Failed and unfinished trials", ""]
    out += [table(rows_of.FAILURE_HEADERS, failures) if failures else "No trial failed.", ""]
    out += ["## Graph breaks", ""]
    if data.graph_breaks:
        out += [table(("where", "code", "reason", "what to do", "trials"), [
            [_Raw(code(f"{_name(b.get('file'))}:{b.get('line')}")), _Raw(code(b.get("code") or "")),
             b.get("reason") or "", b.get("hint") or "", str(len(b["trials"]))] for b in data.graph_breaks]), ""]
    else:
        out += ["No trial recorded a graph break.", ""]
    out += repair_section(data, table)
    dynamic = rows_of.dynamic_rows(data)
    if dynamic:
        out += ["## Dynamic shapes over the input schedule", "", table(rows_of.DYNAMIC_HEADERS, dynamic), ""]
    out += ["## Recompiles", ""]
    if data.recompiles:
        out += [table(("function", "where", "guard that failed", "trials"), [
            [_Raw(code(r.get("function") or "")), _Raw(code(_name(r.get("where")))), r.get("reason") or "",
             str(len(r["trials"]))] for r in data.recompiles]), ""]
    else:
        out += ["No trial recompiled.", ""]
    if data.phase_seconds:
        out += ["## Where the run's time went", "", table(("phase", "wall time"), time_rows(data)), ""]
        out += [cell(budget_text(data)), ""] if data.budget else []
    out += ["## Environment", ""]
    out += [table(("", "value"), [[k, _Raw(code(val)) if k in ("command", "workload") else val]
                                 for k, val in environment_rows(data)]), ""]
    out += ["Figures are in `report.html`; every number is in `trials.csv`.", ""]
    return "\n".join(out)


def _name(path) -> str:
    return str(path or "").rsplit("/", 1)[-1]
