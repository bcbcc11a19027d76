"""Answers to the exercises of lesson 10, for tests/test_exercises.py: every exercise with a correct answer, a
wrong one (a plausible mistake) and the shortcut the exercise forbids (see exercise_answer.py)."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from exercise_answer import Answer

from course_lab.lessons.l10_seq2seq import checks as c10
from course_utils.masks import padding_mask


def _visible_labels(t, shifted):
    return torch.tril(torch.ones(t, t, dtype=torch.bool), diagonal=-1 if shifted else 0)


def _visible_ignoring_the_shift(t, shifted):       # the causal mask alone, as if it hid the label too
    return torch.tril(torch.ones(t, t, dtype=torch.bool))


def _visible_transposed(t, shifted):               # rows and columns swapped: the future instead of the past
    return _visible_labels(t, shifted).T


def _visible_for_one_length(t, shifted):           # the notebook's T = 4 only, hard-coded
    table = torch.tensor([[0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0]], dtype=torch.bool)
    return table if shifted else table | torch.eye(4, dtype=torch.bool)


def _exact_match(pred, ref, eos_id, pad_id):
    def strip(row):
        row = row[: row.index(eos_id)] if eos_id in row else row
        return [t for t in row if t != pad_id]
    same = [strip(p) == strip(r) for p, r in zip(pred.tolist(), ref.tolist())]
    return sum(same) / len(same)


def _exact_match_ignoring_eos(pred, ref, eos_id, pad_id):
    same = [[t for t in p if t not in (eos_id, pad_id)] == [t for t in r if t not in (eos_id, pad_id)]
            for p, r in zip(pred.tolist(), ref.tolist())]
    return sum(same) / len(same)


def _exact_match_padded_rows(pred, ref, eos_id, pad_id):
    width = max(pred.shape[1], ref.shape[1])
    p = F.pad(pred, (0, width - pred.shape[1]), value=pad_id)
    r = F.pad(ref, (0, width - ref.shape[1]), value=pad_id)
    return float((p == r).all(dim=1).float().mean())


def _smoothed(targets, vocab_size, eps, pad_id):
    q = torch.full((len(targets), vocab_size), eps / vocab_size)
    q[torch.arange(len(targets)), targets] += 1 - eps
    q[targets == pad_id] = 0.0
    return q


def _smoothed_keeps_padding(targets, vocab_size, eps, pad_id):
    q = torch.full((len(targets), vocab_size), eps / vocab_size)
    q[torch.arange(len(targets)), targets] += 1 - eps
    return q


def _smoothed_other_convention(targets, vocab_size, eps, pad_id):
    """The Annotated Transformer's LabelSmoothing, copied: ε over the V − 1 other classes."""
    q = torch.full((len(targets), vocab_size), eps / (vocab_size - 1))
    q[torch.arange(len(targets)), targets] = 1 - eps
    q[targets == pad_id] = 0.0
    return q


def _without_positions(model, src):
    return model.encoder(model.src_embed(src), padding_mask(src, model.pad_id))


def _without_positions_in_place(model, src):
    model.src_pos = nn.Identity()
    return model.encode(src)[0]


L10 = [
    Answer("check_visible_labels", _visible_labels, wrong=_visible_ignoring_the_shift, shortcut=_visible_transposed,
           says="transposed", also=((_visible_for_one_length, "expected shape"),)),
    Answer("check_exact_match", _exact_match, wrong=_exact_match_ignoring_eos, shortcut=_exact_match_padded_rows,
           says="tokens after <eos> do not count"),
    Answer("check_smoothed_targets", _smoothed, wrong=_smoothed_keeps_padding, shortcut=_smoothed_other_convention,
           says="other convention"),
    Answer("check_encode_without_positions", _without_positions, wrong=lambda model, src: model.encode(src)[0],
           shortcut=_without_positions_in_place, says="changed the model itself",
           args=c10._tiny_model()),
]

ANSWERS = {"l10_seq2seq": L10}
