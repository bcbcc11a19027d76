"""Answers to the exercises of lesson 06 (FFN, residuals, LayerNorm, dropout), for tests/test_exercises.py: every
exercise with a correct answer, a plausible mistake and the shortcut the exercise forbids (see
exercise_answer.py for ``Answer``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from exercise_answer import Answer

import course_utils


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


def _library_residual(x, sublayer, norm, dropout):
    residual = course_utils.layers.Residual(x.shape[-1], norm_first=True).to(x.dtype)
    residual.norm, residual.dropout = norm, dropout
    return residual(x, sublayer)


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
    Answer("check_pre_norm", lambda x, sublayer, norm, dropout: x + dropout(sublayer(norm(x))),
           wrong=lambda x, sublayer, norm, dropout: norm(x + dropout(sublayer(x))),
           shortcut=_library_residual, says="library's Residual"),
]

ANSWERS = {"l06_ffn_norm": L06}
