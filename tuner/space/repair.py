"""Graph-break repair as a search dimension: which Dynamo setting can lift which graph break, the
space gaining those settings after the model check, and what each setting did in the trials.

The model check (tuner/measure/check.py) records each graph break with Dynamo's reason and the
user's source line. A break whose reason is one that a ``torch._dynamo.config`` setting lifts
(``.item()`` -> ``capture_scalar_outputs``, ``nonzero``/boolean masks ->
``capture_dynamic_output_shape_ops``, ``logger.info(...)`` -> ``ignore_logging_functions``,
``print`` -> ``reorderable_logging_functions``, ...) makes the space search that setting, off and
on; the trials then record graphs and breaks per config, and :func:`effects` compares the trials
with and without each setting. Nothing here runs a model; torch is imported only to read Dynamo's
defaults when the space gains a setting.
"""
from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..core.config import CompileConfig, describe_dynamo
from ..core.spec import Role
from .dynamo_settings import known_settings

LOGGER_METHODS = ("debug", "info", "warning", "warn", "error", "critical", "exception", "log")


@dataclass(frozen=True)
class Repair:
    """A Dynamo setting that lifts the graph breaks whose reason matches ``pattern``."""

    setting: str
    value: Any
    pattern: str
    what: str
    """What the setting does to the model's behaviour, in a few words (for the run's line)."""


#: The graph breaks of torch 2.13 whose own hint names a Dynamo setting (graph_break_registry.json).
REPAIRS = (
    Repair("capture_scalar_outputs", True,
           r"Tensor\.item\(\) call with capture_scalar_outputs=False"
           r"|Data dependent operator.*aten\.(item|_local_scalar_dense)",
           "traces .item() as a symbolic scalar"),
    Repair("capture_dynamic_output_shape_ops", True, r"^Dynamic shape operator(?! \(no meta kernel\))",
           "traces ops whose output shape depends on data (nonzero, boolean masks)"),
    Repair("ignore_logging_functions", None, r"logging\.Logger method not supported",
           "the logger calls do not run in compiled code"),
    Repair("reorderable_logging_functions", ["builtins.print"], r"builtin operator `print`",
           "print runs after the graph instead of splitting it"),
    Repair("allow_rnn", True, r"Attempted to wrap RNN, GRU, or LSTM", "traces RNN/GRU/LSTM (experimental)"),
    Repair("enable_trace_contextlib", True, r"attempted to trace contextlib\.contextmanager",
           "traces @contextmanager functions"),
    Repair("trace_autograd_ops", True, r"torch\.autograd\.grad` with `torch\._dynamo\.config\.trace_autograd_ops=False",
           "traces torch.autograd.grad"),
    Repair("trace_numpy", True, r"trace_numpy=False", "traces numpy as torch ops"),
)
#: Breaks no setting lifts, and what to do instead.
STAYS = ((r"Data-dependent branching|generic_jump",
          "no Dynamo setting lifts a Python `if` on tensor values: use torch.where or torch.cond"),)


def repair_for(reason: str) -> Repair | None:
    return next((r for r in REPAIRS if re.search(r.pattern, reason or "")), None)


def repairs_for(breaks: list[dict]) -> list[tuple[Repair, list[dict]]]:
    """The repairs that can lift some of ``breaks`` (graph-break records: file, line, code,
    reason), each with the breaks it targets, in the order of :data:`REPAIRS`."""
    found: dict[str, tuple[Repair, list[dict]]] = {}
    for b in breaks:
        repair = repair_for(str(b.get("reason") or ""))
        if repair is not None:
            found.setdefault(repair.setting, (repair, []))[1].append(b)
    out = []
    for repair in REPAIRS:
        if repair.setting in found:
            targets = found[repair.setting][1]
            value = repair.value if repair.value is not None else _logger_methods(targets)
            out.append((replace(repair, value=value), targets))
    return out


def _logger_methods(breaks: list[dict]) -> list[str]:
    """The ``logging.Logger`` methods the break lines call (all of them when the line says none)."""
    called = {m for b in breaks for m in re.findall(r"\.(\w+)\s*\(", str(b.get("code") or "")) if m in LOGGER_METHODS}
    return [f"logging.Logger.{m}" for m in sorted(called or LOGGER_METHODS)]


def add_repairs(space, check: dict | None) -> list[str]:
    """Give ``space`` (a SearchSpace) a ``dynamo`` choice ``[default, repair]`` for each setting that
    can lift a break the model check found, unless the space lists that setting already; return
    one line per setting added, naming the breaks it targets."""
    lines: list[str] = []
    found = repairs_for((check or {}).get("graph_breaks") or [])
    defaults = known_settings() if found else {}
    for repair, targets in found:
        default = defaults.get(repair.setting)
        if repair.setting in space.dynamo or default == repair.value:
            continue
        space.dynamo[repair.setting] = [default, repair.value]
        setting = describe_dynamo(repair.setting, repair.value)
        lines.append(f"  repair: the search tries dynamo {setting} ({repair.what}) "
                     f"against the graph break(s) at {_breaks_text(targets)}")
    return lines


def _breaks_text(breaks: list[dict]) -> str:
    """``model.py:24,26 (logging.Logger method not supported ...)``: lines grouped by file and reason."""
    groups: dict[tuple[str, str], list[str]] = {}
    for b in breaks:
        groups.setdefault((Path(str(b.get("file"))).name, reason_head(b)), []).append(str(b.get("line")))
    return "; ".join(f"{name}:{','.join(numbers)} ({reason})" for (name, reason), numbers in groups.items())


def where(b: dict) -> str:
    return f"{Path(str(b.get('file'))).name}:{b.get('line')}"


def reason_head(b: dict) -> str:
    """Dynamo's graph-break type: the reason up to its explanation."""
    return str(b.get("reason") or "").split(": ")[0][:100]


# --------------------------------------------------------------------------- what each setting did


def effects(trial_attrs: list[dict]) -> list[dict]:
    """Per Dynamo setting the trials tried, the trials with it against those without it.

    ``trial_attrs``: trials' user attributes with their ``number``. Where a trial with the setting
    has a twin (the same config without it) the twins are compared; otherwise every compiled
    trial without it. Each entry: ``setting``, ``value`` (as the config label shows it),
    ``with``/``without`` (trial numbers, median graphs, graph breaks and total time), ``paired``,
    and ``removed``: the breaks (by user source line) that trials without it hit and none with it.
    """
    rows = [t for t in trial_attrs if t.get("role") in (Role.PLAIN, Role.SEARCH) and t.get("duplicate_of") is None
            and t.get("graphs") is not None and isinstance(t.get("config"), dict)]
    by_key = {t.get("config_key"): t for t in rows}
    names = sorted({n for t in rows for n in t["config"].get("dynamo") or {}})
    out = []
    for name in names:
        with_it = [t for t in rows if name in (t["config"].get("dynamo") or {})]
        candidates = [(t, by_key.get(_twin_key(t["config"], name))) for t in with_it]
        pairs = [(t, twin) for t, twin in candidates if twin is not None]
        side = [t for t, _ in pairs] or with_it
        other = (_unique([twin for _, twin in pairs])
                 or [t for t in rows if name not in (t["config"].get("dynamo") or {})])
        kept = {_line(b) for t in side for b in t.get("graph_break_details") or []}
        removed = {_line(b): b for t in other for b in t.get("graph_break_details") or [] if _line(b) not in kept}
        values = sorted({describe_dynamo(name, t["config"]["dynamo"][name]) for t in side})
        out.append({"setting": name, "value": ", ".join(values), "paired": bool(pairs),
                    "with": _summary(side), "without": _summary(other),
                    "removed": [dict(b, where=where(b)) for _, b in sorted(removed.items())] if side else []})
    return out


def remaining(trial_attrs: list[dict], found: list[dict]) -> list[dict]:
    """The breaks (by source line) that no searched setting removed, each with why it stays."""
    removed = {_line(b) for e in found for b in e["removed"]}
    seen: dict[tuple, dict] = {}
    for t in trial_attrs:
        if t.get("duplicate_of") is None and t.get("role") in (Role.PLAIN, Role.SEARCH):
            for b in t.get("graph_break_details") or []:
                if _line(b) not in removed:
                    seen.setdefault(_line(b), dict(b, where=where(b), stays=_why_it_stays(b, found)))
    return [seen[k] for k in sorted(seen)]


def _why_it_stays(b: dict, found: list[dict]) -> str:
    reason = str(b.get("reason") or "")
    for pattern, text in STAYS:
        if re.search(pattern, reason):
            return text
    repair = repair_for(reason)
    if repair is None:
        return "no Dynamo setting lifts it: " + (str(b.get("hint") or "rewrite the line"))
    if repair.setting in {e["setting"] for e in found}:
        return f"{describe_dynamo(repair.setting, repair.value)} was searched but the break stayed"
    return f"{describe_dynamo(repair.setting, repair.value)} can lift it (not searched: run with the model check)"


def lines(trial_attrs: list[dict]) -> list[str]:
    """The terminal's lines: one per setting searched, then the breaks that stay."""
    found = effects(trial_attrs)
    if not found:
        return []
    out = ["graph-break repair (Dynamo settings searched, trials with vs without):"]
    for e in found:
        w, o = e["with"], e["without"]
        removed = ", ".join(f"{b['where']} ({reason_head(b)})" for b in e["removed"])
        out.append(f"  {e['value']}: removed {removed or 'no break'}; graphs {_n(o['graphs'])} -> {_n(w['graphs'])}, "
                   f"breaks {_n(o['graph_breaks'])} -> {_n(w['graph_breaks'])}; {effect_text(e)}")
    for b in remaining(trial_attrs, found):
        out.append(f"  stays a graph break: {b['where']} ({reason_head(b)}): {b['stays']}")
    return out


def effect_text(e: dict) -> str:
    """``median total 12.40 s without, 12.10 s with: saves 0.30 s``."""
    w, o = e["with"]["median_total_s"], e["without"]["median_total_s"]
    if w is None or o is None:
        return "no completed trial on one side to compare total times"
    verb = "saves" if w < o else "costs"
    return f"median total {_s(o)} without, {_s(w)} with: {verb} {_s(abs(o - w))}"


def _s(seconds: float) -> str:
    return f"{seconds:,.0f} s" if seconds >= 100 else f"{seconds:.2f} s"


def _twin_key(config: dict, name: str) -> str | None:
    try:
        cfg = CompileConfig.from_dict(config)
    except Exception:  # noqa: BLE001 - a config this version cannot read has no twin
        return None
    return replace(cfg, dynamo={k: v for k, v in cfg.dynamo.items() if k != name}).key()  # defaults are out already


def _line(b: dict) -> tuple:
    return (str(b.get("file")), int(b.get("line") or 0))


def _unique(trials: list[dict]) -> list[dict]:
    return list({id(t): t for t in trials}.values())


def _summary(trials: list[dict]) -> dict:
    def median(name: str):
        values = [float(t[name]) for t in trials if t.get(name) is not None]
        return statistics.median(values) if values else None

    return {"trials": sorted(t.get("number") for t in trials if t.get("number") is not None),
            "graphs": median("graphs"), "graph_breaks": median("graph_breaks"),
            "median_total_s": median("total_time_s")}


def _n(value) -> str:
    return "?" if value is None else f"{value:g}"
