"""Per-dimension dynamic shapes (``dynamic: marked`` and ``marked_unbacked``): exactly the input
dimensions that vary over the schedule are marked dynamic, in the trial and by ``apply_config``;
and the schedule's Dynamo settings (``recompile_limit``, ``automatic_dynamic_shapes``) join the
space where they matter and reach the compiled call (tuner/core/shapes.py)."""
import subprocess
import sys

import pytest
import torch
from conftest import FAST, ROOT, SPACES, WORKLOADS

from tuner.core.config import CompileConfig
from tuner.core.errors import ConfigError
from tuner.core.spec import TrialSpec
from tuner.isolation.isolated import run_isolated
from tuner.runtime.marks import distinct_shapes, varying_dims
from tuner.space.search_space import load_space
from tuner.user.workload import load_workload

MARKS = {"0": {0: [2, 12]}}  # many_shapes.py: the batch dimension, 2 to 12
REACHES_ONE = {"0": {0: [1, 16]}}  # batch_of_one.py: the batch dimension, 1 to 16


def schedule_of(name: str) -> list:
    w = load_workload(WORKLOADS / name)
    return [w.make_inputs(), *(w.make_schedule() or [])]


def test_the_varying_dimensions_and_their_range_are_found():
    assert varying_dims(schedule_of("many_shapes.py")) == MARKS
    assert varying_dims([{"ids": torch.zeros(2, 8), "mask": torch.zeros(2, 8)},
                         {"ids": torch.zeros(2, 16), "mask": torch.zeros(2, 16)}]) == {"ids": {1: [8, 16]},
                                                                                       "mask": {1: [8, 16]}}
    assert varying_dims([(torch.zeros(4),), (torch.zeros(4),)]) == {}


def test_marked_is_a_space_choice_only_when_a_dimension_varies():
    space = load_space(str(SPACES / "marked.yaml")).restrict(device="cpu", task="infer", has_blocks=False,
                                                             varying_dims=MARKS)
    marked = [c for c in space.configs() if c.mark_dynamic]
    assert [c.mark_dynamic for c in marked] == [{"0": {0: [2, 12]}}] and marked[0].dynamic is None
    assert len(space.configs()) == 4
    still = load_space(str(SPACES / "marked.yaml")).restrict(device="cpu", task="infer", has_blocks=False)
    assert "marked" not in still.dynamic and any("no input dimension varies" in s for s in still.skipped)


def test_marks_need_the_whole_model_target():
    with pytest.raises(ConfigError, match="needs `target: whole`"):
        CompileConfig(target="blocks", mark_dynamic=MARKS)


COUNT_GRAPHS = """
import sys, torch, tuner
from torch._dynamo.utils import counters
sys.path.insert(0, sys.argv[1])
import many_shapes as w
model = w.build_model().eval()
marks = {"0": {"0": [2, 12]}} if sys.argv[2] == "marked" else {}
model = tuner.apply_config(model, {"backend": "aot_eager", "mark_dynamic": marks})
with torch.no_grad():
    for inputs in w.input_schedule()[:4]:
        model(*inputs)
print(counters["stats"]["unique_graphs"])
"""


@pytest.mark.parametrize("marked, graphs", [("marked", 1), ("plain", 2)])
def test_apply_config_marks_the_dimension_so_one_graph_serves_every_size(marked, graphs):
    # Plain: a static graph for the first size, then an automatic dynamic one. Marked: dynamic at once.
    out = subprocess.run([sys.executable, "-c", COUNT_GRAPHS, str(WORKLOADS), marked], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.split()[-1]) == graphs


def test_a_trial_with_marks_does_not_recompile_over_the_schedule(tmp_path):
    def trial(**config):
        spec = TrialSpec(workload=str(WORKLOADS / "many_shapes.py"), config={"backend": "aot_eager", **config},
                         measure_seconds=0.3, rounds=1)
        return run_isolated(spec, timeout=300, work_dir=tmp_path)

    marked, plain = trial(mark_dynamic=MARKS), trial()
    assert marked["status"] == "ok" and plain["status"] == "ok", (marked.get("failure"), plain.get("failure"))
    assert marked["recompiles"] == 0 and plain["recompiles"] >= 1


def test_a_run_compares_marked_with_every_dynamic_setting_in_the_check_and_the_report(tmp_path):
    out = tmp_path / "many"
    proc = subprocess.run([sys.executable, "-m", "tuner", str(WORKLOADS / "many_shapes.py"), "--space",
                           str(SPACES / "marked.yaml"), "--trials", "5", "--out", str(out),
                           *[f for f in FAST if f != "--no-check"]], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "dynamic=marked 0 recompile(s), 1 graph(s)" in proc.stdout and "0[0] 2-12" in proc.stdout
    # 11 shapes: dynamic=false hits the recompile limit of 8; the space's raised limit does not
    assert "dynamic=false recompile_limit=16 10 recompile(s), 11 graph(s)" in proc.stdout, proc.stdout
    report = (out / "report.md").read_text()
    section = report.split("## Dynamic shapes over the input schedule")[1].split("##")[0]
    for choice in ("null (automatic)", "True", "False", "marked", "False recompile_limit=16"):
        assert f"| {choice} |" in section, section


# --------------------------------------------------------------------------- marked_unbacked


def test_marked_unbacked_is_a_choice_only_when_a_varying_dimension_reaches_one():
    def space(marks):
        return load_space("dynamic").restrict(device="cpu", task="infer", has_blocks=False, varying_dims=marks)

    reaches = space(REACHES_ONE)
    unbacked = [c for c in reaches.configs() if c.mark_unbacked]
    assert [(c.mark_unbacked, c.mark_dynamic, c.dynamic) for c in unbacked] == [(REACHES_ONE, {}, None)]
    assert "marked_unbacked" in reaches.dynamic and len(reaches.configs()) == 5
    above = space(MARKS)
    assert "marked_unbacked" not in above.dynamic and len(above.configs()) == 4
    assert any(s.startswith("dynamic=marked_unbacked: no varying input dimension reaches 0 or 1") for s in above.skipped)


def test_unbacked_marks_round_trip_and_each_dimension_is_marked_one_way():
    cfg = CompileConfig(mark_unbacked=REACHES_ONE)
    assert CompileConfig.from_dict(cfg.to_dict()) == cfg and cfg.describe().endswith(" unbacked=0[0]")
    assert cfg.key() != CompileConfig(mark_dynamic=REACHES_ONE).key()
    with pytest.raises(ConfigError, match="either in `mark_dynamic` or in `mark_unbacked`, got 0\\[0\\] in both"):
        CompileConfig(mark_dynamic=REACHES_ONE, mark_unbacked=REACHES_ONE)


def graphs_over_schedule(workload: str, config: dict) -> int:
    """Graphs Dynamo compiles while a model under ``apply_config(config)`` runs its workload's
    example inputs and schedule, counted from a clean Dynamo state in this process."""
    from torch._dynamo.utils import counters

    import tuner

    w = load_workload(WORKLOADS / workload)
    torch._dynamo.reset()
    counters.clear()
    model = tuner.apply_config(w.make_model().eval(), config)
    with torch.no_grad():
        for inputs in [w.make_inputs(), *w.make_schedule()]:
            model(*inputs)
    graphs = counters["stats"]["unique_graphs"]
    torch._dynamo.reset()
    return graphs


@pytest.mark.parametrize("marks, graphs", [("mark_unbacked", 1), ("mark_dynamic", 2)])
def test_apply_config_unbacked_marks_run_size_one_in_the_graph_of_every_size(marks, graphs):
    # batch 4, 1, 8, 1, 16: marked dynamic, size 1 is specialised into a second graph; unbacked, it is not
    assert graphs_over_schedule("batch_of_one.py", {"backend": "eager", marks: REACHES_ONE}) == graphs


def test_a_trial_with_unbacked_marks_does_not_recompile_at_size_one(tmp_path):
    spec = TrialSpec(workload=str(WORKLOADS / "batch_of_one.py"), measure_seconds=0.3, rounds=1,
                     config={"backend": "aot_eager", "mark_unbacked": REACHES_ONE})
    result = run_isolated(spec, timeout=300, work_dir=tmp_path)
    assert result["status"] == "ok", result.get("failure")
    assert result["recompiles"] == 0 and result["correct"] is True


# --------------------------------------------------------------------------- recompile_limit


def test_the_schedule_has_as_many_shapes_as_dynamic_false_compiles_graphs():
    assert distinct_shapes(schedule_of("many_shapes.py")) == 11
    assert distinct_shapes(schedule_of("batch_of_one.py")) == 4


@pytest.mark.parametrize("dynamo, graphs", [({}, 8), ({"recompile_limit": 16}, 11)])
def test_a_raised_recompile_limit_reaches_the_compiled_call(dynamo, graphs):
    # 11 batch sizes with dynamic=False: Dynamo stops at its limit of 8 graphs and runs the rest eagerly
    config = {"backend": "eager", "dynamic": False, "dynamo": dynamo}
    assert graphs_over_schedule("many_shapes.py", config) == graphs


def test_a_trial_with_the_raised_recompile_limit_compiles_every_shape(tmp_path):
    spec = TrialSpec(workload=str(WORKLOADS / "many_shapes.py"), measure_seconds=0.3, rounds=1,
                     config={"backend": "aot_eager", "dynamic": False, "dynamo": {"recompile_limit": 16}})
    result = run_isolated(spec, timeout=300, work_dir=tmp_path)
    assert result["status"] == "ok", result.get("failure")
    assert result["recompile_limit_hit"] is False and result["recompiles"] == 10


def test_the_report_table_names_each_way_of_handling_shapes():
    import optuna

    from tuner.report._data import ReportData
    from tuner.report._rows import dynamic_rows
    from tuner.report._tables import trials_frame

    study = optuna.create_study()
    configs = [CompileConfig(), CompileConfig(dynamic=False, dynamo={"recompile_limit": 16}),
               CompileConfig(mark_unbacked=REACHES_ONE), CompileConfig(dynamo={"automatic_dynamic_shapes": False})]
    for seconds, cfg in enumerate(configs, start=1):
        study.add_trial(optuna.trial.create_trial(value=seconds, user_attrs={
            "config": cfg.to_dict(), "config_label": cfg.describe(), "total_time_s": seconds, "schedule_len": 5}))
    rows = dynamic_rows(ReportData("w", None, None, trials_frame(study)))
    assert [r[0] for r in rows] == ["null (automatic)", "False recompile_limit=16", "marked_unbacked",
                                    "null (automatic) automatic_dynamic_shapes=false"]
