"""Answers to the exercises of lessons 08-14, for tests/test_exercises.py: per lesson, every exercise with a correct
answer, a wrong one (a plausible mistake) and the shortcut the exercise forbids.

Each check must accept the first and reject the other two; for the shortcut it must also print the teaching message
``says`` (in English; the Chinese message is printed by the same branch).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class Answer:
    check: str                      # the lesson's check_* function
    correct: Callable
    wrong: Callable                 # a plausible mistake
    shortcut: Callable              # what the exercise rules out
    says: str                       # part of the message the shortcut gets
    args: tuple = field(default=())  # extra arguments of the check after the student's function


# --- lesson 14 -------------------------------------------------------------------------------------------------

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

ANSWERS: dict[str, list[Answer]] = {"l14_fast": L14}
