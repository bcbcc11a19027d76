"""The exercise checks of l06_ffn_norm (re-exported by the package)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.layers import Residual

from ...exercises import (
    attempt,
    calling,
    fail,
    fresh_generator,
    fresh_int,
    is_tensor,
    never_raises,
    number_problem,
    passed,
    watching,
)

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
        with watching(fn, _LIBRARY_NORMS) as calls, calling(_NORM_NAMES) as named:
            ok, got = attempt(fn, x, gamma, beta, 1e-5)
        calls += named
        if not ok or not is_tensor(got, want.shape):
            return False
        if calls:
            return fail(f"Your function calls the library ({calls[0]}): the point is to write the statistics "
                        "yourself — a mean and a biased variance over the last two axes, ε inside the root.",
                        f"你的函数调用了库函数（{calls[0]}）：本题的目的是亲手写出统计量：沿最后两个维度求均值和"
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
# The same, by name, however reached (a torch function mode sees them all): F.dropout1d/2d/3d, alpha dropout,
# torch._VF.feature_dropout, nn.Dropout.
_DROPOUT_NAMES = {"dropout", "dropout1d", "dropout2d", "dropout3d", "feature_dropout", "alpha_dropout",
                  "feature_alpha_dropout", "native_dropout", "dropout_", "feature_dropout_", "alpha_dropout_"}
_NORM_NAMES = {"layer_norm", "native_layer_norm", "group_norm", "instance_norm", "batch_norm", "rms_norm",
               "local_response_norm", "native_batch_norm", "native_group_norm"}


@never_raises
def check_dropout(fn) -> bool:
    """Exercise 2: ``fn(x, p, training)`` is inverted dropout: in training each element is 0 with probability p,
    else x / (1 − p); outside training, x itself. Written out: no F.dropout / nn.Dropout."""
    g = fresh_generator()
    x = torch.randn(400, 250, generator=g) + 3.0                  # no zeros of its own: a 0 means "dropped"
    p = 0.3
    with watching(fn, _LIBRARY_DROPOUT) as calls, calling(_DROPOUT_NAMES) as named:
        ok, y = attempt(fn, x, p, True)
        if ok:
            ok, y_again = attempt(fn, x, p, True)
    calls += named
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


def _measured_stream_norm(norm0: float, a: float, d: int, n_layers: int, norm_first: bool,
                          g: torch.Generator) -> float:
    """The check's reference, measured: ``n_layers`` Residual wrappers around z ↦ a·z, on a centred x_0."""
    x = torch.randn(d, generator=g, dtype=torch.float64)
    x = x - x.mean()
    x = norm0 * x / x.norm()
    res = Residual(d, norm_first=norm_first).double()
    with torch.no_grad():
        for _ in range(n_layers):
            x = res(x, lambda z: a * z)
    return float(x.norm())


def _stream_cases(g: torch.Generator) -> list[tuple[float, float, int, int, bool]]:
    """Drawn (norm0, a, d, n_layers, norm_first); per-feature rms of x_0 in [0.5, 3]: ε stays negligible."""
    cases = [(fresh_int(4, 129, g), *(float(u) for u in torch.rand(2, generator=g, dtype=torch.float64)), flag)
             for flag in (True, False, True, False, True)]
    return [((0.5 + 2.5 * u) * math.sqrt(d), 0.05 + 0.95 * w, d, fresh_int(1, 25, g), flag) for d, u, w, flag in cases]


@never_raises
def check_stream_norm(fn) -> bool:
    """Exercise 3: ``fn(norm0, a, d, n_layers, norm_first) -> float``, the norm of the residual stream after
    ``n_layers`` residual sublayers z ↦ a·z (pre-norm if ``norm_first``, else post-norm), from a centred x_0 of norm
    ``norm0``. Derived on paper; the check measures it with ``course_utils.Residual`` on several drawn cases."""
    g = fresh_generator()
    for norm0, a, d, n, norm_first in _stream_cases(g):
        ok, got = attempt(fn, norm0, a, d, n, norm_first)
        if not ok:
            return False
        want = _measured_stream_norm(norm0, a, d, n, norm_first, g)
        if number_problem(got, want, rel=1e-3) is None:
            continue
        kind_en, kind_zh = ("pre-norm", "前置归一化") if norm_first else ("post-norm", "后置归一化")
        where_en = f"{kind_en}, |x_0| = {norm0:.3f}, a = {a:.3f}, d = {d}, {n} layers"
        where_zh = f"{kind_zh}，|x_0| = {norm0:.3f}，a = {a:.3f}，d = {d}，{n} 层"
        # A wrong formula gives its value to rounding: matched tightly, so that two formulas close on a drawn case
        # (a·√(nd) small next to |x_0|) do not share a hint.
        like = {v for v in (norm0 + n * a, math.hypot(norm0, a * math.sqrt(n * d)), norm0 * (1 + a) ** n, norm0, 1.0)
                if number_problem(got, v, rel=1e-6) is None}
        if norm0 + n * a in like:
            return fail(f"{where_en}: LayerNorm's output has norm √d, not 1 (each of its d features has variance 1): "
                        "every layer adds a·√d, not a.",
                        f"{where_zh}：层归一化输出的范数是 √d，而不是 1（它的 d 个特征方差都为 1）：每层加上的是 a·√d，"
                        "而不是 a。")
        if math.hypot(norm0, a * math.sqrt(n * d)) in like:
            return fail(f"{where_en}: you added a·√d per layer in a random direction (a Pythagoras sum). Here the "
                        "sublayer's output a·LN(x) points along x itself: the norms add up.",
                        f"{where_zh}：你把每层的 a·√d 当作沿随机方向加上去的（勾股定理求和）。这里子层的输出 a·LN(x) "
                        "与 x 同向：范数直接相加。")
        if norm0 * (1 + a) ** n in like:
            return fail(f"{where_en}: growth by (1 + a) per layer would be a sublayer applied to x itself. It sees "
                        "LN(x), whose norm is √d whatever |x| is: the stream grows by the same amount every layer.",
                        f"{where_zh}：每层乘以 (1 + a) 相当于子层直接作用在 x 上。而子层看到的是 LN(x)，不管 |x| 多大，"
                        "它的范数都是 √d：残差流每层增加的量是一样的。")
        if not norm_first and (norm0 in like or 1.0 in like):
            return fail(f"{where_en}: the last operation of a post-norm layer is LayerNorm, whose output (γ = 1, "
                        "β = 0) has mean 0 and variance 1 over the d features, so its norm is fixed.",
                        f"{where_zh}：后置归一化层的最后一步是层归一化，它的输出（γ = 1、β = 0）在 d 个特征上均值为 0、"
                        "方差为 1，所以范数是固定的。")
        problem = number_problem(got, want, rel=1e-3)
        return fail(f"{where_en}: {problem[0]}", f"{where_zh}：{problem[1]}")
    d, a, n = 32, 0.5, 16
    pre = _measured_stream_norm(math.sqrt(d), a, d, n, True, g)
    post = _measured_stream_norm(math.sqrt(d), a, d, n, False, g)
    return passed(f"Correct. Measured for d = {d}, a = {a}, {n} layers from |x_0| = √d: pre-norm {pre:.2f}, post-norm "
                  f"{post:.2f}. The pre-norm stream's scale depends on depth, so whatever reads the last layer needs "
                  "the final LayerNorm that GPT-2 adds.",
                  f"正确。实测 d = {d}、a = {a}、{n} 层、|x_0| = √d：前置归一化 {pre:.2f}，后置归一化 {post:.2f}。"
                  "前置归一化残差流的尺度取决于深度，所以读取最后一层输出的模块需要 GPT-2 加在最后的那个层归一化。")
