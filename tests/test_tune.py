"""The end of a study: best_config.yaml is always written, and an unconfirmed verdict says why.

Trials are replaced by a stand-in measurement (``Tuner.measure``), so these tests run the whole
pipeline of ``tune()`` (baselines, search, confirmation, verdict, outputs) in seconds.
"""
import json
import os
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT

from tuner.core.config import CompileConfig
from tuner.decide.confirm import HOPELESS
from tuner.decide.search import Tuner
from tuner.run.pipeline import TuneOptions, tune

ENV = {"torch": "2.13.0+cpu", "device": "cpu", "threads": 1}


def ok(config: CompileConfig, speedup: float = 1.5, compile_s: float = 1.0) -> dict:
    result = {"status": "ok", "eager_step_s": 0.01, "step_s": 0.01 / speedup, "correct": True,
              "peak_memory_mb": 10.0, "eager_peak_memory_mb": 10.0, "environment": ENV}
    if config.compiles:
        result.update(speedup=speedup, compile_time_s=compile_s)
    return result


def crashed() -> dict:
    return {"status": "failed", "failure": {"category": "crashed", "explanation": "the trial process died",
                                            "hint": "try another backend", "raw": "killed by signal 11"}}


def stand_in(confirm_round):
    """A ``Tuner.measure`` that measures nothing; ``confirm_round(config)`` answers confirmation rounds."""
    def measure(self, config, label="trial", compile_budget_s=None, warm=True, reuse_cache=False, timing_share=1.0,
                timing="beside", **kwargs):
        if label.startswith("confirm-"):
            return confirm_round(config)
        return ok(config)
    return measure


def run(tmp_path, workloads, monkeypatch, confirm_round=lambda cfg: ok(cfg), **options) -> dict:
    monkeypatch.setattr(Tuner, "measure", stand_in(confirm_round))
    opts = dict(workload=str(workloads / "mlp.py"), space="quick", trials=1, steps=1_000_000, threads=1,
                out=str(tmp_path / "out"), check=False, warm_start=False, progress=False, confirm_rounds=2)
    tune(TuneOptions(**{**opts, **options}), log=lambda line: None)
    return yaml.safe_load((tmp_path / "out" / "best_config.yaml").read_text())


def test_a_confirmed_verdict_says_confirmed_true(tmp_path, workloads, monkeypatch):
    best = run(tmp_path, workloads, monkeypatch)
    assert best["measured"]["confirmed"] is True and "unconfirmed_because" not in best["measured"]


def test_best_config_is_written_when_every_confirmation_round_fails(tmp_path, workloads, monkeypatch):
    best = run(tmp_path, workloads, monkeypatch, confirm_round=lambda cfg: crashed())
    # Every finalist crashed in fresh processes (eager runs inside each of them): a confirmed
    # reason to stay eager, not an unconfirmed compile verdict.
    assert best["verdict"] == "stay_eager" and "crashed" in best["measured"]["reason"]
    assert best["measured"]["confirmed"] is True


def test_best_config_is_written_when_confirmation_raises(tmp_path, workloads, monkeypatch):
    def broken(cfg):
        raise OSError("No space left on device")

    best = run(tmp_path, workloads, monkeypatch, confirm_round=broken)
    m = best["measured"]
    assert m["confirmed"] is False and m["unconfirmed_because"] == "confirmation failed"
    assert m["confirmation_error"] == "OSError: No space left on device"
    assert (tmp_path / "out" / "report.md").exists() and (tmp_path / "out" / "trials.csv").exists()


@pytest.mark.parametrize("options, why", [
    ({"confirm": 0}, "--confirm 0"),
    ({"objective": "pareto"}, "objective pareto"),
    ({"steps": 1}, HOPELESS),
])
def test_an_unconfirmed_verdict_says_why_in_the_yaml_and_the_report(tmp_path, workloads, monkeypatch, options, why):
    best = run(tmp_path, workloads, monkeypatch, **options)
    assert best["measured"]["confirmed"] is False and best["measured"]["unconfirmed_because"] == why
    assert f"unconfirmed: {why}" in (tmp_path / "out" / "report.md").read_text()


def test_a_study_interrupted_before_the_race_decides_writes_an_unconfirmed_verdict(tmp_path, workloads, monkeypatch):
    calls = []

    def measure(self, config, label="trial", compile_budget_s=None, warm=True, reuse_cache=False, timing_share=1.0,
                timing="beside", **kwargs):
        calls.append(label)
        if label.startswith("confirm-1-"):  # Ctrl-C in the race's second round, before its first look
            raise KeyboardInterrupt
        return ok(config)

    monkeypatch.setattr(Tuner, "measure", measure)
    result = tune(TuneOptions(workload=str(workloads / "mlp.py"), space="quick", trials=2, threads=1,
                              out=str(tmp_path / "out"), check=False, warm_start=False, progress=False),
                  log=lambda line: None)
    assert result.run.interrupted
    m = yaml.safe_load((tmp_path / "out" / "best_config.yaml").read_text())["measured"]
    assert m["confirmed"] is False and m["unconfirmed_because"] == "interrupted"
    assert not any(label.startswith("trial-") for label in calls), "the search never started"


def test_a_study_interrupted_after_the_first_decided_look_keeps_that_answer(tmp_path, workloads, monkeypatch):
    """Ctrl-C in the search: best_config.yaml holds the race's answer so far, with its interval,
    written at the look that decided it, and apply_config takes it."""
    import torch

    import tuner

    written, noise = [], iter([1.01, 0.99] * 50)

    def measure(self, config, label="trial", compile_budget_s=None, warm=True, reuse_cache=False, timing_share=1.0,
                timing="beside", **kwargs):
        if label.startswith("trial-"):
            written.append((tmp_path / "out" / "best_config.yaml").read_text())
            raise KeyboardInterrupt
        result = ok(config, speedup=1.5 if config.compiles else 1.0)
        result["step_s"] *= next(noise)  # processes differ a little: the spread is measured, not zero
        result["timing"] = timing  # paired where the race asks for eager beside the config
        return result

    monkeypatch.setattr(Tuner, "measure", measure)
    lines = []
    result = tune(TuneOptions(workload=str(workloads / "mlp.py"), space="quick", trials=2, threads=1,
                              out=str(tmp_path / "out"), check=False, warm_start=False, progress=False),
                  log=lines.append)
    assert result.run.interrupted and written, "the answer was on disk before the search's first trial"
    best = yaml.safe_load((tmp_path / "out" / "best_config.yaml").read_text())
    m = best["measured"]
    assert best["verdict"] == "compile" and m["confirmed"] is True and m["so_far"] is True
    low, high = m["speedup_interval"]
    assert 1.0 < low <= m["speedup"] <= high and m["first_answer_s"] >= 0
    assert any(line.startswith("so far: compile with") and "Ctrl-C keeps this" in line for line in lines), lines
    assert yaml.safe_load(written[0])["verdict"] == "compile"
    # every answer written is kept in order in answers.jsonl, the decision whole
    answers = [json.loads(line) for line in (tmp_path / "out" / "answers.jsonl").read_text().splitlines()]
    assert answers and all(a["verdict"] == "compile" and a["elapsed_s"] >= 0 and a["candidates"] for a in answers)
    model = tuner.apply_config(torch.nn.Linear(4, 4), tmp_path / "out" / "best_config.yaml")
    assert model is not None


def test_an_error_after_the_eager_baseline_still_writes_the_outputs_then_is_raised(tmp_path, workloads, monkeypatch):
    def measure(self, config, label="trial", compile_budget_s=None, warm=True, reuse_cache=False, timing_share=1.0,
                timing="beside", **kwargs):
        if label.startswith("trial-"):
            raise RuntimeError("storage went away")
        return ok(config)

    monkeypatch.setattr(Tuner, "measure", measure)
    with pytest.raises(RuntimeError, match="storage went away"):
        tune(TuneOptions(workload=str(workloads / "mlp.py"), space="quick", trials=2, threads=1,
                         out=str(tmp_path / "out"), check=False, warm_start=False, progress=False),
             log=lambda line: None)
    m = yaml.safe_load((tmp_path / "out" / "best_config.yaml").read_text())["measured"]
    # the race had decided before the search's error: its answer so far stands
    assert m["confirmed"] is True and m["so_far"] is True


def test_tuned_on_records_the_trials_thread_count(tmp_path, workloads, monkeypatch):
    monkeypatch.setitem(ENV, "threads", 3)  # what a trial run with --threads 3 reports
    best = run(tmp_path, workloads, monkeypatch, threads=3, confirm=0)
    assert best["tuned_on"]["threads"] == 3
    monkeypatch.delitem(ENV, "threads")  # a trial environment without the count: the study's setting
    best = run(tmp_path / "again", workloads, monkeypatch, threads=3, confirm=0)
    assert best["tuned_on"]["threads"] == 3


def test_a_library_call_prints_nothing_and_logs_its_progress(tmp_path, workloads, spaces, capfd, caplog):
    import logging

    caplog.set_level(logging.INFO, logger="tuner")
    result = tune(TuneOptions(str(workloads / "mlp.py"), space=str(spaces / "logic.yaml"), trials=1, threads=1,
                              out=str(tmp_path / "out"), measure_seconds=0.5, steps=10_000_000, progress=False,
                              confirm=0, check=False, warm_start=False))
    out, _ = capfd.readouterr()
    assert out == "", "a library call writes nothing to stdout (trial processes included)"
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("tuner")]
    assert lines[0].startswith("compile-tune: mlp (infer) on cpu")
    assert any(line.startswith("  eager ") for line in lines), lines
    assert result.tuned is not None and (tmp_path / "out" / "best_config.yaml").exists()


def test_tuner_tune_can_be_called_twice(tmp_path, workloads):
    """Loading a submodule named tune.py would bind the name tuner.tune to that module."""
    script = f"""
import tuner, tuner.decide.search

def measure(self, config, label="trial", compile_budget_s=None, warm=True, reuse_cache=False, timing_share=1.0,
            timing="beside", **kwargs):
    result = {{"status": "ok", "eager_step_s": 0.01, "step_s": 0.01, "correct": True, "peak_memory_mb": 10.0,
              "eager_peak_memory_mb": 10.0, "environment": {ENV!r}}}
    return dict(result, speedup=1.0, compile_time_s=1.0) if config.compiles else result

tuner.decide.search.Tuner.measure = measure
for run in ("first", "second"):
    tuner.tune({str(workloads / "mlp.py")!r}, space="quick", trials=1, threads=1, out={str(tmp_path)!r} + "/" + run,
               check=False, warm_start=False, progress=False, confirm=0)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "second" / "best_config.yaml").exists()


def test_an_opening_that_did_not_decide_at_its_first_look_races_on_before_the_search(tmp_path, workloads,
                                                                                       monkeypatch):
    """A close call: the first look does not decide, it says the race's rounds would, and the race
    takes them before the search, so the first answer comes first; then each searched config joins
    the race."""
    labels, noise = [], iter([1.04, 0.96, 1.0] * 200)

    def measure(self, config, label="trial", compile_budget_s=None, warm=True, reuse_cache=False, timing_share=1.0,
                timing="beside", **kwargs):
        labels.append(label)
        result = ok(config, speedup=1.05 if config.compiles else 1.0)
        result["step_s"] *= next(noise)
        result["timing"] = timing
        return result

    monkeypatch.setattr(Tuner, "measure", measure)
    lines = []
    tune(TuneOptions(workload=str(workloads / "mlp.py"), space="default", trials=6, threads=1, steps=1_000_000,
                     out=str(tmp_path / "out"), check=False, warm_start=False, progress=False), log=lines.append)
    searched = [i for i, label in enumerate(labels) if label.startswith("trial-")]
    raced = {int(label.split("-")[1]) for label in labels[searched[0]:searched[-1]] if label.startswith("confirm-")}
    opening = {int(label.split("-")[1]) for label in labels[:searched[0]] if label.startswith("confirm-")}
    assert max(opening) >= 2, (labels, lines)  # past its first look (round 2), before the search
    # the searched configs join the same race between search trials (their rounds are theirs)
    assert raced and any(" joins the race (round " in line for line in lines), lines
    # the answer came before the search, and said the search follows
    so_far = [i for i, line in enumerate(lines) if line.startswith("so far:")]
    finalists = next(i for i, line in enumerate(lines) if line.startswith("confirming "))
    assert so_far and so_far[0] < finalists and "searching up to" in lines[so_far[0]], lines
