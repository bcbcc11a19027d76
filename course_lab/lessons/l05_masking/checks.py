"""Lesson 05 · masking: the exercise checks (they print a verdict, return True / False and never raise).

The lesson module re-exports them; this module never imports the lesson's ``__init__``."""

from __future__ import annotations

import math

import torch

from course_utils import masks

from ...exercises import (
    attempt,
    fail,
    fresh_generator,
    fresh_int,
    grad_problem,
    has_python_loop,
    is_mask,
    is_tensor,
    never_raises,
    passed,
    report,
    right_after_renumbering,
    steps_grow,
    watching,
)

# Element-by-element Python: indexing a tensor cell by cell, iterating over it, or building it from Python lists.
_PYTHON_LEVEL = [(torch.Tensor, "__getitem__"), (torch.Tensor, "__setitem__"), (torch.Tensor, "__iter__"),
                 (torch.Tensor, "tolist"), (torch.Tensor, "item"), (torch, "tensor")]


def _python_loops(fn, *args, budget: int, small: tuple, large: tuple):
    """Call ``fn(*args)`` and count its Python-level tensor accesses: ``(ok, result, loops)``.

    A loop in the code (:func:`has_python_loop`: ``for``, ``while``, comprehensions, ``map``, ``starmap``,
    helpers) is one; so is code that runs more Python lines on the ``large`` inputs than on the ``small`` ones
    (:func:`steps_grow`: recursion, a callable object); a broadcast solution indexes a handful of times
    (``ids[:, None, None, :]``), cell-by-cell code at least once per row or cell, so more than ``budget``
    accesses is one too.
    """
    with watching(fn, _PYTHON_LEVEL) as calls:
        ok, got = attempt(fn, *args)
    loops = ok and (has_python_loop(fn) or len(calls) > budget
                    or bool({"__iter__", "tolist", "tensor"} & set(calls)) or steps_grow(fn, small, large))
    return ok, got, loops


def _loops_message(what_en: str, what_zh: str) -> bool:
    return fail(f"Your function builds the {what_en} with Python loops (cell by cell, or from Python lists). "
                "That is slow on long sequences and hides the structure: compare an index column (T, 1) with "
                "an index row (1, T), or a (B, 1, 1, T) mask with a (T, T) one, and let broadcasting fill the "
                "grid.",
                f"你的函数用 Python 循环（逐格赋值，或从 Python 列表构造）来生成{what_zh}。这在长序列上很慢，"
                "也看不出结构：请用一列下标 (T, 1) 和一行下标 (1, T) 比较，或者把 (B, 1, 1, T) 的掩码与 (T, T) "
                "的掩码组合，让广播去填满整个网格。")


def _left_padded_ids() -> torch.Tensor:
    g = fresh_generator()
    ids = torch.randint(1, 50, (6, 7), generator=g)
    counts = [0, 6] + [fresh_int(0, 7, g) for _ in range(4)]   # one full row, one single token, four drawn
    for row, n_pad in enumerate(counts):                 # left padding: the pads come first
        ids[row, :n_pad] = 0
    return ids


def _reference_left_padded_mask(ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """``(B, 1, T, T)``: real query i sees the real keys j <= i; a pad query sees only itself (no empty row)."""
    t = ids.shape[1]
    visible = (ids != pad_id)[:, None, None, :] & torch.tril(torch.ones(t, t, dtype=torch.bool))
    return visible | torch.eye(t, dtype=torch.bool)


@never_raises
def check_left_padded_mask(fn) -> bool:
    """Exercise 1: ``fn(ids, pad_id)`` -> ``(B, 1, T, T)`` bool for a LEFT-padded batch, without empty rows."""
    ids = _left_padded_ids()
    b, t = ids.shape
    want = _reference_left_padded_mask(ids, 0)     # first: the student's call may not change what it is made of
    ok, got, loops = _python_loops(fn, ids, 0, budget=b, small=(ids[:2].clone(), 0), large=(ids.repeat(3, 1), 0))
    if not ok or not is_mask(got):
        return False
    if tuple(got.shape) != (b, 1, t, t):
        return fail(f"Expected shape (B, 1, T, T) = {(b, 1, t, t)}, got {tuple(got.shape)}: keep a size-1 head "
                    "dimension so that it broadcasts over the heads.",
                    f"形状应为 (B, 1, T, T) = {(b, 1, t, t)}，实际是 {tuple(got.shape)}："
                    "保留大小为 1 的注意力头维度，这样才能对所有注意力头广播。")
    if loops:
        return _loops_message("mask", "掩码")
    causal = masks.causal_mask(t)
    if torch.equal(got, causal.expand(b, 1, t, t)):
        return fail("That is the causal mask alone. With LEFT padding the pads sit in the past of every real "
                    "token, so the causal mask lets real queries read them: the padding mask is needed here.",
                    "这只是因果掩码。左填充时，填充位置在每个真实词元的“过去”，因果掩码挡不住它们，"
                    "真实查询会读到填充：这里必须加上填充掩码。")
    if torch.equal(got, ~want):
        return fail("Your mask is inverted: in this course True means 'may attend' "
                    "(nn.MultiheadAttention uses the opposite).",
                    "掩码正好反了：本课程中 True 表示“可以关注”（nn.MultiheadAttention 的约定相反）。")
    empty = (~got.any(-1)).nonzero()
    if len(empty):
        i, q = int(empty[0, 0]), int(empty[0, 2])
        return fail(f"Sequence {i}, query {q} sees no key at all: a naive softmax gives NaN there (section 8). "
                    "Let every pad query see itself.",
                    f"第 {i} 个序列的查询 {q} 一个键都看不到：朴素的 softmax 在这里会得到 NaN（第 8 节）。"
                    "让每个填充查询至少看到它自己。")
    if not torch.equal(got, want):
        i, q, j = [int(x) for x in (got != want).nonzero()[0][[0, 2, 3]]]
        return fail(f"Wrong cell: sequence {i}, query {q}, key {j} should be {bool(want[i, 0, q, j])} "
                    f"(query {q} is {'a pad' if ids[i, q] == 0 else 'a real token'}, "
                    f"key {j} is {'a pad' if ids[i, j] == 0 else 'a real token'}).",
                    f"有格子不对：第 {i} 个序列、查询 {q}、键 {j} 应为 {bool(want[i, 0, q, j])}"
                    f"（查询 {q} 是{'填充' if ids[i, q] == 0 else '真实词元'}，"
                    f"键 {j} 是{'填充' if ids[i, j] == 0 else '真实词元'}）。")
    if not right_after_renumbering(fn, ids, _reference_left_padded_mask, fresh_generator()):
        return False
    return passed("Correct: real tokens see only real tokens up to themselves, and no row is empty.",
                  "正确：真实词元只看到自己及之前的真实词元，而且没有一行是空的。")


def _reference_masked_softmax(scores: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension restricted to ``keep``; rows with no kept key are all zeros."""
    has_key = keep.any(dim=-1, keepdim=True)
    weights = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    return weights.masked_fill(~has_key, 0.0)


def _softmax_case(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    g = fresh_generator()
    scores = torch.randn(2, 3, 4, 5, generator=g) * 3
    keep = torch.rand(2, 3, 4, 5, generator=g) > 0.4
    keep[0, 0, 1] = False                      # a fully masked row
    keep[1, 2, 3] = False                      # and another
    keep[1, 0, 0] = True                       # a row that keeps everything
    return scores.to(dtype).requires_grad_(True), keep


@never_raises
def check_masked_softmax(fn) -> bool:
    """Exercise 2: ``fn(scores, keep)`` is the masked softmax, with zero rows (no NaN) where all is hidden;
    in float32 and in float16."""
    scores, keep = _softmax_case(torch.float32)
    ok, got = attempt(fn, scores, keep)
    if not ok or not is_tensor(got, scores.shape, "weights", "注意力权重"):
        return False
    if torch.isnan(got).any():
        return fail("There are NaNs: a row whose keys are all masked is softmax over only −inf = 0/0. "
                    "Give such rows zero weights.",
                    "出现了 NaN：所有键都被遮住的行相当于只对 −inf 做 softmax，即 0/0。"
                    "请让这样的行权重全为 0。")
    want = _reference_masked_softmax(scores.detach(), keep)
    if not torch.allclose(got.detach().float(), want, atol=1e-6):
        if got.detach()[~keep].abs().max() > 1e-6:
            return fail("Masked keys still get some weight: fill them with −inf before the softmax.",
                        "被遮住的键仍然分到了权重：在 softmax 之前用 −inf 填充它们。")
        return fail("The values differ from the masked softmax (each kept row should sum to 1).",
                    "数值与带掩码的 softmax 不一致（每个未被完全遮住的行之和应为 1）。")
    if grad_problem(got) is not None:                # torch.no_grad() + nan_to_num would hide the NaN gradient
        return report(grad_problem(got), "weights", "注意力权重")
    direction = torch.linspace(-1, 1, got.shape[-1])
    (grad,) = torch.autograd.grad((got * direction).sum(), scores, allow_unused=True)
    reference = scores.detach().clone().requires_grad_(True)
    (want_grad,) = torch.autograd.grad((_reference_masked_softmax(reference, keep) * direction).sum(), reference)
    if grad is None or not torch.isfinite(grad).all():
        return fail("The values are right but the gradient has NaNs: mask the result with torch.where / "
                    "masked_fill rather than dividing by zero or repairing NaNs afterwards (nan_to_num leaves the "
                    "NaN in the gradient).",
                    "数值正确，但梯度里有 NaN：请用 torch.where / masked_fill 处理结果，而不要除以零，"
                    "也不要事后修补 NaN（nan_to_num 修不了梯度里的 NaN）。")
    if not torch.allclose(grad, want_grad, atol=1e-5):
        return fail(f"The values are right but the gradient is not the masked softmax's (largest difference "
                    f"{float((grad - want_grad).abs().max()):.3g}): compute the weights from the scores with torch "
                    "operations all the way.",
                    f"数值正确，但梯度与带掩码 softmax 的梯度不一致（最大差值 "
                    f"{float((grad - want_grad).abs().max()):.3g}）：请全程用 torch 运算从分数算出权重。")
    return _float16_verdict(fn)


# Where a fill value enters an answer: its value is recorded, so the float16 verdict names it only if it was used.
_FILLS = [(torch.Tensor, "masked_fill"), (torch.Tensor, "masked_fill_"), (torch, "masked_fill"), (torch, "where"),
          (torch, "full_like"), (torch, "full"), (torch.Tensor, "fill_")]


def _float16_verdict(fn) -> bool:
    """The same answer in float16: name the cause of a failure from what the answer did, not from a guess."""
    half, keep = _softmax_case(torch.float16)
    crashed = None
    with watching(fn, _FILLS) as fills:
        try:                                   # not attempt(): the crash is explained below
            got16 = fn(half, keep)
        except RuntimeError as err:
            got16, crashed = None, err
    values = [v for _, args, kwargs in fills.records for v in (*args, *kwargs.values())
              if isinstance(v, (int, float)) and not isinstance(v, bool)]
    huge = [v for v in values if math.isfinite(v) and abs(v) > 65504]
    want16 = _reference_masked_softmax(half.detach().float(), keep)
    if crashed is None and isinstance(got16, torch.Tensor) and got16.shape == want16.shape and \
            torch.isfinite(got16).all() and torch.allclose(got16.detach().float(), want16, atol=2e-3):
        return passed("Correct: masked keys get 0, empty rows are all zeros, no NaN (float32 and float16).",
                      "正确：被遮住的键权重为 0，全被遮住的行全为 0，没有 NaN（float32 和 float16 都对）。")
    if huge:
        return fail(f"Right in float32, wrong in float16: your fill {huge[0]:g} does not exist in float16 (its "
                    "largest magnitude is 65504, section 7), so masked_fill raises or the value becomes −inf. "
                    "Fill with −inf and zero the empty rows afterwards.",
                    f"float32 下正确，float16 下出错：你的填充值 {huge[0]:g} 在 float16 里根本不存在（最大只能表示 "
                    "65504，见第 7 节），masked_fill 会报错，或者它变成 −inf。请用 −inf 填充，再把空行清零。")
    if crashed is not None:
        return fail(f"Right in float32, but in float16 your function raised {type(crashed).__name__}: {crashed}",
                    f"float32 下正确，但在 float16 下你的函数抛出了 {type(crashed).__name__}：{crashed}")
    if not isinstance(got16, torch.Tensor) or got16.shape != want16.shape:
        return is_tensor(got16, want16.shape, "float16 weights", "float16 注意力权重")
    bad = ~torch.isfinite(got16).all(-1)                                               # (B, h, T): rows
    empty = ~keep.any(-1)
    if bad.any():
        where_en = "the rows whose keys are all masked" if torch.equal(bad, bad & empty) else "rows with kept keys"
        where_zh = "所有键都被遮住的行" if torch.equal(bad, bad & empty) else "有未遮住键的行"
        return fail(f"Right in float32, wrong in float16: {int(bad.sum())} rows are not finite ({where_en}). A "
                    "constant that is fine in float32 is 0 or infinite in float16 (smallest normal number 6e-5, "
                    "largest 65504): an ε such as 1e-30 or 1e-9 becomes 0, so 0/0 gives NaN. Zero the empty rows "
                    "with torch.where / masked_fill instead of dividing by a tiny number.",
                    f"float32 下正确，float16 下出错：有 {int(bad.sum())} 行不是有限值（{where_zh}）。在 float32 "
                    "里没问题的常数，在 float16 里会变成 0 或无穷（最小的正规数约 6e-5，最大 65504）：1e-30 或 1e-9 "
                    "这样的 ε 会变成 0，于是 0/0 得到 NaN。请用 torch.where / masked_fill 把空行清零，不要除以一个"
                    "很小的数。")
    err = float((got16.detach().float() - want16).abs().max())
    return fail(f"Right in float32, but in float16 the weights differ from the masked softmax by up to {err:.3g}.",
                f"float32 下正确，但在 float16 下与带掩码 softmax 的最大差值为 {err:.3g}。")




def _reference_sliding_window_mask(t: int, window: int) -> torch.Tensor:
    """``(T, T)``: query i sees keys j with ``i - window < j <= i`` (itself and the ``window - 1`` before)."""
    i = torch.arange(t)[:, None]
    j = torch.arange(t)[None, :]
    return (j <= i) & (j > i - window)


@never_raises
def check_sliding_window_mask(fn) -> bool:
    """Exercise 3: ``fn(T, window)`` -> ``(T, T)`` causal mask limited to the last ``window`` positions,
    built with broadcasting (no Python loops)."""
    g = fresh_generator()                               # the last case is drawn afresh: no table passes
    for t, window in ((6, 3), (5, 1), (4, 10), (7, 2), (fresh_int(8, 257, g), fresh_int(1, 65, g))):
        ok, got, loops = _python_loops(fn, t, window, budget=3, small=(4, 2), large=(16, 2))
        if not ok or not is_mask(got, (t, t)):
            return False
        want = _reference_sliding_window_mask(t, window)
        if not torch.equal(got, want):
            counts = got.sum(-1).tolist()
            return fail(f"T={t}, window={window}: each query should see min(i + 1, window) keys "
                        f"{want.sum(-1).tolist()}, yours sees {counts}.",
                        f"T={t}、window={window}：第 i 个查询应看到 min(i + 1, window) 个键 "
                        f"{want.sum(-1).tolist()}，你的掩码是 {counts}。")
        if loops:
            return _loops_message("mask", "掩码")
    return passed("Correct: every query sees itself and the window − 1 tokens before it.",
                  "正确：每个查询只看到自己和它之前的 window − 1 个词元。")
