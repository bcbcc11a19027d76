"""Lesson 03 · scaled dot-product attention: a tiny sentence, the √d_k demos, a widget, the exercise checks.

The notebook writes attention itself in a few lines, and the hand-made W^Q, W^K of its sentence; this module
holds what would distract from that: the sentence's words and word-specific features, the plots of the √d_k
measurements, the d_k / scaling widget and the functions that check the students' exercises (they never raise,
so the notebook always runs to the end).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ... import i18n, viz
from .checks import check_masked_attention_fix as check_masked_attention_fix
from .checks import check_softmax_jacobian as check_softmax_jacobian
from .checks import check_unit_scale as check_unit_scale

# ----------------------------------------------------------------------------------------------------
# A tiny sentence: the words, their types and a small word-specific part (the notebook writes W^Q, W^K)
# ----------------------------------------------------------------------------------------------------

ROLES = ("det", "noun", "verb", "prep")
# What each word type looks for (its query): determiners and verbs look for nouns, nouns for their verb,
# prepositions for the noun they introduce. The notebooks write this table as the matrix W^Q.
SEEKS = {"det": "noun", "noun": "verb", "verb": "noun", "prep": "noun"}

# The Chinese sentence avoids 在…上: 上 is a localiser (方位词), not a preposition, and fits none of the four types.
SENTENCES = {
    "en": [("the", "det"), ("cat", "noun"), ("sat", "verb"), ("on", "prep"), ("the", "det"), ("mat", "noun")],
    "zh": [("这只", "det"), ("猫", "noun"), ("对", "prep"), ("那只", "det"), ("狗", "noun"), ("叫", "verb")],
}


def sentence_words(lang: str | None = None, width: int = 4):
    """The lesson's six-word sentence: ``(tokens, types, word_part)``.

    ``types`` is the word type of each token (one of :data:`ROLES`); ``word_part`` (T, width) is a small random
    vector per distinct word (std 0.3), the same for both occurrences of "the". The notebook builds the input
    ``X = [one_hot(type) | word_part]`` and the matrices W^Q, W^K itself.
    """
    words = i18n.pick(SENTENCES, lang)
    tokens = [w for w, _ in words]
    g = torch.Generator().manual_seed(3)
    identity = {w: 0.3 * torch.randn(width, generator=g) for w in sorted(set(tokens))}
    return tokens, [role for _, role in words], torch.stack([identity[w] for w in tokens])


# ----------------------------------------------------------------------------------------------------
# Plots of the √d_k measurements
# ----------------------------------------------------------------------------------------------------

def _label_pair(lang):
    # Maths as mathtext: CJK fonts lack glyphs such as ᵀ, and mathtext draws with its own fonts.
    return (i18n.pick({"en": r"scaled: $QK^T/\sqrt{d_k}$", "zh": r"缩放：$QK^T/\sqrt{d_k}$"}, lang),
            i18n.pick({"en": r"unscaled: $QK^T$", "zh": r"不缩放：$QK^T$"}, lang))


def plot_dot_product_variance(d_values, variances, lang=None):
    """Measured Var(q·k) against d_k on log-log axes, with the prediction y = d_k."""
    code = viz.use_language(lang)
    d = np.asarray(d_values, dtype=float)
    fig = viz.new_figure((5.5, 4))
    ax = fig.add_subplot()
    ax.plot(d, d, "--", color="tab:gray",
            label=i18n.pick({"en": r"prediction $y = d_k$", "zh": r"理论值 $y = d_k$"}, code))
    ax.plot(d, np.asarray(variances, dtype=float), "o", ms=8,
            label=i18n.pick({"en": r"measured Var$(q\cdot k)$", "zh": r"实测 Var$(q\cdot k)$"}, code))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel(r"$d_k$")
    ax.set_ylabel(i18n.pick({"en": r"variance of $q\cdot k$", "zh": r"$q\cdot k$ 的方差"}, code))
    ax.set_title(i18n.pick({"en": r"Dot products grow with $d_k$", "zh": r"点积的方差随 $d_k$ 增长"}, code))
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    return fig


def plot_saturation(d_values, scaled: dict, unscaled: dict, t_keys: int, lang=None):
    """Three panels against d_k: mean largest weight, mean entropy, mean gradient norm (scaled vs unscaled).

    ``scaled`` / ``unscaled``: dicts with lists ``"max_weight"``, ``"entropy"``, ``"grad_norm"`` (one value
    per d_k).
    """
    code = viz.use_language(lang)
    lab_s, lab_u = _label_pair(code)
    d = np.asarray(d_values, dtype=float)
    fig = viz.new_figure((12, 3.6))
    axes = fig.subplots(1, 3)
    panels = [
        ("max_weight", {"en": "largest weight of a row", "zh": "每行最大的权重"}, None),
        ("entropy", {"en": "entropy of a row (nats)", "zh": "每行的熵（奈特）"}, math.log(t_keys)),
        ("grad_norm", {"en": r"gradient norm $\|\partial L/\partial s\|$",
                       "zh": r"梯度范数 $\|\partial L/\partial s\|$"}, None),
    ]
    for ax, (key, ylabel, ref) in zip(axes, panels):
        ax.plot(d, scaled[key], "o-", label=lab_s)
        ax.plot(d, unscaled[key], "s-", label=lab_u)
        if ref is not None:
            ax.axhline(ref, ls=":", color="tab:gray",
                       label=i18n.pick({"en": "uniform: log T", "zh": "均匀分布：log T"}, code))
        ax.set_xscale("log", base=2)
        ax.set_xlabel(r"$d_k$")
        ax.set_ylabel(i18n.pick(ylabel, code))
        ax.grid(alpha=0.3)
    axes[0].set_ylim(0, 1.05)
    axes[2].set_yscale("log")
    axes[0].legend()
    axes[1].legend()
    return fig


# ----------------------------------------------------------------------------------------------------
# Widget: d_k and the √d_k toggle
# ----------------------------------------------------------------------------------------------------

D_K_CHOICES = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def row_entropy(weights: torch.Tensor) -> torch.Tensor:
    """−Σ w log w over the last dimension, with 0·log 0 = 0 (a one-hot row has entropy 0, not NaN)."""
    return -torch.special.xlogy(weights, weights).sum(-1)


def random_attention(d_k: int, scale: bool, t: int = 8, seed: int = 0) -> dict:
    """Attention weights of ``t`` random queries over ``t`` random keys with unit-variance entries.

    The same random numbers are used for every ``d_k`` (the first ``d_k`` of 1024 columns), so moving the
    slider only changes the dimension. Returns weights (T, T), mean entropy, mean largest weight and the
    scores' std.
    """
    if d_k not in D_K_CHOICES and not (isinstance(d_k, int) and 1 <= d_k <= max(D_K_CHOICES)):
        raise ValueError(f"d_k={d_k!r} must be an integer between 1 and {max(D_K_CHOICES)}")
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(t, max(D_K_CHOICES), generator=g)[:, :d_k]
    k = torch.randn(t, max(D_K_CHOICES), generator=g)[:, :d_k]
    scores = q @ k.T
    if scale:
        scores = scores / math.sqrt(d_k)
    weights = torch.softmax(scores, dim=-1)
    return {"weights": weights, "entropy": float(row_entropy(weights).mean()),
            "max_weight": float(weights.max(-1).values.mean()), "score_std": float(scores.std())}


def _render_scaling(d_k: int, scale: bool, lang=None):
    code = viz.use_language(lang)
    res = random_attention(d_k, scale)
    w = res["weights"]
    t = w.shape[-1]
    fig = viz.new_figure((10, 4))
    ax_bar, ax_map = fig.subplots(1, 2)
    names_q = [f"q{i + 1}" for i in range(t)]
    names_k = [f"k{i + 1}" for i in range(t)]
    ax_bar.bar(range(t), w[0].numpy(), color="tab:blue")
    ax_bar.axhline(1 / t, ls=":", color="tab:gray",
                   label=i18n.pick({"en": "uniform 1/T", "zh": "均匀 1/T"}, code))
    ax_bar.set_ylim(0, 1.02)
    ax_bar.set_xlabel(i18n.tr("key", code))
    ax_bar.set_ylabel(i18n.tr("attention_weights", code))
    ax_bar.set_title(i18n.pick({"en": "query q1: H = {h:.2f} nats (uniform: {u:.2f})",
                                "zh": "查询 q1：熵 H = {h:.2f}（均匀时 {u:.2f}）"}, code)
                     .format(h=float(row_entropy(w[0])), u=math.log(t)))
    ax_bar.legend(loc="upper right")
    ax_bar.set_xticks(range(t), labels=names_k)
    mode = (i18n.pick({"en": r"scaled by $\sqrt{d_k}$", "zh": r"除以 $\sqrt{d_k}$"}, code) if scale
            else i18n.pick({"en": "not scaled", "zh": "未缩放"}, code))
    viz.plot_attention(w, names_q, names_k, ax=ax_map, lang=code,
                       title=i18n.pick({"en": "$d_k$ = {d}, {m}: mean H = {h:.2f}",
                                        "zh": "$d_k$ = {d}，{m}：平均熵 {h:.2f}"}, code)
                       .format(d=d_k, m=mode, h=res["entropy"]))
    ax_map.images[0].set_clim(0.0, 1.0)  # one colour scale for every setting, so that two renders compare
    fig.colorbar(ax_map.images[0], ax=ax_map, shrink=0.8)
    state = {"d_k": d_k, "scale": scale, "weights": w.numpy(), "entropy": res["entropy"],
             "max_weight": res["max_weight"], "score_std": res["score_std"], "uniform_entropy": math.log(t)}
    return fig, state


def build_scaling_widget(d_k: int = 64, scale: bool = False):
    """d_k slider + "scale by √d_k" toggle: one query's weight distribution, its entropy and the heatmap."""
    import ipywidgets as widgets

    from ...widgets import LessonWidget, toggle

    if d_k not in D_K_CHOICES:
        raise ValueError(f"d_k={d_k} is not one of the slider's values {D_K_CHOICES}")
    controls = {
        "d_k": widgets.SelectionSlider(options=list(D_K_CHOICES), value=d_k, description="d_k",
                                       continuous_update=False, style={"description_width": "initial"}),
        "scale": toggle("scale", scale, label={"en": "scale the scores by 1/√d_k", "zh": "分数除以 √d_k"}),
    }
    return LessonWidget(controls, _render_scaling,
                        title={"en": "Random queries and keys: does the softmax saturate?",
                               "zh": "随机的查询和键：softmax 会饱和吗？"})


# ----------------------------------------------------------------------------------------------------
# Exercise checks: print a verdict, return True / False, never raise
# ----------------------------------------------------------------------------------------------------
