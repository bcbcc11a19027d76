"""Answers to the exercises of lesson 09 (encoder-only classifier), for tests/test_exercises.py: every exercise
with a correct answer, a wrong one (a plausible mistake) and the shortcut the exercise forbids."""

from __future__ import annotations

import math
from collections import Counter

import torch
from exercise_answer import Answer


def _constant_loss(train_labels, eval_labels):
    pi = Counter(train_labels)                                     # the best constant: the training frequencies
    return -sum(math.log(pi[y] / len(train_labels)) for y in eval_labels) / len(eval_labels)


def _constant_loss_by_torch(train_labels, eval_labels):           # the same, as a cross-entropy of log-counts
    counts = torch.bincount(torch.tensor(train_labels), minlength=max(train_labels + eval_labels) + 1).double()
    logits = counts.log().expand(len(eval_labels), -1)               # softmax(log n_c) = n_c / N
    return torch.nn.functional.cross_entropy(logits, torch.tensor(eval_labels)).item()


def _early_stop(dev_losses, patience):
    best, waited = 0, 0
    for i, loss in enumerate(dev_losses):
        if loss < dev_losses[best]:
            best, waited = i, 0
        elif i > 0:
            waited += 1
            if waited == patience:
                return i, best
    return len(dev_losses) - 1, best


def _early_stop_one_late(dev_losses, patience):
    stop, keep = _early_stop(dev_losses, patience + 1)              # waits one evaluation too many
    return stop, keep


def _overwrite_first(ids, cls_id):
    out = ids.clone()
    out[:, 0] = cls_id                                             # no new column: the first token is lost
    return out


def _early_stop_from_inf(dev_losses, patience):     # best loss from +inf, ">= patience": a tie is no new best
    best_loss, best, since = float("inf"), 0, 0
    for i, loss in enumerate(dev_losses):
        best_loss, best, since = (loss, i, 0) if loss < best_loss else (best_loss, best, since + 1)
        if since >= patience:
            return i, best
    return len(dev_losses) - 1, best


L09 = [
    Answer("check_max_pool", lambda h, keep: h.masked_fill(~keep[..., None], float("-inf")).amax(dim=1),
           wrong=lambda h, keep: h.amax(dim=1),                                          # padding takes part
           shortcut=lambda h, keep: (h * keep[..., None]).amax(dim=1),                   # the mean's mask trick
           says="Multiplying by the mask"),
    Answer("check_prepend_cls", lambda ids, cls_id: torch.cat([torch.full_like(ids[:, :1], cls_id), ids], dim=1),
           wrong=lambda ids, cls_id: torch.cat([ids, torch.full_like(ids[:, :1], cls_id)], dim=1),   # at the end
           shortcut=_overwrite_first, says="overwrote the first token"),
    Answer("check_constant_loss", _constant_loss,
           wrong=lambda train_labels, eval_labels: math.log(len(set(train_labels))),      # the uniform guess
           shortcut=lambda train_labels, eval_labels: _constant_loss(eval_labels, eval_labels),  # peeks
           says="evaluation labels",
           also=((lambda train_labels, eval_labels: _constant_loss(train_labels, eval_labels) / math.log(2), "nats"),),
           right=(_constant_loss_by_torch,)),
    Answer("check_early_stop", _early_stop, wrong=_early_stop_one_late,
           shortcut=lambda dev_losses, patience: (len(dev_losses) - 1,                     # the best in hindsight
                                                  min(range(len(dev_losses)), key=dev_losses.__getitem__)),
           says="best point in hindsight", right=(_early_stop_from_inf,)),
]

ANSWERS = {"l09_classifier": L09}
