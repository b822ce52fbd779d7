"""The processes of a training trial on many ranks: ``python -m tuner.measure.rank_main``.

``agent NPROC SPEC OUT`` is the process the tuner starts (tuner/rank_group.py): torch's own
elastic launcher (``torch.distributed.run``, what ``torchrun`` runs) on loopback, which starts
NPROC ranks, restarts none, and stops every rank once one fails. ``rank SPEC OUT`` is each rank:
the one trial of tuner/measure/trial.py in its process group (tuner/measure/rank.py), its figures
in ``OUT``'s rank file (``rank_path``).
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

from ..core.spec import TrialSpec, rank_path
from ..runtime.parallel_wrap import local_rank
from ..system.launch import die_with_parent, python_command
from .__main__ import measure
from .rank import hang_failure, join_group, rank
from .trial import Recorder

#: The launcher's process id, for its ranks.
AGENT_ENV = "COMPILE_TUNE_RANK_AGENT_PID"


def launcher_args(nproc: int, spec_path: str, out_path: str) -> list[str]:
    """The elastic launcher's arguments: ``--standalone`` rendezvous on loopback at a free port (so
    trials in flight never share one), no restarts, each rank started path-safe
    (tuner/system/launch.py) as ``tuner.measure.rank_main rank SPEC OUT``."""
    return ["--standalone", f"--nproc-per-node={nproc}", "--max-restarts=0", "--no-python",
            *python_command("tuner.measure.rank_main", "rank", spec_path, out_path)]


def agent(argv: list[str]) -> None:
    """The launcher, dying with the tuner; its ranks die with it (see :func:`_rank_main`)."""
    die_with_parent()
    os.environ[AGENT_ENV] = str(os.getpid())  # the ranks inherit it: see _rank_main
    from torch.distributed.run import main as run

    run(launcher_args(int(argv[0]), argv[1], argv[2]))


def _rank_main(argv: list[str]) -> None:
    # The launcher is this rank's parent: the rank dies with it, and it with the tuner (a rank
    # whose launcher died before this line kills itself here).
    die_with_parent(os.environ.get(AGENT_ENV) or os.getppid())
    spec = TrialSpec(**json.loads(Path(argv[0]).read_text()))
    if spec.device.startswith("cuda"):
        spec = dataclasses.replace(spec, device=f"cuda:{local_rank()}")
    rec = Recorder(rank_path(argv[1], rank()))
    rec.update(rank=rank())
    if spec.rank_cache == "own":  # read by inductor once it compiles, after this
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(os.environ["TORCHINDUCTOR_CACHE_DIR"], f"rank{rank()}")
    ok = measure(spec, rec, before=lambda: join_group(spec))
    if not ok:
        hang = hang_failure(rec.data.get("failure", {}).get("raw", ""), spec, rec.data.get("stage", "startup"))
        if hang:
            rec.update(failure=hang.to_dict())
    sys.stdout.flush()
    sys.stderr.flush()
    # No teardown: the process group's destructor would wait on ranks that may be gone. A failed
    # rank exits non-zero, so the launcher stops the others.
    os._exit(0 if ok and rec.data.get("status") == "ok" else 1)


if __name__ == "__main__":
    if sys.argv[1] == "agent":
        agent(sys.argv[2:])
    else:
        _rank_main(sys.argv[2:])
