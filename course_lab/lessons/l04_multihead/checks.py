"""The exercise checks of l04_multihead (re-exported by the package)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.attention import attention_with_weights
from course_utils.multihead import MultiHeadAttention

from ...exercises import attempt, fail, fresh_generator, fresh_int, never_raises, passed, say, tensor_close, watching

# ----------------------------------------------------------------------------------------------------
# Exercise checks: print a verdict, return True / False, never raise
# ----------------------------------------------------------------------------------------------------

def _reference_split(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    b, t, d = x.shape
    return x.view(b, t, n_heads, d // n_heads).transpose(1, 2)


def _reference_merge(x: torch.Tensor) -> torch.Tensor:
    b, h, t, d_k = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d_k)


def _reference_forward(x, mha, scale=None):
    q, k, v = mha.qkv_proj(x).split(mha.d_model, dim=-1)
    q, k, v = (_reference_split(t, mha.n_heads) for t in (q, k, v))
    out, _ = attention_with_weights(q, k, v, scale=scale)
    return mha.out_proj(_reference_merge(out))


def _reference_cross(x, memory, mask, mha):
    """Cross-attention with the given keep-mask as it is, broadcast against the scores (B, h, T_q, T_k)."""
    w, bias, d = mha.qkv_proj.weight, mha.qkv_proj.bias, mha.d_model
    q = F.linear(x, w[:d], bias[:d])
    k, v = F.linear(memory, w[d:2 * d], bias[d:2 * d]), F.linear(memory, w[2 * d:], bias[2 * d:])
    q, k, v = (_reference_split(t, mha.n_heads) for t in (q, k, v))
    scores = (q @ k.transpose(-2, -1) / math.sqrt(d // mha.n_heads)).masked_fill(~mask, float("-inf"))
    return mha.out_proj(_reference_merge(torch.softmax(scores, -1) @ v))


def _module_calls():
    """What the exercises forbid: letting a multi-head attention module do the work."""
    return [(MultiHeadAttention, "forward"), (MultiHeadAttention, "split_heads"), (MultiHeadAttention, "merge_heads"),
            (nn.MultiheadAttention, "forward"), (F, "multi_head_attention_forward")]


def _called_the_module(calls) -> bool:
    return fail(f"You called the library ({calls[0]}): the exercise asks you to write these steps yourself from "
                "the weights, so that you see every reshape; the library is what the check compares with.",
                f"你调用了库里的实现（{calls[0]}）：本题要求你从权重出发亲手写出这些步骤，看清每一次变形；"
                "库里的实现是检查函数用来核对的。")


def _small_mha(seed: int, d_model: int = 8, n_heads: int = 2) -> MultiHeadAttention:
    with torch.random.fork_rng(devices=[]):         # leave the notebook's random state alone
        torch.manual_seed(seed)
        mha = MultiHeadAttention(d_model, n_heads).eval()
        with torch.no_grad():
            mha.qkv_proj.bias.normal_()             # non-zero biases: forgetting them is caught
            mha.out_proj.bias.normal_()
    return mha


# (d_model, n_heads) of the layers a check draws: several head counts, so that the notebook's global h (or a
# hard-coded 2) instead of the layer's own n_heads is caught.
_SHAPES = ((8, 2), (12, 3), (16, 4), (8, 8))


def _drawn_layers(g: torch.Generator) -> list[MultiHeadAttention]:
    return [_small_mha(fresh_int(0, 2**31, g), d, h) for d, h in _SHAPES]


@never_raises
def check_split_heads(fn) -> bool:
    """Exercise 1: ``fn(x, n_heads)``: (B, T, d_model) → (B, h, T, d_k), head i = the columns of slice i.

    Tried on several drawn shapes and head counts (a fixed one would let ``h`` from the notebook pass)."""
    g = fresh_generator()
    cases = [(torch.arange(2 * 3 * 8, dtype=torch.float32).reshape(2, 3, 8), 4)]
    cases += [(torch.randn(fresh_int(1, 4, g), fresh_int(1, 7, g), d, generator=g), h) for d, h in _SHAPES]
    for x, h in cases:
        with watching(fn, _module_calls()) as calls:
            ok, got = attempt(fn, x.clone(), h)
        if not ok:
            return False
        if calls:
            return _called_the_module(calls)
        want = _reference_split(x, h)
        b, t, d = x.shape
        if not tensor_close(got, want, f"split_heads(x of shape {tuple(x.shape)}, n_heads={h})",
                            f"split_heads（x 的形状为 {tuple(x.shape)}，n_heads={h}）"):
            if isinstance(got, torch.Tensor) and got.shape == want.shape and torch.equal(got, x.view(b, h, t, d // h)):
                say("Hint: x.view(B, h, T, d_k) mixes positions into the heads. View as (B, T, h, d_k) first, "
                    "then swap the T and h axes with .transpose(1, 2).",
                    "提示：x.view(B, h, T, d_k) 会把不同位置的数据混进同一个头。应先 view 成 (B, T, h, d_k)，"
                    "再用 .transpose(1, 2) 交换 T 和 h 两个维度。")
            return False
    return passed("Correct: head i holds columns i·d_k … (i+1)·d_k − 1 of every position.",
                  "正确：第 i 个头拿到的是每个位置的第 i·d_k 到 (i+1)·d_k − 1 列。")


@never_raises
def check_mha_forward(fn) -> bool:
    """Exercise 2: ``fn(x, mha)`` must compute ``mha(x)`` from ``mha``'s weights (self-attention, no mask), for
    several drawn layers (widths, head counts) and inputs."""
    g = fresh_generator()
    for mha in [_small_mha(0)] + _drawn_layers(g):
        x = torch.randn(fresh_int(1, 4, g), fresh_int(1, 7, g), mha.d_model, generator=g)
        with torch.no_grad():
            want = mha(x)
            too_flat = _reference_forward(x, mha, scale=1 / math.sqrt(mha.d_model))
        with watching(fn, _module_calls()) as calls:
            ok, got = attempt(fn, x.clone(), mha)
        if not ok:
            return False
        if calls:
            return _called_the_module(calls)
        if not tensor_close(got, want, f"multi-head attention (d_model={mha.d_model}, n_heads={mha.n_heads})",
                            f"多头注意力（d_model={mha.d_model}，n_heads={mha.n_heads}）"):
            if isinstance(got, torch.Tensor) and got.shape == want.shape and \
                    torch.allclose(got.detach(), too_flat, atol=1e-5) and mha.n_heads > 1:
                say("Hint: you divided the scores by √d_model, common mistake 1 of this lesson: each head divides "
                    "by √d_k of its own width.",
                    "提示：你把分数除以了 √d_model，这正是本课的常见错误 1：每个头要除以它自己宽度的 √d_k。")
            return False
    return passed("Correct: your multi-head attention equals course_utils.MultiHeadAttention.",
                  "正确：你的多头注意力与 course_utils.MultiHeadAttention 的结果一致。")


@never_raises
def check_cross_attention(fn) -> bool:
    """Exercise 3: ``fn(x, memory, keep, mha)`` = ``mha(x, memory, memory, key_keep_mask=keep)``, written out.

    Queries from ``x`` (B, T_q, d), keys and values from ``memory`` (B, T_k, d), ``keep`` (B, T_k) True at real
    tokens; the weights are ``mha.w_q``, ``mha.w_k``, ``mha.w_v`` and the matching thirds of the bias. Tried on
    several drawn layers, lengths and paddings.
    """
    g = fresh_generator()
    for n, mha in enumerate([_small_mha(2)] + _drawn_layers(g)):
        b, t_q, t_k = fresh_int(2, 4, g), fresh_int(1, 6, g), fresh_int(3, 8, g)
        b = mha.n_heads if n == 0 else b          # B = h: a (B, 1, T_k) mask broadcasts without an error
        x, memory = torch.randn(b, t_q, mha.d_model, generator=g), torch.randn(b, t_k, mha.d_model, generator=g)
        lengths = torch.randint(1, t_k + 1, (b,), generator=g)
        lengths[0], lengths[1] = t_k, max(1, t_k - 2)                      # one full source, one with padding
        keep = torch.arange(t_k)[None, :] < lengths[:, None]
        with torch.no_grad():
            want = mha(x, memory, memory, key_keep_mask=keep)
            unmasked = mha(x, memory, memory)
            one_axis_short = (_reference_cross(x, memory, keep[:, None, :], mha)    # (B, 1, T_k) → (1, B, 1, T_k)
                              if b == mha.n_heads else None)
        with watching(fn, _module_calls()) as calls:
            ok, got = attempt(fn, x.clone(), memory.clone(), keep.clone(), mha)
        if not ok:
            return False
        if calls:
            return _called_the_module(calls)
        if not tensor_close(got, want, f"cross-attention (d_model={mha.d_model}, n_heads={mha.n_heads})",
                            f"交叉注意力（d_model={mha.d_model}，n_heads={mha.n_heads}）"):
            if isinstance(got, torch.Tensor) and got.shape == want.shape and \
                    torch.allclose(got.detach(), unmasked, atol=1e-5):
                say("Hint: the padded keys were attended. keep is (B, T_k); the scores are (B, h, T_q, T_k): "
                    "keep[:, None, None, :] broadcasts over the heads and the queries.",
                    "提示：填充的键也被关注了。keep 的形状是 (B, T_k)，分数是 (B, h, T_q, T_k)："
                    "keep[:, None, None, :] 可以广播到所有头和所有查询。")
            elif isinstance(got, torch.Tensor) and got.shape == want.shape and one_axis_short is not None and \
                    torch.allclose(got.detach(), one_axis_short, atol=1e-5):
                say("Hint: your mask is (B, 1, T_k), one axis short. Broadcasting aligns shapes from the right, so "
                    "against the scores (B, h, T_q, T_k) it becomes (1, B, 1, T_k): head i reads the padding of "
                    "sequence i (here B = h, so no error is raised). Use keep[:, None, None, :].",
                    "提示：你的掩码是 (B, 1, T_k)，少了一个维度。广播从右往左对齐形状，所以它对上分数 "
                    "(B, h, T_q, T_k) 时变成了 (1, B, 1, T_k)：第 i 个头读的是第 i 个序列的填充（这里 B = h，"
                    "所以不会报错）。请用 keep[:, None, None, :]。")
            return False
    return passed("Correct: queries from x, keys and values from memory, padding never attended.",
                  "正确：查询来自 x，键和值来自 memory，填充位置从未被关注。")
