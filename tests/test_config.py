import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tuner
from tuner.core.config import CompileConfig, TunedConfig
from tuner.core.errors import ConfigError
from tuner.core.targets import find_block_classes, target_modules
from tuner.export.best_config import load_tuned_config, save_tuned_config
from tuner.user.workload import load_workload

configs = st.builds(
    CompileConfig,
    target=st.sampled_from(["whole", "blocks", "layers.*", "none"]),
    backend=st.sampled_from(["inductor", "aot_eager", "eager"]),
    mode=st.sampled_from([None, "default", "max-autotune-no-cudagraphs", "reduce-overhead"]),
    dynamic=st.sampled_from([None, True, False]),
    fullgraph=st.booleans(),
    options=st.dictionaries(st.sampled_from(["freezing", "shape_padding", "max_autotune"]), st.booleans()),
)


@given(configs)
@settings(max_examples=60, deadline=None)
def test_yaml_round_trip_preserves_the_config(tmp_path_factory, cfg):
    path = tmp_path_factory.mktemp("cfg") / "best_config.yaml"
    save_tuned_config(TunedConfig(cfg, measured={"speedup_vs_eager": 1.5}), path)
    loaded = load_tuned_config(path)
    assert loaded.config == cfg
    assert loaded.config.key() == cfg.key()
    assert loaded.measured["speedup_vs_eager"] == 1.5


def test_unknown_key_and_bad_values_are_rejected():
    with pytest.raises(ConfigError, match="unknown compile config key\\(s\\) backnd"):
        CompileConfig.from_dict({"backnd": "inductor"})
    with pytest.raises(ConfigError, match="`mode` must be one of"):
        CompileConfig(mode="fast")
    with pytest.raises(ConfigError, match="`dynamic` must be true, false or null"):
        CompileConfig(dynamic="yes")


def test_mode_with_options_is_spelled_as_merged_options():
    kwargs = CompileConfig(mode="max-autotune-no-cudagraphs", options={"freezing": True}).compile_kwargs()
    assert "mode" not in kwargs
    assert kwargs["options"]["max_autotune"] is True and kwargs["options"]["freezing"] is True
    assert CompileConfig(mode="max-autotune-no-cudagraphs").compile_kwargs()["mode"] == "max-autotune-no-cudagraphs"
    assert "options" not in CompileConfig(backend="aot_eager", options={"freezing": True}).compile_kwargs()


def test_malformed_file_raises_a_clear_error(tmp_path):
    bad = tmp_path / "best_config.yaml"
    bad.write_text("config: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        tuner.load_config(bad)
    bad.write_text("verdict: compile\n")
    with pytest.raises(ConfigError, match="expected a mapping with a `config` key"):
        tuner.load_config(bad)
    bad.write_text("config: {target: whole, colour: blue}\n")
    with pytest.raises(ConfigError, match="unknown compile config key\\(s\\) colour"):
        tuner.load_config(bad)
    with pytest.raises(ConfigError, match="no such config file"):
        tuner.load_config(tmp_path / "nope.yaml")


def test_loading_a_file_from_another_torch_version_warns(tmp_path):
    path = save_tuned_config(TunedConfig(CompileConfig(), tuned_on={"torch": "1.0.0", "device": "cpu"}), tmp_path / "b.yaml")
    with pytest.warns(UserWarning, match="tuned with torch 1.0.0"):
        tuner.load_config(path)
    path = save_tuned_config(TunedConfig(CompileConfig(), tuned_on={"torch": torch.__version__, "device": "cpu"}), tmp_path / "c.yaml")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tuner.load_config(path)


def test_block_detection_finds_the_outermost_repeated_class(workloads):
    model = load_workload(workloads / "blocks.py").make_model()
    classes = find_block_classes(model)
    assert [c.__name__ for c in classes] == ["Block"]
    assert [name for name, _ in target_modules(model, "blocks")] == ["layers.0", "layers.1", "layers.2"]
    assert [name for name, _ in target_modules(model, "layers.*")] == ["layers.0", "layers.1", "layers.2"]
    assert find_block_classes(load_workload(workloads / "mlp.py").make_model()) == []


def _compiled_graphs(model, inputs):
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    with torch.no_grad():
        out = model(*inputs)
    return out, int(counters["stats"].get("unique_graphs", 0)), int(counters["frames"].get("total", 0))


@pytest.mark.parametrize("target, frames", [("whole", 1), ("blocks", 1)])
def test_apply_config_compiles_in_place_and_keeps_state_dict_keys(workloads, tmp_path, target, frames):
    w = load_workload(workloads / "blocks.py")
    model, inputs = w.make_model().eval(), w.make_inputs()
    with torch.no_grad():
        expected = model(*inputs)
    keys = list(model.state_dict())
    path = save_tuned_config(TunedConfig(CompileConfig(target=target, backend="eager"),
                                         tuned_on={"torch": torch.__version__}), tmp_path / "best_config.yaml")
    applied = tuner.apply_config(model, path)
    assert applied is model and list(applied.state_dict()) == keys
    out, graphs, total_frames = _compiled_graphs(applied, inputs)
    assert graphs >= 1 and total_frames == frames  # blocks: one frame, reused by all three instances
    torch.testing.assert_close(out, expected)


def test_apply_config_compiles_torch_nn_containers_too():
    # nn.Module.compile() silently compiles nothing for torch.nn classes such as Sequential.
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    tuner.apply_config(model, CompileConfig(backend="eager"))
    _, graphs, _ = _compiled_graphs(model, (torch.randn(2, 4),))
    assert graphs == 1


def test_stay_eager_leaves_the_model_uncompiled(tmp_path):
    model = torch.nn.Linear(4, 4)
    path = save_tuned_config(TunedConfig(CompileConfig(target="none"), verdict="stay_eager"), tmp_path / "b.yaml")
    assert tuner.apply_config(model, path) is model
    assert "forward" not in vars(model)


def test_an_undecided_verdict_is_applied_as_eager_even_with_a_compiled_config_in_the_file(tmp_path):
    model = torch.nn.Linear(4, 4)
    path = save_tuned_config(TunedConfig(CompileConfig(backend="eager"), verdict="undecided"), tmp_path / "b.yaml")
    assert load_tuned_config(path).verdict == "undecided"
    assert tuner.apply_config(model, path) is model and "forward" not in vars(model)
    mapping = {"verdict": "undecided", "config": {"backend": "eager"}}
    assert tuner.apply_config(model, mapping) is model and "forward" not in vars(model)


@pytest.mark.parametrize("form", ["path", "mapping", "mapping without tuned_on", "CompileConfig"])
def test_every_form_of_config_pins_the_heap_as_every_trial_was_measured(tmp_path, monkeypatch, form):
    """The pin's gain is eager's too (measured.heap_gain): a stay-eager user who keeps the call
    keeps it, and a config handed over as a dict or a CompileConfig pins like the file does."""
    from tuner.runtime import apply as applying
    from tuner.system.heap import PINNED_NOTE

    pinned = []
    monkeypatch.setattr(applying, "pin_glibc_heap", lambda: pinned.append(True))
    tuned = TunedConfig(CompileConfig(target="none"), verdict="stay_eager",
                        tuned_on={"heap": PINNED_NOTE, "device": "cpu", "torch": torch.__version__})
    config = {"path": save_tuned_config(tuned, tmp_path / "b.yaml"), "mapping": tuned.to_dict(),
              "mapping without tuned_on": {"config": {"target": "none"}}, "CompileConfig": CompileConfig(target="none")}
    tuner.apply_config(torch.nn.Linear(2, 2), config[form])
    assert pinned == [True]
    tuner.apply_config(torch.nn.Linear(2, 2), config[form], pin_heap=False)
    assert pinned == [True]


def test_target_matching_nothing_is_a_config_error():
    with pytest.raises(ConfigError, match="target 'encoder.*' matches no module of Linear"):
        tuner.apply_config(torch.nn.Linear(2, 2), CompileConfig(target="encoder.*", backend="eager"))


def test_apply_config_on_a_torch_compiled_model_configures_the_original_module_and_warns():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    compiled = torch.compile(model, backend="eager")
    with pytest.warns(UserWarning, match="torch.compile'd model \\(OptimizedModule around Sequential\\)"):
        applied = tuner.apply_config(compiled, CompileConfig(backend="eager"))
    assert applied is model
    _, graphs, frames = _compiled_graphs(applied, (torch.randn(2, 4),))
    assert graphs == 1 and frames == 1  # one compile of the config, not one nested inside another


def test_apply_config_twice_undoes_the_first_compile_and_warns(workloads):
    w = load_workload(workloads / "blocks.py")
    model, inputs = w.make_model().eval(), w.make_inputs()
    tuner.apply_config(model, CompileConfig(target="blocks", backend="eager"))
    with pytest.warns(UserWarning, match="already compiled by an earlier apply_config \\(layers.0, layers.1, layers.2\\)"):
        applied = tuner.apply_config(model, CompileConfig(target="whole", backend="eager"))
    assert applied is model
    assert [n for n, m in model.named_modules() if "forward" in vars(m)] == [""]
    assert not hasattr(vars(model)["forward"]._torchdynamo_orig_callable, "_torchdynamo_orig_callable")
    _, graphs, frames = _compiled_graphs(applied, inputs)
    assert frames == 1  # only the whole model's forward is compiled


def test_apply_config_warns_when_this_process_runs_another_thread_count(tmp_path):
    here = torch.get_num_threads()
    path = save_tuned_config(TunedConfig(CompileConfig(target="none"), verdict="stay_eager",
                                         tuned_on={"torch": torch.__version__, "threads": here + 1}), tmp_path / "b.yaml")
    with pytest.warns(UserWarning, match=f"tuned at {here + 1} torch thread\\(s\\), this process runs {here}") as got:
        tuner.apply_config(torch.nn.Linear(2, 2), path)
    assert f"torch.set_num_threads({here + 1})" in str(got[0].message) and "\n" not in str(got[0].message)
    same = save_tuned_config(TunedConfig(CompileConfig(target="none"), verdict="stay_eager",
                                         tuned_on={"torch": torch.__version__, "threads": here}), tmp_path / "c.yaml")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tuner.apply_config(torch.nn.Linear(2, 2), same)
