"""A stock Hugging Face BERT serving requests of many lengths: default BertConfig settings at a
small size, random weights (nothing is downloaded), padding masks, and a schedule of request
lengths as a server sees them (short requests most often).

    pip install transformers
    compile-tune examples/hf_bert_requests.py --space dynamic
"""
import torch
from transformers import BertConfig, BertModel

BATCH = 8
CONFIG = BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512,
                    vocab_size=2048, max_position_embeddings=256)
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
