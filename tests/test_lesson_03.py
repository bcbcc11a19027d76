"""Lesson 03 (scaled dot-product attention): the sentence, the √d_k demos, the widget, the exercise checks."""

import io
import math
import warnings

import numpy as np
import pytest
import torch

from course_lab import i18n
from course_lab.lessons import l03_attention as l03

pytestmark = pytest.mark.usefixtures("english")  # tests/conftest.py: messages in English


# --- reference solutions and wrong answers of the exercises -------------------------------------------

def good_weights(q, k):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)


def unscaled_weights(q, k):
    return torch.softmax(q @ k.transpose(-2, -1), dim=-1)


def wrong_axis_weights(q, k):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-2)


def good_entropy(w):
    return -torch.special.xlogy(w, w).sum(-1)


def nan_entropy(w):
    return -(w * w.log()).sum(-1)


def good_masked(q, k, v, mask):
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v, w


def ignores_mask(q, k, v, mask):
    w = good_weights(q, k)
    return w @ v, w


def not_started(*args):
    raise NotImplementedError


def crashes(*args):
    raise RuntimeError("boom")


@pytest.mark.parametrize("check, good, bad", [
    (l03.check_attention_weights, good_weights, unscaled_weights),
    (l03.check_attention_weights, good_weights, wrong_axis_weights),
    (l03.check_row_entropy, good_entropy, nan_entropy),
    (l03.check_masked_attention, good_masked, ignores_mask),
])
def test_checks_accept_solution_and_reject_mistake(check, good, bad, capsys):
    assert check(good) is True
    assert "✓" in capsys.readouterr().out
    assert check(bad) is False
    assert "✓" not in capsys.readouterr().out


@pytest.mark.parametrize("check", [l03.check_attention_weights, l03.check_row_entropy,
                                   l03.check_masked_attention])
def test_checks_never_raise(check, capsys):
    assert check(not_started) is False
    assert "Not attempted yet" in capsys.readouterr().out
    assert check(crashes) is False
    assert "RuntimeError" in capsys.readouterr().out
    assert check(lambda *a: "not a tensor") is False


def test_check_hints(capsys):
    l03.check_attention_weights(unscaled_weights)
    assert "√d_k" in capsys.readouterr().out
    l03.check_row_entropy(nan_entropy)
    assert "NaN" in capsys.readouterr().out
    l03.check_masked_attention(ignores_mask)
    assert "-inf" in capsys.readouterr().out


def test_check_messages_follow_language(capsys):
    i18n.set_language("zh")
    l03.check_row_entropy(not_started)
    assert "还没有作答" in capsys.readouterr().out


# --- demo functions -----------------------------------------------------------------------------------

@pytest.mark.parametrize("lang", ["en", "zh"])
def test_tiny_sentence_queries_find_what_they_seek(lang):
    tokens, x, w_q, w_k = l03.tiny_sentence(lang)
    assert len(tokens) == x.shape[0] == 6 and x.shape[1] == w_q.shape[0] == w_k.shape[0] == 8
    weights = torch.softmax((x @ w_q) @ (x @ w_k).T / 2.0, dim=-1)
    roles = [role for _, role in l03.SENTENCES[lang]]
    for i, role in enumerate(roles):
        best = int(weights[i].argmax())
        assert roles[best] == l03.SEEKS[role], (tokens[i], tokens[best])
    torch.testing.assert_close(weights.sum(-1), torch.ones(6))


def test_random_attention_saturates_only_without_scaling():
    small, big = l03.random_attention(4, scale=False), l03.random_attention(1024, scale=False)
    assert big["max_weight"] > 0.8 > small["max_weight"]
    assert big["entropy"] < 0.5 * small["entropy"]
    assert abs(big["score_std"] / math.sqrt(1024) - 1) < 0.3       # scores' std ≈ √d_k
    scaled = [l03.random_attention(d, scale=True)["entropy"] for d in (16, 256, 1024)]
    assert max(scaled) - min(scaled) < 0.6
    assert l03.row_entropy(torch.full((3, 8), 1 / 8)).sub(math.log(8)).abs().max() < 1e-6
    with pytest.raises(ValueError, match="d_k"):
        l03.random_attention(0, scale=True)


def test_variance_plot_data():
    fig = l03.plot_dot_product_variance([4, 16], [4.1, 15.8])
    line, points = fig.axes[0].lines
    np.testing.assert_allclose(line.get_ydata(), [4, 16])
    np.testing.assert_allclose(points.get_ydata(), [4.1, 15.8])


def test_saturation_plot_data():
    scaled = {"max_weight": [0.2, 0.2], "entropy": [2.3, 2.3], "grad_norm": [0.3, 0.3]}
    unscaled = {"max_weight": [0.4, 0.9], "entropy": [1.7, 0.1], "grad_norm": [0.3, 0.04]}
    fig = l03.plot_saturation([4, 1024], scaled, unscaled, t_keys=16)
    assert len(fig.axes) == 3
    np.testing.assert_allclose(fig.axes[1].lines[1].get_ydata(), [1.7, 0.1])
    np.testing.assert_allclose(fig.axes[1].lines[2].get_ydata(), [math.log(16)] * 2)


# --- the widget ---------------------------------------------------------------------------------------

def _heatmap(w):
    return np.asarray(w.figure.axes[1].images[0].get_array())


def test_widget_d_k_and_scale_controls():
    w = l03.build_scaling_widget(d_k=4, scale=False)
    first = w.state
    assert first["d_k"] == 4 and first["weights"].shape == (8, 8)
    image_small = _heatmap(w)

    w.controls["d_k"].value = 1024
    assert w.state["d_k"] == 1024
    assert w.state["entropy"] < first["entropy"] and w.state["max_weight"] > first["max_weight"]
    assert not np.allclose(_heatmap(w), image_small)
    np.testing.assert_allclose(_heatmap(w), w.state["weights"])
    saturated = w.state

    w.controls["scale"].value = True
    assert w.state["scale"] is True
    assert w.state["entropy"] > saturated["entropy"] + 0.5
    assert not np.allclose(_heatmap(w), saturated["weights"])
    np.testing.assert_allclose(w.state["weights"].sum(-1), np.ones(8), atol=1e-6)
    assert w.figure.axes[0].patches[0].get_height() == pytest.approx(float(w.state["weights"][0, 0]))
    assert w.renders == 3


def test_widget_rejects_unknown_d_k():
    with pytest.raises(ValueError, match="slider"):
        l03.build_scaling_widget(d_k=3)


def test_zh_figures_have_every_glyph():
    i18n.set_language("zh")
    w = l03.build_scaling_widget(d_k=1024, scale=True)
    scaled = {"max_weight": [0.2], "entropy": [2.3], "grad_norm": [0.3]}
    figs = [w.figure, l03.plot_dot_product_variance([4], [4.0]),
            l03.plot_saturation([4], scaled, scaled, t_keys=16)]
    tokens, x, w_q, w_k = l03.tiny_sentence()
    from course_lab import viz
    figs.append(viz.plot_attention(torch.softmax((x @ w_q) @ (x @ w_k).T, -1), tokens, tokens))
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*Glyph.*")
        for fig in figs:
            fig.savefig(io.BytesIO(), format="png", dpi=40)
