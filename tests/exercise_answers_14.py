"""Answers to the exercises of lesson 14, for tests/test_exercises.py: every exercise with a correct answer, a wrong
one (a plausible mistake) and the shortcut the exercise forbids (see exercise_answer.py)."""

from __future__ import annotations

import torch
from exercise_answer import Answer


def _cross_flops(b, t_q, t_k, d):
    return 4 * b * t_q * d**2 + 4 * b * t_k * d**2 + 4 * b * t_q * t_k * d


def _self_flops(b, t_q, t_k, d):
    return 8 * b * t_q * d**2 + 4 * b * t_q**2 * d


def _merge(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    return m, l1 * torch.exp(m1 - m) + l2 * torch.exp(m2 - m)


def _merge_without_rescaling(m1, l1, m2, l2):
    return torch.maximum(m1, m2), l1 + l2


def _merge_through_exp_of_maxima(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    return m, (l1 * torch.exp(m1) + l2 * torch.exp(m2)) / torch.exp(m)


L14 = [
    Answer("check_cross_attention_flops", _cross_flops,
           wrong=lambda b, t_q, t_k, d: 8 * b * t_q * d**2 + 4 * b * t_q * t_k * d,      # all projections at T_q
           shortcut=_self_flops, says="self-attention's count"),
    Answer("check_gqa_cache_bytes", lambda L, B, T, h, kv, dh, n: 2 * L * B * T * kv * dh * n,
           wrong=lambda L, B, T, h, kv, dh, n: L * B * T * kv * dh * n,                   # keys only
           shortcut=lambda L, B, T, h, kv, dh, n: 2 * L * B * T * h * dh * n,             # the multi-head cache
           says="multi-head cache"),
    Answer("check_merge_softmax_stats", _merge, wrong=_merge_without_rescaling,
           shortcut=_merge_through_exp_of_maxima, says="never take exp of a maximum"),
]

ANSWERS = {"l14_fast": L14}
