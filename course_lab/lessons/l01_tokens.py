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
    fail,
    fresh_generator,
    fresh_int,
    never_raises,
    number_problem,
    passed,
    report,
    run_check,
    say,
    tensor_close,
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


def _embedding_cases():
    g = fresh_generator()
    E = torch.randn(7, 4, generator=g)
    return [(torch.tensor([3, 0, 6]), E), (torch.tensor([[1, 1, 2], [5, 4, 0]]), E),
            (torch.tensor([2]), torch.randn(3, 6, generator=g))]


# What "looking rows up" can be written as: indexing, and the functions that index for you.
_ROW_LOOKUPS = {
    torch.Tensor.__getitem__: "E[...]", torch.Tensor.index_select: "index_select", torch.index_select: "index_select",
    torch.nn.functional.embedding: "F.embedding / nn.Embedding", torch.embedding: "torch.embedding",
    torch.Tensor.gather: "gather", torch.gather: "gather", torch.Tensor.take: "take", torch.take: "take",
    torch.Tensor.take_along_dim: "take_along_dim", torch.take_along_dim: "take_along_dim",
    torch.Tensor.select: "select", torch.select: "select", torch.Tensor.narrow: "narrow", torch.narrow: "narrow",
    torch.Tensor.unbind: "unbind / iterating over E", torch.unbind: "unbind", torch.Tensor.split: "split",
    torch.Tensor.chunk: "chunk", torch.Tensor.tolist: "tolist", torch.Tensor.numpy: "numpy",
}
_lookups_seen: list[str] = []


def _picks_rows(func, args) -> bool:
    """A lookup of rows: any of :data:`_ROW_LOOKUPS`, except indexing that only adds axes or slices (E[None])."""
    if func is not torch.Tensor.__getitem__:
        return func in _ROW_LOOKUPS
    index = args[1] if isinstance(args[1], tuple) else (args[1],)
    return any(not (i is None or i is Ellipsis or isinstance(i, slice)) for i in index)


class _UnindexedMatrix(torch.Tensor):
    """E as exercise 1 hands it to the student: an ordinary tensor that notes every row lookup done on it (or on
    a copy of it: the results of its operations are of this class too)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if _picks_rows(func, args):
            _lookups_seen.append(_ROW_LOOKUPS[func])
        return super().__torch_function__(func, types, args, kwargs or {})


def _plain(x):
    return x.as_subclass(torch.Tensor) if isinstance(x, _UnindexedMatrix) else x


@never_raises
def check_one_hot_lookup(fn: Callable, lang: str | None = None) -> bool:
    """Exercise 1: ``one_hot_lookup(ids, E)`` equals ``E[ids]`` for 1-D and 2-D ids, without looking rows up.

    E is handed over as :class:`_UnindexedMatrix`, which records indexing, ``index_select``, ``F.embedding``
    (and ``nn.Embedding``), ``gather`` and the like: the exercise is the product with one-hot vectors.
    """
    for ids, E in _embedding_cases():
        _lookups_seen.clear()
        ok, got = attempt(fn, ids.clone(), E.clone().as_subclass(_UnindexedMatrix))
        used = sorted(set(_lookups_seen))
        _lookups_seen.clear()
        if not ok:
            return False
        if used:
            return fail(f"Your function looks rows of E up ({', '.join(used)}): that is the lookup this exercise "
                        "rewrites. Build one-hot vectors with F.one_hot(ids, E.shape[0]) and multiply them by E: "
                        "the product selects the same rows, which shows that an embedding is a linear layer.",
                        f"你的函数直接按行取出了 E 的内容（{'、'.join(used)}）：这正是本题要改写的查表操作。请用 "
                        "F.one_hot(ids, E.shape[0]) 构造独热向量，再乘以 E：乘积选出的是同样的行，这说明嵌入层就是"
                        "一个线性层。", lang)
        if not tensor_close(_plain(got), E[ids], f"for ids of shape {tuple(ids.shape)}",
                            f"ids 形状为 {tuple(ids.shape)} 时", atol=1e-5, rtol=1e-5):
            return False
    return passed("Correct: one-hot rows times E select exactly the rows E[ids].",
                  "正确：独热行向量乘以 E，恰好选出 E[ids] 这些行。", lang)


_AUTOGRAD = [(torch.autograd, "backward"), (torch.autograd, "grad"), (torch.func, "grad"), (torch.func, "vjp")]


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
        with watching(fn, _AUTOGRAD) as calls:
            ok, got = attempt(fn, ids.clone(), grad_out.clone(), vocab_size)
        if not ok:
            return False
        if calls:
            return fail("Your function asked autograd for the gradient (.backward() or torch.autograd.grad): the "
                        "exercise is to derive it. X = one_hot(ids) @ E, so dL/dE = one_hot(ids)ᵀ @ dL/dX.",
                        "你的函数让 autograd 替你求了梯度（.backward() 或 torch.autograd.grad）：本题要你自己推导。"
                        "X = one_hot(ids) @ E，所以 dL/dE = one_hot(ids)ᵀ @ dL/dX。", lang)
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
    widths = (16, 64, 512, 2 * fresh_int(4, 513, fresh_generator()))       # the last one drawn afresh
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
