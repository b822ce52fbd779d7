"""Trials whose ranks span machines (``--nnodes 2 --rdzv-endpoint HOST:PORT``): the tuner's machine
hosts the board, a second ``compile-tune node`` process lends its rank, and the two meet at torch's
c10d rendezvous. Both "machines" are processes of this one, on loopback: everything but the network
is what runs across real machines."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tuner.core.config import CompileConfig
from tuner.core.errors import TunerError
from tuner.core.spec import TrialSpec
from tuner.isolation.isolated import run_isolated
from tuner.ranks.board import Board, close_boards, parse_endpoint
from tuner.ranks.board import board as rank_board

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ROOT / "tests" / "workloads"


def free_endpoint() -> str:
    """``127.0.0.1:P`` with P and P+1 free (the rendezvous and the board)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port + 1))
            return f"127.0.0.1:{port}"
        except OSError:
            continue
    raise RuntimeError("no two free ports in a row")


def start_node(endpoint: str, work_dir: Path, **env: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tuner", "node", "--rdzv-endpoint", endpoint, "--work-dir",
                             str(work_dir), "--wait", "120"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=ROOT, env={**os.environ, **env})


def two_machine_trial(tmp_path: Path, workload: str, **env: str) -> tuple[dict, str, int]:
    """One DDP trial with one rank here and one on a ``compile-tune node``: (result, its output, exit code)."""
    endpoint = free_endpoint()
    node = start_node(endpoint, tmp_path / "node", **env)
    try:
        rank_board(endpoint, 2).wait_for_nodes(120, print)
        cfg = CompileConfig(backend="aot_eager", data_parallel={"wrap": "ddp"})
        spec = TrialSpec(workload=str(WORKLOADS / workload), config=cfg.to_dict(), task="train", threads=1,
                         nproc=1, nnodes=2, rdzv_endpoint=endpoint, data_parallel="ddp", measure_seconds=1.0,
                         rounds=2)
        result = run_isolated(spec, timeout=240, work_dir=tmp_path / "work", env_extra=env or None)
    finally:
        close_boards()
        out, _ = node.communicate(timeout=60)
    return result, out, node.returncode


def test_a_trial_across_two_machines_meets_at_the_rendezvous_and_posts_on_the_board(tmp_path):
    result, out, code = two_machine_trial(tmp_path, "blocks.py")
    assert result["status"] == "ok", (result.get("failure"), out[-3000:])
    assert [r["rank"] for r in result["ranks"]] == [0, 1], "one rank here, one posted by the other machine"
    assert all(r["status"] == "ok" and r["step_s"] > 0 for r in result["ranks"])
    assert "parameters identical on every rank" in result["correctness_check"]
    assert code == 0, out
    assert "joined the tuner's board" in out and "ended (launcher exit code 0)" in out
    assert "the tuner's run ended" in out
    assert not list((tmp_path / "node").glob("trial-*")), "the other machine cleans up its trial files"


def test_a_rank_killed_on_either_machine_is_named_and_the_trial_fails(tmp_path):
    """Rank 1 is killed wherever the rendezvous put it: here, or on the other machine, whose log
    the tuner reads from the board; the rank that then lost its peer is not blamed."""
    result, out, code = two_machine_trial(tmp_path, "rank_faults.py", RANK_FAULT="kill")
    assert result["status"] == "failed", out[-3000:]
    assert result["failed_rank"] == 1, result["failure"]
    assert result["failure"]["raw"].startswith("rank 1 was killed by SIGKILL"), result["failure"]
    assert code == 0 and "the tuner's run ended" in out, out[-3000:]


def test_a_run_on_two_machines_ends_with_a_verdict_and_each_machines_rank_in_trials_csv(tmp_path):
    endpoint, out = free_endpoint(), tmp_path / "run"
    node = start_node(endpoint, tmp_path / "node")
    try:
        done = subprocess.run([sys.executable, "-m", "tuner", str(WORKLOADS / "blocks.py"), "--task", "train",
                               "--nproc", "1", "--nnodes", "2", "--rdzv-endpoint", endpoint, "--data-parallel", "ddp",
                               "--trials", "1", "--space", str(ROOT / "tests" / "spaces" / "logic.yaml"),
                               "--measure-seconds", "1", "--out", str(out), "--confirm", "0", "--no-progress",
                               "--no-check", "--no-warm-start", "--threads", "1"],  # both "machines" share 2 cores
                              capture_output=True, text=True, timeout=600, cwd=tmp_path)
    finally:
        node_out, _ = node.communicate(timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + node_out[-2000:]
    assert "2 ranks on 2 machines (ddp) x 1 thread(s)" in done.stdout, done.stdout[:600]
    trials = pd.read_csv(out / "trials.csv")
    eager = trials[trials["role"] == "eager"].iloc[0]
    assert eager["state"] == "COMPLETE" and eager["rank0_step_s"] > 0 and eager["rank1_step_s"] > 0
    assert "verdict:" in done.stdout
    assert node.returncode == 0 and "the tuner's run ended" in node_out, node_out[-2000:]


def test_a_machine_that_never_joins_is_named_with_the_command_to_run():
    endpoint = free_endpoint()
    board = Board(endpoint, nnodes=3)
    try:
        with pytest.raises(TunerError) as e:
            board.wait_for_nodes(1.0, lambda line: None)
    finally:
        board.close()
    assert "0 of the 2 other machine(s) joined" in e.value.message
    assert f"compile-tune node --rdzv-endpoint {endpoint}" in (e.value.hint or "")


def test_a_node_without_a_tuner_exits_2_saying_what_to_start(tmp_path):
    done = subprocess.run([sys.executable, "-m", "tuner", "node", "--rdzv-endpoint", free_endpoint(), "--wait", "2",
                           "--work-dir", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "no tuner's board at" in done.stderr and "--nnodes N --rdzv-endpoint" in done.stderr


@pytest.mark.parametrize("argv,says", [
    (["--nnodes", "2"], "--nnodes 2 needs --rdzv-endpoint"),
    (["--rdzv-endpoint", "127.0.0.1:29400"], "is for ranks on several machines"),
    (["--nnodes", "2", "--rdzv-endpoint", "node0"], "--rdzv-endpoint must be HOST:PORT"),
    (["--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:29400"], "needs --data-parallel"),
])
def test_machine_options_that_cannot_work_exit_2_with_one_line(argv, says, tmp_path):
    done = subprocess.run([sys.executable, "-m", "tuner", str(WORKLOADS / "blocks.py"), "--task", "train", *argv,
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr


def test_endpoints_are_parsed_with_the_port_checked():
    assert parse_endpoint("node0.cluster:29400") == ("node0.cluster", 29400)
    for bad in ("node0", ":29400", "node0:port", "node0:70000"):
        with pytest.raises(TunerError):
            parse_endpoint(bad)


def test_exports_name_the_machines_a_config_was_tuned_on():
    from tuner.export import exports

    tuned = {"verdict": "compile", "tuned_on": {"data_parallel": "fsdp2", "nproc": 2, "nnodes": 2},
             "config": {"target": "blocks", "backend": "inductor", "data_parallel": {"wrap": "fsdp2"}}}
    blocks = exports(tuned)
    assert blocks["torchtitan"]["parallelism"]["data_parallel_shard_degree"] == 4
    assert blocks["accelerate"]["parallelism"]["num_processes"] == 4
    assert blocks["accelerate"]["parallelism"]["num_machines"] == 2


@pytest.fixture(autouse=True)
def _no_board_left():
    yield
    close_boards()
    assert "COMPILE_TUNE_BOARD" not in os.environ
