"""Starting a Python process of ours: a trial, a worker. Nothing the user keeps beside their
model may replace the package inside it, and no such process outlives the tuner.

``python -m tuner.measure`` puts the working directory first on ``sys.path``, so a folder named
``tuner/`` there (a common name for the user's own code) would be imported instead of this
package, in every trial. The child is started instead with a few lines (``-c``) that drop the
working directory from the path and import this exact package from its file location before
running the entry module. ``PYTHONPATH`` and installed packages are left as they are.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
from pathlib import Path

PARENT_ENV = "COMPILE_TUNE_PARENT_PID"
_PR_SET_PDEATHSIG = 1
_PACKAGE_INIT = str(Path(__file__).resolve().parent.parent / "__init__.py")

_BOOT = """\
import importlib.util, os, runpy, sys
sys.path[:] = [p for p in sys.path if p != '']
init, module = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location('tuner', init, submodule_search_locations=[os.path.dirname(init)])
package = importlib.util.module_from_spec(spec)
sys.modules['tuner'] = package
spec.loader.exec_module(package)
sys.argv = [module] + sys.argv[3:]
runpy.run_module(module, run_name='__main__', alter_sys=True)
"""


def python_command(module: str, *args: str) -> list[str]:
    """The command line that runs ``python -m module args...`` with this package, path-safe.

    Example:
        >>> python_command("tuner.measure", "spec.json", "out.json")[-3:]
        ['tuner.measure', 'spec.json', 'out.json']
    """
    return [sys.executable, "-c", _BOOT, _PACKAGE_INIT, module, *args]


def die_with_parent(parent_pid: int | str | None = None) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux; elsewhere a no-op).

    A worker or trial whose parent was killed with SIGKILL would otherwise keep measuring for a
    study nobody watches, and disturb the timings of the run that resumes it.
    """
    parent_pid = parent_pid or os.environ.get(PARENT_ENV)
    if not sys.platform.startswith("linux") or not parent_pid:
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != int(parent_pid):  # the parent died before we asked
        os.kill(os.getpid(), signal.SIGKILL)
