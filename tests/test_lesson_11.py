"""Lesson 11 (decoder-only GPT): sampling helpers, the temperature / top-k widget, KV-cache timing, exercise checks."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest
import torch
from exercise_answers_11 import _min_p  # the exercises' reference answers

from course_lab import i18n
from course_lab.lessons import l11_gpt as l11
from course_lab.lessons.l11_gpt import checks as l11_checks  # the checks' private reference
from course_utils.models import GPT
from course_utils.tokenizers import CharTokenizer

matplotlib.use("Agg")

TEXT = "ROMEO:\nBut soft, what light through yonder window breaks?\nJULIET:\nAy me!\n"


pytestmark = pytest.mark.usefixtures("english")  # tests/conftest.py: messages in English


@pytest.fixture(scope="module")
def tiny():
    """A tiny *untrained* GPT: the widget's logic does not need a trained model."""
    tok = CharTokenizer.from_text(TEXT)
    torch.manual_seed(0)
    model = GPT(tok.vocab_size, max_len=48, n_layers=1, n_heads=2, d_model=16, dropout=0.0).eval()
    with torch.no_grad():  # sharper logits than the N(0, 0.02) init, so that temperature visibly matters
        model.lm_head.weight.mul_(40)
    return model, tok


# --- sampling helpers ---------------------------------------------------------------------------------------

def test_sampling_distribution_matches_temperature_and_top_k():
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0, 0.0]])
    torch.testing.assert_close(l11.sampling_distribution(logits, 1.0), torch.softmax(logits, -1))
    torch.testing.assert_close(l11.sampling_distribution(logits, 0.5), torch.softmax(logits / 0.5, -1))
    p = l11.sampling_distribution(logits, 1.0, top_k=2)
    assert (p[0, 2:] == 0).all() and p[0, :2].sum() == pytest.approx(1.0)
    assert torch.equal(l11.sampling_distribution(logits, 0.0), torch.tensor([[1.0, 0, 0, 0, 0]]))
    assert torch.equal(l11.sampling_distribution(logits, 1.0, top_k=0), l11.sampling_distribution(logits, 1.0))
    with pytest.raises(ValueError, match="temperature"):
        l11.sampling_distribution(logits, -1.0)


def test_entropy_bits():
    assert l11.entropy_bits(torch.tensor([1.0, 0.0])) == 0.0
    assert l11.entropy_bits(torch.full((8,), 1 / 8)) == pytest.approx(3.0)


def test_encode_prompt_rejects_unknown_characters(tiny):
    _, tok = tiny
    assert l11.encode_prompt(tok, "ROMEO").shape == (1, 5)
    with pytest.raises(ValueError, match="not in the vocabulary"):
        l11.encode_prompt(tok, "Zé")
    with pytest.raises(ValueError, match="at least one character"):
        l11.encode_prompt(tok, "")


def test_show_token_is_shared_with_lesson_12():
    from course_lab import viz
    from course_lab.lessons import l12_masked_lm as l12

    assert viz.show_token("\n") == "↵" and viz.show_token(" ") == "' '" and viz.show_token("a") == "a"
    assert l12.show_token is viz.show_token


def test_top_p_filter_reference():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    kept = lambda p: torch.isfinite(l11.top_p_filter(logits, p)).sum().item()  # noqa: E731
    assert [kept(p) for p in (0.1, 0.5, 0.51, 0.8, 0.81, 0.96, 1.0)] == [1, 1, 2, 2, 3, 4, 4]
    shuffled = logits[:, [2, 0, 3, 1]]                      # the order of the vocabulary does not matter
    assert torch.isfinite(l11.top_p_filter(shuffled, 0.8)).tolist() == [[False, True, False, True]]
    with pytest.raises(ValueError, match="top_p"):
        l11.top_p_filter(logits, 0.0)


# --- widget -------------------------------------------------------------------------------------------------

def test_widget_temperature_top_k_and_seed(tiny):
    model, tok = tiny
    w = l11.build_sampling_widget(model, tok, prompt="ROMEO:\n", n_new=12)
    raw = w.state["raw_probs"]
    np.testing.assert_allclose(w.state["probs"], raw, rtol=1e-5)            # τ = 1, no top-k
    assert w.state["n_candidates"] == tok.vocab_size
    heights = [p.get_height() for p in w.figure.axes[0].patches]
    np.testing.assert_allclose(heights, np.sort(raw)[::-1][:20], rtol=1e-5)
    first_sample = w.state["continuation"]

    w.controls["temperature"].value = 0.5                                    # sharper: lower entropy
    assert w.state["entropy_bits"] < l11.entropy_bits(torch.tensor(raw))
    w.controls["temperature"].value = 2.0                                    # flatter: higher entropy
    assert w.state["entropy_bits"] > l11.entropy_bits(torch.tensor(raw))

    w.controls["top_k"].value = 3
    assert w.state["n_candidates"] == 3 and w.state["top_k"] == 3
    assert sum(p.get_height() > 0 for p in w.figure.axes[0].patches) == 3
    w.set(temperature=0.0, seed=5)                                           # greedy: one candidate
    assert w.state["n_candidates"] == 1
    greedy = w.state["continuation"]
    w.controls["seed"].value = 6                                             # greedy ignores the seed
    assert w.state["continuation"] == greedy

    w.set(temperature=1.0, top_k=0, seed=0)
    assert w.state["continuation"] == first_sample                           # fixed seed: reproducible
    w.controls["seed"].value = 1
    assert w.state["continuation"] != first_sample


def test_widget_prompt_changes_distribution_and_reports_errors(tiny):
    model, tok = tiny
    w = l11.build_sampling_widget(model, tok, prompt="ROMEO:\n", n_new=5)
    before = w.state["raw_probs"].copy()
    w.controls["prompt"].value = "JULIET: Ay"
    assert not np.allclose(w.state["raw_probs"], before)
    renders = w.renders
    w.controls["prompt"].value = "Zzz é"                                     # 'é' is not in the vocabulary
    assert w.error is not None and "é" in w.error and w.renders == renders   # last good figure stays
    w.controls["prompt"].value = "ROMEO"
    assert w.error is None


def test_widget_long_prompt_is_cropped_to_the_window(tiny):
    model, tok = tiny
    w = l11.build_sampling_widget(model, tok, prompt=TEXT * 2, n_new=5)    # longer than block_size=48
    assert w.error is None and len(w.state["continuation"]) >= 1


def test_widget_speaks_chinese(tiny):
    model, tok = tiny
    i18n.set_language("zh")
    w = l11.build_sampling_widget(model, tok, n_new=5)
    assert "下一个字符" in w.figure.axes[0].get_title()
    assert "温度" in w.controls["temperature"].description


# --- KV cache timing ----------------------------------------------------------------------------------------

def test_step_times_same_tokens_and_plot(tiny):
    model, tok = tiny
    ids = torch.tensor([tok.encode("ROMEO:")])
    out_c, t_c = l11.step_times(model, ids, 12, use_cache=True)
    out_n, t_n = l11.step_times(model, ids, 12, use_cache=False)
    assert torch.equal(out_c, out_n) and out_c.shape == (1, 18)
    assert len(t_c) == len(t_n) == 12 and all(t > 0 for t in t_c + t_n)
    fig = l11.plot_step_times(t_c, t_n)
    ax = fig.axes[0]
    assert len(ax.lines) == 4
    np.testing.assert_allclose(ax.lines[0].get_ydata(), 1000 * np.array(t_n))
    with pytest.raises(ValueError, match="window"):
        l11.step_times(model, ids, 100, use_cache=True)


# --- exercise checks ----------------------------------------------------------------------------------------


def _not_implemented(*args):
    raise NotImplementedError


def _top_k(logits, k):
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


@pytest.mark.parametrize("check, good, bad, message", [
    (l11.check_gpt_block_params, lambda d, f: 4 * d * d + 2 * d * f + 9 * d + f, lambda d, f: 12 * d * d,
     "rule of thumb"),
    (l11.check_gpt_block_params, lambda d, f: 4 * d * d + 2 * d * f + 9 * d + f,
     lambda d, f: 4 * d * d + 2 * d * f + 5 * d + f, "LayerNorms"),
    (l11.check_min_p, _min_p, lambda z, p: z.masked_fill(torch.softmax(z, -1) < p, float("-inf")), "scales the"),
    (l11.check_min_p, _min_p, lambda z, p: torch.softmax(_min_p(z, p), -1), "not probabilities"),
    (l11.check_min_p, _min_p, lambda z, p: l11_checks._min_p_filter(z, p), "You called _min_p_filter"),
    (l11.check_top_p_range, lambda v, k: (float(v.sort(descending=True).values[:k - 1].sum()),
                                          float(v.sort(descending=True).values[:k].sum())),
     lambda v, k: (0.0, float(v.sort(descending=True).values[:k].sum())), "expected"),
    (l11.check_top_p_range, lambda v, k: (float(v.sort(descending=True).values[:k - 1].sum()),
                                          float(v.sort(descending=True).values[:k].sum())),
     lambda v, k: "0.3 to 0.6", "Return a pair"),
    (l11.check_gpt_block_params, lambda d, f: 4 * d * d + 2 * d * f + 9 * d + f,
     lambda d, f: sum(p.numel() for p in GPT(9, n_layers=1, n_heads=4, d_model=d, d_ff=f).blocks.layers[0]
                      .parameters()), "built module"),
])
def test_checks_accept_the_solution_and_reject_mistakes(capsys, check, good, bad, message):
    assert check(good) is True
    assert "✓" in capsys.readouterr().out
    assert check(bad) is False
    assert message in capsys.readouterr().out


def test_checks_speak_chinese(capsys):
    i18n.set_language("zh")
    assert l11.check_min_p(_not_implemented) is False
    assert "还没有作答" in capsys.readouterr().out
    assert l11.check_min_p(_min_p) is True
    assert "正确" in capsys.readouterr().out


# --- appendix: looking inside training (plots only) -----------------------------------------------------------

def test_layer_histograms_draw_one_line_per_layer_and_close_nothing():
    import matplotlib.pyplot as plt

    torch.manual_seed(0)
    stream = {"embeddings": 0.2 * torch.randn(4, 8, 16), "block 1": 3 * torch.randn(4, 8, 16)}
    gelu_in = {"block 1": torch.randn(4, 8, 64) - 1}
    mine = plt.figure()  # a figure of the caller's: the helper must leave it open
    try:
        before = plt.get_fignums()
        fig = l11.plot_layer_histograms([("residual stream", stream), ({"en": "GELU input", "zh": "GELU 的输入"},
                                                                       gelu_in)], lang="zh")
        assert isinstance(fig, matplotlib.figure.Figure)
        assert plt.get_fignums() == before  # closes nothing, keeps nothing in pyplot's registry
        left, right = fig.axes
        assert [line.get_label().split(":")[0] for line in left.get_lines()] == ["embeddings", "block 1"]
        assert len(right.get_lines()) == 1 and right.get_title() == "GELU 的输入"
        assert "标准差 3." in left.get_lines()[1].get_label()  # the std in the legend, in the figure's language
        assert left.get_yscale() == "log"
        fig.canvas.draw()
    finally:
        plt.close(mine)


def test_lr_range_plot_marks_both_rates_and_closes_nothing():
    import matplotlib.pyplot as plt

    lrs = np.logspace(-5, 0, 20)
    losses = list(np.linspace(4.2, 3.0, 15))  # stopped early: fewer losses than rates
    mine = plt.figure()
    try:
        before = plt.get_fignums()
        fig = l11.plot_lr_range(lrs, losses, losses, best_lr=0.05, lesson_lr=0.01)
        assert plt.get_fignums() == before
        ax = fig.axes[0]
        assert ax.get_xscale() == "log"
        raw, _, best, lesson = ax.get_lines()
        assert len(raw.get_xdata()) == 15
        assert best.get_xdata()[0] == 0.05 and lesson.get_xdata()[0] == 0.01
        assert "0.01" in lesson.get_label()
        fig.canvas.draw()
    finally:
        plt.close(mine)
