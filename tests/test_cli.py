"""The terminal summary states the verdict, and says when it is unconfirmed."""
from tuner.cli import _verdict_text as _text
from tuner.core.config import CompileConfig, TunedConfig


def _verdict_text(tuned: dict, out_dir) -> str:
    return _text(TunedConfig(CompileConfig.from_dict(tuned["config"]), tuned["verdict"], tuned["measured"]), out_dir)


def test_the_summary_says_an_unconfirmed_verdict_is_unconfirmed_and_why():
    measured = {"confirmed": False, "unconfirmed_because": "confirmation failed",
                "confirmation_error": "eager failed every round (crashed x2)", "speedup_vs_eager": 1.5,
                "compile_time_s": 2.0, "break_even_steps": 600, "total_time_s": 8.0, "eager_total_time_s": 10.0}
    text = _verdict_text({"verdict": "compile", "config": {"target": "whole"}, "measured": measured}, "out")
    first = text.splitlines()[0]
    assert first.startswith("verdict: compile with whole/inductor/default")
    assert first.endswith("[unconfirmed: confirmation failed (eager failed every round (crashed x2))]")
    eager = _verdict_text({"verdict": "stay_eager", "config": {"target": "none"},
                           "measured": {"confirmed": False, "unconfirmed_because": "--confirm 0", "total_time_s": 9.0}},
                          "out")
    assert "[unconfirmed: --confirm 0]" in eager.splitlines()[0]
    confirmed = dict(measured, confirmed=True, confirm_rounds=3, speedup_interval=[1.4, 1.6], reason="beats eager")
    assert "unconfirmed" not in _verdict_text({"verdict": "compile", "config": {}, "measured": confirmed}, "out")


def test_the_summary_says_whether_the_spread_is_between_processes_or_left_after_pairing():
    base = {"confirmed": True, "confirm_rounds": 4, "speedup": 1.2, "speedup_interval": [1.1, 1.3], "confidence": 0.95,
            "spread": 0.031, "spread_df": 9, "total_time_s": 8.0, "eager_total_time_s": 10.0, "reason": "saves"}
    alone = _verdict_text({"verdict": "compile", "config": {}, "measured": base}, "out")
    assert "processes differ by 3.1% (pooled over every process, 9 df)" in alone
    paired = _verdict_text({"verdict": "compile", "config": {},
                            "measured": dict(base, paired=True, process_spread=0.142)}, "out")
    assert "timed beside eager in its own processes, which differ by 3.1% once paired (pooled, 9 df)" in paired
    assert "processes of eager alone differ by 14.2%" in paired
