"""A stock Hugging Face GPT-2 in training: default GPT2Config settings (dropout 0.1 on embeddings,
attention and residuals) at a small size, random weights (nothing is downloaded).

    pip install transformers
    compile-tune examples/hf_gpt2_train.py --task train --space quick
"""
import torch
from transformers import GPT2Config, GPT2LMHeadModel

BATCH, SEQ = 4, 64
CONFIG = GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=2048, n_positions=256, bos_token_id=0,
                    eos_token_id=0)


def build_model():
    torch.manual_seed(0)
    return GPT2LMHeadModel(CONFIG)


def example_inputs():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, CONFIG.vocab_size, (BATCH, SEQ), generator=g)
    return {"input_ids": ids, "labels": ids}


def loss_fn(output, inputs):
    return output.loss
