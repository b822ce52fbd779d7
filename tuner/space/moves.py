"""The order of the search's first moves, from what won before (``tuner/space/moves.yaml``).

The search changes one setting of plain ``torch.compile`` at a time first (tuner/decide/search.py);
with a budget of minutes it measures a handful of them, so which come first decides what the
search finds. The data file lists the moves that won on measured workloads, each row with the
measurement behind it; a run's facts (task, device, whether the base config freezes its weights)
pick the rows that apply. Those moves go first, in the file's order; every other move follows in
the space's own order, so the file orders the search and never limits it. Until 2026-12-07 the
space's order (target, backend, mode, dynamic, options, ..., optimizer) put ``compile_optimizer``
last, the one setting measured to win in training (docs/zoo.md measurement 8).

    >>> from tuner.core.config import CompileConfig
    >>> plain = CompileConfig()
    >>> moves = [CompileConfig(mode="max-autotune-no-cudagraphs"), CompileConfig(compile_optimizer=True)]
    >>> [c.describe() for c in first_moves(plain, moves, task="train", device="cpu")]
    ['whole/inductor/default +optimizer', 'whole/inductor/max-autotune-no-cudagraphs']
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from ..core.config import CompileConfig


@dataclass(frozen=True)
class Move:
    """One row of the data file: a setting's value, where it applies, and the measurement behind it."""

    setting: str
    """``compile_optimizer``, ``mode`` or ``options.NAME``."""
    value: Any
    when: tuple[tuple[str, Any], ...]
    measured: str

    def applies(self, task: str, device: str, frozen: bool) -> bool:
        facts = {"task": task, "device": "cuda" if device.startswith("cuda") else "cpu", "frozen": frozen}
        return all(facts.get(k) == v for k, v in self.when)

    def made_by(self, base: CompileConfig, changed: CompileConfig) -> bool:
        """Whether ``changed`` is ``base`` with this move made."""
        return _value(changed, self.setting) == self.value != _value(base, self.setting)


def _value(cfg: CompileConfig, setting: str) -> Any:
    if setting.startswith("options."):
        return cfg.options.get(setting.split(".", 1)[1], False)
    return getattr(cfg, setting)


@functools.lru_cache(maxsize=1)
def measured_moves() -> tuple[Move, ...]:
    """The data file's rows, each checked to name its measurement."""
    text = resources.files("tuner.space").joinpath("moves.yaml").read_text()
    out = []
    for i, row in enumerate(yaml.safe_load(text)["moves"]):
        if not str(row.get("measured") or "").strip():
            raise ValueError(f"tuner/space/moves.yaml row {i + 1}: `measured` names no measurement")
        (name, value), = row["move"].items()
        if isinstance(value, dict):  # options: {cpp_wrapper: true}
            (option, value), = value.items()
            name = f"options.{option}"
        out.append(Move(name, value, tuple(sorted((row.get("when") or {}).items())), " ".join(row["measured"].split())))
    return tuple(out)


def first_moves(base: CompileConfig, neighbours: list[CompileConfig], task: str, device: str,
                moves: tuple[Move, ...] | None = None) -> list[CompileConfig]:
    """``neighbours`` (one-setting changes of ``base``) with the measured moves that apply first,
    in the data file's order; the rest keep their order."""
    rows = [m for m in (measured_moves() if moves is None else moves)
            if m.applies(task, device, bool(base.options.get("freezing")))]
    first: dict[str, CompileConfig] = {}
    for move in rows:
        first.update((n.key(), n) for n in neighbours if move.made_by(base, n) and n.key() not in first)
    return [*first.values(), *(n for n in neighbours if n.key() not in first)]
