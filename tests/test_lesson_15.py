"""Lesson 15 (byte-pair encoding): the lesson module's helpers, widgets, measured result file and exercise checks."""

import importlib.util
import sys
from pathlib import Path

import pytest

from course_lab import i18n
from course_lab.lessons import l15_bpe as l15
from course_utils.bpe import BPETokenizer

PAIRS = l15.DEMO * 4


@pytest.fixture(scope="module")
def toks():
    en = BPETokenizer.from_texts([p[0] for p in PAIRS], 300, min_frequency=1)
    zh = BPETokenizer.from_texts([p[1] for p in PAIRS], 300, min_frequency=1)
    both = BPETokenizer.from_texts([s for p in PAIRS for s in p], 320, min_frequency=1)
    return {"en": en, "zh": zh, "both": both}


def test_readable_shows_text_and_cut_bytes():
    assert l15.readable("你".encode()) == "你" and l15.readable(b" the") == " the"
    assert l15.readable("你".encode()[:2]) == "<e4><bd>"
    with pytest.raises(TypeError, match="token_bytes"):
        l15.readable("text")


def test_token_costs_takes_tokenizers_and_functions(toks):
    assert l15.token_costs(["ab", "abcd"], list) == 3
    assert l15.token_costs(["你好"], lambda s: s.encode()) == 6
    assert l15.token_costs([p[1] for p in PAIRS], toks["zh"]) < l15.token_costs([p[1] for p in PAIRS], toks["en"])
    with pytest.raises(ValueError, match="at least one"):
        l15.token_costs([], list)


def test_merge_widget_counts_fall_as_merges_are_applied(toks):
    sentences = [s for p in l15.DEMO for s in p]
    w = l15.build_merge_widget(toks["both"], sentences)
    assert w.state["tokens"] == [len(s.encode()) for s in sentences] and w.state["last_merge"] == "–"
    w.controls["n_merges"].value = len(toks["both"].merges)
    assert all(n < len(s.encode()) for n, s in zip(w.state["tokens"], sentences))
    assert w.state["last_merge"] != "–"
    with pytest.raises(TypeError, match="BPETokenizer"):
        l15.build_merge_widget(list)


def test_cost_widget_each_language_gains_from_its_own_merges(toks):
    w = l15.build_cost_widget(toks, PAIRS, vocab_size=261)
    at_bytes = w.state["ratio"]
    assert at_bytes == pytest.approx(sum(len(p[1].encode()) for p in PAIRS) / sum(len(p[0].encode()) for p in PAIRS))
    w.controls["trained_on"].value = "en"
    w.controls["vocab_size"].value = 300
    assert w.state["ratio"] > at_bytes  # English merges shorten English only
    w.controls["trained_on"].value = "zh"
    assert w.state["ratio"] < at_bytes


def test_the_measured_result_records_how_it_was_made():
    result = l15.load_bpe_vs_char()
    assert result["command"].startswith("python ") and "train_bpe_vs_char.py" in result["command"]
    assert result["torch"] and result["seeds"] and "equal_compute" in result
    kinds = {r["tokenizer"] for r in result["runs"]}
    assert kinds == {"char", "bpe"}
    for run in result["runs"]:
        assert run["seed"] in result["seeds"] and run["train_seconds"] > 0
        # bits per char = nats per token / ln 2 x tokens per char: the two columns agree
        assert 0 < run["val_bits_per_char"] < 8 and run["val_nats_per_token"] > 0
    bpe = [r for r in result["runs"] if r["tokenizer"] == "bpe"]
    char = [r for r in result["runs"] if r["tokenizer"] == "char"]
    # per token the BPE model always looks worse: that is why it is not comparable
    assert min(r["val_nats_per_token"] for r in bpe) > max(r["val_nats_per_token"] for r in char)
    assert all(r["train_tokens_seen"] == char[0]["train_tokens_seen"] for r in bpe)  # equal tokens per step x steps


def _answers():
    here = Path(__file__).parent
    spec = importlib.util.spec_from_file_location("exercise_answers_15", here / "exercise_answers_15.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(here))
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_other_right_answers_pass(lang, capsys):
    i18n.set_language(lang)
    answers = _answers()
    for check, fns in answers.EXTRA_RIGHT.items():
        for fn in fns:
            assert getattr(l15, check)(fn) is True, capsys.readouterr().out
    assert "✓" in capsys.readouterr().out
    i18n.set_language(None)


def test_hf_bpe_is_the_reference_trainer():
    pytest.importorskip("tokenizers")
    from course_utils.bpe import chunk_counts

    texts = [s for p in PAIRS for s in p]
    chunks = [c for c, n in chunk_counts(texts).items() for _ in range(n)]
    hf, merges = l15.hf_bpe(chunks, 300)
    assert merges == BPETokenizer.from_texts(texts, 300, ties="chars").merges
    hf2, _ = l15.hf_bpe(texts, 300, gpt2_split=True)
    assert hf2.decode(hf2.encode(texts[1]).ids) == texts[1]
