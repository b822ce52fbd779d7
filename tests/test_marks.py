"""Per-dimension dynamic shapes (``dynamic: marked``): exactly the input dimensions that vary over
the schedule are marked dynamic, in the trial and by ``apply_config``."""
import subprocess
import sys

import pytest
import torch

from tuner.config import CompileConfig
from tuner.errors import ConfigError
from tuner.isolated import run_isolated
from tuner.runtime.marks import varying_dims
from tuner.space import load_space
from tuner.spec import TrialSpec
from tuner.workload import load_workload

from conftest import FAST, ROOT, SPACES, WORKLOADS

MARKS = {"0": {0: [2, 12]}}  # many_shapes.py: the batch dimension, 2 to 12


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
                           str(SPACES / "marked.yaml"), "--trials", "4", "--out", str(out),
                           *[f for f in FAST if f != "--no-check"]], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "dynamic=marked 0 recompile(s), 1 graph(s)" in proc.stdout and "0[0] 2-12" in proc.stdout
    report = (out / "report.md").read_text()
    section = report.split("## Dynamic shapes over the input schedule")[1].split("##")[0]
    for choice in ("null (automatic)", "True", "False", "marked"):
        assert f"| {choice} |" in section, section
