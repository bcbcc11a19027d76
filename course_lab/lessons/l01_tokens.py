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
from functools import partial

import numpy as np
import torch

from course_utils.positional import sinusoidal_encoding

from .. import i18n, viz
from ..exercises import never_raises, number_problem, run_check, tensor_problem

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

    Returns the three arrays, their means and ``ratio`` = mean ‖√d·E_t‖ / mean ‖PE(pos)‖ (≈ 1: balanced).
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


def render_norms(d_model: int, scheme: str, lang: str | None = None):
    """Histogram of the three norm distributions (log x) and a bar chart of their means."""
    code = viz.use_language(lang)
    data = norm_comparison(d_model, init_std(scheme, d_model))
    fig = viz.new_figure((10, 3.6))
    ax_hist, ax_bar = fig.subplots(1, 2, width_ratios=(2, 1))
    all_norms = np.concatenate([data["token_norms"], data["scaled_norms"], data["pe_norms"]])
    bins = np.geomspace(all_norms.min() * 0.8, all_norms.max() * 1.25, 60)
    colors = {"token": "tab:gray", "scaled": "tab:blue", "pe": "tab:orange"}
    for key in ("token", "scaled", "pe"):
        ax_hist.hist(data[f"{key}_norms"], bins=bins, alpha=0.7, color=colors[key],
                     label=i18n.pick(_LABELS[key], code))
    ax_hist.set_xscale("log")
    ax_hist.set_xlabel(i18n.pick(_LABELS["norm"], code))
    ax_hist.set_ylabel(i18n.tr("count", code))
    ax_hist.legend(fontsize=8)
    means = [data["token_mean"], data["scaled_mean"], data["pe_mean"]]
    bars = ax_bar.bar([0, 1, 2], means, color=list(colors.values()))
    ax_bar.bar_label(bars, fmt="%.3g", fontsize=9)
    ax_bar.set_xticks([0, 1, 2], labels=["‖E_t‖", "‖√d·E_t‖", "‖PE‖"])
    ax_bar.set_yscale("log")
    ax_bar.set_ylabel(i18n.pick(_LABELS["mean_norm"], code))
    ax_bar.set_title(i18n.pick(_LABELS["ratio"], code).format(r=data["ratio"]), fontsize=10)
    fig.suptitle(f"d_model = {d_model}, std = {data['std']:.3g}")
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


_compare_tensors = partial(tensor_problem, atol=1e-5, rtol=1e-5)


def _embedding_cases():
    g = torch.Generator().manual_seed(1)
    E = torch.randn(7, 4, generator=g)
    return [(torch.tensor([3, 0, 6]), E), (torch.tensor([[1, 1, 2], [5, 4, 0]]), E),
            (torch.tensor([2]), torch.randn(3, 6, generator=g))]


@never_raises
def check_one_hot_lookup(fn: Callable, lang: str | None = None) -> bool:
    """Exercise 1: ``one_hot_lookup(ids, E)`` equals ``E[ids]`` for 1-D and 2-D ids."""
    return run_check(fn, [((ids, E), E[ids]) for ids, E in _embedding_cases()], _compare_tensors, lang)


@never_raises
def check_input_vectors(fn: Callable, lang: str | None = None) -> bool:
    """Exercise 2: ``input_vectors(ids, E)`` = course_utils' TokenEmbedding + SinusoidalPositionalEncoding."""
    from course_utils.positional import SinusoidalPositionalEncoding, TokenEmbedding

    cases = []
    for ids, E in _embedding_cases()[1:]:
        ids = ids.reshape(1, -1) if ids.dim() == 1 else ids
        embed = TokenEmbedding(E.shape[0], E.shape[1])
        with torch.no_grad():
            embed.weight.copy_(E)
            expected = SinusoidalPositionalEncoding(E.shape[1], max_len=16)(embed(ids))
        cases.append(((ids, E), expected))
    return run_check(fn, cases, _compare_tensors, lang)


@never_raises
def check_balanced_std(fn: Callable, lang: str | None = None) -> bool:
    """Exercise 3: the init std for which scaled token rows and PE rows have the same mean squared norm."""
    cases = [((d,), 1.0 / math.sqrt(2 * d)) for d in (16, 64, 512)]   # std²·d² = ‖PE‖² = d/2
    return run_check(fn, cases, number_problem, lang)
