"""The processes of a training trial on many ranks: ``python -m tuner.ranks.main``.

``agent NPROC SPEC OUT [NNODES ENDPOINT RUN_ID HOST]`` is the process the tuner starts
(tuner/ranks/group.py): torch's own elastic launcher (``torch.distributed.run``, what ``torchrun``
runs), which starts NPROC ranks, restarts none, and stops every rank once one fails. Its ranks meet
on loopback, or, across NNODES machines, at torch's c10d rendezvous on ENDPOINT under the trial's
own RUN_ID (HOST: ``1`` where this launcher hosts the rendezvous store, the tuner's machine).
``rank SPEC OUT`` is each rank: the one trial of tuner/measure/trial.py in its process group
(tuner/ranks/rank.py), its figures in ``OUT``'s rank file (``rank_path``), and on a machine
that is not the tuner's also on the tuner's board (tuner/ranks/board.py).
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from ..core.spec import BOARD_ENV, TRIAL_ENV, TrialSpec, board_key, rank_path
from ..measure.__main__ import measure
from ..measure.trial import Recorder
from ..runtime.parallel_wrap import local_rank
from ..system.launch import die_with_parent, python_command
from ..user.diagnose import classify_exception
from .rank import collectives_started, hang_failure, join_group, rank

#: The launcher's process id, for its ranks.
AGENT_ENV = "COMPILE_TUNE_RANK_AGENT_PID"


def launcher_args(nproc: int, spec_path: str, out_path: str, nodes: list[str] | None = None) -> list[str]:
    """The elastic launcher's arguments: no restarts, each rank started path-safe
    (tuner/system/launch.py) as ``tuner.ranks.main rank SPEC OUT``. On one machine a
    ``--standalone`` rendezvous on loopback at a free port (so trials in flight never share one);
    across machines (``nodes``: NNODES, ENDPOINT, RUN_ID, HOST) the c10d rendezvous at ENDPOINT,
    hosted by the tuner's launcher, so that no other machine's trial outlives the store."""
    if nodes:
        nnodes, endpoint, run_id, host = nodes
        meet = [f"--nnodes={nnodes}", "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}", f"--rdzv-id={run_id}",
                f"--rdzv-conf=is_host={'true' if host == '1' else 'false'}"]
    else:
        meet = ["--standalone"]
    return [*meet, f"--nproc-per-node={nproc}", "--max-restarts=0", "--no-python",
            *python_command("tuner.ranks.main", "rank", spec_path, out_path)]


def agent(argv: list[str]) -> None:
    """The launcher, dying with the tuner; its ranks die with it (see :func:`_rank_main`)."""
    die_with_parent()
    os.environ[AGENT_ENV] = str(os.getpid())  # the ranks inherit it: see _rank_main
    from torch.distributed.run import main as run

    run(launcher_args(int(argv[0]), argv[1], argv[2], argv[3:] or None))


class RankRecorder(Recorder):
    """A rank's result, with the wall-clock time (``time.time()``) its failure was recorded
    (``failed_at``): the tuner names the rank that failed first as the cause, not the lowest rank
    that failed (tuner/ranks/group.py). Wall clock, not a monotonic one, so ranks on several
    machines compare."""

    def update(self, **values) -> None:
        if "failure" in values and "failed_at" not in self.data:
            values["failed_at"] = time.time()
        super().update(**values)


class BoardRecorder(RankRecorder):
    """A rank's result, also posted on the tuner's board after every stage: the tuner cannot read
    this machine's files (tuner/ranks/board.py)."""

    def __init__(self, path: Path, board: str, trial: str) -> None:
        import datetime

        from torch.distributed import TCPStore

        super().__init__(path)
        host, _, port = board.rpartition(":")
        self.store = TCPStore(host, int(port), is_master=False, timeout=datetime.timedelta(seconds=60))
        self.key = board_key(trial, rank())

    def flush(self) -> None:
        super().flush()
        self.store.set(self.key, json.dumps(self.data, default=str))


def _rank_main(argv: list[str]) -> None:
    # The launcher is this rank's parent: the rank dies with it, and it with the tuner (a rank
    # whose launcher died before this line kills itself here).
    die_with_parent(os.environ.get(AGENT_ENV) or os.getppid())
    spec = TrialSpec(**json.loads(Path(argv[0]).read_text()))
    if spec.device.startswith("cuda"):
        spec = dataclasses.replace(spec, device=f"cuda:{local_rank()}")
    board = os.environ.get(BOARD_ENV)
    out = rank_path(argv[1], rank())
    rec = BoardRecorder(out, board, os.environ[TRIAL_ENV]) if board else RankRecorder(out)
    rec.update(rank=rank())
    if spec.rank_cache == "own":  # read by inductor once it compiles, after this
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(os.environ["TORCHINDUCTOR_CACHE_DIR"], f"rank{rank()}")
    ok = measure(spec, rec, before=lambda: join_group(spec), classify=lambda exc: _classify(exc, spec, rec))
    sys.stdout.flush()
    sys.stderr.flush()
    # No teardown: the process group's destructor would wait on ranks that may be gone. A failed
    # rank exits non-zero, so the launcher stops the others.
    os._exit(0 if ok and rec.data.get("status") == "ok" else 1)


def _classify(exc: BaseException, spec: TrialSpec, rec: RankRecorder):
    """A rank's failure: a collective that timed out is a hang, with how many collectives this rank
    had started (the tuner names the rank that was behind: tuner/ranks/group.py); anything else as
    in one process."""
    hang = hang_failure(exc, spec, rec.data.get("stage", "startup"))
    if hang is None:
        return classify_exception(exc)
    rec.data["collectives"] = collectives_started()
    return hang


if __name__ == "__main__":
    if sys.argv[1] == "agent":
        agent(sys.argv[2:])
    else:
        _rank_main(sys.argv[2:])
