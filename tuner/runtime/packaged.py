"""Serving the packaged model: ``tuner.load_package`` loads the ``.pt2`` that ``compile-tune
package`` wrote (tuner/package.py) with AOTInductor's loader: no Dynamo, no compile at start-up.
"""
from __future__ import annotations

import warnings
from pathlib import Path

from ..core.errors import ConfigError
from ..export.best_config import load_tuned_config
from .apply import _pin_heap_as_measured, _warn_on_thread_mismatch

#: The package's file name, beside best_config.yaml (tuner/package.py writes it).
PACKAGE_NAME = "model.pt2"


def load_package(path: str | Path):
    """The packaged model of a run: a callable taking the workload's inputs as the model does.

    ``path`` is the ``.pt2`` or the run's output folder. Where ``best_config.yaml`` sits beside it,
    the process is set up as the package was measured (glibc's heap, the thread count is checked),
    and a package its check did not recommend warns with the reason.

    Example:
        >>> model = tuner.load_package("results/bert_serve")  # doctest: +SKIP
        >>> logits = model(**inputs).logits  # doctest: +SKIP
    """
    import torch._inductor

    path = Path(path)
    if path.is_dir():
        path = path / PACKAGE_NAME
    if not path.exists():
        raise ConfigError(f"{path}: no such package", "write it with `compile-tune package RESULTS`")
    config = path.parent / "best_config.yaml"
    if config.exists():
        tuned = load_tuned_config(config)
        _warn_on_thread_mismatch(tuned.tuned_on, config)
        _pin_heap_as_measured(tuned.tuned_on)
        record = tuned.measured.get("package") or {}
        if record and not record.get("recommended", True):
            warnings.warn(f"{path}: not recommended by its check: {record.get('why')}", stacklevel=2)
    # Loading asks inductor which vector ISA this CPU has, and by default proves each candidate by
    # compiling a test kernel into the inductor cache: 8.5 s here in a fresh cache dir (a new
    # container, a fresh machine) against 2.0 s when the CPU's own flags are trusted. The package's
    # kernels are compiled already; the probe only decides nothing it runs. So, unless the user set
    # it, the flags are trusted for the duration of the load.
    from torch._inductor import config as inductor_config

    trusted = inductor_config.cpp.vec_isa_ok
    if trusted is None:
        inductor_config.cpp.vec_isa_ok = True
    try:
        return torch._inductor.aoti_load_package(str(path))
    finally:
        inductor_config.cpp.vec_isa_ok = trusted
