"""course_utils.losses against PyTorch: values, gradients, edge cases and error messages."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from course_utils.losses import cross_entropy, log_softmax, perplexity, sequence_nll

TOLERANCE = {torch.float64: 1e-10, torch.float32: 1e-5}


@st.composite
def problems(draw):
    """Random logits (..., V), targets with some positions ignored, and the loss options."""
    lead = draw(st.sampled_from([(draw(st.integers(1, 9)),),
                                 (draw(st.integers(1, 4)), draw(st.integers(1, 6)))]))
    vocab = draw(st.integers(1, 12))
    ignore_index = draw(st.sampled_from([-100, -1, 0, vocab - 1, vocab + 3]))
    smoothing = draw(st.sampled_from([0.0, 0.1, 0.5, 1.0]) | st.floats(0.0, 1.0))
    reduction = draw(st.sampled_from(["mean", "sum", "none"]))
    scale = draw(st.sampled_from([0.1, 1.0, 10.0, 60.0]))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    logits = torch.randn(*lead, vocab, generator=g, dtype=torch.float64) * scale
    targets = torch.randint(0, vocab, lead, generator=g)
    drop = torch.rand(lead, generator=g) < draw(st.sampled_from([0.0, 0.3, 1.0]))
    targets[drop] = ignore_index
    return logits, targets, ignore_index, smoothing, reduction


def _reference(logits, targets, **kw):
    # F.cross_entropy wants the classes in dimension 1: (B, V, T) for sequences.
    return F.cross_entropy(logits.movedim(-1, 1) if logits.dim() > 2 else logits, targets, **kw)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@given(problem=problems())
def test_cross_entropy_matches_torch_values_and_gradients(dtype, problem):
    logits64, targets, ignore_index, smoothing, reduction = problem
    kept = int((targets != ignore_index).sum())
    if reduction == "mean" and kept == 0:
        return  # F.cross_entropy gives nan here; our documented 0.0 is tested separately
    kw = {"ignore_index": ignore_index, "label_smoothing": smoothing, "reduction": reduction}
    ours_in = logits64.to(dtype).requires_grad_(True)
    ref_in = logits64.to(dtype).requires_grad_(True)
    ours, ref = cross_entropy(ours_in, targets, **kw), _reference(ref_in, targets, **kw)
    assert ours.shape == ref.shape and ours.dtype == dtype
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(ours, ref, rtol=tol, atol=tol)
    # backward with a random upstream gradient so that "none" exercises every position independently
    upstream = torch.rand(ref.shape, generator=torch.Generator().manual_seed(0), dtype=dtype)
    (ours * upstream).sum().backward()
    (ref * upstream).sum().backward()
    torch.testing.assert_close(ours_in.grad, ref_in.grad, rtol=tol, atol=tol)


@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=3), seed=st.integers(0, 2**31),
       scale=st.sampled_from([1.0, 30.0, 1e4]), dtype=st.sampled_from([torch.float32, torch.float64]))
def test_log_softmax_matches_torch(shape, seed, scale, dtype):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype) * scale
    for dim in range(-len(shape), len(shape)):
        ours_in, ref_in = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        ours, ref = log_softmax(ours_in, dim=dim), torch.log_softmax(ref_in, dim=dim)
        assert torch.isfinite(ours).all()
        tol = TOLERANCE[dtype]
        torch.testing.assert_close(ours, ref, rtol=tol, atol=tol * max(1.0, scale / 1e3))
        upstream = torch.randn_like(x)
        (ours * upstream).sum().backward()
        (ref * upstream).sum().backward()
        torch.testing.assert_close(ours_in.grad, ref_in.grad, rtol=tol, atol=tol)


def test_log_softmax_huge_logits_stay_finite_where_naive_overflows():
    x = torch.tensor([[1e4, 0.0, -1e4], [1e4, 1e4, 1e4]], dtype=torch.float32)
    naive = torch.log(torch.exp(x) / torch.exp(x).sum(-1, keepdim=True))
    assert not torch.isfinite(naive).all()  # the reason for the max shift
    ours = log_softmax(x)
    assert torch.isfinite(ours).all()
    torch.testing.assert_close(ours, torch.log_softmax(x, -1))
    torch.testing.assert_close(ours[1], torch.full((3,), -math.log(3)))


def test_log_softmax_keeps_minus_inf_entries():
    x = torch.tensor([0.0, float("-inf"), 1.0])
    ours = log_softmax(x)
    assert ours[1] == float("-inf")
    torch.testing.assert_close(ours, torch.log_softmax(x, -1))


def test_all_targets_ignored_gives_zero_with_finite_gradient():
    logits = torch.randn(2, 3, 5, requires_grad=True)
    targets = torch.full((2, 3), -100)
    loss = cross_entropy(logits, targets, label_smoothing=0.1)
    assert loss.item() == 0.0
    loss.backward()
    assert torch.equal(logits.grad, torch.zeros_like(logits))
    assert cross_entropy(logits, targets, reduction="sum").item() == 0.0


def test_ignored_positions_do_not_change_the_mean():
    logits = torch.randn(1, 4, 7, dtype=torch.float64)
    targets = torch.tensor([[1, 2, 3, 4]])
    padded_logits = torch.cat([logits, torch.randn(1, 3, 7, dtype=torch.float64) * 100], dim=1)
    padded_targets = torch.cat([targets, torch.full((1, 3), 6)], dim=1)  # 6 = the pad id
    plain = cross_entropy(logits, targets)
    padded = cross_entropy(padded_logits, padded_targets, ignore_index=6)
    torch.testing.assert_close(plain, padded, rtol=1e-12, atol=1e-12)


def test_half_precision_logits_are_computed_in_float32():
    logits = torch.randn(6, 9) * 20
    targets = torch.randint(0, 9, (6,))
    loss = cross_entropy(logits.to(torch.bfloat16), targets)
    assert loss.dtype == torch.float32
    ref = F.cross_entropy(logits.to(torch.bfloat16).float(), targets)
    torch.testing.assert_close(loss, ref)


def test_integer_dtypes_other_than_long_are_accepted():
    logits = torch.randn(5, 4, dtype=torch.float64)
    targets = torch.tensor([0, 3, 1, 2, 3])
    ours = cross_entropy(logits, targets.to(torch.int32))
    torch.testing.assert_close(ours, F.cross_entropy(logits, targets))


@pytest.mark.parametrize(
    ("logits", "targets", "kwargs", "error", "fragment"),
    [
        (torch.randn(4, 5), torch.rand(4), {}, TypeError, "targets.long()"),
        (torch.randn(4, 5), torch.ones(4, dtype=torch.bool), {}, TypeError, "integer class ids"),
        (torch.randint(0, 5, (4, 5)), torch.zeros(4, dtype=torch.long), {}, TypeError, "floating-point"),
        (torch.randn(4, 5), torch.zeros(3, dtype=torch.long), {}, ValueError, "does not match"),
        (torch.randn(2, 5, 7), torch.zeros(2, 7, dtype=torch.long), {}, ValueError, "transpose(1, 2)"),
        (torch.randn(2, 7, 5), torch.zeros(2, 6, dtype=torch.long), {}, ValueError, "ids[:, 1:]"),
        (torch.randn(4, 5), torch.tensor([0, 1, 5, 2]), {}, ValueError, "vocabulary of size V=5"),
        (torch.randn(4, 5), torch.tensor([0, -3, 1, 2]), {}, ValueError, "vocabulary of size V=5"),
        (torch.randn(5), torch.tensor(1), {}, ValueError, "(N, V) or (B, T, V)"),
        (torch.randn(4, 5), torch.zeros(4, dtype=torch.long), {"reduction": "avg"}, ValueError, "reduction"),
        (torch.randn(4, 5), torch.zeros(4, dtype=torch.long), {"label_smoothing": 1.5}, ValueError, "[0, 1]"),
        ([[0.0, 1.0]], torch.zeros(1, dtype=torch.long), {}, TypeError, "torch.Tensor"),
    ],
)
def test_cross_entropy_errors_say_how_to_fix(logits, targets, kwargs, error, fragment):
    with pytest.raises(error) as info:
        cross_entropy(logits, targets, **kwargs)
    assert fragment in str(info.value)


def test_negative_ignore_index_is_not_reported_as_out_of_range():
    logits = torch.randn(3, 5)
    assert torch.isfinite(cross_entropy(logits, torch.tensor([-100, 2, -100])))
    with pytest.raises(ValueError, match="V=5"):
        cross_entropy(logits, torch.tensor([-100, 2, -1]))


def test_perplexity():
    vocab = 37
    uniform = torch.zeros(3, 4, vocab)
    nll = cross_entropy(uniform, torch.randint(0, vocab, (3, 4)))
    assert perplexity(nll.item()) == pytest.approx(vocab, rel=1e-6)
    torch.testing.assert_close(perplexity(nll), torch.tensor(float(vocab)))
    assert perplexity(0.0) == 1.0
    assert perplexity(1e6) == math.inf
    with pytest.raises(ValueError, match="negate"):
        perplexity(-0.5)
    with pytest.raises(ValueError, match="negate"):
        perplexity(torch.tensor(-0.5))
    with pytest.raises(ValueError, match="nan"):
        perplexity(float("nan"))
    with pytest.raises(TypeError):
        perplexity("2.0")


def test_perplexity_takes_numpy_scalars_and_refuses_nan_tensors():
    """Reliability review (Low): np.float32 was refused while a NaN tensor passed through as NaN."""
    import numpy as np

    assert perplexity(np.float32(math.log(5.0))) == pytest.approx(5.0, rel=1e-6)
    assert perplexity(np.int64(0)) == 1.0 and perplexity(np.float64(0.0)) == 1.0
    for nan in (torch.tensor(float("nan")), torch.tensor([1.0, float("nan")]), np.float32("nan")):
        with pytest.raises(ValueError, match="nan"):
            perplexity(nan)
    with pytest.raises(TypeError, match="float"):
        perplexity(torch.tensor(True))


def test_sequence_nll_is_the_chain_rule_sum():
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(3, 5, 6, generator=g, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 6, (3, 5), generator=g)
    targets[1, 3:] = -100  # a shorter second sequence
    nll = sequence_nll(logits, targets)
    assert nll.shape == (3,)
    probs = torch.softmax(logits.detach(), -1)
    for b in range(3):
        p_sequence = 1.0
        for t in range(5):
            if targets[b, t] != -100:
                p_sequence *= probs[b, t, targets[b, t]].item()
        assert math.exp(-nll[b].item()) == pytest.approx(p_sequence, rel=1e-10)
    ref = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none").sum(-1)
    torch.testing.assert_close(nll, ref, rtol=1e-12, atol=1e-12)
    nll.sum().backward()
    assert torch.isfinite(logits.grad).all()
    with pytest.raises(ValueError, match=r"\(B, T, V\)"):
        sequence_nll(torch.randn(5, 6), torch.zeros(5, dtype=torch.long))
