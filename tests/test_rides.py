"""Plain compile riding in the candidates' processes (tuner/decide/race.py ``Race.rides``,
tuner/decide/rides.py): once candidates beyond plain compile race, each of their
processes steps plain compile beside eager, so plain compile runs no processes of its own and is
decided on theirs. Processes are simulated with known speedups, as tests/test_race.py does;
tests/test_rival.py steps three sides in real processes."""
import random

from tests.test_race import TUNED, beside_plain, race
from tuner.core.config import PLAIN_COMPILE
from tuner.decide.rounds import MIN_ROUNDS, PAIRED_PER_ROUND


def plain_of(decision: dict) -> dict:
    return next(c for c in decision["candidates"] if c["config"] == PLAIN_COMPILE.to_dict())


def three_sided(speedups: dict[str, float], process: float, spread: float, shift: float = 1.0,
                left_out: bool = False):
    """Paired processes ``process`` apart, steps ``spread`` noisy, whose rival (plain compile) reads
    ``shift`` times slower than in its own processes, or is left out of every one (``left_out``)."""
    rng = random.Random(0)

    def measure(cfg, label, round_=0, heap=None, reuse_cache=False, timing="alone", rival=None):
        step = 0.01 * rng.lognormvariate(0, process)
        result = {"status": "ok", "peak_memory_mb": 1.0, "timing": timing}
        if not cfg.compiles:
            return {**result, "step_s": step}
        result.update(step_s=step / speedups[cfg.key()] * rng.lognormvariate(0, spread), compile_time_s=30.0,
                      eager_step_s=step * rng.lognormvariate(0, spread))
        if rival is not None and left_out:
            result["rival_left_out"] = "the config hit Dynamo's recompile limit"
        elif rival is not None:
            result.update(rival=rival.to_dict(),
                          rival_step_mean_s=shift * step / speedups[rival.key()] * rng.lognormvariate(0, spread))
        return result

    return measure


def opened(speedups: dict[str, float], seed: int = 0, **kw):
    """A race beside plain compile after its opening's first look (MIN_ROUNDS rounds)."""
    r = race(beside_plain(speedups, seed=seed, **kw), per_round=PAIRED_PER_ROUND, beside_plain=True)
    r.join([PLAIN_COMPILE], cold={PLAIN_COMPILE.key(): 30.0})
    r.run(until=MIN_ROUNDS)
    return r


def test_once_a_candidate_races_plain_compile_runs_no_process_of_its_own_and_gains_every_one_of_its():
    speedups = {PLAIN_COMPILE.key(): 1.02, TUNED.key(): 1.02 * 1.10}
    r = opened(speedups)
    own = len(r.records[PLAIN_COMPILE.key()].steps)
    before = r.decision
    r.join([TUNED])
    # the candidate's three: no eager alone after round 2
    assert r.rides() and r.next_round_processes() == PAIRED_PER_ROUND
    d = r.run(until=r.done + MIN_ROUNDS)
    assert len(r.records[PLAIN_COMPILE.key()].steps) == own  # none of its own
    plain = plain_of(d)
    assert plain["rides"]["processes"] == PAIRED_PER_ROUND * MIN_ROUNDS and plain["rides"]["pooled"]
    assert d["spread_df"] >= before["spread_df"]
    # its interval against eager narrows with the rides (more processes, more degrees of freedom)
    lo0, hi0 = plain_of(before)["speedup_interval"]
    lo1, hi1 = plain["speedup_interval"]
    assert hi1 / lo1 < hi0 / lo0


def test_the_rides_leave_plain_compiles_estimate_where_the_truth_is():
    # plain compile 1.02x of eager, processes 10 % apart: its estimate from its own processes and
    # the rides stays within its interval of the truth over several seeds
    speedups = {PLAIN_COMPILE.key(): 1.02, TUNED.key(): 1.02 * 1.10}
    misses = 0
    for seed in range(10):
        r = opened(speedups, seed=seed)
        r.join([TUNED])
        lo, hi = plain_of(r.run(until=r.done + 3))["speedup_interval"]
        misses += not lo <= 1.02 <= hi
    assert misses <= 1


def test_a_candidate_whose_processes_leave_the_rival_out_gives_plain_compile_its_own_processes_back():
    speedups = {PLAIN_COMPILE.key(): 1.3, TUNED.key(): 1.3}
    r = race(three_sided(speedups, 0.05, 0.0, left_out=True), per_round=PAIRED_PER_ROUND, beside_plain=True)
    r.join([PLAIN_COMPILE], cold={PLAIN_COMPILE.key(): 30.0})
    r.run(until=MIN_ROUNDS)
    r.join([TUNED])
    assert r.rides()  # nothing says yet that its processes cannot hold plain compile
    r.run(until=r.done + 1)
    assert not r.rides() and r.next_round_processes() > PAIRED_PER_ROUND


def test_a_joiner_is_priced_without_plain_compiles_processes_where_it_will_carry_them():
    speedups = {PLAIN_COMPILE.key(): 1.3, TUNED.key(): 1.3}
    carried = opened(speedups)
    alone = race(beside_plain(speedups), per_round=PAIRED_PER_ROUND)  # no rival: plain compile runs its own
    alone.join([PLAIN_COMPILE], cold={PLAIN_COMPILE.key(): 30.0})
    alone.run(until=MIN_ROUNDS)
    cold, warm = carried.joiner_processes()
    assert (cold, warm) == (1, PAIRED_PER_ROUND * MIN_ROUNDS - 2)
    assert sum(alone.joiner_processes()) > cold + warm


def test_plain_compile_runs_its_own_first_rounds_before_it_rides():
    r = race(beside_plain({PLAIN_COMPILE.key(): 1.3, TUNED.key(): 1.3}), per_round=PAIRED_PER_ROUND,
             beside_plain=True)
    r.join([PLAIN_COMPILE], cold={PLAIN_COMPILE.key(): 30.0})
    r.run(until=1)
    r.join([TUNED])
    assert not r.rides(joining=True) and r.rides() is False
    assert r.next_round_processes() >= 2 * PAIRED_PER_ROUND


def test_a_candidate_whose_compile_is_within_the_margin_compiles_cold_once():
    from tuner.core.score import Scoring
    from tuner.decide.race import Race
    from tuner.decide.rounds import COLD_COMPILES

    speedups = {PLAIN_COMPILE.key(): 1.3, TUNED.key(): 1.3}
    for steps, colds in ((100_000, COLD_COMPILES), (10_000_000, 1)):  # 30 s of 1,000 s or of 100,000 s
        r = Race(Scoring(steps=steps, eager_step_s=0.01), beside_plain(speedups), rounds=12, heap_apart=False,
                 paired=True, log=lambda line: None, per_round=PAIRED_PER_ROUND, beside_plain=True)
        r.join([PLAIN_COMPILE], cold={PLAIN_COMPILE.key(): 30.0})
        r.run(until=MIN_ROUNDS)
        assert r.joiner_processes()[0] == colds - 1
        r.join([TUNED])
        joined = r.done
        while r.done < joined + MIN_ROUNDS:
            r.run(until=r.done + 1)
        assert len(r.cold_rounds[TUNED.key()]) == colds
        # plain compile's baseline compiled cold before the race: within the margin it is its one
        assert len(r.cold_rounds.get(PLAIN_COMPILE.key(), [])) == (COLD_COMPILES if colds > 1 else 0)



def test_rides_that_shift_plain_compiles_ratio_are_left_out_and_the_decision_says_why():
    # the third side makes plain compile read 10 % slower in the candidates' processes than in its
    # own, processes 2 % apart once paired: the rides are not pooled
    speedups = {PLAIN_COMPILE.key(): 1.3, TUNED.key(): 1.3}
    r = race(three_sided(speedups, 0.10, 0.02, shift=1.1), per_round=PAIRED_PER_ROUND, beside_plain=True)
    r.join([PLAIN_COMPILE], cold={PLAIN_COMPILE.key(): 30.0})
    r.run(until=MIN_ROUNDS)
    r.join([TUNED])
    d = r.run(until=r.done + MIN_ROUNDS)
    rides = plain_of(d)["rides"]
    assert rides["pooled"] is False and "a third side shifts the ratio" in rides["why"]
    low, high = rides["shift_interval"]
    assert high < 1.0 and low < 1 / 1.1 < high  # the rides read it about 1.1x slower
    lo, hi = plain_of(d)["speedup_interval"]
    assert lo < 1.3 < hi  # its own processes alone: its truth


def test_the_verdict_says_how_many_processes_plain_compile_rode_in_and_whether_they_were_pooled():
    from tuner.core.config import EAGER, TunedConfig
    from tuner.report import verdict_text

    m = {"confirmed": True, "reason": "a tie within 2%", "total_time_s": 1000.0, "eager_step_time_ms": 10.0,
         "confirm_rounds": 4, "plain_rides": {"processes": 6, "pooled": True},
         "looks_closed": "the look after round 4 spent what was left of the error rate: no round runs after it"}
    out = verdict_text(TunedConfig(EAGER, "stay_eager", m, {"device": "cpu", "threads": 2}), "b.yaml")
    assert "6 candidate process(es) stepped it beside eager" in out and "pooled with its own processes" in out
    assert "No round ran after it: the look after round 4 spent" in " ".join(out.split())
    m["plain_rides"] = {"processes": 6, "pooled": False, "why": "a third side shifts the ratio"}
    out = verdict_text(TunedConfig(EAGER, "stay_eager", m, {"device": "cpu", "threads": 2}), "b.yaml")
    assert "a third side shifts the ratio" in out


def test_a_config_searched_after_the_race_spent_its_error_rate_does_not_join_and_says_why():
    from tests.test_race import SCORING
    from tuner.core.config import CompileConfig
    from tuner.decide.confirm import CONFIRM_TIMING_SHARE, join_searched

    r = opened({PLAIN_COMPILE.key(): 1.3, TUNED.key(): 1.3})
    r.join([TUNED])  # racing: its own rounds still to come
    r.run(round_fits=lambda n, ran: False)  # the --budget cuts it: its last look spends what was left
    assert r.spent is not None
    later = CompileConfig(options={"cpp_wrapper": True})
    said = []
    trial = {"status": "ok", "correct": True, "config": later.to_dict(), "timing": "beside", "step_s": 0.01 / 1.3,
             "step_mean_s": 0.01 / 1.3, "eager_step_s": 0.01, "eager_step_mean_s": 0.01, "speedup": 1.3,
             "compile_time_s": 30.0, "timing_share": CONFIRM_TIMING_SHARE}
    assert not join_searched(r, trial, SCORING, said.append)
    assert later.key() not in r.records and "the race runs no more rounds" in said[-1]


def test_a_race_whose_look_spent_the_error_rate_promises_no_more_rounds():
    r = opened({PLAIN_COMPILE.key(): 1.3, TUNED.key(): 1.3})
    r.join([TUNED])
    assert r.promising()
    r.run(round_fits=lambda n, ran: False)  # the --budget cuts it: its last look spends what was left
    assert r.spent is not None and not r.promising()
