"""Answers to the exercises of lesson 04, for tests/test_exercises.py: each exercise with a correct answer, a
plausible mistake and the shortcut it forbids (see exercise_answer.py for the table's format)."""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from exercise_answer import Answer

import course_utils as cu
from course_utils.interop import load_mha_from_torch


def _split(x, n_heads):
    b, t, d = x.shape
    return x.view(b, t, n_heads, d // n_heads).transpose(1, 2)


def _merge(out):
    b, h, t, d_k = out.shape
    return out.transpose(1, 2).reshape(b, t, h * d_k)


def _grouped(x, w_q, w_k, w_v, n_heads, pairing="interleave"):
    q = _split(x @ w_q, n_heads)                                     # (B, h, T, d_k)
    n_kv = w_k.shape[1] // q.shape[-1]
    k, v = _split(x @ w_k, n_kv), _split(x @ w_v, n_kv)              # (B, h_kv, T, d_k)
    group = n_heads // n_kv
    if pairing == "tile":                                            # head i reads K/V head i % n_kv: wrong
        k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)
    else:
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    out, _ = cu.attention_with_weights(q, k, v)
    return _merge(out)


def _grouped_by_enable_gqa(x, w_q, w_k, w_v, n_heads):      # PyTorch pairs the heads: the exercise's point
    q = _split(x @ w_q, n_heads)
    n_kv = w_k.shape[1] // q.shape[-1]
    out = F.scaled_dot_product_attention(q, _split(x @ w_k, n_kv), _split(x @ w_v, n_kv), enable_gqa=True)
    return _merge(out)


def _grouped_merged_by_the_library(x, w_q, w_k, w_v, n_heads):     # "see every reshape"
    out = _grouped(x, w_q, w_k, w_v, n_heads)
    b, t, d = out.shape
    return cu.MultiHeadAttention(d, n_heads).merge_heads(_split(out, n_heads))


def _scores(x, mha):
    q, k, _ = F.linear(x, mha.in_proj_weight, mha.in_proj_bias).chunk(3, dim=-1)
    q, k = _split(q, mha.num_heads), _split(k, mha.num_heads)
    return q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5              # (B, h, T, T)


def _averaged(x, mha):
    return torch.softmax(_scores(x, mha), -1).mean(dim=1)            # (B, T, T)


def _averaged_scores(x, mha):                                        # one softmax of the mean score: one pattern
    return torch.softmax(_scores(x, mha).mean(dim=1), -1)


def _summed(x, mha):
    return torch.softmax(_scores(x, mha), -1).sum(dim=1)


def _per_head(x, mha):                                               # average_attn_weights=False
    return torch.softmax(_scores(x, mha), -1)


def _averaged_without_bias(x, mha):
    q, k, _ = F.linear(x, mha.in_proj_weight).chunk(3, dim=-1)
    q, k = _split(q, mha.num_heads), _split(k, mha.num_heads)
    return torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, -1).mean(dim=1)


def _averaged_by_course_layer(x, mha):                               # the weights copied into course_utils' layer
    ours = load_mha_from_torch(cu.MultiHeadAttention(mha.embed_dim, mha.num_heads), mha)
    ours(x, need_weights=True)
    return ours.last_weights.mean(dim=1)


def _cross(x, memory, keep, mha, mask=True):
    b_q, b_k, b_v = mha.qkv_proj.bias.split(mha.d_model)
    q = _split(F.linear(x, mha.w_q, b_q), mha.n_heads)
    k = _split(F.linear(memory, mha.w_k, b_k), mha.n_heads)
    v = _split(F.linear(memory, mha.w_v, b_v), mha.n_heads)
    out, _ = cu.attention_with_weights(q, k, v, keep[:, None, None, :] if mask else None)
    return mha.out_proj(_merge(out))


L04 = [
    Answer("check_grouped_heads", _grouped,
           wrong=lambda x, w_q, w_k, w_v, n_heads: _grouped(x, w_q, w_k, w_v, n_heads, pairing="tile"),
           shortcut=_grouped_by_enable_gqa, says="enable_gqa",
           also=((_grouped_merged_by_the_library, "merge_heads"),)),
    Answer("check_averaged_weights", _averaged, wrong=_averaged_scores,
           shortcut=lambda x, mha: mha(x, x, x)[1], says="called the library",
           also=((_summed, "sums to h"), (_per_head, "average_attn_weights=False"),
                 (_averaged_without_bias, "averaged attention weights"),
                 (_averaged_by_course_layer, "called the library"))),
    Answer("check_cross_attention", _cross,
           wrong=lambda x, memory, keep, mha: _cross(x, memory, keep, mha, mask=False),     # padding attended
           shortcut=lambda x, memory, keep, mha: mha(x, memory, memory, key_keep_mask=keep),
           says="called the library"),
]

ANSWERS = {"l04_multihead": L04}


# --- right answers in other styles (issue 39 §1): each must pass -----------------------------------------------

def _split_by_unflatten(x, n_heads):
    return x.unflatten(-1, (n_heads, -1)).permute(0, 2, 1, 3)


def _grouped_by_expand(x, w_q, w_k, w_v, n_heads):     # K/V broadcast to the groups with a view, SDPA without gqa
    b, t, d = x.shape
    q = _split_by_unflatten(x @ w_q, n_heads)                        # (B, h, T, d_k)
    n_kv = w_k.shape[1] // q.shape[-1]
    group = n_heads // n_kv
    k, v = ((x @ w).view(b, t, n_kv, 1, -1).expand(b, t, n_kv, group, q.shape[-1]).reshape(b, t, n_heads, -1)
            .transpose(1, 2) for w in (w_k, w_v))
    return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, d)


def _grouped_by_einsum(x, w_q, w_k, w_v, n_heads):     # the query heads reshaped into (h_kv, group): no copy of K/V
    b, t, d = x.shape
    d_k = d // n_heads
    n_kv = w_k.shape[1] // d_k
    q = (x @ w_q).view(b, t, n_kv, n_heads // n_kv, d_k)             # (B, T, h_kv, g, d_k)
    k, v = (x @ w_k).view(b, t, n_kv, d_k), (x @ w_v).view(b, t, n_kv, d_k)
    weights = torch.softmax(torch.einsum("bqngd,bknd->bngqk", q, k) / d_k ** 0.5, -1)
    return torch.einsum("bngqk,bknd->bqngd", weights, v).reshape(b, t, d)


def _averaged_by_einsum(x, mha):
    d = mha.embed_dim
    q, k = (F.linear(x, mha.in_proj_weight[i * d:(i + 1) * d], mha.in_proj_bias[i * d:(i + 1) * d]) for i in (0, 1))
    q, k = q.unflatten(-1, (mha.num_heads, -1)), k.unflatten(-1, (mha.num_heads, -1))
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / q.shape[-1] ** 0.5
    return scores.softmax(-1).sum(1) / mha.num_heads


def _cross_with_softmax(x, memory, keep, mha):    # the attention typed out, the mask as an additive −inf
    b_q, b_k, b_v = mha.qkv_proj.bias.split(mha.d_model)
    q = _split(F.linear(x, mha.w_q, b_q), mha.n_heads)
    k = _split(F.linear(memory, mha.w_k, b_k), mha.n_heads)
    v = _split(F.linear(memory, mha.w_v, b_v), mha.n_heads)
    bias = torch.zeros(keep.shape).masked_fill(~keep, float("-inf"))[:, None, None, :]   # (B, 1, 1, T_k)
    weights = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5 + bias, -1)
    return mha.out_proj(_merge(weights @ v))


_RIGHT = {"check_grouped_heads": (_grouped_by_expand, _grouped_by_einsum),
          "check_averaged_weights": (_averaged_by_einsum,), "check_cross_attention": (_cross_with_softmax,)}
L04[:] = [dataclasses.replace(a, right=_RIGHT.get(a.check, ())) for a in L04]
