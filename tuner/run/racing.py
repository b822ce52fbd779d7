"""The run's race, phase by phase: opened after the baselines, fed by the search (each config the
search measures joins it), confirmed after the search, and each decided look written as the answer
so far. A mixin of :class:`~tuner.run.phases.Run`: these are its steps that talk to the race.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.config import PLAIN_COMPILE, TunedConfig
from ..core.durations import BUDGET_RAN_OUT, format_duration
from ..decide.confirm import confirm_finalists, join_searched, open_race
from ..decide.dropping import near_tie
from ..decide.race import MIN_ROUNDS, Race
from ..decide.search import Tuner
from ..decide.verdict import SKIPPED_ATTR
from ..decide.waiting import SCREENED
from ..space.search_space import SearchSpace
from ..study import StudyRun
from ..system.interrupts import check as stop_if_interrupted
from .clock import RunClock
from .options import TuneOptions

#: Every answer the run wrote, one JSON line each (:meth:`RaceSteps._keep_answer`).
ANSWERS = "answers.jsonl"


class RaceSteps:
    """The steps of a :class:`~tuner.run.phases.Run` that open, feed and confirm its race."""

    opts: TuneOptions
    log: Callable[[str], None]
    clock: RunClock
    space: SearchSpace
    out_dir: Path
    race: Race | None
    searched: bool
    study: Any
    tuner: Tuner
    run: StudyRun

    @property
    def main(self) -> bool:  # pragma: no cover - Run's
        raise NotImplementedError

    def write(self) -> TunedConfig:  # pragma: no cover - Run's
        raise NotImplementedError

    def _open_race(self) -> None:
        """Eager against plain compile before the search: the first answer, written at the look
        that decides it (:meth:`_answer_so_far`)."""
        opts, clock = self.opts, self.clock
        if not self.main or opts.objective != "time" or self.run.scoring is None:
            return  # a --workers or lane process measures the search alone: the run races
        with clock.phase("confirmation"):
            self.race = open_race(self.study, self.run.scoring, self.tuner, opts.confirm, opts.confirm_rounds,
                                  self.log, round_fits=clock.round_fits if clock.bounded else None,
                                  tie_margin=opts.tie_margin, on_look=self._answer_so_far,
                                  started=lambda race: setattr(self, "race", race),
                                  yield_after=MIN_ROUNDS if clock.bounded and self._search_left() else None,
                                  eager_alone=not clock.bounded, shorten=self._opening_short if clock.bounded else None)

    def _opening_short(self, race: Race) -> bool:
        """Whether the opening yields after its first round (``open_race``'s ``shorten``): the
        search's first trial and the least its config needs for a first interval against plain
        compile (``Race.joiner_processes(least=True)``), plain compile riding in them as its second
        round, fit in the budget, where after a second round of plain compile's own the trial and
        what :meth:`_trial_fits_now` then asks for its config (two rounds of its own) would not.
        Seen on the zoo's GPT-2 training (--budget 10m, 2026-12-07): the opening's second round took
        108 s, and ``+optimizer``, 1.22x plain compile's steps in its search trial, then had no time
        for a round of its own."""
        if not self._search_left():
            return False
        second = race.next_round_processes()  # plain compile's own, in a whole opening
        race.rides_after = 1  # (after a whole opening plain compile rides in the joiner's processes too)
        try:
            cold, least = race.joiner_processes(least=True)
            _, whole = race.joiner_processes()  # what _trial_fits_now asks of a trial after a whole opening
        finally:
            race.rides_after = MIN_ROUNDS
        return self.clock.search_trial_fits((cold, least)) and not self.clock.search_trial_fits((cold, whole + second))

    def _race_between(self) -> None:
        """After each search trial: the config it measured joins the race, its trial one of its
        processes (:func:`~tuner.decide.confirm.join_searched`), or waits for its turn
        (tuner/decide/waiting.py), and the race takes a round while it is not settled, so
        candidates are decided against eager and plain compile during the search, not after it.
        Until the search has measured :data:`~tuner.decide.waiting.SCREENED` configs (or has none
        left) and while the race has an answer, each waits and no round runs: the race then takes
        the best of them first, not the first searched. Seen on the zoo's ResNet-50 (--budget 6m,
        2026-12-07): ``cpp_wrapper``, searched first at 1.01x plain compile's steps, raced four
        rounds undecided while ``cpp_wrapper`` with ``freezing``, at 1.03x, waited to the end. After
        that the race runs on while its slots (``Race.slots``) hold candidates beyond plain compile
        open against it before the next search trial: the search proposes no more than the race can
        decide."""
        race, clock = self.race, self.clock
        if race is None:
            return
        hold = self._screening() and bool(race.answer)
        joined = join_searched(race, self.tuner.last_measured, self.run.scoring, self.log, hold=hold)
        if hold or not (joined or race.promising()):
            return
        fits = clock.round_fits if clock.bounded else None
        with clock.aside("confirmation"):
            try:
                _price_from(race, clock)
                race.run(fits, until=race.done + 1)
                while (not self._screening() and race.undecided_beyond_plain() >= race.slots
                       and race.promising() and _worth_racing(race)):
                    _price_from(race, clock)
                    race.run(fits, until=race.done + 1)
            except Exception as exc:  # noqa: BLE001 - the search goes on; confirmation races after it
                self._race_failed(exc)

    def _screening(self) -> bool:
        """Whether the search still measures configs before the race decides more than one beyond
        plain compile: fewer than :data:`~tuner.decide.waiting.SCREENED` searched, and more to search."""
        return self._search_left() > 0 and self.tuner.search_done() < SCREENED

    def _search_trial_fits(self) -> bool:
        """Whether a search trial and what must follow it fit: where the race has an answer, or its
        candidates carry plain compile in their processes (``Race.rides``: a joiner's rounds then
        decide plain compile too), its trial's config joining the race (priced from the race's
        state), else the worst case."""
        while not self._trial_fits_now():
            if not self._race_to_make_room():
                return False
        return True

    def _trial_fits_now(self) -> bool:
        """:meth:`_search_trial_fits` as the race stands, without running a round. Where the race
        has its answer and nothing in it needs another round, the trial alone must fit (with the
        warm start and the outputs): its config then races while rounds fit, and the answer states
        what its processes showed, decided or not, rather than leave the budget unused. Seen on the
        zoo's GPT-2 training (--budget 10m, 2026-12-07): decided at 384 s, the search trial and the
        five processes its config would need for a look (about 470 s) did not fit in the 216 s
        left, and 3m 16s went unused with 7 configs unsearched."""
        race = self.race
        joiner = None
        if race is not None and (race.answer or race.rides(joining=True)):
            # the opening yielded early for the first candidate: the least its first interval needs
            joiner = race.joiner_processes(least=race.rides_after < MIN_ROUNDS and not race.beyond_plain_joined())
        if self.clock.search_trial_fits(joiner):
            return True
        # (not while a searched config waits for its turn: the trial would take the time of its race)
        return (race is not None and bool(race.answer) and not race.waiting
                and not (race.promising() and _worth_racing(race)) and self.clock.search_trial_fits((0, 0)))

    def _race_to_make_room(self) -> bool:
        """One more round of the race, where a search trial does not fit beside what the candidates
        racing still need: a round that decides them (or drops them) frees their processes from
        the next trial's price. Seen on the zoo's T5-small (--budget 8m, 2026-12-07): the search
        stopped while its first candidate raced, "10 config(s) left unsearched ... do not fit in
        the 3m 42s left"; a round later the race had decided it and 2m 35s were left unused.
        Whether a round ran."""
        race, clock = self.race, self.clock
        if race is None or not race.promising() or not _worth_racing(race) or self.run.interrupted:
            return False
        ran = race.done
        with clock.aside("confirmation"):
            try:
                _price_from(race, clock)
                race.run(clock.round_fits if clock.bounded else None, until=race.done + 1)
            except Exception as exc:  # noqa: BLE001 - the search goes on; confirmation races after it
                self._race_failed(exc)
                return False
        return race.done > ran

    def _race_failed(self, exc: Exception) -> None:
        self.log(f"  the race failed ({type(exc).__name__}: {exc}".splitlines()[0][:300] + "); the search goes on")
        self.race = None

    def _search_left(self) -> int:
        """Configs the search may still measure: unmeasured ones of the space, up to ``--trials``."""
        if self.run.exhausted or self.searched:
            return 0
        unmeasured = {c.key() for c in self.space.configs()} - set(self.tuner.measured_by_key())
        return min(max(0, self.opts.trials - self.tuner.search_done()), len(unmeasured))

    def _answer_so_far(self, decision: dict) -> None:
        """A look decided: best_config.yaml and the reports now hold this answer, whatever stops
        the run next (Ctrl-C, SIGTERM, the --budget), and the terminal says so."""
        first = self.study.user_attrs.get("first_answer")
        if not first:
            self.study.set_user_attr("first_answer", {"elapsed_s": round(self.clock.elapsed(), 1),
                                                      "verdict": decision.get("verdict")})
        from ..report import answer_line  # pandas: imported once the launcher has started

        tuned = self.write()
        self._keep_answer(decision)
        self.log(f"so far: {answer_line(tuned)} ({self.clock.elapsed():.0f} s in); {self._what_follows()}, Ctrl-C "
                 f"keeps this answer in {self.out_dir / 'best_config.yaml'}")
        sys.stdout.flush()  # a user's `| tee` or a scheduler's log sees it now, not at the end

    def _keep_answer(self, decision: dict) -> None:
        """Each answer written, in order, one JSON line of ``answers.jsonl`` (the decision, and when
        it came): best_config.yaml holds the last, this file how the answer moved to it (and the
        error-rate benchmark counts the answers later reversed: benchmarks/full_races.py)."""
        line = json.dumps({"elapsed_s": round(self.clock.elapsed(), 1), **decision}, default=str)
        with (self.out_dir / ANSWERS).open("a") as f:
            f.write(line + "\n")

    def _what_follows(self) -> str:
        """What the run does after a decided look. Seen on the zoo's ResNet-50 (--budget 6m,
        2026-12-05): the opening decided 2 minutes in and the line said "searching 7 more
        config(s)", but no search trial and the round that would confirm it fitted in the 4
        minutes left, and none ran."""
        left = self._search_left()
        if left:
            race = self.race
            if self.clock.bounded and not self._trial_fits_now() and race is not None and race.promising():
                return (f"racing on, then searching up to {left} more config(s) where a search trial and the race "
                        "round that would confirm it fit beside what the candidates racing need")
            if self.clock.bounded and not self._trial_fits_now():
                return (f"{left} config(s) left unsearched: a search trial and the race round that would confirm "
                        f"it do not fit in the {format_duration(max(0.0, self.clock.left()))} left of the --budget")
            return f"searching up to {left} more config(s)"
        race = self.race
        return "racing on" if race is not None and race.promising() else "finishing"

    def _confirm(self) -> None:
        """Confirm the finalists, a round at a time while rounds fit in the budget."""
        clock, study = self.clock, self.study
        if self.race is not None:
            _price_from(self.race, clock)
        try:
            with clock.phase("confirmation"):
                decision = confirm_finalists(study, self.run.scoring, self.tuner, self.opts.confirm,
                                             self.opts.confirm_rounds, self.log,
                                             round_fits=clock.round_fits if clock.bounded else None,
                                             tie_margin=self.opts.tie_margin, race=self.race,
                                             on_look=self._answer_so_far, eager_alone=not clock.bounded)
            if study.user_attrs.get(SKIPPED_ATTR) == BUDGET_RAN_OUT:
                clock.skip("confirmation")
            elif decision and decision.get("cut_short"):
                clock.cut_short("confirmation", decision["cut_short"])
            stop_if_interrupted()
        except KeyboardInterrupt:
            self.run.interrupted = True
            study.set_user_attr(SKIPPED_ATTR, "interrupted")


def _worth_racing(race: Race) -> bool:
    """Whether the race's next rounds are worth more than the search's next trial: plain compile
    has no answer yet, a candidate beyond it has no interval yet, or one could still save over it
    more than ``NEAR_TIE_MARGINS`` tie margins (tuner/decide/dropping.py)."""
    if not race.answer:
        return True
    rows = race.decision.get("against_plain") or {}
    for c in race.racing:
        row = rows.get(c.key())
        if c.key() == PLAIN_COMPILE.key():
            continue
        if row is None or row.get("saving_interval_s") is None or row["saving_interval_s"][1] is None:
            return True
        if row.get("zone") is None and not near_tie(row):
            return True
    return False


def _price_from(race: Race, clock: RunClock) -> None:
    """The clock prices the stretch's first round from the race's last one (``RunClock.race_round``)."""
    if race.walls and race.ran:
        clock.race_round = (race.walls[-1], race.ran)

