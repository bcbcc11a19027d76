"""Parity of scaled dot-product attention and multi-head attention with PyTorch's own implementations."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_utils import MultiHeadAttention, scaled_dot_product_attention
from course_utils.interop import load_mha_from_torch
from course_utils.masks import causal_mask, from_torch_key_padding_mask, padding_mask, to_additive_mask

TOL = {torch.float64: dict(atol=1e-10, rtol=1e-10), torch.float32: dict(atol=1e-5, rtol=1e-5)}
DTYPES = [torch.float64, torch.float32]


def _qkv(dtype, device, b=2, h=3, t_q=5, t_k=7, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    make = lambda t: torch.randn(b, h, t, d, generator=g, dtype=dtype).to(device)  # noqa: E731
    return make(t_q), make(t_k), make(t_k)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("need_weights", [True, False])
def test_sdpa_matches_torch(dtype, need_weights, device):
    q, k, v = _qkv(dtype, device)
    ours, weights = scaled_dot_product_attention(q, k, v, need_weights=need_weights)
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v), **TOL[dtype])
    assert (weights is not None) == need_weights
    if need_weights:
        torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("kind", ["bool", "additive", "causal"])
def test_sdpa_masks_match_torch(dtype, need_weights, kind, device):
    q, k, v = _qkv(dtype, device, t_q=6, t_k=6)
    ids = torch.tensor([[5, 6, 7, 8, 0, 0], [1, 2, 3, 4, 5, 6]], device=device)
    mask = padding_mask(ids) & causal_mask(6, device=device)
    if kind == "causal":
        ours, _ = scaled_dot_product_attention(q, k, v, is_causal=True, need_weights=need_weights)
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        m = mask if kind == "bool" else to_additive_mask(mask, dtype)
        ours, _ = scaled_dot_product_attention(q, k, v, m, need_weights=need_weights)
        ref = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    torch.testing.assert_close(ours, ref, **TOL[dtype])


@pytest.mark.parametrize("need_weights", [True, False])
def test_fully_masked_rows_give_zeros_and_finite_gradients(need_weights):
    q, k, v = (t.requires_grad_() for t in _qkv(torch.float64, "cpu", t_q=3, t_k=4))
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[1] = False  # query 1 may see nothing
    out, w = scaled_dot_product_attention(q, k, v, mask, need_weights=need_weights)
    assert torch.equal(out[:, :, 1], torch.zeros_like(out[:, :, 1]))
    assert torch.isfinite(out).all()
    if need_weights:
        assert torch.equal(w[:, :, 1], torch.zeros_like(w[:, :, 1]))
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


def test_sdpa_gradients_match_torch():
    q, k, v = (t.requires_grad_() for t in _qkv(torch.float64, "cpu"))
    q2, k2, v2 = (t.detach().clone().requires_grad_() for t in (q, k, v))
    scaled_dot_product_attention(q, k, v)[0].square().sum().backward()
    F.scaled_dot_product_attention(q2, k2, v2).square().sum().backward()
    for a, b in ((q, q2), (k, k2), (v, v2)):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-10, rtol=1e-10)


def _pair(dtype, device, d=16, h=4, bias=True):
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(d, h, batch_first=True, bias=bias, dtype=dtype).to(device)
    ours = load_mha_from_torch(MultiHeadAttention(d, h, bias=bias).to(device=device, dtype=dtype), ref)
    return ours, ref


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("case", ["self", "cross", "key_padding", "causal", "cross_kv_differ", "no_bias"])
def test_mha_matches_nn_multihead_attention(dtype, need_weights, case, device):
    ours, ref = _pair(dtype, device, bias=case != "no_bias")
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 5, 16, generator=g, dtype=dtype).to(device)
    mem = torch.randn(3, 7, 16, generator=g, dtype=dtype).to(device)
    kpm = torch.zeros(3, 7, dtype=torch.bool, device=device)
    kpm[0, -3:] = True
    kpm[2, -1:] = True
    if case in ("self", "no_bias"):
        expected, _ = ref(x, x, x)
        got = ours(x, need_weights=need_weights)
    elif case == "cross":
        expected, _ = ref(x, mem, mem)
        got = ours(x, mem, need_weights=need_weights)
    elif case == "cross_kv_differ":
        val = torch.randn(3, 7, 16, generator=g, dtype=dtype).to(device)
        expected, _ = ref(x, mem, val)
        got = ours(x, mem, val, need_weights=need_weights)
    elif case == "key_padding":
        expected, _ = ref(x, mem, mem, key_padding_mask=kpm)
        got = ours(x, mem, mask=from_torch_key_padding_mask(kpm), need_weights=need_weights)
    else:
        expected, _ = ref(x, x, x, attn_mask=~causal_mask(5, device=device))
        got = ours(x, is_causal=True, need_weights=need_weights)
    torch.testing.assert_close(got, expected, **TOL[dtype])


def test_mha_weights_match_torch_average_and_are_recorded():
    ours, ref = _pair(torch.float64, "cpu")
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    _, ref_w = ref(x, x, x, need_weights=True, average_attn_weights=False)  # (B, h, T, T)
    ours(x, need_weights=True)
    torch.testing.assert_close(ours.last_weights, ref_w, atol=1e-10, rtol=1e-10)


def test_mha_gradients_match_torch():
    ours, ref = _pair(torch.float64, "cpu")
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    ours(x, is_causal=True).square().sum().backward()
    ref(x, x, x, attn_mask=~causal_mask(6))[0].square().sum().backward()
    torch.testing.assert_close(ours.qkv_proj.weight.grad, ref.in_proj_weight.grad, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(ours.out_proj.weight.grad, ref.out_proj.weight.grad, atol=1e-10, rtol=1e-10)


def test_mha_dropout_only_in_training():
    mha = MultiHeadAttention(16, 4, dropout=0.5)
    x = torch.randn(2, 6, 16)
    mha.eval()
    assert torch.equal(mha(x), mha(x))
    mha.train()
    assert not torch.equal(mha(x), mha(x))
