"""ResNet-50 (25.6M) image classification: a stock Hugging Face
``ResNetForImageClassification(ResNetConfig())`` (the default config is ResNet-50) with a
1000-class ImageNet head, random weights (nothing is downloaded). Inference on batch 4 of
3x224x224 images.

Parameters: 25,557,032.

    compile-tune benchmarks/zoo/resnet50.py --budget 6m
"""
import torch
from transformers import ResNetConfig, ResNetForImageClassification

TASK = "infer"
BUDGET = "6m"

BATCH = 4
CONFIG = ResNetConfig(num_labels=1000)


def build_model():
    torch.manual_seed(0)
    return ResNetForImageClassification(CONFIG)


def example_inputs():
    g = torch.Generator().manual_seed(1)
    return {"pixel_values": torch.randn(BATCH, 3, 224, 224, generator=g)}
