"""Lesson 06 — feed-forward network, residual connections, LayerNorm: the γ/β/ε widget and exercise checks.

The widget normalises one fixed vector of ``d`` features with LayerNorm and shows the histograms before and
after, with their statistics. Sliders: γ (a shared scale), β (a shared shift), log₁₀ ε and the spread of the
input (log₁₀ of its standard deviation), so that one can watch ε take over when the input barely varies.
"""

from __future__ import annotations

import math

import torch

from course_utils.validation import check_int

from ... import i18n, viz
from ...widgets import LessonWidget, slider
from .checks import check_dropout as check_dropout
from .checks import check_layer_norm_2d as check_layer_norm_2d
from .checks import check_stream_norm as check_stream_norm

# ------------------------------------------------------------------------------------------------- widget


def demo_vector(d: int = 512, seed: int = 0) -> torch.Tensor:
    """A fixed float64 vector of ``d`` features with a skewed distribution (mean ≈ 0, std ≈ 1)."""
    check_int(d, "d", 2)  # one feature has std 0: normalising it divides by zero
    check_int(seed, "seed", None)
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(d, generator=g, dtype=torch.float64)
    x = z + 0.4 * (z**2 - 1)                     # a little skew, so that the histogram is not a textbook bell
    return (x - x.mean()) / x.std(correction=0)


def layer_norm_stats(x: torch.Tensor, gamma: float, beta: float, eps: float) -> dict:
    """LayerNorm of ``x`` (last dimension) with a scalar γ and β; returns the output and its statistics.

    ``predicted_std`` is γ·σ/√(σ² + ε): the output's standard deviation straight from the formula.
    """
    mean = x.mean(-1, keepdim=True)
    var = (x - mean).pow(2).mean(-1, keepdim=True)                     # biased variance
    y = gamma * (x - mean) / torch.sqrt(var + eps) + beta
    sigma = float(var.sqrt().mean())
    return {"y": y, "in_mean": float(mean.mean()), "in_std": sigma, "out_mean": float(y.mean()),
            "out_std": float(y.std(correction=0)),
            "predicted_std": abs(gamma) * sigma / math.sqrt(sigma**2 + eps)}


def build_layernorm_widget(d: int = 512, seed: int = 0) -> LessonWidget:
    """Sliders γ, β, log₁₀ ε and log₁₀(input std); histograms of the input and of LN(x) with their statistics.

    ``state``: ``x``, ``y`` (float64 tensors), ``in_mean``, ``in_std``, ``out_mean``, ``out_std``,
    ``predicted_std``, ``gamma``, ``beta``, ``eps``.
    """
    lang = i18n.current_language()
    base = demo_vector(d, seed)
    controls = {
        "gamma": slider("gamma", 0.0, 3.0, 0.1, 1.0, label="γ (gamma)", lang=lang),
        "beta": slider("beta", -2.0, 2.0, 0.1, 0.0, label="β (beta)", lang=lang),
        "log10_eps": slider("log10_eps", -8, 0, 1, -5, label="log₁₀ ε", lang=lang),
        "log10_std": slider("log10_std", -4.0, 1.0, 0.5, 0.0, lang=lang,
                            label={"en": "log₁₀ std of the input", "zh": "输入标准差的 log₁₀"}),
    }

    def render(gamma, beta, log10_eps, log10_std):
        viz.use_language(lang)
        eps = 10.0 ** log10_eps
        x = 3.0 + (10.0 ** log10_std) * base          # an offset and a spread: LayerNorm removes both
        stats = layer_norm_stats(x, gamma, beta, eps)
        y = stats["y"]
        fig = viz.new_figure((9, 3.4))
        ax_x, ax_y = fig.subplots(1, 2)
        ax_x.hist(x.numpy(), bins=40, color="tab:blue", alpha=0.85)
        ax_y.hist(y.numpy(), bins=40, color="tab:orange", alpha=0.85)
        ax_y.set_xlim(-8, 8)                          # fixed, so that γ and β visibly stretch and move it
        mean_l, std_l = i18n.tr("mean", lang), i18n.tr("std", lang)
        comma = i18n.pick({"en": ", ", "zh": "，"}, lang)
        ax_x.set_title(f"x: {mean_l} = {stats['in_mean']:.3g}{comma}{std_l} = {stats['in_std']:.3g}")
        ax_y.set_title(f"LayerNorm(x): {mean_l} = {stats['out_mean']:.3g}{comma}{std_l} = {stats['out_std']:.3g}")
        m, s = stats["out_mean"], stats["out_std"]
        ax_y.axvline(m, color="black", lw=1)                 # the mean, and a band of ± one std around it
        ax_y.axvspan(m - s, m + s, color="grey", alpha=0.15)
        for ax in (ax_x, ax_y):
            ax.set_xlabel(i18n.tr("element_value", lang))
            ax.set_ylabel(i18n.tr("count", lang))
        note = i18n.pick({"en": "predicted std γσ/√(σ²+ε) = {p:.3g}",
                          "zh": "公式预测的标准差 γσ/√(σ²+ε) = {p:.3g}"}, lang)
        ax_y.text(0.02, 0.95, note.format(p=stats["predicted_std"]), transform=ax_y.transAxes, va="top",
                  fontsize=8)
        state = dict(stats, x=x, gamma=gamma, beta=beta, eps=eps)
        return fig, state

    title = {"en": "LayerNorm: move γ, β and ε", "zh": "层归一化：调节 γ、β 和 ε"}
    return LessonWidget(controls, render, title=title)


__all__ = ["demo_vector", "layer_norm_stats", "build_layernorm_widget", "check_layer_norm_2d", "check_dropout",
           "check_stream_norm"]
