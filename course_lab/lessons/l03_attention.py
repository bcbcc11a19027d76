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
import torch.func  # noqa: F401  (watched by check_softmax_jacobian)

import course_utils
import course_utils.attention
from course_utils.attention import attention_with_weights

from .. import i18n, viz
from ..exercises import (
    attempt,
    fail,
    fresh_generator,
    fresh_int,
    has_python_loop,
    never_raises,
    number_problem,
    passed,
    report,
    say,
    tensor_close,
    watching,
)

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


_AUTOGRAD = ((torch.autograd.functional, "jacobian"), (torch.autograd, "grad"), (torch.Tensor, "backward"),
             (torch.func, "jacrev"), (torch.func, "jacfwd"))


def _reference_jacobian(a: torch.Tensor) -> torch.Tensor:
    """∂a_i/∂s_j = a_i (δ_ij − a_j), for every row of a (…, T): (…, T, T)."""
    return torch.diag_embed(a) - a.unsqueeze(-1) * a.unsqueeze(-2)


@never_raises
def check_softmax_jacobian(fn) -> bool:
    """Exercise 1: ``fn(a)`` maps softmax rows a (…, T) to their Jacobians (…, T, T), written from the formula."""
    g = fresh_generator()
    cases = [torch.softmax(torch.randn(5, generator=g), -1),
             torch.softmax(torch.randn(2, 3, 6, generator=g) * 3, -1)]
    cases[1][0, 0] = torch.nn.functional.one_hot(torch.tensor(2), 6).float()   # a saturated row
    for a in cases:
        with watching(fn, _AUTOGRAD) as calls:
            ok, got = attempt(fn, a.clone())
        if not ok:
            return False
        if calls:
            return fail("You asked autograd for the Jacobian: the exercise asks you to write a_i(δ_ij − a_j) "
                        "yourself, as one tensor expression for every row at once (autograd is what we "
                        "check it against).",
                        "你让 autograd 算出了雅可比矩阵：本题要求你亲手写出 a_i(δ_ij − a_j)，用一个张量表达式一次算出"
                        "所有行（autograd 是我们用来核对的）。")
        if has_python_loop(fn):
            return fail("Your function loops over the rows in Python: write a_i(δ_ij − a_j) as one tensor "
                        "expression (torch.diag_embed and an outer product by broadcasting) for every row at once.",
                        "你的函数用 Python 循环逐行计算：请把 a_i(δ_ij − a_j) 写成一个张量表达式（torch.diag_embed "
                        "加上用广播算出的外积），一次算出所有行。")
        want = _reference_jacobian(a)
        if not tensor_close(got, want, f"Jacobian of a row batch {tuple(a.shape)}",
                            f"形状为 {tuple(a.shape)} 的一批行的雅可比矩阵"):
            if isinstance(got, torch.Tensor) and got.shape == want.shape and \
                    torch.allclose(got.detach(), torch.diag_embed(a * (1 - a)), atol=1e-6):
                say("Hint: that is only the diagonal a_i(1 − a_i), as for a sigmoid. A softmax output depends on "
                    "every score: off the diagonal ∂a_i/∂s_j = −a_i a_j.",
                    "提示：你只写了对角线 a_i(1 − a_i)，就像 sigmoid 那样。softmax 的每个输出都依赖所有分数："
                    "非对角线上 ∂a_i/∂s_j = −a_i a_j。")
            return False
    saturated = float(_reference_jacobian(cases[1][0, 0]).abs().max())
    uniform = float(_reference_jacobian(torch.full((6,), 1 / 6)).abs().max())
    return passed(f"Correct. Largest entry of the Jacobian: uniform row {uniform:.3f}, one-hot row {saturated:.0f}: "
                  "a saturated row passes no gradient back to its scores.",
                  f"正确。雅可比矩阵的最大元素：均匀的行为 {uniform:.3f}，独热的行为 {saturated:.0f}："
                  "饱和的行不会把梯度传回它的分数。")


@never_raises
def check_unit_scale(fn) -> bool:
    """Exercise 2: ``fn(d_k, var_q, var_k)`` must return c with Var(c · q·k) = 1, i.e. 1/√(d_k var_q var_k)."""
    g = fresh_generator()                               # the last case is drawn afresh: no table passes
    drawn = (fresh_int(2, 1025, g), round(0.1 + 5 * float(torch.rand((), generator=g)), 3),
             round(0.1 + 5 * float(torch.rand((), generator=g)), 3))
    cases = ((64, 1.0, 1.0), (64, 4.0, 1.0), (16, 0.25, 9.0), (512, 2.0, 0.5), drawn)
    for d_k, var_q, var_k in cases:
        ok, got = attempt(fn, d_k, var_q, var_k)
        if not ok:
            return False
        want = 1.0 / math.sqrt(d_k * var_q * var_k)
        if number_problem(got, want) is None:
            continue
        if var_q * var_k != 1.0 and number_problem(got, 1.0 / math.sqrt(d_k)) is None:
            return fail(f"For d_k={d_k}, var_q={var_q}, var_k={var_k} you returned 1/√d_k: that factor assumes "
                        "unit-variance entries. Redo the derivation: what is Var(q_i k_i) now?",
                        f"d_k={d_k}、var_q={var_q}、var_k={var_k} 时你返回的是 1/√d_k：这个因子假定各分量方差为 1。"
                        "重新推导一遍：现在 Var(q_i k_i) 是多少？")
        if number_problem(got, 1.0 / (math.sqrt(d_k) * var_q * var_k)) is None:
            say("Hint: divide by the standard deviation of q·k, not by a variance: √(var_q var_k) appears.",
                "提示：要除以 q·k 的标准差，而不是方差：出现的是 √(var_q var_k)。")
        return report(number_problem(got, want), f"d_k={d_k}, var_q={var_q}, var_k={var_k}",
                      f"d_k={d_k}、var_q={var_q}、var_k={var_k} 时")
    g = fresh_generator()
    d_k, var_q, var_k = 256, 4.0, 0.25 * 9
    q = torch.randn(20_000, d_k, generator=g) * math.sqrt(var_q)
    k = torch.randn(20_000, d_k, generator=g) * math.sqrt(var_k)
    measured = float(((q * k).sum(-1) * float(fn(d_k, var_q, var_k))).var())
    return passed(f"Correct. Measured with your factor (d_k={d_k}, var_q={var_q}, var_k={var_k}): "
                  f"Var = {measured:.3f}.",
                  f"正确。用你的因子实测（d_k={d_k}，var_q={var_q}，var_k={var_k}）：方差为 {measured:.3f}。")


_LIBRARY_ATTENTION = ((course_utils.attention, "attention_with_weights"), (course_utils, "attention_with_weights"),
                      (torch.nn.functional, "scaled_dot_product_attention"))


@never_raises
def check_masked_attention(fn) -> bool:
    """Exercise 3: ``fn(q, k, v, mask)`` (mask True = may attend) must return ``(out, weights)``."""
    q, k, v = _qkv(fresh_int(0, 2**31, fresh_generator()), (2, 5, 4), t_k=6)   # fresh values each run
    mask = torch.ones(2, 5, 6, dtype=torch.bool)
    mask[0, :, 4:] = False                  # the last two keys of the first sequence are padding
    mask[1] = torch.tril(torch.ones(5, 6, dtype=torch.bool), diagonal=1)
    want_out, want_w = attention_with_weights(q, k, v, mask)
    with watching(fn, _LIBRARY_ATTENTION) as calls:
        ok, got = attempt(fn, q, k, v, mask)
    if not ok:
        return False
    if calls:
        return fail(f"You called {calls[0]}: the exercise asks you to add the mask to your own attention "
                    "(one line before the softmax), not to hand it to a library function.",
                    f"你调用了 {calls[0]}：本题要求你在自己写的注意力里加上掩码（softmax 之前多一行），"
                    "而不是把掩码交给库函数。")
    if not (isinstance(got, tuple) and len(got) == 2):
        return fail("Return a pair (out, weights).", "请返回一个二元组 (out, weights)。")
    if not tensor_close(got[1], want_w, "weights", "注意力权重"):
        if isinstance(got[1], torch.Tensor) and got[1].shape == want_w.shape:
            w = got[1].detach()
            if float(w[mask].sum()) < float(w[~mask].sum()):       # most weight where attending is forbidden
                say("Hint: your weights sit mostly where the mask is False. In this course True means "
                    "\"may attend\" (as in F.scaled_dot_product_attention); PyTorch's key_padding_mask uses "
                    "the opposite convention. Fill the scores where ~mask.",
                    "提示：你的权重大多落在掩码为 False 的地方。本课程中 True 表示“允许关注”"
                    "（与 F.scaled_dot_product_attention 相同），PyTorch 的 key_padding_mask 正好相反。"
                    "应在 ~mask 的位置填充分数。")
            elif (w[~mask] > 1e-6).any():
                say("Hint: masked keys (mask False) must get weight 0: fill their scores with -inf before the "
                    "softmax.",
                    "提示：被遮住的键（mask 为 False）权重必须是 0：在 softmax 之前把它们的分数填成 -inf。")
        return False
    if not tensor_close(got[0], want_out, "out", "输出"):
        return False
    return passed("Correct: the masked keys get exactly zero weight.", "正确：被遮住的键权重恰好为 0。")
