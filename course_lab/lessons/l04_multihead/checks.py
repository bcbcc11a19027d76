"""The exercise checks of l04_multihead (re-exported by the package)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.multihead import MultiHeadAttention

from ...exercises import (
    attempt,
    calling,
    fail,
    fresh_generator,
    fresh_int,
    never_raises,
    passed,
    say,
    tensor_close,
    watching,
)

# ----------------------------------------------------------------------------------------------------
# Exercise checks: print a verdict, return True / False, never raise
# ----------------------------------------------------------------------------------------------------

def _reference_split(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    b, t, d = x.shape
    return x.view(b, t, n_heads, d // n_heads).transpose(1, 2)


def _reference_merge(x: torch.Tensor) -> torch.Tensor:
    b, h, t, d_k = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d_k)


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


# (d_model, n_heads, n_kv_heads) of exercise 1: groups of 2 and 3 query heads, one K/V head for all (n_kv_heads =
# 1), and none shared (n_kv_heads = n_heads, plain multi-head attention).
_GROUPED = ((8, 4, 2), (12, 6, 3), (16, 8, 2), (12, 6, 2), (8, 2, 1), (12, 3, 3))


def _gqa_reference(x, w_q, w_k, w_v, n_heads, pairing="interleave", scale=None):
    """The concatenated heads of grouped-query attention, by PyTorch's ``enable_gqa`` (query head i reads K/V head
    i // g); ``pairing="tile"`` pairs head i with K/V head i % n_kv_heads instead (``.repeat``: a wrong answer)."""
    q = _reference_split(x @ w_q, n_heads)
    d_k = q.shape[-1]
    k, v = (_reference_split(x @ w, w.shape[1] // d_k) for w in (w_k, w_v))
    if pairing == "tile":
        group = n_heads // k.shape[1]
        k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)
    out = F.scaled_dot_product_attention(q, k, v, scale=scale, enable_gqa=True)
    return _reference_merge(out)


def _gqa_flag(calls) -> bool:
    """Whether PyTorch's attention was asked to pair the heads itself (``enable_gqa=True``, a keyword-only
    argument), by any route to it."""
    return any(kwargs.get("enable_gqa") for _, _, kwargs in calls.records)


@never_raises
def check_grouped_heads(fn) -> bool:
    """Exercise 1: ``fn(x, W_q, W_k, W_v, n_heads)`` → the concatenated heads ``(B, T, d_model)`` of grouped-query
    attention: W_q ``(d_model, d_model)``, W_k and W_v ``(d_model, n_kv_heads·d_k)``, multiplied from the right as in
    the lesson (``x @ W``); query head i reads K/V head i // (n_heads / n_kv_heads). Compared with PyTorch's
    ``F.scaled_dot_product_attention(..., enable_gqa=True)``, which the answer may not use for the pairing."""
    g = fresh_generator()
    for d, h, n_kv in _GROUPED:
        d_k = d // h
        x = torch.randn(fresh_int(1, 4, g), fresh_int(2, 7, g), d, generator=g)
        w_q, w_k, w_v = (torch.randn(d, n, generator=g) / math.sqrt(d) for n in (d, n_kv * d_k, n_kv * d_k))
        with torch.no_grad():
            want = _gqa_reference(x, w_q, w_k, w_v, h)
            tiled = _gqa_reference(x, w_q, w_k, w_v, h, pairing="tile")
            too_flat = _gqa_reference(x, w_q, w_k, w_v, h, scale=1 / math.sqrt(d))
        with watching(fn, _module_calls()) as calls, calling(["scaled_dot_product_attention"]) as sdpa:
            ok, got = attempt(fn, x.clone(), w_q.clone(), w_k.clone(), w_v.clone(), h)
        if not ok:
            return False
        if calls:
            return _called_the_module(calls)
        if _gqa_flag(sdpa):
            return fail("You passed enable_gqa=True: PyTorch then decides which query heads share a K/V head, and "
                        "that pairing is what the exercise asks you to write. Expand K and V to n_heads heads "
                        "yourself, then attend.",
                        "你传了 enable_gqa=True：这样就由 PyTorch 决定哪些查询头共用一个 K/V 头，而这种配对正是"
                        "本题要你自己写的。请先亲手把 K 和 V 扩展成 n_heads 个头，再做注意力。")
        if not tensor_close(got, want, f"grouped-query attention (d_model={d}, n_heads={h}, n_kv_heads={n_kv})",
                            f"分组查询注意力（d_model={d}，n_heads={h}，n_kv_heads={n_kv}）"):
            same_shape = isinstance(got, torch.Tensor) and got.shape == want.shape
            if same_shape and torch.allclose(got.detach(), tiled, atol=1e-5):
                say("Hint: you tiled the K/V heads (.repeat), so query head i read K/V head i % n_kv_heads. A group "
                    "is n_heads / n_kv_heads consecutive query heads: heads 0 and 1 share K/V head 0 when the "
                    "group is 2. Repeat each K/V head in place: repeat_interleave along the head axis.",
                    "提示：你把 K/V 头整体平铺了（.repeat），于是第 i 个查询头读的是第 i % n_kv_heads 个 K/V 头。"
                    "一组是 n_heads / n_kv_heads 个相邻的查询头：每组 2 个头时，第 0、1 个查询头共用第 0 个 K/V 头。"
                    "应让每个 K/V 头原地重复：沿头这一维用 repeat_interleave。")
            elif same_shape and torch.allclose(got.detach(), too_flat, atol=1e-5):
                say("Hint: you divided the scores by √d_model, common mistake 1: sharing K/V changes nothing in a "
                    "head, which still compares d_k-vectors, so divide by √d_k.",
                    "提示：你把分数除以了 √d_model，这是常见错误 1：共用 K/V 并不改变一个头内部的计算，"
                    "它比较的仍是 d_k 维向量，所以要除以 √d_k。")
            return False
    return passed("Correct: each K/V head serves a group of consecutive query heads, as PyTorch's enable_gqa pairs "
                  "them; only the K/V projections got smaller.",
                  "正确：每个 K/V 头服务一组相邻的查询头，与 PyTorch 的 enable_gqa 配对方式相同；"
                  "变小的只有 K/V 投影。")


def _torch_mha(seed: int, d_model: int, n_heads: int) -> nn.MultiheadAttention:
    with torch.random.fork_rng(devices=[]):         # leave the notebook's random state alone
        torch.manual_seed(seed)
        mha = nn.MultiheadAttention(d_model, n_heads, batch_first=True).eval()
        with torch.no_grad():
            mha.in_proj_weight.mul_(3.0)            # sharper heads: averaging scores and weights differ clearly
            mha.in_proj_bias.normal_()              # non-zero biases: forgetting them is caught
    return mha


def _per_head_weights(x, mha, scale=None):
    q, k, _ = F.linear(x, mha.in_proj_weight, mha.in_proj_bias).chunk(3, dim=-1)
    q, k = _reference_split(q, mha.num_heads), _reference_split(k, mha.num_heads)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    return q @ k.transpose(-2, -1) * scale                                   # (B, h, T, T) scores


@never_raises
def check_averaged_weights(fn) -> bool:
    """Exercise 2: ``fn(x, mha)`` = the weights ``mha(x, x, x)`` returns by default (``need_weights=True``,
    ``average_attn_weights=True``), for an ``nn.MultiheadAttention`` with ``batch_first=True``: ``(B, T, T)``, the
    mean over the heads of their softmax weights. Computed from ``in_proj_weight`` / ``in_proj_bias``; calling the
    module is refused. Several drawn widths and head counts."""
    g = fresh_generator()
    for d, h in ((8, 2), *_SHAPES[1:], (16, 2)):
        mha = _torch_mha(fresh_int(0, 2**31, g), d, h)
        x = torch.randn(fresh_int(1, 4, g), fresh_int(2, 7, g), d, generator=g)
        with torch.no_grad():
            _, want = mha(x, x, x)                                           # (B, T, T)
            scores = _per_head_weights(x, mha)
            per_head = torch.softmax(scores, -1)
            of_mean_scores = torch.softmax(scores.mean(1), -1)
            too_flat = torch.softmax(_per_head_weights(x, mha, 1 / math.sqrt(d)), -1).mean(1)
        with watching(fn, _module_calls()) as calls:
            ok, got = attempt(fn, x.clone(), mha)
        if not ok:
            return False
        if calls:
            return _called_the_module(calls)
        if not tensor_close(got, want, f"averaged attention weights (d_model={d}, num_heads={h})",
                            f"平均后的注意力权重（d_model={d}，num_heads={h}）"):
            got = got.detach() if isinstance(got, torch.Tensor) else None
            if got is not None and got.shape == per_head.shape and torch.allclose(got, per_head, atol=1e-5):
                say("Hint: these are the per-head weights (B, h, T, T), what average_attn_weights=False returns. "
                    "By default nn.MultiheadAttention returns one (B, T, T) matrix per sequence.",
                    "提示：这是每个头各自的权重 (B, h, T, T)，也就是 average_attn_weights=False 时的返回值。"
                    "nn.MultiheadAttention 默认对每个序列只返回一个 (B, T, T) 矩阵。")
            elif got is not None and got.shape == want.shape and torch.allclose(got, of_mean_scores, atol=1e-5):
                say("Hint: you averaged the scores and then took one softmax: that is one pattern, not the mean of h "
                    "patterns. Softmax each head first, then average the weights.",
                    "提示：你先平均了分数，再做一次 softmax：这只得到一种模式，而不是 h 种模式的平均。"
                    "应先对每个头做 softmax，再平均权重。")
            elif got is not None and got.shape == want.shape and torch.allclose(got, want * h, atol=1e-4):
                say("Hint: you summed the heads' weights, so each row sums to h. Average them: each row is then "
                    "still a probability distribution over the keys.",
                    "提示：你把各个头的权重加起来了，所以每行的和是 h。应取平均：这样每行仍是键上的概率分布。")
            elif got is not None and got.shape == want.shape and torch.allclose(got, too_flat, atol=1e-5):
                say("Hint: you divided the scores by √d_model, common mistake 1: each head divides by √d_k.",
                    "提示：你把分数除以了 √d_model，这正是常见错误 1：每个头要除以 √d_k。")
            return False
    return passed("Correct: nn.MultiheadAttention's default weights are the mean of the heads' softmax weights; "
                  "each row still sums to 1.",
                  "正确：nn.MultiheadAttention 默认返回的权重是各个头 softmax 权重的平均；每行的和仍是 1。")


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
