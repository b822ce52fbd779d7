"""Graph-break repair as a search dimension: Dynamo settings in configs and spaces, the model
check's breaks mapped to the settings that lift them, the settings applied in the trial and by
``apply_config``, and the report saying which setting removed which break."""
import importlib.util
import json
import logging
import subprocess
import sys

import optuna
import pytest
import torch
import yaml
from conftest import FAST, ROOT, SPACES, WORKLOADS, run_cli

from tuner.core.config import PLAIN_COMPILE, CompileConfig, TunedConfig
from tuner.core.errors import ConfigError, SpaceError
from tuner.core.spec import TrialSpec
from tuner.export.best_config import load_tuned_config, save_tuned_config
from tuner.isolation.isolated import run_isolated
from tuner.space.repair import add_repairs, effects, lines, remaining, repairs_for
from tuner.space.search_space import load_space


def _module(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


one_break_each = _module(WORKLOADS / "one_break_each.py")

REPAIRABLE = WORKLOADS / "repairable.py"


def line_of(text: str) -> int:
    """The line of ``repairable.py`` that holds ``text``."""
    return next(i for i, line in enumerate(REPAIRABLE.read_text().splitlines(), 1) if text in line)


def write(tmp_path, text: str):
    path = tmp_path / "space.yaml"
    path.write_text(text)
    return path


# --------------------------------------------------------------------------- the config


def test_configs_without_dynamo_settings_keep_their_keys():
    assert PLAIN_COMPILE.key() == ('{"backend": "inductor", "dynamic": null, "fullgraph": false, "mode": null, '
                                   '"options": {}, "target": "whole"}')
    assert "dynamo" not in PLAIN_COMPILE.to_dict() and CompileConfig(dynamo={}) == PLAIN_COMPILE


def test_dynamo_settings_round_trip_through_best_config_yaml(tmp_path):
    cfg = CompileConfig(backend="eager", dynamo={"ignore_logging_functions": ["logging.Logger.warning", "logging.Logger.info"],
                                                 "capture_scalar_outputs": True})
    assert cfg.dynamo == {"capture_scalar_outputs": True,
                          "ignore_logging_functions": ["logging.Logger.info", "logging.Logger.warning"]}
    assert CompileConfig.from_dict(cfg.to_dict()) == cfg and cfg.key() != CompileConfig(backend="eager").key()
    assert "+capture_scalar_outputs" in cfg.describe() and "ignore_logging_functions=[Logger.info,Logger.warning]" in cfg.describe()
    path = save_tuned_config(TunedConfig(cfg), tmp_path / "best_config.yaml")
    assert yaml.safe_load(path.read_text())["config"]["dynamo"]["capture_scalar_outputs"] is True
    assert load_tuned_config(path).config == cfg


def test_a_callable_must_be_written_as_a_dotted_name():
    with pytest.raises(ConfigError, match="YAML scalar or a list of dotted names"):
        CompileConfig(dynamo={"ignore_logging_functions": logging.Logger.info})
    with pytest.raises(ConfigError, match="must list dotted names"):
        CompileConfig(dynamo={"ignore_logging_functions": [logging.Logger.info]})


# --------------------------------------------------------------------------- the space


def test_a_dynamo_section_is_searched_on_every_backend(tmp_path):
    space = load_space(str(write(tmp_path, "backend: [eager, inductor]\ndynamo:\n  capture_scalar_outputs: [false, true]\n"
                                           "  ignore_logger_methods: [[], [logging.Logger.info]]\n")))
    assert space.dynamo == {"capture_scalar_outputs": [False, True], "ignore_logging_functions": [[], ["logging.Logger.info"]]}
    configs = space.configs()
    assert len(configs) == 8 and {c.backend for c in configs if c.dynamo.get("capture_scalar_outputs")} == {"eager", "inductor"}
    assert sum(1 for c in configs if not c.dynamo) == 2  # the defaults are left out: the same keys as without
    for cfg in configs:
        assert space.suggest(optuna.trial.FixedTrial(space.params_for(cfg))) == cfg
    plain = CompileConfig(backend="eager")
    assert {json.dumps(n.dynamo, sort_keys=True) for n in space.neighbours(plain) if n.backend == "eager"} >= {
        '{"capture_scalar_outputs": true}', '{"ignore_logging_functions": ["logging.Logger.info"]}'}


def test_an_unknown_dynamo_name_names_the_closest_one_and_its_line(tmp_path):
    with pytest.raises(SpaceError) as info:
        load_space(str(write(tmp_path, "backend: [eager]\ndynamo:\n  capture_scalar_output: [false, true]\n")))
    assert "line 3" in info.value.message and "`dynamo.capture_scalar_output` is not a torch._dynamo.config setting" \
        in info.value.message and "did you mean `capture_scalar_outputs`?" in info.value.message
    assert "\n" not in info.value.message


@pytest.mark.parametrize("section, message", [
    ("capture_scalar_outputs: [yes please]", "must be bool like Dynamo's default False"),
    ("ignore_logging_functions: [[logging.Logger.inf]]", "names no importable object"),
    ("recompile_limit: [4, 4]", "lists a value twice"),
])
def test_dynamo_values_are_checked_like_options(tmp_path, section, message):
    with pytest.raises(SpaceError, match=message):
        load_space(str(write(tmp_path, f"dynamo:\n  {section}\n")))


def test_an_unknown_dynamo_name_is_one_error_line_and_exit_2(tmp_path):
    space = write(tmp_path, "backend: [eager]\ndynamo:\n  capture_scalar_output: [false, true]\n")
    proc = run_cli(str(WORKLOADS / "mlp.py"), "--space", str(space), "--out", str(tmp_path / "out"), *FAST)
    assert proc.returncode == 2, proc.stderr[-2000:]
    first = proc.stderr.splitlines()[0]
    assert first.startswith("error: ") and "did you mean `capture_scalar_outputs`?" in first
    assert "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- the model check's breaks

@pytest.mark.parametrize("setting", [*one_break_each.LIFTED, None])
def test_torchs_own_break_reasons_map_to_the_setting_that_lifts_them(setting):
    from tuner.measure.check import _trace

    model, value = one_break_each.LIFTED[setting] if setting else (one_break_each.Branch, None)
    breaks = _trace(model(), [(torch.randn(8, 4),)])["breaks"]
    assert len(breaks) == 1, breaks
    found = [(r.setting, r.value) for r, _ in repairs_for(breaks)]
    assert found == ([(setting, value)] if setting else []), breaks[0]["reason"]


def test_the_space_gains_a_repair_for_each_break_a_setting_lifts_unless_it_lists_it(tmp_path):
    breaks = [{"file": str(REPAIRABLE), "line": line_of(".mean().item()"), "code": "scale = h.abs().mean().item()",
               "reason": "Unsupported Tensor.item() call with capture_scalar_outputs=False: Dynamo does not support"},
              {"file": str(REPAIRABLE), "line": line_of("log.info"), "code": 'log.info("forward on %d rows", x.shape[0])',
               "reason": "logging.Logger method not supported for non-export cases: ..."},
              {"file": str(REPAIRABLE), "line": line_of("if h.sum()"), "code": "if h.sum() > 0:",
               "reason": "Data-dependent branching: Detected data-dependent branching"}]
    space = load_space(str(SPACES / "repair.yaml"))
    added = add_repairs(space, {"graph_breaks": breaks})
    assert space.dynamo == {"capture_scalar_outputs": [False, True],
                            "ignore_logging_functions": [[], ["logging.Logger.info"]]}
    assert len(added) == 2 and f"repairable.py:{line_of('.mean().item()')}" in added[0] and "+capture_scalar_outputs" in added[0]
    assert len(space.configs()) == 4
    listed = load_space(str(write(tmp_path, "backend: [eager]\ndynamo:\n  capture_scalar_outputs: true\n")))
    assert len(add_repairs(listed, {"graph_breaks": breaks})) == 1 and listed.dynamo["capture_scalar_outputs"] == [True]


# --------------------------------------------------------------------------- applied: by apply_config, in the trial

COUNT_GRAPHS = r"""
import json, sys, threading, torch, tuner
from torch._dynamo.utils import counters
sys.path.insert(0, sys.argv[1])
from one_break_each import LIFTED

def graphs(cls, dynamo, thread=False):
    torch._dynamo.reset(); counters.clear()
    model = tuner.apply_config(cls(), {"backend": "eager", "dynamo": dynamo})
    call = lambda: [model(torch.randn(8, 4)) for _ in range(2)]
    if thread:  # the first call, so the trace, from another thread
        worker = threading.Thread(target=call); worker.start(); worker.join()
    else:
        call()
    return counters["stats"]["unique_graphs"]

print(json.dumps({name: [graphs(cls, {}), graphs(cls, {name: value}), graphs(cls, {name: value}, thread=True)]
                  for name, (cls, value) in LIFTED.items()}))
"""


def test_apply_config_applies_each_setting_in_a_fresh_process_from_any_thread():
    out = subprocess.run([sys.executable, "-c", COUNT_GRAPHS, str(WORKLOADS)], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    for name, (without, with_it, from_thread) in counts.items():
        assert with_it < without and from_thread == with_it, (name, counts)


def test_a_trial_records_fewer_graphs_and_breaks_with_each_setting(tmp_path):
    def trial(**dynamo):
        spec = TrialSpec(workload=str(REPAIRABLE), config={"backend": "eager", "dynamo": dynamo},
                         measure_seconds=0.3, rounds=1)
        result = run_isolated(spec, timeout=300, work_dir=tmp_path)
        assert result["status"] == "ok", result.get("failure")
        return result["graphs"], {b["line"] for b in result["graph_break_details"]}

    plain_graphs, plain_breaks = trial()
    item, branch = line_of(".mean().item()"), line_of("if h.sum()")
    logging_calls = {i for i, line in enumerate(REPAIRABLE.read_text().splitlines(), 1) if "log.info(" in line
                     or "log.debug(" in line}
    assert len(logging_calls) == 4
    assert plain_breaks == {item, branch, *logging_calls}
    graphs, breaks = trial(capture_scalar_outputs=True)
    assert graphs < plain_graphs and breaks == {branch, *logging_calls}
    graphs, breaks = trial(ignore_logging_functions=["logging.Logger.debug", "logging.Logger.info"])
    assert graphs < plain_graphs - 1 and breaks == {item, branch}


# --------------------------------------------------------------------------- what each setting did


def attrs(number, dynamo, graphs, breaks, total, role="search"):
    cfg = CompileConfig(backend="eager", dynamo=dynamo)
    return {"number": number, "role": role, "config": cfg.to_dict(), "config_key": cfg.key(), "graphs": graphs,
            "graph_breaks": len(breaks), "total_time_s": total,
            "graph_break_details": [{"file": "/w/repairable.py", "line": line, "code": code, "reason": reason}
                                    for line, code, reason in breaks]}


ITEM = (22, "scale = h.abs().mean().item()", "Unsupported Tensor.item() call with capture_scalar_outputs=False: x")
BRANCH = (24, "if h.sum() > 0:", "Data-dependent branching: Detected data-dependent branching")


def test_effects_name_the_break_each_setting_removed_and_what_it_saved():
    trials = [attrs(1, {}, 3, [ITEM, BRANCH], 10.0), attrs(2, {"capture_scalar_outputs": True}, 2, [BRANCH], 8.0)]
    found = effects(trials)
    assert [(e["setting"], e["paired"], [b["where"] for b in e["removed"]]) for e in found] == [
        ("capture_scalar_outputs", True, ["repairable.py:22"])]
    assert found[0]["with"]["graphs"] == 2 and found[0]["without"]["graphs"] == 3
    stays = remaining(trials, found)
    assert [b["where"] for b in stays] == ["repairable.py:24"] and "no Dynamo setting lifts" in stays[0]["stays"]
    text = "\n".join(lines(trials))
    assert "+capture_scalar_outputs: removed repairable.py:22" in text and "graphs 3 -> 2" in text
    assert "saves 2.00 s" in text and "stays a graph break: repairable.py:24" in text


def test_a_run_finds_fewer_graphs_than_plain_compile_and_the_report_says_which_setting_removed_which_break(tmp_path):
    # Two search trials: the walk from plain torch.compile tries each setting the check added.
    out = tmp_path / "repairable"
    proc = run_cli(str(REPAIRABLE), "--space", str(SPACES / "repair.yaml"), "--trials", "2", "--threads", "1",
                   "--out", str(out), *[f for f in FAST if f != "--no-check"])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "repair: the search tries dynamo +capture_scalar_outputs" in proc.stdout
    assert "repair: the search tries dynamo ignore_logging_functions=[Logger.debug,Logger.info]" in proc.stdout
    assert "graph-break repair" in proc.stdout and "+capture_scalar_outputs: removed repairable.py:" in proc.stdout
    import pandas as pd

    trials = pd.read_csv(out / "trials.csv")
    compiled = trials[trials["role"].isin(("plain", "search")) & (trials["state"] == "COMPLETE")]
    plain_graphs = int(compiled[compiled["role"] == "plain"]["graphs"].iloc[0])
    repaired = compiled[compiled["dynamo"] != "{}"]
    assert (repaired["graphs"] < plain_graphs).all() and len(repaired) == 2, compiled[["config_label", "graphs"]]
    # Which config is fastest is a measurement (fewer graphs usually win here, but a loaded machine
    # can reorder configs a few percent apart; benchmarks measure speed): whichever it is, it is the pick.
    fastest = compiled.sort_values("total_time_s").iloc[0]
    best = load_tuned_config(out / "best_config.yaml")
    if best.verdict == "compile":  # eager itself may be faster still: then nothing compiled is picked
        assert best.config.key() == fastest["config_key"]
    report = (out / "report.md").read_text()
    section = report.split("## Graph-break repair")[1].split("\n## ")[0]
    assert "+capture_scalar_outputs" in section and "ignore_logging_functions" in section, section
    for line in (".mean().item()", "log.info", "log.debug"):
        assert f"repairable.py:{line_of(line)}" in section, (line, section)
    assert f"repairable.py:{line_of('if h.sum()')}" in section and "no Dynamo setting lifts" in section
