"""Answers to the exercises of lesson 06 (FFN, residuals, LayerNorm, dropout), for tests/test_exercises.py: every
exercise with a correct answer, a plausible mistake and the shortcut the exercise forbids (see
exercise_answer.py for ``Answer``)."""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F
from exercise_answer import Answer


def _layer_norm_2d(x, gamma, beta, eps):
    mu = x.mean(dim=(-2, -1), keepdim=True)
    var = ((x - mu) ** 2).mean(dim=(-2, -1), keepdim=True)             # biased, over (T, d)
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta


def _per_position(x, gamma, beta, eps):                                # the lesson's LayerNorm: last axis only
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta


def _dropout(x, p, training):
    if not training:
        return x
    keep = torch.rand_like(x) >= p
    return x * keep / (1 - p)


def _dropout_without_rescaling(x, p, training):
    return x * (torch.rand_like(x) >= p) if training else x


def _stream_norm(norm0, a, d, n_layers, norm_first):
    if norm_first:
        return norm0 + n_layers * a * math.sqrt(d)                      # a·LN(x) has norm a·√d and points along x
    return math.sqrt(d)                                                 # LN's output: d features of variance 1


def _stream_norm_unit_ln(norm0, a, d, n_layers, norm_first):             # LN's output taken to have norm 1
    return norm0 + n_layers * a if norm_first else 1.0


def _stream_norm_pythagoras(norm0, a, d, n_layers, norm_first):          # each layer added in a random direction
    return math.sqrt(norm0**2 + n_layers * a * a * d) if norm_first else math.sqrt(d)


def _stream_norm_exponential(norm0, a, d, n_layers, norm_first):         # the sublayer applied to x, not LN(x)
    return norm0 * (1 + a) ** n_layers if norm_first else math.sqrt(d)


def _stream_norm_post_keeps_input(norm0, a, d, n_layers, norm_first):    # post-norm thought to keep |x_0|
    return _stream_norm(norm0, a, d, n_layers, True) if norm_first else norm0


L06 = [
    Answer("check_layer_norm_2d", _layer_norm_2d, wrong=_per_position,
           shortcut=lambda x, gamma, beta, eps: F.layer_norm(x, x.shape[-2:], gamma, beta, eps),
           says="calls the library",
           also=((lambda x, gamma, beta, eps: F.instance_norm(x.reshape(x.shape[0], 1, -1), eps=eps)
                  .reshape(x.shape) * gamma + beta, "instance_norm"),
                 (lambda x, gamma, beta, eps: F.batch_norm(x.reshape(x.shape[0], -1).T, None, None, training=True,
                                                           eps=eps).T.reshape(x.shape) * gamma + beta,
                  "batch_norm"))),
    Answer("check_dropout", _dropout, wrong=_dropout_without_rescaling,
           shortcut=lambda x, p, training: F.dropout(x, p, training), says="calls the library"),
    Answer("check_stream_norm", _stream_norm, wrong=_stream_norm_unit_ln,
           shortcut=_stream_norm_pythagoras, says="random direction",
           also=((_stream_norm_exponential, "applied to x itself"), (_stream_norm_post_keeps_input, "norm is fixed"),
                 (lambda norm0, a, d, n_layers, norm_first: _stream_norm(norm0, a, d, n_layers, True), "expected"))),
]

ANSWERS = {"l06_ffn_norm": L06}


# --- right answers in other styles (issue 39 §1): each must pass -----------------------------------------------

def _layer_norm_2d_flat(x, gamma, beta, eps):     # flatten the two axes, normalise one, unflatten
    flat = x.flatten(-2)
    mu = flat.mean(-1, keepdim=True)
    var = ((flat - mu) ** 2).mean(-1, keepdim=True)
    return ((flat - mu) * torch.rsqrt(var + eps)).unflatten(-1, x.shape[-2:]) * gamma + beta


def _dropout_by_bernoulli(x, p, training):
    if not training or p == 0:
        return x
    return x * torch.bernoulli(torch.full_like(x, 1 - p)) / (1 - p)


_RIGHT = {"check_layer_norm_2d": (_layer_norm_2d_flat,), "check_dropout": (_dropout_by_bernoulli,)}
L06[:] = [dataclasses.replace(a, right=_RIGHT.get(a.check, ())) for a in L06]
