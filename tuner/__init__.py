"""compile-tune: measure which torch.compile settings make a model fastest, against eager.

Example:
    >>> import tuner
    >>> model = tuner.apply_config(model, "results/mlp/best_config.yaml")  # doctest: +SKIP
"""
from __future__ import annotations

from ._version import __version__
from .config import CompileConfig, TunedConfig, load_tuned_config
from .errors import ConfigError, SpaceError, StudyError, TunerError, WorkloadError
from .runtime.apply import apply_config, load_config, optimizer_step
from .targets import find_block_classes


def check_threads(*args, **kwargs):
    """Call a config from several threads at once; see :func:`tuner.threads.check_threads`."""
    from .threads import check_threads as _check_threads

    return _check_threads(*args, **kwargs)


def tune(*args, **kwargs):
    """Run a study; see :class:`tuner.pipeline.TuneOptions` for the arguments.

    Nothing is printed: progress lines are INFO records of the ``tuner`` loggers.

    Example:
        >>> logging.basicConfig(level=logging.INFO)  # doctest: +SKIP
        >>> tuner.tune("model.py", space="quick", trials=4)  # doctest: +SKIP
    """
    # The pipeline module is not named tune.py: importing a submodule binds its name on the
    # package, which would replace this function.
    from .pipeline import TuneOptions
    from .pipeline import tune as _tune

    return _tune(TuneOptions(*args, **kwargs))


__all__ = [
    "CompileConfig", "TunedConfig", "apply_config", "find_block_classes", "load_config", "load_tuned_config",
    "tune", "check_threads", "optimizer_step", "TunerError", "WorkloadError", "SpaceError", "ConfigError", "StudyError", "__version__",
]
