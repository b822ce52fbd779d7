"""Per-dimension dynamic shapes in the user's process: mark exactly the input dimensions that
vary over the input schedule as dynamic, on every call, before the compiled forward sees them.

``dynamic=True`` makes every dimension of every input dynamic (slower kernels where a static
size would do), and ``dynamic=None`` compiles static first and recompiles once a size changes.
Marking the dimensions that do vary gives one dynamic graph from the first call, static
everywhere else. A mark lives on the tensor, so it is set on each call's inputs; this costs a
few microseconds per marked input, which the trial measures like any other cost.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Mapping


def marked(forward: Callable, marks: Mapping[str, Mapping[int, list[int]]]) -> Callable:
    """``forward`` (compiled) behind a function that marks the dimensions in ``marks`` first.

    ``marks``: input (positional index as a string, or keyword name) -> dim -> [min, max].
    """
    import torch

    plan = [(int(name) if name.isdigit() else name, sorted(dims.items())) for name, dims in marks.items()]

    @functools.wraps(forward)
    def forward_with_marks(*args, **kwargs):
        for where, dims in plan:
            tensor = (args[where] if where < len(args) else None) if isinstance(where, int) else kwargs.get(where)
            if isinstance(tensor, torch.Tensor):
                for dim, (low, high) in dims:
                    if dim < tensor.dim():
                        _mark(tensor, dim, low, high)
        return forward(*args, **kwargs)

    return forward_with_marks


def _mark(tensor: Any, dim: int, low: int, high: int) -> None:
    import torch

    if low < 2:
        # Dynamo specialises sizes 0 and 1; a hard mark over such a range would fail the trace.
        torch._dynamo.maybe_mark_dynamic(tensor, dim)
    else:
        torch._dynamo.mark_dynamic(tensor, dim, min=low, max=high)


def varying_dims(inputs_list) -> dict[str, dict[int, list[int]]]:
    """The top-level tensor inputs' dimensions whose size differs across ``inputs_list`` (the
    example inputs and the input schedule), with the range seen: what ``mark_dynamic`` marks.

    Example:
        >>> import torch
        >>> varying_dims([(torch.zeros(2, 8),), (torch.zeros(2, 32),)])
        {'0': {1: [8, 32]}}
    """
    import torch

    shapes: dict[str, list[tuple[int, ...]]] = {}
    for inputs in inputs_list:
        if isinstance(inputs, Mapping):
            items = inputs.items()
        else:
            items = enumerate(inputs if isinstance(inputs, (tuple, list)) else (inputs,))
        for name, value in items:
            if isinstance(value, torch.Tensor):
                shapes.setdefault(str(name), []).append(tuple(value.shape))
    found: dict[str, dict[int, list[int]]] = {}
    for name, seen in shapes.items():
        if len({len(s) for s in seen}) != 1:
            continue  # the rank changes: no per-dimension mark describes it
        for dim in range(len(seen[0])):
            sizes = {s[dim] for s in seen}
            if len(sizes) > 1:
                found.setdefault(name, {})[dim] = [min(sizes), max(sizes)]
    return found
