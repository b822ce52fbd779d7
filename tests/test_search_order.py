"""The order the search measures configs in: every one-setting change of plain torch.compile
first, then changes of the best so far. The trials' measurements are canned (the search loop is
under test here, not the measuring): a config's speedup is a number this test chooses."""
import re
from pathlib import Path

from tuner.core.config import CompileConfig
from tuner.decide.search import Tuner
from tuner.space.search_space import load_space
from tuner.study import StudyRun, StudySettings, open_store

SPACE = """
target: [whole]
backend: [inductor, aot_eager]
mode: [default, max-autotune-no-cudagraphs]
options:
  freezing: [false, true]
  cpp_wrapper: [false, true]
"""


class Canned(Tuner):
    """The real search loop; each trial answers with the speedup ``speedup_of`` gives its config."""

    def __init__(self, *args, speedup_of, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.speedup_of, self.order = speedup_of, []

    def measure(self, config: CompileConfig, *args, **kwargs) -> dict:
        self.order.append(config.describe())
        speedup = self.speedup_of(config)
        return {"status": "ok", "correct": True, "speedup": speedup, "eager_step_s": 0.001,
                "step_time_s": 0.001 / speedup, "compile_time_s": 1.0 if config.compiles else 0.0}


def speedups(config: CompileConfig) -> float:
    """Plain 1.5x; max-autotune times faster (1.6x), but cpp_wrapper is the setting that matters (1.8x)."""
    if not config.compiles:
        return 1.0
    if config.backend != "inductor":
        return 0.9
    speedup = 1.5
    speedup += 0.1 if config.mode == "max-autotune-no-cudagraphs" else 0.0
    speedup += 0.3 if config.options.get("cpp_wrapper") else 0.0
    speedup -= 0.1 if config.options.get("freezing") else 0.0
    return speedup


def canned(tmp_path: Path, trials: int, text: str = SPACE, cls=None, name: str = "order"):
    """A tuner of canned measurements on a space of ``text``, with its study store."""
    path = tmp_path / "space.yaml"
    path.write_text(text)
    space = load_space(str(path)).restrict(device="cpu", task="infer", has_blocks="blocks" in text)
    store = open_store(f"sqlite:///{tmp_path / 'study.db'}", name, seed=0)
    settings = StudySettings(workload=str(tmp_path / "model.py"), task="infer", device="cpu", threads=1,
                             steps=100000, trials=trials, seed=0)
    return (cls or Canned)(store, space, settings, tmp_path / "work", speedup_of=speedups,
                           log=lambda *_: None), store


def search(tmp_path: Path, trials: int) -> list[str]:
    tuner, store = canned(tmp_path, trials)
    scoring = tuner.baselines()
    tuner.search(scoring, StudyRun(study=store.study, scoring=scoring))
    return tuner.order


def test_every_change_of_plain_compile_is_measured_before_the_walk_moves_on(tmp_path):
    order = search(tmp_path, trials=3)
    assert order[:2] == ["eager (no compile)", "whole/inductor/default"]
    # the measured moves first (tuner/space/moves.yaml: cpp_wrapper, then freezing on a CPU for
    # inference), then the space's own order; max-autotune without freezing is not searched on a CPU
    assert order[2:] == ["whole/inductor/default cpp_wrapper=True", "whole/inductor/default freezing=True",
                         "whole/aot_eager"], order


def test_then_the_walk_changes_the_best_config_one_setting_at_a_time(tmp_path):
    order = search(tmp_path, trials=4)
    assert order[-1] == "whole/inductor/default cpp_wrapper=True freezing=True", order
    assert not any(label.startswith("whole/inductor/max-autotune") and "freezing" not in label for label in order)


def test_a_training_run_tries_the_optimizer_step_first_and_no_cpu_autotune():
    from tuner.space.moves import first_moves

    space = load_space("default").restrict(device="cpu", task="train", has_blocks=False)
    plain = CompileConfig()
    order = [c.describe() for c in first_moves(plain, space.neighbours(plain), "train", "cpu")]
    assert order[0] == "whole/inductor/default +optimizer", order  # measured: docs/zoo.md measurement 8
    assert not any("max-autotune" in label for label in order) and "max-autotune-no-cudagraphs" not in space.mode
    assert any(note.startswith("mode=max-autotune-no-cudagraphs: ") and "training never freezes" in note
               for note in space.skipped), space.skipped


def test_every_measured_move_names_its_measurement():
    from tuner.space.moves import measured_moves

    moves = measured_moves()
    assert moves and all(re.search(r"\b[0-9a-f]{7}\b", m.measured) for m in moves), "each row names a commit"


BLOCKS_SPACE = """
target: [whole, blocks]
backend: [inductor]
mode: [default, max-autotune-no-cudagraphs]
options:
  freezing: [false, true]
  cpp_wrapper: [false, true]
"""


class RegionalNothing(Canned):
    """Regional configs compile no graph (the block's code is never called through the compiled
    forward): each runs at eager's speed."""

    def measure(self, config: CompileConfig, *args, **kwargs) -> dict:
        result = super().measure(config, *args, **kwargs)
        if config.target == "blocks":
            result.update(speedup=1.0, step_time_s=0.001, compile_time_s=0.5, graphs=0)
        else:
            result["graphs"] = 1
        return result


def test_a_regional_trial_that_compiled_nothing_ends_the_search_of_blocks(tmp_path):
    tuner, store = canned(tmp_path, 12, BLOCKS_SPACE, RegionalNothing, "blocks")
    scoring = tuner.baselines()
    run = StudyRun(study=store.study, scoring=scoring)
    tuner.search(scoring, run)
    regional = [label for label in tuner.order if label.startswith("blocks")]
    assert len(regional) == 1, tuner.order  # the first one, never a second
    # the trials went elsewhere: every whole config of the space (max-autotune only with freezing on a CPU)
    assert len([label for label in tuner.order if label.startswith("whole")]) >= 6
    assert any(n.startswith("target=blocks is not searched further: trial ") and "compiled nothing" in n
               for n in run.notes), run.notes
    first = next(t for t in store.study.get_trials() if t.user_attrs.get("config_label", "").startswith("blocks")
                 and not t.user_attrs.get("not_searched"))
    assert first.user_attrs["regional_note"].startswith("compiled nothing")


def test_a_lower_claim_read_after_a_higher_one_settled_gives_way_to_it(tmp_path):
    """Two lanes on one config: the higher-numbered claim read the trials before the lower one was
    visible, saw none and measures; the lower one, reading after both claims, must yield to it (by
    the number alone both measured: seen once in the suite under load). A higher claim that gave
    way is no rival."""
    import optuna
    from optuna.trial import TrialState

    from tuner.decide.search import SETTLED_ATTR

    tuner, store = canned(tmp_path, 4, name="claims")
    key = CompileConfig(backend="aot_eager").key()

    def claim(settled: bool) -> int:
        attrs = {"role": "search", "config_key": key, **({SETTLED_ATTR: True} if settled else {})}
        return store.create(optuna.trial.create_trial(state=TrialState.RUNNING, user_attrs=attrs))

    lower, higher = claim(False), claim(True)
    trials = store.study.get_trials(deepcopy=False)
    assert tuner._settled_rival(lower, key, trials) == higher
    store.set_user_attrs(higher, {"duplicate_of": lower})
    store.study.tell(higher, state=TrialState.FAIL)  # it gave way instead
    assert tuner._settled_rival(lower, key, trials) is None
