"""The line a trial prints in the terminal names what it came to, in words that match its state."""
from tuner.progress import outcome


def test_a_pruned_trial_says_pruned_and_why_never_failed_none():
    line = outcome({"status": "pruned", "pruned_reason": "the compile alone already exceeds the best total"})
    assert line == "pruned: the compile alone already exceeds the best total"
    assert "None" not in outcome({"status": "pruned"})


def test_failed_and_measured_trials():
    assert outcome({"status": "failed", "failure_category": "timeout", "failure_explanation": "too slow"}) == \
        "failed: timeout (too slow)"
    assert outcome({"status": "failed"}) == "failed: no result"
    assert outcome({"status": "ok", "speedup": 1.5, "compile_time_s": 2.0, "total_time_s": 10.0}) == \
        "1.50x, compile 2.0 s, total 10.0 s"
