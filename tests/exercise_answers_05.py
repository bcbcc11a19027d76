"""Answers to the exercises of lesson 05 (masking), for tests/test_exercises.py: every exercise with a correct
answer, a plausible mistake and the shortcut the exercise forbids (see exercise_answer.py for ``Answer``)."""

from __future__ import annotations

import dataclasses

import torch
from exercise_answer import Answer


def _left_padded(ids, pad_id):
    t = ids.shape[1]
    visible = (ids != pad_id)[:, None, None, :] & torch.tril(torch.ones(t, t, dtype=torch.bool))
    return visible | torch.eye(t, dtype=torch.bool)


def _padding_and_causal(ids, pad_id):              # right for right padding; leaves empty rows on the left
    t = ids.shape[1]
    return (ids != pad_id)[:, None, None, :] & torch.tril(torch.ones(t, t, dtype=torch.bool))


def _left_padded_with_loops(ids, pad_id):
    b, t = ids.shape
    keep = torch.zeros(b, 1, t, t, dtype=torch.bool)
    for row in range(b):
        for i in range(t):
            for j in range(t):
                keep[row, 0, i, j] = bool(i == j or (j <= i and ids[row, j] != pad_id))
    return keep


def _masked_softmax(scores, keep):
    weights = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    return weights.masked_fill(~keep.any(dim=-1, keepdim=True), 0.0)


def _nan_rows(scores, keep):
    return torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)


def _minus_1e9(scores, keep):                      # the "large negative number" of section 6
    weights = torch.softmax(scores.masked_fill(~keep, -1e9), dim=-1)
    return weights.masked_fill(~keep.any(dim=-1, keepdim=True), 0.0)


def _sliding(t, window):
    i, j = torch.arange(t)[:, None], torch.arange(t)[None, :]
    return (j <= i) & (j > i - window)


def _sliding_off_by_one(t, window):
    i, j = torch.arange(t)[:, None], torch.arange(t)[None, :]
    return (j <= i) & (j >= i - window)


def _sliding_from_lists(t, window):
    return torch.tensor([[i - window < j <= i for j in range(t)] for i in range(t)])


def _left_padded_by_unbind(ids, pad_id):           # a loop over the rows, without indexing cell by cell
    t = ids.shape[1]
    causal = torch.tril(torch.ones(t, t, dtype=torch.bool)) | torch.eye(t, dtype=torch.bool)
    rows = []
    for row in ids.unbind(0):
        rows.append(((row != pad_id).unsqueeze(0) & causal) | torch.eye(t, dtype=torch.bool))
    return torch.stack(rows).unsqueeze(1)


def _left_padded_in_place(ids, pad_id):            # right mask, but the caller's ids are overwritten
    out = _left_padded(ids, pad_id)
    ids.fill_(pad_id)
    return out


def _sliding_by_comprehension(t, window):
    j = torch.arange(t)
    return torch.stack([(j <= i) & (j > i - window) for i in range(t)])


L05 = [
    Answer("check_left_padded_mask", _left_padded, wrong=_padding_and_causal, shortcut=_left_padded_with_loops,
           says="Python loops", also=((_left_padded_by_unbind, "Python loops"), (_left_padded_in_place, "in place"))),
    Answer("check_masked_softmax", _masked_softmax, wrong=_nan_rows, shortcut=_minus_1e9, says="float16"),
    Answer("check_sliding_window_mask", _sliding, wrong=_sliding_off_by_one, shortcut=_sliding_from_lists,
           says="Python loops", also=((_sliding_by_comprehension, "Python loops"),)),
]

ANSWERS = {"l05_masking": L05}


# --- right answers in other styles (issue 39 §1): each must pass -----------------------------------------------

def _left_padded_two_masks(ids, pad_id):          # a generator over two constant masks: not a loop
    t = ids.shape[1]
    causal, eye = (m.bool() for m in (torch.ones(t, t).tril(), torch.eye(t)))
    return ((ids != pad_id)[:, None, None, :] & causal) | eye


def _masked_softmax_without_fill(scores, keep):   # no fill at all: exp of the shifted kept scores, safe divide
    shifted = scores - scores.detach().amax(-1, keepdim=True)
    e = torch.exp(shifted) * keep
    total = e.sum(-1, keepdim=True)
    return torch.where(total > 0, e / torch.where(total > 0, total, torch.ones_like(total)), torch.zeros_like(e))


def _sliding_by_two_trils(t, window):
    ones = torch.ones(t, t, dtype=torch.bool)
    return ones.tril() & ~ones.tril(-window)


def _masked_softmax_nan_to_num(scores, keep):     # NaN rows repaired afterwards, with autograd on: the masked
    return torch.softmax(scores.masked_fill(~keep, float("-inf")), -1).nan_to_num(0.0)   # fill zeroes their grad


_RIGHT = {"check_left_padded_mask": (_left_padded_two_masks,),
          "check_masked_softmax": (_masked_softmax_without_fill, _masked_softmax_nan_to_num),
          "check_sliding_window_mask": (_sliding_by_two_trils,)}
L05[:] = [dataclasses.replace(a, right=_RIGHT.get(a.check, ())) for a in L05]
