"""Answers to the exercises of lesson 14, for tests/test_exercises.py: every exercise with a correct answer, a wrong
one (a plausible mistake) and the shortcut the exercise forbids (see exercise_answer.py)."""

from __future__ import annotations

import torch
from exercise_answer import Answer


def _cross_flops(b, t_q, t_k, d):
    return 4 * b * t_q * d**2 + 4 * b * t_k * d**2 + 4 * b * t_q * t_k * d


def _self_flops(b, t_q, t_k, d):
    return 8 * b * t_q * d**2 + 4 * b * t_q**2 * d


def _still_right(s, block):                       # the row's maximum is in the first block: m never moves
    return s[:, :block].amax(-1) == s.amax(-1)


def _still_right_strict(s, block):                # a later block that only ties the maximum counted as a change
    rest = torch.cat([s[:, block:], torch.full((s.shape[0], 1), float("-inf"), dtype=s.dtype)], -1)
    return s[:, :block].amax(-1) > rest.amax(-1)


def _still_right_first_position(s, block):        # the first *score*, not the first block, is the maximum
    return s.argmax(-1) == 0


def _still_right_last_block(s, block):            # "the last block fixes it"
    start = (s.shape[-1] - 1) // block * block
    return s[:, start:].amax(-1) == s.amax(-1)


L14 = [
    Answer("check_cross_attention_flops", _cross_flops,
           wrong=lambda b, t_q, t_k, d: 8 * b * t_q * d**2 + 4 * b * t_q * t_k * d,      # all projections at T_q
           shortcut=_self_flops, says="self-attention's count",
           right=(lambda b, t_q, t_k, d: 2 * b * d * (2 * d * (t_q + t_k) + 2 * t_q * t_k),)),   # factored
    Answer("check_gqa_cache_bytes", lambda L, B, T, h, kv, dh, n: 2 * L * B * T * kv * dh * n,
           wrong=lambda L, B, T, h, kv, dh, n: L * B * T * kv * dh * n,                   # keys only
           shortcut=lambda L, B, T, h, kv, dh, n: 2 * L * B * T * h * dh * n,             # the multi-head cache
           says="multi-head cache"),
    Answer("check_tiling_bug", _still_right, wrong=_still_right_first_position,
           shortcut=_still_right_strict, says="only ties the maximum",
           also=((_still_right_last_block, "Row ("),
                 (lambda s, block: torch.zeros(s.shape[0], dtype=torch.bool), "right"),
                 (lambda s, block: torch.ones(s.shape[0], dtype=torch.bool), "you said the opposite"),
                 (lambda s, block: _still_right(s, block).int(), "torch.bool"))),
]

ANSWERS = {"l14_fast": L14}
