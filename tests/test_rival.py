"""A race process with a rival: plain compile stepped as a third side beside eager and the
candidate (tuner/measure/steps.py ``RIVAL``, tuner/measure/timing.py), in real trial processes."""
from tuner.core.spec import TrialSpec
from tuner.isolation.isolated import run_isolated


def spec(workloads, name, config, rival, **kw):
    return TrialSpec(workload=str(workloads / name), config=config, rival=rival, measure_seconds=0.6, rounds=3,
                     warmup=2, check_correctness=False, **kw)


def test_a_known_slowdown_reads_against_its_rival_in_one_process(workloads, tmp_path):
    # the candidate spins 40 % past its forward, the rival is eager under another name: against the
    # rival its steps read about 1/1.4, and against eager beside both the same
    result = run_isolated(spec(workloads, "wide_mlp.py", {"backend": "stand-in:1.4"}, {"backend": "stand-in"}),
                          timeout=120, work_dir=tmp_path)
    assert result["status"] == "ok", result.get("failure")
    assert result["rival"] == {"backend": "stand-in"}
    assert 0.6 < result["rival_speedup"] < 0.85
    assert 0.6 < result["speedup"] < 0.85
    assert 0.85 < result["eager_step_mean_s"] / result["rival_step_mean_s"] < 1.18


def test_in_training_each_side_takes_its_own_optimizer_step(workloads, tmp_path):
    # the rival's optimizer step compiled (aot_eager), the candidate's not: both step the one model
    rival = {"backend": "aot_eager", "compile_optimizer": True}
    result = run_isolated(spec(workloads, "mlp.py", {"backend": "stand-in"}, rival, task="train"),
                          timeout=300, work_dir=tmp_path)
    assert result["status"] == "ok", result.get("failure")
    assert result["rival_step_mean_s"] > 0 and "rival_left_out" not in result


def test_a_rival_over_a_compiled_candidate_with_a_schedule(workloads, tmp_path):
    result = run_isolated(spec(workloads, "mlp.py", {"backend": "aot_eager"}, {"backend": "eager"}),
                          timeout=180, work_dir=tmp_path)
    assert result["status"] == "ok", result.get("failure")
    assert result["rival_step_s"] > 0 and result["rival_compile_s"] >= 0
    assert "rival_left_out" not in result
    # the candidate's compile and memory were measured before the rival compiled: its figures are its own
    assert result["compile_time_s"] > 0 and result["regions"] == 1
    assert result["steady_peak_memory_mb"] > 0 and result["peak_memory_mb"] >= result["steady_peak_memory_mb"]


def test_a_rival_that_fails_leaves_an_ordinary_pair(workloads, tmp_path):
    result = run_isolated(spec(workloads, "bad_backends.py", {"backend": "aot_eager"}, {"backend": "raising_backend"}),
                          timeout=120, work_dir=tmp_path)
    assert result["status"] == "ok", result.get("failure")
    assert "raising" in result["rival_left_out"].lower() or result["rival_left_out"]
    assert "rival_step_s" not in result and result["speedup"] > 0
