"""The line a trial prints in the terminal names what it came to, in words that match its state."""
from tuner.run.progress import outcome


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


def test_every_state_a_trial_ends_in_has_its_own_words():
    assert outcome({"status": "ok", "speedup": 1.5, "duplicate_of": 3}) == \
        "duplicate of trial #3: the same config is measured once"
    assert outcome({"not_searched": "blocks: two trials under 1.05x"}) == "left out: blocks: two trials under 1.05x"
    assert outcome({"status": "failed", "interrupted": True}) == "interrupted: measured again when the run resumes"
    # a config timed alone (confirmation) has no in-process speedup: its figures, without one
    assert outcome({"status": "ok", "speedup": None, "compile_time_s": 2.0, "total_time_s": 10.0}) == \
        "compile 2.0 s, total 10.0 s"
