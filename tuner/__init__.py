"""compile-tune: measure which torch.compile settings make a model fastest, against eager.

Example:
    >>> import tuner
    >>> model = tuner.apply_config(model, "results/mlp/best_config.yaml")  # doctest: +SKIP
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ._version import __version__
from .core.config import CompileConfig, TunedConfig
from .core.errors import ConfigError, SpaceError, StudyError, TunerError, WorkloadError
from .core.targets import find_block_classes
from .export.best_config import load_tuned_config
from .pt2.load import load_package
from .run.options import TuneOptions, TuneResult
from .runtime.apply import apply_config, load_config, optimizer_step


def check_threads(*args, **kwargs):
    """Call a config from several threads at once; see :func:`tuner.run.thread_check.check_threads`."""
    from .run.thread_check import check_threads as _check_threads

    return _check_threads(*args, **kwargs)


def tune(options: TuneOptions | str, /, log: Callable[[str], None] | None = None, **fields: Any) -> TuneResult:
    """Run (or resume) a study and write ``best_config.yaml``, ``trials.csv`` and the reports.

    ``options`` is a :class:`TuneOptions`, or the workload file's path with any of its fields as
    keyword arguments. Progress lines go to ``log``; by default they are INFO records of the
    ``tuner.run.pipeline`` logger, and nothing is printed.

    Example:
        >>> logging.basicConfig(level=logging.INFO)  # doctest: +SKIP
        >>> result = tuner.tune("model.py", space="quick", trials=4)  # doctest: +SKIP
        >>> result = tuner.tune(tuner.TuneOptions("model.py", budget="10m"))  # doctest: +SKIP
        >>> result.tuned.verdict, result.out_dir  # doctest: +SKIP
    """
    # The pipeline module is not named tune.py: importing a submodule binds its name on the
    # package, which would replace this function.
    from .run.pipeline import tune as _tune

    if isinstance(options, TuneOptions):
        if fields:
            options = dataclasses.replace(options, **fields)
    else:
        options = TuneOptions(str(options), **fields)
    return _tune(options, log)


__all__ = [
    "CompileConfig", "TunedConfig", "apply_config", "find_block_classes", "load_config", "load_tuned_config",
    "tune", "TuneOptions", "TuneResult", "check_threads", "load_package", "optimizer_step", "TunerError",
    "WorkloadError", "SpaceError", "ConfigError", "StudyError", "__version__",
]
