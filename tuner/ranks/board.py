"""The tuner's board, for trials whose ranks span several machines (``--nnodes N --rdzv-endpoint
HOST:PORT``).

The tuner's machine runs the study and hosts a key-value store (torch's ``TCPStore``) at
HOST:PORT+1. Every other machine runs ``compile-tune node --rdzv-endpoint HOST:PORT``
(tuner/ranks/node.py): it joins the board and, for each trial posted there, starts its share of the
ranks with the same launcher and settings. The ranks of all machines meet at torch's c10d
rendezvous on HOST:PORT under the trial's own id, as ``torchrun`` is started under Slurm or
Kubernetes; ranks on other machines post their results on the board (the tuner cannot read
another machine's files), and the tuner stops a trial there.

Keys: ``nodes`` (a counter: machines joined), ``current`` (the trial in flight: its id and spec),
``<trial>/rank<N>`` (a rank's result, as its file would hold it), ``<trial>/node<K>`` (machine K's
launcher ended: its exit code and log's tail), ``<trial>/stop``, ``done`` (the run ended) and
``left`` (a counter: machines that saw it).
"""
from __future__ import annotations

import datetime
import json
import time
from collections.abc import Callable
from typing import Any

from ..core.errors import TunerError
from ..core.spec import board_key

#: The board listens one port above the rendezvous.
BOARD_OFFSET = 1


def parse_endpoint(endpoint: str) -> tuple[str, int]:
    """``HOST:PORT`` as given to ``--rdzv-endpoint``, or a one-line error saying what is wrong."""
    host, _, port = (endpoint or "").rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65535:
        raise TunerError(f"--rdzv-endpoint must be HOST:PORT (the tuner's machine, a free port below 65535), "
                         f"got {endpoint!r}", "e.g. --rdzv-endpoint node0.cluster:29400")
    return host, int(port)


def board_address(endpoint: str) -> str:
    """``HOST:PORT`` of the board for the rendezvous at ``endpoint``."""
    host, port = parse_endpoint(endpoint)
    return f"{host}:{port + BOARD_OFFSET}"


def connect(address: str, is_master: bool, timeout_s: float):
    """A ``TCPStore`` at ``address``: hosted here (``is_master``) or reached as a client, which
    waits up to ``timeout_s`` for the host."""
    from torch.distributed import TCPStore

    host, _, port = address.rpartition(":")
    return TCPStore(host, int(port), is_master=is_master, wait_for_workers=False,
                    timeout=datetime.timedelta(seconds=timeout_s))


class Board:
    """The tuner's side: the trial in flight, what other machines' ranks posted, and their ends."""

    def __init__(self, endpoint: str, nnodes: int) -> None:
        self.endpoint, self.nnodes = endpoint, nnodes
        self.address = board_address(endpoint)
        try:
            self.store = connect(self.address, is_master=True, timeout_s=60)
        except Exception as e:  # noqa: BLE001 - torch raises RuntimeError or DistNetworkError
            raise TunerError(f"--rdzv-endpoint {endpoint}: cannot host the tuner's board at {self.address}: "
                             f"{str(e).splitlines()[0][:200]}",
                             "give this machine's name and a port whose next port is free too") from None

    def joined(self) -> int:
        """Machines other than this one that joined."""
        return int(self.store.add("nodes", 0))

    def wait_for_nodes(self, timeout_s: float, log: Callable[[str], None]) -> None:
        """Wait until every other machine runs ``compile-tune node``, or say which are missing."""
        others, deadline, said = self.nnodes - 1, time.monotonic() + timeout_s, False
        while self.joined() < others:
            if time.monotonic() > deadline:
                raise TunerError(f"--nnodes {self.nnodes}: {self.joined()} of the {others} other machine(s) joined "
                                 f"the tuner's board at {self.address} in {timeout_s:.0f} s",
                                 f"run `compile-tune node --rdzv-endpoint {self.endpoint}` on each other machine, "
                                 "from the same checkout at the same path")
            if not said:
                log(f"  waiting for {others} other machine(s): run `compile-tune node --rdzv-endpoint "
                    f"{self.endpoint}` on each")
                said = True
            time.sleep(0.5)

    def post(self, trial: str, spec: dict[str, Any]) -> None:
        self.store.set("current", json.dumps({"id": trial, "spec": spec}))

    def posted(self, trial: str) -> Callable[[int], dict | None]:
        """What rank N of ``trial`` posted, or None (tuner/ranks/group.py's ``read_ranks``)."""

        def read(rank: int) -> dict | None:
            key = board_key(trial, rank)
            return json.loads(self.store.get(key)) if self.store.check([key]) else None

        return read

    def wait_ended(self, trial: str, timeout_s: float) -> str:
        """Wait up to ``timeout_s`` for every other machine's launcher of ``trial`` to end; their
        logs' tails (where the launcher names the rank that failed first)."""
        keys = [f"{trial}/node{k}" for k in range(1, self.joined() + 1)]
        if not keys:
            return ""
        deadline = time.monotonic() + timeout_s
        while not self.store.check(keys) and time.monotonic() < deadline:
            time.sleep(0.2)
        ended = [json.loads(self.store.get(k)) for k in keys if self.store.check([k])]
        return "\n".join(e.get("log", "") for e in ended)

    def stop(self, trial: str) -> None:
        self.store.set(f"{trial}/stop", "1")

    def close(self, wait_s: float = 10.0) -> None:
        """The run ended: every machine's ``compile-tune node`` exits. The store lives until each has
        read so (or ``wait_s``), since it dies with this object."""
        self.store.set("done", "1")
        deadline = time.monotonic() + wait_s
        while int(self.store.add("left", 0)) < self.joined() and time.monotonic() < deadline:
            time.sleep(0.1)


_boards: dict[str, Board] = {}


def board(endpoint: str, nnodes: int) -> Board:
    """This process's board for ``endpoint``, hosted on first use and kept for the run."""
    if endpoint not in _boards:
        _boards[endpoint] = Board(endpoint, nnodes)
    return _boards[endpoint]


def close_boards() -> None:
    while _boards:
        _boards.popitem()[1].close()
