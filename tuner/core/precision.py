"""Lower-precision execution as a config value (``CompileConfig.precision``): the names, what each
does, where it is offered, and the one label every output uses for it: "changes numerics".

``None`` (the default) keeps the model's numerics: the compiled model computes in the dtypes eager
does. The others change them, so the tuner searches them only with ``--allow-precision-change``:

- ``bf16``: the model's whole forward runs under ``torch.autocast(device_type, dtype=torch.bfloat16)``
  (matmuls, convolutions and linear layers in bfloat16, reductions kept in float32); the output of
  a layer that autocast runs in bfloat16 comes back as bfloat16.
- ``tf32``: ``torch.set_float32_matmul_precision("high")``: float32 matmuls on TensorFloat-32 tensor
  cores (10 mantissa bits instead of 23). CUDA compute capability 8.0 (Ampere) or newer only. It is a
  process-wide setting: ``apply_config`` sets it for the whole process and warns that it does.

Nothing here runs a model; torch is imported only to ask the hardware (tuner/runtime/apply_precision.py
applies a precision, tuner/measure/correctness.py holds the tolerances a trial checks it at).
"""
from __future__ import annotations

from typing import Literal

Precision = Literal["bf16", "tf32"]
PRECISIONS: tuple[str, ...] = ("bf16", "tf32")
#: The flag that lets a run search precisions (named in notes and errors).
FLAG = "--allow-precision-change"
#: How every output flags a config with a precision: describe(), reports, best_config.yaml, exports.
CHANGES_NUMERICS = "changes numerics"
#: What each precision does, in words.
MEANING = {
    "bf16": "forward under torch.autocast(dtype=torch.bfloat16)",
    "tf32": 'torch.set_float32_matmul_precision("high"): TF32 matmuls, set for the whole process',
}
#: The float dtype a precision computes in, for its correctness tolerance (TF32 keeps float16's
#: 10 mantissa bits, so it is checked like float16).
TOLERANCE_DTYPE = {"bf16": "bfloat16", "tf32": "float16"}
#: The float32 matmul precision a config sets (``torch.set_float32_matmul_precision``).
MATMUL_PRECISION = {"tf32": "high"}


def label(precision: str | None) -> str:
    """The part of a config label that says so: ``precision=bf16 (changes numerics)``, or ``""``.

    Example:
        >>> label("bf16")
        'precision=bf16 (changes numerics)'
    """
    return f"precision={precision} ({CHANGES_NUMERICS})" if precision else ""


def offered(device: str) -> tuple[list[str], dict[str, str]]:
    """The precisions that can run on ``device``, and a note per precision: why it is left out, or
    why its speed is doubtful. bf16 is offered wherever autocast works (on a CPU without native
    bfloat16 kernels it is emulated and likely slower, which the search measures like any other
    cost); tf32 only on CUDA with compute capability >= 8.0 (elsewhere it changes nothing).

    Example:
        >>> offered("cpu")[0]
        ['bf16']
    """
    notes: dict[str, str] = {}
    kept = ["bf16"]
    if device.startswith("cuda"):
        if not _cuda_bf16(device):
            kept.remove("bf16")
            notes["bf16"] = "this GPU does not support bfloat16"
        major, minor = _capability(device)
        if (major, minor) >= (8, 0):
            kept.append("tf32")
        else:
            notes["tf32"] = f"needs CUDA compute capability >= 8.0 (this GPU: {major}.{minor})"
    else:
        notes["tf32"] = "needs CUDA compute capability >= 8.0 (TF32 tensor cores)"
        native = cpu_bf16()
        if native is False:
            notes["bf16"] = ("this CPU has no native bfloat16 kernels (oneDNN reports none): emulated, likely "
                             "slower than float32; measured anyway")
        elif native is None:
            notes["bf16"] = "cannot tell whether this CPU runs bfloat16 natively; measured anyway"
    return kept, notes


def cpu_bf16() -> bool | None:
    """Whether oneDNN has bfloat16 kernels for this CPU (AVX-512 or AMX on x86, BF16 on Arm);
    None when this torch cannot say."""
    try:
        import torch

        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except Exception:  # an op missing from this build: unknown, not unsupported
        return None


def _cuda_bf16(device: str) -> bool:
    import torch

    try:
        return bool(torch.cuda.is_bf16_supported())
    except Exception:
        return True  # autocast decides at run time; the trial records a failure if it cannot


def _capability(device: str) -> tuple[int, int]:
    import torch

    try:
        return tuple(torch.cuda.get_device_capability(device))  # type: ignore[return-value]
    except Exception:
        return (0, 0)
