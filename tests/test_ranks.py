"""Training trials on many ranks (``--nproc 2 --data-parallel ddp|fsdp2``): two real ranks under
torch's elastic launcher, gloo on loopback, scored on the slowest rank; a rank killed, ranks that
disagree (a weight nudged, gradients not all-reduced) and a rank that never joins a collective are
each recorded with the rank and the reason, and a failure is pinned on the rank that failed first;
a torchrun script's ``apply_config`` runs the tuned wrap and graphs. aot_eager keeps them fast."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tuner.core.config import CompileConfig, TunedConfig
from tuner.core.spec import TrialSpec
from tuner.export.best_config import save_tuned_config
from tuner.isolation.isolated import run_isolated

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ROOT / "tests" / "workloads"


def trial(tmp_path: Path, workload: str, config: CompileConfig, wrap: str = "ddp", fault: str | None = None,
          nproc: int = 2, faulty: int = 1, **spec) -> dict:
    """One trial on ``nproc`` ranks; ``fault``: what rank ``faulty`` of tests/workloads/rank_faults.py does."""
    spec = TrialSpec(workload=str(WORKLOADS / workload), config=config.to_dict(), task="train", threads=1,
                     nproc=nproc, data_parallel=wrap, measure_seconds=1.0, rounds=2, **spec)
    env = {"RANK_FAULT": fault, "RANK_FAULT_RANK": str(faulty)} if fault else None
    return run_isolated(spec, timeout=240, work_dir=tmp_path / "work", env_extra=env)


def test_ddp_trial_is_scored_on_its_slowest_rank(tmp_path):
    cfg = CompileConfig(backend="aot_eager", data_parallel={"wrap": "ddp", "bucket_cap_mb": 100})
    result = trial(tmp_path, "blocks.py", cfg)
    assert result["status"] == "ok", result.get("failure")
    ranks = result["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1] and all(r["status"] == "ok" for r in ranks)
    assert result["step_s"] == max(r["step_s"] for r in ranks)
    assert result["compile_time_s"] == max(r["compile_time_s"] for r in ranks) > 0
    assert result["speedup"] == pytest.approx(result["eager_step_s"] / result["step_s"])
    assert result["slowest_rank"] in (0, 1) and result["rank_spread"] >= 0
    assert "parameters identical on every rank" in result["correctness_check"]
    assert "every rank's batch differs from the others' (SHA-256 of each)" in result["correctness_check"]
    assert not list((tmp_path / "work").glob("trial-*")), "the ranks' result files are cleaned up"


def test_fsdp2_shards_each_block_as_configured_and_leaves_the_root_gathered_after_forward():
    """torch's default and torchtitan's ``apply_fsdp``: the root keeps its parameters after forward
    (backward needs them at once); the blocks reshard, the last one kept gathered when asked. After
    forward a resharded module holds its shards (DTensors), a gathered one plain parameters."""
    import torch
    import torch.distributed as dist

    from tuner.runtime.parallel_wrap import wrap
    from tuner.user.workload import load_workload

    workload = load_workload(WORKLOADS / "blocks.py")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        seen = {}
        for keep in (False, True):
            model = wrap(workload.make_model(), {"wrap": "fsdp2", "keep_last_block_gathered": keep}, "cpu")
            model(torch.randn(4, 16))
            seen[keep] = [type(m.weight).__name__ for m in (model.inp, *(b.norm for b in model.layers))]
    finally:
        dist.destroy_process_group()
    assert seen[False] == ["Parameter", "DTensor", "DTensor", "DTensor"]
    assert seen[True] == ["Parameter", "DTensor", "DTensor", "Parameter"]


def test_fsdp2_trial_shards_blocks_and_checks_each_shard(tmp_path):
    cfg = CompileConfig(target="blocks", backend="aot_eager",
                        data_parallel={"wrap": "fsdp2", "reshard_after_forward": False})
    result = trial(tmp_path, "blocks.py", cfg, wrap="fsdp2")
    assert result["status"] == "ok", result.get("failure")
    assert result["graphs"] >= 1 and len(result["ranks"]) == 2
    assert "FSDP2: each rank's own shard" in result["correctness_check"]


def test_a_killed_rank_is_named_and_the_group_stops(tmp_path):
    result = trial(tmp_path, "rank_faults.py", CompileConfig(backend="aot_eager"), fault="kill")
    assert result["status"] == "failed"
    assert result["failed_rank"] == 1
    assert result["failure"]["category"] == "out_of_memory"  # SIGKILL: what the OOM killer sends
    assert result["failure"]["raw"].startswith("rank 1 was killed by SIGKILL")
    assert "rank 0 at stage compile" in result["failure"]["raw"]


def test_a_rank_killed_while_its_peer_waits_in_an_all_reduce_is_the_cause(tmp_path):
    """Rank 1 is killed while rank 0 waits for it in the second step's all-reduce: rank 0 loses
    its peer within milliseconds and records it (or the launcher stops it first); the launcher finds
    both failed in one poll, dates them to one second and names the lower rank its "Root Cause",
    rank 1 only under "Failures:"."""
    result = trial(tmp_path, "rank_faults.py", CompileConfig(backend="aot_eager"), fault="kill_in_allreduce")
    assert result["status"] == "failed"
    assert result["failed_rank"] == 1, (result["failure"], result.get("log_tail"))
    assert result["failure"]["raw"].startswith("rank 1 was killed by SIGKILL"), result["failure"]
    # rank 0 either records the peer it lost or, where the launcher's stop reaches it first, is
    # stopped by it (SIGTERM): a consequence either way, never the cause (seen both ways in the suite)
    lost = [c for c in result["consequences"] if c["rank"] == 0]
    assert lost and any(why in lost[0]["raw"] for why in ("Connection closed by peer", "killed by SIGTERM")), (
        "rank 0 waited in the all-reduce and lost its peer", result["consequences"])


def test_an_inductor_timeout_in_a_rank_is_not_a_hang(tmp_path):
    """Rank 1 raises the ``TimeoutError`` inductor's autotuning raises; no collective timed out."""
    result = trial(tmp_path, "rank_faults.py", CompileConfig(backend="aot_eager"), fault="autotune_timeout")
    assert result["status"] == "failed"
    assert result["failed_rank"] == 1, result["failure"]
    assert result["failure"]["category"] != "rank_hang", result["failure"]
    fail = result["failure"]
    assert fail["raw"].startswith("rank 1: TimeoutError: Timeout in autotune subprocess"), fail
    assert "never joined" not in result["failure"]["raw"]


def test_two_ranks_that_drift_apart_are_both_named(tmp_path):
    """Two models, one rank each: nothing tells which rank drifted."""
    result = trial(tmp_path, "rank_faults.py", CompileConfig(backend="aot_eager"), fault="drift")
    assert result["status"] == "failed"
    assert result["failure"]["category"] == "ranks_disagree", result["failure"]
    assert "ranks 0 and 1's parameters differ from each other (no model is held by more ranks than another) after " \
           "3 steps" in result["failure"]["raw"], result["failure"]
    assert "lin.bias" in result["failure"]["raw"]


def test_the_rank_that_drifts_from_the_others_is_named_even_rank_0(tmp_path):
    """Three ranks, rank 0 the one that drifts: ranks 1 and 2 hold the model most ranks hold."""
    result = trial(tmp_path, "rank_faults.py", CompileConfig(backend="aot_eager"), fault="drift", nproc=3, faulty=0)
    assert result["status"] == "failed"
    fail = result["failure"]
    assert fail["category"] == "ranks_disagree" and result["failed_rank"] == 0, fail
    assert fail["raw"].startswith("rank 0's parameters differ from those of ranks 1 and 2 (held by the most ranks) "
                                  "after 3 steps on each rank's own data: rank 0 differs from rank 1 in 1 of 2 "
                                  "parameters (SHA-256 of each), first lin.bias"), fail["raw"]
    assert not result.get("consequences"), "ranks 1 and 2 agree: neither is blamed"


def test_a_rank_whose_gradients_are_not_all_reduced_fails_as_disagreeing(tmp_path):
    """Rank 1 keeps its own gradients (a DDP comm hook that drops the average): with the same data
    on both ranks the gradients agree anyway; each rank checks on its own data, so they part."""
    result = trial(tmp_path, "rank_faults.py", CompileConfig(backend="aot_eager"), fault="unsynced")
    assert result["status"] == "failed", "the ranks' models parted, and the check saw it"
    fail = result["failure"]
    assert fail["category"] == "ranks_disagree", fail
    assert "ranks 0 and 1's parameters differ from each other (no model is held by more ranks than another) after " \
           "3 steps on each rank's own data" in fail["raw"], fail
    assert "rank 1 differs from rank 0 in 2 of 2 parameters (SHA-256 of each), first lin.weight" in fail["raw"], fail
    assert "every rank's batch differs" in result["correctness_check"], "the check saw the ranks' batches differ"


def test_the_rank_that_failed_first_is_named_not_the_lowest_rank_that_failed(tmp_path):
    """Rank 1 runs out of memory while rank 0 waits for it in an all-reduce; rank 0 then fails
    too, having lost its peer. The trial's failure is rank 1's, rank 0's its consequence."""
    result = trial(tmp_path, "rank_faults.py", CompileConfig(backend="aot_eager"), fault="oom_first")
    assert result["status"] == "failed"
    assert result["failed_rank"] == 1, result["failure"]
    assert result["failure"]["category"] == "out_of_memory", result["failure"]
    assert result["failure"]["raw"].startswith("rank 1: OutOfMemoryError: rank 1 tried to allocate"), result["failure"]
    assert [c["rank"] for c in result["consequences"]] == [0], ("rank 0 recorded losing its peer, later",
                                                                result["ranks"], result.get("log_tail"))
    assert "then, as a consequence: rank 0" in result["failure"]["raw"]


def test_a_rank_that_never_joins_fails_its_peer_at_the_collective_timeout(tmp_path):
    result = trial(tmp_path, "rank_faults.py", CompileConfig(backend="aot_eager"), fault="hang", collective_timeout_s=5)
    assert result["status"] == "failed"
    fail = result["failure"]
    assert fail["category"] == "rank_hang", fail
    assert fail["raw"].startswith("rank 0 waited 5 s in a collective during stage compile for rank 1 (at stage "
                                  "compile), which never joined it"), fail["raw"]
    assert result["trial_wall_s"] < 50, "stopped at the collective timeout, not when rank 1 woke up"


def test_apply_config_in_a_torchrun_script_runs_the_tuned_wrap_and_graphs(tmp_path):
    """The trial and the user's script, same config: the same number of graphs (DDPOptimizer splits
    the 9.5 M-parameter MLP at 1 MB buckets) and the same DDP settings."""
    cfg = CompileConfig(backend="aot_eager", data_parallel={"wrap": "ddp", "bucket_cap_mb": 1})
    measured = trial(tmp_path, "wide_mlp.py", cfg)
    assert measured["status"] == "ok", measured.get("failure")
    assert measured["backend_graphs"] > measured["graphs"], "DDPOptimizer split the graph at the buckets"
    path = save_tuned_config(TunedConfig(cfg, "compile", {}, {"data_parallel": "ddp", "nproc": 2}),
                             tmp_path / "best_config.yaml")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                           str(ROOT / "tests" / "data" / "torchrun_apply.py"), str(path),
                           str(WORKLOADS / "wide_mlp.py")], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    ranks = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert sorted(r["rank"] for r in ranks) == [0, 1]
    for r in ranks:
        assert r["wrapper"] == "DistributedDataParallel"
        assert r["bucket_bytes_cap"] == 1024 * 1024
        assert r["optimize_ddp"] == "ddp_optimizer"
        assert (r["graphs"], r["backend_graphs"]) == (measured["graphs"], measured["backend_graphs"])


def test_a_study_on_two_ranks_goes_on_past_a_killed_rank(tmp_path):
    """The command line end to end: the eager baseline on two ranks, every compiled trial losing rank 1;
    each failure in trials.csv with its rank, the verdict written."""
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "tuner", str(WORKLOADS / "rank_faults.py"), "--task", "train",
                           "--nproc", "2", "--data-parallel", "ddp", "--trials", "1", "--space", "quick",
                           "--measure-seconds", "1", "--out", str(out), "--no-progress", "--no-check"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env={**os.environ, "RANK_FAULT": "kill"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "2 ranks (ddp) x 1 thread(s)" in done.stdout
    trials = pd.read_csv(out / "trials.csv")
    eager = trials[trials["role"] == "eager"].iloc[0]
    assert eager["state"] == "COMPLETE" and eager["rank0_step_s"] > 0 and eager["rank1_step_s"] > 0
    assert eager["ddp_bucket_cap_mb"] == 25 and eager["ddp_optimize_ddp"] == "ddp_optimizer"
    failed = trials[trials["state"] == "FAIL"]
    assert len(failed) >= 1
    assert all(raw.startswith("rank 1 was killed by SIGKILL") for raw in failed["failure_raw"])
    assert "verdict: stay eager" in done.stdout


# --------------------------------------------------------------------------- the parts, without ranks


def test_data_parallel_settings_are_checked_and_canonical():
    from tuner.core.errors import ConfigError

    cfg = CompileConfig(data_parallel={"bucket_cap_mb": 100, "wrap": "ddp"})
    assert list(cfg.data_parallel) == ["bucket_cap_mb", "wrap"]
    assert CompileConfig.from_dict(cfg.to_dict()) == cfg
    assert "ddp(ddp_optimizer, bucket 100 MB)" in cfg.describe()
    assert "data_parallel" not in CompileConfig().to_dict(), "one process: keys of older configs unchanged"
    for bad, says in [({"wrap": "zero3"}, "wrap"), ({"wrap": "ddp", "reshard_after_forward": True}, "takes"),
                      ({"wrap": "ddp", "bucket_cap_mb": 0}, "positive"),
                      ({"wrap": "ddp", "optimize_ddp": "python_reducer"}, "optimize_ddp"),
                      ({"wrap": "fsdp2", "keep_last_block_gathered": "yes"}, "true or false")]:
        with pytest.raises(ConfigError, match=says):
            CompileConfig(data_parallel=bad)
    kept = CompileConfig(data_parallel={"wrap": "fsdp2", "keep_last_block_gathered": True})
    assert "fsdp2(reshard after forward, last block kept gathered)" in kept.describe()
    moot = CompileConfig(data_parallel={"wrap": "fsdp2", "reshard_after_forward": False,
                                        "keep_last_block_gathered": True})
    assert dict(moot.data_parallel) == {"reshard_after_forward": False, "wrap": "fsdp2"}, "every block kept: one key"


def test_the_space_on_many_ranks_searches_the_wraps_settings_and_says_what_it_leaves_out():
    from tuner.space.search_space import load_space

    space = load_space("quick").restrict(device="cpu", task="train", has_blocks=True, data_parallel="ddp")
    one = load_space("quick").restrict(device="cpu", task="train", has_blocks=True)
    assert len(space.configs()) == 4 * len(one.configs())
    labels = {c.data_parallel.get("bucket_cap_mb") for c in space.configs()}
    assert labels == {None, 100}, "DDP's default bucket is left out of the config: one key for the plain config"
    assert any("python_reducer" in s for s in space.skipped) and any("compile order" in s for s in space.skipped)
    fsdp = load_space("quick").restrict(device="cpu", task="train", has_blocks=True, data_parallel="fsdp2")
    assert fsdp.data_parallel == {"reshard_after_forward": [True, False], "keep_last_block_gathered": [False, True]}
    base = CompileConfig(data_parallel={})
    assert [dict(n.data_parallel) for n in fsdp.neighbours(base) if n.data_parallel] == [
        {"reshard_after_forward": False, "wrap": "fsdp2"}, {"keep_last_block_gathered": True, "wrap": "fsdp2"}]
    settings = {tuple(sorted(c.data_parallel.items())) for c in fsdp.configs()}
    assert len(settings) == 3, "the last block kept gathered is no choice when no block reshards"


@pytest.mark.parametrize("argv,says", [
    (["--nproc", "2"], "--nproc 2 runs a training step on many ranks, but --task is infer"),
    (["--nproc", "2", "--task", "train"], "--nproc 2 needs --data-parallel"),
    (["--data-parallel", "ddp", "--task", "train"], "--data-parallel ddp needs --nproc 2 or more"),
    (["--nproc", "2", "--task", "train", "--data-parallel", "ddp", "--workers", "2"], "run one at a time"),
])
def test_rank_options_that_cannot_work_exit_2_with_one_line(argv, says, tmp_path):
    done = subprocess.run([sys.executable, "-m", "tuner", str(WORKLOADS / "blocks.py"), *argv, "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert says in done.stderr


def test_the_launchers_summary_names_the_rank_that_died_first():
    from tuner.ranks.group import died_first, merge

    log = """Failures:
[1]:
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 12)
Root Cause (first observed failure):
[0]:
  time      : 2026-12-02_11:21:41
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 13)
"""
    assert died_first(log) == (1, -9)
    merged = merge([{"status": "running", "stage": "timing"}, {"status": "running", "stage": "compile"}], 1, log)
    assert merged["status"] == "failed" and merged["failed_rank"] == 1
    assert merged["failure"]["raw"].startswith("rank 1 was killed by SIGKILL")
    assert "rank 0 at stage timing, rank 1 at stage compile" in merged["failure"]["raw"]


def test_the_earliest_failure_is_the_cause_and_the_others_its_consequences():
    from tuner.ranks.group import merge

    lost_peer = {"category": "unknown", "explanation": "", "hint": "",
                 "raw": "RuntimeError: [gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:4242"}
    oom = {"category": "out_of_memory", "explanation": "", "hint": "", "raw": "OutOfMemoryError: out of memory"}
    ranks = [{"status": "failed", "stage": "compile", "failure": lost_peer, "failed_at": 1_000_005.0},
             {"status": "failed", "stage": "compile", "failure": oom, "failed_at": 1_000_000.0}]
    merged = merge(ranks, 1, "")
    assert merged["failed_rank"] == 1 and merged["failure"]["category"] == "out_of_memory"
    assert merged["failure"]["raw"].startswith("rank 1: OutOfMemoryError: out of memory; then, as a consequence: "
                                               "rank 0: RuntimeError: [gloo/transport/tcp/pair.cc:534] Connection "
                                               "closed by peer"), merged["failure"]["raw"]
    assert merged["consequences"] == [{"rank": 0, "category": "unknown", "raw": "rank 0: " + lost_peer["raw"]}]


def test_a_rank_the_launcher_saw_killed_is_the_cause_unless_another_failed_clearly_before():
    """The launcher dates a death in whole seconds, a little after it: a rank's own failure in the
    same second is its consequence; one recorded seconds before is the cause."""
    import datetime

    from tuner.ranks.group import merge

    when = datetime.datetime(2026, 12, 2, 11, 21, 41)
    log = f"Root Cause (first observed failure):\n[0]:\n  time      : {when.isoformat(sep='_')}\n" \
          "  host      : localhost\n  rank      : 1 (local_rank: 1)\n  exitcode  : -9 (pid: 13)\n"
    lost_peer = {"category": "unknown", "explanation": "", "hint": "", "raw": "Connection closed by peer"}
    for recorded_at, cause in [(when.timestamp() + 0.4, 1), (when.timestamp() - 0.6, 1), (when.timestamp() - 3, 0)]:
        ranks = [{"status": "failed", "stage": "timing", "failure": lost_peer, "failed_at": recorded_at},
                 {"status": "running", "stage": "timing"}]
        merged = merge(ranks, 1, log)
        assert merged["failed_rank"] == cause, (recorded_at - when.timestamp(), merged["failure"])
    assert merged["failure"]["raw"].startswith("rank 0: Connection closed by peer; then, as a consequence: rank 1 "
                                               "was killed by SIGKILL")


#: NCCL's watchdog and the launcher's summary, as torch 2.11's ProcessGroupNCCL and elastic launcher
#: printed them on an H200 (a collective queued behind a long kernel, a 5 s timeout; the C++ stack
#: traces left out, the rank made rank 1 of 2).
NCCL_TIMEOUT_LOG = """\
[rank1]:[E1204 16:36:57.191988218 ProcessGroupNCCL.cpp:689] [Rank 1] Watchdog caught collective operation timeout: \
WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=5000) ran for 5037 milliseconds before timing \
out.
[rank1]:[E1204 16:36:57.192160067 ProcessGroupNCCL.cpp:2303] [PG ID 0 PG GUID 0(default_pg) Rank 1]  failure detected \
by watchdog at work sequence id: 2 PG status: last enqueued work: 2, last completed work: 1
[rank1]:[E1204 16:38:02.213359007 ProcessGroupNCCL.cpp:764] [Rank 1] To avoid data inconsistency, we are taking the \
entire process down.
terminate called after throwing an instance of 'c10::DistBackendError'
E1204 16:38:02.481000 526 torch/distributed/elastic/multiprocessing/api.py:986] failed (exitcode: -6) local_rank: 1 \
(pid: 553) of binary: /opt/torch/.venv/bin/python3
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
====================================================
tuner.ranks.main FAILED
----------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
----------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-04_16:38:02
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -6 (pid: 553)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 553
====================================================
"""


def test_nccls_watchdog_aborting_a_waiting_rank_reads_as_a_hang_not_a_crash():
    from tuner.ranks.group import merge, nccl_watchdog

    assert nccl_watchdog(NCCL_TIMEOUT_LOG, 1).startswith("[rank1]:[E1204 16:36:57.191988218 ProcessGroupNCCL.cpp:689]")
    assert nccl_watchdog(NCCL_TIMEOUT_LOG, 0) is None, "rank 1's watchdog, not rank 0's"
    assert nccl_watchdog("[E ProcessGroupNCCL.cpp:1575] ProcessGroupNCCL's watchdog got stuck for 480 seconds", 0)
    assert nccl_watchdog("RuntimeError: NCCL timeout in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:121", 3)
    assert nccl_watchdog("[rank0]: RuntimeError: NCCL error: unhandled system error", 0) is None
    merged = merge([{"status": "running", "stage": "timing"}, {"status": "running", "stage": "timing"}], 1,
                   NCCL_TIMEOUT_LOG)
    fail = merged["failure"]
    assert merged["failed_rank"] == 1 and fail["category"] == "rank_hang", fail
    assert fail["raw"].startswith("rank 1 waited in a collective during stage timing for rank 0 (at stage timing), "
                                  "which never joined it: NCCL's watchdog timed it out and aborted the rank with "
                                  "SIGABRT"), fail["raw"]
    assert "Watchdog caught collective operation timeout" in fail["raw"]
    crashed = merge([{"status": "running", "stage": "timing"}] * 2, 1,
                    NCCL_TIMEOUT_LOG.replace("Watchdog caught collective operation timeout", "illegal memory access"))
    assert crashed["failure"]["category"] == "crashed", "SIGABRT without the watchdog's words stays a crash"


def test_a_rank_that_records_nccls_timeout_itself_records_a_hang():
    import torch.distributed as dist

    from tuner.ranks.rank import hang_failure

    spec = TrialSpec(workload="model.py", config={}, collective_timeout_s=60)
    nccl = dist.DistBackendError("[PG ID 0 PG GUID 0(default_pg) Rank 0] Watchdog caught collective operation "
                                 "timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
                                 "Timeout(ms)=60000) ran for 60012 milliseconds before timing out.")
    gloo = RuntimeError("[/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting "
                        "60000ms for recv operation to complete")
    for timed_out in (nccl, gloo):
        hang = hang_failure(timed_out, spec, "timing")
        assert hang is not None and hang.category == "rank_hang", timed_out
    try:  # as Dynamo re-raises an error of the code it ran: the collective's timeout is the cause
        raise RuntimeError("backend='inductor' raised an error") from gloo
    except RuntimeError as wrapped:
        assert hang_failure(wrapped, spec, "compile") is not None
    not_hangs = [TimeoutError("Timeout in autotune subprocess 4242"),  # inductor's autotuning
                 dist.DistBackendError("NCCL communicator was aborted on rank 0."),
                 RuntimeError("DistBackendError: watchdog thread exited, timeout unknown"),
                 RuntimeError("mat1 and mat2 shapes cannot be multiplied")]
    for other in not_hangs:
        assert hang_failure(other, spec, "timing") is None, other


def test_a_hang_names_the_rank_whose_last_collective_is_the_earliest():
    """Ranks 0 and 2 timed out in the collective they had started (their 41st); rank 1 timed out in
    none, busy elsewhere: it is the one they waited for, not rank 2 beside them."""
    from tuner.ranks.group import merge

    def hung(r: int) -> dict:
        return {"status": "failed", "stage": "timing", "collectives": 41, "failed_at": 100.0 + r,
                "failure": {"category": "rank_hang", "explanation": "", "hint": "",
                            "raw": f"rank {r} waited 5 s in a collective during stage timing for a rank that never "
                                   "joined it: RuntimeError: Timed out waiting 5000ms for recv operation to complete"}}

    merged = merge([hung(0), {"status": "running", "stage": "compile"}, hung(2)], 1, "")
    assert merged["failed_rank"] == 0
    assert merged["failure"]["raw"].startswith("rank 0 waited 5 s in a collective during stage timing for rank 1 (at "
                                               "stage compile), which never joined it"), merged["failure"]["raw"]
    behind = [hung(0), {**hung(1), "collectives": 40}, hung(2)]
    assert "for rank 1 (at stage timing), which" in merge(behind, 1, "")["failure"]["raw"], "a collective behind"


def test_a_killed_rank_listed_only_under_failures_is_the_cause():
    """The launcher's summary as torch 2.13 writes it when rank 1 was killed and rank 0 lost it in
    the same 0.1 s poll: both dated one second, rank 0 its Root Cause."""
    from tuner.ranks.group import launcher_failures, merge

    log = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
tuner.ranks.main FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-12-06_23:58:11
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 4170)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 4170
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-06_23:58:11
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 4169)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""
    assert [(r, code) for r, code, _ in launcher_failures(log)] == [(0, 1), (1, -9)], "Root Cause first"
    when = launcher_failures(log)[1][2]
    lost_peer = {"category": "unknown", "explanation": "", "hint": "",
                 "raw": "RuntimeError: [gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:62615"}
    for recorded_at in (when + 0.3, when - 0.05):  # the launcher's second started just after, or before
        ranks = [{"status": "failed", "stage": "timing", "failure": lost_peer, "failed_at": recorded_at},
                 {"status": "running", "stage": "timing"}]
        merged = merge(ranks, 1, log)
        assert merged["failed_rank"] == 1, merged["failure"]
        assert merged["failure"]["raw"].startswith("rank 1 was killed by SIGKILL, likely by the out-of-memory killer; "
                                                   "then, as a consequence: rank 0: RuntimeError: [gloo/transport/tcp/"
                                                   "pair.cc:553] Connection closed"), merged["failure"]


def test_nccls_watchdog_far_before_the_logs_tail_still_reads_as_a_hang(tmp_path):
    """NCCL dumps its debug information for a minute before it aborts the rank: the watchdog's line
    is megabytes before the launcher's summary."""
    from tuner.isolation.isolated import log_tail
    from tuner.ranks.group import hang_lines, merge

    head, _, summary = NCCL_TIMEOUT_LOG.partition("terminate called")
    path = tmp_path / "trial.log"
    with open(path, "w") as log:
        log.write(head)
        for i in range(60_000):  # 6 MB of NCCL's dump
            log.write(f"[rank1]:[I1204 16:37:{i % 60:02d}] NCCL INFO comm 0x5f3c rank 1 nRanks 2 dump line {i}\n")
        log.write("terminate called" + summary)
    tail = log_tail(path, 20000)
    assert "Root Cause" in tail and "Watchdog caught" not in tail, "the watchdog's line scrolled out of the tail"
    lines = hang_lines(path)
    assert lines.startswith("[rank1]:[E1204 16:36:57.191988218 ProcessGroupNCCL.cpp:689] [Rank 1] Watchdog caught")
    assert hang_lines(tmp_path / "missing.log") == ""
    merged = merge([{"status": "running", "stage": "timing"}] * 2, 1, lines + tail)
    assert merged["failure"]["category"] == "rank_hang", merged["failure"]
    assert merge([{"status": "running", "stage": "timing"}] * 2, 1, tail)["failure"]["category"] == "crashed"


def test_ranks_that_got_the_same_batch_are_said_not_to_show_ddps_sync(tmp_path):
    """Inputs that are one value throughout reach every rank alike, shuffled or not: the check
    passes, and says it could not see DDP keep the ranks one."""
    result = trial(tmp_path, "uniform_batch.py", CompileConfig(backend="aot_eager"))
    assert result["status"] == "ok", result.get("failure")
    assert "but ranks 0 and 1 got the same batch" in result["correctness_check"], result["correctness_check"]
    assert "every rank's batch differs" not in result["correctness_check"]


def test_each_rank_checks_on_its_own_shuffle_of_the_inputs():
    import torch

    from tuner.ranks.rank import rank_inputs

    x = torch.arange(12.0).reshape(3, 4)
    inputs = {"x": x, "labels": torch.arange(12).reshape(3, 4), "mask": torch.ones(3, 4, dtype=torch.bool),
              "additive": torch.full((3, 4), float("-inf")), "n": 3}
    rank0, rank1 = rank_inputs(inputs, seed=0), rank_inputs(inputs, seed=1)
    assert not torch.equal(rank0["x"], rank1["x"]), "the ranks' data differ"
    assert torch.equal(rank1["x"].flatten().sort()[0], x.flatten()), "the same values, in another order"
    assert torch.equal(rank1["labels"].float(), rank1["x"]), "tensors of one size: one order, pairs stay paired"
    assert rank1["mask"] is inputs["mask"] and rank1["additive"] is inputs["additive"] and rank1["n"] == 3
    assert torch.equal(rank_inputs(inputs, seed=1)["x"], rank1["x"]), "the same seed, the same data"


def test_exports_carry_the_ranks_settings_and_name_what_they_cannot():
    from tuner.export import exports, torchtitan_arguments

    tuned = {"verdict": "compile", "tuned_on": {"data_parallel": "ddp", "nproc": 4},
             "config": {"target": "blocks", "backend": "inductor",
                        "data_parallel": {"wrap": "ddp", "optimize_ddp": "no_optimization"}}}
    blocks = exports(tuned)
    titan = blocks["torchtitan"]
    assert titan["parallelism"] == {"data_parallel_replicate_degree": 4, "data_parallel_shard_degree": 1}
    assert "--parallelism.data_parallel_replicate_degree" in torchtitan_arguments(titan)
    assert any(x["setting"] == "data_parallel.bucket_cap_mb" for x in titan["changes_measured"]), "25 MB, not 100"
    assert any(x["setting"] == "data_parallel.optimize_ddp" for x in titan["not_carried"])
    assert "bucket_cap_mb=25" in blocks["accelerate"]["parallelism"]["python"]
    tuned["tuned_on"]["data_parallel"] = "fsdp2"
    tuned["config"]["data_parallel"] = {"wrap": "fsdp2", "reshard_after_forward": False}
    blocks = exports(tuned)
    assert blocks["torchtitan"]["parallelism"]["fsdp_reshard_after_forward"] == "never"
    assert blocks["accelerate"]["parallelism"]["fsdp_config"]["fsdp_reshard_after_forward"] is False


def test_apply_config_outside_torchrun_says_what_to_do(tmp_path):
    import tuner
    from tuner.core.errors import ConfigError

    cfg = CompileConfig(backend="eager")
    path = save_tuned_config(TunedConfig(cfg, "stay_eager", {}, {"data_parallel": "ddp", "nproc": 2}),
                             tmp_path / "best_config.yaml")
    from torch import nn

    with pytest.raises(ConfigError, match="no process group"):
        tuner.apply_config(nn.Linear(2, 2), path)
