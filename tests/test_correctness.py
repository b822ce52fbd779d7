from dataclasses import dataclass

import torch

from tuner.measure.correctness import compare, flatten, to_float64


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


def test_bfloat16_rounding_passes_and_a_wrong_bfloat16_result_fails():
    # eager rounds every intermediate to bfloat16; a fused kernel rounds once at the end
    torch.manual_seed(0)
    exact = torch.randn(4096)
    eager = (exact * 1.001).bfloat16()
    fused = (exact * 0.999).bfloat16()
    assert compare(eager, fused, tol=1e-3) is None
    assert compare(eager, (exact + 1).bfloat16(), tol=1e-3) is not None
    assert compare(eager, (exact * 2).bfloat16(), tol=1e-3) is not None
    assert compare(eager, torch.flip(exact, [0]).bfloat16(), tol=1e-3) is not None


def test_float16_gradients_with_accumulation_noise_pass_the_cosine_test():
    torch.manual_seed(0)
    exact = torch.randn(512, 64)
    eager = (exact + 0.02 * torch.randn(512, 64)).half()
    compiled = (exact + 0.02 * torch.randn(512, 64)).half()
    assert compare(eager, compiled, tol=1e-2) is None
    assert "cosine" in compare(eager, torch.randn(512, 64).half(), tol=1e-2)


def test_the_float64_reference_is_computed_only_when_needed():
    calls = []
    a = torch.randn(100)
    assert compare(a, a.clone(), fp64_reference=lambda: calls.append(1)) is None
    assert calls == []
