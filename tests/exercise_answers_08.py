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


def _soft_target_grad(logits, q):
    return (torch.softmax(logits, -1) - q) / len(q)                 # (N, V): (p − q) / N


def _soft_target_grad_without_mean(logits, q):                     # forgot that L is a mean over the rows
    return torch.softmax(logits, -1) - q


def _soft_target_grad_by_autograd(logits, q):
    leaf = logits.clone().requires_grad_(True)
    F.cross_entropy(leaf, q).backward()
    return leaf.grad


def _soft_target_grad_wrt_p(logits, q):                            # ∂L/∂p, not ∂L/∂z
    return -q / torch.softmax(logits, -1) / len(q)


def _soft_target_grad_hard_label(logits, q):                       # the argmax of q, as without smoothing
    return (torch.softmax(logits, -1) - F.one_hot(q.argmax(-1), q.shape[-1]).float()) / len(q)


def _soft_target_grad_flipped(logits, q):
    return (q - torch.softmax(logits, -1)) / len(q)


def _soft_target_grad_naive_softmax(logits, q):                    # e^1000 = inf: nan
    e = torch.exp(logits)
    return (e / e.sum(-1, keepdim=True) - q) / len(q)


def _soft_target_grad_by_jacobian(logits, q):    # ∂L/∂p through the softmax's Jacobian: loses p = 0 at ±1000
    p = torch.softmax(logits, -1)
    jac = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]       # (N, V, V), symmetric
    d_p = -q / p.clamp_min(1e-38)
    return (jac @ d_p[:, :, None]).squeeze(-1) / len(q)


def _soft_target_grad_from_log_softmax(logits, q):                 # exp of a stable log-softmax, float64 inside
    z = logits.double()
    logp = z - z.max(-1, keepdim=True).values
    logp = logp - logp.exp().sum(-1, keepdim=True).log()
    return ((logp.exp() - q.double()) / q.shape[0]).float()


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
    Answer("check_soft_target_gradient", _soft_target_grad, wrong=_soft_target_grad_without_mean,
           shortcut=_soft_target_grad_by_autograd, says="asked autograd",
           also=((_soft_target_grad_wrt_p, "∂L/∂p"), (_soft_target_grad_hard_label, "hard label"),
                 (_soft_target_grad_flipped, "sign is flipped"), (_soft_target_grad_naive_softmax, "overflows"),
                 (_soft_target_grad_by_jacobian, "needs no division")),
           right=(_soft_target_grad_from_log_softmax,
                  lambda logits, q: (F.log_softmax(logits, -1).exp() - q) / logits.shape[0])),
    Answer("check_smoothed_confidence", _confidence, wrong=_confidence_without_smoothing,
           shortcut=lambda eps, n_classes: 1 - eps + eps / n_classes, says="without training anything"),
]

ANSWERS = {"l08_output_loss": L08}
