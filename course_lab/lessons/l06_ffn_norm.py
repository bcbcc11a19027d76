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
from course_utils.validation import check_int

from .. import i18n, viz
from ..exercises import attempt, fail, fresh_generator, is_tensor, never_raises, passed, watching
from ..widgets import LessonWidget, slider

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

# The library normalisations Exercise 1 asks the student to write without (nn.LayerNorm calls F.layer_norm).
# Every public normalisation that computes the answer after a reshape (instance norm over (B, 1, T·d), batch norm
# over the transposed (T·d, B)), watched wherever it is bound (exercises.watching).
_LIBRARY_NORMS = [(F, "layer_norm"), (torch, "layer_norm"), (torch, "native_layer_norm"), (F, "group_norm"),
                  (torch, "group_norm"), (F, "instance_norm"), (torch, "instance_norm"), (F, "batch_norm"),
                  (torch, "batch_norm")]


def _two_axes_inputs() -> list[tuple[str, str, torch.Tensor]]:
    g = fresh_generator()
    return [
        ("ordinary", "普通输入", 1.5 * torch.randn(3, 4, 6, generator=g, dtype=torch.float64) + 0.3),
        ("small-variance", "方差很小的输入", 1e-3 * torch.randn(3, 4, 6, generator=g, dtype=torch.float64) + 2.0),
    ]


def _per_position(x, gamma, beta, eps):
    mu = x.mean(-1, keepdim=True)
    return gamma * (x - mu) / torch.sqrt(x.var(-1, keepdim=True, correction=0) + eps) + beta


def _std_version(x, gamma, beta, eps):
    mu = x.mean(dim=(-2, -1), keepdim=True)
    return gamma * (x - mu) / (x.std(dim=(-2, -1), keepdim=True) + 1e-6) + beta


@never_raises
def check_layer_norm_2d(fn) -> bool:
    """Exercise 1: ``fn(x, gamma, beta, eps)`` normalises ``x (B, T, d)`` over its last TWO axes, like
    ``nn.LayerNorm((T, d))``; ``gamma, beta`` have shape ``(T, d)``. Written out: no library normalisation."""
    g = fresh_generator()
    shape = (4, 6)
    ref = nn.LayerNorm(shape, eps=1e-5).double()
    with torch.no_grad():
        ref.weight.copy_(1 + 0.3 * torch.randn(shape, generator=g, dtype=torch.float64))
        ref.bias.copy_(0.2 * torch.randn(shape, generator=g, dtype=torch.float64))
    gamma, beta = ref.weight.detach(), ref.bias.detach()
    for name, zh_name, x in _two_axes_inputs():
        with torch.no_grad():
            want = ref(x)
        with watching(fn, _LIBRARY_NORMS) as calls:
            ok, got = attempt(fn, x, gamma, beta, 1e-5)
        if not ok or not is_tensor(got, want.shape):
            return False
        if calls:
            return fail(f"Your function calls the library ({calls[0]}): the point is to write the statistics "
                        "yourself — a mean and a biased variance over the last two axes, ε inside the root.",
                        f"你的函数调用了库函数（{calls[0]}）：本题的目的是亲手写出统计量——沿最后两个维度求均值和"
                        "有偏方差，ε 放在根号里面。")
        got = got.detach()
        err = float((got - want).abs().max())
        if err <= 1e-10:
            continue
        if torch.allclose(got, _per_position(x, gamma, beta, 1e-5), atol=1e-10, rtol=0):
            return fail("You normalised each position on its own (the last axis only). Here the statistics "
                        "are taken over the last two axes at once: mean over dim=(-2, -1).",
                        "你对每个位置单独做了归一化（只沿最后一个维度）。本题要求同时在最后两个维度上计算统计量："
                        "对 dim=(-2, -1) 求均值。")
        if torch.allclose(got, _std_version(x, gamma, beta, 1e-5), atol=1e-10, rtol=0):
            return fail(f"On the {name} input this is the torch.std version of section 4 (unbiased, ε outside the "
                        f"root): max difference {err:.3g} from nn.LayerNorm.",
                        f"在{zh_name}上，这就是第 4 节的 torch.std 版本（无偏方差，ε 在根号外）："
                        f"与 nn.LayerNorm 的最大差异为 {err:.3g}。")
        return fail(f"On the {name} input the max difference from nn.LayerNorm((T, d)) is {err:.3g}. Check: "
                    "statistics over the last two axes, biased variance, ε inside the square root, γ and β of "
                    "shape (T, d).",
                    f"在{zh_name}上与 nn.LayerNorm((T, d)) 的最大差异为 {err:.3g}。请检查：统计量沿最后两个维度；"
                    "方差是有偏的；ε 放在根号里面；γ、β 的形状为 (T, d)。")
    return passed("Correct: equal to nn.LayerNorm((T, d)) within 1e-10, also when the variance is tiny.",
                  "正确：与 nn.LayerNorm((T, d)) 相差不超过 1e-10，方差很小时也一样。")


_LIBRARY_DROPOUT = [(F, "dropout"), (torch, "dropout"), (torch, "native_dropout")]


@never_raises
def check_dropout(fn) -> bool:
    """Exercise 2: ``fn(x, p, training)`` is inverted dropout: in training each element is 0 with probability p,
    else x / (1 − p); outside training, x itself. Written out: no F.dropout / nn.Dropout."""
    g = fresh_generator()
    x = torch.randn(400, 250, generator=g) + 3.0                  # no zeros of its own: a 0 means "dropped"
    p = 0.3
    with watching(fn, _LIBRARY_DROPOUT) as calls:
        ok, y = attempt(fn, x, p, True)
        if ok:
            ok, y_again = attempt(fn, x, p, True)
    if not ok or not is_tensor(y, x.shape):
        return False
    if calls:
        return fail(f"Your function calls the library ({calls[0]}): write the mask yourself (torch.rand or "
                    "torch.bernoulli) and the rescaling by 1/(1 − p).",
                    f"你的函数调用了库函数（{calls[0]}）：请自己生成掩码（torch.rand 或 torch.bernoulli），"
                    "并自己乘上 1/(1 − p)。")
    kept = y != 0
    frac = 1.0 - float(kept.float().mean())
    if abs(frac - p) > 0.01:
        return fail(f"In training {frac:.3f} of the elements are zero; with p = {p} it should be about {p}.",
                    f"训练模式下有 {frac:.3f} 的元素为 0；p = {p} 时应约为 {p}。")
    if torch.allclose(y[kept], x[kept]):
        return fail("The kept values are x itself: without the factor 1/(1 − p) the expected value shrinks to "
                    "(1 − p)·x in training, and the next layer sees larger inputs at evaluation than it learned on.",
                    "保留下来的值就是 x 本身：没有乘 1/(1 − p)，训练时的期望值缩小为 (1 − p)·x，"
                    "到了评估时下一层看到的输入就比训练时大。")
    if not torch.allclose(y[kept], x[kept] / (1 - p)):
        return fail("The kept values should be exactly x / (1 − p).", "保留下来的值应该恰好是 x / (1 − p)。")
    if torch.equal(y, y_again):
        return fail("Two calls in training gave the same mask: draw a new random mask every call.",
                    "训练模式下两次调用得到了同一个掩码：每次调用都要重新随机生成掩码。")
    ok, y_eval = attempt(fn, x, p, False)
    if not ok or not is_tensor(y_eval, x.shape):
        return False
    if not torch.equal(y_eval, x):
        return fail("Outside training dropout must return x unchanged (inverted dropout already rescaled in "
                    "training, so there is nothing to do at evaluation).",
                    "非训练模式下 dropout 必须原样返回 x（倒置 dropout 已在训练时做过缩放，评估时什么都不用做）。")
    return passed(f"Correct: {frac:.3f} of the elements dropped, the rest scaled by 1/(1 − p), identity in "
                  "evaluation: the expected value is unchanged.",
                  f"正确：{frac:.3f} 的元素被丢弃，其余乘以 1/(1 − p)，评估时原样输出：期望值保持不变。")


@never_raises
def check_pre_norm(fn) -> bool:
    """Exercise 3: ``fn(x, sublayer, norm, dropout)`` = x + dropout(sublayer(norm(x))): the pre-norm residual
    sublayer with residual dropout, compared with ``course_utils.Residual(norm_first=True)`` in training mode."""
    g = fresh_generator()
    d = 12
    with torch.random.fork_rng(devices=[]):    # building the modules draws their initial weights: not from ours
        torch.manual_seed(19)
        ref = Residual(d, dropout=0.25, norm_first=True).double().train()
        ffn = PositionwiseFeedForward(d, 4 * d).double()
    with torch.no_grad():
        ref.norm.weight.copy_(1 + 0.5 * torch.randn(d, generator=g, dtype=torch.float64))
        ref.norm.bias.copy_(0.5 * torch.randn(d, generator=g, dtype=torch.float64))
    x = 2.0 * torch.randn(2, 3, d, generator=g, dtype=torch.float64) + 1.0

    def same_draws(f):                         # the same random state for every candidate; global RNG restored
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(29)
            return f()

    with torch.no_grad():
        want = same_draws(lambda: ref(x, ffn))
        post = same_draws(lambda: ref.norm(x + ref.dropout(ffn(x))))
        whole = same_draws(lambda: ref.dropout(x + ffn(ref.norm(x))))
    with watching(fn, [(Residual, "forward")]) as calls:
        ok, got = attempt(same_draws, lambda: fn(x, ffn, ref.norm, ref.dropout))
    if not ok or not is_tensor(got, want.shape):
        return False
    if calls:
        return fail("Your function calls the library's Residual: write the one line yourself.",
                    "你的函数调用了库里的 Residual：请自己写出这一行。")
    if torch.allclose(got, post, atol=1e-10, rtol=0):
        return fail("That is post-norm, LayerNorm(x + Dropout(Sublayer(x))): normalise the sublayer's *input* "
                    "instead.",
                    "这是后置归一化 LayerNorm(x + Dropout(Sublayer(x)))：应该对子层的输入做归一化。")
    if torch.allclose(got, whole, atol=1e-10, rtol=0):
        return fail("Dropout is applied to x as well: only the sublayer's contribution is dropped, the residual "
                    "path carries x untouched.",
                    "dropout 也作用在了 x 上：只有子层加上去的那一部分才做 dropout，残差通路上的 x 必须原样传递。")
    if not torch.allclose(got, want, atol=1e-10, rtol=0):
        with torch.no_grad():
            no_drop = x + ffn(ref.norm(x))
        if torch.allclose(got, no_drop, atol=1e-10, rtol=0):
            return fail("No dropout: the module `dropout` is passed in; apply it to the sublayer's output.",
                        "没有做 dropout：参数 `dropout` 是一个模块，请把它作用在子层的输出上。")
        return fail("Not x + dropout(sublayer(norm(x))): the residual path must carry x itself, unnormalised.",
                    "结果不是 x + dropout(sublayer(norm(x)))：残差通路上传递的应是未经归一化的 x 本身。")
    return passed("Correct: x + Dropout(Sublayer(LayerNorm(x))), the same as course_utils.Residual(norm_first=True).",
                  "正确：x + Dropout(Sublayer(LayerNorm(x)))，与 course_utils.Residual(norm_first=True) 一致。")


__all__ = ["demo_vector", "layer_norm_stats", "build_layernorm_widget", "check_layer_norm_2d", "check_dropout",
           "check_pre_norm"]
