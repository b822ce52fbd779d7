"""The graph-break repair section: for each Dynamo setting the search tried, its trials against
the trials without it (graphs, graph breaks, the breaks it removed by source line, median total
time), and the breaks no setting removed with why they stay. The data is tuner/space/repair.py's."""
from __future__ import annotations

from ..space.repair import effect_text, reason_head
from ._data import ReportData
from ._fmt import seconds

TITLE = "Graph-break repair"
NOTE = ("Dynamo settings the search tried because the model check found a break they can lift (or the space "
        "listed them): the trials with each setting against the same configs without it.")
REPAIR_HEADERS = ("setting", "trials with / without", "graphs with / without", "graph breaks with / without",
                  "breaks it removed", "median total with / without", "effect")
STAYS_HEADERS = ("where", "code", "reason", "why it stays")


def repair_rows(data: ReportData) -> list[list[str]]:
    rows = []
    for e in data.repairs:
        w, o = e["with"], e["without"]
        removed = "; ".join(f"{b['where']} {b.get('code') or ''} ({reason_head(b)})" for b in e["removed"]) or "none"
        paired = "" if e["paired"] else " (not the same configs)"
        rows.append([e["value"], f"{_numbers(w['trials'])} / {_numbers(o['trials'])}{paired}",
                     f"{_n(w['graphs'])} / {_n(o['graphs'])}", f"{_n(w['graph_breaks'])} / {_n(o['graph_breaks'])}",
                     removed, f"{seconds(w['median_total_s']) or '-'} / {seconds(o['median_total_s']) or '-'}",
                     effect_text(e).split(": ")[-1]])
    return rows


def stays_rows(data: ReportData) -> list[list[str]]:
    return [[b["where"], str(b.get("code") or ""), reason_head(b), b["stays"]] for b in data.unrepaired]


def markdown(data: ReportData, table) -> list[str]:
    """The section's Markdown lines (``table`` renders headers and rows), none without repairs."""
    if not data.repairs:
        return []
    out = [f"## {TITLE}", "", NOTE, "", table(REPAIR_HEADERS, repair_rows(data)), ""]
    if data.unrepaired:
        out += ["Graph breaks that stay:", "", table(STAYS_HEADERS, stays_rows(data)), ""]
    return out


def html(data: ReportData, render_table) -> str:
    """The section as HTML (``render_table(headers, rows)`` renders a table), "" without repairs."""
    from html import escape

    if not data.repairs:
        return ""
    out = (f'<h2 id="repair">{TITLE}</h2><p class="note">{escape(NOTE)}</p>'
           f"{render_table(REPAIR_HEADERS, repair_rows(data))}")
    if data.unrepaired:
        out += f'<p class="note">Graph breaks that stay:</p>{render_table(STAYS_HEADERS, stays_rows(data))}'
    return out


def _numbers(numbers: list) -> str:
    return ", ".join(f"#{n}" for n in numbers[:8]) + (" ..." if len(numbers) > 8 else "") if numbers else "none"


def _n(value) -> str:
    return "-" if value is None else f"{value:g}"
