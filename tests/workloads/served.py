"""A small model served as a package over keyword inputs (token ids and their padding mask) whose
batch and length the workload declares in input_dims(): wider than the schedule shows."""
import torch
from torch import nn


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, 32)
        self.out = nn.Linear(32, 8)

    def forward(self, input_ids, attention_mask):
        h = self.embed(input_ids) * attention_mask.unsqueeze(-1)
        return self.out(torch.sin(h) * 1.1 + torch.cos(h))


def build_model():
    torch.manual_seed(0)
    return Tagger()


def _batch(rows, length, g):
    ids = torch.randint(0, 100, (rows, length), generator=g)
    mask = torch.ones(rows, length)
    mask[:, length - 3:] = 0.0  # padding at the end of every row
    return {"input_ids": ids, "attention_mask": mask}


def example_inputs():
    return _batch(4, 24, torch.Generator().manual_seed(0))


def input_schedule():
    g = torch.Generator().manual_seed(1)
    return [_batch(4, n, g) for n in (17, 24, 40, 33, 24)]


def input_dims():
    # a server's batches hold 1 to 8 requests of 2 to 64 tokens
    return {"input_ids": {0: (1, 8), 1: (2, 64)}, "attention_mask": {0: (1, 8), 1: (2, 64)}}
