"""``compile-tune node --rdzv-endpoint HOST:PORT``: a machine that lends its ranks to the tuner's
trials (tuner/ranks/board.py).

It joins the tuner's board, then for each trial posted there starts its share of the ranks:
the same elastic launcher a trial on one machine runs (tuner/ranks/group.py), each rank at the
trial's thread count, with an inductor cache of this machine's own, meeting the other machines'
ranks at the c10d rendezvous on HOST:PORT. Its ranks post their results on the board; a trial the
tuner stops there is stopped here. It exits when the tuner's run ends or its board goes away.
The workload file must be at the same path here as on the tuner's machine (the same checkout, or
a shared file system).
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ..core.errors import TunerError
from ..core.spec import BOARD_ENV, TRIAL_ENV, TrialSpec
from ..isolation.isolated import kill_group, log_tail, trial_env
from .board import board_address, connect
from .group import hang_lines, start


def follow(endpoint: str, work_dir: Path, wait_s: float = 600.0, log: Callable[[str], None] = print) -> int:
    """Lend this machine's ranks to the tuner at ``endpoint`` until its run ends; the exit code."""
    address = board_address(endpoint)
    try:
        store = connect(address, is_master=False, timeout_s=wait_s)
    except Exception as e:  # noqa: BLE001 - torch raises RuntimeError or DistNetworkError
        raise TunerError(f"no tuner's board at {address} after {wait_s:.0f} s: {str(e).splitlines()[0][:200]}",
                         f"start `compile-tune MODEL.py --nnodes N --rdzv-endpoint {endpoint} ...` on the tuner's "
                         "machine first (or give --wait more seconds)") from None
    node = int(store.add("nodes", 1))
    log(f"compile-tune node {node} ({socket.gethostname()}): joined the tuner's board at {address}")
    work_dir.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    try:
        while not store.check(["done"]):
            job = json.loads(store.get("current")) if store.check(["current"]) else None
            if job is None or job["id"] in seen or store.check([f"{job['id']}/stop"]):
                time.sleep(0.2)
                continue
            seen.add(job["id"])
            _run(store, job, node, endpoint, work_dir, log)
    except Exception as e:  # noqa: BLE001 - the tuner's process (and its store) went away
        log(f"compile-tune node {node}: the tuner's board at {address} went away ({str(e).splitlines()[0][:120]})")
        return 1
    store.add("left", 1)  # the tuner keeps its board until every machine has seen the end
    log(f"compile-tune node {node}: the tuner's run ended")
    return 0


def _run(store, job: dict, node: int, endpoint: str, work_dir: Path, log: Callable[[str], None]) -> None:
    """One trial's ranks on this machine; when they end, say so on the board."""
    trial, spec = job["id"], TrialSpec(**job["spec"])
    ended = f"{trial}/node{node}"
    if not Path(spec.workload).exists():
        store.set(ended, json.dumps({"returncode": None, "log": f"{socket.gethostname()}: no file {spec.workload}: "
                                     "the workload must be at the same path on every machine"}))
        log(f"  {trial}: no file {spec.workload} here; the tuner's trial will fail")
        return
    spec_path, out = work_dir / f"{trial}.json", work_dir / f"{trial}.result.json"
    log_path = work_dir / f"{trial}.log"
    spec_path.write_text(json.dumps(job["spec"]))
    cache = Path(tempfile.mkdtemp(prefix="inductor-cache-", dir=work_dir))
    env = trial_env(spec.threads, cache, {BOARD_ENV: board_address(endpoint), TRIAL_ENV: trial})
    log(f"  {trial}: {spec.nproc} rank(s) of {spec.world}, {spec.threads} thread(s) each")
    with open(log_path, "wb") as log_file:
        proc = start(spec.nproc, [str(spec_path), str(out)], env, log_file, os.getcwd(),
                     nodes=[str(spec.nnodes), endpoint, trial, "0"])
    try:
        while proc.poll() is None and not store.check([f"{trial}/stop"]):
            time.sleep(0.2)
    finally:
        kill_group(proc)
        log_text = hang_lines(log_path) + log_tail(log_path, 20000)  # the watchdog's lines from anywhere in it
        store.set(ended, json.dumps({"returncode": proc.returncode, "log": log_text}))
        for path in work_dir.glob(f"{trial}*"):
            path.unlink(missing_ok=True)
        shutil.rmtree(cache, ignore_errors=True)
    log(f"  {trial}: ended (launcher exit code {proc.returncode})")
