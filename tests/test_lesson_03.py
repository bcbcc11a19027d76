"""Lesson 03 (scaled dot-product attention): the sentence, the √d_k demos, the widget, the exercise checks."""

import io
import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_lab import i18n
from course_lab.lessons import l03_attention as l03

pytestmark = pytest.mark.usefixtures("english")  # tests/conftest.py: messages in English


# --- reference solutions and wrong answers of the exercises (the full table: exercise_answers_03.py) ---------

def good_jacobian(a):
    return torch.diag_embed(a) - a.unsqueeze(-1) * a.unsqueeze(-2)


def transposed_outer_jacobian(a):                   # a_j(δ_ij − a_i): the same here, the Jacobian is symmetric
    return (torch.diag_embed(a) - a.unsqueeze(-2) * a.unsqueeze(-1)).transpose(-2, -1)


def looping_jacobian(a):                            # allowed: slower, but no autograd
    rows = a.reshape(-1, a.shape[-1])
    return torch.stack([torch.diag(r) - torch.outer(r, r) for r in rows]).reshape(*a.shape, a.shape[-1])


def good_masked(q, k, v, mask):
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v, w


def ignores_mask(q, k, v, mask):
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return w @ v, w


def inverted_mask(q, k, v, mask):
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(mask, -1e9)
    w = torch.softmax(scores, dim=-1)
    return w @ v, w


def sdpa_masked(q, k, v, mask):
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return out, good_masked(q, k, v, mask)[1]


def test_jacobian_check_accepts_equivalent_forms_and_matches_autograd(capsys):
    assert l03.check_softmax_jacobian(transposed_outer_jacobian) is True
    out = capsys.readouterr().out
    assert "one-hot row 0" in out
    assert l03.check_softmax_jacobian(looping_jacobian) is False      # right values, but the prompt says no loop
    assert "loops over the rows" in capsys.readouterr().out
    s = torch.randn(7, dtype=torch.float64)
    want = torch.autograd.functional.jacobian(lambda x: torch.softmax(x, -1), s)
    torch.testing.assert_close(good_jacobian(torch.softmax(s, -1)), want)


def test_jacobian_hint_for_the_diagonal_only(capsys):
    assert l03.check_softmax_jacobian(lambda a: torch.diag_embed(a * (1 - a))) is False
    assert "sigmoid" in capsys.readouterr().out


def test_unit_scale_check_measures_and_hints(capsys):
    assert l03.check_unit_scale(lambda d, vq, vk: (d * vq * vk) ** -0.5) is True
    out = capsys.readouterr().out
    measured = float(out.split("Var = ")[1].rstrip(".\n"))
    assert abs(measured - 1) < 0.05
    assert l03.check_unit_scale(lambda d, vq, vk: 1 / (math.sqrt(d) * vq * vk)) is False
    assert "standard deviation" in capsys.readouterr().out
    assert l03.check_unit_scale(lambda d, vq, vk: 0.125) is False        # a hard-coded number: right only once
    assert "✗" in capsys.readouterr().out


def softmax_then_zero(q, k, v, mask):            # the planted bug, left as it is
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1).masked_fill(~mask, 0.0)
    return w @ v, w


def renormalised(q, k, v, mask):                 # another correct fix: zero after the softmax, then renormalise
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) * mask
    w = w / w.sum(-1, keepdim=True)
    return w @ v, w


def test_masked_attention_fix_hints_and_library_calls(capsys):
    assert l03.check_masked_attention_fix(good_masked) is True
    assert l03.check_masked_attention_fix(renormalised) is True
    out = capsys.readouterr().out
    assert "[0.23, 0.09, 0.05, 0.00] (sum 0.37)" in out and "[0.63, 0.23, 0.14, 0.00]" in out, out
    assert l03.check_masked_attention_fix(softmax_then_zero) is False
    assert "planted bug" in capsys.readouterr().out
    for _ in range(40):  # each call draws new sizes and inputs: the hint must not depend on the draw
        assert l03.check_masked_attention_fix(ignores_mask) is False
        assert "-inf" in capsys.readouterr().out
        assert l03.check_masked_attention_fix(inverted_mask) is False
        assert "may attend" in capsys.readouterr().out
    assert l03.check_masked_attention_fix(sdpa_masked) is False
    assert "scaled_dot_product_attention" in capsys.readouterr().out
    assert F.scaled_dot_product_attention.__name__ == "scaled_dot_product_attention"   # restored after the check


def test_check_messages_follow_language(capsys):
    i18n.set_language("zh")
    l03.check_unit_scale(lambda d, vq, vk: 1 / math.sqrt(d))
    assert "方差为 1" in capsys.readouterr().out


# --- demo data ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("lang", ["en", "zh"])
def test_sentence_words(lang):
    tokens, types, word_part = l03.sentence_words(lang)
    assert len(tokens) == len(types) == word_part.shape[0] == 6 and word_part.shape[1] == 4
    assert set(types) <= set(l03.ROLES) and set(l03.SEEKS.values()) <= set(types)
    for i, j in ((a, b) for a in range(6) for b in range(6)):     # same word, same features
        assert torch.equal(word_part[i], word_part[j]) == (tokens[i] == tokens[j])
    assert "上" not in tokens                                    # a localiser (方位词), not a preposition


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
    tokens, _, _ = l03.sentence_words()
    from course_lab import viz
    figs.append(viz.plot_attention(torch.softmax(torch.randn(6, 6), -1), tokens, tokens))
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*Glyph.*")
        for fig in figs:
            fig.savefig(io.BytesIO(), format="png", dpi=40)
