"""Answers to the exercises of lesson 12 (masked LM), for tests/test_exercises.py: every exercise with a correct
answer, a wrong one (a plausible mistake) and the shortcut the exercise forbids (see exercise_answer.py)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from exercise_answer import Answer
from torch import nn

from course_utils import mlm
from course_utils.data.samples import sample_text
from course_utils.tokenizers import CharTokenizer

# --- exercise 1: the shares of one uniform number or two draws ------------------------------------------------


def _shares(p_mask, p_random, two_draws):
    if two_draws:
        rest = 1 - p_mask
        return p_mask, rest * p_random, rest * (1 - p_random)
    return p_mask, p_random, 1 - p_mask - p_random


def _shares_as_tensor(p_mask, p_random, two_draws):                 # another style: one tensor of three values
    p = torch.tensor([p_mask, p_random], dtype=torch.float64)
    rest = 1 - p[0]
    random = rest * p[1] if two_draws else p[1]
    return torch.stack([p[0], random, 1 - p[0] - random])


def _shares_as_list_of_0d(p_mask, p_random, two_draws):             # a list of 0-d float32 tensors
    u_cut = torch.tensor(p_mask)
    random = (1 - u_cut) * p_random if two_draws else torch.tensor(p_random)
    return [u_cut, random, 1 - u_cut - random]


def _shares_all_selected(p_mask, p_random, two_draws):
    """The mistake: the second draw taken as p_random of all the selected tokens."""
    return p_mask, p_random, 1 - p_mask - p_random


def _shares_by_simulation(p_mask, p_random, two_draws):
    """What the exercise rules out: counting random draws instead of deriving (close, never exact)."""
    u1, u2 = torch.rand(2, 200_000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    masked = u1 < p_mask
    random = ~masked & (u2 < p_random) if two_draws else (u1 >= p_mask) & (u1 < p_mask + p_random)
    return masked.double().mean(), random.double().mean(), (~masked & ~random).double().mean()


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


# --- exercise 4: the context table at K = 4 ---------------------------------------------------------------------

# The bundled English prose (13,340 characters): 10,000 to count on, 48 windows of 64 to fill, 15 % hidden. With
# this seed the back-off tables of 0 + 0 ... 4 + 4 all score differently, so each mistake has its own number.
TABLE_TOK = CharTokenizer.from_text(sample_text())
V = TABLE_TOK.vocab_size
_IDS = torch.tensor(TABLE_TOK.encode(sample_text()))
TRAIN = _IDS[:10_000]
_WINDOWS = _IDS[10_000:10_000 + 48 * 64].view(48, 64)
_SELECTED = torch.rand(_WINDOWS.shape, generator=torch.Generator().manual_seed(2)) < 0.15
LABELS = torch.where(_SELECTED, _WINDOWS, -100)
INPUTS = _WINDOWS.masked_fill(_SELECTED, TABLE_TOK.mask_id)


def _lookup(table, keys):
    known, counts = table
    at = torch.searchsorted(known, keys).clamp(max=len(known) - 1)
    return torch.where(known[at] == keys, counts[at], 0)


def _context_table(ids, k):
    t = torch.arange(k, len(ids) - k)
    key = torch.zeros_like(t)
    for offset in [*range(-k, 0), *range(1, k + 1)]:
        key = key * V + ids[t + offset]
    return torch.unique(key * V + ids[t], return_counts=True)


def _table_accuracy(K, train_ids, inputs, labels, *, backoff=True):
    rows, cols = (labels != -100).nonzero(as_tuple=True)
    truth, T = labels[rows, cols], inputs.size(1)
    guess = torch.full_like(truth, -1)
    for k in (range(K, -1, -1) if backoff else [K]):
        table = _context_table(train_ids, k)
        todo = (guess < 0) & (cols >= k) & (cols + k < T)
        key = torch.zeros_like(cols)
        for offset in [*range(-k, 0), *range(1, k + 1)]:
            key = key * V + inputs[rows, (cols + offset).clamp(0, T - 1)]
        counts = _lookup(table, key[:, None] * V + torch.arange(V))
        use = todo & (counts.sum(1) > 0)
        guess[use] = counts[use].argmax(1)
    return (guess == truth).float().mean().item()


def _table_accuracy_by_dicts(K, train_ids, inputs, labels):
    """Another style: one Counter per k over (left, right) -> middle, in plain Python (ties: the smallest id)."""
    from collections import Counter, defaultdict

    train = train_ids.tolist()
    tables = []
    for k in range(K + 1):
        table = defaultdict(Counter)
        for t in range(k, len(train) - k):
            table[tuple(train[t - k:t]), tuple(train[t + 1:t + k + 1])][train[t]] += 1
        tables.append(table)
    right = total = 0
    for row, labelled in zip(inputs.tolist(), labels.tolist()):
        for c, label in enumerate(labelled):
            if label == -100:
                continue
            total += 1
            for k in range(K, -1, -1):
                if c >= k and c + k < len(row) and (counts := tables[k].get((tuple(row[c - k:c]),
                                                                              tuple(row[c + 1:c + k + 1])))):
                    right += min(counts, key=lambda i: (-counts[i], i)) == label
                    break
    return torch.tensor(right / total)


def _table_no_backoff(K, train_ids, inputs, labels):
    """The mistake: only the K + K context; a blank whose context never occurred stays unanswered."""
    return _table_accuracy(K, train_ids, inputs, labels, backoff=False)


def _table_on_the_notebooks_data(K, train_ids, inputs, labels):
    """What the exercise rules out: the notebook's own data (its globals) whatever the arguments say."""
    return _table_accuracy(K, TRAIN, INPUTS, LABELS)


L12 = [
    Answer("check_corruption_shares", _shares, wrong=_shares_all_selected, shortcut=_shares_by_simulation,
           says="looks like a simulation", right=(_shares_as_tensor, _shares_as_list_of_0d)),
    Answer("check_whole_word_masking", _whole_word, wrong=_any_letter_drawn, shortcut=_per_character,
           says="one decision per word"),
    Answer("check_accuracy_at", _accuracy_at, wrong=_every_position, shortcut=_masked_once_at_15,
           says="does not change with p", args=(_Copy(), WINDOWS, TOK)),
    Answer("check_table_accuracy", _table_accuracy, wrong=_table_no_backoff, shortcut=_table_on_the_notebooks_data,
           says="use the arguments", args=(TRAIN, INPUTS, LABELS), right=(_table_accuracy_by_dicts,)),
]

ANSWERS = {"l12_masked_lm": L12}
