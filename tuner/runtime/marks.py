"""Per-dimension dynamic shapes in the user's process: mark exactly the input dimensions that
vary over the input schedule as dynamic, on every call, before the compiled forward sees them.

``dynamic=True`` makes every dimension of every input dynamic (slower kernels where a static
size would do), and ``dynamic=None`` compiles static first and recompiles once a size changes.
Marking the dimensions that do vary gives one dynamic graph from the first call, static
everywhere else. A mark lives on the tensor, so it is set on each call's inputs; this costs a
few microseconds per marked input, which the trial measures like any other cost.

Dynamo specialises sizes 0 and 1 even on a marked dimension, so a range that reaches them is
marked with ``maybe_mark_dynamic`` (a hard mark would fail the trace at size 1) and size 1 gets a
graph of its own; ``mark_unbacked`` (the ``unbacked`` marks, tuner/core/shapes.py) avoids that graph.

The range seen over the schedule is recorded, not enforced: torch 2.13 turns ``min``/``max`` into
errors for a size outside them, where an unbounded mark just works (checked with a batch of 32
after a schedule of 2 to 16, aot_eager: ``mark_dynamic(min=2, max=16)`` raised
ConstraintViolationError at 32 and at 1, ``mark_unbacked(min=1, max=16)`` an AssertionError at 32,
``mark_dynamic(min=2)`` alone an AssertionError at every size; unbounded, every size ran). The
user's run sees sizes the schedule did not, so no mark is bounded.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def marked(forward: Callable, marks: Mapping[str, Mapping[int, list[int]]],
           unbacked: Mapping[str, Mapping[int, list[int]]] | None = None) -> Callable:
    """``forward`` (compiled) behind a function that marks the dimensions in ``marks`` (and, as
    unbacked, those in ``unbacked``) first.

    ``marks``, ``unbacked``: input (positional index as a string, or keyword name) -> dim -> [min, max].
    """
    import torch

    plan = [(_where(name), dim, low, high, _mark) for name, dims in marks.items()
            for dim, (low, high) in sorted(dims.items())]
    plan += [(_where(name), dim, low, high, _mark_unbacked) for name, dims in (unbacked or {}).items()
             for dim, (low, high) in sorted(dims.items())]

    @functools.wraps(forward)
    def forward_with_marks(*args, **kwargs):
        for where, dim, low, high, mark in plan:
            tensor = (args[where] if where < len(args) else None) if isinstance(where, int) else kwargs.get(where)
            if isinstance(tensor, torch.Tensor) and dim < tensor.dim():
                mark(tensor, dim, low, high)
        return forward(*args, **kwargs)

    return forward_with_marks


def _where(name: str) -> int | str:
    return int(name) if name.isdigit() else name


def _mark(tensor: Any, dim: int, low: int, high: int) -> None:
    import torch

    if low < 2:
        # Dynamo specialises sizes 0 and 1; a hard mark over such a range would fail the trace.
        torch._dynamo.maybe_mark_dynamic(tensor, dim)
    else:
        torch._dynamo.mark_dynamic(tensor, dim)  # unbounded: see the module docstring


def _mark_unbacked(tensor: Any, dim: int, low: int, high: int) -> None:
    from torch._dynamo.decorators import mark_unbacked

    mark_unbacked(tensor, dim)  # unbounded: see the module docstring


def distinct_shapes(inputs_list) -> int:
    """How many different input shapes ``inputs_list`` (the example inputs and the schedule) has:
    the graphs ``dynamic=False`` compiles for it.

    Example:
        >>> import torch
        >>> distinct_shapes([(torch.zeros(2, 8),), (torch.zeros(4, 8),), (torch.zeros(2, 8),)])
        2
    """
    return len({tuple(sorted(_tensor_shapes(inputs).items())) for inputs in inputs_list})


def _tensor_shapes(inputs) -> dict[str, tuple[int, ...]]:
    """The top-level tensor inputs of one call: input path -> shape."""
    import torch

    items: Iterable[tuple[Any, Any]]
    if isinstance(inputs, Mapping):
        items = inputs.items()
    else:
        items = enumerate(inputs if isinstance(inputs, (tuple, list)) else (inputs,))
    return {str(name): tuple(value.shape) for name, value in items if isinstance(value, torch.Tensor)}


def varying_dims(inputs_list) -> dict[str, dict[int, list[int]]]:
    """The top-level tensor inputs' dimensions whose size differs across ``inputs_list`` (the
    example inputs and the input schedule), with the range seen: what ``mark_dynamic`` marks.

    Example:
        >>> import torch
        >>> varying_dims([(torch.zeros(2, 8),), (torch.zeros(2, 32),)])
        {'0': {1: [8, 32]}}
    """
    shapes: dict[str, list[tuple[int, ...]]] = {}
    for inputs in inputs_list:
        for name, shape in _tensor_shapes(inputs).items():
            shapes.setdefault(name, []).append(shape)
    found: dict[str, dict[int, list[int]]] = {}
    for name, seen in shapes.items():
        if len({len(s) for s in seen}) != 1:
            continue  # the rank changes: no per-dimension mark describes it
        for dim in range(len(seen[0])):
            sizes = {s[dim] for s in seen}
            if len(sizes) > 1:
                found.setdefault(name, {})[dim] = [min(sizes), max(sizes)]
    return found
