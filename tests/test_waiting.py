"""Searched configs waiting for their turn in the race (tuner/decide/waiting.py, ``Race.admit``):
while a candidate beyond plain compile races undecided against it, the search's next configs wait,
their search trials kept, and join best first when it is decided. Processes are simulated with
known speedups, as tests/test_race.py does."""
import pytest

from tests.test_race import SCORING, beside_plain, race
from tuner.core.config import PLAIN_COMPILE, CompileConfig
from tuner.decide.confirm import CONFIRM_TIMING_SHARE, join_searched
from tuner.decide.rounds import MIN_ROUNDS, PAIRED_PER_ROUND
from tuner.decide.waiting import SCREENED
from tuner.study._attrs import trial_attrs

TIED = CompileConfig(options={"cpp_wrapper": True})
FAST = CompileConfig(options={"freezing": True})
FASTER = CompileConfig(target="blocks")


def search_trial(config: CompileConfig, speedup: float, plain: float) -> dict:
    """A search trial timed as a race process: eager and plain compile stepped beside the config."""
    result = {"status": "ok", "correct": True, "timing": "beside", "step_s": 0.01 / speedup,
              "step_mean_s": 0.01 / speedup, "eager_step_s": 0.01, "eager_step_mean_s": 0.01, "speedup": speedup,
              "compile_time_s": 30.0, "timing_share": CONFIRM_TIMING_SHARE, "rival": PLAIN_COMPILE.to_dict(),
              "rival_step_s": 0.01 / plain, "rival_step_mean_s": 0.01 / plain, "rival_speedup": speedup / plain,
              "rival_compile_s": 4.0}
    return trial_attrs(config, "search", result, SCORING)


def opened(speedups: dict[str, float], lines: list[str]):
    r = race(beside_plain(speedups), per_round=PAIRED_PER_ROUND, beside_plain=True)
    r.log = lines.append
    r.join([PLAIN_COMPILE], cold={PLAIN_COMPILE.key(): 30.0})
    assert r.run(until=MIN_ROUNDS)["verdict"] == "compile"
    return r


def tied_racing_fast_waiting(lines: list[str], plain: float = 1.3):
    """A race whose first candidate ties plain compile and races undecided; the next, 10 % faster
    than plain compile, waits for its turn."""
    speedups = {PLAIN_COMPILE.key(): plain, TIED.key(): plain, FAST.key(): plain * 1.10}
    r = opened(speedups, lines)
    assert join_searched(r, search_trial(TIED, plain, plain), SCORING, lines.append)
    assert not join_searched(r, search_trial(FAST, plain * 1.10, plain), SCORING, lines.append)
    return r


def test_a_searched_config_waits_while_one_races_undecided_and_joins_with_its_trial_when_that_one_is_decided():
    lines: list[str] = []
    r = tied_racing_fast_waiting(lines)
    assert [w.config.key() for w in r.waiting] == [FAST.key()] and FAST.key() not in r.records
    assert any(line.strip().startswith(f"{FAST.describe()} waits to race (1.10x plain") for line in lines)
    d = r.run()
    # the tie was decided (and dropped), then the waiting one raced, its search trial one of its processes
    assert r.records[TIED.key()].dropped and not r.waiting
    record = r.records[FAST.key()]
    assert record.joined > r.records[TIED.key()].joined + MIN_ROUNDS - 1
    assert record.processes == PAIRED_PER_ROUND * record.rounds
    assert d["against_plain"][FAST.key()]["zone"] == "beats"
    assert "waiting" not in d


def test_the_waiting_config_with_the_lowest_total_as_its_trial_read_it_joins_first():
    lines: list[str] = []
    plain = 1.3
    speedups = {PLAIN_COMPILE.key(): plain, TIED.key(): plain, FAST.key(): plain * 1.05, FASTER.key(): plain * 1.2}
    r = opened(speedups, lines)
    assert join_searched(r, search_trial(TIED, plain, plain), SCORING, lines.append)
    assert not join_searched(r, search_trial(FAST, plain * 1.05, plain), SCORING, lines.append)
    assert not join_searched(r, search_trial(FASTER, plain * 1.2, plain), SCORING, lines.append)
    r.run(until=r.done + 1)
    assert [w["config_label"] for w in r.decision["waiting"]] == [FASTER.describe(), FAST.describe()]
    r.run()
    assert FASTER.key() in r.records, lines
    assert FAST.key() not in r.records or r.records[FAST.key()].joined > r.records[FASTER.key()].joined


def test_no_config_joins_after_a_look_spent_the_error_rate():
    lines: list[str] = []
    plain = 1.3
    r = tied_racing_fast_waiting(lines, plain)
    r.spent = r.done  # as a --budget's last look leaves it
    assert r.admit() == [] and FAST.key() not in r.records
    # its trial's reading against plain compile, times plain compile's speedup as the race measured it
    assert r.waiting and r.waiting[0].total_s == pytest.approx(
        30.0 + SCORING.steps * SCORING.eager_step_s / (plain * 1.10), rel=0.02)


def test_the_answer_and_the_verdict_say_which_searched_configs_were_not_raced():
    from tuner.report._verdict_text import _against_plain_facts, search_words

    m = {"search": {"configs_searched": 6, "configs_in_space": 12, "configs_raced": 3,
                    "not_raced": [{"config_label": FAST.describe(),
                                   "reading": "1.01x plain torch.compile's steps in its search trial"}]}}
    assert search_words(m) == "searched 6 of 12 configs (1 of them not raced)"
    # the bound on what the rest could save is the raced ones' only: the others have no interval
    m["beyond_plain"] = {"config_label": TIED.describe(), "speedup": 1.0, "speedup_interval": [0.98, 1.02],
                         "most_any_saves_s": 36.8}
    assert search_words(m).endswith("undecided against plain; none raced saves more than 36.8 s over plain")
    facts = dict((name, (value, why)) for name, value, why in _against_plain_facts(m))
    reading = facts["searched, not raced"][0]
    assert reading == f"{FAST.describe()}: 1.01x plain torch.compile's steps in its search trial"


def test_once_the_race_has_an_answer_the_search_measures_four_configs_before_the_race_takes_the_best(
        tmp_path, workloads, spaces, monkeypatch):
    # A 2x lead at +-1 %: the opening decides at round 2. The search's first three configs wait, no
    # round between them; the fourth ends the screen and the best of the four joins (the same
    # reading here: the first searched), the others waiting for their turn.
    from tests.test_budget_runs import run_on_fake_clock

    result, best, study, lines = run_on_fake_clock(tmp_path, workloads, spaces, monkeypatch, 600.0, speedup=2.0,
                                                   spread=0.01)
    searched = [i for i, line in enumerate(lines) if line.startswith("  search ")]
    held = [i for i, line in enumerate(lines) if "the search measures more configs first" in line]
    joins = [i for i, line in enumerate(lines) if " joins the race (round " in line]
    assert len(searched) >= SCREENED and len(held) == SCREENED - 1 and joins, lines
    assert joins[0] > searched[SCREENED - 1]
    rounds_between = [line for line in lines[searched[0]:searched[SCREENED - 1]] if "race round" in line]
    assert rounds_between == [], lines
    assert best["verdict"] == "compile"


def test_a_config_its_trial_read_well_behind_plain_compile_in_the_same_process_does_not_wait_to_race():
    # On the README example two `blocks` configs read 0.80x plain compile's steps in their own
    # trials, yet their speedups against eager, widened by four paired spreads, reached plain
    # compile's: they were raced in turn. The reading against plain compile stepped beside them
    # decides; the reading against eager only where the trial stepped no plain compile.
    lines: list[str] = []
    plain = 1.3
    r = opened({PLAIN_COMPILE.key(): plain}, lines)
    behind = search_trial(FASTER, plain, plain) | {"rival_speedup": 0.80}
    assert not join_searched(r, behind, SCORING, lines.append)
    assert FASTER.key() not in r.records and not r.waiting
    assert "0.80x plain compile's steps, stepped in the same process" in lines[-1]
    # the same eager reading without a plain compile beside it may still win: it waits or races
    alone = {k: v for k, v in behind.items() if not k.startswith("rival")}
    assert join_searched(r, alone, SCORING, lines.append) or r.waiting
    # a trial that reads plain compile's steps, or near, is raced
    assert join_searched(r, search_trial(FAST, plain * 0.98, plain), SCORING, lines.append) or r.waiting


@pytest.mark.parametrize("reads", [1.03, 0.99])
def test_a_candidate_near_a_tie_with_plain_yields_its_slot_only_to_a_waiting_one_that_read_better(reads):
    # On the zoo's ViT-B/16 `cpp_wrapper`, at 1.00x plain compile's steps and a near tie at most,
    # held the one slot for five rounds while two configs at 1.02x in their search trials waited.
    lines: list[str] = []
    plain = 1.3
    waiting = CompileConfig(options={"freezing": True, "cpp_wrapper": True})
    speedups = {PLAIN_COMPILE.key(): plain, TIED.key(): plain, waiting.key(): plain * reads}
    r = opened(speedups, lines)
    assert join_searched(r, search_trial(TIED, plain, plain), SCORING, lines.append)
    assert not join_searched(r, search_trial(waiting, plain * reads, plain), SCORING, lines.append)
    joined = r.records[TIED.key()].joined
    while r.done < joined + MIN_ROUNDS:
        r.run(until=r.done + 1)
    row = r.decision["against_plain"][TIED.key()]
    margin = row["margin_s"]
    high = row["saving_interval_s"][1]
    assert high is not None and high < 2 * margin, (row, r.done, joined)  # near a tie at best, after two own rounds
    if reads > 1.0:
        assert "yields its slot" in r.records[TIED.key()].dropped
        assert waiting.key() in r.records and r.records[waiting.key()].joined == r.done
    else:  # what waits read no better than the one racing: it keeps its slot
        assert not r.records[TIED.key()].dropped and TIED.key() in {c.key() for c in r.racing}
        assert [w.config.key() for w in r.waiting] == [waiting.key()]


def test_the_races_choice_keeps_its_slot_near_a_tie():
    # On the zoo's ViT-B/16 (af8bc3f) `cpp_wrapper`, the only config decided against eager, yielded;
    # the looks after could not tell and the verdict named the dropped config. The race's choice
    # keeps its slot, whatever waits.
    from tuner.decide.waiting import Waiting

    lines: list[str] = []
    plain = 1.3
    r = opened({PLAIN_COMPILE.key(): plain, TIED.key(): plain}, lines)
    assert join_searched(r, search_trial(TIED, plain, plain), SCORING, lines.append)
    while r.done < r.records[TIED.key()].joined + MIN_ROUNDS:
        r.run(until=r.done + 1)
    row = dict(r.decision["against_plain"][TIED.key()], saving_interval_s=[-1.0, 1.0], speedup=1.0)
    r.waiting.append(Waiting(FAST, None, 0.0, "1.05x plain torch.compile's steps in its search trial", 1.05))
    r.decision["choice"] = PLAIN_COMPILE.to_dict()
    assert r._reads_better(row, TIED.key()) is r.waiting[0]
    r.decision["choice"] = TIED.to_dict()
    assert r._reads_better(row, TIED.key()) is None
