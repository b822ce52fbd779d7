"""Explain what torch.compile did: graph breaks, recompiles, and failures in plain words.

Graph breaks and recompiles are collected from Dynamo's own log records during the trial's
real compile (no second compile just to explain it). Failures are mapped to a small set of
categories, each with a one-line explanation and the next step to take.
"""
from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass
from pathlib import Path

# --------------------------------------------------------------------------- failure categories

#: category -> (plain explanation, next step)
CATEGORIES: dict[str, tuple[str, str]] = {
    "graph_break_fullgraph": (
        "fullgraph=True, but the model has a graph break",
        "remove the break (see the graph-break list) or keep fullgraph=False",
    ),
    "unsupported": (
        "torch.compile cannot trace an operation in the model",
        "rewrite that line with torch ops, or compile a smaller target (blocks) around it",
    ),
    "backend_unavailable": (
        "the backend is not available on this machine or device",
        "install the backend's package or drop it from the search space",
    ),
    "compiler_failure": (
        "the backend's code generator or C++/Triton compiler failed",
        "check the C++ compiler (gcc) / Triton install; try another mode or backend",
    ),
    "bad_config": (
        "torch rejected this combination of settings",
        "drop the offending option or mode from the search space",
    ),
    "dynamic_shape": (
        "a dynamic-shape constraint failed while tracing",
        "try dynamic=False/None, or mark the dimension dynamic with torch._dynamo.mark_dynamic",
    ),
    "recompile_limit": (
        "the function recompiled more often than torch._dynamo.config.recompile_limit",
        "use dynamic=True, or fewer distinct input shapes (pad or bucket them)",
    ),
    "model_error": (
        "the model raised an error while being traced or run under compile",
        "run the model eagerly on the same inputs; fix shape or dtype errors first",
    ),
    "dynamo_bug": (
        "an internal error inside torch.compile",
        "report it to PyTorch with the trace (--trace); compile a smaller target meanwhile",
    ),
    "wrong_results": (
        "the compiled model's results differ from eager beyond tolerance",
        "do not use this config; try a different mode/options, or report the mismatch",
    ),
    "out_of_memory": (
        "the trial ran out of memory",
        "use a smaller batch, a regional target, or raise --max-memory",
    ),
    "timeout": (
        "the trial took longer than --trial-timeout and was stopped",
        "raise --trial-timeout, or drop slow choices (max-autotune) from the space",
    ),
    "crashed": (
        "the trial process died (a segfault or abort inside native code)",
        "try another backend/mode; the raw message has the signal",
    ),
    "memory_limit": (
        "the config ran, but its peak memory is over --max-memory",
        "raise --max-memory or prefer configs with less memory",
    ),
    "rank_hang": (
        "a rank waited in a collective (all-reduce, all-gather) for a rank that never joined it",
        "the ranks ran different code: compare the ranks' graphs (--trace) and avoid rank-dependent Python",
    ),
    "ranks_disagree": (
        "the ranks' parameters differ after the same steps: they no longer train one model",
        "do not use this config; look for rank-dependent code or state outside the gradients",
    ),
    "unknown": ("the trial failed for a reason compile-tune does not recognise", "read the raw message"),
}


@dataclass
class Failure:
    category: str
    explanation: str
    hint: str
    raw: str

    def to_dict(self) -> dict:
        return asdict(self)


def failure(category: str, raw: str) -> Failure:
    explanation, hint = CATEGORIES.get(category, CATEGORIES["unknown"])
    return Failure(category, explanation, hint, raw.strip()[:2000])


def killed_by(returncode: int | None) -> tuple[str, str] | None:
    """``(category, signal name)`` of a process that a signal ended (a negative return code, as
    ``subprocess`` reports it), else None. The kernel's out-of-memory killer sends SIGKILL, and
    nothing else in a trial does: SIGKILL reads ``out_of_memory``, any other signal ``crashed``."""
    import signal

    if returncode is None or returncode >= 0:
        return None
    number = -returncode
    name = signal.Signals(number).name if number in signal.valid_signals() else str(number)
    return ("out_of_memory" if number == signal.SIGKILL else "crashed"), name


def classify_exception(exc: BaseException) -> Failure:
    """Most specific torch exception class first; message patterns for the rest."""
    name = type(exc).__name__
    text = f"{name}: {exc}"
    mro = {cls.__name__ for cls in type(exc).__mro__}
    message = str(exc)
    if "FailOnRecompileLimitHit" in mro:
        return failure("recompile_limit", text)
    lowered = message.lower()
    if ("OutOfMemoryError" in mro or isinstance(exc, MemoryError) or "out of memory" in lowered
            or "can't allocate memory" in lowered or "cannot allocate memory" in lowered):
        return failure("out_of_memory", text)
    if "InvalidBackend" in mro:
        return failure("backend_unavailable", text)
    if "Unsupported" in mro:
        return failure("graph_break_fullgraph", text)
    if "UserError" in mro or "ConstraintViolationError" in mro:
        return failure("dynamic_shape", text)
    if "BackendCompilerFailed" in mro or "InductorError" in mro:
        inner = getattr(exc, "inner_exception", None)
        if isinstance(inner, (ImportError, ModuleNotFoundError)) or "No module named" in message:
            return failure("backend_unavailable", text)
        return failure("compiler_failure", text)
    if "TorchRuntimeError" in mro:
        return failure("model_error", text)
    if "InternalTorchDynamoError" in mro:
        return failure("dynamo_bug", text)
    if re.search(r"Either mode or options|Unrecognized mode|Unexpected (optimization option|type of attr)", message):
        return failure("bad_config", text)
    if "matches no module" in message:
        return failure("bad_config", text)
    return failure("model_error" if isinstance(exc, (RuntimeError, ValueError, TypeError)) else "unknown", text)


# --------------------------------------------------------------------------- graph breaks and recompiles


@dataclass
class GraphBreak:
    file: str
    line: int
    code: str
    reason: str
    hint: str

    @property
    def where(self) -> str:
        return f"{Path(self.file).name}:{self.line}"


#: (pattern in Dynamo's reason, plain hint)
BREAK_HINTS = [
    (r"builtin operator `print`|logging|reorderable_logging",
     "remove the print/log from forward, or guard it with `if not torch.compiler.is_compiling()`"),
    (r"Data-dependent branching|generic_jump|jump with TensorVariable",
     "branch on tensor values with torch.where or torch.cond instead of Python `if`"),
    (r"Tensor\.item\(\)|capture_scalar_outputs",
     "avoid .item() in forward, or set torch._dynamo.config.capture_scalar_outputs = True"),
    (r"numpy|np\.", "use torch ops instead of numpy (or trace_numpy settings)"),
    (r"tolist|Tensor\.numpy", "keep values as tensors; avoid .tolist()/.numpy() in forward"),
    (r"Dynamic shape operator|nonzero|unique",
     "data-dependent output shapes: set torch._dynamo.config.capture_dynamic_output_shape_ops = True"),
    (r"builtin|skip|Attempted to call function marked as skipped|non-torch library",
     "move the unsupported library call out of forward, or wrap it with torch.compiler.disable"),
]


def break_hint(reason: str) -> str:
    for pattern, hint in BREAK_HINTS:
        if re.search(pattern, reason):
            return hint
    return "see the reason; compile the regions around it, or rewrite the line with torch ops"


_BREAK_RE = re.compile(r"Graph break (?:\(.*?\) )?in user code at (?P<file>.+?):(?P<line>\d+)\n"
                       r"Graph Break Reason: (?P<reason>.*)", re.S)
_RECOMPILE_RE = re.compile(r"Recompiling function (?P<fn>\S+) in (?P<where>\S+)\n"
                           r"\s*triggered by the following guard failure\(s\):\n(?P<guards>.*)", re.S)


class DynamoLogCapture(logging.Handler):
    """Collects Dynamo's graph-break and recompile records while attached."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.breaks: dict[tuple[str, int, str], GraphBreak] = {}
        self.break_events = 0
        self.library_breaks = 0
        self.recompiles: list[dict] = []
        self.recompile_limit_hit = False

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record must not break the trial
            return
        if "recompile_limit" in message and "hit config" in message:
            self.recompile_limit_hit = True
        m = _BREAK_RE.match(message)
        if m and _in_torch(m.group("file")):
            # e.g. torch/optim's deliberate graph_break() calls: not the user's code to fix
            self.library_breaks += 1
            return
        if m:
            self.break_events += 1
            reason = _summarise_reason(m.group("reason"))
            key = (m.group("file"), int(m.group("line")), reason)
            if key not in self.breaks:
                self.breaks[key] = GraphBreak(
                    file=m.group("file"), line=int(m.group("line")),
                    code=_source_line(m.group("file"), int(m.group("line"))),
                    reason=reason, hint=break_hint(m.group("reason")),
                )
            return
        m = _RECOMPILE_RE.match(message)
        if m:
            guards = [g.strip(" -") for g in m.group("guards").splitlines() if g.strip(" -")]
            self.recompiles.append({"function": m.group("fn"), "where": m.group("where"),
                                    "reason": guards[0] if guards else ""})

    def __enter__(self) -> DynamoLogCapture:
        import torch._logging

        torch._logging.set_logs(graph_breaks=True, recompiles=True)
        logger = logging.getLogger("torch._dynamo")
        logger.addHandler(self)
        return self

    def __exit__(self, *exc) -> None:
        logging.getLogger("torch._dynamo").removeHandler(self)


def _in_torch(file: str) -> bool:
    import torch

    return str(Path(file).resolve()).startswith(str(Path(torch.__file__).resolve().parent) + "/")


def _summarise_reason(reason: str) -> str:
    """Dynamo's first informative line, e.g. 'Failed to trace builtin operator: ... print ...'."""
    lines = [line.strip() for line in reason.splitlines() if line.strip()]
    if lines and lines[0].startswith("Encountered graph break when attempting"):
        lines = lines[1:]
    head = lines[0] if lines else reason.strip()
    explanation = next((line[len("Explanation:"):].strip() for line in lines if line.startswith("Explanation:")), "")
    return f"{head}: {explanation}" if explanation and explanation not in head else head


def _source_line(file: str, line: int) -> str:
    try:
        return Path(file).read_text().splitlines()[line - 1].strip()
    except (OSError, IndexError, UnicodeDecodeError):
        return ""


# --------------------------------------------------------------------------- per-model summaries


def unique_breaks(trial_attrs: list[dict]) -> list[dict]:
    """Each distinct graph break (user line and reason) once, the one most trials hit first.

    Each entry keeps the user line, the reason, the hint, and the numbers of the trials that hit
    it; ``trial_attrs`` are trials' user attributes with their ``number``.
    """
    breaks = _merge(trial_attrs, "graph_break_details", ("file", "line", "reason"))
    return [dict(b, where=f"{Path(str(b.get('file'))).name}:{b.get('line')}") for b in breaks]


def unique_recompiles(trial_attrs: list[dict]) -> list[dict]:
    """Each distinct recompile (function, place and failed guard) once, like :func:`unique_breaks`."""
    return _merge(trial_attrs, "recompile_details", ("function", "where", "reason"))


def _merge(trial_attrs: list[dict], attr: str, fields: tuple[str, ...]) -> list[dict]:
    merged: dict[tuple, dict] = {}
    for attrs in trial_attrs:
        if attrs.get("duplicate_of") is not None:  # a repeat measured nothing itself
            continue
        for item in attrs.get(attr) or []:
            entry = merged.setdefault(tuple(str(item.get(f)) for f in fields), {**item, "trials": []})
            if attrs.get("number") not in entry["trials"]:
                entry["trials"].append(attrs.get("number"))

    def order(entry: dict) -> tuple:
        return (-len(entry["trials"]), *(f"{v:09d}" if isinstance(v, int) else str(v) for v in map(entry.get, fields)))

    return sorted(merged.values(), key=order)


def format_breaks(breaks: list[dict], limit: int = 10) -> str:
    if not breaks:
        return "graph breaks: none in any trial"
    lines = [f"graph breaks ({len(breaks)} distinct, most trials first):"]
    for b in breaks[:limit]:
        lines.append(f"  {b['where']}  {b['code']}   [{len(b['trials'])} trial(s)]")
        lines.append(f"    why: {b['reason'][:160]}")
        lines.append(f"    fix: {b['hint']}")
    return "\n".join(lines)
