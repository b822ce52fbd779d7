"""The block finder (regional compilation's target) on real model families: the layer class,
never a container, and no block where one compile cannot serve the instances."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from tuner.core.targets import MAX_BLOCK_COMPILES, find_blocks, target_modules
from tuner.space.autospace import ModelFacts, build_auto_space

transformers = pytest.importorskip("transformers")


class Layer(nn.Module):
    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.up, self.down = nn.Linear(width, 2 * width), nn.Linear(2 * width, width)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(x)))


def test_blocks_held_in_a_sequential_are_found_and_the_sequential_is_not():
    model = nn.Sequential(nn.Sequential(Layer(), Layer()), nn.Sequential(Layer(), Layer()), nn.Linear(16, 4))
    found = find_blocks(model)
    assert found.cls is Layer and found.instances == 4 and found.structures == 1
    assert [name for name, _ in target_modules(model, "blocks")] == ["0.0", "0.1", "1.0", "1.1"]


def test_gpt2_block_is_its_transformer_layer():
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=3, n_embd=64, n_head=2, vocab_size=256))
    found = find_blocks(model)
    assert (found.name, found.instances, found.structures) == ("GPT2Block", 3, 1)


def test_vit_block_is_its_encoder_layer():
    config = transformers.ViTConfig(hidden_size=64, num_hidden_layers=3, num_attention_heads=2, intermediate_size=128,
                                    image_size=32, patch_size=8)
    found = find_blocks(transformers.ViTForImageClassification(config))
    assert (found.name, found.instances, found.structures) == ("ViTLayer", 3, 1)


def test_resnet50_has_no_block_and_says_why():
    """ResNet-50's bottleneck layers change width and stride with every stage: 16 instances in 8
    structures, so `blocks` would compile 8 times; its Sequentials are containers, not blocks."""
    model = transformers.ResNetForImageClassification(transformers.ResNetConfig())
    found = find_blocks(model)
    assert found.cls is None
    assert found.reason.startswith("ResNetBottleNeckLayer x16 comes in 8 structures")
    space, _ = build_auto_space(ModelFacts("cpu", "infer", block_note=found.reason))
    assert space.target == ["whole"]
    assert any(s.startswith("target=blocks: ResNetBottleNeckLayer x16 comes in 8 structures") for s in space.skipped)


def test_t5_blocks_need_one_compile_per_structure():
    """A T5 stack's first block holds the relative position bias and decoder blocks add
    cross-attention: four structures, four compiles of T5Block for twelve instances."""
    config = transformers.T5Config(d_model=32, d_ff=64, num_layers=6, num_heads=2, d_kv=16, vocab_size=128)
    found = find_blocks(transformers.T5ForConditionalGeneration(config))
    assert (found.name, found.instances, found.structures) == ("T5Block", 12, 4)
    assert found.structures <= MAX_BLOCK_COMPILES
    assert "4 compiles" in found.reason
