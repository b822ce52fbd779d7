"""GPT-2 small (124M) serving prompts: a stock Hugging Face ``GPT2LMHeadModel(GPT2Config())`` at its
real size (12 layers, 768 wide, 50257-token vocabulary), random weights (nothing is downloaded).
One prompt at a time (batch 1), no KV cache (``use_cache=False``, so the output is just the
logits), prompt lengths between 16 and 128 tokens in the order a server meets them (short prompts
most often).

Parameters: 124,439,808 (the LM head is tied to the token embedding).

    compile-tune benchmarks/zoo/gpt2_serve.py --budget 10m
"""
import torch
from transformers import GPT2Config, GPT2LMHeadModel

TASK = "infer"
#: Issue 45's limit: a verdict within 10 minutes on a 2-core machine (docs/zoo.md, measurement 9).
BUDGET = "10m"

BATCH = 1
CONFIG = GPT2Config(use_cache=False)
#: Prompt lengths in the order a server meets them; each listed as often as it occurs.
LENGTHS = [24, 40, 16, 24, 64, 32, 24, 128, 40, 24, 96, 48]


def build_model():
    torch.manual_seed(0)
    return GPT2LMHeadModel(CONFIG)


def _prompt(length, g):
    ids = torch.randint(0, CONFIG.vocab_size, (BATCH, length), generator=g)
    return {"input_ids": ids, "attention_mask": torch.ones(BATCH, length, dtype=torch.long)}


def example_inputs():
    return input_schedule()[0]


def input_schedule():
    g = torch.Generator().manual_seed(1)
    return [_prompt(n, g) for n in LENGTHS]
