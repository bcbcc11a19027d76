"""Lesson 03 · scaled dot-product attention: a tiny sentence, the √d_k demos, a widget, the exercise checks.

The notebook writes attention itself in a few lines; this module holds what would distract from that: the
hand-made sentence whose heatmap the lesson draws, the plots of the √d_k measurements, the d_k / scaling
widget and the functions that check the students' exercises (they never raise, so the notebook always runs
to the end).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from course_utils.attention import attention_with_weights

from .. import i18n, viz
from ..exercises import attempt, fail, never_raises, passed, say, tensor_close

# ----------------------------------------------------------------------------------------------------
# A tiny sentence with hand-made features
# ----------------------------------------------------------------------------------------------------

ROLES = ("det", "noun", "verb", "prep")
# What each word type looks for (its query): determiners and verbs look for nouns, nouns for their verb,
# prepositions for the noun they introduce.
SEEKS = {"det": "noun", "noun": "verb", "verb": "noun", "prep": "noun"}

SENTENCES = {
    "en": [("the", "det"), ("cat", "noun"), ("sat", "verb"), ("on", "prep"), ("the", "det"), ("mat", "noun")],
    "zh": [("这只", "det"), ("猫", "noun"), ("坐", "verb"), ("在", "prep"), ("垫子", "noun"), ("上", "prep")],
}


def tiny_sentence(lang: str | None = None, strength: float = 4.0):
    """Tokens and hand-made matrices for a six-word sentence.

    Returns ``(tokens, X, W_q, W_k)``: ``X`` (T, 8) has a one-hot word type in its first 4 columns and a
    small word-specific part in the last 4; ``W_q`` (8, 4) maps a word type to the type it *looks for*,
    ``W_k`` (8, 4) to the type it *is*. So ``(X W_q)(X W_k)ᵀ`` is ``strength`` where a query finds the type
    it seeks.
    """
    words = i18n.pick(SENTENCES, lang)
    tokens = [w for w, _ in words]
    g = torch.Generator().manual_seed(3)
    identity = {w: 0.3 * torch.randn(4, generator=g) for w in sorted(set(tokens))}
    x = torch.zeros(len(words), 8)
    for i, (word, role) in enumerate(words):
        x[i, ROLES.index(role)] = 1.0
        x[i, 4:] = identity[word]
    w_q = torch.zeros(8, 4)
    w_k = torch.zeros(8, 4)
    for r, role in enumerate(ROLES):
        w_q[r, ROLES.index(SEEKS[role])] = strength
        w_k[r, r] = 1.0
    return tokens, x, w_q, w_k


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

    from ..widgets import LessonWidget, toggle

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

def _qkv(seed: int, shape_q=(2, 3, 5, 4), t_k: int = 6, d_v: int = 3):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*shape_q, generator=g)
    k = torch.randn(*shape_q[:-2], t_k, shape_q[-1], generator=g)
    v = torch.randn(*shape_q[:-2], t_k, d_v, generator=g)
    return q, k, v


@never_raises
def check_attention_weights(fn) -> bool:
    """Exercise 1: ``fn(q, k)`` must return softmax(q kᵀ / √d_k) over the keys, for any leading dimensions."""
    for seed, shape in ((0, (5, 4)), (1, (2, 3, 5, 16))):
        q, k, _ = _qkv(seed, shape)
        ok, got = attempt(fn, q, k)
        if not ok:
            return False
        want = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
        if not tensor_close(got, want, f"q {tuple(q.shape)}", f"q 的形状为 {tuple(q.shape)} 时"):
            if isinstance(got, torch.Tensor) and got.shape == want.shape:
                unscaled = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
                if torch.allclose(got.detach(), unscaled, atol=1e-5):
                    say("Hint: you forgot to divide the scores by √d_k.", "提示：忘了把分数除以 √d_k。")
                elif torch.allclose(got.detach().sum(-2), torch.ones_like(want[..., 0, :]), atol=1e-5):
                    say("Hint: the softmax must run over the keys (dim=-1), so that each row sums to 1.",
                        "提示：softmax 要沿着键的维度（dim=-1）计算，让每一行加起来等于 1。")
            return False
    return passed("Correct: every row is a probability distribution over the keys.",
                  "正确：每一行都是键上的一个概率分布。")


@never_raises
def check_row_entropy(fn) -> bool:
    """Exercise 2: ``fn(weights)`` must return −Σ w log w over the last dim, 0 (not NaN) for a one-hot row."""
    g = torch.Generator().manual_seed(2)
    w = torch.softmax(torch.randn(3, 4, 7, generator=g), dim=-1)
    w[0, 0] = torch.nn.functional.one_hot(torch.tensor(2), 7).float()  # a saturated row: entropy exactly 0
    ok, got = attempt(fn, w.clone())
    if not ok:
        return False
    if isinstance(got, torch.Tensor) and got.shape == w.shape[:-1] and torch.isnan(got).any():
        return fail("Your entropy is NaN for a one-hot row: 0·log 0 must count as 0 (use torch.special.xlogy, "
                    "or clamp w before the log).",
                    "对独热的行你得到了 NaN：0·log 0 应当算作 0"
                    "（可以用 torch.special.xlogy，或者取对数前先 clamp）。")
    if not tensor_close(got, row_entropy(w), "entropy", "熵"):
        return False
    return passed("Correct: a uniform row over T keys has entropy log T, a one-hot row 0.",
                  "正确：T 个键上的均匀分布熵为 log T，独热分布熵为 0。")


@never_raises
def check_masked_attention(fn) -> bool:
    """Exercise 3: ``fn(q, k, v, mask)`` (mask True = may attend) must return ``(out, weights)``."""
    q, k, v = _qkv(4, (2, 5, 4), t_k=6)
    mask = torch.ones(2, 5, 6, dtype=torch.bool)
    mask[0, :, 4:] = False                  # the last two keys of the first sequence are padding
    mask[1] = torch.tril(torch.ones(5, 6, dtype=torch.bool), diagonal=1)
    ok, got = attempt(fn, q, k, v, mask)
    if not ok:
        return False
    if not (isinstance(got, tuple) and len(got) == 2):
        return fail("Return a pair (out, weights).", "请返回一个二元组 (out, weights)。")
    want_out, want_w = attention_with_weights(q, k, v, mask)
    if not tensor_close(got[1], want_w, "weights", "注意力权重"):
        if isinstance(got[1], torch.Tensor) and got[1].shape == want_w.shape and \
                (got[1].detach()[~mask] > 1e-6).any():
            say("Hint: masked keys (mask False) must get weight 0: fill their scores with -inf before the "
                "softmax.",
                "提示：被遮住的键（mask 为 False）权重必须是 0：在 softmax 之前把它们的分数填成 -inf。")
        return False
    if not tensor_close(got[0], want_out, "out", "输出"):
        return False
    return passed("Correct: the masked keys get exactly zero weight.", "正确：被遮住的键权重恰好为 0。")
