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
