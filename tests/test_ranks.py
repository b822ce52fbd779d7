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
