"""Lesson 03 · attention: the exercise checks (they print a verdict, return True / False and never raise).

The lesson module re-exports them; this module never imports the lesson's ``__init__``."""

from __future__ import annotations

import math

import torch
import torch.func  # noqa: F401  (watched by check_softmax_jacobian)

import course_utils
import course_utils.attention
from course_utils.attention import attention_with_weights

from ...exercises import (
    attempt,
    autograd_routes,
    fail,
    fresh_generator,
    fresh_int,
    has_python_loop,
    never_raises,
    number_problem,
    passed,
    report,
    say,
    steps_grow,
    tensor_close,
    watching,
)


def _qkv(seed: int, shape_q=(2, 3, 5, 4), t_k: int = 6, d_v: int = 3):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*shape_q, generator=g)
    k = torch.randn(*shape_q[:-2], t_k, shape_q[-1], generator=g)
    v = torch.randn(*shape_q[:-2], t_k, d_v, generator=g)
    return q, k, v




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
        with watching(fn, autograd_routes()) as calls:
            ok, got = attempt(fn, a.clone())
        if calls:
            return fail("You asked autograd for the Jacobian: the exercise asks you to write a_i(δ_ij − a_j) "
                        "yourself, as one tensor expression for every row at once (autograd is what we "
                        "check it against).",
                        "你让 autograd 算出了雅可比矩阵：本题要求你亲手写出 a_i(δ_ij − a_j)，用一个张量表达式一次算出"
                        "所有行（autograd 是我们用来核对的）。")
        if not ok:
            return False
        if has_python_loop(fn) or steps_grow(fn, (cases[0].expand(2, -1).clone(),),
                                             (cases[0].expand(16, -1).clone(),)):
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


def _softmax_then_zero(q, k, v, mask):
    """The planted bug of exercise 3: the mask applied to the weights after the softmax."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = torch.softmax(scores, dim=-1).masked_fill(~mask, 0.0)
    return weights @ v, weights


def _redraw_hidden(k, v, mask, g):
    """``k``, ``v`` with the keys and values that no query may see redrawn (larger keys: larger scores)."""
    hidden = ~mask.any(-2, keepdim=True).transpose(-2, -1)            # (…, T_k, 1)
    return (torch.where(hidden, 3 * torch.randn(k.shape, generator=g), k),
            torch.where(hidden, torch.randn(v.shape, generator=g), v))


def _moved_by_masked_keys(fn, q, k, v, mask, g) -> float:
    """How far ``fn``'s output moves when only the keys and values that every query masks are redrawn."""
    k2, v2 = _redraw_hidden(k, v, mask, g)
    return float((fn(q, k2, v2, mask)[0] - fn(q, k, v, mask)[0]).abs().max())


@never_raises
def check_masked_attention_fix(fn) -> bool:
    """Exercise 3: the fixed ``masked_attention(q, k, v, mask)`` (mask True = may attend) returns ``(out, weights)``
    equal to masked attention on drawn inputs (padding in one sequence, a causal band in the other). The planted
    bug (zeroing the weights after the softmax), the mask filled with 0, the inverted mask and the library's
    masked attention are named."""
    g = fresh_generator()
    t_q, t_k = fresh_int(3, 7, g), fresh_int(5, 9, g)
    q, k, v = _qkv(fresh_int(0, 2**31, g), (2, t_q, 4), t_k=t_k)
    mask = torch.ones(2, t_q, t_k, dtype=torch.bool)
    mask[0, :, t_k - 2:] = False            # the last two keys of the first sequence are padding
    mask[1] = torch.tril(torch.ones(t_q, t_k, dtype=torch.bool), diagonal=1)
    want_out, want_w = attention_with_weights(q, k, v, mask)
    with watching(fn, _LIBRARY_ATTENTION) as calls:
        ok, got = attempt(fn, q, k, v, mask)
    if not ok:
        return False
    if calls:
        return fail(f"You called {calls[0]}: the exercise is to find and fix the bug in the function, not to hand "
                    "the mask to a library function.",
                    f"你调用了 {calls[0]}：本题要你找出并修好函数里的错误，而不是把掩码交给库函数。")
    if not (isinstance(got, tuple) and len(got) == 2):
        return fail("Return a pair (out, weights).", "请返回一个二元组 (out, weights)。")
    if not tensor_close(got[1], want_w, "weights", "注意力权重"):
        if not (isinstance(got[1], torch.Tensor) and got[1].shape == want_w.shape):
            return False
        w = got[1].detach().float().nan_to_num(0.0)        # a row with no key left is NaN
        if torch.allclose(w, _softmax_then_zero(q, k, v, mask)[1], atol=1e-5):
            moved = _moved_by_masked_keys(_softmax_then_zero, q, k, v, mask, g)
            say("This is still the planted bug: the mask is applied after the softmax. The masked keys get weight "
                "0, but they have already taken their share of the softmax's denominator: the rows no longer sum "
                f"to 1, and redrawing only the masked keys moved the output by {moved:.3f}. Mask the scores, "
                "before the softmax.",
                "这仍然是埋下的那个错误：掩码是在 softmax 之后才施加的。被遮住的键权重虽然是 0，但它们已经在 "
                f"softmax 的分母里分走了一份：每行之和不再是 1，只重新抽取被遮住的键，输出就变了 {moved:.3f}。"
                "应该在 softmax 之前遮住分数。")
        elif bool(((w * mask).sum(-1)[(~mask).any(-1)] < 1e-3).all()):  # every row with a masked key: all there
            say("Hint: your weights sit mostly where the mask is False. In this course True means "
                "\"may attend\" (as in F.scaled_dot_product_attention); PyTorch's key_padding_mask uses "
                "the opposite convention. Fill the scores where ~mask.",
                "提示：你的权重大多落在掩码为 False 的地方。本课程中 True 表示“允许关注”"
                "（与 F.scaled_dot_product_attention 相同），PyTorch 的 key_padding_mask 正好相反。"
                "应在 ~mask 的位置填充分数。")
        elif (w[~mask] > 1e-6).any():
            say("Hint: masked keys (mask False) must get weight 0. A score of 0 is not \"no attention\": "
                "exp(0) = 1. Fill their scores with -inf before the softmax.",
                "提示：被遮住的键（mask 为 False）权重必须是 0。分数为 0 并不等于“不关注”：exp(0) = 1。"
                "应在 softmax 之前把它们的分数填成 -inf。")
        return False
    if not tensor_close(got[0], want_out, "out", "输出"):
        return False
    k2, v2 = _redraw_hidden(k, v, mask, g)
    ok, again = attempt(fn, q, k2, v2, mask)
    if not ok:
        return False
    if not (isinstance(again, tuple) and len(again) == 2) or not tensor_close(
            again[0], want_out, "out after redrawing only the masked keys", "只重新抽取被遮住的键之后的输出"):
        return False
    one = torch.tensor([[[1.0]]]), torch.tensor([[[2.0], [1.0], [0.5], [3.0]]]), torch.eye(4)[None]
    row_mask = torch.tensor([[[True, True, True, False]]])
    buggy = _softmax_then_zero(*one, row_mask)[1][0, 0]
    fixed = attention_with_weights(*one, row_mask)[1][0, 0]
    shown = ", ".join(f"{x:.2f}" for x in buggy.tolist()), ", ".join(f"{x:.2f}" for x in fixed.tolist())
    return passed(f"Correct. Scores [2, 1, 0.5, 3] with the last key masked: the buggy version gives [{shown[0]}] "
                  f"(sum {float(buggy.sum()):.2f}), yours [{shown[1]}] (sum 1.00); and the masked keys no longer "
                  "change the output.",
                  f"正确。分数为 [2, 1, 0.5, 3]、最后一个键被遮住时，有错误的版本给出 [{shown[0]}]"
                  f"（和为 {float(buggy.sum()):.2f}），你的版本给出 [{shown[1]}]（和为 1.00）；"
                  "被遮住的键也不再影响输出。")
