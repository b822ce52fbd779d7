"""`compile-tune export --to torchtitan|vllm`: torchtitan's own config classes and command-line
parser take the block; vLLM's block holds only the documented CompilationConfig keys (vLLM needs
its own CUDA torch and cannot be installed beside the CPU wheel) and pins what vLLM would inject."""
from __future__ import annotations

import json

import pytest
from export_configs import CONFIGS, IDS, tuned_dict

from tuner.core.config import CompileConfig
from tuner.export import TORCHTITAN_PROCESS_SETTINGS, VLLM_INJECTED_OPTIONS, export, render

VLLM_COMPILATION_CONFIG = {
    "level", "mode", "debug_dump_path", "cache_dir", "compile_cache_save_format", "backend", "custom_ops",
    "splitting_ops", "compile_mm_encoder", "compile_sizes", "compile_ranges_split_points", "inductor_compile_config",
    "inductor_passes", "cudagraph_mode", "cudagraph_num_of_warmups", "cudagraph_capture_sizes",
    "cudagraph_copy_inputs", "cudagraph_specialize_lora", "use_inductor_graph_partition", "pass_config",
    "max_cudagraph_capture_size", "dynamic_shapes_config",
}


def _torchtitan_job():
    """A job config with torchtitan's own sections, parsed as its ConfigManager parses overrides (tyro)."""
    import dataclasses

    from torchtitan.config import CompileConfig as TitanCompile
    from torchtitan.config import TrainingConfig
    from torchtitan.config.manager import ConfigManager

    ConfigManager()  # registers torchtitan's tyro rules

    # built with real types (this module's annotations are strings, which tyro would resolve here)
    return dataclasses.make_dataclass("Job", [
        ("compile", TitanCompile, dataclasses.field(default_factory=TitanCompile)),
        ("training", TrainingConfig, dataclasses.field(default_factory=TrainingConfig))], kw_only=True)


@pytest.mark.parametrize("cfg", CONFIGS, ids=IDS)
def test_torchtitan_overrides_build_torchtitans_own_config_classes(cfg):
    """torchtitan 0.3's CompileConfig and TrainingConfig (kw_only, slots: an unknown field is a
    TypeError) take the block; its command line, as rendered, parses to the same values."""
    import tyro
    from torchtitan.config import CompileConfig as TitanCompile
    from torchtitan.config import TrainingConfig
    from torchtitan.config.manager import custom_registry

    block = export(tuned_dict(cfg), "torchtitan")
    compile_section, training = TitanCompile(**block["compile"]), TrainingConfig(**block["training"])
    assert compile_section.enable and compile_section.components == ["model"] and compile_section.backend == cfg.backend
    assert training.mixed_precision_param == "float32"  # torchtitan's default is bfloat16: pinned, as measured
    text, _ = render(tuned_dict(cfg), "torchtitan", source="best_config.yaml", label="x")
    job = tyro.cli(_torchtitan_job(), args=text.strip().splitlines()[-1].split(), registry=custom_registry)
    assert job.compile == compile_section and job.training.mixed_precision_param == "float32"
    with pytest.raises(TypeError):
        TitanCompile(**block["compile"], mode="max-autotune")  # what the check catches: a field torchtitan lacks


def test_torchtitan_names_the_dynamo_flags_it_sets_for_the_whole_process():
    import inspect

    from torchtitan.distributed import compile as titan_compile

    source = inspect.getsource(titan_compile.apply_compile)
    block = export(tuned_dict(CompileConfig(target="blocks", backend="inductor", fullgraph=True)), "torchtitan")
    changed = {x["setting"] for x in block["changes_measured"]}
    for name in TORCHTITAN_PROCESS_SETTINGS:  # still what the installed torchtitan sets
        assert f"torch._dynamo.config.{name} = " in source.replace("\n", " ") or name in source, name
        assert f"dynamo.{name}" in changed
    text, header = render(tuned_dict(CompileConfig(target="blocks", backend="inductor", fullgraph=True)),
                          "torchtitan", source="best_config.yaml", label="x")
    assert "CHANGES WHAT WAS MEASURED: the tool itself also sets:" in header
    stay = export(tuned_dict(CompileConfig(), verdict="stay_eager"), "torchtitan")
    from torchtitan.config import CompileConfig as TitanCompile

    assert TitanCompile(**stay["compile"]).enable is False


@pytest.mark.parametrize("cfg", CONFIGS, ids=IDS)
def test_vllm_compilation_config_has_only_documented_keys(cfg):
    text, header = render(tuned_dict(cfg), "vllm", source="best_config.yaml", label="x")
    settings = json.loads(text)
    assert set(settings) <= VLLM_COMPILATION_CONFIG
    assert settings["mode"] == 1 and settings["backend"] == cfg.backend
    assert any(line.startswith("NOT CARRIED") for line in header), "every config here loses something in vLLM"


def test_vllm_carries_mode_and_options_and_pins_what_vllm_would_inject():
    from torch._inductor import config as inductor

    cfg = CompileConfig(backend="inductor", mode="max-autotune", options={"freezing": True})
    block = export(tuned_dict(cfg), "vllm")
    pinned = {k: getattr(inductor, k) for k in VLLM_INJECTED_OPTIONS}
    assert pinned == {"enable_auto_functionalized_v2": True, "combo_kernels": False, "benchmark_combo_kernel": False}
    assert block["compilation_config"]["inductor_compile_config"] == {
        "max_autotune": True, "coordinate_descent_tuning": True, "freezing": True, **pinned}
    assert "options.triton.cudagraphs" in {x["setting"] for x in block["not_carried"]}
    assert any("pinned to torch's defaults" in n for n in block["notes"])
