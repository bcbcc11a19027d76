"""Answers to the exercises of lesson 01, for tests/test_exercises.py: every exercise with a correct answer, a
wrong one (a plausible mistake) and the shortcut the exercise forbids (see exercise_answer.py)."""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F
from exercise_answer import Answer


def _one_hot_costs(n_tokens, vocab_size, d_model):
    return n_tokens * vocab_size * d_model, 4 * n_tokens * vocab_size


def _one_hot_costs_measured(n_tokens, vocab_size, d_model):       # builds the matrix to measure it
    one_hot = F.one_hot(torch.zeros(n_tokens, dtype=torch.long), vocab_size).float()
    return n_tokens * vocab_size * d_model, one_hot.numel() * one_hot.element_size()


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
    Answer("check_one_hot_costs", _one_hot_costs,
           wrong=lambda n, v, d: (v * d, 4 * n * v),                # one token's cost
           shortcut=_one_hot_costs_measured, says="built the one-hot matrix",
           also=((lambda n, v, d: (n * d, 4 * n * v), "what the lookup copies"),
                 (lambda n, v, d: (n * v * d, 8 * n * v), "int64"),
                 (lambda n, v, d: (n * v * d, n * v), "counts the entries"),
                 (lambda n, v, d: (n * v * d, 4 * v * d), "size of E itself"))),
    Answer("check_embedding_grad", _embedding_grad, wrong=_embedding_grad_overwriting,
           shortcut=_embedding_grad_by_autograd, says="asked autograd"),
    Answer("check_balanced_std", lambda d: 1 / math.sqrt(2 * d), wrong=lambda d: d ** -0.5,   # the paper's std
           shortcut=lambda d: 0.0884, says="for every d_model"),
]

ANSWERS = {"l01_tokens": L01}


# --- right answers in other styles (issue 39 §1): each must pass -----------------------------------------------

def _embedding_grad_by_one_hot(ids, grad_out, vocab_size):          # the one-hot product of the lesson
    one_hot = F.one_hot(ids.flatten(), vocab_size).to(grad_out.dtype)  # (N, |V|)
    return one_hot.T @ grad_out.reshape(-1, grad_out.shape[-1])


def _embedding_grad_by_scatter(ids, grad_out, vocab_size):
    flat = grad_out.reshape(-1, grad_out.shape[-1])
    index = ids.reshape(-1, 1).expand_as(flat)
    return torch.zeros(vocab_size, flat.shape[-1], dtype=flat.dtype).scatter_add(0, index, flat)


_RIGHT = {"check_embedding_grad": (_embedding_grad_by_one_hot, _embedding_grad_by_scatter),
          "check_balanced_std": (lambda d: (2 * d) ** -0.5,)}
L01[:] = [dataclasses.replace(a, right=_RIGHT.get(a.check, ())) for a in L01]
