"""Lesson 01 (tokens to vectors): the norm-comparison demo and the exercise checks.

The input of the first layer is ``x_i = E[t_i]·√d_model + PE(pos_i)``. The demo measures why the √d_model
factor is there: with the initialisation of the paper's code (entries of E drawn with std d_model^-0.5, as
for a weight matrix tied to the output layer) a row of E has norm ≈ 1, while a row of the sinusoidal table has
norm √(d_model/2) (every sin/cos pair contributes sin² + cos² = 1). Multiplying by √d_model brings the token
vector to norm ≈ √d_model, the same order as the positions, so neither drowns the other.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from course_utils.positional import sinusoidal_encoding

from .. import i18n, viz
from ..exercises import (
    attempt,
    autograd_routes,
    fail,
    fresh_generator,
    fresh_int,
    never_raises,
    number_problem,
    passed,
    report,
    run_check,
    say,
    tensor_problem,
    watching,
)

# Initialisations the widget offers: the paper's d^-0.5, nn.Embedding's default N(0, 1), GPT-2/BERT's 0.02.
INIT_SCHEMES = {
    "paper": {"en": "d_model^-0.5 (paper, tied with the output layer)",
              "zh": "d_model^-0.5（论文，与输出层共享）"},
    "torch": {"en": "1.0 (nn.Embedding default)", "zh": "1.0（nn.Embedding 默认值）"},
    "gpt2": {"en": "0.02 (GPT-2, BERT)", "zh": "0.02（GPT-2、BERT）"},
}


D_CHOICES = (16, 32, 64, 128, 256, 512, 1024)


def init_std(scheme: str, d_model: int) -> float:
    """The standard deviation of E's entries for one of :data:`INIT_SCHEMES`."""
    if scheme not in INIT_SCHEMES:
        raise ValueError(f"unknown init scheme {scheme!r}: choose one of {sorted(INIT_SCHEMES)}")
    return {"paper": d_model ** -0.5, "torch": 1.0, "gpt2": 0.02}[scheme]


def norm_comparison(d_model: int, std: float, vocab_size: int = 1000, n_positions: int = 128,
                    seed: int = 0) -> dict:
    """Norms of token rows ‖E_t‖ and scaled rows ‖√d·E_t‖ (one per token), and of PE rows (one per position).

    Returns the three arrays, their means and ``ratio`` = mean ‖√d·E_t‖ / mean ‖PE(pos)‖: ≈ √2 with the
    paper's std d^-0.5 (‖√d·E_t‖ ≈ √d, ‖PE‖ = √(d/2)), exactly balanced (≈ 1) with std 1/√(2d) (exercise 3).
    """
    if not isinstance(d_model, int) or d_model < 2:
        raise ValueError(f"d_model must be an int >= 2, got {d_model!r}")
    if not std > 0:
        raise ValueError(f"the init std must be > 0, got {std!r}")
    generator = torch.Generator().manual_seed(seed)
    E = torch.randn(vocab_size, d_model, generator=generator) * std        # (V, C), the paper's N(0, std²)
    token = E.norm(dim=1)                                                  # (V,)
    scaled = (E * math.sqrt(d_model)).norm(dim=1)                           # (V,)
    pe = sinusoidal_encoding(n_positions, d_model).norm(dim=1)             # (n_positions,)
    result = {"token_norms": token.numpy(), "scaled_norms": scaled.numpy(), "pe_norms": pe.numpy()}
    means = {f"{k[:-6]}_mean": float(v.mean()) for k, v in result.items()}
    ratio = means["scaled_mean"] / means["pe_mean"]
    return {**result, **means, "ratio": ratio, "d_model": d_model, "std": std}


_LABELS = {
    "token": {"en": "‖E_t‖ (unscaled)", "zh": "‖E_t‖（未缩放）"},
    "scaled": {"en": "‖√d_model · E_t‖", "zh": "‖√d_model · E_t‖"},
    "pe": {"en": "‖PE(pos)‖", "zh": "‖PE(pos)‖"},
    "norm": {"en": "Vector norm (log scale)", "zh": "向量范数（对数坐标）"},
    "mean_norm": {"en": "Mean norm (log scale)", "zh": "平均范数（对数坐标）"},
    "ratio": {"en": "scaled / PE = {r:.2f}", "zh": "缩放后 / 位置编码 = {r:.2f}"},
}


def plot_norms(token_norms, scaled_norms, pe_norms, d_model: int, std: float, lang: str | None = None):
    """Histogram of the three norm distributions (log x) and a bar chart of their means; the title gives the
    ratio mean ‖√d·E_t‖ / mean ‖PE‖. The norms are computed by the caller (the notebook, or the widget)."""
    code = viz.use_language(lang)
    norms = {key: viz.to_numpy(v, f"{key}_norms").ravel()
             for key, v in (("token", token_norms), ("scaled", scaled_norms), ("pe", pe_norms))}
    fig = viz.new_figure((10, 3.6))
    ax_hist, ax_bar = fig.subplots(1, 2, width_ratios=(2, 1))
    all_norms = np.concatenate(list(norms.values()))
    bins = np.geomspace(all_norms.min() * 0.8, all_norms.max() * 1.25, 60)
    colors = {"token": "tab:gray", "scaled": "tab:blue", "pe": "tab:orange"}
    for key in ("token", "scaled", "pe"):
        ax_hist.hist(norms[key], bins=bins, alpha=0.7, color=colors[key], label=i18n.pick(_LABELS[key], code))
    ax_hist.set_xscale("log")
    ax_hist.set_xlabel(i18n.pick(_LABELS["norm"], code))
    ax_hist.set_ylabel(i18n.tr("count", code))
    ax_hist.legend(fontsize=8)
    means = [float(norms[k].mean()) for k in ("token", "scaled", "pe")]
    bars = ax_bar.bar([0, 1, 2], means, color=list(colors.values()))
    ax_bar.bar_label(bars, fmt="%.3g", fontsize=9)
    ax_bar.set_xticks([0, 1, 2], labels=["‖E_t‖", "‖√d·E_t‖", "‖PE‖"])
    ax_bar.set_yscale("log")
    ax_bar.set_ylabel(i18n.pick(_LABELS["mean_norm"], code))
    ax_bar.set_title(i18n.pick(_LABELS["ratio"], code).format(r=means[1] / means[2]), fontsize=10)
    fig.suptitle(f"d_model = {d_model}, std = {std:.3g}")
    return fig


def render_norms(d_model: int, scheme: str, lang: str | None = None):
    """The widget's render: :func:`norm_comparison` for one width and scheme, drawn by :func:`plot_norms`."""
    data = norm_comparison(d_model, init_std(scheme, d_model))
    fig = plot_norms(data["token_norms"], data["scaled_norms"], data["pe_norms"], d_model, data["std"], lang)
    state = {k: v for k, v in data.items() if not k.endswith("_norms")}
    return fig, state


def build_norm_widget(lang: str | None = None):
    """Choose d_model and E's initialisation; see the norms of token rows, scaled rows and PE rows."""
    from ..widgets import LessonWidget, dropdown

    controls = {
        "d_model": dropdown("d_model", list(D_CHOICES), value=64, label="d_model", lang=lang),
        "scheme": dropdown("scheme", [(label, key) for key, label in INIT_SCHEMES.items()], value="paper",
                           label={"en": "Init std of E", "zh": "E 的初始化标准差"}, lang=lang),
    }
    return LessonWidget(controls, lambda d_model, scheme: render_norms(d_model, scheme, lang),
                        title={"en": "Token vectors vs positional encodings",
                               "zh": "词元向量与位置编码的大小"})


# --- exercises ----------------------------------------------------------------------------------------------


def _one_hot_costs(n_tokens: int, vocab_size: int, d_model: int) -> tuple[int, int]:
    """The check's reference: multiply-adds of ``one_hot @ E`` for ``n_tokens`` tokens (each output entry is a dot
    product of length |V|) and bytes of the float32 one-hot matrix ``(n_tokens, |V|)``."""
    return n_tokens * vocab_size * d_model, 4 * n_tokens * vocab_size


def _pair(got) -> tuple | None:
    if isinstance(got, (tuple, list)) and len(got) == 2:
        return tuple(got)
    return None


@never_raises
def check_one_hot_costs(fn: Callable, lang: str | None = None) -> bool:
    """Exercise 1: ``one_hot_costs(n_tokens, vocab_size, d_model) -> (multiply_adds, bytes)`` of computing the
    embeddings as ``F.one_hot(ids, |V|).float() @ E``, counted from the shapes: several drawn sizes, and the
    typical miscounts (the lookup's cost, one token's, E's size, int64 or element counts) named."""
    g = fresh_generator()
    drawn = [(fresh_int(1, 5000, g), fresh_int(2, 60_000, g), fresh_int(1, 2049, g)) for _ in range(3)]
    sizes = [(3, 7, 4), *drawn, (8 * 1024, 50_257, 768)]
    with watching(fn, [(torch.nn.functional, "one_hot")]) as calls:
        ok, got = attempt(fn, *sizes[0])
    if not ok:
        return False
    if calls:
        return fail("You built the one-hot matrix to measure it. Count from the shapes instead: at GPT-2's size "
                    "the matrix alone takes gigabytes.",
                    "你构造了独热矩阵再去测量。请直接由形状来数：在 GPT-2 的规模下，光这个矩阵就要占好几 GB。", lang)
    for n, V, d in sizes:
        ok, got = attempt(fn, n, V, d)
        if not ok:
            return False
        pair, (macs, size) = _pair(got), _one_hot_costs(n, V, d)
        if pair is None:
            return fail("Return a pair (multiply_adds, bytes).", "请返回一个二元组 (multiply_adds, bytes)。", lang)
        if number_problem(pair[0], macs, rel=1e-9) is not None:
            value = pair[0]
            if number_problem(value, n * d) is None:
                return fail("n_tokens × d_model is what the lookup copies. The product computes every output entry "
                            "as a dot product over all |V| entries of the one-hot row, zeros included.",
                            "n_tokens × d_model 是查表要复制的数的个数。矩阵乘法的每个输出元素都是独热行全部 |V| 个"
                            "元素（包括那些 0）参与的点积。", lang)
            if number_problem(value, V * d) is None:
                return fail("|V| × d_model is the cost of one token: the batch has n_tokens of them.",
                            "|V| × d_model 只是一个词元的代价：这一批有 n_tokens 个词元。", lang)
            return report(number_problem(value, macs, rel=1e-9), f"multiply-adds for ({n}, {V}, {d})",
                          f"({n}, {V}, {d}) 的乘加次数", lang)
        if number_problem(pair[1], size, rel=1e-9) is not None:
            value = pair[1]
            for wrong, en, zh in ((n * V, "that counts the entries: each float32 takes 4 bytes",
                                   "这数的是元素个数：每个 float32 占 4 字节"),
                                  (8 * n * V, "8 bytes is F.one_hot's int64; the product needs the float32 copy",
                                   "8 字节是 F.one_hot 返回的 int64；做乘法用的是转换成 float32 后的副本"),
                                  (4 * V * d, "that is the size of E itself, not of the one-hot matrix (n_tokens, |V|)",
                                   "这是 E 本身的大小，不是独热矩阵 (n_tokens, |V|) 的大小")):
                if number_problem(value, wrong) is None:
                    return fail(f"Bytes: {en}.", f"字节数：{zh}。", lang)
            return report(number_problem(value, size, rel=1e-9), f"bytes for ({n}, {V}, {d})",
                          f"({n}, {V}, {d}) 的字节数", lang)
    n, V, d = sizes[-1]
    macs, size = _one_hot_costs(n, V, d)
    return passed(f"Correct. GPT-2, one batch of {n:,} tokens: {macs:.3g} multiply-adds, {V:,} times the "
                  f"{n * d:,} numbers the lookup copies, and all but 1 in {V:,} of them multiply by 0; the one-hot "
                  f"matrix takes {size / 1e9:.2f} GB, {n / d:.1f} times E itself ({4 * V * d / 1e6:.0f} MB), "
                  "because the batch has more tokens than E has columns.",
                  f"正确。GPT-2 的一个批次有 {n:,} 个词元：{macs:.3g} 次乘加，是查表要复制的 {n * d:,} 个数的 "
                  f"{V:,} 倍，而且每 {V:,} 次里只有 1 次不是乘以 0；独热矩阵占 {size / 1e9:.2f} GB，是 E 本身"
                  f"（{4 * V * d / 1e6:.0f} MB）的 {n / d:.1f} 倍，因为这一批的词元数比 E 的列数还多。", lang)




def _gradient_cases():
    g = fresh_generator()
    ids = [torch.tensor([[4, 7, 4, 0, 0], [2, 4, 5, 3, 0]]),       # 4 three times, <pad> (0) three times
           torch.tensor([[1, 2, 3]]), torch.tensor([[5, 5], [5, 5]])]
    return [(x, torch.randn(*x.shape, 6, generator=g), 9) for x in ids]


@never_raises
def check_embedding_grad(fn: Callable, lang: str | None = None) -> bool:
    """Exercise 2: ``embedding_grad(ids, grad_out, vocab_size)`` = ∂L/∂E = one_hot(ids)ᵀ · ∂L/∂X, without autograd.

    X = one_hot(ids)·E, so every use of token t adds its ∂L/∂X row to row t of ∂L/∂E: tokens used several times
    sum their gradients, absent tokens get zero rows. Calling autograd (``backward``, ``torch.autograd.grad``) is
    the forbidden shortcut.
    """
    for ids, grad_out, vocab_size in _gradient_cases():
        with watching(fn, autograd_routes()) as calls:
            ok, got = attempt(fn, ids.clone(), grad_out.clone(), vocab_size)
        if calls:
            return fail("Your function asked autograd for the gradient (.backward(), torch.autograd or "
                        "torch.func): the exercise is to derive it. X = one_hot(ids) @ E, so "
                        "dL/dE = one_hot(ids)ᵀ @ dL/dX.",
                        "你的函数让 autograd 替你求了梯度（.backward()、torch.autograd 或 torch.func）："
                        "本题要你自己推导。"
                        "X = one_hot(ids) @ E，所以 dL/dE = one_hot(ids)ᵀ @ dL/dX。", lang)
        if not ok:
            return False
        C = grad_out.shape[-1]
        want = torch.zeros(vocab_size, C).index_add_(0, ids.flatten(), grad_out.reshape(-1, C))   # (|V|, C)
        problem = tensor_problem(got, want, atol=1e-5, rtol=1e-5)
        if problem is None:
            continue
        if isinstance(got, torch.Tensor) and got.shape == want.shape:
            counts = torch.bincount(ids.flatten(), minlength=vocab_size)
            right = ((got.detach().to(want.dtype) - want).abs() < 1e-4).all(-1)                 # (|V|,)
            if right[counts <= 1].all() and not right[counts > 1].all():
                return fail("The rows of tokens used once are right, those of tokens used several times are not: "
                            "each use adds its gradient, so the row gets the sum (dE[ids] = g keeps only one of "
                            "them; index_add_ or the one-hot product adds them).",
                            "只出现一次的词元，对应的行是对的；出现多次的词元则不对：每出现一次都要把梯度加上去，所以"
                            "这一行应该是它们的和（dE[ids] = g 只会留下其中一个；index_add_ 或独热乘积才会相加）。",
                            lang)
        shape = tuple(ids.shape)
        return report(problem, f"Not yet, for ids of shape {shape}", f"还不对，ids 形状为 {shape} 时", lang)
    return passed("Correct: every use of a token adds its gradient to the token's row; unused rows stay zero "
                  "(and <pad> collects a gradient unless padding_idx stops it).",
                  "正确：词元每出现一次，就把梯度加到它的那一行；没用到的行保持为零（除非设置 padding_idx，"
                  "否则 <pad> 也会收到梯度）。", lang)


@never_raises
def check_balanced_std(fn: Callable, lang: str | None = None) -> bool:
    """Exercise 3: the init std for which scaled token rows and PE rows have the same mean squared norm."""
    g, drawn = fresh_generator(), 16
    while drawn in (16, 64, 512):  # the last width drawn afresh among ~4,000, never one of the fixed three
        drawn = 2 * fresh_int(4, 4097, g)
    widths = (16, 64, 512, drawn)
    answers = []
    for d in widths:
        ok, got = attempt(fn, d)
        if not ok:
            return False
        answers.append(got)
    try:
        constant = len({float(a) for a in answers}) == 1
    except (TypeError, ValueError, RuntimeError):
        constant = False
    if constant:
        return fail(f"Your function returns {float(answers[0]):.4g} for every d_model: a number that suits one "
                    "width. The balance depends on d_model (‖PE‖² = d_model/2), so σ must be a formula in d_model.",
                    f"无论 d_model 是多少，你的函数都返回 {float(answers[0]):.4g}：这只适合某一个宽度。平衡条件与 "
                    "d_model 有关（‖PE‖² = d_model/2），所以 σ 必须是 d_model 的公式。", lang)
    cases = [((d,), 1.0 / math.sqrt(2 * d)) for d in widths]   # std²·d² = ‖PE‖² = d/2
    if not run_check(fn, cases, number_problem, lang):
        return False
    ratio = norm_comparison(64, float(answers[1]), vocab_size=4000)["ratio"]
    say(f"Measured with d_model = 64: ‖√d·E_t‖ / ‖PE‖ = {ratio:.3f}.",
        f"在 d_model = 64 时实测：‖√d·E_t‖ / ‖PE‖ = {ratio:.3f}。", lang)
    return True
