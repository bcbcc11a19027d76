"""Hostile inputs to the public model / attention / decoding API (issue 11): hypothesis draws shapes, dtypes, masks,
devices ("cpu" / "meta") and argument types at random. Every call must either raise a clear ``ValueError`` /
``TypeError`` raised by course_utils itself (never a raw torch error), or return a finite result equal to an
independent reference where one exists.

``HOSTILE_EXAMPLES`` (default 40 per property) bounds the run; the whole file stays well under 60 s on CPU.
"""

from __future__ import annotations

import math
import os
import traceback

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from course_utils import GPT, MultiHeadAttention, Transformer, attention_with_weights
from course_utils.decoding import beam_search, generate, greedy_decode
from course_utils.interop import load_mha_from_torch

N = int(os.environ.get("HOSTILE_EXAMPLES", "40"))
HOSTILE = settings(max_examples=N, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
FLOATS = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
DTYPES = FLOATS + [torch.int64, torch.bool]
TOL = {torch.float64: 1e-9, torch.float32: 1e-4}


def attempt(fn):
    """``(result, None)`` or ``(None, error)`` for a ValueError / TypeError raised by course_utils; else re-raise."""
    try:
        return fn(), None
    except (ValueError, TypeError) as e:
        frames = traceback.extract_tb(e.__traceback__)
        where = frames[-1].filename.replace(os.sep, "/")
        assert "/torch/" not in where, f"raw torch error escaped: {type(e).__name__}: {e} ({where})"
        assert len(str(e)) > 20, f"unhelpful message: {e!r}"
        return None, e


def _tensor(draw, shape, dtype, device):
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    if dtype == torch.bool:
        t = torch.rand(shape, generator=g) > 0.3
    elif dtype.is_floating_point:
        t = torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)
    else:
        t = torch.randint(0, 5, shape, generator=g).to(dtype)
    return t.to(device)


@st.composite
def masks(draw, b, h, t_q, t_k):
    kind = draw(st.sampled_from(["none", "bool", "additive", "zero_one", "nan", "int", "list"]))
    shape = draw(st.sampled_from([(t_q, t_k), (b, 1, 1, t_k), (b, t_q, t_k), (b + 1, h, t_q, t_k), (1, h, t_q, t_k),
                                  (t_k,), (b, t_k), (t_q, t_k + 1)]))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    keep = torch.rand(shape, generator=g) > draw(st.sampled_from([0.0, 0.3, 0.9]))
    device = draw(st.sampled_from(["cpu", "cpu", "meta"]))
    if kind == "none":
        return None
    if kind == "list":
        return keep.tolist()
    if kind == "bool":
        return keep.to(device)
    if kind == "int":
        return keep.long().to(device)
    if kind == "zero_one":
        return keep.float().to(device)
    m = torch.zeros(shape).masked_fill(~keep, float("-inf"))
    if kind == "nan" and m.numel():
        m.view(-1)[0] = float("nan")
    return m.to(device)


def reference_attention(q, k, v, mask, is_causal, scale=None):
    """Written independently: float64, explicit broadcast, rows without a visible key give zeros."""
    q, k, v = q.double(), k.double(), v.double()
    scores = q @ k.transpose(-2, -1) * (scale if scale is not None else 1 / math.sqrt(q.shape[-1]))
    keep = torch.ones_like(scores, dtype=torch.bool)
    add = torch.zeros_like(scores)
    if mask is not None:
        if mask.dtype == torch.bool:
            keep = keep & mask
        else:
            add = add + mask.double()
            keep = keep & torch.isfinite(add)
    if is_causal:
        t_q, t_k = scores.shape[-2:]
        keep = keep & torch.ones(t_q, t_k, dtype=torch.bool).tril(t_k - t_q)
    scores = torch.where(keep, scores + torch.where(keep, add, 0.0), float("-inf"))
    visible = keep.any(-1, keepdim=True)
    w = torch.softmax(torch.where(visible, scores, 0.0), -1) * visible
    return w @ v


@HOSTILE
@given(data=st.data())
def test_attention_with_weights_hostile(data):
    draw = data.draw
    rank = draw(st.sampled_from([3, 4]))
    b, h, t_q, t_k, d = (draw(st.integers(0, 3)), draw(st.integers(1, 3)), draw(st.integers(0, 5)),
                         draw(st.integers(0, 5)), draw(st.integers(1, 4)))
    lead = (b, h) if rank == 4 else (b,)
    dt = [draw(st.sampled_from(DTYPES)) if draw(st.booleans()) else torch.float64 for _ in range(3)]
    dev = [draw(st.sampled_from(["cpu", "cpu", "cpu", "meta"])) for _ in range(3)]
    d_k = d if draw(st.integers(0, 9)) else d + 1
    q = _tensor(draw, (*lead, t_q, d), dt[0], dev[0])
    k = _tensor(draw, (*lead, t_k, d_k), dt[1], dev[1])
    v = _tensor(draw, (*lead, t_k, d), dt[2], dev[2])
    mask = draw(masks(b, h, t_q, t_k))
    if rank == 3 and isinstance(mask, torch.Tensor) and mask.dim() == 4:
        mask = mask[:, 0]
    kw = dict(need_weights=draw(st.sampled_from([True, False, True, "yes"])),
              is_causal=draw(st.sampled_from([False, False, True, 1])),
              dropout_p=draw(st.sampled_from([0.0, 0.0, 0.0, 1.5, "0.1", float("nan")])))
    got, err = attempt(lambda: attention_with_weights(q, k, v, mask, **kw))
    if err is not None or q.device.type == "meta":
        return
    out, w = got
    assert out.shape == (*lead, t_q, d) and out.dtype == q.dtype
    assert torch.isfinite(out).all()
    if q.dtype in TOL:
        ref = reference_attention(q, k, v, mask, kw["is_causal"])
        torch.testing.assert_close(out.double(), ref, atol=TOL[q.dtype], rtol=TOL[q.dtype])


def _mha_pair(d, h, dtype, bias):
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(d, h, batch_first=True, bias=bias, dtype=dtype)
    return load_mha_from_torch(MultiHeadAttention(d, h, bias=bias).to(dtype), ref), ref


@HOSTILE
@given(data=st.data())
def test_multi_head_attention_hostile(data):
    draw = data.draw
    h = draw(st.sampled_from([1, 2]))
    d = 4 * h
    mod_dtype = draw(st.sampled_from([torch.float64, torch.float32]))
    mha, ref = _mha_pair(d, h, mod_dtype, draw(st.booleans()))
    b, t_q, t_k = draw(st.integers(0, 3)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    x_dtype = mod_dtype if draw(st.integers(0, 4)) else draw(st.sampled_from(DTYPES))
    x = _tensor(draw, (b, t_q, draw(st.sampled_from([d, d, d, d + 1]))), x_dtype, draw(st.sampled_from(["cpu"] * 4
                                                                                                       + ["meta"])))
    cross = draw(st.booleans())
    mem = _tensor(draw, (b if draw(st.integers(0, 5)) else b + 1, t_k, d),
                  mod_dtype if draw(st.integers(0, 5)) else draw(st.sampled_from(DTYPES)),
                  draw(st.sampled_from(["cpu"] * 5 + ["meta"]))) if cross else None
    tk = t_k if cross else t_q
    kkm = None
    if draw(st.booleans()):
        kkm = _tensor(draw, draw(st.sampled_from([(b, tk), (b, tk), (tk,), (b, tk + 1)])),
                      draw(st.sampled_from([torch.bool, torch.bool, torch.float32])), "cpu")
    mask = draw(masks(b, h, t_q, tk))
    style = draw(st.sampled_from(["ours", "ours", "ours", "positional", "torch_kw", "unpack"]))
    is_causal, need_weights = draw(st.sampled_from([False, False, True])), draw(st.booleans())

    def call():
        if style == "positional":
            return mha(x, mem, mem, kkm)
        if style == "torch_kw":
            return mha(x, mem, mem, key_padding_mask=kkm)
        if style == "unpack":
            out, _ = mha(x, mem, mem)
            return out
        return mha(x, mem, mask=mask, key_keep_mask=kkm, is_causal=is_causal, need_weights=need_weights)

    out, err = attempt(call)
    if err is not None:
        return
    assert style == "ours", "a PyTorch-style call was accepted"
    assert out.shape == (b, t_q, d) and torch.isfinite(out).all()
    # compare with nn.MultiheadAttention when every query row keeps a key (torch gives NaN rows otherwise)
    keep = torch.ones(b, h, t_q, tk, dtype=torch.bool)
    if isinstance(mask, torch.Tensor):
        keep = keep & (mask if mask.dtype == torch.bool else torch.isfinite(mask))
    if kkm is not None:
        keep = keep & kkm[:, None, None, :]
    if keep.any(-1).all() and b > 0 and not isinstance(mask, torch.Tensor) and not is_causal:
        src = x if mem is None else mem
        with torch.no_grad():
            expected, _ = ref(x, src, src, key_padding_mask=None if kkm is None else ~kkm, need_weights=False)
        torch.testing.assert_close(out, expected, atol=TOL[mod_dtype], rtol=TOL[mod_dtype])


_GPT = GPT(12, max_len=8, n_layers=1, n_heads=2, d_model=8, dropout=0.1)
_S2S = Transformer(12, 12, d_model=8, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=16, max_len=10)
ODD = [None, -1, 0, 1, 2, 2.0, 2.5, float("nan"), float("inf"), "2", True, [2]]


@HOSTILE
@given(data=st.data())
def test_decoding_hostile(data):
    draw = data.draw
    b, t = draw(st.integers(0, 3)), draw(st.integers(0, 4))
    shape = draw(st.sampled_from([(b, t), (b, t), (t,), (b, t, 1)]))
    dtype = draw(st.sampled_from([torch.long, torch.long, torch.long, torch.int32, torch.float32, torch.bool]))
    ids = _tensor(draw, shape, dtype, draw(st.sampled_from(["cpu"] * 5 + ["meta"])))
    if ids.dtype == torch.long and ids.numel() and draw(st.integers(0, 4)) == 0:
        ids = ids.clone()
        ids.view(-1)[0] = draw(st.sampled_from([-1, 12, 99]))
    which = draw(st.sampled_from(["generate", "greedy", "beam"]))
    if which == "generate":
        n = draw(st.sampled_from([0, 1, 5, 12] + ODD))
        kw = {name: draw(st.sampled_from([default] * 3 + ODD)) for name, default in
              (("temperature", 1.0), ("top_k", None), ("top_p", None), ("use_cache", True))}
        was = _GPT.training
        out, err = attempt(lambda: generate(_GPT, ids, n, **kw))
        assert _GPT.training == was
        if err is None:
            assert out.shape == (ids.shape[0], ids.shape[1] + n) and ((out >= 0) & (out < 12)).all()
        return
    max_len = draw(st.sampled_from([1, 4, 10, 11] + ODD))
    bos, eos = draw(st.sampled_from([1, 1, 12, -1, 1.0])), draw(st.sampled_from([2, 2, 2, "2"]))
    if which == "greedy":
        out, err = attempt(lambda: greedy_decode(_S2S, ids, max_len, bos, eos))
    else:
        beam = draw(st.sampled_from([1, 2, 2, 0, 2.0, "2"]))
        out, err = attempt(lambda: beam_search(_S2S, ids, beam_size=beam, max_new_tokens=max_len, bos_id=bos,
                                               eos_id=eos))
    if err is None:
        assert out.shape[0] == ids.shape[0] and out.shape[1] <= max_len and ((out >= 0) & (out < 12)).all()


@HOSTILE
@given(data=st.data())
def test_constructors_hostile(data):
    draw = data.draw
    odd = [1, 2, 4, 8, 0, -1, 2.0, "4", None, True]
    kw = {name: draw(st.sampled_from(odd)) for name in ("n_layers", "n_heads", "d_model", "d_ff", "max_len")}
    kw = {k: v for k, v in kw.items() if draw(st.booleans())}
    for name, values in (("dropout", [0.0, 0.1, 1.0, -0.1, "0.1", float("nan")]),
                         ("eps", [1e-5, 0.0, -1.0, "1e-5", float("nan")]),
                         ("bias", [True, False, "False", 0]), ("norm_first", [True, False, None]),
                         ("activation", ["relu", "gelu", "tanh", None]), ("norm", ["layer", "rms", "batch"])):
        if draw(st.booleans()):
            kw[name] = draw(st.sampled_from(values))
    vocab = draw(st.sampled_from([12, 12, 0, -3, 12.0, "12"]))
    model, err = attempt(lambda: GPT(vocab, **kw))
    if err is None:
        ids = torch.randint(0, 12, (2, min(3, model.max_len)))
        assert torch.isfinite(model(ids)).all()


def test_the_hostile_properties_can_fail():
    """The guard itself: a raw torch error or a message-less error is not accepted."""
    with pytest.raises(AssertionError, match="raw torch error"):
        attempt(lambda: torch.nn.functional.dropout(torch.zeros(2), p="x"))  # a TypeError from inside torch


# ------------------------------------------------------------------------------ issue 24: nothing silent, part 2
def _padded_ids(lengths: list[int], t: int, left: list[bool]) -> torch.Tensor:
    """(B, T) ids: row b has lengths[b] real tokens (ids 1..), on the left or the right side; the rest is pad 0."""
    ids = torch.zeros(len(lengths), t, dtype=torch.long)
    for b, (n, is_left) in enumerate(zip(lengths, left)):
        if n:
            (ids[b, t - n:] if is_left else ids[b, :n]).copy_(torch.arange(1, n + 1))
    return ids


@HOSTILE
@given(data=st.data())
def test_inverted_self_attention_masks_are_refused_and_legitimate_padding_never_is(data):
    """Law: causal, padding (left or right, all-padding rows too) and their AND always run, and pad queries of a
    left-padded row get zero attention rows (out = out_proj's bias); ~(causal & padding) is refused exactly when
    some row has a real token at a position >= 1 (a key seen by earlier queries that cannot see itself)."""
    from course_utils.masks import causal_mask, padding_mask
    t = data.draw(st.integers(1, 6))
    b = data.draw(st.integers(1, 3))
    lengths = [data.draw(st.integers(0, t)) for _ in range(b)]
    left = [data.draw(st.booleans()) for _ in range(b)]
    ids = _padded_ids(lengths, t, left)
    keep, causal = padding_mask(ids), causal_mask(t)
    mha = MultiHeadAttention(8, 2).eval()
    x = torch.randn(b, t, 8)
    with torch.no_grad():
        for mask in (causal, keep, causal & keep):
            assert torch.isfinite(mha(x, mask=mask)).all()
        out = mha(x, mask=causal & keep)
    for row, (n, is_left) in enumerate(zip(lengths, left)):
        if is_left:  # the first t - n queries are padding and see only padding: zero rows
            torch.testing.assert_close(out[row, : t - n], mha.out_proj.bias.detach().expand(t - n, 8))
    inverted, err = attempt(lambda: mha(x, mask=~(causal & keep)))
    should_refuse = bool((ids[:, 1:] != 0).any())
    assert (err is not None) == should_refuse, (ids.tolist(), err)
    if err is not None:
        assert "inverted" in str(err) and "~mask" in str(err)
    if t >= 2:
        _, err = attempt(lambda: mha(x, mask=~causal[None, None]))  # 4-D: (B, T) vs (T, T) cannot be confused
        assert err is not None and "inverted" in str(err)


@HOSTILE
@given(b=st.integers(2, 4), cut=st.integers(0, 3))
def test_a_b_by_t_padding_mask_with_b_equal_to_t_is_refused_but_a_causal_one_runs(b, cut):
    """(B, T_k) and (T_q, T_k) cannot be told apart by shape when B == T: a causal or all-True mask runs (its
    meaning is the same either way or plainly causal), any other 2-D bool mask is refused, pointing to
    key_keep_mask=."""
    from course_utils.masks import causal_mask
    mha = MultiHeadAttention(8, 2).eval()
    x = torch.randn(b, b, 8)
    pm = torch.arange(b) < torch.tensor([b - min(cut, b - 1)] + [b] * (b - 1))[:, None]  # (B, T) padding mask
    _, err = attempt(lambda: mha(x, mask=pm))
    assert (err is None) == (bool(pm.all()) or torch.equal(pm, causal_mask(b))), pm  # B = 2 can be causal-shaped
    if err is not None:
        assert "key_keep_mask" in str(err)
    with torch.no_grad():
        torch.testing.assert_close(mha(x, mask=causal_mask(b)), mha(x, is_causal=True))
        torch.testing.assert_close(mha(x, key_keep_mask=pm), mha(x, mask=pm[:, None, None, :]))


@HOSTILE
@given(seed=st.integers(0, 1000), prefix=st.integers(1, 5), n=st.integers(1, 4), extend=st.booleans())
def test_several_tokens_into_a_non_empty_cache_need_extend(seed, prefix, n, extend):
    """Law: one new token, or n > 1 with extend=True, continues the cached sequence exactly as a full recomputation;
    n > 1 without extend is refused as a new prompt (it used to continue the old one silently)."""
    from course_utils import KVCache
    torch.manual_seed(seed)
    gpt = GPT(20, max_len=12, n_layers=1, n_heads=2, d_model=8, dropout=0.0).double().eval()
    ids = torch.randint(0, 20, (2, prefix + n))
    cache = KVCache()
    with torch.no_grad():
        first = gpt(ids[:, :prefix], cache=cache)
        second, err = attempt(lambda: gpt(ids[:, prefix:], cache=cache, extend=extend))
        full = gpt(ids)
    if n > 1 and not extend:
        assert err is not None and "fresh KVCache" in str(err) and "extend=True" in str(err)
        assert cache.offset == prefix  # nothing was appended
    else:
        torch.testing.assert_close(torch.cat([first, second], dim=1), full, atol=1e-10, rtol=1e-10)


@HOSTILE
@given(rows=st.lists(st.lists(st.integers(0, 50), max_size=5), min_size=1, max_size=4),
       bad=st.sampled_from([1.5, 2.0, True, [1, 2], "a", None]), where=st.integers(0, 3))
def test_pad_batch_keeps_int_rows_and_refuses_anything_it_would_have_to_coerce(rows, bad, where):
    """Law: int rows come back unchanged (right-padded with 0); a float (even 2.0), a bool, a nested row, a string
    or None anywhere is a TypeError (it used to be rounded, cast or flattened)."""
    from course_utils.tokenizers import pad_batch
    out = pad_batch(rows)
    assert [r[: len(row)] for r, row in zip(out.tolist(), rows)] == rows and out.dtype == torch.long
    assert all(v == 0 for r, row in zip(out.tolist(), rows) for v in r[len(row):])
    broken = [list(r) for r in rows]
    target = broken[where % len(broken)]
    target.insert(min(where, len(target)), bad)
    with pytest.raises(TypeError, match="flat list of int ids"):
        pad_batch(broken)


@HOSTILE
@given(dtype=st.sampled_from([torch.int64, torch.int32, torch.int16, torch.uint8, torch.bool, torch.complex64]))
def test_the_sinusoidal_table_refuses_non_float_dtypes(dtype):
    from course_utils import sinusoidal_encoding
    with pytest.raises(TypeError, match="float dtype"):
        sinusoidal_encoding(4, 8, dtype=dtype)


@HOSTILE
@given(n=st.integers(0, 30), test_size=st.floats(0.01, 0.99))
def test_train_test_split_never_leaves_an_empty_part(n, test_size):
    """Law: n >= 2 gives two non-empty parts that partition the examples; n < 2 is refused."""
    from course_utils.data.datasets import Examples, train_test_split
    examples = Examples([(f"text {i}", i % 2) for i in range(n)])
    parts, err = attempt(lambda: train_test_split(examples, test_size))
    if n < 2:
        assert err is not None and "at least 2" in str(err)
        return
    train, test = parts
    assert len(train) >= 1 and len(test) >= 1 and sorted(train + test) == sorted(examples)


@HOSTILE
@given(seed=st.integers(0, 1000), exponent=st.integers(-45, -8), scale=st.sampled_from([1.0, 1e3, 1e30]))
def test_a_tiny_temperature_is_greedy_not_nan(seed, exponent, scale):
    """Law: as τ -> 0 sampling becomes argmax: for τ in [1e-45, 1e-8] the distribution is finite, sums to 1 and
    puts its mass on the argmax (the row max is subtracted before dividing by τ)."""
    from course_utils.sampling import sample_next, sampling_distribution
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(3, 11, generator=g) * scale
    tau = 10.0 ** exponent
    probs = sampling_distribution(logits, tau)
    assert torch.isfinite(probs).all()
    torch.testing.assert_close(probs.sum(-1), torch.ones(3))
    assert torch.equal(sample_next(logits, tau), logits.argmax(-1, keepdim=True))


@HOSTILE
@given(dtype=st.sampled_from([torch.uint8, torch.int8, torch.int16]), which=st.integers(0, 4))
def test_small_integer_ids_get_one_sentence_with_the_fix(dtype, which):
    """uint8 / int8 / int16 ids reached nn.Embedding's raw "Expected Long, Int" error; now every model says
    .long(). int32 ids keep working (nn.Embedding takes them)."""
    from course_utils import EncoderClassifier, MaskedLM, TokenEmbedding
    models = [lambda ids: GPT(10, max_len=8, n_layers=1, n_heads=2, d_model=8)(ids),
              lambda ids: Transformer(10, 10, d_model=8, n_heads=2, n_encoder_layers=1, n_decoder_layers=1,
                                      d_ff=16)(ids, torch.ones(1, 2, dtype=torch.long)),
              lambda ids: EncoderClassifier(10, 2, d_model=8, n_heads=2, n_layers=1, d_ff=16)(ids),
              lambda ids: MaskedLM(10, d_model=8, n_heads=2, n_layers=1, d_ff=16)(ids),
              lambda ids: TokenEmbedding(10, 8)(ids)]
    _, err = attempt(lambda: models[which](torch.ones(1, 3, dtype=dtype)))
    assert err is not None and ".long()" in str(err) and str(dtype) in str(err)
    out, err = attempt(lambda: models[which](torch.ones(1, 3, dtype=torch.int32)))
    assert err is None and torch.isfinite(out).all()
