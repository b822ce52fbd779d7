"""Every failure category we claim, triggered for real in a trial process; graph breaks and
recompiles explained with the user's own source lines."""
import pytest

from tuner.core.spec import TrialSpec
from tuner.isolation.isolated import run_isolated
from tuner.user.diagnose import CATEGORIES, break_hint


def trial(workloads, tmp_path, name, timeout=120, **kwargs):
    limit = kwargs.pop("trial_memory_limit_mb", None)
    spec = TrialSpec(workload=str(workloads / name), config=kwargs, measure_seconds=0.3, rounds=2, warmup=2,
                     trial_memory_limit_mb=limit)
    return run_isolated(spec, timeout=timeout, work_dir=tmp_path)


def category(result):
    assert result["status"] == "failed", result
    return result["failure"]["category"]


def test_graph_breaks_name_user_lines_reasons_and_hints(workloads, tmp_path):
    result = trial(workloads, tmp_path, "graph_breaks.py", backend="eager")
    assert result["status"] == "ok", result.get("failure")
    by_line = {b["line"]: b for b in result["graph_break_details"]}
    assert result["graph_breaks"] == 3 and set(by_line) == {19, 21, 23}
    assert all(b["file"].endswith("graph_breaks.py") for b in by_line.values())
    assert by_line[19]["code"].startswith("log.info(") and "log" in by_line[19]["hint"]
    assert "torch.where" in by_line[21]["hint"] and "Data-dependent" in by_line[21]["reason"]
    assert "capture_scalar_outputs" in by_line[23]["hint"] and ".item()" in by_line[23]["code"]
    assert result["graphs"] >= 4


def test_backend_that_is_not_installed_is_backend_unavailable(workloads, tmp_path):
    # tvm is listed by torch._dynamo.list_backends() but its package is not installed here.
    assert category(trial(workloads, tmp_path, "mlp.py", backend="tvm")) == "backend_unavailable"


def test_options_torch_rejects_are_bad_config(workloads, tmp_path):
    result = trial(workloads, tmp_path, "mlp.py", backend="inductor", options={"max_autotune": "yes"})
    assert category(result) == "bad_config"
    assert "Unexpected type of attr max_autotune" in result["failure"]["raw"]


def test_broken_cxx_compiler_is_a_compiler_failure(workloads, tmp_path):
    result = trial(workloads, tmp_path, "mlp.py", backend="inductor", options={"cpp.cxx": [None, "/nonexistent/g++"]})
    assert category(result) == "compiler_failure"


def test_miscompiled_results_are_wrong_results_and_never_ok(workloads, tmp_path):
    result = trial(workloads, tmp_path, "bad_backends.py", backend="wrong_backend")
    assert category(result) == "wrong_results"
    assert result["correct"] is False and "RMSE vs float64 reference" in result["correctness_error"]


def test_allocation_over_the_trial_memory_limit_is_out_of_memory(workloads, tmp_path):
    result = trial(workloads, tmp_path, "bad_backends.py", backend="hog_backend", trial_memory_limit_mb=3000)
    assert category(result) == "out_of_memory"


def test_recompile_limit_under_fullgraph_is_recompile_limit(workloads, tmp_path):
    result = trial(workloads, tmp_path, "many_shapes.py", backend="eager", dynamic=False, fullgraph=True)
    assert category(result) == "recompile_limit"


def test_hitting_the_recompile_limit_without_fullgraph_is_reported_not_hidden(workloads, tmp_path):
    result = trial(workloads, tmp_path, "many_shapes.py", backend="eager", dynamic=False)
    assert result["status"] == "ok", result.get("failure")
    assert result["recompile_limit_hit"] is True
    assert result["recompiles"] >= 7


def test_specializing_a_dimension_marked_dynamic_is_dynamic_shape(workloads, tmp_path):
    assert category(trial(workloads, tmp_path, "marked_dynamic.py", backend="eager")) == "dynamic_shape"


def test_every_category_has_an_explanation_and_a_next_step():
    for name, (explanation, hint) in CATEGORIES.items():
        assert explanation and hint, name


@pytest.mark.parametrize("reason, word", [
    ("Failed to trace builtin operator `print`", "print"),
    ("Data-dependent branching", "torch.cond"),
    ("Unsupported Tensor.item() call", "capture_scalar_outputs"),
    ("Tensor.numpy() with trace_numpy=False", "numpy"),
])
def test_break_hints_name_the_fix(reason, word):
    assert word in break_hint(reason)


def test_check_command_lists_breaks_numpy_fullgraph_and_dynamic_advice(cli, workloads):
    proc = cli("check", str(workloads / "graph_breaks.py"))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for line in ("graph_breaks.py:19", "graph_breaks.py:21", "graph_breaks.py:23"):
        assert line in out
    assert "numpy at graph_breaks.py:20" in out
    assert "fullgraph=True: will fail" in out
    assert "recommended: dynamic=true" in out


def test_check_of_a_clean_model_says_fullgraph_can_work(cli, workloads):
    proc = cli("check", str(workloads / "blocks.py"))
    assert proc.returncode == 0, proc.stderr
    assert "no graph breaks" in proc.stdout and "fullgraph=True: can work" in proc.stdout


@pytest.mark.parametrize("name", ["graph_breaks.py", "many_shapes.py"])
def test_the_model_check_in_two_parts_finds_what_one_process_finds(workloads, tmp_path, name):
    """The check's traces run in two processes side by side (tuner.isolation.isolated.check_model); joined,
    they give the one-process check: breaks, every `dynamic` setting in order (the raised
    recompile limit of many_shapes.py included) and the same advice."""
    from tuner.core.shapes import merge_check_parts

    spec = TrialSpec(workload=str(workloads / name), config={}, mode="check")
    whole = run_isolated(spec, timeout=300, work_dir=tmp_path)["check"]
    parts = [run_isolated(TrialSpec(**{**spec.__dict__, "check_part": k, "check_parts": 2}), timeout=300,
                          work_dir=tmp_path)["check"] for k in range(2)]
    joined = merge_check_parts(parts)
    for found in (whole, joined):
        found.pop("seconds")
    assert joined == whole
    assert list(whole["schedule"]["dynamic"])[:3] == ["null", "false", "true"]
    if name == "many_shapes.py":
        assert any("recompile_limit=" in key for key in whole["schedule"]["dynamic"])
    else:
        assert whole["graph_breaks"] and whole["numpy"]
