"""Reports from the study: ``trials.csv``, ``report.html``, ``report.md`` and the terminal table.

Everything here is computed from the Optuna storage alone, so reports can be rebuilt later
without measuring anything (``compile-tune report DIR``).

Example:
    >>> from tuner.report import write_reports
    >>> write_reports(study, tuned, scoring, Path("results/mlp"))  # doctest: +SKIP
"""
from __future__ import annotations

from pathlib import Path

from ._source import has_storage, open_saved_study
from ._tables import COLUMNS, measured, summary_table, trials_frame, write_trials_csv
from ._verdict_text import answer_line, verdict_text

__all__ = ["COLUMNS", "measured", "summary_table", "trials_frame", "write_trials_csv", "write_reports",
           "render_reports", "open_saved_study", "has_storage", "verdict_text", "answer_line"]


def render_reports(study, tuned, scoring) -> tuple[str, str]:
    """``(report.html text, report.md text)`` for a study and the config picked from it."""
    from ._data import collect
    from ._html import render_html
    from ._markdown import render_markdown

    data = collect(study, tuned, scoring)
    return render_html(data), render_markdown(data)


def write_reports(study, tuned, scoring, out_dir: Path) -> tuple[Path, Path]:
    """Write ``report.html`` and ``report.md`` into ``out_dir``; return their paths."""
    html, markdown = render_reports(study, tuned, scoring)
    html_path, md_path = Path(out_dir) / "report.html", Path(out_dir) / "report.md"
    html_path.write_text(html, encoding="utf-8")
    md_path.write_text(markdown, encoding="utf-8")
    return html_path, md_path
