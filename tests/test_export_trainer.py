"""`compile-tune export hf-trainer`: the block built by the installed transformers' own
TrainingArguments, HfArgumentParser and Trainer (the dynamo plugin the Trainer's accelerator
gets, the DDP and FSDP2 settings, TF32 named where it changes what was measured)."""
from __future__ import annotations

import dataclasses
import inspect

import pytest
import torch
from export_configs import CONFIGS, IDS, expected_plugin, plugin_fields, ranked_dict, tuned_dict

from tuner.core.config import CompileConfig
from tuner.export import export, render

pytest.importorskip("accelerate")
pytest.importorskip("transformers")


@pytest.fixture
def fresh_accelerate_state():
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


@pytest.mark.parametrize("cfg", CONFIGS[:2], ids=IDS[:2])
def test_training_arguments_construct_and_the_trainer_plugin_carries_the_config(cfg, tmp_path, clean_env,
                                                                                fresh_accelerate_state):
    from transformers import HfArgumentParser, Trainer, TrainingArguments

    block = export(tuned_dict(cfg), "hf-trainer")
    args = TrainingArguments(**block["training_args"], output_dir=str(tmp_path), use_cpu=True, report_to=[])
    assert args.torch_compile is True and args.torch_compile_backend == cfg.backend
    assert args.torch_compile_mode == (cfg.mode if cfg.backend == "inductor" else None)
    text, _ = render(tuned_dict(cfg), "hf-trainer", source="best_config.yaml", label="x")
    (tmp_path / "args.yaml").write_text(text)
    (parsed,) = HfArgumentParser(TrainingArguments).parse_yaml_file(str(tmp_path / "args.yaml"))
    assert (parsed.torch_compile_backend, parsed.torch_compile_mode) == (args.torch_compile_backend,
                                                                         args.torch_compile_mode)
    for name, value in block["env"].items():
        clean_env.setenv(name, value)
    trainer = Trainer(model=torch.nn.Linear(2, 2), args=args)
    assert plugin_fields(trainer.accelerator.state.dynamo_plugin) == expected_plugin(cfg)


@pytest.mark.parametrize("tuned", [*(tuned_dict(c) for c in CONFIGS), ranked_dict("ddp", "compile", bucket_cap_mb=50),
                                   ranked_dict("fsdp2", block_class="Block", reshard_after_forward=False)],
                         ids=[*IDS, "ddp", "fsdp2"])
def test_training_arguments_fields_are_the_installed_transformers(tuned, tmp_path):
    from transformers import HfArgumentParser, TrainingArguments

    args = export(tuned, "hf-trainer")["training_args"]
    assert set(args) <= {f.name for f in dataclasses.fields(TrainingArguments)}
    read = inspect.getsource(TrainingArguments._process_fsdp_args)
    assert all(f'"{key}"' in read for key in args.get("fsdp_config", {})), "a key the Trainer never reads"
    text, _ = render(tuned, "hf-trainer", source="best_config.yaml", label="x")
    (tmp_path / "args.yaml").write_text(text)
    (parsed,) = HfArgumentParser(TrainingArguments).parse_yaml_file(str(tmp_path / "args.yaml"))
    assert parsed.ddp_bucket_cap_mb == args.get("ddp_bucket_cap_mb")


def test_the_trainer_gets_the_ddp_and_fsdp2_settings_and_the_launch_line(tmp_path):
    from transformers import TrainingArguments

    ddp = export(ranked_dict("ddp", "compile", bucket_cap_mb=50), "hf-trainer")
    assert ddp["training_args"]["ddp_bucket_cap_mb"] == 50
    assert ddp["training_args"]["ddp_find_unused_parameters"] is False  # left unset, the Trainer passes True
    lost = {x["setting"]: x for x in ddp["not_carried"]}
    assert lost["processes"]["fix"][0] == "torchrun --nproc_per_node 2 train.py"
    assert {"heap", "threads"} <= set(lost)
    fsdp = export(ranked_dict("fsdp2", block_class="Block", reshard_after_forward=False), "hf-trainer")
    args = TrainingArguments(**fsdp["training_args"], output_dir=str(tmp_path), use_cpu=True, report_to=[])
    assert args.fsdp_plugin_args["reshard_after_forward"] is False
    assert args.fsdp_plugin_args["transformer_cls_names_to_wrap"] == "Block"


def test_a_float32_config_turns_the_trainers_tf32_off(tmp_path):
    from transformers import TrainingArguments

    block = export(tuned_dict(CompileConfig(backend="inductor")), "hf-trainer")
    assert block["training_args"]["tf32"] is False  # with torch_compile, tf32=None would turn TF32 on (Ampere+)
    args = TrainingArguments(**block["training_args"], output_dir=str(tmp_path), use_cpu=True, report_to=[])
    assert args.tf32 is False and args.torch_compile is True


def test_the_trainers_tf32_is_listed_as_changing_what_was_measured(tmp_path):
    block = export(tuned_dict(CompileConfig(backend="inductor", precision="tf32")), "hf-trainer")
    assert block["training_args"]["tf32"] is True
    assert [x["setting"] for x in block["changes_measured"]] == ["tf32"]
    assert "fp32_precision" in block["changes_measured"][0]["why"]


def test_the_trainer_callback_the_fsdp2_export_prints_keeps_gathered_what_the_measured_run_kept():
    """The callback, run by transformers' own CallbackHandler at on_train_begin (after the Trainer's
    accelerator has sharded the model, before its first forward), on the model as the installed
    accelerate shards it and as accelerate 1.13 did."""
    from accelerate_fsdp2 import after_forward, one_rank, prepared
    from transformers import TrainerControl, TrainerState
    from transformers.trainer_callback import CallbackHandler

    tuned = ranked_dict("fsdp2", device="cuda", block_class="Block", reshard_after_forward=True)
    changes = {x["setting"]: x for x in export(tuned, "hf-trainer")["changes_measured"]}
    scope: dict = {}
    exec("\n".join(changes["root reshard_after_forward"]["fix"]), scope)
    with one_rank():
        for installed in (True, False):
            model = prepared(installed)
            handler = CallbackHandler([scope["KeepGathered"]()], model, None, None, None)
            handler.on_train_begin(None, TrainerState(), TrainerControl())
            assert after_forward(model) == {"root": "Parameter", "embeddings": "Parameter", "block": "DTensor",
                                            "norm": "Parameter", "head": "Parameter"}, installed
