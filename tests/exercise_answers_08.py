"""Answers to the exercises of lesson 08 (output layer and cross-entropy), for tests/test_exercises.py: every
exercise with a correct answer, a wrong one (a plausible mistake) and the shortcut the exercise forbids."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from exercise_answer import Answer

from course_utils import losses


def _bce(z, y):
    m = torch.clamp(z, min=0)                                      # max(0, z): the larger of the logits (0, z)
    return m + torch.log(torch.exp(-m) + torch.exp(z - m)) - y * z


def _bce_textbook_stable(z, y):                                    # relu(z) + log(1 + e^-|z|) - y z: a kink at 0
    return torch.relu(z) + torch.log1p(torch.exp(-z.abs())) - y * z


def _bce_by_where(z, y):
    return torch.where(z > 0, z, 0.0) + torch.log1p(torch.exp(-z.abs())) - y * z


def _bce_through_sigmoid(z, y):
    p = torch.sigmoid(z)                                           # rounds to exactly 0 or 1 for |z| large
    return -(y * torch.log(p) + (1 - y) * torch.log(1 - p))


def _soft_ce(logits, q):
    logp = logits - torch.logsumexp(logits, dim=-1, keepdim=True)  # (N, V), finite
    return -(q * logp).sum(-1).mean()


def _soft_ce_through_softmax(logits, q):
    return -(q * torch.log(torch.softmax(logits, dim=-1))).sum(-1).mean()   # 0 · log 0 = nan


def _confidence(eps, n_classes, loss=losses.cross_entropy, steps=300):
    logits = torch.zeros(1, n_classes, requires_grad=True)        # a model free to put any logits on one position
    optimizer = torch.optim.Adam([logits], lr=0.1)
    for _ in range(steps):
        step_loss = loss(logits, torch.tensor([0]), label_smoothing=eps)
        optimizer.zero_grad()
        step_loss.backward()
        optimizer.step()
    return torch.softmax(logits, -1)[0, 0].item()


def _confidence_without_smoothing(eps, n_classes):
    return _confidence(0.0, n_classes)                            # forgot to pass eps to the loss


L08 = [
    Answer("check_binary_cross_entropy", _bce, wrong=_bce_through_sigmoid,
           shortcut=lambda z, y: F.binary_cross_entropy_with_logits(z, y, reduction="none"),
           says="applies the trick for you",
           also=((lambda z, y: torch.logsumexp(torch.stack([torch.zeros_like(z), z]), 0) - y * z, "logsumexp"),),
           right=(_bce_textbook_stable, _bce_by_where)),
    Answer("check_soft_cross_entropy", _soft_ce, wrong=_soft_ce_through_softmax,
           shortcut=lambda logits, q: F.cross_entropy(logits, q), says="takes a target distribution"),
    Answer("check_smoothed_confidence", _confidence, wrong=_confidence_without_smoothing,
           shortcut=lambda eps, n_classes: 1 - eps + eps / n_classes, says="without training anything"),
]

ANSWERS = {"l08_output_loss": L08}
