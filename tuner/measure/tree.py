"""The one walk over a trial's nested inputs and outputs: moving them to the device, detaching,
float64 copies, shape signatures and the leaf names a failed comparison reports.

It is ``torch.utils._pytree``: tuples, lists, dicts, namedtuples, ``torch.return_types`` and
whatever a library registers (Hugging Face registers every ``ModelOutput``) are containers.
A dataclass that nobody registered is a container too, through its fields: models return
them (``@dataclass class Out: logits ...``), and a walk that stopped at them would compare
nothing and leave their tensors on the wrong device. That is done here, locally, not with
``register_dataclass``: registering is process-wide and would change the user's own code in the
trial (their own later registration of the class raises "already registered"; Dynamo and
``torch.export`` would treat the type differently than in their run). Any other object is a
leaf, passed through as it is.

Leaf names read like Python: ``out.logits``, ``out[0]``, ``out.hidden.h`` (a dict key is named
like an attribute, as the comparison messages always did).
"""
from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any


def _unregistered_dataclass(value: Any) -> bool:
    from torch.utils._pytree import tree_is_leaf

    return dataclasses.is_dataclass(value) and not isinstance(value, type) and tree_is_leaf(value)


def map_leaves(fn: Callable[[Any], Any], value: Any) -> Any:
    """``value`` rebuilt with ``fn`` applied to every leaf (tensors, modules, numbers, ...).

    Example:
        >>> map_leaves(lambda x: x * 2, {"a": (1, [2])})
        {'a': (2, [4])}
    """
    from torch.utils._pytree import tree_map

    def leaf(item: Any) -> Any:
        if not _unregistered_dataclass(item):
            return fn(item)
        new = copy.copy(item)  # keeps fields with init=False; object.__setattr__ passes frozen=True
        for field in dataclasses.fields(item):
            object.__setattr__(new, field.name, map_leaves(fn, getattr(item, field.name)))
        return new

    return tree_map(leaf, value, is_leaf=_unregistered_dataclass)


def map_tensors(fn: Callable[[Any], Any], value: Any) -> Any:
    """``value`` rebuilt with ``fn`` applied to every tensor; other leaves stay as they are.

    Example:
        >>> import torch
        >>> map_tensors(lambda t: t + 1, (torch.zeros(1), "x"))
        (tensor([1.]), 'x')
    """
    import torch

    return map_leaves(lambda x: fn(x) if isinstance(x, torch.Tensor) else x, value)


def named_leaves(value: Any, prefix: str = "out") -> list[tuple[str, Any]]:
    """Every leaf with the path that reaches it, in a fixed order.

    Example:
        >>> named_leaves({"h": [1, 2]})
        [('out.h[0]', 1), ('out.h[1]', 2)]
    """
    from torch.utils._pytree import tree_flatten_with_path

    found: list[tuple[str, Any]] = []
    for path, item in tree_flatten_with_path(value, is_leaf=_unregistered_dataclass)[0]:
        name = prefix + "".join(_key_name(key) for key in path)
        if _unregistered_dataclass(item):
            for field in dataclasses.fields(item):
                found += named_leaves(getattr(item, field.name), f"{name}.{field.name}")
        else:
            found.append((name, item))
    return found


def _key_name(key: Any) -> str:
    from torch.utils._pytree import GetAttrKey, MappingKey, SequenceKey

    if isinstance(key, SequenceKey):
        return f"[{key.idx}]"
    if isinstance(key, MappingKey):
        return f".{key.key}" if isinstance(key.key, str) else f"[{key.key!r}]"
    if isinstance(key, GetAttrKey):
        return f".{key.name}"
    return str(key)
