"""Compare compiled results with eager, in the style of PyTorch's benchmark harness.

``torch._dynamo.utils.same``: pass if ``allclose(atol=rtol=tol)``; otherwise, given a float64
reference, pass if the compiled result's RMSE against it is within a small multiple of eager's
own RMSE against it (compiled code may legitimately round differently, but not worse).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..core.precision import TOLERANCE_DTYPE
from .tree import map_leaves, named_leaves

#: Defaults close to the upstream harness: 1e-3 for inference (HF/TIMM), 1e-2 for training.
TOLERANCE = {"infer": 1e-3, "train": 1e-2}
#: Floors for low-precision results. bfloat16 keeps 8 significant bits (a relative step of
#: 7.8e-3) and float16 11 bits: eager rounds every intermediate result to that precision, while a
#: fused compiled kernel keeps intermediates in float32, so correct results differ by a few units
#: in the last place. Where allclose still fails, the harness's cosine-similarity test decides.
DTYPE_TOLERANCE = {"float16": 1e-2, "bfloat16": 4e-2}
#: A config's ``precision`` (tuner/core/precision.py) is checked against float32 eager at the tolerance of
#: the dtype it computes in: bf16 at bfloat16's 4e-2 (about 5 units of its 7.8e-3 relative step: the
#: inputs of every matmul are rounded to 8 significant bits, and the errors of a few layers add up),
#: tf32 at float16's 1e-2 (TF32 keeps float16's 10 mantissa bits). Beyond ``allclose`` the result must
#: pass the same cosine and norm test as a low-precision result: float32 eager's own error against
#: float64 is no yardstick for a result rounded to bfloat16 on purpose.
PRECISION_TOLERANCE = {p: DTYPE_TOLERANCE[dtype] for p, dtype in TOLERANCE_DTYPE.items()}
#: The harness's cosine flag: correct results point the same way (>= 0.99) ...
COSINE_MIN = 0.99
#: ... and have the same size (norm ratio within this many tolerances of 1): cosine alone would
#: pass a result scaled by 2.
NORM_TOLERANCES = 5


def flatten(value: Any, prefix: str = "out") -> dict[str, Any]:
    """Tensors in nested tuples/lists/dicts/dataclasses/HF ``ModelOutput``s, by path
    (``out.logits``, ``out[0]``; see ``tree``)."""
    import torch

    return {name: leaf for name, leaf in named_leaves(value, prefix) if isinstance(leaf, torch.Tensor)}


def compare(reference: Any, result: Any, *, fp64_reference: Any = None, tol: float = 1e-3,
            precision: str | None = None) -> str | None:
    """``None`` when ``result`` matches ``reference``; otherwise a one-line reason.

    ``fp64_reference`` may be a function that computes it: it is called only when some tensor
    fails ``allclose`` (a float64 copy of the model costs twice its weights). ``precision``: the
    result was computed at a config's lower precision on purpose (``bf16``, ``tf32``): its floating
    tensors are compared in eager's dtype, at that precision's tolerance (``PRECISION_TOLERANCE``).

    Example:
        >>> import torch
        >>> x = torch.linspace(-3, 3, 64)
        >>> compare(x, x.bfloat16(), precision="bf16") is None
        True
    """

    ref, res = flatten(reference), flatten(result)
    if precision:
        tol = max(tol, PRECISION_TOLERANCE[precision])
        res = {k: (b.to(ref[k].dtype) if k in ref and b.is_floating_point() and ref[k].is_floating_point() else b)
               for k, b in res.items()}
    if set(ref) != set(res):
        return f"output structure differs: eager has {sorted(ref)[:4]}, compiled has {sorted(res)[:4]}"
    ref64: list[dict[str, Any]] = []

    def fp64_of(key: str) -> Any:  # the float64 reference is computed once, on the first tensor that needs it
        if not ref64:
            given = fp64_reference() if callable(fp64_reference) else fp64_reference
            ref64.append(flatten(given) if given is not None else {})
        return ref64[0].get(key)

    for key in ref:
        problem = _tensor_problem(key, ref[key], res[key], tol, precision, fp64_of)
        if problem:
            return problem
    return None


def _tensor_problem(key: str, a: Any, b: Any, tol: float, precision: str | None,
                    fp64_of: Callable[[str], Any]) -> str | None:
    """:func:`compare` for one tensor of the output."""
    import torch

    if a.shape != b.shape:
        return f"{key}: shape {tuple(b.shape)} != eager {tuple(a.shape)}"
    if a.dtype != b.dtype:
        return f"{key}: dtype {b.dtype} != eager {a.dtype}"
    if not a.is_floating_point() and not a.is_complex():
        return None if torch.equal(a, b) else f"{key}: integer/bool values differ from eager"
    a, b = a.detach(), b.detach()
    dtype = str(a.dtype).removeprefix("torch.")
    low_precision = dtype in DTYPE_TOLERANCE
    t = max(tol, DTYPE_TOLERANCE.get(dtype, 0.0))
    if torch.allclose(a, b, atol=t, rtol=t, equal_nan=True):
        return None
    if precision:
        finite = torch.isfinite(a)
        if not torch.equal(finite, torch.isfinite(b)):  # overflow: NaN would slip through the cosine test
            return f"{key} (precision {precision}): non-finite values where eager has finite ones, or the reverse"
        problem = _cosine_problem(a[finite], b[finite], t)
        return None if problem is None else f"{key} (precision {precision}, tolerance {t:g}): {problem}"
    fp64 = fp64_of(key)
    if fp64 is not None and fp64.shape == a.shape:
        fp64 = fp64.detach().to(torch.float64)
        ref_err, res_err = _rmse(fp64, a), _rmse(fp64, b)
        multiplier = 3.0 if low_precision or a.numel() < 1000 or t >= 2e-2 else 2.0
        if res_err <= multiplier * ref_err + t / 10.0:
            return None
        return f"{key}: RMSE vs float64 reference {res_err:.3g} > {multiplier:g} x eager's {ref_err:.3g} + {t / 10:.1g}"
    if low_precision:
        problem = _cosine_problem(a, b, t)
        return None if problem is None else f"{key} ({dtype}): {problem}"
    diff = (a.double() - b.double()).abs().max().item()
    return f"{key}: max abs difference {diff:.3g} exceeds tolerance {t:g}"


def _cosine_problem(a, b, tol: float) -> str | None:
    """The harness's test for low-precision results: same direction and same size."""
    a64, b64 = a.double().flatten(), b.double().flatten()
    na, nb = a64.norm().item(), b64.norm().item()
    if na == 0.0 or nb == 0.0:
        return None if na == nb else f"one result is all zeros (norms {na:.3g} vs {nb:.3g})"
    cosine = (a64 @ b64).item() / (na * nb)
    if cosine < COSINE_MIN:
        return f"cosine similarity with eager {cosine:.4f} < {COSINE_MIN}"
    if abs(nb / na - 1.0) > NORM_TOLERANCES * tol:
        return f"norm {nb:.4g} vs eager's {na:.4g}: off by more than {NORM_TOLERANCES * tol:.2g}"
    return None


def _rmse(ref, res) -> float:
    return math.sqrt(((ref - res.to(ref.dtype)) ** 2).mean().item()) if ref.numel() else 0.0


def to_float64(value: Any) -> Any:
    """A float64 copy of every floating tensor in a nested structure (inputs or modules)."""
    import copy

    import torch

    def convert(leaf: Any) -> Any:
        if isinstance(leaf, torch.Tensor):
            return leaf.detach().double() if leaf.is_floating_point() else leaf
        if isinstance(leaf, torch.nn.Module):
            return copy.deepcopy(leaf).double()
        return leaf

    return map_leaves(convert, value)


def digest(tensor: Any) -> str:
    """SHA-256 of a tensor's bytes: equal digests mean equal bits, which sums of the values do not
    (two ranks' parameters can differ and still sum alike). For comparing ranks that must hold
    the same model (DDP), without sending the model.

    Example:
        >>> import torch
        >>> digest(torch.zeros(2)) == digest(torch.zeros(2)) != digest(torch.tensor([0.0, -0.0]))
        True
    """
    import hashlib

    import torch

    flat = tensor.detach().reshape(-1).contiguous().cpu()
    return hashlib.sha256(flat.view(torch.uint8).numpy().tobytes()).hexdigest()
