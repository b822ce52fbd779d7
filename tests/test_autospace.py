"""The ``auto`` space (tuner/space/autospace.py) and ``compile-tune space``: the space fits the model."""
from __future__ import annotations

import pytest
from conftest import FAST, load_study

from tuner.cli import main
from tuner.run.pipeline import TuneOptions, search_space, tune
from tuner.space.autospace import AUTO, ModelFacts, build_auto_space
from tuner.space.search_space import CUDA_ONLY_BACKENDS, CUDA_ONLY_MODES, MARKED, MARKED_UNBACKED
from tuner.study import ROLE_SEARCH
from tuner.user.workload import load_workload


def auto_space_of(workloads, name: str, task: str = "infer", device: str = "cpu"):
    opts = TuneOptions(str(workloads / name), task=task)
    return search_space(opts, load_workload(opts.workload), device)


def test_auto_is_the_default_space():
    assert TuneOptions("model.py").space == AUTO


def test_blocks_target_is_searched_only_when_a_block_repeats(workloads):
    with_blocks, choices = auto_space_of(workloads, "blocks.py")
    assert with_blocks.target == ["whole", "blocks"]
    assert "Block x3" in next(c.reason for c in choices if c.dimension == "target")
    without, _ = auto_space_of(workloads, "fusable.py")
    assert without.target == ["whole"]
    assert "target=blocks: no submodule class with code of its own repeats" in without.skipped


def test_dynamic_choices_only_when_the_input_schedule_varies_a_dimension(workloads):
    varying, choices = auto_space_of(workloads, "mlp.py")  # batch 8, 16, 32 over the schedule
    assert varying.dynamic == [None, True, False, MARKED]
    assert varying.marks == {"0": {0: [8, 32]}}
    assert "input 0 dim 0 (8-32)" in next(c.reason for c in choices if c.dimension == "dynamic")
    fixed, choices = auto_space_of(workloads, "blocks.py")  # no schedule
    assert fixed.dynamic == [None] and not fixed.marks
    assert next(c.reason for c in choices if c.dimension == "dynamic") == "inputs never change shape"
    assert {c.dynamic for c in fixed.configs()} == {None} and not any(c.mark_dynamic for c in fixed.configs())


def test_a_batch_of_one_adds_marked_unbacked_and_many_shapes_a_raised_recompile_limit(workloads):
    one, choices = auto_space_of(workloads, "batch_of_one.py")  # batch 4, 1, 8, 1, 16
    assert one.dynamic == [None, True, False, MARKED, MARKED_UNBACKED] and not one.dynamo
    assert "size 1 needs no graph of its own" in next(c.reason for c in choices if c.dimension == "dynamic")
    many, choices = auto_space_of(workloads, "many_shapes.py")  # batch 2 to 12: 11 shapes
    assert many.dynamic == [None, True, False, MARKED] and many.dynamo == {"recompile_limit": [8, 16]}
    assert "11 input shapes" in next(c.reason for c in choices if c.dimension == "dynamo.recompile_limit")
    assert any(s.startswith(f"dynamic={MARKED_UNBACKED}: no varying input dimension") for s in many.skipped)


def test_no_cuda_only_choice_on_a_cpu(workloads):
    space, _ = auto_space_of(workloads, "blocks.py")
    for cfg in space.configs():
        assert cfg.backend not in CUDA_ONLY_BACKENDS and cfg.mode not in CUDA_ONLY_MODES
        assert not any(n.startswith("triton.") or n == "coordinate_descent_tuning" for n in cfg.options)
    assert space.options == {"freezing": [False, True], "cpp_wrapper": [False, True]}


def test_a_gpu_gets_cuda_graphs_and_triton_tuning_instead_of_the_cpp_wrapper():
    space, _ = build_auto_space(ModelFacts(device="cuda", task="infer"))
    assert {"reduce-overhead", "max-autotune"} <= set(space.mode)
    assert "coordinate_descent_tuning" in space.options and "cpp_wrapper" not in space.options


def test_training_searches_the_optimizer_step_and_never_freezes(workloads):
    train, _ = auto_space_of(workloads, "blocks.py", task="train")
    assert train.compile_optimizer == [False, True] and "freezing" not in train.options
    infer, _ = auto_space_of(workloads, "blocks.py")
    assert infer.compile_optimizer == [False] and "freezing" in infer.options


def test_freezing_is_left_out_for_a_model_without_parameters(workloads):
    space, _ = auto_space_of(workloads, "fusable.py")
    assert "freezing" not in space.options
    assert "options.freezing: the model has no parameters to freeze" in space.skipped


def test_the_auto_space_stays_small_enough_for_the_default_trials(workloads):
    # --trials is 20 by default: the space of a model with blocks and a varying schedule stays
    # within a few times that, so the search covers its dimensions
    space, _ = auto_space_of(workloads, "mlp.py")
    assert len(space.configs()) <= 64


def test_space_command_prints_each_dimension_with_why_and_what_is_left_out(workloads, capsys):
    assert main(["space", str(workloads / "blocks.py"), "--no-check"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "compile-tune space: blocks (infer) on cpu; no trials are run"
    assert out[1] == "model check skipped (--no-check): no graph-break repair in the space"
    assert out[2] == "space 'auto': 12 configs"  # max-autotune on a CPU only with freezing
    assert "  target: [whole, blocks] - regional compilation: Block x3: one compile serves all" in out
    assert "  dynamic: [null] - inputs never change shape" in out
    assert out[out.index("left out:") + 1].startswith("  backend=aot_eager: ")


def test_space_command_shows_a_named_space_too(workloads, capsys):
    assert main(["space", str(workloads / "blocks.py"), "--no-check", "--space", "quick"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2].startswith("space 'quick' (") and out[2].endswith("quick.yaml): 6 configs")
    assert "  backend: [inductor, aot_eager]" in out


@pytest.mark.parametrize("args, error, hint", [
    (["nope.py"], "error: nope.py: no such model file", "hint: pass the path"),
    (["{blocks}", "--no-check", "--space", "nosuch"], "error: unknown search space 'nosuch'", "hint: use auto, "),
])
def test_space_command_bad_input_is_one_error_line_and_exit_code_2(workloads, capsys, args, error, hint):
    assert main(["space", *(a.format(blocks=workloads / "blocks.py") for a in args)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == error and err[1].startswith(hint)


def test_space_command_runs_the_model_check_and_adds_its_repairs(workloads, capsys):
    assert main(["space", str(workloads / "repairable.py")]) == 0
    out = capsys.readouterr().out
    assert "running the model check" in out and "6 graph break(s)" in out
    assert "  dynamo.capture_scalar_outputs: [false, true] - repairs a graph break the model check found" in out
    assert "  repair: the search tries dynamo +capture_scalar_outputs" in out


def test_a_run_without_space_searches_auto_and_resumes_it(cli, workloads, tmp_path, monkeypatch):
    # The real run measures the baselines only (each compile costs seconds); the resumed run below searches.
    first = cli(str(workloads / "fusable.py"), "--trials", "0", "--threads", "1", "--out", str(tmp_path), *FAST)
    assert first.returncode == 0, first.stderr
    assert "space 'auto' has 2 configs" in first.stdout  # no weights to freeze: no CPU autotune either
    assert "  dynamic: [null] - inputs never change shape" in first.stdout
    study = load_study(f"sqlite:///{tmp_path / 'study.db'}", "fusable")
    assert study.user_attrs["settings"]["space"] == AUTO

    # Resumed with two trials (measured by a stand-in, in seconds): the same space is rebuilt and
    # accepted by the stored study, and the new trials are its configs.
    from test_tune import ok

    from tuner.decide.search import Tuner

    monkeypatch.setattr(Tuner, "measure", lambda self, config, *a, **k: ok(config))
    space, _ = auto_space_of(workloads, "fusable.py")
    tune(TuneOptions(str(workloads / "fusable.py"), trials=2, threads=1, out=str(tmp_path), steps=10_000_000,
                     check=False, warm_start=False, progress=False, confirm=0), log=lambda line: None)
    searched = [t for t in load_study(f"sqlite:///{tmp_path / 'study.db'}", "fusable").trials
                if t.user_attrs.get("role") == ROLE_SEARCH]
    assert len(searched) == 1  # the one config beside plain compile's: the space is exhausted
    assert {t.user_attrs["config_key"] for t in searched} <= {c.key() for c in space.configs()}
