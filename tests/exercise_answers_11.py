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


def _top_p(logits, p):
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = torch.softmax(sorted_logits, dim=-1)
    before = probs.cumsum(-1) - probs
    drop = torch.zeros_like(before, dtype=torch.bool).scatter(-1, order, before >= p)
    return logits.masked_fill(drop, float("-inf"))


def _top_p_including_itself(logits, p):
    """The off-by-one: keep a token while the mass *including* it is <= p (drops the token that reaches p)."""
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = torch.softmax(sorted_logits, dim=-1)
    drop = probs.cumsum(-1) > p
    drop[..., 0] = False                                                  # the best token always stays
    return logits.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), float("-inf"))


def _count_a_built_block(d, f):
    block = course_utils.GPT(10, max_len=8, n_layers=1, n_heads=4, d_model=d, d_ff=f).blocks.layers[0]
    return sum(p.numel() for p in block.parameters())


L11 = [
    Answer("check_gpt_block_params", lambda d, f: 4 * d * d + 2 * d * f + 9 * d + f,
           wrong=lambda d, f: 12 * d * d,                                                 # the rule of thumb
           shortcut=_count_a_built_block, says="counted the parameters of a built module"),
    Answer("check_min_p", _min_p,
           wrong=lambda z, p: z.masked_fill(torch.softmax(z, -1) < p, float("-inf")),     # absolute threshold
           shortcut=lambda z, p: top_p_filter(z, 1 - p), says="write the filter yourself"),
    Answer("check_top_p", _top_p, wrong=_top_p_including_itself,
           shortcut=lambda z, p: top_p_filter(z, p), says="write the filter yourself"),
]

ANSWERS = {"l11_gpt": L11}
