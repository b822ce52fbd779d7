"""Every walk over a trial's inputs and outputs sees the same leaves (tuner/measure/tree.py)."""
from dataclasses import dataclass, field

import torch
from torch.utils._pytree import tree_is_leaf
from transformers.modeling_outputs import CausalLMOutput

from tuner.measure.correctness import compare, flatten, to_float64
from tuner.measure.devices import to_device
from tuner.measure.mix import signature
from tuner.measure.steps import _snapshot
from tuner.measure.tree import map_tensors, named_leaves


@dataclass(frozen=True)
class Plain:
    """A user's output dataclass that nobody registered with pytree."""

    logits: torch.Tensor
    extra: tuple
    note: str = "x"
    cache: list = field(default_factory=list, init=False)


def _nested():
    grad = torch.ones(2, requires_grad=True)
    hf = CausalLMOutput(loss=(grad * 2).sum(), logits=grad * 3)
    plain = Plain(torch.zeros(3, requires_grad=True) * 1, ({"h": torch.arange(2)}, None))
    return {"hf": hf, "plain": plain, "pair": (torch.ones(1), [torch.full((2,), 0.5)])}


NAMES = ["out.hf.loss", "out.hf.logits", "out.plain.logits", "out.plain.extra[0].h",
         "out.pair[0]", "out.pair[1][0]"]


def test_hf_output_plain_dataclass_and_containers_are_named_by_path():
    assert sorted(flatten(_nested())) == sorted(NAMES)
    assert [name for name, _ in named_leaves(_nested()) if name in NAMES] == NAMES


def test_all_walkers_agree_on_which_tensors_they_reach():
    value = _nested()
    tensors = flatten(value)
    moved = flatten(to_device(value, "meta"))
    assert sorted(moved) == sorted(tensors) and all(t.device.type == "meta" for t in moved.values())
    wide = flatten(to_float64(value))
    assert sorted(wide) == sorted(tensors)
    assert all(wide[k].dtype == (torch.float64 if t.is_floating_point() else t.dtype) for k, t in tensors.items())
    snap = flatten(_snapshot(None, value, None)["output"])
    assert sorted(snap) == sorted(tensors)
    assert all(not t.requires_grad and t.data_ptr() != tensors[k].data_ptr() for k, t in snap.items())
    assert signature(value).count("|") == len(named_leaves(value)) - 1


def test_containers_keep_their_types_and_other_fields():
    moved = map_tensors(lambda t: t + 1, _nested())
    assert isinstance(moved["hf"], CausalLMOutput) and isinstance(moved["plain"], Plain)
    assert moved["plain"].note == "x" and moved["plain"].cache == []
    assert isinstance(moved["pair"], tuple) and isinstance(moved["pair"][1], list)
    assert torch.equal(moved["plain"].extra[0]["h"], torch.arange(2) + 1)


def test_nothing_is_registered_with_pytree():
    map_tensors(lambda t: t, Plain(torch.ones(1), ()))
    assert tree_is_leaf(Plain(torch.ones(1), ()))


def test_a_wrong_dataclass_field_is_named_in_the_comparison():
    a = _nested()
    b = map_tensors(lambda t: t.clone(), a)
    b["plain"] = Plain(torch.ones(3), a["plain"].extra)
    assert compare(a, b).startswith("out.plain.logits: max abs difference")
