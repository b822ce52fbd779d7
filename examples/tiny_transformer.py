"""A small pre-LayerNorm transformer encoder with repeated blocks.

The repeated `Block` class is what `target: blocks` (regional compilation) compiles once and
reuses for every layer. Tune it with:

    compile-tune examples/tiny_transformer.py --space quick --trials 8
"""
import torch
from torch import nn
from torch.nn import functional as F

D_MODEL, N_HEADS, N_LAYERS, VOCAB = 128, 4, 4, 512
BATCH, SEQ = 8, 64


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TinyTransformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.blocks = nn.ModuleList(Block(D_MODEL, N_HEADS) for _ in range(N_LAYERS))
        self.norm = nn.LayerNorm(D_MODEL)
        self.head = nn.Linear(D_MODEL, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def build_model() -> nn.Module:
    torch.manual_seed(0)
    return TinyTransformer()


def example_inputs():
    g = torch.Generator().manual_seed(1)
    return (torch.randint(0, VOCAB, (BATCH, SEQ), generator=g),)


def loss_fn(logits, inputs):
    (tokens,) = inputs
    # next-token prediction on the input itself
    return F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))


def input_schedule():
    """Sequence lengths a real serving run sees: a few buckets, revisited."""
    g = torch.Generator().manual_seed(2)
    return [(torch.randint(0, VOCAB, (BATCH, t), generator=g),) for t in (64, 32, 96, 64, 128)]
