"""The entry point of one ``--workers`` process (started by tuner/run/workers.py through
tuner/system/launch.py): the run's options arrive as JSON on stdin, so the storage URL (which may hold
a password) never shows on a command line; errors become exit codes like the CLI's.
"""
from __future__ import annotations

import json
import sys
import traceback
import warnings

from .core.errors import TunerError
from .run.pipeline import TuneOptions, tune
from .system.launch import die_with_parent
from .system.storage import scrub


def main() -> int:
    """A worker: ``python -m tuner._worker`` with the run's options as JSON on stdin."""
    die_with_parent()
    warnings.filterwarnings("ignore", module="optuna")

    opts = TuneOptions(**json.loads(sys.stdin.read()))
    try:
        result = tune(opts, log=print)  # lines on stdout: the parent relays them with a [wN] prefix
    except TunerError as exc:
        print(f"error: {scrub(exc.message, opts.storage)}")
        if exc.hint:
            print(f"hint: {exc.hint}")
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception:  # noqa: BLE001 - shown like Python would, without the storage password
        print(scrub(traceback.format_exc(), opts.storage))
        return 1
    return 130 if result.run.interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
