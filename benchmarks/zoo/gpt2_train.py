"""GPT-2 small (124M) in training: a stock Hugging Face ``GPT2LMHeadModel(GPT2Config())`` at its
real size with its default dropout (0.1 on embeddings, attention and residuals), random weights
(nothing is downloaded). Language-model loss on batch 2 x 64 tokens (labels = input_ids).

Parameters: 124,439,808 (the LM head is tied to the token embedding).

    compile-tune benchmarks/zoo/gpt2_train.py --task train --budget 8m
"""
import torch
from transformers import GPT2Config, GPT2LMHeadModel

TASK = "train"
BUDGET = "10m"

BATCH, SEQ = 2, 64
CONFIG = GPT2Config(use_cache=False)


def build_model():
    torch.manual_seed(0)
    return GPT2LMHeadModel(CONFIG)


def example_inputs():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, CONFIG.vocab_size, (BATCH, SEQ), generator=g)
    return {"input_ids": ids, "labels": ids}


def loss_fn(output, inputs):
    return output.loss
