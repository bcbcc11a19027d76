"""Lesson 10 (seq2seq number translation): data helpers, decoding helpers, figures, the widget and the checks.

Nothing is trained here: the widget and the helpers run on a tiny untrained Transformer.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from course_lab import i18n, viz
from course_lab.lessons import l10_seq2seq as l10
from course_utils.decoding import beam_search
from course_utils.models import Transformer


@pytest.fixture(scope="module")
def toks():
    return l10.make_tokenizers()


@pytest.fixture(scope="module")
def tiny(toks):
    src_tok, tgt_tok = toks
    torch.manual_seed(0)
    return Transformer(src_tok.vocab_size, tgt_tok.vocab_size, d_model=16, n_heads=2, n_encoder_layers=1,
                       n_decoder_layers=2, d_ff=32, dropout=0.0, max_len=32).eval()


@pytest.fixture(scope="module")
def widget(tiny, toks):
    w = l10.build_translation_widget(tiny, *toks, number=312, max_len=8)
    yield w
    w.close()


# --- data

def test_missing_packages_say_how_to_install(monkeypatch):
    import importlib
    import sys

    monkeypatch.setitem(sys.modules, "num2words", None)       # None in sys.modules: "import num2words" fails
    for name in [n for n in sys.modules if n.startswith("course_lab.lessons.l10_seq2seq")]:  # with its submodules
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(ImportError, match="pip install num2words cn2an"):
        importlib.import_module("course_lab.lessons.l10_seq2seq")
    # monkeypatch puts the original module back afterwards, so the other tests keep using it


def test_texts():
    assert l10.source_text(312) == "three hundred and twelve"
    assert l10.target_text(312) == "三百一十二"
    assert l10.target_text(20305) == "二万零三百零五"
    assert l10.source_text(45678) == "forty-five thousand, six hundred and seventy-eight"
    with pytest.raises(ValueError, match="between 0"):
        l10.source_text(-1)
    with pytest.raises(TypeError, match="whole number"):
        l10.target_text(3.5)
    assert [l10.number_length(n) for n in (0, 9, 10, 99_999)] == [1, 1, 2, 5]


def test_split_is_by_number():
    train, test = l10.split_numbers(n_test_per_length=50, n_train_per_length=300, seed=1)
    assert not set(train) & set(test)
    assert len(test) == 150 and {l10.number_length(n) for n in test} == {3, 4, 5}
    assert set(range(100)) <= set(train)                       # one- and two-digit numbers are never held out
    lengths = [l10.number_length(n) for n in train]
    assert [lengths.count(k) for k in range(1, 6)] == [10, 90, 300, 300, 300]
    assert l10.split_numbers(50, 300, seed=1) == (train, test)     # deterministic
    with pytest.raises(ValueError, match="leaves none"):
        l10.split_numbers(n_test_per_length=900)
    with pytest.raises(ValueError, match="test_lengths"):
        l10.split_numbers(test_lengths=(6,))


def test_tokenizers_cover_every_number(toks):
    src_tok, tgt_tok = toks
    assert src_tok.vocab_size == 5 + 33 and tgt_tok.vocab_size == 5 + 14
    assert src_tok.tokenize("forty-five thousand, six") == ["forty", "-", "five", "thousand", ",", "six"]
    for n in list(range(0, 100_000, 997)) + [100_000, 123_456, 999_999]:
        assert src_tok.unk_id not in src_tok.encode(l10.source_text(n))
        assert tgt_tok.unk_id not in tgt_tok.encode(l10.target_text(n))
        assert tgt_tok.decode(tgt_tok.encode(l10.target_text(n), add_bos=True, add_eos=True)) == l10.target_text(n)
    assert set(l10.DIGIT_WORDS["四"]) == {"four", "forty", "fourteen"}


# --- decoding helpers on an untrained model

def test_translate_and_cross_attention(tiny, toks):
    src_tok, tgt_tok = toks
    greedy = l10.translate(tiny, [7, 312, 45678], src_tok, tgt_tok, "greedy", max_new_tokens=6)
    beam = l10.translate(tiny, [7, 312, 45678], src_tok, tgt_tok, "beam", beam_size=3, max_new_tokens=6)
    assert len(greedy) == len(beam) == 3 and all(isinstance(t, str) and len(t) <= 6 for t in greedy + beam)
    with pytest.raises(ValueError, match="greedy"):
        l10.translate(tiny, [1], src_tok, tgt_tok, "sample")
    attn = l10.cross_attention(tiny, 45678, src_tok, tgt_tok, output="四万")
    assert attn["source"] == src_tok.tokenize(l10.source_text(45678))
    assert attn["target"] == ["四", "万", "<eos>"]
    w = attn["weights"]
    assert tuple(w.shape) == (2, 2, 3, len(attn["source"]))
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 2, 3))
    pairs = l10.alignment(attn, layer=1, head=0)
    assert [p[0] for p in pairs] == attn["target"]
    assert [p[1] for p in pairs] == [attn["source"][j] for j in w[1, 0].argmax(-1).tolist()]
    assert not tiny.training                                   # the helpers leave the mode as they found it


def test_beam_search_does_not_stop_at_early_eos():
    """Regression test for the stopping rule fixed in course_utils.decoding while writing lesson 10.

    A label-smoothed model gives <eos> a little probability everywhere, so short hypotheses finish early. The
    search must go on until no live beam can beat the k-th best finished one, and return the long, likely one.
    """
    class Smoothed(torch.nn.Module):                           # 0 pad, 1 bos, 2 eos, 3..5 tokens
        pad_id = 0

        def encode(self, src):
            return torch.zeros(src.size(0), 1, 1), torch.ones(src.size(0), 1, 1, 1, dtype=torch.bool)

        def decode(self, ys, memory, mask, cache=None):
            n, t = ys.shape
            probs = torch.full((n, t, 6), 0.02)
            probs[..., 2] = 0.03                               # <eos> is always the best of the wrong tokens
            probs[..., 3] = 0.91 if t < 7 else 0.02
            if t >= 7:
                probs[..., 2] = 0.91
            return probs.log()

    src = torch.ones(1, 2, dtype=torch.long)
    out = beam_search(Smoothed(), src, beam_size=4, max_new_tokens=10, bos_id=1, eos_id=2, use_cache=False)
    assert out[0].tolist() == [3] * 6 + [2]


# --- figures

def test_plot_lr_schedule():
    lrs = [min((s + 1) / 10, ((s + 1) / 10) ** -0.5) for s in range(40)]
    fig = l10.plot_lr_schedule(lrs, 10, lang="en")
    ax = fig.axes[0]
    np.testing.assert_allclose(ax.lines[0].get_ydata(), lrs)
    assert ax.lines[1].get_xdata()[0] == 10                    # the warm-up marker
    assert ax.get_xlabel() == "Step"


def test_plot_cross_attention_means(tiny, toks):
    attn = l10.cross_attention(tiny, 312, *toks, output="三百")
    fig = l10.plot_cross_attention(attn, lang="en")
    np.testing.assert_allclose(fig.axes[0].images[0].get_array(), attn["weights"].mean((0, 1)).numpy(), rtol=1e-6)
    fig = l10.plot_cross_attention(attn, layer=1, head=1, lang="zh")
    np.testing.assert_allclose(fig.axes[0].images[0].get_array(), attn["weights"][1, 1].numpy(), rtol=1e-6)
    assert fig.axes[0].get_xlabel() == "源语言单词（键）"


# --- widget

def test_widget_default_state(widget):
    s = widget.set(number=312, text="", layer=1, head=-1)
    assert s["number"] == 312 and s["source"] == "three hundred and twelve" and s["reference"] == "三百一十二"
    assert s["source_tokens"] == ["three", "hundred", "and", "twelve"]
    assert s["target_tokens"][-1] == "<eos>" and s["target_tokens"][:-1] == list(s["greedy"])
    assert s["greedy_correct"] == (s["greedy"] == "三百一十二") and s["in_range"]
    np.testing.assert_allclose(widget.figure.axes[0].images[0].get_array(), s["weights"], rtol=1e-6)
    assert s["weights"].shape == (len(s["target_tokens"]), 4)


def test_widget_slider_changes_the_number(widget):
    widget.set(number=312, text="", layer=1, head=-1)
    renders = widget.renders
    widget.controls["number"].value = 45678
    assert widget.renders == renders + 1
    s = widget.state
    assert s["number"] == 45678 and s["reference"] == "四万五千六百七十八"
    assert s["weights"].shape[1] == 11                         # forty - five thousand , six hundred and seventy - eight
    assert "45,678" in widget.figure.get_suptitle()


def test_widget_text_box_wins_and_validates(widget):
    widget.set(number=5, text="", layer=1, head=-1)
    widget.controls["text"].value = "123,456"
    s = widget.state
    assert s["number"] == 123_456 and not s["in_range"] and s["reference"] == "十二万三千四百五十六"
    widget.controls["text"].value = "twelve"                   # not a number: explained, the last state stays
    assert widget.error and "twelve" in widget.error and widget.state["number"] == 123_456
    widget.controls["text"].value = ""                         # empty: back to the slider
    assert widget.error is None and widget.state["number"] == 5


def test_widget_layer_and_head(widget, tiny, toks):
    s = widget.set(number=312, text="", layer=-1, head=-1)
    attn = l10.cross_attention(tiny, 312, *toks, output=s["greedy"])
    np.testing.assert_allclose(s["weights"], attn["weights"].mean((0, 1)).numpy(), rtol=1e-6)
    widget.controls["layer"].value = 0
    widget.controls["head"].value = 1
    np.testing.assert_allclose(widget.state["weights"], attn["weights"][0, 1].numpy(), rtol=1e-6)
    np.testing.assert_allclose(widget.figure.axes[0].images[0].get_array(), widget.state["weights"], rtol=1e-6)


def test_widget_speaks_chinese(tiny, toks):
    i18n.set_language("zh")
    try:
        w = l10.build_translation_widget(tiny, *toks, number=20305, max_len=8)
        assert w.controls["number"].description == "数字"
        assert "参考答案 二万零三百零五" in w.figure.get_suptitle()
        w.controls["text"].value = "abc"
        assert "请输入一个整数" in w.error
        if viz.find_cjk_font() is not None:                    # every character of the figure has a glyph
            with warnings.catch_warnings():
                warnings.filterwarnings("error", message=".*Glyph")
                w.figure.canvas.draw()
        w.close()
    finally:
        i18n.set_language(None)


# --- exercise checks

def _raises(*args):
    raise NotImplementedError


def test_check_shift_right(capsys):
    assert l10.check_shift_right(l10.shift_right) is True
    assert l10.check_shift_right(_raises) is False
    assert "Not attempted" in capsys.readouterr().out
    keeps_eos = lambda t, b, e, p: torch.cat([torch.full_like(t[:, :1], b), t[:, :-1]], 1)  # noqa: E731
    assert l10.check_shift_right(keeps_eos) is False
    assert "<eos>" in capsys.readouterr().out
    assert l10.check_shift_right(lambda t, b, e, p: t) is False
    assert l10.check_shift_right(lambda t, b, e, p: 1 / 0) is False
    assert "ZeroDivisionError" in capsys.readouterr().out
    assert l10.check_shift_right(lambda t, b, e, p: t[:, 1:]) is False


def test_check_exact_match(capsys):
    assert l10.check_exact_match(l10.exact_match) is True
    assert l10.check_exact_match(_raises) is False
    assert "raise NotImplementedError" in capsys.readouterr().out

    def no_cut(pred, ref, eos_id, pad_id):              # compares the rows without cutting at <eos>
        rows = [[t for t in p if t != pad_id] == [t for t in r if t != pad_id]
                for p, r in zip(pred.tolist(), ref.tolist())]
        return sum(rows) / len(rows)

    assert l10.check_exact_match(no_cut) is False
    assert "first <eos>" in capsys.readouterr().out
    assert l10.check_exact_match(lambda p, r, e, pad: (p == r).all(1).float().mean()) is False  # widths differ
    assert l10.check_exact_match(lambda p, r, e, pad: "yes") is False
    torch.testing.assert_close(l10.exact_match(torch.tensor([[5, 3, 7]]), torch.tensor([[5, 3]]), 3, 0), 1.0)


def test_check_smoothed_targets(capsys):
    assert l10.check_smoothed_targets(l10.smoothed_targets) is True
    assert l10.check_smoothed_targets(_raises) is False
    assert "Not attempted" in capsys.readouterr().out

    def keeps_padding(t, v, eps, pad):
        q = torch.full((len(t), v), eps / v)
        q[torch.arange(len(t)), t] += 1 - eps
        return q

    assert l10.check_smoothed_targets(keeps_padding) is False
    assert "padding rows" in capsys.readouterr().out

    def other_convention(t, v, eps, pad):
        q = torch.full((len(t), v), eps / (v - 1))
        q[torch.arange(len(t)), t] = 1 - eps
        q[t == pad] = 0
        return q

    assert l10.check_smoothed_targets(other_convention) is False
    assert "other convention" in capsys.readouterr().out
    assert l10.check_smoothed_targets(lambda t, v, eps, pad: torch.zeros(len(t), v)) is False
    assert l10.check_smoothed_targets(lambda t, v, eps, pad: torch.zeros(v)) is False
    assert "shape" in capsys.readouterr().out
    assert l10.check_smoothed_targets(lambda t, v, eps, pad: None.shape) is False     # a crash is a verdict
    assert "AttributeError" in capsys.readouterr().out
    q = l10.smoothed_targets(torch.tensor([5, 0]), 19, 0.1, 0)
    assert math.isclose(float(q[0, 5]), 0.9 + 0.1 / 19, rel_tol=1e-6) and float(q[1].sum()) == 0.0


def test_check_encode_without_positions_runs_the_anagram_experiment(capsys):
    model, src_tok, tgt_tok = l10.checks._tiny_model()
    assert l10.check_encode_without_positions(l10.encode_without_positions, model, src_tok, tgt_tok) is True
    out = capsys.readouterr().out
    assert "one translation for both" in out          # 1,200 and 2,100: same memory rows, same output
    assert l10.check_encode_without_positions(lambda m, s: m.encode(s)[0]) is False
    assert "positional encoding" in capsys.readouterr().out
