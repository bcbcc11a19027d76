"""Parity of scaled dot-product attention and multi-head attention with PyTorch's own implementations."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_utils import MultiHeadAttention, attention_with_weights
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
    ours, weights = attention_with_weights(q, k, v, need_weights=need_weights)
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
        ours, _ = attention_with_weights(q, k, v, is_causal=True, need_weights=need_weights)
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        m = mask if kind == "bool" else to_additive_mask(mask, dtype)
        ours, _ = attention_with_weights(q, k, v, m, need_weights=need_weights)
        ref = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    torch.testing.assert_close(ours, ref, **TOL[dtype])


@pytest.mark.parametrize("need_weights", [True, False])
def test_fully_masked_rows_give_zeros_and_finite_gradients(need_weights):
    q, k, v = (t.requires_grad_() for t in _qkv(torch.float64, "cpu", t_q=3, t_k=4))
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[1] = False  # query 1 may see nothing
    out, w = attention_with_weights(q, k, v, mask, need_weights=need_weights)
    assert torch.equal(out[:, :, 1], torch.zeros_like(out[:, :, 1]))
    assert torch.isfinite(out).all()
    if need_weights:
        assert torch.equal(w[:, :, 1], torch.zeros_like(w[:, :, 1]))
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("kind", ["bool", "additive", "causal"])
def test_no_queries_with_a_mask_give_an_empty_result_like_torch(need_weights, kind):
    q, k, v = _qkv(torch.float64, "cpu", t_q=0, t_k=4)
    mask = torch.tensor([True, True, False, True])  # (T_k,): broadcasts to (B, h, 0, T_k)
    m = to_additive_mask(mask, torch.float64) if kind == "additive" else mask
    ours, w = attention_with_weights(q, k, v, m, need_weights=need_weights, is_causal=kind == "causal")
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=m)  # torch takes T_q = 0 (it refuses mask + is_causal)
    assert ours.shape == ref.shape == (2, 3, 0, 8)
    if need_weights:
        assert w.shape == (2, 3, 0, 4)
    else:
        assert w is None


def test_sdpa_gradients_match_torch():
    q, k, v = (t.requires_grad_() for t in _qkv(torch.float64, "cpu"))
    q2, k2, v2 = (t.detach().clone().requires_grad_() for t in (q, k, v))
    attention_with_weights(q, k, v)[0].square().sum().backward()
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
        # the dedicated keyword: (B, T_k), True = attend, i.e. the complement of torch's key_padding_mask
        torch.testing.assert_close(ours(x, mem, key_keep_mask=~kpm, need_weights=need_weights), expected,
                                   **TOL[dtype])
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


# ---------------------------------------------------------------------------------------------------------------
# No false friends (library.md items 2, 3, 5, 14; reliability.md items 3, 4, 11 and the Low fp16 / T×T items)
# ---------------------------------------------------------------------------------------------------------------


def test_mha_cannot_be_called_or_unpacked_pytorch_style():
    """``out, w = mha(x, x, x)`` with B = 2 used to unpack the batch; a 4th positional arg was a keep-mask."""
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 4, 8)
    with pytest.raises(TypeError, match="returns one tensor .* not nn.MultiheadAttention's .* pair"):
        out, w = mha(x, x, x)
    with pytest.raises(TypeError, match="returns one tensor"):
        out, w = mha(x, x, x, need_weights=True)
    kpm = torch.zeros(2, 4, dtype=torch.bool)
    with pytest.raises(TypeError, match="4th positional argument is nn.MultiheadAttention's key_padding_mask"):
        mha(x, x, x, kpm)
    with pytest.raises(TypeError, match=r"key_keep_mask=~key_padding_mask"):
        mha(x, x, x, key_padding_mask=kpm)
    with pytest.raises(TypeError, match=r"pass ~attn_mask"):
        mha(x, attn_mask=causal_mask(4))
    with pytest.raises(TypeError, match="does not take"):
        mha(x, masks=causal_mask(4))
    # everywhere else the output is an ordinary tensor, and results of operations are plain torch.Tensor
    out = mha(x)
    assert isinstance(out, torch.Tensor) and out.shape == (2, 4, 8)
    assert type(out + 1) is torch.Tensor and type(out[0]) is torch.Tensor and type(out.detach()) is torch.Tensor
    assert repr(out).startswith("tensor(")
    out.sum().backward()
    assert mha.qkv_proj.weight.grad is not None


def test_attention_with_weights_is_not_torchs_name():
    import course_utils as cu

    assert not hasattr(cu, "scaled_dot_product_attention")
    q, k, v = _qkv(torch.float64, "cpu")
    out, w = attention_with_weights(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), **TOL[torch.float64])
    assert w.shape == (2, 3, 5, 7)


def test_masks_must_broadcast_to_the_scores_never_enlarge_them():
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(1, 4, 8)
    with pytest.raises(ValueError, match=r"does not broadcast to the attention scores"):  # reliability.md item 4
        mha(x, mask=torch.ones(3, 1, 4, 4, dtype=torch.bool), need_weights=True)
    with pytest.raises(ValueError, match=r"does not broadcast"):
        mha(x, mask=torch.ones(3, 1, 4, 4, dtype=torch.bool))
    x2 = torch.randn(2, 4, 8)
    with pytest.raises(ValueError, match=r"3-D .* mask\[:, None\]"):  # B == h used to apply it per head
        mha(x2, mask=torch.ones(2, 4, 4, dtype=torch.bool))
    one_head = MultiHeadAttention(8, 1)  # h == 1 used to pass the check and die in a raw torch error
    with pytest.raises(ValueError, match=r"mask\[:, None\]"):
        one_head(x2, mask=torch.ones(2, 4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="key_keep_mask="):  # a (B, T_k) key mask given as mask=
        mha(torch.randn(2, 3, 8), mask=torch.ones(2, 3, dtype=torch.bool))


def test_float_masks_holding_only_zero_and_one_or_nan_are_refused():
    q, k, v = _qkv(torch.float32, "cpu", t_q=4, t_k=4)
    with pytest.raises(ValueError, match=r"only 0 and 1.*\.bool\(\)"):  # reliability.md item 3: output off by 0.9
        attention_with_weights(q, k, v, torch.tril(torch.ones(4, 4)))
    for bad in (float("nan"), float("inf")):
        m = torch.zeros(4, 4)
        m[1, 2] = bad
        with pytest.raises(ValueError, match="NaN or \\+inf"):
            attention_with_weights(q, k, v, m, need_weights=False)
    ok = to_additive_mask(causal_mask(4))  # 0 / -inf, and an all-zero mask, are fine
    attention_with_weights(q, k, v, ok)
    attention_with_weights(q, k, v, torch.zeros(4, 4))


def test_key_value_and_query_dtypes_and_devices_are_checked():
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 4, 8)
    with pytest.raises(TypeError, match="query is torch.float32 but key is torch.float64"):
        mha(x, x.double())
    with pytest.raises(TypeError, match="query is torch.float32 but value is torch.float16"):
        mha(x, x, x.half())
    with pytest.raises(ValueError, match="key is on meta but query is on cpu"):
        mha(x, x.to("meta"))
    with pytest.raises(TypeError, match="key must be a floating-point"):
        mha(x, x.long())
    with pytest.raises(TypeError, match=r"query has dtype torch.float64 but MultiHeadAttention computes in "
                                        r"torch.float32.*autocast"):
        mha(x.double())
    with pytest.raises(TypeError, match="q is torch.float32 but v is torch.float64"):
        attention_with_weights(x, x, x.double())
    with torch.autocast("cpu", dtype=torch.bfloat16):  # mixed precision stays allowed
        assert mha(x.bfloat16()).dtype == torch.bfloat16


def test_fully_masked_row_does_not_depend_on_dtype():
    """A float32 mask of -1e30 is *finite*: the row keeps its keys in every dtype (it became -inf in fp16)."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, 3, 4, generator=g) for _ in range(3))
    mask = torch.zeros(3, 3)
    mask[1] = -1e30  # every key of row 1 is "very unlikely" but not removed: uniform weights over them
    mask[2] = float("-inf")  # row 2 is fully masked: zeros
    for need_weights in (True, False):
        ref, _ = attention_with_weights(q, k, v, mask, need_weights=need_weights)
        assert torch.equal(ref[..., 2, :], torch.zeros(1, 1, 4))
        torch.testing.assert_close(ref[..., 1, :], v.mean(dim=-2), atol=1e-5, rtol=1e-5)
        for dtype in (torch.float16, torch.bfloat16, torch.float64):
            got, _ = attention_with_weights(q.to(dtype), k.to(dtype), v.to(dtype), mask, need_weights=need_weights)
            torch.testing.assert_close(got[..., 0, :].float(), ref[..., 0, :], atol=2e-2, rtol=2e-2)
            assert torch.isfinite(got).all() and got[..., 1, :].abs().sum() > 0  # row 1 still sees its keys
            assert torch.equal(got[..., 2, :].float(), torch.zeros(1, 1, 4))  # row 2 is the fully masked one


def test_written_out_attention_is_finite_in_fp16_where_the_fused_path_is():
    g = torch.Generator().manual_seed(0)
    q, k, v = (40 * torch.randn(1, 2, 6, 64, generator=g) for _ in range(3))  # q·k ~ 1e5 > fp16 max 65504
    ref, ref_w = attention_with_weights(q, k, v)
    out, w = attention_with_weights(q.half(), k.half(), v.half())
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    torch.testing.assert_close(out.float(), ref, atol=0.2, rtol=1e-2)


def test_long_causal_plus_padding_never_builds_the_full_mask(monkeypatch):
    """reliability.md Low: T = 16384 with causal + padding masks built a T×T mask (+1.6 GB); now row blocks."""
    import course_utils.attention as attn

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, 37, 8, generator=g, dtype=torch.float64) for _ in range(3))
    keep = torch.ones(2, 1, 1, 37, dtype=torch.bool)
    keep[0, ..., 30:] = False
    whole, _ = attention_with_weights(q, k, v, keep, is_causal=True, need_weights=False)
    written, _ = attention_with_weights(q, k, v, keep, is_causal=True)
    monkeypatch.setattr(attn, "MASK_BUDGET", 37 * 5)  # 5 query rows per block
    built = []
    real_ones = torch.ones
    monkeypatch.setattr(torch, "ones", lambda *a, **kw: built.append(a) or real_ones(*a, **kw))
    blocked, _ = attention_with_weights(q, k, v, keep, is_causal=True, need_weights=False)
    torch.testing.assert_close(blocked, whole, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(blocked, written, atol=1e-12, rtol=1e-12)
    assert built and max(a[0] * a[1] for a in built) <= 37 * 5


def test_long_sequence_memory_stays_small():
    """A real size: T = 8192, one head. Without row blocks the peak grows by ~350 MB (T×T mask, then scores)."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import resource, torch
        from course_utils import attention_with_weights
        torch.set_num_threads(2)
        T = 8192
        q = torch.randn(1, 1, T, 8); k = torch.randn(1, 1, T, 8); v = torch.randn(1, 1, T, 8)
        keep = torch.ones(1, 1, 1, T, dtype=torch.bool); keep[..., -100:] = False
        attention_with_weights(q[..., :64, :], k[..., :64, :], v[..., :64, :], keep[..., :64], need_weights=False)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out, _ = attention_with_weights(q, k, v, keep, is_causal=True, need_weights=False)
        assert torch.isfinite(out).all()
        print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert int(run.stdout.split()[-1]) < 120, f"peak grew by {run.stdout.split()[-1]} MB"


def _cached_chunk_logits(model, ids, n_prompt):
    """Logits of ids[:, n_prompt:] fed in one call after the prompt was cached: T_q < T_k."""
    from course_utils import KVCache

    cache = KVCache()
    model(ids[:, :n_prompt], cache=cache)
    return model(ids[:, n_prompt:], cache=cache, extend=True)


@pytest.mark.parametrize("n_new", [1, 4])
def test_cached_chunk_needs_the_bottom_right_causal_mask(monkeypatch, n_new):
    """The course's causal mask (bottom-right when T_q < T_k) reproduces the uncached logits; the classic bug,
    F.scaled_dot_product_attention(is_causal=True) on the cached keys (top-left), changes them."""
    import course_utils.attention as attention
    from course_utils import GPT

    torch.manual_seed(0)
    model = GPT(50, max_len=32, n_layers=2, n_heads=2, d_model=32, dropout=0.0).eval()
    ids = torch.randint(0, 50, (2, 12))
    with torch.no_grad():
        whole = model(ids)[:, 12 - n_new:]  # (B, n_new, V)
        torch.testing.assert_close(_cached_chunk_logits(model, ids, 12 - n_new), whole)
        assert torch.equal(causal_mask(n_new, 12), torch.ones(n_new, 12, dtype=torch.bool).tril(12 - n_new))

        def top_left(q, k, v, mask, is_causal, dropout_p, scale):  # the bug: triangle from the top-left corner
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p,
                                                  is_causal=is_causal and mask is None, scale=scale)

        monkeypatch.setattr(attention, "_fast", top_left)
        wrong = _cached_chunk_logits(model, ids, 12 - n_new)
        torch.testing.assert_close(model(ids)[:, 12 - n_new:], whole)  # T_q = T_k: the corners agree, the bug hides
    assert (wrong - whole).abs().max() > 1e-2
