"""Answers to the exercises of lesson 12 (masked LM), for tests/test_exercises.py: every exercise with a correct
answer, a wrong one (a plausible mistake) and the shortcut the exercise forbids (see exercise_answer.py)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from exercise_answer import Answer
from torch import nn

from course_utils import mlm
from course_utils.tokenizers import CharTokenizer

# --- exercise 1: BERT's 80/10/10 ----------------------------------------------------------------------------------


def _bert_mask(ids, mask_id, vocab_size, special_ids, p, generator):
    special = torch.tensor(list(special_ids))
    selected = (torch.rand(ids.shape, generator=generator) < p) & ~torch.isin(ids, special)
    u = torch.rand(ids.shape, generator=generator)
    ordinary = torch.tensor([i for i in range(vocab_size) if i not in special_ids])
    random_ids = ordinary[torch.randint(len(ordinary), ids.shape, generator=generator)]
    inputs = torch.where(selected & (u < 0.8), mask_id, ids)
    inputs = torch.where(selected & (u >= 0.8) & (u < 0.9), random_ids, inputs)
    return inputs, torch.where(selected, ids, -100)


def _everything_masked(ids, mask_id, vocab_size, special_ids, p, generator):
    """A common mistake: every selected token becomes <mask> (no 10 % random, no 10 % unchanged)."""
    selected = (torch.rand(ids.shape, generator=generator) < p) & ~torch.isin(ids, torch.tensor(list(special_ids)))
    return torch.where(selected, mask_id, ids), torch.where(selected, ids, -100)


def _library_mask(ids, mask_id, vocab_size, special_ids, p, generator):
    return mlm.mask_tokens(ids, vocab_size, mask_id, list(special_ids), p=p, generator=generator)


# --- exercise 2: whole-word masking --------------------------------------------------------------------------------


def _in_word(ids, space_id, special_ids):
    return ~torch.isin(ids, torch.tensor([space_id, *special_ids]))


def _whole_word(ids, p, space_id, special_ids, generator):
    in_word = _in_word(ids, space_id, special_ids)                              # (B, T)
    starts = in_word & ~F.pad(in_word, (1, 0))[:, :-1]                          # first letter of each word
    word = starts.cumsum(dim=1)                                                  # (B, T) word number in its row
    chosen = torch.rand(ids.size(0), ids.size(1) + 1, generator=generator) < p   # one draw per word
    return in_word & chosen.gather(1, word)


def _any_letter_drawn(ids, p, space_id, special_ids, generator):
    """A common mistake: one draw per letter, then the whole word if any of its letters was drawn."""
    in_word = _in_word(ids, space_id, special_ids)
    starts = in_word & ~F.pad(in_word, (1, 0))[:, :-1]
    word = starts.cumsum(dim=1)
    drawn = (torch.rand(ids.shape, generator=generator) < p) & in_word
    hit = torch.zeros(ids.size(0), ids.size(1) + 1, dtype=torch.long).scatter_add(1, word, drawn.long()) > 0
    return in_word & hit.gather(1, word)


def _per_character(ids, p, space_id, special_ids, generator):
    return (torch.rand(ids.shape, generator=generator) < p) & _in_word(ids, space_id, special_ids)


# --- exercise 3: accuracy at a chosen mask rate ----------------------------------------------------------------------

TOK = CharTokenizer.from_text("to be, or not to be: that is the question")
SPECIAL = [TOK.pad_id, TOK.unk_id, TOK.bos_id, TOK.eos_id, TOK.mask_id]
WINDOWS = torch.randint(5, TOK.vocab_size, (32, 24), generator=torch.Generator().manual_seed(0))


class _Copy(nn.Module):
    """A "model" that predicts the token it sees: right at the unchanged 10 % of the selected positions."""

    def forward(self, ids):
        return 5.0 * F.one_hot(ids, TOK.vocab_size).float()                    # (B, T, V)


def _accuracy_at(model, windows, p, generator):
    inputs, labels = mlm.mask_tokens(windows, TOK.vocab_size, TOK.mask_id, SPECIAL, p=p, generator=generator)
    with torch.no_grad():
        guess = model(inputs).argmax(-1)
    keep = labels != -100
    return (guess[keep] == labels[keep]).float().mean()


def _every_position(model, windows, p, generator):
    inputs, _ = mlm.mask_tokens(windows, TOK.vocab_size, TOK.mask_id, SPECIAL, p=p, generator=generator)
    with torch.no_grad():
        return (model(inputs).argmax(-1) == windows).float().mean()


def _masked_once_at_15(model, windows, p, generator):
    return _accuracy_at(model, windows, 0.15, torch.Generator().manual_seed(1234))


# --- exercise 4: the unigram baseline ------------------------------------------------------------------------------


def _unigram(train_ids, labels, special_ids):
    counts = torch.bincount(train_ids.flatten()).float()
    counts[[i for i in special_ids if i < len(counts)]] = -1
    keep = labels != -100
    return (labels[keep] == counts.argmax()).float().mean()


L12 = [
    Answer("check_bert_masking", _bert_mask, wrong=_everything_masked, shortcut=_library_mask,
           says="You called mlm.mask_tokens"),
    Answer("check_whole_word_masking", _whole_word, wrong=_any_letter_drawn, shortcut=_per_character,
           says="one decision per word"),
    Answer("check_accuracy_at", _accuracy_at, wrong=_every_position, shortcut=_masked_once_at_15,
           says="does not change with p", args=(_Copy(), WINDOWS, TOK)),
    Answer("check_unigram_baseline", _unigram,
           wrong=lambda t, lb, s: (lb[lb != -100] == torch.bincount(t).argmax()).float().mean(),  # a special id
           shortcut=lambda t, lb, s: mlm.unigram_baseline(t, lb, int(t.max()) + 1, list(s))[1],
           says="You called mlm.unigram_baseline"),
]

ANSWERS = {"l12_masked_lm": L12}
