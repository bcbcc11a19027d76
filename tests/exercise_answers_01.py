"""Answers to the exercises of lesson 01, for tests/test_exercises.py: every exercise with a correct answer, a
wrong one (a plausible mistake) and the shortcut the exercise forbids (see exercise_answer.py)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from exercise_answer import Answer


def _one_hot_lookup(ids, E):
    return F.one_hot(ids, E.shape[0]).to(E.dtype) @ E


def _embedding_grad(ids, grad_out, vocab_size):
    one_hot = F.one_hot(ids, vocab_size).to(grad_out.dtype)           # (B, T, |V|)
    return one_hot.flatten(0, 1).T @ grad_out.flatten(0, 1)          # (|V|, C)


def _embedding_grad_overwriting(ids, grad_out, vocab_size):
    grad = torch.zeros(vocab_size, grad_out.shape[-1])
    grad[ids] = grad_out                                             # a repeated token keeps one gradient
    return grad


def _embedding_grad_by_autograd(ids, grad_out, vocab_size):
    E = torch.zeros(vocab_size, grad_out.shape[-1], requires_grad=True)
    (E[ids] * grad_out).sum().backward()
    return E.grad


L01 = [
    Answer("check_one_hot_lookup", _one_hot_lookup,
           wrong=lambda ids, E: F.one_hot(ids).to(E.dtype) @ E,     # width max(ids) + 1, not |V|
           shortcut=lambda ids, E: E[ids], says="looks rows of E up"),
    Answer("check_embedding_grad", _embedding_grad, wrong=_embedding_grad_overwriting,
           shortcut=_embedding_grad_by_autograd, says="asked autograd"),
    Answer("check_balanced_std", lambda d: 1 / math.sqrt(2 * d), wrong=lambda d: d ** -0.5,   # the paper's std
           shortcut=lambda d: 0.0884, says="for every d_model"),
]

ANSWERS = {"l01_tokens": L01}
