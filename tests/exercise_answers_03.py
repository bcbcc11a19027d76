"""Answers to the exercises of lesson 03, for tests/test_exercises.py: each exercise with a correct answer, a
plausible mistake and the shortcut it forbids (see exercise_answer.py for the table's format)."""

from __future__ import annotations

import dataclasses
import math

import torch
from exercise_answer import Answer

import course_utils


def _jacobian(a):
    return torch.diag_embed(a) - a.unsqueeze(-1) * a.unsqueeze(-2)


def _jacobian_by_autograd(a):
    rows = a.reshape(-1, a.shape[-1])
    blocks = [torch.autograd.functional.jacobian(lambda s: torch.softmax(s, -1), r.log()) for r in rows]
    return torch.stack(blocks).reshape(*a.shape, a.shape[-1])


def _masked(q, k, v, mask):
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def _masked_inverted(q, k, v, mask):               # PyTorch's key_padding_mask convention: True = ignore
    return _masked(q, k, v, ~mask | ~mask.any(-1, keepdim=True))


def _softmax_then_zero(q, k, v, mask):           # the planted bug itself
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1).masked_fill(~mask, 0.0)
    return weights @ v, weights


def _masked_with_zero(q, k, v, mask):            # a masked score of 0 still gets exp(0) = 1
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(~mask, 0.0)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def _jacobian_by_rows(a):                          # a comprehension over the rows: a loop
    rows = a.reshape(-1, a.shape[-1])
    return torch.stack([torch.diag(r) - torch.outer(r, r) for r in rows]).reshape(*a.shape, a.shape[-1])


L03 = [
    Answer("check_softmax_jacobian", _jacobian,
           wrong=lambda a: torch.diag_embed(a * (1 - a)),                    # the diagonal only, as for a sigmoid
           shortcut=_jacobian_by_autograd, says="asked autograd", also=((_jacobian_by_rows, "loops over the rows"),)),
    Answer("check_unit_scale", lambda d, vq, vk: 1 / math.sqrt(d * vq * vk),
           wrong=lambda d, vq, vk: 1 / (math.sqrt(d) * vq * vk),             # variances instead of std
           shortcut=lambda d, vq, vk: 1 / math.sqrt(d), says="assumes unit-variance",
           also=((lambda d, vq, vk: str(1 / math.sqrt(d * vq * vk)), "expected a number"),)),
    Answer("check_masked_attention_fix", _masked, wrong=_softmax_then_zero,
           shortcut=lambda q, k, v, mask: course_utils.attention_with_weights(q, k, v, mask),
           says="attention_with_weights",
           also=((_masked_with_zero, "exp(0) = 1"), (_masked_inverted, "may attend"),
                 (lambda q, k, v, mask: _softmax_then_zero(q, k, v, mask)[::-1], "weights"))),
]

ANSWERS = {"l03_attention": L03}


# --- right answers in other styles (issue 39 §1): each must pass -----------------------------------------------

def _jacobian_by_einsum(a):
    eye = torch.eye(a.shape[-1], dtype=a.dtype)
    return torch.einsum("...i,ij->...ij", a, eye) - torch.einsum("...i,...j->...ij", a, a)


def _jacobian_with_constant_masks(a):             # a generator over two constant matrices is not a loop
    eye, ones = (m.to(a.dtype) for m in (torch.eye(a.shape[-1]), torch.ones(a.shape[-1], a.shape[-1])))
    return a.unsqueeze(-1) * (eye - ones * a.unsqueeze(-2))


_RIGHT = {"check_softmax_jacobian": (_jacobian_by_einsum, _jacobian_with_constant_masks),
          "check_unit_scale": (lambda d, vq, vk: (d * vq * vk) ** -0.5,)}
L03[:] = [dataclasses.replace(a, right=_RIGHT.get(a.check, ())) for a in L03]
