"""The progress bar of a run: search trials done, the best so far, and how long the run has left.

A tqdm bar on stderr; the lines for each trial go to ``log`` with the bar lifted out of the way.
Its own clock counts search trials only, so the bar's postfix adds the whole run's elapsed time
and an estimate of what is left (confirmation and the warm start included; see tuner/run/budget.py).
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from ..core.spec import Role


class Progress:
    """``timing(done)``, when given, says ``1m 20s elapsed, about 3m left`` after ``done`` search
    trials; it is shown after the best total so far."""

    def __init__(self, total: int, enabled: bool, log: Callable[[str], None],
                 timing: Callable[[int], str] | None = None) -> None:
        self.total, self.enabled, self.log = total, enabled, log
        self.bar: Any | None = None  # a tqdm once started (tqdm ships no type hints)
        self.best: tuple[float, Any, Any] | None = None  # (total, config label, speedup)
        self.timing = timing

    def start(self, done: int) -> None:
        if not self.enabled:
            return
        from tqdm import tqdm

        self.bar = tqdm(total=self.total, initial=min(done, self.total), desc="trials", unit="trial",
                        file=sys.stderr, dynamic_ncols=True)

    def update(self, attrs: dict) -> None:
        total = attrs.get("total_time_s")
        if attrs.get("status") == "ok" and total is not None and (self.best is None or total < self.best[0]):
            self.best = (total, attrs.get("config_label"), attrs.get("speedup"))
        last = outcome(attrs)
        if attrs.get("regional_note"):
            last += f"; {attrs['regional_note']}"
        line = f"  {attrs.get('role'):6s} {attrs.get('config_label')}: {last}"
        if self.bar is not None:
            if attrs.get("role") == Role.SEARCH:
                self.bar.update(1)
            self._postfix()
        self.write(line)

    def _postfix(self) -> None:
        assert self.bar is not None  # only called once the bar is started
        parts = []
        if self.best:
            parts.append(f"best {self.best[0]:.1f}s {self.best[1]} ({self.best[2]:.2f}x)")
        if self.timing is not None:
            parts.append(self.timing(self.bar.n))
        if parts:
            self.bar.set_postfix_str("; ".join(parts))

    def write(self, line: str) -> None:
        if self.bar is None:
            self.log(line)
            return
        with self.bar.external_write_mode(file=sys.stdout):  # what tqdm.write does around its print
            self.log(line)

    def advance_to(self, done: int) -> None:
        """Search trials finished so far (by any worker)."""
        if self.bar is not None and min(done, self.total) > self.bar.n:
            self.bar.update(min(done, self.total) - self.bar.n)
            self._postfix()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def outcome(attrs: dict) -> str:
    """What one trial came to, in words, for every state a trial ends in: its figures, or why it
    has none (a duplicate, left out, interrupted, pruned, failed)."""
    status = attrs.get("status")
    if attrs.get("duplicate_of") is not None:
        return f"duplicate of trial #{attrs['duplicate_of']}: the same config is measured once"
    if attrs.get("not_searched"):
        return f"left out: {attrs['not_searched']}"
    if attrs.get("interrupted"):
        return "interrupted: measured again when the run resumes"
    if status == "ok":
        speedup = attrs.get("speedup")
        return (f"{speedup:.2f}x, " if speedup is not None else "") + (
            f"compile {attrs.get('compile_time_s') or 0:.1f} s, total {attrs.get('total_time_s') or 0:.1f} s")
    if status == "pruned":
        return f"pruned: {attrs.get('pruned_reason') or 'it could not beat the best total so far'}"
    category, why = attrs.get("failure_category"), attrs.get("failure_explanation")
    if category is None:
        return f"{status or 'failed'}: no result"
    return f"failed: {category}" + (f" ({why})" if why else "")
