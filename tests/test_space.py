import optuna
import pytest

from tuner.core.config import CompileConfig
from tuner.core.errors import SpaceError
from tuner.space.search_space import load_space
from tuner.space.space_file import bundled_spaces


def write(tmp_path, text):
    path = tmp_path / "space.yaml"
    path.write_text(text)
    return path


def test_bundled_spaces_are_valid():
    assert {"default", "quick"} <= set(bundled_spaces())
    for name in bundled_spaces():
        assert load_space(name).configs()


def test_quick_space_is_a_handful_of_configs():
    assert 4 <= len(load_space("quick").configs()) <= 8


@pytest.mark.parametrize(
    "text, message",
    [
        ("target: [whole]\nbackedn: [inductor]\n", "line 2: `backedn` is not a search-space key"),
        ("backend: [inductor, indcutor]\n", "line 1: `backend` has unknown backend 'indcutor'"),
        ("mode: [fast]\n", "line 1: `mode` has unknown mode 'fast'"),
        ("dynamic: [maybe]\n", "`dynamic` values must be null, true, false, marked or marked_unbacked"),
        ("fullgraph: [yes please]\n", "`fullgraph` values must be true or false"),
        ("options:\n  freezing: [true]\n  not_an_option: [1]\n", "line 3: `options.not_an_option` is not an inductor option"),
        ("options:\n  freezing: [\"yes\"]\n", "`options.freezing` values must be bool"),
        ("target: []\n", "`target` has no choices"),
        ("target: [none]\n", "values must be whole, blocks or a module-name pattern"),
        ("backend: [inductor\n", "not valid YAML"),
        ("- just a list\n", "must be a mapping"),
    ],
)
def test_bad_space_files_name_file_key_and_line(tmp_path, text, message):
    with pytest.raises(SpaceError) as info:
        load_space(str(write(tmp_path, text)))
    assert message in str(info.value)
    assert "space.yaml" in str(info.value)


def test_unknown_key_gets_a_did_you_mean_hint(tmp_path):
    with pytest.raises(SpaceError) as info:
        load_space(str(write(tmp_path, "backedn: [inductor]\n")))
    assert info.value.hint == "did you mean `backend`?"


def test_unknown_space_name_lists_bundled_ones():
    with pytest.raises(SpaceError, match="unknown search space 'quik'") as info:
        load_space("quik")
    assert "quick" in info.value.hint


def test_cuda_only_choices_are_skipped_on_cpu_not_tried():
    space = load_space("default").restrict(device="cpu", task="infer", has_blocks=True)
    assert "cudagraphs" not in space.backend
    assert "reduce-overhead" not in space.mode and "max-autotune" not in space.mode
    assert "max-autotune-no-cudagraphs" in space.mode
    assert any("cudagraphs" in s for s in space.skipped)


def test_inference_only_options_and_missing_blocks_are_skipped():
    space = load_space("quick").restrict(device="cpu", task="train", has_blocks=False)
    assert "freezing" not in space.options
    assert space.target == ["whole"]


def test_mode_and_options_exist_only_under_inductor(tmp_path):
    space = load_space(str(write(tmp_path, "backend: [inductor, aot_eager]\nmode: [default, max-autotune-no-cudagraphs]\noptions: {freezing: [false, true]}\n")))
    configs = space.configs()
    # inductor: 2 modes x 2 freezing; aot_eager: 1 (mode/options do not apply)
    assert len(configs) == 5
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = set()
    for _ in range(30):
        trial = study.ask()
        cfg = space.suggest(trial)
        if cfg.backend == "aot_eager":
            assert "mode" not in trial.params and not cfg.options
        seen.add(cfg.key())
        study.tell(trial, 1.0)
    assert seen == {c.key() for c in configs}


def assert_round_trips(space):
    """Every config of ``space`` comes back from Optuna as itself: params_for then suggest."""
    study = optuna.create_study()
    for cfg in space.configs():
        study.enqueue_trial(space.params_for(cfg))
        trial = study.ask()
        assert space.suggest(trial).key() == cfg.key()
        study.tell(trial, 1.0)


def test_params_for_reproduces_each_config(tmp_path):
    assert_round_trips(load_space("quick"))


def test_default_valued_options_collapse_to_the_same_config():
    plain = CompileConfig()
    space = load_space("quick")
    keys = {c.key() for c in space.configs()}
    assert plain.key() in keys


def test_neighbours_change_one_setting_at_a_time_most_telling_first(tmp_path):
    space = load_space(str(write(tmp_path, "target: [whole, blocks]\nbackend: [inductor, aot_eager]\n"
                                           "dynamic: [null, false]\noptions: {freezing: [false, true]}\n")))
    labels = [c.describe() for c in space.neighbours(CompileConfig())]
    assert labels == ["blocks/inductor/default", "whole/aot_eager", "whole/inductor/default dynamic=False",
                      "whole/inductor/default freezing=True"]
    keys = {c.key() for c in space.configs()}
    assert all(c.key() in keys for c in space.neighbours(CompileConfig()))


@pytest.mark.parametrize("option, closest", [("epilog_fusion", "epilogue_fusion"),
                                             ("triton.cudagraph", "triton.cudagraphs"),
                                             ("coordinate_descent_tunning", "coordinate_descent_tuning")])
def test_an_unknown_inductor_option_is_one_error_line_naming_the_closest_one(tmp_path, option, closest):
    with pytest.raises(SpaceError) as info:
        load_space(str(write(tmp_path, f"options:\n  {option}: [true]\n")))
    assert f"line 2: `options.{option}` is not an inductor option in torch " in info.value.message
    assert info.value.message.endswith(f"; did you mean `{closest}`?")


def test_the_gpu_space_offers_cuda_code_generation_and_a_cpu_drops_it_with_reasons():
    gpu = load_space("gpu").restrict(device="cuda", task="infer", has_blocks=True)
    assert {"reduce-overhead", "max-autotune"} <= set(gpu.mode) and not gpu.skipped
    assert {"coordinate_descent_tuning", "max_autotune_gemm_backends", "epilogue_fusion"} <= set(gpu.options)
    cpu = load_space("gpu").restrict(device="cpu", task="infer", has_blocks=True)
    assert cpu.mode == ["default", "max-autotune-no-cudagraphs"]
    assert set(cpu.options) == {"freezing", "epilogue_fusion"}
    assert "options.coordinate_descent_tuning: needs CUDA (changes GPU code only)" in cpu.skipped
    assert any(s.startswith("options.max_autotune_gemm_backends: no choice names CPP") for s in cpu.skipped)


VARIES = {"0": {0: [2, 12]}}


def shape_space(tmp_path, dynamic: str, shapes: int):
    return load_space(str(write(tmp_path, f"dynamic: {dynamic}\n"))).restrict(
        device="cpu", task="infer", has_blocks=False, varying_dims=VARIES, shapes=shapes)


def test_more_shapes_than_the_recompile_limit_add_a_raised_limit_searched_with_dynamic_false_only(tmp_path):
    space = shape_space(tmp_path, "[null, true, false]", shapes=11)
    assert space.dynamo == {"recompile_limit": [8, 16]}
    assert "11 input shapes, more than Dynamo's limit of 8" in space.reasons["dynamo.recompile_limit"]
    assert sorted(c.describe() for c in space.configs()) == [
        "whole/inductor/default", "whole/inductor/default dynamic=False",
        "whole/inductor/default dynamic=False recompile_limit=16", "whole/inductor/default dynamic=True"]
    assert any(s.startswith("dynamo.automatic_dynamic_shapes=false: with dynamic=null it is dynamic=false")
               for s in space.skipped)
    assert shape_space(tmp_path, "[null, true, false]", shapes=8).dynamo == {}  # every shape fits the limit


def test_without_dynamic_false_automatic_dynamic_shapes_off_is_the_graph_per_shape_choice(tmp_path):
    space = shape_space(tmp_path, "[null, true]", shapes=11)
    assert space.dynamo == {"automatic_dynamic_shapes": [True, False], "recompile_limit": [8, 16]}
    assert sorted(c.describe() for c in space.configs()) == [
        "whole/inductor/default", "whole/inductor/default -automatic_dynamic_shapes",
        "whole/inductor/default -automatic_dynamic_shapes recompile_limit=16", "whole/inductor/default dynamic=True"]
    # every config round-trips through Optuna, and no neighbour changes a setting that does nothing
    assert_round_trips(space)
    keys = {c.key() for c in space.configs()}
    assert [c.describe() for c in space.neighbours(CompileConfig())] == [
        "whole/inductor/default dynamic=True", "whole/inductor/default -automatic_dynamic_shapes"]
    assert all(c.key() in keys for c in space.neighbours(CompileConfig(dynamic=True)))
