"""Steady-step timing: the input schedule in arrival order, side by side or alone; glibc's heap pinned."""
import json
import subprocess
import sys

import torch
from torch import nn

from tuner.core.config import CompileConfig
from tuner.measure.mix import timing_mix
from tuner.measure.steps import Step
from tuner.measure.timing import GC_ENV, SETTLING_PAIRS, time_steps
from tuner.system.heap import ENV, PINNED_NOTE


class Recording(nn.Module):
    """A real model that notes the batch size of every call, and whether it ran compiled."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.calls: list[tuple[int, bool]] = []

    def forward(self, x):
        self.note(x)
        return self.linear(x)

    @torch.compiler.disable
    def note(self, x) -> None:
        # run outside the graph on every call; a compiled forward is an instance attribute, which an
        # eager step swaps for the class's own forward bound to the module (steps.py)
        own = getattr(vars(self).get("forward"), "__func__", None) is type(self).forward
        self.calls.append((x.shape[0], "forward" in vars(self) and not own))


class Workload:
    build_optimizer = None
    loss_fn = None


def _step_over(schedule_sizes):
    model = Recording()
    step = Step(model, "infer", Workload())
    schedule = [(torch.randn(n, 4),) for n in schedule_sizes]
    return model, step, schedule, timing_mix(schedule[0], schedule)


def test_the_schedule_is_timed_in_arrival_order_step_by_step_on_both_sides_and_covered_whole():
    sizes = [1, 2, 1, 3, 2, 5, 1, 1, 2, 3, 1, 2]  # 4 distinct sizes: windows of at least 8 steps
    model, step, schedule, mix = _step_over(sizes)
    step.compile(CompileConfig(backend="eager"))
    timing = time_steps(step, mix, schedule, rounds=3, measure_seconds=0.0, estimates=[1e-3] * len(mix),
                        device="cpu")
    settling = 2 * SETTLING_PAIRS  # untimed steps of both sides on the first input, A B B A
    assert model.calls[:settling] == [(1, False), (1, True), (1, True), (1, False)] * (SETTLING_PAIRS // 2)
    calls = model.calls[settling:]
    # three windows of 8 steps that follow on from each other (wrapping round the 12 inputs), in
    # the schedule's order, each input stepped on both sides, which goes first flipped each step
    windows = [[n for n, _ in calls[i:i + 16:2]] for i in range(0, len(calls), 16)]
    assert windows == [sizes[:8], sizes[8:] + sizes[:4], sizes[4:12]]
    assert [n for n, _ in calls[::2]] == [n for n, _ in calls[1::2]]
    firsts = [compiled for _, compiled in calls[::2]]
    assert firsts == [(r + k) % 2 == 1 for r in range(3) for k in range(8)]  # eager, compiled, eager, ...
    assert all(a != b for (_, a), (_, b) in zip(calls[::2], calls[1::2]))
    figures = timing.figures()
    assert figures["arrival_order"] and figures["timing"] == "beside"
    assert len(figures["round_ratios"]) == 3 and figures["speedup"] > 0
    assert sorted(e["input"] for e in figures["mix"]) == sorted(e.label for e in mix)  # every size was timed


def test_alone_times_only_the_configs_own_side():
    model, step, schedule, _ = _step_over([2])
    mix = timing_mix(schedule[0], None)
    timing = time_steps(step, mix, None, rounds=2, measure_seconds=0.0, estimates=[1e-3] * len(mix), device="cpu",
                        alone=True)
    figures = timing.figures()
    assert figures["timing"] == "alone" and figures["eager_step_s"] is None and figures["speedup"] is None
    assert figures["step_s"] > 0 and figures["round_ratios"] == [None, None]
    assert len(model.calls) - SETTLING_PAIRS == figures["timed_steps"] == 2 * 3  # no eager block


def test_the_collector_is_off_while_timing_unless_the_switch_leaves_it_on(monkeypatch):
    import gc

    seen, collections = {}, {}
    for mode in ("", "on"):
        model, step, schedule, _ = _step_over([2])
        mix = timing_mix(schedule[0], None)
        monkeypatch.setenv(GC_ENV, mode)
        monkeypatch.setattr(model, "note", lambda x, m=mode: seen.setdefault(m, set()).add(gc.isenabled()))
        timing = time_steps(step, mix, None, rounds=1, measure_seconds=0.0, estimates=[1e-3], device="cpu",
                            alone=True)
        collections[mode] = timing.figures()["timing_gc_collections"]
        assert gc.isenabled() and not any(c.__name__ == "note" for c in gc.callbacks)  # as it was before
    assert seen == {"": {False}, "on": {True}}
    assert collections[""] == 0


def test_a_trial_process_pins_the_heap_and_says_so(tmp_path, workloads):
    """tuned_on comes from the trial's environment: ``heap`` is what glibc was set to."""
    from tuner.core.spec import TrialSpec

    out = {}
    for heap in ("pinned", "default"):
        spec = TrialSpec(workload=str(workloads / "mlp.py"), config={"target": "none"}, rounds=1,
                         measure_seconds=0.05, heap=heap)
        spec_path, out_path = tmp_path / f"{heap}.json", tmp_path / f"{heap}.out.json"
        spec_path.write_text(json.dumps(vars(spec)))
        subprocess.run([sys.executable, "-m", "tuner.measure", str(spec_path), str(out_path)], check=True, timeout=300)
        out[heap] = json.loads(out_path.read_text())["environment"]["heap"]
    assert out == {"pinned": PINNED_NOTE, "default": "default"}


def test_the_env_export_carries_the_pinned_heap():
    from tuner.export import export

    tuned = {"verdict": "compile", "config": {"target": "whole", "backend": "inductor"},
             "tuned_on": {"heap": PINNED_NOTE, "device": "cpu"}}
    variables = export(tuned, "env")["variables"]
    assert {k: variables[k] for k in ENV} == ENV
    tuned["tuned_on"]["heap"] = "default"
    assert not set(ENV) & set(export(tuned, "env")["variables"])
