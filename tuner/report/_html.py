"""``report.html``: one self-contained page (inline SVG, CSS and a few lines of JS; no fetches)."""
from __future__ import annotations

from html import escape

from .._version import __version__
from ._data import ReportData, budget_text, environment_rows, time_rows
from ._plots import Figure, figures
from ._repair_section import html as repair_section
from ._rows import (
    DIMENSION_HEADERS,
    DYNAMIC_HEADERS,
    FAILURE_HEADERS,
    TRIAL_HEADERS,
    dimension_rows,
    dynamic_rows,
    failure_rows,
    trial_rows,
)
from ._verdict_text import verdict

CSS = """
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#111827;margin:0;background:#f9fafb}
main{max-width:1180px;margin:0 auto;padding:24px 32px 64px}
h1{font-size:24px;margin:0 0 4px}
h2{font-size:19px;margin:36px 0 10px;border-bottom:1px solid #e5e7eb;padding-bottom:4px}
h3{font-size:16px;margin:0 0 6px}.sub{color:#4b5563;margin:0 0 20px}
.verdict{border-radius:10px;padding:18px 22px;background:#ecfdf5;border:1px solid #6ee7b7}
.verdict.eager{background:#fff7ed;border-color:#fdba74}.verdict h2{border:0;margin:0 0 6px;font-size:22px}
.facts{display:grid;grid-template-columns:repeat(auto-fill,minmax(210px,1fr));gap:10px;margin:14px 0 6px}
.fact{background:#fff;border-radius:8px;padding:8px 12px;border:1px solid #e5e7eb}
.fact b{display:block;font-size:17px}.fact span{color:#4b5563;font-size:13px}
nav{margin:14px 0 0}nav a{margin-right:14px;color:#2563eb}
figure{background:#fff;border:1px solid #e5e7eb;border-radius:10px;margin:0 0 18px;padding:14px 16px}
figure svg{width:100%;max-width:960px;height:auto;display:block}figcaption{color:#4b5563;font-size:13px;margin-top:6px}
.scroll{overflow-x:auto}.empty{padding:26px;text-align:center;color:#6b7280;background:#f3f4f6;border-radius:8px}
table{border-collapse:collapse;width:100%;background:#fff;font-size:13px;margin-bottom:8px}
th,td{border:1px solid #e5e7eb;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f3f4f6}th.sortable{cursor:pointer;user-select:none}
th.sortable:after{content:" \\2195";color:#9ca3af}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.best td{background:#fff7ed}tr.failed td{color:#991b1b}code,pre{font:12px ui-monospace,Menlo,Consolas,monospace}
pre{background:#111827;color:#f9fafb;padding:10px 14px;border-radius:8px;overflow:auto}
details pre{white-space:pre-wrap;max-height:300px}dl.env{display:grid;grid-template-columns:160px 1fr;gap:2px 16px}
dl.env dt{color:#4b5563}dl.env dd{margin:0}.note{color:#4b5563;font-size:13px}
"""

# Click a header to sort; numbers sort as numbers (cells carry data-v), blanks go last.
SORT_JS = """
document.querySelectorAll("table.sortable").forEach(function(table){
  table.querySelectorAll("th").forEach(function(th, col){
    th.classList.add("sortable");
    th.addEventListener("click", function(){
      var body = table.tBodies[0], rows = Array.from(body.rows), asc = th.dataset.dir !== "asc";
      table.querySelectorAll("th").forEach(function(h){ delete h.dataset.dir; });
      th.dataset.dir = asc ? "asc" : "desc";
      function key(r){ var c = r.cells[col]; return c.dataset.v !== undefined ? c.dataset.v : c.textContent.trim(); }
      rows.sort(function(a, b){
        var x = key(a), y = key(b);
        if (x === "" || y === "") return (x === "") - (y === "");
        var nx = parseFloat(x), ny = parseFloat(y);
        var d = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
        return asc ? d : -d;
      });
      rows.forEach(function(r){ body.appendChild(r); });
    });
  });
});
"""


def render_html(data: ReportData) -> str:
    v = verdict(data.tuned, data.hardware_warning, failed=len(data.failed))
    title = f"compile-tune report: {data.name}"
    s = data.settings
    sub = " · ".join(x for x in (
        str(s.get("workload") or ""), f"{s.get('task', '')} on {data.environment.get('device') or s.get('device', '')}",
        f"scored over {data.scoring.steps:,} steps", data.dates[1][:10] if data.dates else "") if x.strip())
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body><main>",
        f"<h1>{escape(title)}</h1><p class=\"sub\">{escape(sub)}</p>",
        _verdict_section(v),
        '<nav><a href="#figures">figures</a><a href="#trials">all trials</a><a href="#failures">failures</a>'
        '<a href="#graph-breaks">graph breaks</a><a href="#recompiles">recompiles</a>'
        '<a href="#time">time</a><a href="#environment">environment</a></nav>',
        '<h2 id="figures">Figures</h2>',
        *[_figure(f) for f in figures(data)],
        _table_section("dimensions", "Which settings mattered, by value", DIMENSION_HEADERS, dimension_rows(data),
                       "Only settings tried with more than one value are listed."),
        _trials_section(data),
        _table_section("failures", "Failed and unfinished trials", FAILURE_HEADERS, failure_rows(data),
                       "No trial failed."),
        _graph_breaks_section(data),
        repair_section(data, _table),
        _table_section("dynamic", "Dynamic shapes over the input schedule", DYNAMIC_HEADERS, dynamic_rows(data),
                       "Only one dynamic-shape choice was measured over the schedule."),
        _recompiles_section(data),
        _time_section(data),
        _environment_section(data),
        f'<p class="note">Written by compile-tune {escape(__version__)} from the study alone; rebuild it with '
        f"<code>compile-tune report DIR</code>. The machine-readable record is <code>trials.csv</code>.</p>",
        f"</main><script>{SORT_JS}</script></body></html>",
    ]
    return "\n".join(parts) + "\n"


def _verdict_section(v) -> str:
    facts = "".join(f'<div class="fact"><span>{escape(k)}</span><b>{escape(val)}</b><span>{escape(note)}</span></div>'
                    for k, val, note in v.facts)
    snippet = ""
    if v.compile:
        snippet = ('<pre>import tuner\nmodel = tuner.apply_config(model, "best_config.yaml")</pre>')
    css = "verdict" if v.compile else "verdict eager"
    return (f'<section class="{css}"><h2>{escape(v.headline)}</h2><p>{escape(v.sentence)}</p>'
            f'<div class="facts">{facts}</div>{snippet}</section>')


def _figure(f: Figure) -> str:
    body = f.svg if f.svg else f'<div class="empty">{escape(f.empty)}</div>'
    return (f'<figure id="fig-{escape(f.key)}"><h3>{escape(f.title)}</h3>{body}'
            f"<figcaption>{escape(f.caption)}</figcaption></figure>")


def _table(headers, rows, sortable: bool = False, row_classes=None) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for i, row in enumerate(rows):
        cls = f' class="{row_classes[i]}"' if row_classes and row_classes[i] else ""
        cells = []
        for cell in row:
            if isinstance(cell, tuple):  # (shown text, sort value)
                shown, key = cell
                cells.append(f'<td class="num" data-v="{escape(str(key))}">{escape(shown)}</td>')
            else:
                cells.append(f"<td>{escape(str(cell))}</td>")
        body.append(f"<tr{cls}>{''.join(cells)}</tr>")
    css = ' class="sortable"' if sortable else ""
    return (f"<div class=\"scroll\"><table{css}><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>")


def _table_section(key, title, headers, rows, none_text) -> str:
    content = _table(headers, rows) if rows else f'<p class="note">{escape(none_text)}</p>'
    return f'<h2 id="{key}">{escape(title)}</h2>{content}'


def _trials_section(data: ReportData) -> str:
    rows, classes = trial_rows(data, numeric=True)
    note = ('<p class="note">Every trial, best total first; click a header to sort. Repeats of a measured config '
            "reuse its measurement and are marked \"repeat of #n\".</p>")
    return f'<h2 id="trials">All trials</h2>{note}{_table(TRIAL_HEADERS, rows, sortable=True, row_classes=classes)}'


def _graph_breaks_section(data: ReportData) -> str:
    if not data.graph_breaks:
        return _section("graph-breaks", "Graph breaks", "No trial recorded a graph break.")
    rows = []
    for b in data.graph_breaks:
        where = f"{b.get('file')}:{b.get('line')}"
        rows.append([f"<td title=\"{escape(where)}\"><code>{escape(_short(where))}</code></td>",
                     f"<td><code>{escape(str(b.get('code') or ''))}</code></td>",
                     f"<td>{escape(str(b.get('reason') or ''))}</td>", f"<td>{escape(str(b.get('hint') or ''))}</td>",
                     f"<td class=\"num\">{len(b['trials'])}</td>"])
    return _section("graph-breaks", "Graph breaks", "Unique source lines where Dynamo split the graph, the most "
                    "frequent first.", ("where", "code", "reason", "what to do", "trials"), rows)


def _recompiles_section(data: ReportData) -> str:
    if not data.recompiles:
        return _section("recompiles", "Recompiles", "No trial recompiled.")
    rows = [[f"<td><code>{escape(str(r.get('function') or ''))}</code></td>",
             f"<td title=\"{escape(str(r.get('where') or ''))}\"><code>{escape(_short(str(r.get('where') or '')))}"
             "</code></td>", f"<td>{escape(str(r.get('reason') or ''))}</td>",
             f"<td class=\"num\">{len(r['trials'])}</td>"] for r in data.recompiles]
    return _section("recompiles", "Recompiles", "Why compiled code was compiled again (a guard on the inputs "
                    "failed), the most frequent first.", ("function", "where", "guard that failed", "trials"), rows)


def _section(anchor: str, title: str, note: str, headers: tuple[str, ...] = (), rows: list[list[str]] | None = None
             ) -> str:
    """A titled section with a note and, given rows of ready cells, a table."""
    out = f'<h2 id="{anchor}">{title}</h2><p class="note">{note}</p>'
    if rows:
        head = "".join(f"<th>{h}</th>" for h in headers)
        body = "".join(f"<tr>{''.join(cells)}</tr>" for cells in rows)
        out += f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    return out


def _time_section(data: ReportData) -> str:
    if not data.phase_seconds:
        return ""
    budget = f'<p class="note">{escape(budget_text(data))}</p>' if data.budget else ""
    return f'<h2 id="time">Where the run\'s time went</h2>{_table(("phase", "wall time"), time_rows(data))}{budget}'


def _environment_section(data: ReportData) -> str:
    items = "".join(f"<dt>{escape(k)}</dt><dd>{_code(k, v)}</dd>" for k, v in environment_rows(data))
    return f'<h2 id="environment">Environment</h2><dl class="env">{items}</dl>'


def _code(key: str, value: str) -> str:
    return f"<code>{escape(value)}</code>" if key in ("command", "workload") else escape(value)


def _short(where: str) -> str:
    """``/long/path/model.py:12`` -> ``model.py:12`` (the full path is in the cell's tooltip)."""
    return where.rsplit("/", 1)[-1]
