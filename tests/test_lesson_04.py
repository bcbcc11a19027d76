"""Lesson 04 (multi-head attention): the hand-built heads, the heads widget and the exercise checks."""

import io
import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import course_utils as cu
from course_lab import i18n
from course_lab.lessons import l04_multihead as l04

pytestmark = pytest.mark.usefixtures("english")  # tests/conftest.py: messages in English


# --- reference solutions and wrong answers of the exercises (the full table: exercise_answers_04.py) ---------

def good_split(x, n_heads):
    b, t, d = x.shape
    return x.view(b, t, n_heads, d // n_heads).transpose(1, 2)


def good_merge(x):
    b, h, t, d_k = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d_k)


def good_grouped(x, w_q, w_k, w_v, n_heads):
    q = good_split(x @ w_q, n_heads)
    n_kv = w_k.shape[1] // q.shape[-1]
    k, v = (good_split(x @ w, n_kv).repeat_interleave(n_heads // n_kv, dim=1) for w in (w_k, w_v))
    out, _ = cu.attention_with_weights(q, k, v)
    return good_merge(out)


def grouped_tiled(x, w_q, w_k, w_v, n_heads):       # .repeat: head i reads K/V head i % n_kv
    q = good_split(x @ w_q, n_heads)
    n_kv = w_k.shape[1] // q.shape[-1]
    k, v = (good_split(x @ w, n_kv).repeat(1, n_heads // n_kv, 1, 1) for w in (w_k, w_v))
    out, _ = cu.attention_with_weights(q, k, v)
    return good_merge(out)


def grouped_scaled_by_d_model(x, w_q, w_k, w_v, n_heads):    # common mistake 1, in a grouped layer
    q = good_split(x @ w_q, n_heads)
    n_kv = w_k.shape[1] // q.shape[-1]
    k, v = (good_split(x @ w, n_kv).repeat_interleave(n_heads // n_kv, dim=1) for w in (w_k, w_v))
    out, _ = cu.attention_with_weights(q, k, v, scale=1 / math.sqrt(x.shape[-1]))
    return good_merge(out)


def grouped_by_private_gqa(x, w_q, w_k, w_v, n_heads):    # enable_gqa through torch's private route
    q = good_split(x @ w_q, n_heads)
    n_kv = w_k.shape[1] // q.shape[-1]
    out = torch._C._nn.scaled_dot_product_attention(q, good_split(x @ w_k, n_kv), good_split(x @ w_v, n_kv),
                                                    enable_gqa=True)
    return good_merge(out)


def averaged(x, mha):
    q, k, _ = F.linear(x, mha.in_proj_weight, mha.in_proj_bias).chunk(3, dim=-1)
    q, k = good_split(q, mha.num_heads), good_split(k, mha.num_heads)
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1).mean(dim=1)


def averaged_scaled_by_d_model(x, mha):
    q, k, _ = F.linear(x, mha.in_proj_weight, mha.in_proj_bias).chunk(3, dim=-1)
    q, k = good_split(q, mha.num_heads), good_split(k, mha.num_heads)
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1]), -1).mean(dim=1)


def averaged_scores(x, mha):                         # softmax of the mean score
    q, k, _ = F.linear(x, mha.in_proj_weight, mha.in_proj_bias).chunk(3, dim=-1)
    q, k = good_split(q, mha.num_heads), good_split(k, mha.num_heads)
    return torch.softmax((q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).mean(dim=1), -1)


def good_cross(x, memory, keep, mha):
    b_q, b_k, b_v = mha.qkv_proj.bias.split(mha.d_model)
    q = good_split(F.linear(x, mha.w_q, b_q), mha.n_heads)
    k = good_split(F.linear(memory, mha.w_k, b_k), mha.n_heads)
    v = good_split(F.linear(memory, mha.w_v, b_v), mha.n_heads)
    out, _ = cu.attention_with_weights(q, k, v, keep[:, None, None, :])
    return mha.out_proj(good_merge(out))


def cross_with_sdpa(x, memory, keep, mha):          # PyTorch's fused attention is allowed: only the module is not
    b_q, b_k, b_v = mha.qkv_proj.bias.split(mha.d_model)
    q = good_split(F.linear(x, mha.w_q, b_q), mha.n_heads)
    k = good_split(F.linear(memory, mha.w_k, b_k), mha.n_heads)
    v = good_split(F.linear(memory, mha.w_v, b_v), mha.n_heads)
    return mha.out_proj(good_merge(F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :])))


def cross_ignoring_mask(x, memory, keep, mha):
    return good_cross(x, memory, torch.ones_like(keep), mha)


@pytest.mark.parametrize("check, good, bad", [
    (l04.check_grouped_heads, good_grouped, grouped_tiled),
    (l04.check_grouped_heads, good_grouped, grouped_scaled_by_d_model),
    (l04.check_grouped_heads, good_grouped, grouped_by_private_gqa),
    (l04.check_averaged_weights, averaged, averaged_scores),
    (l04.check_averaged_weights, averaged, averaged_scaled_by_d_model),
    (l04.check_cross_attention, good_cross, cross_ignoring_mask),
    (l04.check_cross_attention, cross_with_sdpa, cross_ignoring_mask),
])
def test_checks_accept_solution_and_reject_mistake(check, good, bad, capsys):
    assert check(good) is True
    assert "✓" in capsys.readouterr().out
    assert check(bad) is False
    assert "✓" not in capsys.readouterr().out


def test_check_hints(capsys):
    l04.check_grouped_heads(grouped_tiled)
    assert "repeat_interleave" in capsys.readouterr().out
    l04.check_grouped_heads(grouped_scaled_by_d_model)
    assert "common mistake 1" in capsys.readouterr().out
    l04.check_grouped_heads(grouped_by_private_gqa)
    assert "enable_gqa" in capsys.readouterr().out
    l04.check_averaged_weights(averaged_scores)
    assert "Softmax each head first" in capsys.readouterr().out
    l04.check_averaged_weights(averaged_scaled_by_d_model)
    assert "common mistake 1" in capsys.readouterr().out
    l04.check_cross_attention(cross_ignoring_mask)
    assert "keep[:, None, None, :]" in capsys.readouterr().out


def test_watched_methods_are_restored():
    forward, split = cu.MultiHeadAttention.forward, cu.MultiHeadAttention.split_heads
    torch_forward = torch.nn.MultiheadAttention.forward
    l04.check_averaged_weights(lambda x, mha: mha(x, x, x)[1])
    assert cu.MultiHeadAttention.forward is forward and cu.MultiHeadAttention.split_heads is split
    assert torch.nn.MultiheadAttention.forward is torch_forward


def test_checks_leave_global_rng_alone():
    for check, answer in ((l04.check_grouped_heads, good_grouped), (l04.check_averaged_weights, averaged),
                          (l04.check_cross_attention, good_cross)):
        torch.manual_seed(123)
        expected = torch.rand(3)
        torch.manual_seed(123)
        check(answer)
        torch.testing.assert_close(torch.rand(3), expected)


# --- the widget's inputs (the notebook builds the sentence and the hand-made heads) -----------------------

def _widget_inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, 6, 16, generator=g)
    qkv = 3.0 * torch.randn(48, 16, generator=g) / 4
    return x, list("abcdef"), qkv


def test_head_entropies_and_divisors():
    uniform = torch.full((2, 3, 5, 4), 0.25)
    torch.testing.assert_close(l04.head_entropies(uniform), torch.full((3,), math.log(4)))
    assert l04.divisors(16) == [1, 2, 4, 8, 16]
    with pytest.raises(ValueError, match="divide"):
        l04.heads_widget_model(_widget_inputs()[2], 3)
    with pytest.raises(ValueError, match="packed"):
        l04.heads_widget_model(torch.zeros(16, 16), 4)


def test_plot_heads_layout():
    w = torch.softmax(torch.randn(1, 8, 6, 6), dim=-1)
    fig = l04.plot_heads(w, list("abcdef"))
    assert len(fig.axes) == 8 + 1                               # 8 heatmaps (2 rows of 4) + colorbar
    np.testing.assert_allclose(fig.axes[5].images[0].get_array(), w[0, 5].numpy(), rtol=1e-6)


# --- the widget -----------------------------------------------------------------------------------------

def test_heads_widget_slider():
    w = l04.build_heads_widget(*_widget_inputs())
    assert w.state["n_heads"] == 4 and w.state["d_k"] == 4
    assert w.state["weights"].shape == (4, 6, 6)
    params = w.state["n_params"]
    assert params == 4 * 16**2 + 4 * 16
    first_image = np.asarray(w.figure.axes[0].images[0].get_array()).copy()

    w.controls["n_heads"].value = 16
    assert w.state["n_heads"] == 16 and w.state["d_k"] == 1
    assert w.state["weights"].shape == (16, 6, 6) and w.state["entropy"].shape == (16,)
    assert w.state["n_params"] == params                        # h costs no parameters
    heatmaps = [ax for ax in w.figure.axes if ax.images and ax.get_title()]
    assert len(heatmaps) == 16
    assert not np.allclose(heatmaps[0].images[0].get_array(), first_image)
    np.testing.assert_allclose(w.state["weights"].sum(-1), np.ones((16, 6)), atol=1e-5)

    w.controls["n_heads"].value = 1
    assert w.state["d_k"] == 16 and w.state["weights"].shape == (1, 6, 6)
    assert w.renders == 3


def test_heads_widget_same_projections_for_every_h():
    x, tokens, qkv = _widget_inputs()
    a, b = l04.heads_widget_model(qkv, 2), l04.heads_widget_model(qkv, 8)
    torch.testing.assert_close(a.qkv_proj.weight, b.qkv_proj.weight)
    torch.testing.assert_close(a.qkv_proj.weight, qkv)
    with pytest.raises(ValueError, match="slider"):
        l04.build_heads_widget(x, tokens, qkv, n_heads=5)
    w = l04.build_heads_widget(x, tokens, qkv)
    qkv.zero_()                                                 # a later cell editing the weights
    w.controls["n_heads"].value = 2
    assert not np.allclose(w.state["weights"], 1 / 6)           # the widget kept its own copy


def test_zh_widget_figure_has_every_glyph():
    i18n.set_language("zh")
    w = l04.build_heads_widget(*_widget_inputs(), n_heads=2)
    assert "注意力头" in w.figure.texts[0].get_text()
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*Glyph.*")
        w.figure.savefig(io.BytesIO(), format="png", dpi=40)
