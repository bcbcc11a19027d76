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


# --- reference solutions and wrong answers of the exercises -----------------------------------------

def good_split(x, n_heads):
    b, t, d = x.shape
    return x.view(b, t, n_heads, d // n_heads).transpose(1, 2)


def bad_split(x, n_heads):                          # the classic mistake: no transpose
    b, t, d = x.shape
    return x.view(b, n_heads, t, d // n_heads)


def good_merge(x):
    b, h, t, d_k = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d_k)


def bad_merge(x):
    b, h, t, d_k = x.shape
    return x.reshape(b, t, h * d_k)


def good_forward(x, mha):
    q, k, v = mha.qkv_proj(x).split(mha.d_model, dim=-1)
    q, k, v = (good_split(t, mha.n_heads) for t in (q, k, v))
    out, _ = cu.attention_with_weights(q, k, v)
    return mha.out_proj(good_merge(out))


def forward_scaled_by_d_model(x, mha):              # seed mistake 1
    q, k, v = mha.qkv_proj(x).split(mha.d_model, dim=-1)
    q, k, v = (good_split(t, mha.n_heads) for t in (q, k, v))
    out, _ = cu.attention_with_weights(q, k, v, scale=1 / math.sqrt(mha.d_model))
    return mha.out_proj(good_merge(out))


def forward_without_bias(x, mha):
    q, k, v = F.linear(x, mha.qkv_proj.weight).split(mha.d_model, dim=-1)
    q, k, v = (good_split(t, mha.n_heads) for t in (q, k, v))
    out, _ = cu.attention_with_weights(q, k, v)
    return F.linear(good_merge(out), mha.out_proj.weight)


def not_started(*args):
    raise NotImplementedError


def crashes(*args):
    raise IndexError("oops")


@pytest.mark.parametrize("check, good, bad", [
    (l04.check_split_heads, good_split, bad_split),
    (l04.check_merge_heads, good_merge, bad_merge),
    (l04.check_mha_forward, good_forward, forward_scaled_by_d_model),
    (l04.check_mha_forward, good_forward, forward_without_bias),
])
def test_checks_accept_solution_and_reject_mistake(check, good, bad, capsys):
    assert check(good) is True
    assert "✓" in capsys.readouterr().out
    assert check(bad) is False
    assert "✓" not in capsys.readouterr().out


@pytest.mark.parametrize("check", [l04.check_split_heads, l04.check_merge_heads, l04.check_mha_forward])
def test_checks_never_raise(check, capsys):
    assert check(not_started) is False
    assert "Not attempted yet" in capsys.readouterr().out
    assert check(crashes) is False
    assert "IndexError" in capsys.readouterr().out
    assert check(lambda *a: None) is False


def test_check_hints(capsys):
    l04.check_split_heads(bad_split)
    assert "transpose" in capsys.readouterr().out
    l04.check_merge_heads(bad_merge)
    assert "transpose" in capsys.readouterr().out


def test_check_mha_forward_leaves_global_rng_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    l04.check_mha_forward(good_forward)
    torch.testing.assert_close(torch.rand(3), expected)


# --- the hand-built heads -----------------------------------------------------------------------------

@pytest.mark.parametrize("lang", ["en", "zh"])
def test_handcrafted_heads_do_their_jobs(lang):
    tokens, x = l04.sentence_features(lang)
    mha = l04.handcrafted_mha()
    with torch.no_grad():
        y = mha(x, need_weights=True)
    w = mha.last_weights[0]                                    # (4, T, T)
    assert y.shape == x.shape and w.shape == (4, 6, 6)
    t = len(tokens)
    prev = w[1].argmax(-1).tolist()
    nxt = w[3].argmax(-1).tolist()
    assert prev[1:] == list(range(t - 1)) and nxt[:-1] == list(range(1, t))
    roles = [r for _, r in l03_sentence(lang)]
    for i, role in enumerate(roles):
        assert roles[int(w[0, i].argmax())] == l04.SEEKS[role]
        assert roles[int(w[2, i].argmax())] == role
    # W^V = W^O = identity: the output is the concatenation of each head's average of its own slice
    for head in range(4):
        torch.testing.assert_close(y[0, :, 4 * head:4 * head + 4], w[head] @ x[0, :, 4 * head:4 * head + 4])


def l03_sentence(lang):
    from course_lab.lessons.l03_attention import SENTENCES
    return SENTENCES[lang]


def test_head_entropies_and_divisors():
    uniform = torch.full((2, 3, 5, 4), 0.25)
    torch.testing.assert_close(l04.head_entropies(uniform), torch.full((3,), math.log(4)))
    assert l04.divisors(16) == [1, 2, 4, 8, 16]
    with pytest.raises(ValueError, match="divide"):
        l04.heads_widget_model(3)


def test_plot_heads_layout():
    w = torch.softmax(torch.randn(1, 8, 6, 6), dim=-1)
    fig = l04.plot_heads(w, list("abcdef"))
    assert len(fig.axes) == 8 + 1                               # 8 heatmaps (2 rows of 4) + colorbar
    np.testing.assert_allclose(fig.axes[5].images[0].get_array(), w[0, 5].numpy(), rtol=1e-6)


# --- the widget -----------------------------------------------------------------------------------------

def test_heads_widget_slider():
    w = l04.build_heads_widget()
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
    a, b = l04.heads_widget_model(2), l04.heads_widget_model(8)
    torch.testing.assert_close(a.qkv_proj.weight, b.qkv_proj.weight)
    with pytest.raises(ValueError, match="slider"):
        l04.build_heads_widget(n_heads=5)


def test_zh_widget_figure_has_every_glyph():
    i18n.set_language("zh")
    w = l04.build_heads_widget(n_heads=2)
    assert "注意力头" in w.figure.texts[0].get_text()
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*Glyph.*")
        w.figure.savefig(io.BytesIO(), format="png", dpi=40)
