"""Answers to the exercises of lesson 04, for tests/test_exercises.py: each exercise with a correct answer, a
plausible mistake and the shortcut it forbids (see exercise_answer.py for the table's format)."""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from exercise_answer import Answer

import course_utils as cu


def _split(x, n_heads):
    b, t, d = x.shape
    return x.view(b, t, n_heads, d // n_heads).transpose(1, 2)


def _merge(out):
    b, h, t, d_k = out.shape
    return out.transpose(1, 2).reshape(b, t, h * d_k)


def _forward(x, mha):
    q, k, v = (_split(t, mha.n_heads) for t in mha.qkv_proj(x).split(mha.d_model, dim=-1))
    out, _ = cu.attention_with_weights(q, k, v)
    return mha.out_proj(_merge(out))


def _forward_without_transpose(x, mha):             # merges with reshape only: heads glued to the wrong positions
    q, k, v = (_split(t, mha.n_heads) for t in mha.qkv_proj(x).split(mha.d_model, dim=-1))
    out, _ = cu.attention_with_weights(q, k, v)
    return mha.out_proj(out.reshape(x.shape))


def _forward_merged_by_the_library(x, mha):         # "the merge is yours to write"
    q, k, v = (_split(t, mha.n_heads) for t in mha.qkv_proj(x).split(mha.d_model, dim=-1))
    out, _ = cu.attention_with_weights(q, k, v)
    return mha.out_proj(mha.merge_heads(out))


def _cross(x, memory, keep, mha, mask=True):
    b_q, b_k, b_v = mha.qkv_proj.bias.split(mha.d_model)
    q = _split(F.linear(x, mha.w_q, b_q), mha.n_heads)
    k = _split(F.linear(memory, mha.w_k, b_k), mha.n_heads)
    v = _split(F.linear(memory, mha.w_v, b_v), mha.n_heads)
    out, _ = cu.attention_with_weights(q, k, v, keep[:, None, None, :] if mask else None)
    return mha.out_proj(_merge(out))


L04 = [
    Answer("check_split_heads", _split,
           wrong=lambda x, h: x.view(x.shape[0], h, x.shape[1], x.shape[2] // h),         # no transpose
           shortcut=lambda x, h: cu.MultiHeadAttention(x.shape[-1], h).split_heads(x), says="called the library"),
    Answer("check_mha_forward", _forward, wrong=_forward_without_transpose,
           shortcut=lambda x, mha: mha(x), says="called the library",
           also=((_forward_merged_by_the_library, "merge_heads"),)),
    Answer("check_cross_attention", _cross,
           wrong=lambda x, memory, keep, mha: _cross(x, memory, keep, mha, mask=False),     # padding attended
           shortcut=lambda x, memory, keep, mha: mha(x, memory, memory, key_keep_mask=keep),
           says="called the library"),
]

ANSWERS = {"l04_multihead": L04}


# --- right answers in other styles (issue 39 §1): each must pass -----------------------------------------------

def _split_by_unflatten(x, n_heads):
    return x.unflatten(-1, (n_heads, -1)).permute(0, 2, 1, 3)


def _cross_with_softmax(x, memory, keep, mha):    # the attention typed out, the mask as an additive −inf
    b_q, b_k, b_v = mha.qkv_proj.bias.split(mha.d_model)
    q = _split(F.linear(x, mha.w_q, b_q), mha.n_heads)
    k = _split(F.linear(memory, mha.w_k, b_k), mha.n_heads)
    v = _split(F.linear(memory, mha.w_v, b_v), mha.n_heads)
    bias = torch.zeros(keep.shape).masked_fill(~keep, float("-inf"))[:, None, None, :]   # (B, 1, 1, T_k)
    weights = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5 + bias, -1)
    return mha.out_proj(_merge(weights @ v))


_RIGHT = {"check_split_heads": (_split_by_unflatten,), "check_cross_attention": (_cross_with_softmax,)}
L04[:] = [dataclasses.replace(a, right=_RIGHT.get(a.check, ())) for a in L04]
