"""Shared plumbing of the lessons' exercise checks: a check prints a verdict and returns True/False, never raises.

A student's stub ``raise NotImplementedError`` means "not attempted yet" (so the notebook still runs in CI);
any other exception from their code is reported as a message, not a traceback.
"""

from __future__ import annotations

import torch

from . import i18n


def say(en: str, zh: str) -> None:
    """Print the message in the notebook's language."""
    print(i18n.pick({"en": en, "zh": zh}))


def not_attempted() -> bool:
    say("Not attempted yet: replace `raise NotImplementedError` with your code, then run this cell again.",
        "还没有作答：把 `raise NotImplementedError` 换成你的代码，再运行这个单元格。")
    return False


def run_student(fn, *args, **kwargs):
    """``(ok, result)``: ok is None when the stub is untouched (NotImplementedError), False when it crashed."""
    try:
        return True, fn(*args, **kwargs)
    except NotImplementedError:
        return None, None
    except Exception as err:  # noqa: BLE001 - any bug in the student's code is reported, never raised
        say(f"Your function raised {type(err).__name__}: {err}", f"你的函数抛出了 {type(err).__name__}：{err}")
        return False, None


def tensor_close(got, want: torch.Tensor, what_en: str, what_zh: str, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    """Compare a student's tensor with the reference; print what is wrong (type, shape or values)."""
    if not isinstance(got, torch.Tensor):
        say(f"{what_en}: expected a tensor, got {type(got).__name__}.",
            f"{what_zh}：应该返回张量，实际返回的是 {type(got).__name__}。")
        return False
    if got.shape != want.shape:
        say(f"{what_en}: expected shape {tuple(want.shape)}, got {tuple(got.shape)}.",
            f"{what_zh}：形状应为 {tuple(want.shape)}，实际是 {tuple(got.shape)}。")
        return False
    got = got.detach().to(want.dtype)
    if not torch.allclose(got, want, atol=atol, rtol=rtol):
        err = float((got - want).abs().max())
        say(f"{what_en}: wrong values (largest difference {err:.3g}).", f"{what_zh}：数值不对（最大差值 {err:.3g}）。")
        return False
    return True


def number_close(got, want: float, what_en: str, what_zh: str, rel: float = 1e-6) -> bool:
    """Compare a student's number with the reference."""
    try:
        value = float(got)
    except (TypeError, ValueError):
        say(f"{what_en}: expected a number, got {type(got).__name__}.",
            f"{what_zh}：应该返回一个数，实际返回的是 {type(got).__name__}。")
        return False
    if abs(value - want) > rel * max(1.0, abs(want)):
        say(f"{what_en}: expected {want:.6g}, got {value:.6g}.",
            f"{what_zh}：应为 {want:.6g}，你算出的是 {value:.6g}。")
        return False
    return True


def passed(en: str = "Correct!", zh: str = "正确！") -> bool:
    say(en, zh)
    return True
