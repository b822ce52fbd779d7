"""Durations as a person writes and reads them, and the names of a run's phases: what the
``--budget`` option accepts, how a wall time is printed, and the one-line summaries of where a
run's time went and what its budget did (the terminal and the reports print the same lines).

Pure values: the clock and the plan that use them are tuner/run/clock.py and tuner/run/budget.py.

Example:
    >>> parse_duration("1h30m")
    5400.0
    >>> format_duration(302)
    '5m 02s'
"""
from __future__ import annotations

import math
import re

from .errors import TunerError

#: The phases of a run, in the order they run (and are listed); a run's ``phase_seconds`` adds
#: ``other`` (what no phase covers) and ``total``.
PHASES = ("check", "baselines", "search", "confirmation", "warm start", "thread check", "outputs")
#: Why confirmation did not run when the budget had no room for one round (the verdict says so).
BUDGET_RAN_OUT = "the --budget ran out"
#: Study attributes: the latest run's seconds per phase (:meth:`tuner.run.clock.RunClock.phase_seconds`), and what
#: its budget did (:meth:`RunClock.budget_record`; None when it had none).
PHASE_ATTR, BUDGET_ATTR = "phase_seconds", "budget"

DURATION_HINT = "give a duration such as 90s, 20m, 1h30m or 1.5h (a plain number is seconds)"
_PARTS = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([hms])")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0}


def parse_duration(value: str | float | int, flag: str = "--budget") -> float:
    """Seconds in ``20m``, ``90s``, ``1h``, ``1h30m``, ``1.5h`` or a plain number of seconds.

    Example:
        >>> parse_duration("20m"), parse_duration("90"), parse_duration(1.5)
        (1200.0, 90.0, 1.5)
    """
    seconds = _seconds_in(value)
    if seconds is None:
        raise TunerError(f"{flag} must be a duration, got {value!r}", DURATION_HINT)
    if not math.isfinite(seconds) or seconds <= 0:
        raise TunerError(f"{flag} must be more than 0 seconds, got {value!r}", DURATION_HINT)
    return seconds


def _seconds_in(value: str | float | int) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip().lower()
    try:
        return float(text)
    except ValueError:
        pass
    parts = _PARTS.findall(text)
    units = [unit for _, unit in parts]
    # Each unit once, largest first ("1h30m", not "30m1h" or "1m1m"); nothing else in the text.
    if not parts or units != sorted(set(units), key="hms".index) or _PARTS.sub("", text).strip():
        return None
    return sum(float(number) * _UNITS[unit] for number, unit in parts)


def format_duration(seconds: float) -> str:
    """``6 s``, ``48 s``, ``3m 10s``, ``5m``, ``1h 02m``: how a person reads a wall time."""
    if seconds < 10:
        return f"{max(seconds, 0.0):.1f} s"
    whole = int(round(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        minutes, rest = divmod(whole, 60)
        return f"{minutes}m {rest:02d}s" if rest else f"{minutes}m"
    hours, rest = divmod(whole, 3600)
    minutes = int(round(rest / 60))
    return f"{hours}h {minutes:02d}m" if minutes else f"{hours}h"


def time_line(phase_seconds: dict[str, float]) -> str:
    """``time: check 6 s, baselines 48 s, search 3m 10s; total 4m 12s``."""
    parts = [f"{p} {format_duration(s)}" for p, s in phase_seconds.items() if p != "total"]
    total = phase_seconds.get("total")
    return "time: " + ", ".join(parts) + (f"; total {format_duration(total)}" if total is not None else "")


def budget_line(record: dict) -> str:
    """``budget 5m: used 4m 52s; cut short: search (3 of 8 trials); skipped: warm start``."""
    line = f"budget {format_duration(record['seconds'])}: used {format_duration(record['used_s'])}"
    over = record["used_s"] - record["seconds"]
    if over > 0:
        line += f" ({format_duration(over)} over)"
    cut, skipped = record.get("cut_short") or {}, record.get("skipped") or []
    if cut:
        line += "; cut short: " + ", ".join(f"{p} ({how})" for p, how in cut.items())
    if skipped:
        line += "; skipped: " + ", ".join(skipped)
    if not cut and not skipped:
        line += "; nothing was cut short"
    return line
