"""The report's figures, drawn with matplotlib (Agg, no display) and returned as SVG text.

A figure without data is returned with ``svg=None`` and a sentence saying why, so a study in
which everything failed still renders.
"""
from __future__ import annotations

import io
from dataclasses import dataclass

from ..core.score import break_even_steps
from ..core.score import pareto_front as front_of
from ..core.spec import Role
from ._data import MIN_TRIALS_FOR_IMPORTANCE, ReportData
from ._fmt import number, text

EAGER_COLOR, PLAIN_COLOR, BEST_COLOR = "#6b7280", "#2563eb", "#ea580c"
#: Trial groups (backend/mode); distinct from the eager/plain/best colors of the break-even chart.
PALETTE = ("#0d9488", "#9333ea", "#ca8a04", "#db2777", "#16a34a", "#0891b2", "#dc2626", "#4b5563", "#7c3aed")
BOX = {"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none", "alpha": 0.85}
#: A crossing further out than this many times the scored steps is named, not drawn.
MAX_AXIS_FACTOR = 20


@dataclass
class Figure:
    key: str
    title: str
    caption: str
    svg: str | None = None
    empty: str = ""
    """Why there is no picture, when ``svg`` is None."""


def figures(data: ReportData) -> list[Figure]:
    return [break_even(data), compile_vs_step(data), memory_vs_total(data), dimensions(data), importances(data)]


def group_of(row) -> str:
    """Color key: backend, plus the mode for inductor."""
    if row.get("role") == Role.EAGER:
        return "eager"
    backend = text(row.get("backend"))
    return f"{backend}/{text(row.get('mode')) or 'default'}" if backend == "inductor" else backend


def _colors(data: ReportData) -> dict[str, str]:
    groups = sorted({group_of(r) for _, r in data.complete.iterrows()} - {"eager"})
    return {"eager": EAGER_COLOR, **{g: PALETTE[i % len(PALETTE)] for i, g in enumerate(groups)}}


def _new_figure(width: float = 8.0, height: float = 4.2):
    from matplotlib.figure import Figure as MplFigure

    fig = MplFigure(figsize=(width, height), layout="constrained")
    return fig, fig.add_subplot()


def _svg(fig, key: str) -> str:
    import matplotlib

    buffer = io.StringIO()
    # A fixed salt per figure keeps ids stable between rebuilds and unique within the page.
    with matplotlib.rc_context({"svg.hashsalt": f"compile-tune-{key}", "svg.fonttype": "path"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    svg = buffer.getvalue()
    return svg[svg.index("<svg"):]  # inline: no XML prolog or DOCTYPE


def _finish(figure: Figure, fig, ax, xlabel: str, ylabel: str | None = None, bars: bool = False) -> Figure:
    """Label and style the axes the house way, and render ``fig`` into ``figure``."""
    ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    ax.grid(True, color="#e5e7eb", linewidth=0.8)
    if bars:  # horizontal bars: vertical grid lines only
        ax.grid(False, axis="y")
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    figure.svg = _svg(fig, figure.key)
    return figure


# --------------------------------------------------------------------------- break-even


def break_even(data: ReportData) -> Figure:
    steps = data.scoring.steps
    fig_ = Figure("break-even", "When does compiling pay off?",
                  f"Total time (compile + steps x step time) against the number of steps. Where a line crosses "
                  f"eager's, compiling has paid for itself; the dashed line is the {steps:,} steps you scored."
                  + (" Lines use the search's single measurements; the verdict above uses the confirmed medians, "
                     "so its break-even step count can differ a little."
                     if data.tuned.measured.get("confirmed") else ""))
    eager = data.line(data.role_row(Role.EAGER), "eager")
    plain = data.line(data.role_row(Role.PLAIN), "plain torch.compile")
    best_row = data.best_row()
    best = data.line(best_row, f"best: {text(best_row.get('config_label'))}" if best_row is not None else "")
    if eager is None:
        fig_.empty = "The eager baseline has no measurement, so there is nothing to compare against."
        return fig_
    candidates = [(plain, PLAIN_COLOR), (best, BEST_COLOR)]
    compiled = [(line, color) for line, color in candidates if line is not None]
    if best is not None and plain is not None and best_row is not None and best_row.get("role") == Role.PLAIN:
        compiled = [(best, BEST_COLOR)]
    if not compiled:
        fig_.empty = "No compiled config finished correctly, so there is no line to break even with."
        return fig_
    crossings = [(line, break_even_steps(line.compile_s, eager.step_s, line.step_s)) for line, _ in compiled]
    near = [x for _, x in crossings if x is not None and x <= MAX_AXIS_FACTOR * steps]
    x_max = max([steps, *near]) * 1.25
    fig, ax = _new_figure()
    xs = [0.0, x_max]
    ax.plot(xs, [eager.total(x) for x in xs], color=EAGER_COLOR, linewidth=2, label="eager")
    for line, color in compiled:
        ax.plot(xs, [line.total(x) for x in xs], color=color, linewidth=2.5 if color == BEST_COLOR else 1.8,
                label=line.label)
    off_chart = []
    for (line, color), (_, x) in zip(compiled, crossings):
        if x is None:
            off_chart.append(f"{line.label} never pays off (its steps are not faster than eager's)")
        elif x <= x_max:
            ax.plot([x], [eager.total(x)], "o", color=color, markersize=8, markeredgecolor="white", zorder=5)
            ax.annotate(f"pays off after {x:,} steps", (x, eager.total(x)), textcoords="offset points",
                        xytext=(10, -18 if color == BEST_COLOR else 10), fontsize=9, color=color, bbox=BOX)
        else:
            off_chart.append(f"{line.label} pays off after {x:,} steps")
    if off_chart:
        fig_.caption += " Off the chart: " + "; ".join(off_chart) + "."
    ax.axvline(steps, color="#111827", linestyle="--", linewidth=1)
    ax.annotate(f"scored: {steps:,} steps", (steps, 0), xycoords=("data", "axes fraction"), textcoords="offset points",
                xytext=(4, 6), fontsize=9)
    ax.set_xlim(0, x_max)
    ax.set_ylim(bottom=0)
    ax.xaxis.set_major_formatter(_thousands())
    ax.legend(loc="best", fontsize=9, framealpha=0.9, edgecolor="none")
    return _finish(fig_, fig, ax, "steps", "total time (s)")


def _thousands():
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda v, _: f"{v:,.0f}")


# --------------------------------------------------------------------------- trade-offs


def compile_vs_step(data: ReportData) -> Figure:
    fig_ = Figure("compile-vs-step", "Compile time against step time",
                  "Every measured trial: left is cheaper to compile, lower is faster per step. "
                  "Colored by backend and mode; the picked config is ringed.")
    rows = data.complete
    if rows[rows["role"] != Role.EAGER].empty:
        fig_.empty = "No compiled config finished, so there is no trade-off to show."
        return fig_
    fig, ax = _new_figure()
    _scatter(ax, data, rows, x="compile_time_s", y="step_time_s", y_scale=1e3)
    ax.axhline(data.scoring.eager_step_s * 1e3, color=EAGER_COLOR, linestyle=":", linewidth=1)
    return _finish(fig_, fig, ax, "compile time (s)", "step time (ms)")


def memory_vs_total(data: ReportData) -> Figure:
    fig_ = Figure("memory-vs-total", "Peak memory against total time",
                  "Lower left is better. The Pareto front (no other config is both faster and leaner) is joined "
                  "by the dashed line.")
    rows = data.complete[data.complete["peak_memory_mb"].notna()]
    if rows[rows["role"] != Role.EAGER].empty:
        fig_.empty = "No compiled config finished with a peak memory measurement, so there is nothing to trade off."
        return fig_
    fig, ax = _new_figure()
    _scatter(ax, data, rows, x="total_time_s", y="peak_memory_mb")
    front = pareto_front(rows)
    ax.step([float(r["total_time_s"]) for r in front], [float(r["peak_memory_mb"]) for r in front], where="post",
            color="#111827", linestyle="--", linewidth=1.2, label="Pareto front", zorder=1)
    limit = number(data.settings.get("max_memory_mb"))
    if limit:
        ax.axhline(limit, color="#dc2626", linewidth=1, label="--max-memory")
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _finish(fig_, fig, ax, "total time over the scored steps (s)", "peak memory (MB)")


def pareto_front(rows) -> list:
    """Rows no other row beats on both total time and peak memory, fastest first (the same front
    ``--objective pareto`` picks from)."""
    points = [(float(row["total_time_s"]), float(row["peak_memory_mb"]), row) for _, row in rows.iterrows()]
    return [row for _, _, row in front_of(points)]


def _scatter(ax, data: ReportData, rows, x: str, y: str, y_scale: float = 1.0) -> None:
    colors = _colors(data)
    best = data.best_row()
    for group, sub in rows.groupby(rows.apply(group_of, axis=1), sort=True):
        ax.scatter(sub[x].astype(float), sub[y].astype(float) * y_scale, s=46, color=colors.get(group, EAGER_COLOR),
                   label=group, zorder=3, edgecolors="white", linewidths=0.6)
    for _, row in rows.iterrows():
        ax.annotate(f"#{int(row['number'])}", (float(row[x]), float(row[y]) * y_scale), textcoords="offset points",
                    xytext=(5, 4), fontsize=7, color="#374151")
    if best is not None and not (rows["number"] == best["number"]).any():
        best = None
    if best is not None:
        ax.scatter([float(best[x])], [float(best[y]) * y_scale], s=220, facecolors="none", edgecolors="#111827",
                   linewidths=2, zorder=4, label="picked" if data.compile_verdict else "best compiled")
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))


# --------------------------------------------------------------------------- what mattered


def dimensions(data: ReportData) -> Figure:
    fig_ = Figure("dimensions", "Which settings mattered: median total time per value",
                  "For each search setting tried with more than one value: the median total time of the trials "
                  "that used each value (shorter is better; the dotted line is eager).")
    rows = [r for r in data.dimension_values() if r["median_total_s"] is not None]
    if not rows:
        fig_.empty = "No setting was tried with two or more values that finished, so there is nothing to compare."
        return fig_
    fig, ax = _new_figure(8.0, 0.9 + 0.32 * len(rows))
    labels = [f"{r['dimension']} = {r['value']}" for r in rows][::-1]
    values = [r["median_total_s"] for r in rows][::-1]
    dims = sorted({r["dimension"] for r in rows})
    colors = [PALETTE[dims.index(r["dimension"]) % len(PALETTE)] for r in rows][::-1]
    ax.barh(range(len(rows)), values, color=colors, height=0.65)
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.axvline(data.scoring.eager_total, color=EAGER_COLOR, linestyle=":", linewidth=1.2)
    return _finish(fig_, fig, ax, "median total time (s)", bars=True)


def importances(data: ReportData) -> Figure:
    fig_ = Figure("importances", "Which settings mattered: Optuna's parameter importances",
                  "PED-ANOVA importances (optuna.importance.get_param_importances): how much each setting decides "
                  "whether a trial lands among the fastest. With few trials, read them as a hint.")
    if not data.importances:
        n = int(((data.measured["role"] == Role.SEARCH) & (data.measured["state"] == "COMPLETE")).sum())
        fig_.empty = (f"Parameter importances need at least {MIN_TRIALS_FOR_IMPORTANCE} completed search trials "
                      f"with varied settings; this study has {n}. The comparison by value above stands in for them.")
        return fig_
    items = sorted(data.importances.items(), key=lambda kv: kv[1])
    fig, ax = _new_figure(8.0, 0.9 + 0.32 * len(items))
    ax.barh(range(len(items)), [v for _, v in items], color=PLAIN_COLOR, height=0.6)
    ax.set_yticks(range(len(items)), [k for k, _ in items], fontsize=8)
    ax.set_xlim(0, 1)
    return _finish(fig_, fig, ax, "importance", bars=True)
