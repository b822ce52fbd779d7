"""T5-small (60M) encoder-decoder: a stock Hugging Face ``T5ForConditionalGeneration`` with the
t5-small config (6+6 layers, d_model 512, d_ff 2048, 8 heads, 32128-token vocabulary), random
weights (nothing is downloaded), no KV cache (``use_cache=False``). Inference, teacher-forced:
batch 2, source 64 tokens (with padding masks), target 16 tokens.

Parameters: 60,506,624 (the LM head is tied to the shared embedding).

    compile-tune benchmarks/zoo/t5_small.py --budget 14m
"""
import torch
from transformers import T5Config, T5ForConditionalGeneration

TASK = "infer"
#: Issue 45's limit: a verdict within 10 minutes on a 2-core machine (docs/zoo.md, measurement 9).
BUDGET = "8m"

BATCH, SOURCE, TARGET = 2, 64, 16
CONFIG = T5Config(d_model=512, d_ff=2048, num_layers=6, num_heads=8, d_kv=64, vocab_size=32128,
                  use_cache=False)


def build_model():
    torch.manual_seed(0)
    return T5ForConditionalGeneration(CONFIG)


def example_inputs():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(2, CONFIG.vocab_size, (BATCH, SOURCE), generator=g)
    mask = torch.ones(BATCH, SOURCE, dtype=torch.long)
    mask[1, SOURCE - SOURCE // 4:] = 0  # the second source is shorter: padded
    ids[1, SOURCE - SOURCE // 4:] = CONFIG.pad_token_id
    decoder_ids = torch.randint(2, CONFIG.vocab_size, (BATCH, TARGET), generator=g)
    decoder_ids[:, 0] = CONFIG.pad_token_id  # T5 starts decoding from the pad token
    return {"input_ids": ids, "attention_mask": mask, "decoder_input_ids": decoder_ids}
