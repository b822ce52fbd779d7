"""A stock Hugging Face GPT-2 trained the way `transformers.Trainer` trains it: the workload that
examples/hf_trainer.py trains with a tuned config. Default GPT2Config settings (dropout 0.1) at a
small size, random weights (nothing is downloaded).

    pip install -e '.[hf]'
    compile-tune examples/hf_trainer_gpt2.py --task train --space quick --trials 3 --steps 10000
    python examples/hf_trainer.py results/hf_trainer_gpt2 --compare

The timed step is the one Trainer runs: the model gets ``num_items_in_batch`` (Trainer passes it
to models whose forward takes ``**kwargs``, and GPT-2's loss divides by it), and the optimizer is
Trainer's default, ``adamw_torch_fused`` (``torch.optim.AdamW(fused=True)``). Trainer steps its
own optimizer, so a compiled optimizer step cannot be carried to it: examples/hf_trainer_space.yaml
is the default space without one (the quick space has none either).
"""
import torch
from transformers import GPT2Config, GPT2LMHeadModel

BATCH, SEQ = 4, 64
LR = 5e-4
CONFIG = GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=2048, n_positions=256, bos_token_id=0,
                    eos_token_id=0)


def build_model(config: GPT2Config = CONFIG):
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    # The loss GPT-2 uses anyway, named. Unnamed (transformers 5 cannot tell it from the class
    # name GPT2LMHeadModel), every forward calls a logger, a graph break in the compiled model, and
    # Trainer counts the labels unshifted, so its loss is the mean scaled by (SEQ - 1) / SEQ.
    model.loss_type = "ForCausalLM"
    return model


def sequence(g: torch.Generator) -> torch.Tensor:
    """One training sequence that can be learned: a random 8-token motif, repeated."""
    return torch.randint(0, CONFIG.vocab_size, (8,), generator=g).repeat(SEQ // 8)


def example_inputs():
    g = torch.Generator().manual_seed(1)
    ids = torch.stack([sequence(g) for _ in range(BATCH)])
    # Trainer counts the batch's labels after the causal shift (labels[..., 1:] != -100) and hands
    # the count to the model as a float tensor (it divides it by the parallel sizes).
    return {"input_ids": ids, "labels": ids, "num_items_in_batch": torch.tensor(float(BATCH * (SEQ - 1)))}


def loss_fn(output, inputs):
    return output.loss


def build_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=LR, fused=True)
