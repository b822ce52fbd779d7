"""Compare compiled results with eager, in the style of PyTorch's benchmark harness.

``torch._dynamo.utils.same``: pass if ``allclose(atol=rtol=tol)``; otherwise, given a float64
reference, pass if the compiled result's RMSE against it is within a small multiple of eager's
own RMSE against it (compiled code may legitimately round differently, but not worse).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

#: Defaults close to the upstream harness: 1e-3 for inference (HF/TIMM), 1e-2 for training.
TOLERANCE = {"infer": 1e-3, "train": 1e-2}


def flatten(value: Any, prefix: str = "out") -> dict[str, Any]:
    """Tensors in nested tuples/lists/dicts/dataclasses/HF ``ModelOutput``s, by path."""
    import torch

    if isinstance(value, torch.Tensor):
        return {prefix: value}
    items: list[tuple[str, Any]] = []
    if isinstance(value, dict) or _is_model_output(value):
        items = [(f"{prefix}.{k}", v) for k, v in value.items()]
    elif isinstance(value, (list, tuple)):
        items = [(f"{prefix}[{i}]", v) for i, v in enumerate(value)]
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = [(f"{prefix}.{f.name}", getattr(value, f.name)) for f in dataclasses.fields(value)]
    elif hasattr(value, "__dict__") and not callable(value):
        items = [(f"{prefix}.{k}", v) for k, v in vars(value).items() if not k.startswith("_")]
    out: dict[str, Any] = {}
    for key, item in items:
        out.update(flatten(item, key))
    return out


def _is_model_output(value) -> bool:
    # transformers.utils.ModelOutput is an OrderedDict subclass, but do not import transformers.
    return hasattr(value, "to_tuple") and hasattr(value, "items")


def compare(reference: Any, result: Any, *, fp64_reference: Any = None, tol: float = 1e-3) -> str | None:
    """``None`` when ``result`` matches ``reference``; otherwise a one-line reason."""
    import torch

    ref, res = flatten(reference), flatten(result)
    ref64 = flatten(fp64_reference) if fp64_reference is not None else {}
    if set(ref) != set(res):
        return f"output structure differs: eager has {sorted(ref)[:4]}, compiled has {sorted(res)[:4]}"
    for key in ref:
        a, b = ref[key], res[key]
        if a.shape != b.shape:
            return f"{key}: shape {tuple(b.shape)} != eager {tuple(a.shape)}"
        if a.dtype != b.dtype:
            return f"{key}: dtype {b.dtype} != eager {a.dtype}"
        if not a.is_floating_point() and not a.is_complex():
            if not torch.equal(a, b):
                return f"{key}: integer/bool values differ from eager"
            continue
        a, b = a.detach(), b.detach()
        if torch.allclose(a, b, atol=tol, rtol=tol, equal_nan=True):
            continue
        fp64 = ref64.get(key)
        if fp64 is not None and fp64.shape == a.shape:
            fp64 = fp64.detach().to(torch.float64)
            ref_err = _rmse(fp64, a)
            res_err = _rmse(fp64, b)
            multiplier = 3.0 if a.dtype in (torch.float16, torch.bfloat16) else 2.0
            if a.numel() < 1000 or tol >= 2e-2:
                multiplier = 3.0
            if res_err <= multiplier * ref_err + tol / 10.0:
                continue
            return (f"{key}: RMSE vs float64 reference {res_err:.3g} > {multiplier:g} x eager's "
                    f"{ref_err:.3g} + {tol / 10:.1g}")
        diff = (a.double() - b.double()).abs().max().item()
        return f"{key}: max abs difference {diff:.3g} exceeds tolerance {tol:g}"
    return None


def _rmse(ref, res) -> float:
    return math.sqrt(((ref - res.to(ref.dtype)) ** 2).mean().item()) if ref.numel() else 0.0


def to_float64(value: Any) -> Any:
    """A float64 copy of every floating tensor in a nested structure (inputs or modules)."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().double() if value.is_floating_point() else value
    if isinstance(value, torch.nn.Module):
        import copy

        return copy.deepcopy(value).double()
    if isinstance(value, dict):
        return {k: to_float64(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_float64(v) for v in value)
    return value
