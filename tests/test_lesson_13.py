"""Lesson 13 (real pretrained weights): WordPiece traces, reference files, probes, plots, widget, exercise checks.

Everything runs on a tiny random BERT with a toy vocabulary (fast, no download); the real MiniLM is tested in
tests/test_pretrained.py.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import references
import torch
import torch.nn.functional as F

from course_lab import i18n
from course_lab.lessons import l13_pretrained as l13
from course_utils.pretrained import BertConfig, SentenceEncoder, key_mapping, load_bert_weights
from course_utils.wordpiece import WordPieceTokenizer

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "man", "is", "playing", "guitar", ".", "the", "movie",
         "was", "wonderful", "i", "enjoyed", "this", "film", "play", "##ing", "un", "una", "##ffa", "##ble", "这",
         "部", "电", "影", "很", "精", "彩", "。", "loved", "did", "not", "love"]


pytestmark = pytest.mark.usefixtures("english")  # tests/conftest.py: messages in English


@pytest.fixture(scope="module")
def tiny():
    tok = WordPieceTokenizer(VOCAB)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64)
    return SentenceEncoder(config, tok).eval(), tok


# --- WordPiece trace, reference, mapping table, PyTorch layer ------------------------------------------------

def test_wordpiece_steps(tiny, capsys):
    _, tok = tiny
    steps = l13.print_wordpiece_steps("unaffable", tok)
    assert [s["piece"] for s in steps] == ["una", "##ffa", "##ble"] == tok.wordpiece("unaffable")
    assert [s["start"] for s in steps] == [0, 3, 6]
    # 'unaffable' ... 'unaf' fail, 'una' matches; then '##ffable' ... '##ffab' fail, '##ffa'; then '##ble' at once.
    assert [s["tried"] for s in steps] == [len("unaffable") - 2, 4, 1]
    assert "    0                 7  una" in capsys.readouterr().out
    assert l13.print_wordpiece_steps("unx", tok)[-1]["piece"] == "[UNK]"
    assert "[UNK]" in capsys.readouterr().out
    for lang in ("en", "zh"):                        # the header stands above its numbers (display width)
        l13.print_wordpiece_steps("unaffable", tok, lang=lang)
        head, *rows = capsys.readouterr().out.splitlines()
        ends = {i18n.width(line[:line.rindex("  ")]) for line in [head, *rows]}
        assert ends == {5 + 2 + 16}, (lang, head, rows)
    l13.print_tokens(tok, ["a man"])
    assert "[CLS] a man [SEP]" in capsys.readouterr().out
    assert references.wordpiece("playing", {"play", "##ing", "p"}) == ["play", "##ing"]


def test_reference_files():
    ref = l13.load_reference()
    assert len(ref["sentences"]) == len(ref["input_ids"]) == ref["embeddings"].shape[0] >= 50
    assert ref["embeddings"].shape[1] == 384 and ref["embeddings"].dtype == torch.float32
    torch.testing.assert_close(ref["embeddings"].norm(dim=-1), torch.ones(len(ref["sentences"])))
    with pytest.raises(FileNotFoundError, match="make_minilm_fixtures"):
        l13.load_reference("/nonexistent")


def test_mapping_table_and_torch_layer(tiny):
    model, _ = tiny
    fresh = SentenceEncoder(model.bert.config)
    g = torch.Generator().manual_seed(1)
    ckpt = {}                                                    # a random checkpoint with BERT's names
    for names, ours in key_mapping(1, "bert."):
        shape = fresh.get_parameter(ours).shape
        for n in names:
            ckpt[n] = torch.randn(shape[0] // len(names), *shape[1:], generator=g) * 0.1
    report = load_bert_weights(fresh, ckpt)
    table = l13.mapping_table(report, layer=0, lang="zh")
    assert "encoder.layer.0.attention.self.{query,key,value}.weight" in table
    assert "bert.encoder.layers.0.self_attn.qkv_proj.weight" in table and "堆叠" in table
    assert "layers.1." not in table
    for lang in ("en", "zh"):                        # the columns line up: Chinese characters take two columns
        lines = l13.mapping_table(report, layer=0, lang=lang).splitlines()
        starts = [[i18n.width(line[:m.end()]) for m in re.finditer(r"  +", line)][:3] for line in lines]
        assert len(lines) > 3 and all(s == starts[0] for s in starts), (lang, lines)
    layer = fresh.bert.encoder.layers[0].eval()
    theirs = l13.copy_layer_to_torch(layer)
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        torch.testing.assert_close(layer(x), theirs(x), atol=1e-5, rtol=1e-5)


# --- plots ----------------------------------------------------------------------------------------------------

def test_plot_similarity():
    sim = torch.tensor([[1.0, 0.2, 0.3], [0.2, 1.0, -0.1], [0.3, -0.1, 1.0]])
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*Glyph.*")
        fig = l13.plot_similarity(sim, ["one", "two", "这部电影很精彩。"], lang="zh")
        fig.canvas.draw()
    np.testing.assert_allclose(fig.axes[0].images[0].get_array(), sim.numpy())
    assert "余弦相似度" in fig.axes[0].get_title()
    with pytest.raises(ValueError, match="one per row"):
        l13.plot_similarity(sim, ["a", "b"])


def test_probe_helpers_and_plot(tiny):
    _, tok = tiny
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (200,), generator=g)
    x = torch.randn(200, 8, generator=g) + 2.0 * F.one_hot(y, 8).float()      # separable along two axes
    predict = references.fit_logistic_regression(x[:150], y[:150])
    assert (predict(x[150:]) == y[150:]).float().mean() > 0.9
    accs = l13.probe_curve(x[:150], y[:150], x[150:], y[150:], [4, 150], references.fit_logistic_regression)
    assert len(accs) == 2 and accs[1] > 0.9
    b_train, b_dev = l13.bag_of_words(tok, ["a man is playing", "the film"], ["a film", "not seen words"])
    assert b_train.shape == (2, 6) and b_dev.shape == (2, 6)
    assert b_train.sum().item() == 6 and b_dev.sum().item() == 2            # unseen tokens get no column
    fig = l13.plot_probe_curves([16, 64], {"MiniLM": [0.6, 0.7], "bag of words": [0.5, 0.55]}, 0.51)
    assert [tuple(line.get_ydata()) for line in fig.axes[0].lines[:2]] == [(0.6, 0.7), (0.5, 0.55)]


def test_load_sst2_subsets_falls_back_to_the_sample(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                                   # the loader's "tiny sample" warning
        train, dev, described = l13.load_sst2_subsets(5, seed=1, download=False)
    assert len(train) == 5 and len(dev) > 0 and "sample" in described[0]
    assert all(isinstance(s, str) and y in (0, 1) for s, y in train + dev)


# --- widget ---------------------------------------------------------------------------------------------------

def test_compare_sentences_matches_the_encoder(tiny):
    model, tok = tiny
    res = l13.compare_sentences(model, tok, "a man is playing guitar.", "the movie was wonderful.")
    e = model.encode(["a man is playing guitar.", "the movie was wonderful."])
    assert res["similarity"] == pytest.approx(float(e[0] @ e[1]), abs=1e-5)
    assert res["tokens_a"][0] == "[CLS]" and res["tokens_b"][-1] == "[SEP]"
    assert res["token_similarity"].shape == (len(res["tokens_a"]), len(res["tokens_b"]))


def test_similarity_widget_callbacks(tiny):
    model, tok = tiny
    w = l13.build_similarity_widget(model, tok)
    assert w.renders == 1 and w.error is None
    first = w.state["similarity"]
    w.controls["b"].value = "a man is playing guitar."
    assert w.renders == 2 and w.state["similarity"] != first
    assert w.state["tokens_b"] == ["[CLS]", "a", "man", "is", "playing", "guitar", ".", "[SEP]"]
    np.testing.assert_allclose(w.figure.axes[0].images[0].get_array(), w.state["token_similarity"])
    w.controls["a"].value = "a man is playing guitar."
    assert w.state["similarity"] == pytest.approx(1.0, abs=1e-5)
    w.controls["a"].value = "这部电影很精彩。"                               # Chinese tokens: one per character
    assert w.state["tokens_a"][1:4] == ["这", "部", "电"] and w.error is None
    kept = dict(w.state)
    w.controls["b"].value = "   "
    assert w.error is not None and "both boxes" in w.error and w.state["similarity"] == kept["similarity"]
    w.controls["b"].value = "a " * 50
    assert "at most 40 tokens" in w.error
    w.set(a="i loved this movie.", b="i did not love this movie.")
    assert w.error is None and "not" in w.state["tokens_b"]
    w.close()


# --- exercise checks ------------------------------------------------------------------------------------------
# (tests/exercise_answers_13.py holds, for every exercise, a correct answer, a mistake and the forbidden shortcut;
# tests/test_exercises.py runs them. Here: the other hints, and a right-padded batch where [CLS] is position 0.)

def good_wordpiece(word, vocab):
    return references.wordpiece(word, vocab)


def partial_unk(word, vocab):
    out = good_wordpiece(word, vocab)
    return ["p", "[UNK]"] if word == "plx" else out


def no_hashes(word, vocab):
    return [p.removeprefix("##") for p in good_wordpiece(word, vocab)]


def last_real_token(hidden, keep):
    return hidden[torch.arange(len(hidden)), keep.shape[1] - 1 - keep.flip(1).int().argmax(1)]


def cls_pool(hidden, keep):
    return hidden[torch.arange(len(hidden)), keep.int().argmax(1)]


def symmetric_loss_naive_exp(a, b, scale):
    """The formula with exp/log instead of logsumexp: right for these scales (unit vectors, scale ≤ 20)."""
    logits = scale * a @ b.T
    rows = (logits.exp().sum(1).log() - logits.diagonal()).mean()
    cols = (logits.exp().sum(0).log() - logits.diagonal()).mean()
    return (rows + cols) / 2


@pytest.mark.parametrize("check, bad, hint", [
    (l13.check_wordpiece, partial_unk, "whole word"),
    (l13.check_wordpiece, no_hashes, "'##' prefix"),
    (l13.check_cls_pool, last_real_token, "LAST real token"),
    (l13.check_symmetric_loss, lambda a, b, scale: references_one_way(b, a, scale), "b → a direction"),
])
def test_checks_give_the_hint_of_each_mistake(check, bad, hint, capsys):
    assert check(bad) is False
    out = capsys.readouterr().out
    assert "✓" not in out and hint in out, out


def references_one_way(a, b, scale):
    logits = scale * a @ b.T
    return (torch.logsumexp(logits, 1) - logits.diagonal()).mean()


def test_symmetric_loss_check_accepts_any_correct_formula(capsys):
    assert l13.check_symmetric_loss(symmetric_loss_naive_exp) is True
    assert "CLIP" in capsys.readouterr().out


def test_cls_pool_is_position_zero_for_the_course_tokenizer(tiny):
    model, tok = tiny
    ids, keep = tok.encode_batch_with_mask(["a man is playing guitar.", "the film"])   # right padding
    with torch.no_grad():
        hidden = model.bert(ids, keep)
    assert torch.equal(cls_pool(hidden, keep), hidden[:, 0])
    model.pooling = "cls"
    try:
        torch.testing.assert_close(F.normalize(cls_pool(hidden, keep), dim=-1), model.pool(hidden, keep))
    finally:
        model.pooling = "mean"
    assert l13.check_cls_pool(cls_pool) is True


def test_padded_mean_accepts_the_formula_and_a_padded_tensor(capsys):
    formula = lambda m, pad, n, t: (n * m + (t - n) * pad) / t                          # noqa: E731
    by_tensor = lambda m, pad, n, t: torch.cat([m.expand(n, -1), pad.expand(t - n, -1)]).mean(0)  # noqa: E731
    assert l13.check_padded_mean(formula) is True and l13.check_padded_mean(by_tensor) is True
    assert "the padding, not the words" in capsys.readouterr().out
    assert l13.check_padded_mean(lambda m, pad, n, t: m) is False                       # the masked mean itself
    assert "n_real" in capsys.readouterr().out


def test_fine_tuning_figures_in_the_text_are_the_measured_ones():
    import json
    from pathlib import Path

    run = json.loads((l13.RESULTS_DIR / "minilm_sst2.json").read_text())
    text = (Path(__file__).resolve().parents[1] / "notebooks/source/13_pretrained_minilm.md").read_text()
    steps = run["settings"]["steps"]
    for figure in (f"{run['train_seconds']} s", f"{run['train_seconds'] / steps:.2f} s per step",
                   f"{run['dev_curve']['199']:.1%}", f"**{run['dev_after']:.1%}**", f"{steps} steps of "
                   f"{run['settings']['batch_size']}"):
        assert figure in text, figure
    assert f"{steps * run['settings']['batch_size']:,}" in text                       # phrases seen


@pytest.mark.parametrize("check", [l13.check_padded_mean, l13.check_cls_pool, l13.check_symmetric_loss,
                                   l13.check_wordpiece])
def test_checks_never_raise(check, capsys):
    assert check(lambda *args: (_ for _ in ()).throw(NotImplementedError())) is False
    assert "Not attempted yet" in capsys.readouterr().out
    i18n.set_language("zh")
    assert check(lambda *args: (_ for _ in ()).throw(RuntimeError("boom"))) is False
    assert "RuntimeError" in capsys.readouterr().out
