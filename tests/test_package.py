"""`compile-tune package`: the winner of an inference run as a .pt2 that starts without compiling,
checked in a fresh process against eager, its figures in best_config.yaml and the reports."""
import json

import pytest
import torch
import yaml
from conftest import tune_one_inductor_trial

from tuner.core.spec import TrialSpec
from tuner.isolated import run_isolated

pytestmark = pytest.mark.slow


def test_a_packaged_winner_loads_matches_eager_and_starts_far_faster_than_a_cold_compile(tmp_path, cli, workloads):
    import tuner
    from tuner.workload import load_workload

    out = tmp_path / "run"
    proc = tune_one_inductor_trial(workloads / "fusable_schedule.py", out, "--confirm", "0")
    assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load((out / "best_config.yaml").read_text())["verdict"] == "compile"
    proc = cli("package", str(out))
    assert proc.returncode == 0, proc.stderr
    assert (out / "model.pt2").exists() and "recommended" in proc.stdout
    measured = yaml.safe_load((out / "best_config.yaml").read_text())["measured"]
    record = measured["package"]
    assert record["correct"] and record["checked_inputs"] == 4  # the distinct row counts of the schedule
    assert record["dynamic_dims"] == {"0": {"0": [160, 256]}}
    assert record["first_call_s"] * 10 < measured["compile_time_s"], (record, measured["compile_time_s"])
    assert "packaged model (.pt2)" in (out / "report.md").read_text()
    # the serving side, in this process: no compile, the same numbers as eager on a size never exported
    w = load_workload(workloads / "fusable_schedule.py")
    model, x = w.make_model().eval(), torch.randn(200, 1024)
    packaged = tuner.load_package(out)
    with torch.no_grad():
        torch.testing.assert_close(packaged(x), model(x), rtol=1e-4, atol=1e-4)


def test_a_model_export_cannot_take_names_the_line_that_stops_it_and_writes_nothing(tmp_path, workloads):
    package = tmp_path / "model.pt2"
    result = run_isolated(TrialSpec(workload=str(workloads / "graph_breaks.py"), config={"backend": "inductor"},
                                    mode="package", package_path=str(package)), timeout=600, work_dir=tmp_path)
    assert result["status"] == "failed" and not package.exists()
    where = result["export_stopped_at"]
    assert where.startswith(str(workloads / "graph_breaks.py")), json.dumps(result)[:2000]
    assert "numpy" in where or "item" in where or "if h.sum()" in where
