"""Formatting helpers shared by every report: missing values, numbers, labels."""
from __future__ import annotations

import math
from typing import Any


def missing(value: Any) -> bool:
    """None, NaN and pandas' NA all mean "not measured"."""
    if value is None:
        return True
    try:
        return bool(value != value)  # NaN and pd.NA are not equal to themselves
    except (TypeError, ValueError):
        return False


def text(value: Any) -> str:
    return "" if missing(value) else str(value)


def truthy(value: Any) -> bool:
    return not missing(value) and bool(value)


def seconds(value: Any) -> str:
    """``12.3 s``; large totals get thousands separators."""
    if missing(value):
        return ""
    value = float(value)
    if abs(value) >= 100:
        return f"{value:,.0f} s"
    return f"{value:.2f} s" if abs(value) < 10 else f"{value:.1f} s"


def millis(value_s: Any) -> str:
    if missing(value_s):
        return ""
    ms = float(value_s) * 1e3
    return f"{ms:.3f} ms" if ms < 1 else f"{ms:.2f} ms"


def ratio(value: Any) -> str:
    return "" if missing(value) else f"{float(value):.2f}x"


def megabytes(value: Any) -> str:
    return "" if missing(value) else f"{float(value):,.0f} MB"


def count(value: Any) -> str:
    if missing(value):
        return ""
    value = float(value)
    return f"{int(value):,}" if math.isfinite(value) else str(value)


def number(value: Any) -> float | None:
    """A float for sorting and plotting, or None."""
    if missing(value) or isinstance(value, str):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None
