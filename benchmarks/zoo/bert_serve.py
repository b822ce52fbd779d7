"""BERT-base (110M) serving requests of many lengths: a stock Hugging Face
``BertModel(BertConfig())`` at its real size (12 layers, 768 wide), random weights (nothing is
downloaded). Batches of 4 requests with padding masks, request lengths between 16 and 128 tokens
in the order a server meets them (short requests most often).

Parameters: 109,482,240 (including the pooler).

    compile-tune benchmarks/zoo/bert_serve.py --budget 40m
"""
import torch
from transformers import BertConfig, BertModel

TASK = "infer"
#: Issue 45's limit: a verdict within 10 minutes on a 2-core machine (docs/zoo.md, measurement 9).
BUDGET = "10m"

BATCH = 4
CONFIG = BertConfig()
#: Request lengths in the order a server meets them; each listed as often as it occurs.
LENGTHS = [24, 40, 24, 64, 17, 24, 96, 40, 33, 24, 128, 40, 57, 24, 80, 40]


def build_model():
    torch.manual_seed(0)
    return BertModel(CONFIG)


def _batch(length, g):
    ids = torch.randint(0, CONFIG.vocab_size, (BATCH, length), generator=g)
    mask = torch.ones(BATCH, length, dtype=torch.long)
    for row in range(BATCH):  # padding: each request of the batch is a little shorter
        mask[row, length - row * length // (2 * BATCH):] = 0
    return {"input_ids": ids, "attention_mask": mask}


def example_inputs():
    return _batch(LENGTHS[0], torch.Generator().manual_seed(1))


def input_schedule():
    g = torch.Generator().manual_seed(2)
    return [_batch(n, g) for n in LENGTHS]


def input_dims():
    # what the server takes, wider than the schedule shows: `compile-tune package` exports these bounds
    return {"input_ids": {0: (1, 8), 1: (8, 256)}, "attention_mask": {0: (1, 8), 1: (8, 256)}}
