"""Real trials in real child processes: an inductor compile, and failures recorded as data."""

import pytest

from tuner.core.spec import TrialSpec
from tuner.isolation.isolated import run_isolated


def spec(workloads, name, **config):
    return TrialSpec(workload=str(workloads / name), config=config, measure_seconds=0.5, rounds=3, warmup=2)


def test_real_inductor_trial_measures_compile_speed_memory_and_correctness(workloads, tmp_path):
    result = run_isolated(spec(workloads, "blocks.py", target="blocks", backend="inductor"),
                          timeout=300, work_dir=tmp_path)
    assert result["status"] == "ok", result.get("failure")
    assert result["correct"] is True
    assert result["regions"] == 3
    assert result["compile_time_s"] > 0.5  # a cold C++ build, not a cache hit
    assert result["first_call_s"] > result["step_s"] * 10
    assert result["speedup"] > 0 and len(result["round_ratios"]) == 3
    assert result["peak_memory_mb"] > 0
    assert result["graphs"] >= 1 and result["graph_breaks"] == 0
    assert result["environment"]["threads"] == 1
    assert not list(tmp_path.glob("inductor-cache-*")), "the trial's private cache is removed"
    # where the process's time went, stage by stage: the compile's stage holds the cold compile
    stages = result["stage_s"]
    assert {"setup", "compile", "timing", "correctness"} <= set(stages), stages
    assert stages["compile"] >= result["compile_time_s"] * 0.9 and sum(stages.values()) <= result["child_wall_s"]


def test_input_schedule_counts_recompiles_and_their_reason(workloads, tmp_path):
    result = run_isolated(spec(workloads, "mlp.py", backend="aot_eager", dynamic=False), timeout=120, work_dir=tmp_path)
    assert result["status"] == "ok", result.get("failure")
    # schedule batch sizes 8, 16, 32, 8 with dynamic=False: two new sizes -> two recompiles
    assert result["recompiles"] == 2
    assert "size mismatch at index 0" in result["recompile_details"][0]["reason"]
    assert result["schedule_len"] == 4


def test_dataclass_outputs_and_keyword_inputs_are_checked(workloads, tmp_path):
    result = run_isolated(spec(workloads, "kwargs_dict_output.py", backend="aot_eager"), timeout=120, work_dir=tmp_path)
    assert result["status"] == "ok", result.get("failure")
    assert result["correct"] is True


def test_fullgraph_over_a_graph_break_is_recorded_as_a_failure(workloads, tmp_path):
    result = run_isolated(spec(workloads, "graph_breaks.py", backend="eager", fullgraph=True), timeout=120, work_dir=tmp_path)
    assert result["status"] == "failed"
    assert result["failure"]["category"] == "graph_break_fullgraph"
    assert "fullgraph" in result["failure"]["hint"]


def test_segfaulting_trial_is_recorded_as_crashed(workloads, tmp_path):
    result = run_isolated(spec(workloads, "bad_backends.py", backend="segfault_backend"), timeout=120, work_dir=tmp_path)
    assert result["status"] == "failed"
    assert result["failure"]["category"] == "crashed"
    assert "SIGSEGV" in result["failure"]["raw"] and "compile" in result["failure"]["raw"]


def test_hanging_trial_is_killed_and_recorded_as_timeout(workloads, tmp_path):
    result = run_isolated(spec(workloads, "bad_backends.py", backend="hang_backend"), timeout=15, work_dir=tmp_path)
    assert result["status"] == "failed"
    assert result["failure"]["category"] == "timeout"
    assert "stage: compile" in result["failure"]["raw"]
    assert result["trial_wall_s"] < 40


def test_raising_backend_is_a_compiler_failure(workloads, tmp_path):
    result = run_isolated(spec(workloads, "bad_backends.py", backend="raising_backend"), timeout=120, work_dir=tmp_path)
    assert result["failure"]["category"] == "compiler_failure"
    assert "this backend always fails" in result["failure"]["raw"]


def test_the_step_time_is_the_schedule_shape_mix_weighted_by_occurrence(workloads, tmp_path):
    result = run_isolated(spec(workloads, "mlp.py", backend="aot_eager"), timeout=120, work_dir=tmp_path)
    assert result["status"] == "ok", result.get("failure")
    # schedule batch sizes 8, 16, 32, 8: three shapes, batch 8 half of the steps
    assert [(m["input"], m["weight"]) for m in result["mix"]] == [
        ("input_schedule()[0]", 0.5), ("input_schedule()[1]", 0.25), ("input_schedule()[2]", 0.25)]
    eager = sum(m["weight"] * m["eager_step_s"] for m in result["mix"])
    compiled = sum(m["weight"] * m["step_s"] for m in result["mix"])
    assert result["eager_step_s"] == pytest.approx(eager) and result["step_s"] == pytest.approx(compiled)
    assert result["speedup"] == pytest.approx(eager / compiled)


def test_shapes_past_the_recompile_limit_are_timed_as_they_run(workloads, tmp_path):
    # 11 batch sizes with dynamic=False: the last ones run eagerly, and are timed that way
    result = run_isolated(spec(workloads, "many_shapes.py", backend="aot_eager", dynamic=False), timeout=300,
                          work_dir=tmp_path)
    assert result["status"] == "ok", result.get("failure")
    assert result["recompile_limit_hit"] is True and len(result["mix"]) == 11


def test_compiled_memory_is_eager_memory_plus_what_compiling_costs(workloads, tmp_path):
    # The trial holds the model once: a compiled config is not charged for copies of the
    # weights, so what compiling adds does not grow with the model (38 MB of weights vs 3 KB).
    def extra(name):
        result = run_isolated(spec(workloads, name, backend="aot_eager"), timeout=300, work_dir=tmp_path)
        assert result["status"] == "ok", result.get("failure")
        assert result["baseline_memory_mb"] <= result["eager_peak_memory_mb"] <= result["peak_memory_mb"]
        return result["steady_peak_memory_mb"] - result["eager_peak_memory_mb"]

    assert abs(extra("wide_mlp.py") - extra("blocks.py")) < 15


def test_a_stand_in_backend_is_eager_under_another_name_or_a_known_slowdown(workloads, tmp_path):
    """The error-rate benchmark's instrument (tuner/measure/stand_in.py): compiles nothing, is
    checked correct against eager, and at F = 3 reads about a third of eager's speed beside it."""
    alias = run_isolated(spec(workloads, "wide_mlp.py", backend="stand-in"), timeout=120, work_dir=tmp_path)
    assert alias["status"] == "ok", alias.get("failure")
    assert alias["correct"] is True and alias["graphs"] == 0 and 0.8 < alias["speedup"] < 1.25
    slowed = run_isolated(spec(workloads, "wide_mlp.py", backend="stand-in:3"), timeout=120, work_dir=tmp_path)
    assert slowed["status"] == "ok", slowed.get("failure")
    assert 0.25 < slowed["speedup"] < 0.45


def test_a_fast_stand_in_slows_eager_and_its_delay_is_its_compile(workloads, tmp_path):
    """``stand-in-fast:F@D``: eager's side spins, so the config reads F times as fast beside it, and
    its first call sleeps D seconds, which the trial times as the compile."""
    fast = run_isolated(spec(workloads, "wide_mlp.py", backend="stand-in-fast:2@1.5"), timeout=120, work_dir=tmp_path)
    assert fast["status"] == "ok", fast.get("failure")
    assert fast["correct"] is True and 1.6 < fast["speedup"] < 2.5
    assert 1.4 < fast["compile_time_s"] < 2.0


def test_stand_in_names_say_their_truth_and_a_malformed_one_is_refused():
    from tuner.core.errors import ConfigError
    from tuner.core.known_truth import StandIn, parse

    assert parse("inductor") is None and parse("stand-in") == StandIn()
    assert parse("stand-in:1.05") == StandIn(slower=1.05) and parse("stand-in-fast:1.1@2") == StandIn(1.0, 1.1, 2.0)
    for bad in ("stand-in:0.5", "stand-in-fast:1.1@-1", "stand-in:x", "stand-in-fast@2"):
        with pytest.raises(ConfigError, match="a stand-in is named"):
            parse(bad)
