"""The shapes a package takes: which input dimensions vary and between what bounds, said out loud;
``torch.export``'s ``dynamic_shapes`` built from them; and probe inputs for the check, sizes inside
the bounds that the schedule never showed and sizes outside them.

The bounds come from the workload's ``input_dims()`` where it declares them; otherwise from the
range the example inputs and the schedule showed, which a server's next request may well leave
(a BERT package from lengths 17-128 meets a 5-token request). Every dimension not listed varying
is fixed at its example size: the package refuses any other (with AOTInductor's input checks on).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..runtime.marks import varying_dims
from ..user.workload import split_inputs

#: Where a varying dimension's bounds came from.
DECLARED, SCHEDULE = "input_dims()", "the schedule's range"


@dataclass
class PackageShapes:
    """Each top-level tensor input's varying dimensions with their bounds and where those came from,
    and its fixed ones."""

    dims: dict[str, dict[int, list[int]]]
    source: dict[str, dict[int, str]]
    fixed: dict[str, list[int]] = field(default_factory=dict)
    """Each top-level tensor input's example shape (the varying dims are free of it)."""

    def record(self) -> dict[str, Any]:
        """As best_config.yaml's ``measured.package`` keeps it (string keys)."""
        return {"dims": {k: {str(d): r for d, r in v.items()} for k, v in self.dims.items()},
                "dims_from": {k: {str(d): s for d, s in v.items()} for k, v in self.source.items()},
                "fixed": self.fixed}

    def said(self) -> list[str]:
        """One line per input: ``input_ids: dim 1 17..128 (the schedule's range), dim 0 fixed at 4``."""
        lines = []
        for name, shape in self.fixed.items():
            parts = [f"dim {d} {lo}..{hi} ({self.source[name][d]})" for d, (lo, hi) in
                     sorted(self.dims.get(name, {}).items())]
            parts += [f"dim {d} fixed at {n}" for d, n in enumerate(shape) if d not in self.dims.get(name, {})]
            lines.append(f"{name}: {', '.join(parts) or 'a scalar'}")
        if any(s == SCHEDULE for v in self.source.values() for s in v.values()):
            lines.append("declare input_dims() in the workload file to serve sizes the schedule did not show")
        return lines


def package_shapes(inputs: Any, calls: list, declared: dict[str, dict[int, list[int]]] | None) -> PackageShapes:
    """The bounds of every varying dimension: declared ones as declared (a declared range must
    hold the sizes the example inputs show, or export could not trace them), the rest the range the
    example inputs and the schedule showed."""
    seen = varying_dims(calls)
    dims: dict[str, dict[int, list[int]]] = {}
    source: dict[str, dict[int, str]] = {}
    for name, found in seen.items():
        for d, rng in found.items():
            dims.setdefault(name, {})[d] = list(rng)
            source.setdefault(name, {})[d] = SCHEDULE
    shapes = top_level_shapes(inputs)
    for name, found in (declared or {}).items():
        if name not in shapes:
            raise ValueError(f"input_dims() names input {name!r}; the inputs are {', '.join(shapes) or 'none'}")
        for d, (lo, hi) in found.items():
            size = shapes[name][d] if d < len(shapes[name]) else None
            if size is None or not lo <= size <= hi:
                raise ValueError(f"input_dims()[{name!r}][{d}] = ({lo}, {hi}) does not hold the example input's "
                                 f"size {size}")
            dims.setdefault(name, {})[d] = [lo, hi]
            source.setdefault(name, {})[d] = DECLARED
    return PackageShapes(dims, source, {k: list(v) for k, v in shapes.items()})


def top_level_shapes(inputs: Any) -> dict[str, tuple[int, ...]]:
    """``{name: shape}`` of the top-level tensor inputs (a keyword, or a position as ``"0"``)."""
    import torch

    items = inputs.items() if isinstance(inputs, dict) else enumerate(
        inputs if isinstance(inputs, (tuple, list)) else (inputs,))
    return {str(k): tuple(v.shape) for k, v in items if isinstance(v, torch.Tensor)}


def dynamic_shapes(inputs: Any, calls: list, shapes: PackageShapes) -> Any:
    """``dynamic_shapes`` in the inputs' own structure: a ``Dim`` per varying dimension with its
    bounds. Dimensions whose sizes are equal in every call (``input_ids`` and ``attention_mask``
    over a sequence) share one ``Dim``, as export requires of sizes the model ties together. A
    minimum of 1 needs :func:`reaches_one`'s export settings."""
    from torch.export import Dim

    if not shapes.dims:
        return None
    shared: dict[tuple, Any] = {}

    def dim_for(name: str, d: int, lo: int, hi: int) -> Any:
        key = (tuple(_size(call, name, d) for call in calls), lo, hi)
        if key not in shared:
            shared[key] = Dim(f"input_{_safe(name)}_dim{d}", min=lo, max=hi)
        return shared[key]

    def spec_for(name: str) -> dict[int, Any] | None:
        found = shapes.dims.get(name)
        return {d: dim_for(name, d, lo, hi) for d, (lo, hi) in found.items()} if found else None

    if isinstance(inputs, dict):
        return {name: spec_for(str(name)) for name in inputs}
    items = inputs if isinstance(inputs, (tuple, list)) else (inputs,)
    return tuple(spec_for(str(i)) for i in range(len(items)))


def reaches_one(shapes: PackageShapes) -> bool:
    """Whether a varying dimension may be 1 (a batch of one request). Export and AOTInductor
    assume a dynamic size is at least 2 unless told: export then runs size-oblivious (no branch
    taken on a size being 1) and the package's own lower-bound check is off (the declared bounds
    are checked by ``load_package``); the check's probes call the package at 1 against eager."""
    return any(lo < 2 for found in shapes.dims.values() for lo, _ in found.values())


def flat_input_names(inputs: Any) -> list[str]:
    """The names of the tensors a package's loader receives, in its order: the inputs flattened
    as ``(args, kwargs)`` (AOTInductor's runner drops every leaf that is not a tensor)."""
    import torch
    from torch.utils._pytree import keystr, tree_flatten_with_path

    args, kwargs = split_inputs(inputs)
    leaves, _ = tree_flatten_with_path((args, kwargs))
    names = []
    for path, leaf in leaves:
        if not isinstance(leaf, torch.Tensor):
            continue
        top, rest = path[1], path[2:]  # path[0] picks args or kwargs
        head = str(getattr(top, "key", getattr(top, "idx", top)))
        names.append(head + (keystr(rest) if rest else ""))
    return names


@dataclass
class Probe:
    """An input at sizes the schedule never showed: ``inside`` the bounds (the package must match
    eager there) or outside them (it must refuse with an error, not answer wrongly or die)."""

    label: str
    inputs: Any
    inside: bool


def probes(example: Any, calls: list, shapes: PackageShapes, count: int = 3) -> list[Probe]:
    """Up to ``count`` unseen sizes inside the bounds of each varying dimension group, one just
    above the maximum, one just below the minimum where that is at least 1, and, for a fixed
    first dimension (a batch), one batch of another size: each built from ``example`` by cutting
    or repeating along the dimension, so its values stay ones the model takes (token ids, masks)."""
    out: list[Probe] = []
    groups: dict[tuple, list[tuple[str, int]]] = {}
    for name, found in shapes.dims.items():
        for d, (lo, hi) in found.items():
            key = (tuple(_size(call, name, d) for call in calls), lo, hi)
            groups.setdefault(key, []).append((name, d))
    for (sizes, lo, hi), members in groups.items():
        seen = {s for s in sizes if s is not None}
        unseen = [n for n in _spread(lo, hi, count * 3) if n not in seen]
        picks = {round(i * (len(unseen) - 1) / max(count - 1, 1)) for i in range(count)} if unseen else set()
        inside = sorted(unseen[i] for i in picks)
        label = " and ".join(f"{n} dim {d}" for n, d in members)
        out += [Probe(f"{label} = {n}", _resized(example, members, n), True) for n in inside]
        out += [Probe(f"{label} = {n}", _resized(example, members, n), False) for n in (hi + 1, lo - 1) if n >= 1]
    batch = [(name, 0) for name, shape in shapes.fixed.items() if shape and 0 not in shapes.dims.get(name, {})]
    sizes0 = {shapes.fixed[name][0] for name, _ in batch}
    if len(sizes0) == 1 and (n := next(iter(sizes0))) > 1:
        label = " and ".join(f"{name} dim 0" for name, _ in batch)
        out.append(Probe(f"{label} = {n - 1} (fixed at {n})", _resized(example, batch, n - 1), False))
    return out


def _spread(lo: int, hi: int, k: int) -> list[int]:
    if hi - lo + 1 <= k:
        return list(range(lo, hi + 1))
    step = (hi - lo) / (k - 1)
    return sorted({round(lo + i * step) for i in range(k)})


def _resized(example: Any, members: list[tuple[str, int]], n: int) -> Any:
    """``example`` with each named top-level tensor cut or repeated to size ``n`` along its dim."""
    import torch

    def fit(t: torch.Tensor, d: int) -> torch.Tensor:
        reps = -(-n // t.shape[d])
        grown = torch.cat([t] * reps, dim=d) if reps > 1 else t
        return grown.narrow(d, 0, n).contiguous()

    want = dict(members)
    if isinstance(example, dict):
        return {k: fit(v, want[str(k)]) if str(k) in want else v for k, v in example.items()}
    items = example if isinstance(example, (tuple, list)) else (example,)
    return tuple(fit(v, want[str(i)]) if str(i) in want else v for i, v in enumerate(items))


def _size(call: Any, name: str, d: int) -> int | None:
    value = call.get(name) if isinstance(call, dict) else (call if not isinstance(call, (tuple, list)) else
                                                            call[int(name)] if int(name) < len(call) else None)
    shape = getattr(value, "shape", None)
    return int(shape[d]) if shape is not None and d < len(shape) else None


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name) or "input"
