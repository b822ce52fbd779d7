"""Serving the packaged model: ``tuner.load_package`` loads the ``.pt2`` that ``compile-tune
package`` wrote (tuner/pt2/command.py) with AOTInductor's loader: no Dynamo, no compile at start-up.
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path

from ..core.errors import ConfigError
from ..core.precision import MATMUL_PRECISION
from ..export.best_config import load_tuned_config
from ..runtime.apply import _pin_heap_as_measured, _warn_on_thread_mismatch
from .record import check_inputs, read_metadata, refuse_mismatch

#: The package's file name, beside best_config.yaml (tuner/pt2/command.py writes it).
PACKAGE_NAME = "model.pt2"
#: AOTInductor's switch for the input checks its generated code carries (off unless set).
AOTI_CHECKS = "AOTI_RUNTIME_CHECK_INPUTS"
#: The prefix of the constants AOTInductor folds from the weights (runtime constant folding).
FOLDED = "_FOLDED_CONST_"


def load_package(path: str | Path, check_inputs: bool = True) -> PackagedModel:
    """The packaged model of a run: a callable taking the workload's inputs as the model does.

    ``path`` is the ``.pt2`` or the run's output folder. A package built for another torch
    release or device, for CPU instructions this CPU lacks (its ISA level's, ``metadata["cpu"]``)
    or for another GPU's compute capability is refused in one line (:class:`ConfigError`) before
    its code loads. With ``check_inputs`` (the default) every call is checked against the shapes
    the package was built for: a wrong dtype, device or a size outside its bounds raises
    :class:`PackageInputError` naming the input, and AOTInductor's own input checks are on
    (``AOTI_RUNTIME_CHECK_INPUTS``: read once per process, at a package's first call). Without the
    checks a wrong shape can return garbage or end the process. Where ``best_config.yaml`` sits
    beside it, the process is set up as the package was measured (glibc's heap; the thread count
    is checked), and a package its check did not recommend warns with the reason.

    Example:
        >>> model = tuner.load_package("results/bert_serve")  # doctest: +SKIP
        >>> logits = model(**inputs).last_hidden_state  # doctest: +SKIP
    """
    import torch._inductor

    path = Path(path)
    if path.is_dir():
        path = path / PACKAGE_NAME
    if not path.exists():
        raise ConfigError(f"{path}: no such package", "write it with `compile-tune package RESULTS`")
    meta = read_metadata(path)
    if meta is None:
        warnings.warn(f"{path}: built without compile-tune's record (an older package): its torch, device and "
                      "input shapes are not checked; package it again to have them checked", stacklevel=2)
    else:
        refuse_mismatch(path, meta)
    config = path.parent / "best_config.yaml"
    if config.exists():
        tuned = load_tuned_config(config)
        _warn_on_thread_mismatch(tuned.tuned_on, config)
        _pin_heap_as_measured(tuned.tuned_on)
        record = tuned.measured.get("package") or {}
        if record and not record.get("recommended", True):
            warnings.warn(f"{path}: not recommended by its check: {record.get('why')}", stacklevel=2)
    if check_inputs:
        os.environ[AOTI_CHECKS] = "1"
    elif os.environ.get(AOTI_CHECKS, "0") not in ("", "0"):
        warnings.warn(f"{AOTI_CHECKS} is set in this process: AOTInductor checks this package's inputs anyway",
                      stacklevel=2)
    wanted = (meta or {}).get("matmul_precision") or MATMUL_PRECISION.get((meta or {}).get("precision") or "")
    if wanted:  # tf32: a process-wide setting, as it was compiled and measured
        torch.set_float32_matmul_precision(wanted)
    compiled = _load_trusting_cpu_flags(path)
    return PackagedModel(compiled, meta or {}, path, check_inputs)


def _load_trusting_cpu_flags(path: Path):
    """AOTInductor's loaded package. Loading asks inductor which vector ISA this CPU has, and by
    default proves each candidate by compiling a test kernel into the inductor cache: 8.5 s here in
    a fresh cache dir (a new container, a fresh machine) against 2.0 s when the CPU's own flags are
    trusted. The package's kernels are compiled already (and its record's flags were checked); the
    probe decides nothing it runs. So, unless the user set it, the flags are trusted for the load."""
    import torch._inductor
    from torch._inductor import config as inductor_config

    trusted = inductor_config.cpp.vec_isa_ok
    if trusted is None:
        inductor_config.cpp.vec_isa_ok = True
    try:
        return torch._inductor.aoti_load_package(str(path))
    finally:
        inductor_config.cpp.vec_isa_ok = trusted


class PackagedModel:
    """A loaded ``.pt2``: call it as the model (``model(*args, **kwargs)``); ``metadata`` is the
    package's own record (torch, device, inputs and their bounds, ``input_order`` for C++ callers),
    ``load_weights`` swaps its weights for a state dict's of the same model."""

    def __init__(self, compiled, meta: dict, path: Path, check_inputs: bool = True) -> None:
        self._compiled, self.metadata, self.path, self.check_inputs = compiled, meta, path, check_inputs

    def __call__(self, *args, **kwargs):
        if self.check_inputs and self.metadata:
            check_inputs(self.metadata, args, kwargs)
        return self._compiled(*args, **kwargs)

    def load_weights(self, state_dict: dict) -> list[str]:
        """Replace the package's weights with ``state_dict``'s (the same model's keys and shapes,
        new values: a fine-tuned checkpoint); returns the keys replaced. What the package folded
        from them (``_FOLDED_CONST_*``) is folded again. A weight the package holds that
        ``state_dict`` lacks raises :class:`ConfigError`, and so does a package whose weights were
        folded into its code at build time (``metadata["fold_at_runtime"]`` false: AOTInductor
        refused runtime constant folding for its config)."""
        if self.metadata.get("fold_at_runtime") is False:
            raise ConfigError(f"{self.path}: its weights were folded into its code at build time (built "
                              f"{self.metadata.get('config_change')}): new values would leave the folded ones stale",
                              "package the new weights: `compile-tune package RESULTS` on a workload that loads them")
        names = [n for n in self._compiled.get_constant_fqns() if not n.startswith(FOLDED)]
        missing = [n for n in names if n not in state_dict]
        if missing:
            raise ConfigError(f"{self.path}: the state dict lacks {len(missing)} of the package's weights "
                              f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''})",
                              "pass the state_dict() of the same model the package was built from")
        self._compiled.load_constants({n: state_dict[n] for n in names}, check_full_update=False)
        return names
