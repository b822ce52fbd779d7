"""CUDA paths, run for real where a GPU is present (scripts/gpu_check.sh); skipped on CPU."""
import pytest
import torch

from tuner.core.spec import TrialSpec
from tuner.isolation.isolated import run_isolated

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_cuda_trial_reports_cuda_memory_and_a_correct_speedup(workloads, tmp_path):
    spec = TrialSpec(workload=str(workloads / "blocks.py"), config={"backend": "inductor"}, device="cuda",
                     measure_seconds=1.0, rounds=3)
    result = run_isolated(spec, timeout=300, work_dir=tmp_path)
    assert result["status"] == "ok", result.get("failure")
    assert result["environment"]["device_name"] and result["correct"]
    assert result["peak_memory_mb"] >= 0 and result["speedup"] > 0


def test_reduce_overhead_cuda_graphs_trial_is_correct(workloads, tmp_path):
    spec = TrialSpec(workload=str(workloads / "blocks.py"), config={"backend": "inductor", "mode": "reduce-overhead"},
                     device="cuda", measure_seconds=1.0, rounds=3)
    result = run_isolated(spec, timeout=300, work_dir=tmp_path)
    assert result["status"] == "ok", result.get("failure")
    assert result["correct"] is True


def test_cuda_training_with_dropout_is_checked_with_eager_random_numbers(workloads, tmp_path):
    spec = TrialSpec(workload=str(workloads / "dropout.py"), task="train", config={"backend": "inductor"},
                     device="cuda", measure_seconds=1.0, rounds=3)
    result = run_isolated(spec, timeout=300, work_dir=tmp_path)
    assert result["status"] == "ok", result.get("correctness_error") or result.get("failure")
    assert result["stochastic"] is True and "fallback_random" in result["correctness_check"]
    # CUDA memory is max_memory_allocated: the model, its gradients and AdamW state at least
    assert result["eager_peak_memory_mb"] > 0 and result["steady_peak_memory_mb"] > 0


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="NCCL needs a GPU per rank: 2 GPUs")
@pytest.mark.parametrize("wrap", ["ddp", "fsdp2"])
def test_two_ranks_on_two_gpus_train_with_nccl(workloads, tmp_path, wrap):
    spec = TrialSpec(workload=str(workloads / "blocks.py"), task="train", device="cuda", nproc=2, data_parallel=wrap,
                     config={"backend": "inductor", "target": "blocks", "data_parallel": {"wrap": wrap}},
                     measure_seconds=1.0, rounds=3)
    result = run_isolated(spec, timeout=600, work_dir=tmp_path)
    assert result["status"] == "ok", result.get("failure")
    assert [r["status"] for r in result["ranks"]] == ["ok", "ok"] and result["correct"] is True
    assert result["environment"]["device_name"]
