"""A config's ``precision`` in the user's process (tuner/core/precision.py says what each one is).

``bf16``: the model's own ``forward`` (the root module's, whatever the target) runs under
``torch.autocast(device_type, dtype=torch.bfloat16)``, entered around every call. Around the root
and not around each compiled region, so that with ``target: blocks`` the code between the blocks
runs in bfloat16 too: the same numerics whether the whole model or its blocks are compiled. Dynamo
traces the compiled regions inside that autocast (it guards on the autocast state), so their
graphs hold the bfloat16 casts. The device type is read from the model's first parameter (or
first tensor input) at each call, so a model moved after ``apply_config`` follows. The backward
pass needs nothing: autocast records the dtypes in the forward.

``tf32``: ``torch.set_float32_matmul_precision("high")`` for the whole process, because matmuls in
the backward pass and in the optimizer run outside any forward wrapper. It changes every float32
matmul of the process (other models too), so applying it warns, naming how to undo it.
"""
from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

from ..core.precision import CHANGES_NUMERICS, MATMUL_PRECISION

#: Attributes of the forward wrapper: which precision it applies, and what it wraps (so a later
#: apply_config can undo it, see tuner/runtime/apply.py ``_uncompiled``).
MARK = "_compile_tune_precision"
INNER = "_compile_tune_inner"


def autocast_forward(forward: Callable, module: Any, precision: str) -> Callable:
    """``forward`` behind a function that runs it under bfloat16 autocast (``precision == "bf16"``);
    ``forward`` itself for a precision that is not an autocast (tf32)."""
    if precision != "bf16":
        return forward
    import torch

    @functools.wraps(forward)
    def forward_in_bf16(*args, **kwargs):
        with torch.autocast(_device_type(module, args, kwargs), dtype=torch.bfloat16):
            return forward(*args, **kwargs)

    setattr(forward_in_bf16, MARK, precision)
    setattr(forward_in_bf16, INNER, forward)
    return forward_in_bf16


def set_matmul_precision(precision: str | None, *, warn: bool = True) -> str | None:
    """Set the process's float32 matmul precision a config asks for (tf32: ``"high"``); returns
    the value before, or None when the config sets none."""
    wanted = MATMUL_PRECISION.get(precision or "")
    if wanted is None:
        return None
    import torch

    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(wanted)
    if warn:
        where = "" if torch.cuda.is_available() else " (no CUDA here: it changes nothing on this machine)"
        warnings.warn(
            f"apply_config set torch.set_float32_matmul_precision({wanted!r}) for the whole process "
            f"(precision {precision}, {CHANGES_NUMERICS}): every float32 matmul in this process now uses TF32, "
            f"other models' too{where}; torch.set_float32_matmul_precision({before!r}) undoes it",
            stacklevel=3,
        )
    return before


def _device_type(module: Any, args: tuple, kwargs: dict) -> str:
    import torch

    for tensor in module.parameters():
        return tensor.device.type
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            return value.device.type
    return "cpu"
