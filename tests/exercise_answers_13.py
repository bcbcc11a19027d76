"""Answers to the exercises of lesson 13, for tests/test_exercises.py: every exercise with a correct answer, a wrong
one (a plausible mistake) and the shortcut the exercise forbids (see exercise_answer.py)."""

from __future__ import annotations

import references
import torch
import torch.nn.functional as F
from exercise_answer import Answer

from course_utils.pooling import masked_mean
from course_utils.wordpiece import WordPieceTokenizer


def _mean_pool(hidden, keep):
    m = keep.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)


def _cls_pool(hidden, keep):
    return hidden[torch.arange(len(hidden)), keep.int().argmax(1)]


def _one_way(a, b, scale):
    logits = scale * a @ b.T
    return (torch.logsumexp(logits, 1) - logits.diagonal()).mean()


def _symmetric(a, b, scale):
    return (_one_way(a, b, scale) + _one_way(b, a, scale)) / 2


def _symmetric_with_cross_entropy(a, b, scale):
    logits, target = scale * a @ b.T, torch.arange(len(a))
    return (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)) / 2


def _shortest_first(word, vocab):
    pieces, start = [], 0
    while start < len(word):
        for end in range(start + 1, len(word) + 1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
        else:
            return ["[UNK]"]
        pieces.append(piece)
        start = end
    return pieces


def _tokenizer_wordpiece(word, vocab):
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    return WordPieceTokenizer(specials + sorted(set(vocab) - set(specials))).wordpiece(word)


def _symmetric_by_log_softmax(a, b, scale):        # both directions through log_softmax, no cross_entropy
    logits = scale * a @ b.T
    return -(logits.log_softmax(1).diagonal().mean() + logits.log_softmax(0).diagonal().mean()) / 2


def _longest_by_shrinking(word, vocab):             # shrink the end until the piece is in the vocabulary
    out, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start and ("##" if start else "") + word[start:end] not in vocab:
            end -= 1
        if end == start:
            return ["[UNK]"]
        out.append(("##" if start else "") + word[start:end])
        start = end
    return out


L13 = [
    Answer("check_padded_mean", lambda m, pad, n, t: (n * m + (t - n) * pad) / t,
           wrong=lambda m, pad, n, t: (m + pad) / 2,                                     # the two just averaged
           shortcut=lambda m, pad, n, t: (t * m + n * pad) / (t + n), says="weights are swapped",
           also=((lambda m, pad, n, t: torch.cat([m.expand(n, -1), pad.expand(t - n, -1)]).mean(0)[None],
                  "expected shape"),)),
    Answer("check_cls_pool", _cls_pool, wrong=lambda hidden, keep: hidden[:, 0],            # right padding only
           shortcut=lambda hidden, keep: masked_mean(hidden, keep), says="compares the [CLS] vector with that mean"),
    Answer("check_symmetric_loss", _symmetric, wrong=_one_way,                             # one direction only
           shortcut=_symmetric_with_cross_entropy, says="the function this exercise asks you to write",
           right=(_symmetric_by_log_softmax,)),
    Answer("check_wordpiece", references.wordpiece, wrong=_shortest_first,
           shortcut=_tokenizer_wordpiece, says="You called wordpiece", right=(_longest_by_shrinking,)),
]

ANSWERS = {"l13_pretrained": L13}
