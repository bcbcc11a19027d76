"""Lesson 04 · multi-head attention: a hand-built four-head model, the heads widget and the exercise checks.

The notebook writes the split / attend / merge steps itself and measures the seed deck's two mistakes; this
module holds the hand-made sentence model whose heads the lesson plots, the number-of-heads widget and the
functions that check the exercises (they never raise, so the notebook always runs to the end).
"""

from __future__ import annotations

import math

import torch

from course_utils.attention import MultiHeadAttention

from .. import i18n, viz
from ..exercises import attempt, never_raises, passed, say, tensor_close
from .l03_attention import ROLES, SEEKS, SENTENCES, row_entropy

# ----------------------------------------------------------------------------------------------------
# A hand-built multi-head attention: four heads, four different jobs
# ----------------------------------------------------------------------------------------------------

D_MODEL, N_HEADS = 16, 4
THETA = 2 * math.pi / 8            # angle between two neighbouring positions of the 2-D position code

HEAD_JOBS = (
    {"en": "looks for the word type it needs", "zh": "寻找自己需要的词类"},
    {"en": "looks at the previous word", "zh": "看前一个词"},
    {"en": "looks at words of its own type", "zh": "看同一词类的词"},
    {"en": "looks at the next word", "zh": "看后一个词"},
)


def sentence_features(lang: str | None = None):
    """Tokens and their inputs ``x`` (1, T, 16) for the lesson's six-word sentence.

    Columns 0–3: one-hot word type (determiner, noun, verb, preposition) — the slice of head 1;
    columns 4–5: the position as an angle, (cos pθ, sin pθ) — in the slice of head 2;
    columns 6–15: a small word-specific part.
    """
    words = i18n.pick(SENTENCES, lang)
    g = torch.Generator().manual_seed(4)
    identity = {w: 0.3 * torch.randn(10, generator=g) for w, _ in sorted(set(words))}
    x = torch.zeros(1, len(words), D_MODEL)
    for p, (word, role) in enumerate(words):
        x[0, p, ROLES.index(role)] = 1.0
        x[0, p, 4:6] = torch.tensor([math.cos(p * THETA), math.sin(p * THETA)])
        x[0, p, 6:] = identity[word]
    return [w for w, _ in words], x


def _rotation(angle: float) -> torch.Tensor:
    """2×2 matrix R with [cos a, sin a] R = [cos(a + angle), sin(a + angle)] (row vectors, x W convention)."""
    c, s = math.cos(angle), math.sin(angle)
    return torch.tensor([[c, s], [-s, c]])


def handcrafted_mha(strength: float = 8.0, position_strength: float = 16.0) -> MultiHeadAttention:
    """A ``MultiHeadAttention(16, 4)`` whose projections are written by hand (no training).

    In the paper's notation each head has ``W_i^Q, W_i^K ∈ ℝ^{16×4}`` (``q = x W_i^Q``). Head 1 maps a word
    type to the type it looks for, head 2 rotates the position back by one step (so the query of position p
    matches the key of position p − 1), head 3 compares word types, head 4 rotates forward. ``W^V`` and
    ``W^O`` are identities, so each head outputs a weighted average of its own slice of the input.
    """
    d_k = D_MODEL // N_HEADS
    w_q = torch.zeros(N_HEADS, D_MODEL, d_k)        # W_i^Q stacked over the heads
    w_k = torch.zeros(N_HEADS, D_MODEL, d_k)
    for r, role in enumerate(ROLES):
        w_q[0, r, ROLES.index(SEEKS[role])] = strength
        w_k[0, r, r] = 1.0
        w_q[2, r, r] = math.sqrt(strength)
        w_k[2, r, r] = math.sqrt(strength)
    for head, step in ((1, -1), (3, +1)):
        w_q[head, 4:6, 0:2] = position_strength * _rotation(step * THETA)
        w_k[head, 4:6, 0:2] = torch.eye(2)
    mha = MultiHeadAttention(D_MODEL, N_HEADS)
    with torch.no_grad():
        # qkv_proj computes x Wᵀ (F.linear): its weight rows are the *columns* of [W_1^Q | … | W_h^Q].
        mha.qkv_proj.weight[:D_MODEL] = torch.cat(list(w_q), dim=1).T
        mha.qkv_proj.weight[D_MODEL:2 * D_MODEL] = torch.cat(list(w_k), dim=1).T
        mha.qkv_proj.weight[2 * D_MODEL:] = torch.eye(D_MODEL)
        mha.out_proj.weight.copy_(torch.eye(D_MODEL))
        mha.qkv_proj.bias.zero_()
        mha.out_proj.bias.zero_()
    return mha


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


def heads_widget_model(n_heads: int, seed: int = 0, gain: float = 3.0) -> MultiHeadAttention:
    """``MultiHeadAttention(16, n_heads)`` with the *same* full-width W^Q, W^K, W^V, W^O for every h.

    Only the cut into heads changes with ``n_heads``, which is the point of the widget: same parameters, same
    cost, a different number of attention patterns.
    """
    if n_heads not in divisors(D_MODEL):
        raise ValueError(f"n_heads={n_heads} does not divide d_model={D_MODEL}: choose one of "
                         f"{divisors(D_MODEL)}")
    g = torch.Generator().manual_seed(seed)
    mha = MultiHeadAttention(D_MODEL, n_heads)
    with torch.no_grad():
        mha.qkv_proj.weight.copy_(gain * torch.randn(3 * D_MODEL, D_MODEL, generator=g) / math.sqrt(D_MODEL))
        mha.out_proj.weight.copy_(torch.randn(D_MODEL, D_MODEL, generator=g) / math.sqrt(D_MODEL))
    return mha


def _render_heads(n_heads: int, lang=None):
    code = viz.use_language(lang)
    tokens, x = sentence_features(code)
    mha = heads_widget_model(n_heads)
    with torch.no_grad():
        mha(x, need_weights=True)
    weights = mha.last_weights[0]                                   # (h, T, T)
    n_params = sum(p.numel() for p in mha.parameters())
    title = i18n.pick({"en": "h = {h} heads, d_k = {d} each; {p} parameters",
                       "zh": "h = {h} 个注意力头，每个 d_k = {d}；参数共 {p} 个"}, code).format(
        h=n_heads, d=mha.d_k, p=n_params)
    fig = plot_heads(weights, tokens, title=title, lang=code)
    state = {"n_heads": n_heads, "d_k": mha.d_k, "n_params": n_params, "weights": weights.numpy(),
             "entropy": head_entropies(weights[None]).numpy(), "tokens": tokens}
    return fig, state


def build_heads_widget(n_heads: int = 4):
    """Slider over the divisors of d_model = 16: per-head heatmaps, d_k and the (constant) parameter count."""
    import ipywidgets as widgets

    from ..widgets import LessonWidget

    choices = divisors(D_MODEL)
    if n_heads not in choices:
        raise ValueError(f"n_heads={n_heads} is not one of the slider's values {choices}")
    controls = {"n_heads": widgets.SelectionSlider(
        options=choices, value=n_heads, continuous_update=False, style={"description_width": "initial"},
        description=i18n.pick({"en": "heads h", "zh": "注意力头数 h"}))}
    return LessonWidget(controls, _render_heads,
                        title={"en": "Same projections, cut into h heads (d_model = 16)",
                               "zh": "同一组投影矩阵，切成 h 个注意力头（d_model = 16）"})


# ----------------------------------------------------------------------------------------------------
# Exercise checks: print a verdict, return True / False, never raise
# ----------------------------------------------------------------------------------------------------

def _reference_split(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    b, t, d = x.shape
    return x.view(b, t, n_heads, d // n_heads).transpose(1, 2)


def _reference_merge(x: torch.Tensor) -> torch.Tensor:
    b, h, t, d_k = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d_k)


@never_raises
def check_split_heads(fn) -> bool:
    """Exercise 1: ``fn(x, n_heads)``: (B, T, d_model) → (B, h, T, d_k), head i = the columns of slice i."""
    x = torch.arange(2 * 3 * 8, dtype=torch.float32).reshape(2, 3, 8)
    ok, got = attempt(fn, x.clone(), 4)
    if not ok:
        return False
    want = _reference_split(x, 4)
    if not tensor_close(got, want, "split_heads", "split_heads"):
        if isinstance(got, torch.Tensor) and got.shape == want.shape and torch.equal(got, x.view(2, 4, 3, 2)):
            say("Hint: x.view(B, h, T, d_k) mixes positions into the heads. View as (B, T, h, d_k) first, "
                "then swap the T and h axes with .transpose(1, 2).",
                "提示：x.view(B, h, T, d_k) 会把不同位置的数据混进同一个头。应先 view 成 (B, T, h, d_k)，"
                "再用 .transpose(1, 2) 交换 T 和 h 两个维度。")
        return False
    return passed("Correct: head i holds columns i·d_k … (i+1)·d_k − 1 of every position.",
                  "正确：第 i 个头拿到的是每个位置的第 i·d_k 到 (i+1)·d_k − 1 列。")


@never_raises
def check_merge_heads(fn) -> bool:
    """Exercise 2: ``fn(x)`` must turn (B, h, T, d_k) back into (B, T, h·d_k), the inverse of split_heads."""
    x = torch.arange(2 * 4 * 3 * 2, dtype=torch.float32).reshape(2, 4, 3, 2)
    ok, got = attempt(fn, x.clone())
    if not ok:
        return False
    want = _reference_merge(x)
    if not tensor_close(got, want, "merge_heads", "merge_heads"):
        if isinstance(got, torch.Tensor) and got.shape == want.shape and torch.equal(got, x.reshape(2, 3, 8)):
            say("Hint: reshape without transposing first glues the wrong numbers together. Bring T next to "
                "B with .transpose(1, 2), then .reshape(B, T, h * d_k).",
                "提示：不先转置就 reshape，会把错误的数字拼在一起。先用 .transpose(1, 2) 把 T 换到 B 旁边，"
                "再 .reshape(B, T, h * d_k)。")
        return False
    return passed("Correct: merge_heads(split_heads(x)) gives x back.", "正确：merge_heads(split_heads(x)) 还原出 x。")


@never_raises
def check_mha_forward(fn) -> bool:
    """Exercise 3: ``fn(x, mha)`` must compute ``mha(x)`` from ``mha``'s weights (self-attention, no mask)."""
    with torch.random.fork_rng(devices=[]):         # leave the notebook's random state alone
        torch.manual_seed(0)
        mha = MultiHeadAttention(8, 2).eval()
        with torch.no_grad():
            mha.qkv_proj.bias.normal_()             # non-zero biases: forgetting them is caught
            mha.out_proj.bias.normal_()
        x = torch.randn(2, 5, 8)
    ok, got = attempt(fn, x.clone(), mha)
    if not ok:
        return False
    with torch.no_grad():
        want = mha(x)
    if not tensor_close(got, want, "multi-head attention", "多头注意力"):
        return False
    return passed("Correct: your multi-head attention equals course_utils.MultiHeadAttention.",
                  "正确：你的多头注意力与 course_utils.MultiHeadAttention 的结果一致。")

