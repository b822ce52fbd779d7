"""benchmarks/remeasure.py: a tuned verdict re-measured in fresh processes (eager alone, compiled
alone, eager beside compiled), end to end on the tiny MLP, and how it reads best_config.yaml."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import yaml
from conftest import ROOT, run_cli

SCRIPT = ROOT / "benchmarks" / "remeasure.py"
KEYS = ("remeasured_speedup", "speedup_min", "speedup_max", "noise_floor", "noise_floor_median",
        "eager_beside_over_alone", "beside_min", "beside_max", "in_process_speedup", "confirmed_min",
        "confirmed_max", "inside", "eager_step_s", "compiled_step_s", "rounds", "steps", "threads", "torch", "machine")


def _module():
    spec = importlib.util.spec_from_file_location("remeasure", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_remeasure_end_to_end_on_a_tiny_tuned_mlp(workloads, tmp_path):
    # The fastest tuner run there is: one cheap search config, no model check, confirmation or
    # warm start. Whatever its verdict, a compiled config (the chosen one, or the best compiled
    # one of a "stay eager" verdict) is re-measured.
    space = tmp_path / "space.yaml"
    space.write_text("target: [whole]\nbackend: [aot_eager]\ndynamic: [null]\n")
    out = tmp_path / "out"
    tuned = run_cli(str(workloads / "mlp.py"), "--space", str(space), "--trials", "1", "--out", str(out),
                    "--measure-seconds", "0.5", "--steps", "10000000", "--no-progress", "--confirm", "0",
                    "--no-check", "--no-warm-start")
    assert tuned.returncode == 0, tuned.stderr[-2000:]
    report = tmp_path / "remeasure.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), str(workloads / "mlp.py"), "--results", str(out),
                           "--rounds", "1", "--steps", "5", "--json", str(report)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(report.read_text())
    assert set(KEYS) <= set(data)
    assert data["remeasured_speedup"] > 0 and data["speedup_min"] <= data["speedup_max"]
    assert data["noise_floor"] >= 0 and data["noise_floor_median"] >= 0
    assert data["eager_beside_over_alone"] > 0 and data["in_process_speedup"] > 0
    assert data["eager_step_s"] > 0 and data["compiled_step_s"] > 0
    assert data["rounds"] == 1 and data["steps"] == 5 and data["threads"] >= 1
    assert data["torch"] and data["machine"]["cpu"]
    tuned_on = yaml.safe_load((out / "best_config.yaml").read_text())["tuned_on"]
    assert data["threads"] == tuned_on["threads"]  # the verdict's thread count, pinned in every process
    kinds = sorted(p["kind"] for p in data["processes"])
    assert kinds == ["beside", "compiled", "eager", "eager2"], kinds
    eager = next(p for p in data["processes"] if p["kind"] == "eager")
    assert eager["dynamo_loaded"] is False  # nothing compiled in an eager-alone process
    assert "re-measured" in proc.stdout and "noise floor" in proc.stdout


def test_a_confirmed_compile_verdict_is_compared_with_its_interval(tmp_path):
    remeasure = _module()
    (tmp_path / "best_config.yaml").write_text(yaml.safe_dump({
        "verdict": "compile", "config": {"target": "whole", "backend": "inductor"},
        "measured": {"confirmed": True, "speedup_vs_eager": 1.25, "speedup_interval": [1.18, 1.31]},
        "tuned_on": {"threads": 3, "task": "train", "device": "cpu"}}))
    plan = remeasure.read_verdict(tmp_path)
    assert plan["config"] == str(tmp_path / "best_config.yaml") and plan["reference"] == [1.18, 1.31]
    assert remeasure._inside(1.23, plan["reference"]) == (True, 0.0)
    inside, off = remeasure._inside(1.40, plan["reference"])
    assert inside is False and abs(off - (1.40 / 1.31 - 1)) < 1e-9
    # the re-measure's own 95 % interval: a t-interval over its rounds' speedups
    lo, hi = remeasure.interval95([1.20, 1.24, 1.22])
    assert lo < 1.22 < hi and hi / lo < 1.15 and remeasure.interval95([1.2]) is None
    base = remeasure._settings(remeasure.parse_args(["m.py", "--results", str(tmp_path)]), plan)
    assert base["threads"] == 3 and base["task"] == "train"


def test_a_stay_eager_verdict_remeasures_the_best_compiled_config_from_trials_csv(tmp_path):
    remeasure = _module()
    (tmp_path / "best_config.yaml").write_text(yaml.safe_dump({
        "verdict": "stay_eager", "config": {"target": "none"},
        "measured": {"confirmed": False, "best_compiled": "whole/aot_eager", "best_compiled_speedup": 0.8},
        "tuned_on": {"threads": 2}}))
    key = json.dumps({"backend": "aot_eager", "dynamic": None, "fullgraph": False, "mode": None, "options": {},
                      "target": "whole"})
    (tmp_path / "trials.csv").write_text("number,state,config_label,config_key\n"
                                         f"2,COMPLETE,whole/aot_eager,\"{key.replace(chr(34), chr(34) * 2)}\"\n")
    plan = remeasure.read_verdict(tmp_path)
    assert plan["config"]["backend"] == "aot_eager" and plan["reference"] == [0.8, 0.8]
