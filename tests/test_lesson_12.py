"""Lesson 12 (masked language modelling): figures, the fill-in-the-blank widget and the exercise checks."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest
import torch
from exercise_answers_12 import INPUTS, LABELS, TABLE_TOK, TRAIN, _shares, _table_accuracy  # reference answers

from course_lab import i18n
from course_lab.lessons import l12_masked_lm as l12
from course_utils import mlm
from course_utils.mlm import IGNORE_INDEX, mask_tokens, masked_logits
from course_utils.models import MaskedLM
from course_utils.tokenizers import CharTokenizer, WordTokenizer

matplotlib.use("Agg")

SENTENCES = ["To be, or not to be, that is the question", "What light through yonder window breaks?",
             "First Citizen:\nBefore we proceed", "My lord, I will go with you."]


pytestmark = pytest.mark.usefixtures("english")  # tests/conftest.py: messages in English


@pytest.fixture(scope="module")
def tiny():
    """A tiny *untrained* character MaskedLM: the widget's logic does not need a trained model."""
    tok = CharTokenizer.from_text("".join(SENTENCES))
    torch.manual_seed(0)
    model = MaskedLM(tok.vocab_size, d_model=16, n_heads=2, n_layers=1, dropout=0.0, max_len=64).eval()
    return model, tok


# --- masking figure and helpers -----------------------------------------------------------------------------

def test_masking_kinds_and_plot(tiny):
    _, tok = tiny
    ids = tok.encode_batch(SENTENCES)
    inputs, labels = mask_tokens(ids, tok.vocab_size, tok.mask_id, range(5), p=0.6,
                                 generator=torch.Generator().manual_seed(0))
    kinds = l12.masking_kinds(ids, inputs, labels)
    selected = (labels != IGNORE_INDEX).numpy()
    assert ((kinds > 0) == selected).all()
    assert (kinds[(inputs != ids).numpy()] == 2).all()        # changed: <mask> or random (plot splits them)
    fig = l12.plot_masking(ids, inputs, labels, tok, max_len=64)
    ax = fig.axes[0]
    data = ax.images[0].get_array()
    n_mask = int(((inputs == tok.mask_id) & (labels != IGNORE_INDEX)).sum())
    assert int((data == 1).sum()) == n_mask and n_mask > 0
    assert data.mask[(ids == tok.pad_id).numpy()].all()      # padding cells are blank
    texts = [t.get_text() for t in ax.texts]
    assert any(t.startswith("■\n(") for t in texts)          # the original token is shown under <mask>
    assert "' '" in texts                                      # spaces are visible
    assert len(fig.legends[0].get_texts()) == 4
    assert fig.get_size_inches()[0] < 0.5 * ids.shape[1] + 2      # narrow cells for characters


def test_plot_masking_words_get_wide_cells():
    tok = WordTokenizer.from_texts(["the film is a charming and funny story"])
    ids = tok.encode_batch(["the film is a charming and funny story"])
    inputs, labels = mask_tokens(ids, tok.vocab_size, tok.mask_id, range(5), p=0.5,
                                 generator=torch.Generator().manual_seed(0))
    fig = l12.plot_masking(ids, inputs, labels, tok)
    assert fig.get_size_inches()[0] > 0.8 * ids.shape[1]
    assert any("charming" in t.get_text() for t in fig.axes[0].texts)


def test_plot_scores():
    fig = l12.plot_scores({"unigram": 0.05, "unigram top-5": 0.2, "model": 0.15}, n_baselines=2)
    bars = fig.axes[0].patches
    np.testing.assert_allclose([p.get_width() for p in bars], [5.0, 20.0, 15.0])
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["unigram", "unigram top-5", "model"]
    assert bars[0].get_facecolor() == bars[1].get_facecolor() != bars[2].get_facecolor()


def test_word_span_and_tokens_of(tiny):
    _, tok = tiny
    chars = l12.tokens_of(tok, "To be, or not")
    assert l12.word_span(chars, 0) == [0, 1] and l12.word_span(chars, 4) == [3, 4]
    assert l12.word_span(chars, 5) == [5] and l12.word_span(chars, 12) == [10, 11, 12]   # ',' alone; 'not'
    with pytest.raises(ValueError, match="not in the vocabulary"):
        l12.tokens_of(tok, "Zebra")
    assert l12.show_token(" ") == "' '" and l12.show_token("\n") == "↵" and l12.show_token("a") == "a"


def test_fill_mask_never_proposes_special_tokens(tiny):
    model, tok = tiny
    chars = list(SENTENCES[0])
    model.train()
    guesses, probs = l12.fill_mask(model, tok, chars, 3, k=6)
    assert model.training                                       # the caller's mode is kept (no stray eval())
    assert len(guesses) == len(probs) == 6
    assert not set(guesses) & {"<pad>", "<unk>", "<bos>", "<eos>", "<mask>"}
    assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-6
    _, hidden_more = l12.fill_mask(model, tok, chars, 3, k=6, hide=[3, 4, 5])
    assert hidden_more != probs                                 # more context hidden: other guesses
    with pytest.raises(ValueError, match="outside the sequence"):
        l12.fill_mask(model, tok, chars, len(chars), k=3)


def test_masked_logits_is_the_model_at_selected_positions(tiny):
    model, tok = tiny
    ids = tok.encode_batch(SENTENCES)
    inputs, labels = mask_tokens(ids, tok.vocab_size, tok.mask_id, range(5), p=0.5,
                                 generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits, targets = masked_logits(model, inputs, labels)
        torch.testing.assert_close(logits, model(inputs)[labels != IGNORE_INDEX])
    assert torch.equal(targets, labels[labels != IGNORE_INDEX])


# --- widget -------------------------------------------------------------------------------------------------

def test_widget_position_whole_word_and_k(tiny):
    model, tok = tiny
    w = l12.build_fill_mask_widget(model, tok, SENTENCES, position=3, k=5)
    assert w.state["target"] == "b" and w.state["hidden"] == [3]
    assert w.state["masked_text"].startswith("To [?]e,")
    assert len(w.figure.axes[0].patches) == 5
    first = list(w.state["probs"])

    w.controls["position"].value = 11                          # 'o' of 'not': other guesses
    assert w.state["target"] == "o" and w.state["position"] == 11
    assert w.state["probs"] != first

    w.controls["whole_word"].value = True                      # hide 'not' entirely
    assert w.state["hidden"] == [10, 11, 12] and "■[?]■" in w.state["masked_text"]
    assert "3 masked" in w.figure.axes[0].get_title()

    w.controls["k"].value = 9
    assert len(w.state["guesses"]) == 9 and len(w.figure.axes[0].patches) == 9
    bars = [t.get_text() for t in w.figure.axes[0].get_yticklabels()]
    assert bars == [l12.show_token(g) for g in w.state["guesses"]]
    if w.state["rank"] is not None:                              # the hidden token is highlighted
        colors = [p.get_facecolor() for p in w.figure.axes[0].patches]
        assert colors[w.state["rank"] - 1] != colors[w.state["rank"] % 9]

    w.controls["sentence"].value = SENTENCES[2]                 # slider range follows the sentence
    assert w.controls["position"].max == len(SENTENCES[2]) - 1
    assert w.state["tokens"] == list(SENTENCES[2])


def test_widget_typed_sentence_and_errors(tiny):
    model, tok = tiny
    w = l12.build_fill_mask_widget(model, tok, SENTENCES, position=2)
    w.controls["sentence"].value = "a wise yonder"              # typed
    assert w.state["tokens"] == list("a wise yonder")
    renders = w.renders
    w.controls["sentence"].value = ""                            # nothing to mask: message, last figure kept
    assert w.error is not None and w.renders == renders
    w.controls["sentence"].value = "Zoo"                         # 'Z' is not in the vocabulary
    assert w.error is not None and "'Z'" in w.error
    w.controls["sentence"].value = "To"                          # 2 tokens: the slider shrinks to 0..1
    assert w.error is None and w.controls["position"].value == 1 and w.state["target"] == "o"
    w.controls["sentence"].value = "T"                           # 1 token, position 1 is outside
    assert w.error is not None and "1 tokens" in w.error
    w.set(sentence=SENTENCES[0], position=0)
    assert w.error is None and w.state["target"] == "T"


def test_widget_speaks_chinese(tiny):
    model, tok = tiny
    i18n.set_language("zh")
    w = l12.build_fill_mask_widget(model, tok, SENTENCES)
    assert "被遮住的是" in w.figure.axes[0].get_title()
    assert "句子" in w.controls["sentence"].description


# --- exercise checks ----------------------------------------------------------------------------------------


def _not_implemented(*args):
    raise NotImplementedError


def _swap(p_mask, p_random, two_draws):                       # (mask, unchanged, random)
    m, r, u = _shares(p_mask, p_random, two_draws)
    return m, u, r


@pytest.mark.parametrize("wrong, message", [
    (lambda pm, pr, two: (pm, pr, 1 - pm - pr), "p_random of *all* the selected tokens"),
    (lambda pm, pr, two: _shares(pm, pr, not two), "that is the two-draw recipe"),
    (_swap, "wrong order"),
    (lambda pm, pr, two: tuple(100 * x for x in _shares(pm, pr, two)), "percentages"),
    (lambda pm, pr, two: (pm, (1 - pm) * pr if two else pr, 1 - pm), "add up to"),
    (lambda pm, pr, two: tuple(round(x, 2) for x in _shares(pm, pr, two)), "simulation"),
    (lambda pm, pr, two: _shares(pm, pr, two)[:2], "got 2"),
    (lambda pm, pr, two: "80/2/18", "expected three numbers"),
    (lambda pm, pr, two: (pm, float("nan"), 0.0), "finite"),
])
def test_check_corruption_shares(capsys, wrong, message):
    assert l12.check_corruption_shares(_shares) is True
    out = capsys.readouterr().out
    assert "✓" in out and "(0.8, 0.02, 0.18)" in out
    assert l12.check_corruption_shares(wrong) is False
    out = capsys.readouterr().out
    assert "✗" in out and message in out, out


def test_check_corruption_shares_accepts_numbers_in_any_container(capsys):
    for right in (lambda pm, pr, two: list(_shares(pm, pr, two)),
                  lambda pm, pr, two: torch.tensor(_shares(pm, pr, two)),
                  lambda pm, pr, two: tuple(torch.tensor(x) for x in _shares(pm, pr, two)),
                  lambda pm, pr, two: np.array(_shares(pm, pr, two))):
        assert l12.check_corruption_shares(right) is True, capsys.readouterr().out
    capsys.readouterr()


def _whole_word(ids, p, space_id, special_ids, generator):
    in_word = ~torch.isin(ids, torch.tensor([space_id, *special_ids]))
    starts = in_word & ~torch.nn.functional.pad(in_word, (1, 0))[:, :-1]
    chosen = torch.rand(ids.size(0), ids.size(1) + 1, generator=generator) < p
    return in_word & chosen.gather(1, starts.cumsum(dim=1))


def _with_next_space(ids, p, space_id, special_ids, generator):
    chosen = _whole_word(ids, p, space_id, special_ids, generator)
    return chosen | (torch.nn.functional.pad(chosen, (1, 0))[:, :-1] & (ids == space_id))


@pytest.mark.parametrize("wrong, message", [
    (lambda ids, p, sp, s, g: (torch.rand(ids.shape, generator=g) < p) & (ids > sp), "one decision per word"),
    (_with_next_space, "space"),
    (lambda ids, p, sp, s, g: _whole_word(ids, p / 2, sp, s, g) if p < 1 else _whole_word(ids, p, sp, s, g),
     "expected p = 30 %"),
    (lambda ids, p, sp, s, g: _whole_word(ids, p, sp, s, g).long(), "torch.bool"),
])
def test_check_whole_word_masking(capsys, wrong, message):
    assert l12.check_whole_word_masking(_whole_word) is True
    assert "✓" in capsys.readouterr().out
    assert l12.check_whole_word_masking(wrong) is False
    assert message in capsys.readouterr().out


def test_check_accuracy_at_with_a_real_model(tiny, capsys):
    model, tok = tiny
    special = [tok.pad_id, tok.unk_id, tok.bos_id, tok.eos_id, tok.mask_id]
    windows = torch.randint(5, tok.vocab_size, (16, 12), generator=torch.Generator().manual_seed(3))

    def accuracy_at(model, windows, p, generator):
        inputs, labels = mlm.mask_tokens(windows, tok.vocab_size, tok.mask_id, special, p=p, generator=generator)
        keep = labels != -100
        with torch.no_grad():
            return (model(inputs).argmax(-1)[keep] == labels[keep]).float().mean()

    assert l12.check_accuracy_at(accuracy_at, model, windows, tok) is True
    assert "p = 0.5" in capsys.readouterr().out
    assert l12.check_accuracy_at(lambda m, w, p, g: 0.25, model, windows, tok) is False
    assert "does not change with p" in capsys.readouterr().out
    assert l12.check_accuracy_at(lambda m, w, p, g: "high", model, windows, tok) is False
    assert "Return a number" in capsys.readouterr().out


def test_check_table_accuracy_names_the_mistakes(capsys):
    assert l12.check_table_accuracy(_table_accuracy, TRAIN, INPUTS, LABELS) is True
    out = capsys.readouterr().out
    assert "✓" in out and "4 + 4" in out and "3 + 3" in out
    original = torch.where(LABELS != -100, LABELS, INPUTS)
    for wrong, message in (
            (lambda K, t, i, lb: _table_accuracy(3, t, i, lb), "the accuracy of the 3 + 3 table"),
            (lambda K, t, i, lb: _table_accuracy(0, t, i, lb), "ran upwards"),
            (lambda K, t, i, lb: _table_accuracy(K, t, i, lb, backoff=False), "must back off"),
            (lambda K, t, i, lb: _table_accuracy(K, t, torch.where(lb != -100, lb, i), lb), "original text"),
            (lambda K, t, i, lb: _table_accuracy(K, TRAIN, original, LABELS) if K < 4 else
             _table_accuracy(K, t, i, lb), "use the arguments"),
            (lambda K, t, i, lb: 0.5, "expected"),
            (lambda K, t, i, lb: "high", "Return the accuracy")):
        assert l12.check_table_accuracy(wrong, TRAIN, INPUTS, LABELS) is False
        out = capsys.readouterr().out
        assert "✗" in out and message in out, out


def test_check_table_accuracy_is_cheap_on_the_lessons_scale(capsys):
    """The notebook's call: a million training characters, 512 windows of 64, K = 4, in a few seconds (the lesson
    must stay fast); a stand-in stream of the same size with a small alphabet."""
    import time

    g = torch.Generator().manual_seed(0)
    train = TRAIN.repeat(100)                                                  # 1,000,000 characters
    windows = TRAIN.repeat(4)[:512 * 64].view(512, 64)
    selected = torch.rand(windows.shape, generator=g) < 0.15
    labels = torch.where(selected, windows, -100)
    start = time.perf_counter()
    inputs = windows.masked_fill(selected, TABLE_TOK.mask_id)
    assert l12.check_table_accuracy(_table_accuracy, train, inputs, labels) is True
    assert time.perf_counter() - start < 6.0
    capsys.readouterr()


def test_checks_speak_chinese(capsys):
    i18n.set_language("zh")
    assert l12.check_table_accuracy(_not_implemented, TRAIN, INPUTS, LABELS) is False
    assert "还没有作答" in capsys.readouterr().out
    assert l12.check_corruption_shares(_shares) is True
    assert "正确" in capsys.readouterr().out
    assert l12.check_corruption_shares(lambda pm, pr, two: (pm, pr, 1 - pm - pr)) is False
    assert "第二次只作用于" in capsys.readouterr().out
    assert l12.check_table_accuracy(_table_accuracy, TRAIN, INPUTS, LABELS) is True
    assert "只有" in capsys.readouterr().out
