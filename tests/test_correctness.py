from dataclasses import dataclass

import torch

from tuner.correctness import compare, flatten, to_float64


@dataclass
class Out:
    logits: torch.Tensor
    extra: tuple


def test_nested_outputs_are_flattened_by_path():
    out = Out(torch.ones(2), (torch.zeros(1), {"h": torch.ones(3)}))
    assert sorted(flatten(out)) == ["out.extra[0]", "out.extra[1].h", "out.logits"]


def test_equal_and_slightly_different_results_pass():
    a = {"x": torch.randn(50), "y": [torch.arange(3)]}
    b = {"x": a["x"] + 1e-6, "y": [torch.arange(3)]}
    assert compare(a, b) is None


def test_wrong_values_shapes_and_integers_fail_with_a_reason():
    a = torch.randn(10)
    assert "exceeds tolerance" in compare(a, a + 0.5)
    assert "shape" in compare(a, torch.randn(11))
    assert "integer/bool values differ" in compare(torch.arange(3), torch.arange(3) + 1)
    assert "structure differs" in compare((a,), (a, a))


def test_float64_reference_accepts_compiled_rounding_no_worse_than_eager():
    torch.manual_seed(0)
    exact = torch.randn(2000, dtype=torch.float64)
    eager = (exact + torch.randn(2000, dtype=torch.float64) * 1e-2).float()
    compiled = (exact + torch.randn(2000, dtype=torch.float64) * 1e-2).float()
    assert compare(eager, compiled, tol=1e-3) is not None
    assert compare(eager, compiled, fp64_reference=exact, tol=1e-3) is None
    worse = (exact + torch.randn(2000, dtype=torch.float64) * 1e-1).float()
    assert "RMSE" in compare(eager, worse, fp64_reference=exact, tol=1e-3)


def test_to_float64_converts_only_floating_tensors():
    converted = to_float64((torch.ones(2), torch.arange(2), {"m": torch.nn.Linear(2, 2)}))
    assert converted[0].dtype == torch.float64 and converted[1].dtype == torch.int64
    assert converted[2]["m"].weight.dtype == torch.float64
