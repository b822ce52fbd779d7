"""Lanes (``--parallel``): trials compile side by side on the cores the timing does not use and
take turns on the timing slot."""
import subprocess
import sys
import time

import pytest
from conftest import FAST, ROOT, SPACES, WORKLOADS, load_study

from tuner.core.errors import TunerError
from tuner.system.lanes import plan_lanes


def test_auto_runs_one_lane_when_no_two_cores_are_left_beside_the_timing_cores():
    assert plan_lanes("auto", "cpu", threads=2, available=[0, 1]).lanes == 1
    assert plan_lanes("auto", "cpu", threads=1, available=[0, 1]).lanes == 1
    eight = plan_lanes("auto", "cpu", threads=2, available=list(range(8)))
    assert (eight.lanes, eight.timing_cores, eight.compile_cores) == (4, [0, 1], [2, 3, 4, 5, 6, 7])
    gpu = plan_lanes("auto", "cuda", threads=16, available=list(range(16)))
    assert gpu.lanes == 4 and gpu.timing_cores == [0, 1], "on a GPU the timing process keeps two cores"


def test_asked_lanes_split_the_cores_and_say_when_compiles_share_too_few():
    plan = plan_lanes(2, "cpu", threads=1, available=[0, 1])
    assert (plan.lanes, plan.timing_cores, plan.compile_cores) == (2, [0], [1])
    assert "compile times may read high" in plan.why


@pytest.mark.parametrize("value", ["0", "many", "-1"])
def test_a_bad_parallel_value_is_a_one_line_error(value):
    with pytest.raises(TunerError, match="--parallel"):
        plan_lanes(value, "cpu", threads=1, available=[0, 1])


def test_lanes_need_a_core_to_compile_on():
    with pytest.raises(TunerError, match="no core is left to compile on"):
        plan_lanes(2, "cpu", threads=2, available=[0, 1])


HOLD = """
import sys, time
from tuner.measure.slot import timing_slot
from tuner.core.spec import TrialSpec

class Rec:
    def update(self, **values):
        print(values.get("slot_wait_s"), flush=True)

spec = TrialSpec(workload="", config={}, timing_slot=sys.argv[1])
with timing_slot(spec, Rec()):
    time.sleep(float(sys.argv[2]))
"""


def test_the_timing_slot_lets_one_process_time_at_a_time(tmp_path):
    slot = str(tmp_path / "slot.lock")
    first = subprocess.Popen([sys.executable, "-c", HOLD, slot, "2"], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert float(first.stdout.readline()) < 0.5, "the first one gets the slot at once"
    second = subprocess.run([sys.executable, "-c", HOLD, slot, "0"], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    first.wait(timeout=60)
    assert float(second.stdout.split()[0]) > 1.0, "the second waited for the first to finish timing"


def test_a_run_with_two_lanes_times_every_trial_on_the_timing_core(tmp_path):
    out = tmp_path / "blocks"
    start = time.time()
    proc = subprocess.run([sys.executable, "-m", "tuner", str(WORKLOADS / "blocks.py"), "--space",
                           str(SPACES / "logic.yaml"), "--trials", "3", "--out", str(out), "--threads", "1",
                           "--parallel", "2", *FAST], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "2 lanes: trials compile on core(s) 1 and take turns timing on core(s) 0" in proc.stdout
    trials = [t for t in load_study(f"sqlite:///{out / 'study.db'}", "blocks").get_trials(deepcopy=False)
              if t.state.name == "COMPLETE" and t.user_attrs.get("duplicate_of") is None]
    assert len({t.user_attrs["worker"] for t in trials}) == 3, "the run itself (its baselines) and both lanes"
    searched = [t for t in trials if t.user_attrs.get("role") == "search"]
    assert len({t.user_attrs["worker"] for t in searched}) == 2, "both lanes searched"
    assert all(t.user_attrs.get("timing_cores") == [0] and "slot_wait_s" in t.user_attrs for t in searched)
    keys = [t.user_attrs["config_key"] for t in trials]
    assert len(keys) == len(set(keys)) and time.time() - start < 600


def test_lanes_that_measure_the_whole_space_before_the_trials_asked_end_the_run_as_exhausted(tmp_path):
    """Seen on the lent H200 (16 cores, 4 lanes): the run stopped with an AttributeError once the
    lanes had measured every config of a space smaller than --trials."""
    out, space = tmp_path / "blocks", tmp_path / "two.yaml"
    space.write_text("target: [whole]\nbackend: [eager, aot_eager]\n")
    proc = subprocess.run([sys.executable, "-m", "tuner", str(WORKLOADS / "blocks.py"), "--space", str(space),
                           "--trials", "5", "--out", str(out), "--threads", "1", "--parallel", "2", *FAST],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "all 2 configs of the space are measured" in proc.stdout
