"""Lesson 06 (FFN, residuals, LayerNorm): the γ/β/ε widget, the demo helpers and the exercise checks."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lab import i18n
from course_lab.lessons import l06_ffn_norm as l06


@pytest.fixture(scope="module")
def widget():
    w = l06.build_layernorm_widget()
    yield w
    w.close()


def _output_histogram(w) -> list[float]:
    return [p.get_height() for p in w.figure.axes[1].patches if hasattr(p, "get_height")]


def test_default_state_is_standardised(widget):
    s = widget.set(gamma=1.0, beta=0.0, log10_eps=-5, log10_std=0.0)
    assert abs(s["out_mean"]) < 1e-12 and abs(s["out_std"] - 1.0) < 1e-4
    assert abs(s["in_mean"] - 3.0) < 1e-12 and abs(s["in_std"] - 1.0) < 1e-12
    ref = nn.LayerNorm(s["x"].shape[-1], eps=1e-5).double()
    torch.testing.assert_close(s["y"], ref(s["x"]).detach(), atol=1e-10, rtol=0)


def test_gamma_slider_scales(widget):
    widget.set(gamma=1.0, beta=0.0, log10_eps=-5, log10_std=0.0)
    renders = widget.renders
    widget.controls["gamma"].value = 2.5
    assert widget.renders == renders + 1
    assert abs(widget.state["out_std"] - 2.5) < 1e-3
    assert abs(widget.state["out_std"] - widget.state["predicted_std"]) < 1e-9
    assert "2.5" in widget.figure.axes[1].get_title()


def test_beta_slider_shifts(widget):
    widget.set(gamma=1.0, beta=0.0, log10_eps=-5, log10_std=0.0)
    hist_before = _output_histogram(widget)
    widget.controls["beta"].value = -1.5
    assert abs(widget.state["out_mean"] + 1.5) < 1e-9
    assert abs(widget.state["out_std"] - 1.0) < 1e-4
    assert _output_histogram(widget) == pytest.approx(hist_before)      # same shape, moved: same bar heights
    assert widget.figure.axes[1].lines[0].get_xdata()[0] == pytest.approx(-1.5)  # the mean marker moved


def test_eps_takes_over_for_small_variance(widget):
    widget.set(gamma=1.0, beta=0.0, log10_eps=-5, log10_std=-3.0)
    damped = widget.state["out_std"]
    assert damped == pytest.approx(1e-3 / math.sqrt(1e-6 + 1e-5), rel=1e-6)   # σ/√(σ² + ε) ≈ 0.30
    widget.controls["log10_eps"].value = -8
    assert widget.state["eps"] == pytest.approx(1e-8)
    assert widget.state["out_std"] > 0.99 > damped
    widget.controls["log10_std"].value = 0.0
    assert widget.state["in_std"] == pytest.approx(1.0)


def test_layer_norm_stats_and_demo_vector():
    x = l06.demo_vector(64, seed=3)
    assert abs(float(x.mean())) < 1e-12 and abs(float(x.std(correction=0)) - 1) < 1e-12
    s = l06.layer_norm_stats(x, gamma=-2.0, beta=0.5, eps=1e-5)
    assert s["out_mean"] == pytest.approx(0.5) and s["predicted_std"] == pytest.approx(s["out_std"])
    torch.testing.assert_close(s["y"], -2.0 * F.layer_norm(x, (64,), eps=1e-5) + 0.5, atol=1e-12, rtol=0)


def test_widget_speaks_chinese():
    i18n.set_language("zh")
    try:
        w = l06.build_layernorm_widget(d=64)
        assert "均值" in w.figure.axes[1].get_title() and w.figure.axes[0].get_xlabel() == "元素值"
        assert w.controls["log10_std"].description == "输入标准差的 log₁₀"
        w.close()
    finally:
        i18n.set_language(None)


def std_layer_norm(x, eps=1e-6):
    """The common hand-written "LayerNorm" of lesson 06 section 4: unbiased std, ε outside the root."""
    return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + eps)


def test_std_layer_norm_measured():
    g = torch.Generator().manual_seed(0)
    d = 512
    ln = nn.LayerNorm(d).double()
    x = 2.0 * torch.randn(3, 7, d, generator=g, dtype=torch.float64) + 0.5
    ratio = std_layer_norm(x) / ln(x).detach()
    torch.testing.assert_close(ratio, torch.full_like(ratio, math.sqrt((d - 1) / d)), atol=1e-5, rtol=0)
    gap_ordinary = float((std_layer_norm(x) - ln(x).detach()).abs().max())
    assert 1e-4 < gap_ordinary < 1e-2
    tiny = 1e-5 * torch.randn(3, 7, d, generator=g, dtype=torch.float64) + 3.0
    gap_tiny = float((std_layer_norm(tiny) - ln(tiny).detach()).abs().max())
    assert gap_tiny > 2.0                                      # a different function, not a rounding issue


# --------------------------------------------------------------------------------------------- exercises

def _not_implemented(*args):
    raise NotImplementedError


def _layer_norm_2d(x, gamma, beta, eps):
    mu = x.mean(dim=(-2, -1), keepdim=True)
    var = ((x - mu) ** 2).mean(dim=(-2, -1), keepdim=True)
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta


def test_check_layer_norm_2d(capsys):
    assert l06.check_layer_norm_2d(_layer_norm_2d) is True
    capsys.readouterr()

    def per_position(x, g, b, e):
        return g * (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True, correction=0) + e) + b

    def std_version(x, g, b, e):
        return g * (x - x.mean((-2, -1), keepdim=True)) / (x.std((-2, -1), keepdim=True) + 1e-6) + b

    def unbiased(x, g, b, e):
        return g * (x - x.mean((-2, -1), keepdim=True)) / torch.sqrt(x.var((-2, -1), keepdim=True) + e) + b

    assert l06.check_layer_norm_2d(per_position) is False
    assert "each position on its own" in capsys.readouterr().out
    assert l06.check_layer_norm_2d(std_version) is False
    assert "torch.std version" in capsys.readouterr().out
    assert l06.check_layer_norm_2d(unbiased) is False
    assert "✗" in capsys.readouterr().out
    assert l06.check_layer_norm_2d(lambda x, g, b, e: F.layer_norm(x, x.shape[-2:], g, b, e)) is False
    assert "calls the library" in capsys.readouterr().out
    assert l06.check_layer_norm_2d(lambda x, g, b, e: nn.LayerNorm(x.shape[-2:]).double()(x) * g + b) is False
    assert "calls the library" in capsys.readouterr().out
    assert l06.check_layer_norm_2d(_not_implemented) is False
    assert "Not attempted" in capsys.readouterr().out
    assert F.layer_norm.__module__ == "torch.nn.functional"     # the spies are gone


def _dropout(x, p, training):
    if not training:
        return x
    return x * (torch.rand_like(x) >= p) / (1 - p)


def test_check_dropout(capsys):
    assert l06.check_dropout(_dropout) is True
    capsys.readouterr()
    assert l06.check_dropout(lambda x, p, t: x * (torch.rand_like(x) >= p) if t else x) is False
    assert "expected value shrinks" in capsys.readouterr().out
    assert l06.check_dropout(lambda x, p, t: x * (torch.rand_like(x) >= p) / (1 - p) if t else x * (1 - p)) is False
    assert "unchanged" in capsys.readouterr().out
    assert l06.check_dropout(lambda x, p, t: _dropout(x, p, True)) is False          # dropping in evaluation too
    fixed = torch.Generator().manual_seed(0)
    assert l06.check_dropout(lambda x, p, t: x * (torch.rand(x.shape, generator=fixed.manual_seed(0)) >= p)
                             / (1 - p) if t else x) is False                     # the same mask every call
    assert "same mask" in capsys.readouterr().out
    assert l06.check_dropout(lambda x, p, t: _dropout(x, p / 2, t)) is False
    assert l06.check_dropout(lambda x, p, t: F.dropout(x, p, t)) is False
    assert "calls the library" in capsys.readouterr().out
    assert l06.check_dropout(lambda x, p, t: nn.Dropout(p).train(t)(x)) is False
    assert "calls the library" in capsys.readouterr().out
    state = torch.random.get_rng_state()
    assert l06.check_dropout(_not_implemented) is False
    assert torch.equal(state, torch.random.get_rng_state())


def test_check_stream_norm(capsys):
    def derived(norm0, a, d, n_layers, norm_first):
        return norm0 + n_layers * a * math.sqrt(d) if norm_first else math.sqrt(d)

    state = torch.random.get_rng_state()
    assert l06.check_stream_norm(derived) is True
    assert torch.equal(state, torch.random.get_rng_state())         # the check leaves the global RNG alone
    assert "final LayerNorm" in capsys.readouterr().out
    assert l06.check_stream_norm(lambda n0, a, d, n, first: n0 + n * a if first else math.sqrt(d)) is False
    assert "not 1" in capsys.readouterr().out
    assert l06.check_stream_norm(lambda n0, a, d, n, first: n0 * (1 + a) ** n if first else math.sqrt(d)) is False
    assert "applied to x itself" in capsys.readouterr().out
    assert l06.check_stream_norm(lambda n0, a, d, n, first: derived(n0, a, d, n, True) if first else n0) is False
    assert "norm is fixed" in capsys.readouterr().out
    assert l06.check_stream_norm(lambda n0, a, d, n, first: "big") is False
    assert l06.check_stream_norm(_not_implemented) is False
    assert "Not attempted" in capsys.readouterr().out
