"""Error rates at the decision's edges (issue 45), on simulated races through the real code
(tests/simulated_races.py): a speedup whose compile eats its whole saving, heavy tails, an
outlier process and A/A races, each rate held under the count that tells its nominal rate from a
doubled one (:func:`simulated_races.most`), so that a doubled error rate fails.
"""
from __future__ import annotations

import pytest
from simulated_races import TUNED, holds, most, races, saving_null

from tuner.core.config import PLAIN_COMPILE

NOTHING = {PLAIN_COMPILE.key(): 1.0, TUNED.key(): 1.0}
COVER = {PLAIN_COMPILE.key(): 1.05, TUNED.key(): 1.25}


@pytest.mark.parametrize("speedup", [1.05, 1.25])
def test_a_speedup_whose_compile_eats_its_whole_saving_is_called_compile_at_most_2_5_percent_of_the_time(speedup):
    # with the warm compiles pooled into the cold ones' spread (until 2026-12-04), the 1.25x was
    # called compile in 56 of these 700 races and its saving's interval missed zero in 126
    runs, case = 700, saving_null(speedup)
    ds = races(runs, **case)
    false = sum(d["verdict"] == "compile" for d in ds)
    assert false <= most(runs, 0.025), false
    missed = sum(not holds(d, case["true"], saving=0.0) for d in ds)
    assert missed <= most(runs, 0.05), missed


@pytest.mark.parametrize("noise", [dict(tails=3), dict(outlier=1.3)], ids=["student-t-3-df", "one-process-30pc-slow"])
def test_heavy_tails_and_an_outlier_process_keep_the_false_compile_rate_and_the_intervals(noise):
    runs = 700
    false = sum(d["verdict"] == "compile" for d in races(runs, true=NOTHING, spread=0.05, **noise))
    assert false <= most(runs, 0.025), false
    missed = sum(not holds(d, COVER) for d in races(400, true=COVER, spread=0.08, **noise))
    assert missed <= most(400, 0.05), missed


def test_a_a_eager_under_another_name_is_rarely_called_compile_or_slower():
    """Plain compile that is eager under another name (1.0x, no compile): a tie or undecided are
    right; compile and slower are the two false decisions, 5 % together at most."""
    runs = 400
    ds = races(runs, true={PLAIN_COMPILE.key(): 1.0}, finalists=(), spread=0.15, inner=0.03, paired=True)
    false = sum(d["verdict"] == "compile" or d.get("zone") == "slower" for d in ds)
    assert false <= most(runs, 0.05), false


def test_a_a_a_finalist_that_is_plain_compile_again_is_rarely_said_to_beat_it():
    """The finalist is plain compile under another name (the same 1.2x and 20 s compile): it may
    be chosen where plain compile is not itself proven yet, but never said to beat it (chosen
    though plain compile is proven) more than 2.5 % of the time."""
    runs = 700
    ds = races(runs, true={PLAIN_COMPILE.key(): 1.2, TUNED.key(): 1.2}, spread=0.05, compile_s=20.0, cold=0.05,
               warm=0.015)
    plain = PLAIN_COMPILE.describe()
    beat = sum(d["choice"] == TUNED.to_dict() and next(c for c in d["candidates"] if c["config_label"] == plain)
               .get("zone") == "compile" for d in ds)
    assert beat <= most(runs, 0.025), beat


def test_a_late_finalist_noisier_than_plain_compile_is_said_to_beat_it_at_its_own_share():
    """Issue 57's review: a finalist joining after the opening's first look, its paired spread three
    times plain compile's, truly plain compile again (the same 1.3x, no compile cost). On its own
    spread, at its share of the error rate (the first joiner's quarter of 5 %: 0.625 % one-sided for
    "beats"), over its own looks or a --budget's cut at round 5. Twice as noisy, 2000 races measured
    12 and 11 (0.6 %, 0.3-1.0 %). Three times, these 1000 seeds count 6 and 8; with the spread pooled
    over every candidate (as until 2026-12-07) 9 and 15. Two-sided: at least 1 and at most 13 of 1000
    (at the nominal 6.25, each end holds with more than 99.5 %)."""
    runs = 1000
    for cut in (None, 5):
        false = sum(late_joiner(seed, cut, noisier=3.0)[0] == "beats" for seed in range(runs))
        assert 1 <= false <= 13, (cut, false)


def late_joiner(seed: int, cut: int | None = None, noisier: float = 2.0) -> tuple[str | None, dict]:
    """A race that plain compile opens (1.3x, paired at 1 %), TUNED joining at round 2 as plain
    compile again with ``noisier`` times its paired spread; ``cut``: no round fits after that one."""
    from simulated_races import Machine

    from tuner.core.score import Scoring
    from tuner.decide.race import PAIRED_PER_ROUND, Race

    same = {PLAIN_COMPILE.key(): 1.3, TUNED.key(): 1.3}
    m = Machine(same, 0.15, seed, inner={PLAIN_COMPILE.key(): 0.01, TUNED.key(): 0.01 * noisier})
    r = Race(Scoring(steps=100_000, eager_step_s=0.01), m, rounds=18, heap_apart=False, paired=True,
             log=lambda line: None, per_round=PAIRED_PER_ROUND)
    r.join([PLAIN_COMPILE])
    r.run(until=2)
    r.join([TUNED])
    d = r.run((lambda n, ran: r.done < cut) if cut else None)
    return ((d.get("against_plain") or {}).get(TUNED.key()) or {}).get("zone"), d
