"""Lesson 02 (positional encoding): the ω formulas in any dtype, relative shifts, explorer widget, exercise checks.

    PE(pos, 2i) = sin(pos·ω_i),  PE(pos, 2i+1) = cos(pos·ω_i),  ω_i = 1 / 10000^(2i/d_model)

* :func:`inv_freq_pow` / :func:`inv_freq_exp` — ω as a power or as exp(−2i·ln(10000)/d), in any dtype, and
  :func:`table_from`; the notebook measures them against float64 in a cell of its own.
* :func:`shift_matrix` — M_k, block-diagonal 2×2 rotations by k·ω_i: PE(pos + k) = M_k PE(pos) for every pos.
* :func:`build_pe_explorer` — d_model, position and dimension sliders over the heatmap, one column, one row.
* checks of the exercises: wavelengths, shifting back by M_kᵀ, rotating pairs without M_k (RoPE's kernel).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from functools import partial

import torch

from course_utils.positional import sinusoidal_encoding

from .. import i18n, viz
from ..exercises import (
    attempt,
    fail,
    fresh_generator,
    fresh_int,
    never_raises,
    passed,
    report,
    run_check,
    tensor_problem,
    tracking_sizes,
    watching,
)

BASE = 10000.0


def inv_freq_pow(d_model: int, dtype=torch.float32, base: float = BASE) -> torch.Tensor:
    """ω_i = 1 / base^(2i/d) written as a power; every step in ``dtype`` (the base too: torch casts it)."""
    two_i = torch.arange(0, d_model, 2, dtype=dtype)
    return 1.0 / (base ** (two_i / d_model))


def inv_freq_exp(d_model: int, dtype=torch.float32, base: float = BASE) -> torch.Tensor:
    """ω_i = exp(−2i·ln(base)/d), the log-space form of the Annotated Transformer; all in ``dtype``."""
    two_i = torch.arange(0, d_model, 2, dtype=dtype)
    return torch.exp(two_i * (-math.log(base) / d_model))


def table_from(inv_freq: torch.Tensor, max_len: int) -> torch.Tensor:
    """The (max_len, d) table from given frequencies, computed entirely in their dtype (d = 2·len)."""
    angles = torch.arange(max_len, dtype=inv_freq.dtype)[:, None] * inv_freq     # (L, d/2)
    return torch.stack([torch.sin(angles), torch.cos(angles)], dim=-1).flatten(1)  # interleave: sin, cos, ...


def shift_matrix(k: int, d_model: int, base: float = BASE, dtype=torch.float64) -> torch.Tensor:
    """M_k (d × d): for the (sin, cos) pair of frequency ω the rotation [[cos kω, sin kω], [−sin kω, cos kω]].

    sin((p+k)ω) = sin(pω)cos(kω) + cos(pω)sin(kω) and cos((p+k)ω) = cos(pω)cos(kω) − sin(pω)sin(kω), so
    PE(p + k) = M_k PE(p) whatever p is. d_model must be even (each frequency owns two columns).
    """
    if d_model % 2:
        raise ValueError(f"d_model={d_model} is odd: M_k needs (sin, cos) pairs, use an even d_model")
    angle = k * inv_freq_exp(d_model, torch.float64, base)
    c, s = torch.cos(angle), torch.sin(angle)
    blocks = torch.stack([torch.stack([c, s], -1), torch.stack([-s, c], -1)], -2)    # (d/2, 2, 2)
    return torch.block_diag(*blocks).to(dtype)


# --- the explorer widget ------------------------------------------------------------------------------------

N_POSITIONS = 100
D_CHOICES = (8, 16, 32, 64, 128, 256)
_TEXT = {
    "column": {"en": "Dimension {j}: PE(pos, {j}) over positions",
               "zh": "第 {j} 维：PE(pos, {j}) 随位置的变化"},
    "row": {"en": "Position {p}: the vector PE({p})", "zh": "位置 {p}：向量 PE({p})"},
    "wavelength": {"en": "wavelength {w:.1f} positions", "zh": "波长 {w:.1f} 个位置"},
}


def render_pe_explorer(d_model: int, position: int, dimension: int, lang: str | None = None):
    """Heatmap of PE (first :data:`N_POSITIONS` positions), the chosen row and column marked and plotted."""
    code = viz.use_language(lang)
    if not 0 <= dimension < d_model:
        raise ValueError(i18n.pick(
            {"en": f"dimension must be below d_model={d_model}: choose 0 to {d_model - 1}",
             "zh": f"维度必须小于 d_model={d_model}：请选择 0 到 {d_model - 1}"}, code))
    if not 0 <= position < N_POSITIONS:
        raise ValueError(f"position must be in [0, {N_POSITIONS}), got {position}")
    pe = sinusoidal_encoding(N_POSITIONS, d_model)                                  # (T, C)
    fig = viz.new_figure((11, 3.8))
    ax_map, ax_col, ax_row = fig.subplots(1, 3, width_ratios=(1.3, 1, 1))
    viz.plot_positional_encoding(pe, ax=ax_map, lang=code)
    ax_map.axhline(position, color="black", lw=1)
    ax_map.axvline(dimension, color="black", lw=1, ls="--")
    column, row = pe[:, dimension].numpy(), pe[position].numpy()
    wavelength = 2 * math.pi * BASE ** ((dimension - dimension % 2) / d_model)      # 2π / ω_i
    ax_col.plot(range(N_POSITIONS), column, color="tab:blue")
    ax_col.plot([position], [column[position]], "o", color="black")
    ax_col.set_xlabel(i18n.tr("position", code))
    ax_col.set_ylabel(i18n.tr("element_value", code))
    ax_col.set_title(i18n.pick(_TEXT["column"], code).format(j=dimension) + "\n"
                     + i18n.pick(_TEXT["wavelength"], code).format(w=wavelength), fontsize=9)
    colors = ["tab:red" if j == dimension else "tab:gray" for j in range(d_model)]
    ax_row.bar(range(d_model), row, color=colors)
    ax_row.set_xlabel(i18n.tr("dimension", code))
    ax_row.set_ylim(-1.1, 1.1)
    ax_row.set_title(i18n.pick(_TEXT["row"], code).format(p=position), fontsize=9)
    return fig, {"d_model": d_model, "position": position, "dimension": dimension, "column": column,
                 "row": row, "wavelength": wavelength}


def build_pe_explorer(lang: str | None = None):
    """Sliders for d_model, position and dimension; the dimension slider follows d_model's range."""
    from ..widgets import LessonWidget, dropdown, slider

    d_control = dropdown("d_model", list(D_CHOICES), value=32, label="d_model", lang=lang)
    dim_control = slider("dimension", 0, 31, 1, 4, label=i18n.tr("dimension", lang))
    pos_control = slider("position", 0, N_POSITIONS - 1, 1, 10, label=i18n.tr("position", lang))

    def follow_d_model(change):  # registered before the widget's own observer: the clamp happens first
        dim_control.max = change["new"] - 1   # ipywidgets clamps .value into the new range

    d_control.observe(follow_d_model, names="value")
    controls = {"d_model": d_control, "position": pos_control, "dimension": dim_control}
    def render(d_model, position, dimension):
        return render_pe_explorer(d_model, position, dimension, lang)

    title = {"en": "Positional encoding explorer", "zh": "位置编码浏览器"}
    return LessonWidget(controls, render, title=title)


# --- exercises ----------------------------------------------------------------------------------------------


# Answers may be tensors or plain numbers.
_compare = partial(tensor_problem, atol=1e-4, rtol=1e-4, numbers=True)


def _this_module():
    return sys.modules[__name__]


@never_raises
def check_wavelengths(fn: Callable, lang: str | None = None) -> bool:
    """Exercise 1: ``wavelengths(d_model)`` has d_model/2 entries, from 2π up to almost 2π·10000.

    Calling this module's ``inv_freq_exp`` / ``inv_freq_pow`` (the appendix's frequencies) is the shortcut.
    """
    widths = (4, 16, 128, 2 * fresh_int(65, 4097, fresh_generator()))                 # the last one drawn afresh
    cases = [((d,), 2 * math.pi / inv_freq_exp(d, torch.float64)) for d in widths]   # λ_i = 2π / ω_i
    with watching(fn, [(_this_module(), "inv_freq_exp"), (_this_module(), "inv_freq_pow")]) as calls:
        ok, _ = attempt(fn, 16)
    if not ok:
        return False
    if not calls:
        ok, got = attempt(fn, 16)
        if ok and isinstance(got, torch.Tensor) and got.shape == (8,) and torch.allclose(
                got.detach().double(), inv_freq_exp(16, torch.float64), rtol=1e-4):
            return fail("Those are the angular frequencies ω_i (radians per position). A wavelength is the number of "
                        "positions one full turn takes: λ_i = 2π / ω_i.",
                        "这是角频率 ω_i（每个位置转过的弧度）。波长是转满一圈所需的位置数：λ_i = 2π / ω_i。", lang)
    if calls:
        return fail(f"Your function calls l02.{calls[0]}, the lesson's own frequencies: write ω_i from the formula "
                    "(ω_i = 1 / 10000^(2i/d_model), 2i = 0, 2, 4, ...) and turn it into a wavelength.",
                    f"你的函数调用了 l02.{calls[0]}，也就是课程自己算好的频率：请从公式写出 ω_i"
                    "（ω_i = 1 / 10000^(2i/d_model)，2i = 0, 2, 4, ...），再换算成波长。", lang)
    return run_check(fn, cases, _compare, lang)


def _table_lookups() -> list:
    import course_utils
    import course_utils.positional

    return [(course_utils, "sinusoidal_encoding"), (course_utils.positional, "sinusoidal_encoding")]


@never_raises
def check_shift_back(fn: Callable, lang: str | None = None) -> bool:
    """Exercise 2: ``shift_back(v, k)`` returns PE(pos − k) from v = PE(pos) alone, and 2.5·PE(pos − k) from
    2.5·PE(pos): it rotates whatever it is given (M_k is linear). Finding pos in a table and returning the row
    pos − k is the shortcut; it fails on the scaled row, and calling course_utils' table is named."""
    pe = sinusoidal_encoding(64, 16, dtype=torch.float64)
    cases = [((pe[pos].clone(), k), pe[pos - k]) for pos, k in ((10, 3), (40, 25), (63, 63), (7, 0))]
    cases.append(((2.5 * pe[30], 12), 2.5 * pe[18]))
    g = fresh_generator()                               # a drawn position, offset and scale: no table passes
    pos = fresh_int(0, 64, g)
    k, scale = fresh_int(0, pos + 1, g), 0.5 + 3 * float(torch.rand((), generator=g, dtype=torch.float64))
    cases.append(((scale * pe[pos], k), scale * pe[pos - k]))
    v = torch.randn(16, generator=g, dtype=torch.float64)        # no row of any table: only a rotation reaches it
    cases.append(((v, 5), shift_matrix(5, 16).T @ v))
    with watching(fn, _table_lookups()) as calls:
        ok, got = attempt(fn, 2.5 * pe[30], 12)
    if not ok:
        return False
    if calls:
        return fail("Your function builds the positional table (sinusoidal_encoding) to find the position and "
                    "read another row: the exercise asks for the rotation M_kᵀ, which needs no table and works on "
                    "any vector, a scaled row, or a query rotated by RoPE.",
                    "你的函数先建了位置编码表（sinusoidal_encoding），找出位置再读另一行：本题要的是旋转 M_kᵀ，"
                    "它不需要表，对任何向量都成立，无论是放大后的行，还是 RoPE 里被旋转的查询向量。", lang)
    if isinstance(got, torch.Tensor) and got.shape == pe[18].shape and torch.allclose(
            got.detach().double(), pe[18], atol=1e-4):
        return fail("Given 2.5·PE(30) and k = 12 you returned PE(18), a row of the table: a shift is a rotation, "
                    "a linear map, so it must return 2.5·PE(18). Rotate the vector you are given.",
                    "输入 2.5·PE(30) 和 k = 12 时，你返回的是表里的一行 PE(18)：平移是旋转，是线性变换，应该返回 "
                    "2.5·PE(18)。请对给你的向量做旋转。", lang)
    if isinstance(got, torch.Tensor) and got.shape == pe[18].shape and torch.allclose(
            got.detach().double(), 2.5 * pe[42], atol=1e-4):
        return fail("Given 2.5·PE(30) and k = 12 you returned 2.5·PE(42): that is M_k v, a shift forward. Going back "
                    "undoes the rotation, and the inverse of a rotation is its transpose.",
                    "输入 2.5·PE(30) 和 k = 12 时你返回的是 2.5·PE(42)：那是 M_k v，向前平移。往回平移要撤销这次"
                    "旋转，而旋转的逆就是它的转置。", lang)
    return run_check(fn, cases, _compare, lang)


def _rotate_cases():
    g = fresh_generator()
    return [((torch.randn(16, generator=g, dtype=torch.float64), 7), 16),
            ((torch.randn(3, 5, 16, generator=g, dtype=torch.float64), 1), 16),
            ((torch.randn(2, 64, generator=g, dtype=torch.float64), -3), 64),
            ((torch.randn(4, 8, generator=g, dtype=torch.float64), 0), 8),
            ((torch.randn(32, generator=g, dtype=torch.float64), 1000), 32)]


def _rotate_half(x: torch.Tensor, k: int) -> torch.Tensor:
    """M_k for the *concatenated* layout [sin..., cos...]: dimension i paired with i + d/2 (GPT-NeoX style)."""
    half = x.shape[-1] // 2
    angle = k * inv_freq_exp(x.shape[-1], torch.float64)
    c, s = torch.cos(angle), torch.sin(angle)
    a, b = x[..., :half], x[..., half:]
    return torch.cat([c * a + s * b, -s * a + c * b], dim=-1)


@never_raises
def check_rotate(fn: Callable, lang: str | None = None) -> bool:
    """Exercise 3: ``rotate(x, k)`` = M_k x on the last dimension of any ``(..., d)`` tensor, pair by pair in O(d),
    without building the d × d matrix (``shift_matrix`` or ``torch.block_diag``: the shortcut).

    On success it shows the property RoPE is built on: rotate(q, p) · rotate(key, p + 3) is the same for every p.
    """
    cases = [(args, torch.einsum("ij,...j->...i", shift_matrix(args[1], d), args[0])) for args, d in _rotate_cases()]
    for (x, k), want in cases:
        d = x.shape[-1]
        with watching(fn, [(torch, "block_diag"), (_this_module(), "shift_matrix")]) as calls, \
                tracking_sizes() as sizes:
            ok, got = attempt(fn, x.clone(), k)
        if not ok:
            return False
        if calls or (d * d > 4 * x.numel() and sizes.largest >= d * d):     # a d × d matrix, however built
            return fail("Your function builds the d × d matrix M_k (block_diag, shift_matrix or a d × d tensor of "
                        "its own): d² numbers, almost all zero, for a map that needs 2 multiplications per entry. "
                        "Rotate the pairs directly: "
                        "even = x[..., 0::2], odd = x[..., 1::2]. That is how RoPE rotates every query and key.",
                        "你的函数构造了 d × d 的矩阵 M_k（用 block_diag、shift_matrix 或自己建的 d × d 张量）："
                        "d² 个数，几乎全是 0，而这个变换每个元素只需要 2 次乘法。"
                        "请直接旋转每一对：even = x[..., 0::2]，odd = x[..., 1::2]。"
                        "RoPE 就是这样旋转每一个查询和键的。",
                        lang)
        problem = tensor_problem(got, want, atol=1e-8, rtol=1e-6)
        if problem is None:
            continue
        if isinstance(got, torch.Tensor) and got.shape == want.shape and k != 0:
            got = got.detach().double()
            if torch.allclose(got, torch.einsum("ij,...j->...i", shift_matrix(-k, x.shape[-1]), x), atol=1e-6):
                return fail("You rotated by −k: your answer is M_{-k} x, i.e. PE(pos − k) for x = PE(pos). "
                            "Check the signs: the new sine is s·cos(kω) + c·sin(kω).",
                            "你转反了方向：你的结果是 M_{-k} x，对 x = PE(pos) 来说得到的是 PE(pos − k)。检查一下"
                            "符号：新的正弦分量是 s·cos(kω) + c·sin(kω)。", lang)
            rotated = torch.einsum("ij,...j->...i", shift_matrix(k, x.shape[-1]), x)
            if torch.allclose(got, torch.cat([rotated[..., 0::2], rotated[..., 1::2]], -1), atol=1e-6):
                return fail("The numbers are right but in the wrong places: your result holds every new even "
                            "dimension first, then every odd one (torch.cat). Interleave them back: "
                            "torch.stack((new_even, new_odd), dim=-1).flatten(-2) puts pair i at 2i and 2i + 1.",
                            "数值是对的，但位置不对：你的结果先放了所有新的偶数维，再放所有奇数维（torch.cat）。"
                            "请把它们重新交错排列：torch.stack((new_even, new_odd), dim=-1).flatten(-2) 会把第 i "
                            "对放回第 2i 和 2i + 1 维。", lang)
            if torch.allclose(got, _rotate_half(x, k), atol=1e-6):
                return fail("You paired dimension i with i + d/2 (the concatenated layout some RoPE code uses). The "
                            "table of this course interleaves: the pairs are (0, 1), (2, 3), ...",
                            "你把第 i 维和第 i + d/2 维配成了一对（有些 RoPE 代码用这种拼接布局）。本课程的表是交错排列"
                            "的：配对是 (0, 1)、(2, 3)……", lang)
        return report(problem, f"Not yet, for x of shape {tuple(x.shape)} and k = {k}",
                      f"还不对，x 形状为 {tuple(x.shape)}、k = {k} 时", lang)
    g = fresh_generator()
    q, key = torch.randn(2, 16, generator=g, dtype=torch.float64)
    scores = [float(fn(q, p) @ fn(key, p + 3)) for p in (0, 10, 50)]
    en, zh = ", ".join(f"{v:.4f}" for v in scores), "、".join(f"{v:.4f}" for v in scores)
    return passed(f"Correct, in O(d) per vector. And the RoPE property: rotate(q, p) · rotate(key, p + 3) = {en} "
                  "for p = 0, 10, 50: only the offset 3 counts.",
                  "正确，每个向量只需 O(d) 次运算。再看 RoPE 的性质：p = 0、10、50 时 "
                  f"rotate(q, p) · rotate(key, p + 3) 分别为 {zh}：只有相对距离 3 起作用。", lang)
