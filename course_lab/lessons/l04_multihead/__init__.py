"""Lesson 04 · multi-head attention: the heads widget, its plots and the exercise checks.

The notebook writes the sentence's input features, the split / attend / merge steps, the hand-made W_i^Q, W_i^K of
its four heads, and measures two common mistakes; this module holds the number-of-heads widget (it cuts the
notebook's hand-built projections into h heads) and the functions that check the exercises (they never raise, so the
notebook always runs to the end).
"""

from __future__ import annotations

import math

import torch

from course_utils.multihead import MultiHeadAttention

from ... import i18n, viz
from ..l03_attention import row_entropy
from .checks import check_averaged_weights as check_averaged_weights
from .checks import check_cross_attention as check_cross_attention
from .checks import check_grouped_heads as check_grouped_heads

# ----------------------------------------------------------------------------------------------------
# The sentence's sizes (the notebook writes its input features and the four heads' W_i^Q, W_i^K by hand)
# ----------------------------------------------------------------------------------------------------

D_MODEL, N_HEADS = 16, 4


def head_entropies(weights: torch.Tensor) -> torch.Tensor:
    """Mean entropy (nats) of each head's rows: ``(B, h, T_q, T_k)`` → ``(h,)``."""
    return row_entropy(weights).mean(dim=(0, 2))


# ----------------------------------------------------------------------------------------------------
# Widget: the number of heads
# ----------------------------------------------------------------------------------------------------

def divisors(n: int) -> list[int]:
    return [h for h in range(1, n + 1) if n % h == 0]


def plot_heads(weights, tokens, title: str | None = None, lang=None, max_cols: int = 4):
    """One heatmap per head of ``weights`` (h, T, T) or (1, h, T, T), ``max_cols`` per row, shared scale."""
    code = viz.use_language(lang)
    w = viz.to_numpy(weights, "weights")
    if w.ndim == 4:
        w = w[0]
    h = w.shape[0]
    cols = min(h, max_cols)
    rows = math.ceil(h / cols)
    fig = viz.new_figure((1.2 + 2.4 * cols, 0.8 + 2.3 * rows))
    axes = fig.subplots(rows, cols, squeeze=False)
    for i, ax in enumerate(axes.flat):
        if i >= h:
            ax.remove()
            continue
        viz.plot_attention(w[i], tokens, tokens, ax=ax, lang=code, title=i18n.tr("head_n", code, n=i + 1))
        ax.images[0].set_clim(0.0, 1.0)
        if i % cols:
            ax.set_ylabel("")
            ax.set_yticklabels([])
        if i < h - cols:
            ax.set_xlabel("")
            ax.set_xticklabels([])
    fig.colorbar(axes.flat[0].images[0], ax=list(fig.axes), shrink=0.8,
                 label=i18n.tr("attention_weights", code))
    if title:
        fig.suptitle(title)
    return fig


def heads_widget_model(qkv_weight: torch.Tensor, n_heads: int) -> MultiHeadAttention:
    """``MultiHeadAttention(16, n_heads)`` holding the *same* packed ``qkv_weight`` (3·16, 16) for every h,
    no biases, W^O = identity.

    Only the cut into heads changes with ``n_heads``, which is the point of the widget: same parameters, same
    cost, a different number of attention patterns.
    """
    if n_heads not in divisors(D_MODEL):
        raise ValueError(f"n_heads={n_heads} does not divide d_model={D_MODEL}: choose one of "
                         f"{divisors(D_MODEL)}")
    if tuple(qkv_weight.shape) != (3 * D_MODEL, D_MODEL):
        raise ValueError(f"qkv_weight must be the packed (3·{D_MODEL}, {D_MODEL}) = {(3 * D_MODEL, D_MODEL)} "
                         f"matrix of qkv_proj.weight, got {tuple(qkv_weight.shape)}")
    mha = MultiHeadAttention(D_MODEL, n_heads)
    with torch.no_grad():
        mha.qkv_proj.weight.copy_(qkv_weight)
        mha.qkv_proj.bias.zero_()
        mha.out_proj.weight.copy_(torch.eye(D_MODEL))
        mha.out_proj.bias.zero_()
    return mha


def _render_heads(n_heads: int, x: torch.Tensor, tokens, qkv_weight: torch.Tensor, lang=None):
    code = viz.use_language(lang)
    mha = heads_widget_model(qkv_weight, n_heads)
    with torch.no_grad():
        mha(x, need_weights=True)
    weights = mha.last_weights[0]                                   # (h, T, T)
    n_params = sum(p.numel() for p in mha.parameters())
    title = i18n.pick({"en": "h = {h} heads, d_k = {d} each; {p} parameters",
                       "zh": "h = {h} 个注意力头，每个 d_k = {d}；参数共 {p} 个"}, code).format(
        h=n_heads, d=mha.d_k, p=n_params)
    fig = plot_heads(weights, tokens, title=title, lang=code)
    state = {"n_heads": n_heads, "d_k": mha.d_k, "n_params": n_params, "weights": weights.numpy(),
             "entropy": head_entropies(weights[None]).numpy(), "tokens": list(tokens)}
    return fig, state


def build_heads_widget(x: torch.Tensor, tokens, qkv_weight: torch.Tensor, n_heads: int = 4):
    """Slider over the divisors of d_model = 16: the notebook's hand-built projections ``qkv_weight`` (the packed
    ``qkv_proj.weight``) cut into h heads, applied to the sentence ``x`` (1, T, 16) with labels ``tokens``:
    per-head heatmaps, d_k and the (constant) parameter count."""
    import functools

    import ipywidgets as widgets

    from ...widgets import LessonWidget

    choices = divisors(D_MODEL)
    if n_heads not in choices:
        raise ValueError(f"n_heads={n_heads} is not one of the slider's values {choices}")
    heads_widget_model(qkv_weight, n_heads)                          # a wrong shape fails here, not in a render
    x, qkv_weight = x.detach().clone(), qkv_weight.detach().clone()  # later cells cannot change the widget
    controls = {"n_heads": widgets.SelectionSlider(
        options=choices, value=n_heads, continuous_update=False, style={"description_width": "initial"},
        description=i18n.pick({"en": "heads h", "zh": "注意力头数 h"}))}
    render = functools.partial(_render_heads, x=x, tokens=list(tokens), qkv_weight=qkv_weight)
    return LessonWidget(controls, render,
                        title={"en": "The hand-built projections, cut into h heads (d_model = 16)",
                               "zh": "手工搭建的投影矩阵，切成 h 个注意力头（d_model = 16）"})
