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


def bad_split(x, n_heads):                          # the classic mistake: no transpose
    b, t, d = x.shape
    return x.view(b, n_heads, t, d // n_heads)


def good_merge(x):
    b, h, t, d_k = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d_k)


def good_forward(x, mha):
    q, k, v = mha.qkv_proj(x).split(mha.d_model, dim=-1)
    q, k, v = (good_split(t, mha.n_heads) for t in (q, k, v))
    out, _ = cu.attention_with_weights(q, k, v)
    return mha.out_proj(good_merge(out))


def forward_scaled_by_d_model(x, mha):              # common mistake 1
    q, k, v = mha.qkv_proj(x).split(mha.d_model, dim=-1)
    q, k, v = (good_split(t, mha.n_heads) for t in (q, k, v))
    out, _ = cu.attention_with_weights(q, k, v, scale=1 / math.sqrt(mha.d_model))
    return mha.out_proj(good_merge(out))


def forward_without_bias(x, mha):
    q, k, v = F.linear(x, mha.qkv_proj.weight).split(mha.d_model, dim=-1)
    q, k, v = (good_split(t, mha.n_heads) for t in (q, k, v))
    out, _ = cu.attention_with_weights(q, k, v)
    return F.linear(good_merge(out), mha.out_proj.weight)


def forward_with_library_split(x, mha):             # borrows the module's split_heads: refused
    q, k, v = (mha.split_heads(t) for t in mha.qkv_proj(x).split(mha.d_model, dim=-1))
    out, _ = cu.attention_with_weights(q, k, v)
    return mha.out_proj(good_merge(out))


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
    (l04.check_split_heads, good_split, bad_split),
    (l04.check_mha_forward, good_forward, forward_scaled_by_d_model),
    (l04.check_mha_forward, good_forward, forward_without_bias),
    (l04.check_mha_forward, good_forward, forward_with_library_split),
    (l04.check_cross_attention, good_cross, cross_ignoring_mask),
    (l04.check_cross_attention, cross_with_sdpa, cross_ignoring_mask),
])
def test_checks_accept_solution_and_reject_mistake(check, good, bad, capsys):
    assert check(good) is True
    assert "✓" in capsys.readouterr().out
    assert check(bad) is False
    assert "✓" not in capsys.readouterr().out


def test_check_hints(capsys):
    l04.check_split_heads(bad_split)
    assert "transpose" in capsys.readouterr().out
    l04.check_mha_forward(forward_scaled_by_d_model)
    assert "common mistake 1" in capsys.readouterr().out
    l04.check_cross_attention(cross_ignoring_mask)
    assert "keep[:, None, None, :]" in capsys.readouterr().out


def test_watched_methods_are_restored():
    forward, split = cu.MultiHeadAttention.forward, cu.MultiHeadAttention.split_heads
    l04.check_mha_forward(lambda x, mha: mha(x))
    assert cu.MultiHeadAttention.forward is forward and cu.MultiHeadAttention.split_heads is split


def test_checks_leave_global_rng_alone():
    for check, answer in ((l04.check_mha_forward, good_forward), (l04.check_cross_attention, good_cross)):
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
