"""Lesson 06 — feed-forward network, residual connections, LayerNorm: the γ/β/ε widget and exercise checks.

The widget normalises one fixed vector of ``d`` features with LayerNorm and shows the histograms before and
after, with their statistics. Sliders: γ (a shared scale), β (a shared shift), log₁₀ ε and the spread of the
input (log₁₀ of its standard deviation), so that one can watch ε take over when the input barely varies.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.layers import PositionwiseFeedForward, Residual

from .. import i18n, viz
from ..exercises import attempt, fail, is_tensor, never_raises, passed
from ..widgets import LessonWidget, slider

# ------------------------------------------------------------------------------------------------- widget


def demo_vector(d: int = 512, seed: int = 0) -> torch.Tensor:
    """A fixed float64 vector of ``d`` features with a skewed distribution (mean ≈ 0, std ≈ 1)."""
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
        ax_x.set_title(f"x: {mean_l} = {stats['in_mean']:.3g}, {std_l} = {stats['in_std']:.3g}")
        ax_y.set_title(f"LayerNorm(x): {mean_l} = {stats['out_mean']:.3g}, {std_l} = {stats['out_std']:.3g}")
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


# ------------------------------------------------------------------------------------------------ exercises

@never_raises
def check_ffn(fn) -> bool:
    """Exercise 1: ``fn(x, w1, b1, w2, b2)`` = GELU(x W₁ + b₁) W₂ + b₂, W₁ of shape (d_model, d_ff)."""
    g = torch.Generator().manual_seed(11)
    d_model, d_ff = 8, 32
    ref = PositionwiseFeedForward(d_model, d_ff, activation="gelu").double()
    with torch.no_grad():
        for p in ref.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.5)
    x = torch.randn(2, 5, d_model, generator=g, dtype=torch.float64)
    w1, b1 = ref.linear1.weight.detach().T, ref.linear1.bias.detach()       # (d_model, d_ff), (d_ff,)
    w2, b2 = ref.linear2.weight.detach().T, ref.linear2.bias.detach()       # (d_ff, d_model), (d_model,)
    with torch.no_grad():
        want = ref(x)
    ok, got = attempt(fn, x, w1, b1, w2, b2)
    if not ok or not is_tensor(got, want.shape):
        return False
    if torch.allclose(got, want, atol=1e-10, rtol=0):
        return passed("Correct: the same numbers as course_utils.PositionwiseFeedForward(activation='gelu').",
                      "正确：与 course_utils.PositionwiseFeedForward(activation='gelu') 的结果一致。")
    relu = F.relu(x @ w1 + b1) @ w2 + b2
    if torch.allclose(got, relu, atol=1e-10, rtol=0):
        return fail("That is the ReLU version: this exercise asks for GELU (F.gelu).",
                    "这是 ReLU 版本：本题要求使用 GELU（F.gelu）。")
    err = float((got - want).abs().max())
    return fail(f"Max difference {err:.3g}: compute act(x @ W1 + b1) @ W2 + b2.",
                f"最大差异为 {err:.3g}：应计算 act(x @ W1 + b1) @ W2 + b2。")


def seed_deck_layer_norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """What the original slide deck's "LayerNorm" computes (γ = 1, β = 0): (x − μ) / (s + ε) with the
    *unbiased* standard deviation s (divides by d − 1) and ε *outside* the square root. Not LayerNorm."""
    mean = x.mean(-1, keepdim=True)
    s = x.std(-1, keepdim=True)                  # torch.std default: correction=1 (unbiased)
    return (x - mean) / (s + eps)


def _layer_norm_inputs() -> list[tuple[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(13)
    return [
        ("realistic", 1.5 * torch.randn(3, 4, 16, generator=g, dtype=torch.float64) + 0.3),
        ("small variance", 1e-3 * torch.randn(3, 4, 16, generator=g, dtype=torch.float64) + 2.0),
    ]


@never_raises
def check_layer_norm(fn) -> bool:
    """Exercise 2: ``fn(x, gamma, beta, eps)`` equals ``nn.LayerNorm`` in float64 within 1e-10."""
    g = torch.Generator().manual_seed(17)
    d = 16
    ref = nn.LayerNorm(d, eps=1e-5).double()
    with torch.no_grad():
        ref.weight.copy_(1 + 0.3 * torch.randn(d, generator=g, dtype=torch.float64))
        ref.bias.copy_(0.2 * torch.randn(d, generator=g, dtype=torch.float64))
    gamma, beta = ref.weight.detach(), ref.bias.detach()
    for name, x in _layer_norm_inputs():
        with torch.no_grad():
            want = ref(x)
        ok, got = attempt(fn, x, gamma, beta, 1e-5)
        if not ok or not is_tensor(got, want.shape):
            return False
        err = float((got - want).abs().max())
        if err > 1e-10:
            zh_name = {"realistic": "普通输入", "small variance": "方差很小的输入"}[name]
            return fail(f"On the {name} input the max difference from nn.LayerNorm is {err:.3g}. Check: mean over "
                        "the last dimension, biased variance (divide by d), ε inside the square root.",
                        f"在{zh_name}上与 nn.LayerNorm 的最大差异为 {err:.3g}。请检查：沿最后一个维度求均值；"
                        "方差是有偏的（除以 d）；ε 放在根号里面。")
    return passed("Correct: equal to nn.LayerNorm within 1e-10 in float64, also when the variance is tiny.",
                  "正确：在 float64 下与 nn.LayerNorm 相差不超过 1e-10，方差很小时也一样。")


@never_raises
def check_pre_norm(fn) -> bool:
    """Exercise 3: ``fn(x, sublayer, norm)`` = x + sublayer(norm(x)) (pre-norm residual, no dropout)."""
    g = torch.Generator().manual_seed(19)
    d = 12
    ref = Residual(d, dropout=0.0, norm_first=True).double()
    with torch.no_grad():
        ref.norm.weight.copy_(1 + 0.5 * torch.randn(d, generator=g, dtype=torch.float64))
        ref.norm.bias.copy_(0.5 * torch.randn(d, generator=g, dtype=torch.float64))
    ffn = PositionwiseFeedForward(d, 4 * d).double()
    x = 2.0 * torch.randn(2, 3, d, generator=g, dtype=torch.float64) + 1.0
    with torch.no_grad():
        want = ref(x, ffn)
        post = ref.norm(x + ffn(x))
    ok, got = attempt(fn, x, ffn, ref.norm)
    if not ok or not is_tensor(got, want.shape):
        return False
    if torch.allclose(got, want, atol=1e-10, rtol=0):
        return passed("Correct: x + Sublayer(LayerNorm(x)), the same as course_utils.Residual(norm_first=True).",
                      "正确：x + Sublayer(LayerNorm(x))，与 course_utils.Residual(norm_first=True) 一致。")
    if torch.allclose(got, post, atol=1e-10, rtol=0):
        return fail("That is post-norm, LayerNorm(x + Sublayer(x)): normalise the sublayer's *input* instead.",
                    "这是后置归一化 LayerNorm(x + Sublayer(x))：应该对子层的输入做归一化。")
    return fail("Not x + sublayer(norm(x)): the residual path must carry x itself, unnormalised.",
                "结果不是 x + sublayer(norm(x))：残差路径上传递的应是未经归一化的 x 本身。")


__all__ = ["demo_vector", "layer_norm_stats", "build_layernorm_widget", "check_ffn", "seed_deck_layer_norm",
           "check_layer_norm", "check_pre_norm"]
