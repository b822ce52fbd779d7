"""report.html, report.md and the tables behind them, rendered from real SQLite Optuna studies."""
import re
import statistics

import pandas as pd
import pytest
import studies
from hypothesis import given, settings
from hypothesis import strategies as st

from tuner.report import render_reports, summary_table, trials_frame
from tuner.report._data import collect
from tuner.report._plots import pareto_front
from tuner.run.outputs import pick_saved
from tuner.study import scoring_from_study


def render(study):
    return render_reports(study, pick_saved(study), scoring_from_study(study))


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """Read-only in these tests, so one study serves them all."""
    return studies.mixed_study(tmp_path_factory.mktemp("mixed") / "study.db")


@pytest.fixture(scope="module")
def mixed_reports(mixed):
    return render(mixed)


def section(html: str, anchor: str) -> str:
    """The HTML from heading ``anchor`` up to the next h2."""
    start = html.index(f'<h2 id="{anchor}">')
    end = html.find("<h2", start + 1)
    return html[start:end if end > 0 else None]


def md_section(md: str, title: str) -> str:
    start = md.index(f"## {title}\n")
    end = md.find("\n## ", start + 1)
    return md[start:end if end > 0 else None]


def md_table(md: str, title: str) -> list[list[str]]:
    """Rows of the first table in a Markdown section, split on unescaped pipes."""
    lines = [line for line in md_section(md, title).splitlines() if line.startswith("|")]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]


def test_html_opens_with_the_verdict_before_any_figure(mixed_reports):
    html, _ = mixed_reports
    verdict = html.index("Compile with blocks/inductor/default freezing=True")
    assert verdict < html.index("<svg")
    head = html[verdict:html.index("<svg")]
    for fact in ("1.25x", "1.12x", "11.0 s", "192 MB", "21,154 steps", "219 s", "eager 260 s", "plain compile 249 s"):
        assert fact in head, fact


def test_html_is_one_self_contained_file(mixed_reports):
    html, _ = mixed_reports
    assert html.count("<svg") == 5, "break-even, compile vs step, memory vs total, by value, importances"
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html), "nothing is fetched"
    assert "<link" not in html and "<img" not in html and "@import" not in html
    assert not re.search(r"url\((?!#)", html), "url() only for the SVGs' own clip paths"
    assert "<?xml" not in html and "<!DOCTYPE svg" not in html, "SVGs are inlined, not documents"


def test_break_even_chart_marks_the_crossing_and_the_scored_steps(mixed_reports):
    html, _ = mixed_reports
    figure = html[html.index('id="fig-break-even"'):html.index('id="fig-compile-vs-step"')]
    # matplotlib keeps each text's content as a comment next to its glyphs.
    assert "pays off after 21,154 steps" in figure
    assert "scored: 100,000 steps" in figure
    assert "best: blocks/inductor/default freezing=True" in figure and "plain torch.compile" in figure


def test_user_text_is_escaped_in_html_and_markdown(mixed_reports):
    html, md = mixed_reports
    assert "<script>alert(1)</script>" not in html and "<b>bold</b>" not in html
    assert html.count("<script>") == 1, "only the table-sorting script"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section(html, "graph-breaks")
    assert "\\<script\\>alert(1)\\</script\\>" in md
    for title in ("All trials", "Failed and unfinished trials", "Graph breaks", "Recompiles", "Environment"):
        rows = md_table(md, title)
        assert len({len(r) for r in rows}) == 1, f"{title}: a pipe in the text split a row"


def test_failed_pruned_and_interrupted_trials_are_visible_with_category_and_hint(mixed_reports):
    html, md = mixed_reports
    failures = section(html, "failures")
    for text in ("graph_break_fullgraph", "remove the break (see the graph-break list)", "crashed",
                 "killed by signal 11 (SIGSEGV)", "pruned", "interrupted"):
        assert text in failures, text
    rows = {r[0]: r for r in md_table(md, "Failed and unfinished trials")[2:]}
    assert set(rows) == {"9", "10", "11", "12"}
    assert rows["12"][2:4] == ["pruned", "pruned"]
    assert rows["11"][3] == "interrupted"
    assert rows["10"][3] == "crashed"


def test_graph_breaks_are_unique_source_lines_most_frequent_first(mixed_reports):
    _, md = mixed_reports
    rows = md_table(md, "Graph breaks")[2:]
    assert [r[0] for r in rows] == ["`model.py:17`", "`model.py:15`"]
    assert [r[-1] for r in rows] == ["3", "2"], "trials 5, 6 and 9 hit line 17; 5 and 6 hit line 15"
    assert rows[0][3] == "use torch.where(...) \\| torch.cond"


def test_recompiles_are_listed_with_the_failed_guard(mixed_reports):
    html, md = mixed_reports
    rows = md_table(md, "Recompiles")[2:]
    assert rows == [["`forward`", "`model.py:42`",
                     "0/0: tensor 'x' size mismatch at index 1. expected 64, actual 32", "3"]]
    assert "size mismatch at index 1" in section(html, "recompiles")


def test_environment_names_torch_device_cpu_threads_date_and_command(mixed_reports):
    html, md = mixed_reports
    env = dict((r[0], r[1]) for r in md_table(md, "Environment")[2:])
    assert env["torch"] == "2.13.0+cpu" and env["device"] == "cpu" and env["CPU"] == "AMD EPYC 7B13"
    assert env["threads"] == "1" and env["date"] == "2025-11-30 10:00 to 10:12"
    assert env["command"] == "`compile-tune examples/tiny_transformer.py --space quick --steps 100000`"
    assert "compile-tune examples/tiny_transformer.py --space quick --steps 100000" in section(html, "environment")


def test_all_trials_table_lists_every_trial_best_first_with_repeats_marked(mixed, mixed_reports):
    _, md = mixed_reports
    rows = md_table(md, "All trials")[2:]
    assert len(rows) == len(mixed.trials)
    assert rows[0][0] == "2" and rows[1] == rows[1][:13] + ["repeat of #2"]
    totals = [float(r[4].removesuffix(" s")) for r in rows if r[3] == "ok"]
    assert totals == sorted(totals)


def test_dimension_comparison_is_the_median_total_per_value(mixed):
    data = collect(mixed, pick_saved(mixed), scoring_from_study(mixed))
    rows = {(r["dimension"], r["value"]): r for r in data.dimension_values()}
    aot = [t.value for t in mixed.trials if t.user_attrs.get("config", {}).get("backend") == "aot_eager"
           and t.value is not None and not t.user_attrs.get("duplicate_of")]
    assert rows[("backend", "aot_eager")]["median_total_s"] == pytest.approx(statistics.median(aot))
    assert rows[("fullgraph", "True")] == {"dimension": "fullgraph", "value": "True", "trials": 2, "failed": 2,
                                            "median_total_s": None, "best_total_s": None}
    assert ("dynamic", "None") in rows and ("options.freezing", "default") in rows
    assert not any(dim == "mode" and value == "None" for dim, value in rows), "mode is inductor-only"


def test_importances_cover_only_settings_that_varied(mixed):
    data = collect(mixed, pick_saved(mixed), scoring_from_study(mixed))
    assert data.importances and set(data.importances) <= {"target", "backend", "mode", "options.freezing", "dynamic"}
    assert sum(data.importances.values()) == pytest.approx(1.0)


def test_too_few_trials_for_importances_says_so_instead_of_plotting(tmp_path):
    html, md = render(studies.stay_eager_study(tmp_path / "study.db"))
    figure = html[html.index('id="fig-importances"'):]
    assert "need at least 5 completed search trials" in figure[:figure.index("</figure>")]
    assert "parameter importances" not in md.lower()


def test_a_study_where_everything_but_eager_failed_still_renders(tmp_path):
    html, md = render(studies.all_failed_study(tmp_path / "study.db"))
    assert "<h2>Stay eager</h2>" in html and "No compiled config finished correctly" in html
    assert html.count('class="empty"') == 5 and html.count("<svg") == 0
    assert "compiler_failure" in section(html, "failures") and "C++ compile error" in section(html, "failures")
    assert [r[3] for r in md_table(md, "Failed and unfinished trials")[2:]] == [
        "compiler_failure", "model_error", "model_error", "pruned"]


def test_stay_eager_report_says_why(tmp_path):
    html, md = render(studies.stay_eager_study(tmp_path / "study.db"))
    assert md.startswith("# compile-tune report: short\n\n## Stay eager\n")
    assert "pays off only after 116,539 steps" in md, "3 s compile / (2.6 ms - 2.6/1.01 ms) saved per step"
    assert "Off the chart:" in html and 'apply_config' not in md


def test_rendering_is_deterministic(mixed):
    assert render(mixed) == render(mixed), "a rebuilt report is byte-identical"


def test_summary_table_lists_pruned_and_failed_trials_after_the_measured_ones(mixed):
    text = summary_table(trials_frame(mixed))
    measured, failed = text.split("failed or pruned:")
    assert "blocks/inductor/default freezing=True" in measured.splitlines()[1], "best first"
    assert "#12 blocks/aot_eager dynamic=False: pruned" in failed
    assert "#11 blocks/inductor/max-autotune-no-cudagraphs: interrupted" in failed
    assert "#9 whole/inductor/default fullgraph: graph_break_fullgraph" in failed


points = st.lists(st.tuples(st.integers(1, 50), st.integers(1, 50)), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(points)
def test_pareto_front_holds_exactly_the_points_nothing_beats_on_both(pts):
    rows = pd.DataFrame({"total_time_s": [float(t) for t, _ in pts], "peak_memory_mb": [float(m) for _, m in pts]})
    front = {(r["total_time_s"], r["peak_memory_mb"]) for r in pareto_front(rows)}

    def dominated(p):
        return any(q[0] <= p[0] and q[1] <= p[1] and q != p for q in map(tuple, rows.to_numpy()))

    assert front == {tuple(p) for p in rows.to_numpy() if not dominated(tuple(p))}


def test_the_report_warns_when_finalists_ran_on_different_hardware(tmp_path):
    from tuner.core.config import CompileConfig

    b = studies.Builder(tmp_path / "study.db")
    b.eager()
    fast = CompileConfig(target="blocks")
    attrs = studies.ok_attrs(fast, "search", 1.3, 10.0, 200.0)
    attrs["environment"] = {"host": "elsewhere", "device_name": "other", "torch": "2.13.0"}
    b.add(attrs, cfg=fast)
    tuned = pick_saved(b.study)
    html, markdown = render_reports(b.study, tuned, scoring_from_study(b.study))
    assert "measured on different hardware" in markdown and "measured on different hardware" in html


def test_break_even_line_uses_the_compile_cost_the_score_used(tmp_path):
    from test_verdict import warm_study

    study = warm_study(tmp_path / "study.db")
    tuned = pick_saved(study)
    data = collect(study, tuned, scoring_from_study(study))
    assert data.line(data.best_row(), "best").compile_s == 2.0, "the warm compile, as scored"
    html, md = render(study)
    assert f"pays off after {tuned.measured['break_even_steps']:,} steps" in html
    assert "warm (cache kept)" in md


def test_an_unconfirmed_verdict_says_why_in_the_report(mixed):
    md = render(mixed)[1]
    assert "unconfirmed: no confirmation recorded" in md_section(md, "Compile with blocks/inductor/default freezing=True")
