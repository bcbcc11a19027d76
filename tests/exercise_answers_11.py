"""Answers to the exercises of lesson 11 (GPT), for tests/test_exercises.py: every exercise with a correct answer,
a wrong one (a plausible mistake) and the shortcut the exercise forbids (see exercise_answer.py)."""

from __future__ import annotations

import torch
from exercise_answer import Answer

import course_utils
from course_utils.sampling import top_p_filter


def _min_p(logits, p_base):
    probs = torch.softmax(logits, dim=-1)
    return logits.masked_fill(probs < p_base * probs.amax(-1, keepdim=True), float("-inf"))


def _min_p_in_log_space(logits, p_base):       # log p_i >= log max p + log p_base, without a softmax
    return logits.masked_fill(logits < logits.amax(-1, keepdim=True) + torch.log(torch.tensor(p_base)),
                              float("-inf"))


def _p_range(probs, k):
    best = probs.sort(descending=True).values
    return float(best[:k - 1].sum()), float(best[:k].sum())


def _p_range_including_itself(probs, k):          # the off-by-one: the range that keeps k + 1 tokens
    best = probs.sort(descending=True).values
    return float(best[:k].sum()), float(best[:k + 1].sum())


def _p_range_by_search(probs, k):                  # tries many p with the library's filter: a search, not a derivation
    logits = probs.log()
    kept = [(p / 1000, int(torch.isfinite(top_p_filter(logits, p / 1000)).sum())) for p in range(1, 1001)]
    inside = [p for p, n in kept if n == k] or [0.0]     # a grid too coarse for a tiny probability: still a search
    return min(inside) - 0.001, max(inside)


def _p_range_unsorted(probs, k):                   # adds up in vocabulary order
    return float(probs[:k - 1].sum()), float(probs[:k].sum())


def _count_a_built_block(d, f):
    block = course_utils.GPT(10, max_len=8, n_layers=1, n_heads=4, d_model=d, d_ff=f).blocks.layers[0]
    return sum(p.numel() for p in block.parameters())


L11 = [
    Answer("check_gpt_block_params", lambda d, f: 4 * d * d + 2 * d * f + 9 * d + f,
           wrong=lambda d, f: 12 * d * d,                                                 # the rule of thumb
           shortcut=_count_a_built_block, says="counted the parameters of a built module"),
    Answer("check_min_p", _min_p,
           wrong=lambda z, p: z.masked_fill(torch.softmax(z, -1) < p, float("-inf")),     # absolute threshold
           shortcut=lambda z, p: top_p_filter(z, 1 - p), says="write the filter yourself",
           right=(_min_p_in_log_space,)),
    Answer("check_top_p_range", _p_range, wrong=_p_range_including_itself, shortcut=_p_range_by_search,
           says="searching for p", also=((_p_range_unsorted, "vocabulary order"),)),
]

ANSWERS = {"l11_gpt": L11}
