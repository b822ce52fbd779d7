"""Real Optuna studies in SQLite with the user attributes a tuning run stores, built without running
a trial, so report tests take seconds. The numbers are shaped like a real CPU run of
examples/tiny_transformer.py (compile ~10 s, step ~2.5 ms)."""
from __future__ import annotations

import datetime
from pathlib import Path

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState

from tuner.core.config import CompileConfig
from tuner.core.spec import MEASUREMENT

ENV = {"torch": "2.13.0+cpu", "device": "cpu", "python": "3.11.7", "host": "box", "threads": 1,
       "cpu": "AMD EPYC 7B13", "device_name": "AMD EPYC 7B13"}
EAGER_STEP = 0.0026
STEPS = 100_000
DISTS = {
    "target": CategoricalDistribution(["whole", "blocks"]),
    "backend": CategoricalDistribution(["inductor", "aot_eager"]),
    "mode": CategoricalDistribution(["default", "max-autotune-no-cudagraphs"]),
    "options.freezing": CategoricalDistribution([False, True]),
    "dynamic": CategoricalDistribution([None, False]),
    "fullgraph": CategoricalDistribution([False, True]),
}
#: A graph break whose text needs escaping in HTML and Markdown.
NASTY_BREAK = {"file": "/home/u/proj/model.py", "line": 17, "code": "if h.sum() > 0 and x | y:",
               "reason": "Data-dependent branching <script>alert(1)</script>",
               "hint": "use torch.where(...) | torch.cond"}
PRINT_BREAK = {"file": "/home/u/proj/model.py", "line": 15, "code": 'print("forward called")',
               "reason": "Unsupported builtin print", "hint": "remove the print or use torch._dynamo.config"}
RECOMPILE = {"function": "forward", "where": "/home/u/proj/model.py:42",
             "reason": "0/0: tensor 'x' size mismatch at index 1. expected 64, actual 32"}
START = datetime.datetime(2025, 11, 30, 10, 0)

optuna.logging.set_verbosity(optuna.logging.WARNING)


def config_attrs(cfg: CompileConfig, role: str) -> dict:
    return {"role": role, "config": cfg.to_dict(), "config_key": cfg.key(), "config_label": cfg.describe(),
            "environment": ENV}


def ok_attrs(cfg: CompileConfig, role: str, speedup: float, compile_s: float, memory: float, **extra) -> dict:
    step = EAGER_STEP / speedup
    attrs = config_attrs(cfg, role)
    attrs.update(status="ok", speedup=speedup, compile_time_s=compile_s, step_s=step * 0.98,
                 eager_step_s=EAGER_STEP * 0.98, step_time_s=step, total_time_s=compile_s + STEPS * step,
                 step_spread=0.03, peak_memory_mb=memory, eager_peak_memory_mb=160.0, correct=True, graphs=1,
                 graph_breaks=0, graph_break_details=[], recompiles=0, recompile_details=[], trial_wall_s=20.0)
    attrs.update(extra)
    return attrs


def failed_attrs(cfg: CompileConfig, role: str, category: str, explanation: str, hint: str, raw: str, **extra):
    attrs = config_attrs(cfg, role)
    attrs.update(status="failed", failure_category=category, failure_explanation=explanation, failure_hint=hint,
                 failure_raw=raw, trial_wall_s=5.0)
    attrs.update(extra)
    return attrs


def params(cfg: CompileConfig) -> tuple[dict, dict]:
    p = {"target": cfg.target, "backend": cfg.backend}
    if cfg.backend == "inductor":
        p["mode"] = cfg.mode or "default"
        p["options.freezing"] = bool(cfg.options.get("freezing", False))
    p.update(dynamic=cfg.dynamic, fullgraph=cfg.fullgraph)
    return p, {k: DISTS[k] for k in p}


class Builder:
    def __init__(self, path: Path, name: str = "tiny", steps: int = STEPS) -> None:
        self.storage = f"sqlite:///{path}"
        self.study = optuna.create_study(study_name=name, storage=self.storage, direction="minimize")
        self.study.set_user_attr("settings", {"steps": steps, "task": "infer", "device": "cpu", "threads": 1,
                                              "workload": "examples/tiny_transformer.py", "max_memory_mb": None,
                                              "space": "quick", "seed": 0, "measurement": MEASUREMENT})
        self.study.set_user_attr("eager_step_s", EAGER_STEP)
        self.study.set_user_attr("command", "compile-tune examples/tiny_transformer.py --space quick --steps 100000")
        self.n = 0

    def add(self, attrs: dict, state=TrialState.COMPLETE, cfg: CompileConfig | None = None) -> None:
        p, d = params(cfg) if cfg is not None else ({}, {})
        value = attrs.get("total_time_s") if state == TrialState.COMPLETE else None
        start = START + datetime.timedelta(minutes=self.n)
        self.n += 1
        trial = optuna.trial.create_trial(state=state, value=value, params=p, distributions=d, user_attrs=attrs)
        trial.datetime_start, trial.datetime_complete = start, start + datetime.timedelta(seconds=30)
        self.study.add_trial(trial)

    def eager(self) -> Builder:
        eager = CompileConfig(target="none")
        self.add(ok_attrs(eager, "eager", 1.0, 0.0, 160.0, step_time_s=EAGER_STEP, total_time_s=STEPS * EAGER_STEP))
        return self


def mixed_study(path: Path):
    """Eager, plain, six measured search configs, a repeat, failures of three kinds and a pruned trial."""
    b = Builder(path).eager()
    b.add(ok_attrs(CompileConfig(), "plain", 1.12, 17.0, 200.0, recompiles=1, recompile_details=[RECOMPILE]))
    search = [
        (CompileConfig("blocks", "inductor", "default", options={"freezing": True}), 1.25, 11.0, 192.0),
        (CompileConfig("blocks", "inductor", "default"), 1.18, 12.0, 190.0),
        (CompileConfig("whole", "inductor", "max-autotune-no-cudagraphs"), 1.22, 45.0, 260.0),
        (CompileConfig("whole", "aot_eager"), 0.97, 3.0, 175.0),
        (CompileConfig("blocks", "aot_eager"), 0.95, 2.5, 165.0),
        (CompileConfig("whole", "inductor", "default", dynamic=False), 1.10, 16.0, 205.0),
    ]
    for cfg, speedup, compile_s, memory in search:
        extra = {}
        if cfg.backend == "aot_eager":
            extra = dict(graph_breaks=2, graph_break_details=[NASTY_BREAK, PRINT_BREAK])
        if cfg.target == "blocks" and cfg.backend == "inductor":
            extra = dict(recompiles=1, recompile_details=[RECOMPILE])
        b.add(ok_attrs(cfg, "search", speedup, compile_s, memory, **extra), cfg=cfg)
    repeat = search[0][0]
    b.add(dict(ok_attrs(repeat, "search", 1.25, 11.0, 192.0), duplicate_of=2), cfg=repeat)
    full = CompileConfig("whole", "inductor", "default", fullgraph=True)
    b.add(failed_attrs(full, "search", "graph_break_fullgraph", "fullgraph=True, but the model has a graph break",
                       "remove the break (see the graph-break list) or keep fullgraph=False",
                       "torch._dynamo.exc.Unsupported: Data-dependent branching | <b>bold</b>",
                       graph_break_details=[NASTY_BREAK]), TrialState.FAIL, full)
    crash = CompileConfig("whole", "aot_eager", fullgraph=True)
    b.add(failed_attrs(crash, "search", "crashed", "the trial process died (a segfault or abort inside native code)",
                       "try another backend/mode; the raw message has the signal", "killed by signal 11 (SIGSEGV)"),
          TrialState.FAIL, crash)
    stopped = CompileConfig("blocks", "inductor", "max-autotune-no-cudagraphs")
    b.add(dict(config_attrs(stopped, "search"), interrupted=True), TrialState.FAIL, stopped)
    pruned = CompileConfig("blocks", "aot_eager", dynamic=False)
    b.add(dict(config_attrs(pruned, "search")), TrialState.PRUNED, pruned)
    return b.study


def all_failed_study(path: Path):
    """Only eager finished: plain compile and every search trial failed."""
    b = Builder(path, name="broken").eager()
    b.add(failed_attrs(CompileConfig(), "plain", "compiler_failure",
                       "the backend's code generator or C++/Triton compiler failed",
                       "check the C++ compiler (gcc) / Triton install; try another mode or backend",
                       "InductorError: CppCompileError: C++ compile error"), TrialState.FAIL)
    for cfg in (CompileConfig("blocks", "inductor", "default"), CompileConfig("whole", "aot_eager")):
        b.add(failed_attrs(cfg, "search", "model_error", "the model raised an error while being traced",
                           "run the model eagerly on the same inputs", "RuntimeError: shape mismatch"),
              TrialState.FAIL, cfg)
    b.add(config_attrs(CompileConfig("blocks", "aot_eager"), "search"), TrialState.PRUNED,
          CompileConfig("blocks", "aot_eager"))
    return b.study


def stay_eager_study(path: Path):
    """Compiling is faster per step but the scored run is too short to pay the compile back."""
    b = Builder(path, name="short", steps=100)
    eager = CompileConfig(target="none")
    b.add(ok_attrs(eager, "eager", 1.0, 0.0, 160.0, step_time_s=EAGER_STEP, total_time_s=100 * EAGER_STEP))
    for cfg, speedup, compile_s, role in ((CompileConfig(), 1.12, 17.0, "plain"),
                                          (CompileConfig("whole", "aot_eager"), 1.01, 3.0, "search")):
        attrs = ok_attrs(cfg, role, speedup, compile_s, 180.0)
        attrs["total_time_s"] = compile_s + 100 * attrs["step_time_s"]
        b.add(attrs, cfg=cfg if role == "search" else None)
    return b.study
