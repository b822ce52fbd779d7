"""Error rates at the decision's edges (issue 45), on simulated races through the real code
(tests/simulated_races.py): eager against itself, a speedup whose compile eats its whole saving,
heavy tails, an outlier process, a hiccup on one side of a paired process, and A/A races.

Every rate is held two-sided, so that a rule made too conservative fails as one made too liberal
does. Two kinds of reference:

- where the race's error rate has a value, the nominal one (:func:`simulated_races.within`):
  eager against itself with no tie margin (``simulated_races.A_A``) decides at all exactly as
  often as plain compile's share of 5 % allows, 2.5 %; the same check fails the rule set at 90 %
  and at 99.9 % (:func:`test_the_exact_check_fails_a_rule_made_too_liberal_or_too_conservative`);
- where the nominal rate is a bound that the rule keeps below by design (a tie that stops the
  race before a look can err, a second candidate holding a share, a compile's uncertainty added
  to a saving's), the rule's own rate measured on seeds the tests do not use
  (:func:`simulated_races.agrees`; ``python benchmarks/error_rates.py --races 1000 --first-seed
  10000``). A rate of a few in 700 cannot be told from half of it at a test's size: there the
  check is one-sided in effect, and says so.
"""
from __future__ import annotations

import pytest
from simulated_races import A_A, TUNED, agrees, compile_or_slower, holds, races, saving_null, tally, within

from tuner.core.config import PLAIN_COMPILE

COVER = {PLAIN_COMPILE.key(): 1.05, TUNED.key(): 1.25}
#: Races per exact check: a halved 2.5 % fails 93 % of seeds, a doubled one all but 0.1 %.
EXACT_RUNS = 2000
UNPAIRED = dict(paired=False, per_round=1, spread=0.05, inner=0.0)

#: The rule's own rates, ``(count, races)`` on seeds from 10,000 on (``python
#: benchmarks/error_rates.py --races N --first-seed 10000``): saving-null's false compile and
#: missed intervals (speedup or saving), the intervals' misses under t (3 df) tails and one
#: process 30 % slow, the two A/A races' false decisions.
REFERENCE = {
    "saving-null 1.05": ((8, 4000), (101, 4000)),
    "saving-null 1.25": ((7, 4000), (113, 4000)),
    "intervals, student-t-3-df": (10, 1000),
    "intervals, one-process-30pc-slow": (36, 1000),
    "a/a eager": (78, 4000),
    "a/a plain again": (4, 1000),
}

# ----------------------------------------------------------------------------- eager against itself, exactly


@pytest.mark.parametrize("setting", [{}, dict(cut=4), UNPAIRED], ids=["paired", "cut-at-round-4", "unpaired"])
def test_eager_against_itself_is_decided_at_all_as_often_as_plain_compiles_share_allows(setting):
    """Paired as a run times it, or cut by a --budget after round 4 (that look spending what is
    left), or unpaired (the spread pooled with the rounds' effects, where the boundaries' count of
    information by degrees of freedom is an approximation): 2.5 %, two-sided. At 95 % on seeds
    10,000-11,999: 2.25 %, 1.85 % and 2.50 %."""
    wrong = tally(compile_or_slower, EXACT_RUNS, **{**A_A, **setting})
    assert within(wrong, EXACT_RUNS, 0.025), wrong / EXACT_RUNS


@pytest.mark.parametrize("confidence", [0.90, 0.999], ids=["liberal-90", "conservative-99.9"])
def test_the_exact_check_fails_a_rule_made_too_liberal_or_too_conservative(confidence):
    """The same races, their intervals at 90 % or 99.9 % together: about 5 % and 0.05 %."""
    wrong = tally(compile_or_slower, EXACT_RUNS, confidence, **A_A)
    assert not within(wrong, EXACT_RUNS, 0.025), wrong / EXACT_RUNS


#: What the rule does where the model is wrong, eager against itself as above, 2,000 races on
#: seeds 10,000-11,999: Student's t (3 df) errs a little less than nominal (the t statistic's tails
#: are lighter than its table's); a hiccup on one compiled side of one of the first six processes
#: (a collector pause in the compiled model only: the pair does not cancel it) much less, as it
#: widens the spread more than it moves the mean (and a true speedup is decided later); one
#: unpaired process 30 % slow, the same. Never more than nominal.
MODEL_WRONG = {
    "student-t-3-df": (dict(tails=3), (40, 2000)),
    "a-30pc-hiccup-on-one-compiled-side": (dict(hiccup=1.3), (5, 2000)),
    "one-unpaired-process-30pc-slow": (dict(UNPAIRED, outlier=1.3), (34, 2000)),
}


@pytest.mark.parametrize("name", sorted(MODEL_WRONG))
def test_heavy_tails_a_one_sided_hiccup_and_an_outlier_make_the_race_err_less_not_more(name):
    noise, reference = MODEL_WRONG[name]
    runs = 1000
    wrong = tally(compile_or_slower, runs, **{**A_A, **noise})
    assert agrees(wrong, runs, reference) and wrong < 25, wrong / runs


# ----------------------------------------------------------------------------- the saving


@pytest.mark.parametrize("speedup", [1.05, 1.25])
def test_a_saving_of_nothing_is_decided_far_less_often_than_nominal(speedup):
    """The speedup's compile eats its whole saving, the race otherwise exact (one candidate, no
    tie margin): 0.3 % against 2.5 % on seeds 10,000-11,999, both speedups. The saving's interval
    adds the compile mean's, a t quantile at the few degrees of freedom of the cold compiles and a
    look's confidence, to the steps' in quadrature (MOVER), which is conservative where one part's
    interval is that heavy-tailed: power a saving's decision leaves on the table (issue 59)."""
    runs = 1000
    wrong = tally(compile_or_slower, runs, **dict(saving_null(speedup), finalists=(), tie_margin=0.0, per_round=3,
                                                 rounds=8))
    assert agrees(wrong, runs, (6, 2000)), wrong / runs


@pytest.mark.parametrize("speedup", [1.05, 1.25])
def test_a_speedup_whose_compile_eats_its_whole_saving_is_called_compile_at_the_rules_rate(speedup):
    # with the warm compiles pooled into the cold ones' spread (until 2026-12-04), the 1.25x was
    # called compile in 56 of these 700 races and its saving's interval missed zero in 126
    runs, case = 700, saving_null(speedup)
    ds = races(runs, **case)
    false = sum(d["verdict"] == "compile" for d in ds)
    missed = sum(not holds(d, case["true"], saving=0.0) for d in ds)
    compiled, miss = REFERENCE[f"saving-null {speedup}"]
    assert agrees(false, runs, compiled), false  # one-sided in effect: 0.2 %, a few in 1,000
    assert agrees(missed, runs, miss), missed


# ----------------------------------------------------------------------------- the race as run

@pytest.mark.parametrize("name", ["student-t-3-df", "one-process-30pc-slow"])
def test_heavy_tails_and_an_outlier_process_keep_the_intervals_at_the_rules_rate(name):
    """Every stated interval holds its truth (1.05x and 1.25x, 8 % apart, unpaired): under t tails
    they miss 1.0 % of the time, with one process 30 % slow 3.6 % (it biases the estimate it lands
    in, and intervals are stated where a race stops, often on that estimate)."""
    runs = 400
    noise = dict(tails=3) if name.startswith("student") else dict(outlier=1.3)
    missed = sum(not holds(d, COVER) for d in races(runs, true=COVER, spread=0.08, **noise))
    assert agrees(missed, runs, REFERENCE[f"intervals, {name}"]), missed


def test_a_a_eager_under_another_name_is_rarely_called_compile_or_slower():
    """Plain compile that is eager under another name (1.0x, no compile), with the tie margin: a
    tie or undecided are right; compile and slower are the two false decisions, 1.95 % on seeds
    10,000-13,999 (below 2.5 %: a tie stops a race before a later look can err)."""
    runs = 1000
    ds = races(runs, true={PLAIN_COMPILE.key(): 1.0}, finalists=(), spread=0.15, inner=0.03, paired=True)
    false = sum(compile_or_slower(d) for d in ds)
    assert agrees(false, runs, REFERENCE["a/a eager"]), false


def test_a_a_a_finalist_that_is_plain_compile_again_is_rarely_said_to_beat_it():
    """The finalist is plain compile under another name (the same 1.2x and 20 s compile): it may
    be chosen where plain compile is not itself proven yet, but never said to beat it (chosen
    though plain compile is proven) more than its share allows: 0.4 % on seeds 10,000-10,999
    (one-sided in effect: a few in 700)."""
    runs = 700
    ds = races(runs, true={PLAIN_COMPILE.key(): 1.2, TUNED.key(): 1.2}, spread=0.05, compile_s=20.0, cold=0.05,
               warm=0.015)
    plain = PLAIN_COMPILE.describe()
    beat = sum(d["choice"] == TUNED.to_dict() and next(c for c in d["candidates"] if c["config_label"] == plain)
               .get("zone") == "compile" for d in ds)
    assert agrees(beat, runs, REFERENCE["a/a plain again"]), beat


def test_a_late_finalist_noisier_than_plain_compile_is_said_to_beat_it_at_its_own_share():
    """Issue 57's review: a finalist joining after the opening's first look, its paired spread three
    times plain compile's, truly plain compile again (the same 1.3x, no compile cost). On its own
    spread, at its share of the error rate (the first joiner's quarter of 5 %: 0.625 % one-sided for
    "beats"), over its own looks or a --budget's cut at round 5. Twice as noisy, 2000 races measured
    12 and 11 (0.6 %, 0.3-1.0 %). Three times, these 1000 seeds count 7 and 9 (6 and 8 with the
    looks' z boundaries, until 2026-12-07); with the spread pooled over every candidate (as until
    2026-12-07) 9 and 15. Two-sided at the nominal 0.625 %: at least 1 and at most 13 of 1000 (a
    halved or doubled rate is told at 1,000 races only now and then: 6 expected)."""
    runs = 1000
    for cut in (None, 5):
        false = sum(late_joiner(seed, cut, noisier=3.0)[0] == "beats" for seed in range(runs))
        assert within(false, runs, 0.00625), (cut, false)


def late_joiner(seed: int, cut: int | None = None, noisier: float = 2.0) -> tuple[str | None, dict]:
    """A race that plain compile opens (1.3x, paired at 1 %), TUNED joining at round 2 as plain
    compile again with ``noisier`` times its paired spread; ``cut``: no round fits after that one."""
    from simulated_races import Machine

    from tuner.core.score import Scoring
    from tuner.decide.race import Race
    from tuner.decide.rounds import PAIRED_PER_ROUND

    same = {PLAIN_COMPILE.key(): 1.3, TUNED.key(): 1.3}
    m = Machine(same, 0.15, seed, inner={PLAIN_COMPILE.key(): 0.01, TUNED.key(): 0.01 * noisier})
    r = Race(Scoring(steps=100_000, eager_step_s=0.01), m, rounds=18, heap_apart=False, paired=True,
             log=lambda line: None, per_round=PAIRED_PER_ROUND)
    r.join([PLAIN_COMPILE])
    r.run(until=2)
    r.join([TUNED])
    d = r.run((lambda n, ran: r.done < cut) if cut else None)
    return ((d.get("against_plain") or {}).get(TUNED.key()) or {}).get("zone"), d
