"""Shared plumbing of the lessons' exercise checks: a check prints a verdict and returns True/False, never raises.

A student's stub ``raise NotImplementedError`` means "not attempted yet" (so the notebook still runs in CI);
any other exception from their code is reported as a message, not a traceback. Every message is printed in the
notebook's language (:func:`course_lab.i18n.current_language`, or an explicit ``lang``).

Every ``check_*`` function is decorated with :func:`never_raises`. Two ways to write one:

* by hand, for checks with hints about typical mistakes::

      @never_raises
      def check_split_heads(fn) -> bool:
          ok, got = attempt(fn, x)               # prints "not attempted" or the crash itself
          if not ok or not tensor_close(got, want, "split_heads", "split_heads"):
              return False
          return passed("Correct: ...", "正确：……")

* from a list of cases, for checks that only compare results: :func:`run_check` with a *comparison*
  ``compare(got, expected)`` that returns None when they agree, else a *problem*: the pair ``(en, zh)``
  explaining what is wrong (:func:`tensor_problem`, :func:`number_problem`, :func:`equal_problem`).
"""

from __future__ import annotations

import contextlib
import dis
import functools
import math
from collections.abc import Callable, Iterable

import torch

from . import i18n

Problem = tuple[str, str]  # what is wrong with a student's result: (English, Chinese), without the verdict mark


# --- verdicts -------------------------------------------------------------------------------------------------


def say(en: str, zh: str, lang: str | None = None) -> None:
    """Print the message in the notebook's language (or in ``lang``)."""
    print(i18n.pick({"en": en, "zh": zh}, lang))


def passed(en: str = "Correct!", zh: str = "正确！", lang: str | None = None) -> bool:
    """Print ``✓ <message>`` and return True: the last line of a check that passed."""
    say(f"✓ {en}", f"✓ {zh}", lang)
    return True


def fail(en: str, zh: str, lang: str | None = None) -> bool:
    """Print ``✗ <message>`` and return False: ``return fail("Swapped: ...", "弄反了：……")``."""
    say(f"✗ {en}", f"✗ {zh}", lang)
    return False


def report(problem: Problem | str | None, what_en: str, what_zh: str, lang: str | None = None) -> bool:
    """True when there is no problem; otherwise print ``✗ what: problem`` and return False."""
    if problem is None:
        return True
    en, zh = (problem, problem) if isinstance(problem, str) else problem
    return fail(f"{what_en}: {en}", f"{what_zh}：{zh}", lang)


def not_attempted(lang: str | None = None) -> bool:
    """Print the "not attempted yet" verdict and return False."""
    say("⏳ Not attempted yet: replace `raise NotImplementedError` with your code, then run this cell again.",
        "⏳ 还没有作答：把 `raise NotImplementedError` 换成你的代码，再运行这个单元格。", lang)
    return False


def never_raises(check: Callable) -> Callable:
    """Decorator of every ``check_*`` function: an error while *judging* an answer is a verdict, not a traceback.

    The student's own call is guarded by :func:`attempt`; this covers what comes after it, such as comparing a
    float32 answer with a float64 reference (``torch.allclose`` raises) or an attribute a nonsense answer lacks.
    """
    @functools.wraps(check)
    def guarded(*args, **kwargs) -> bool:
        try:
            return check(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - the notebook must run on, whatever the answer is
            return fail(f"Could not check your answer ({type(err).__name__}: {err}): look at its type, shape "
                        "and dtype.",
                        f"无法检查你的答案（{type(err).__name__}：{err}）：请检查它的类型、形状和 dtype。",
                        kwargs.get("lang"))
    return guarded


# --- calling the student's function ---------------------------------------------------------------------------


def _call(fn: Callable, args: tuple, kwargs: dict, lang: str | None):
    try:
        return True, fn(*args, **kwargs)
    except NotImplementedError:
        return None, None
    except Exception as err:  # noqa: BLE001 - any bug in the student's code is reported, never raised
        fail(f"Your function raised {type(err).__name__}: {err}", f"你的函数抛出了 {type(err).__name__}：{err}",
             lang)
        return False, None


def attempt(fn: Callable, *args, **kwargs):
    """``(True, result)``, or ``(False, None)`` once the verdict is printed: not attempted yet, or the crash."""
    ok, result = _call(fn, args, kwargs, None)
    if ok is None:
        not_attempted()
    return bool(ok), result


# --- what is wrong with a result ------------------------------------------------------------------------------


def _shape(x) -> tuple:
    return tuple(x.shape)


def type_problem(got, shape=None, dtype: torch.dtype | None = None) -> Problem | None:
    """Why ``got`` is not a tensor of the given shape and dtype (either may be None: not checked)."""
    if not isinstance(got, torch.Tensor):
        return (f"expected a tensor, got {type(got).__name__}", f"应该返回张量，实际返回的是 {type(got).__name__}")
    if dtype is not None and got.dtype != dtype:
        return f"expected a {dtype} tensor, got {got.dtype}", f"应该返回 {dtype} 张量，实际是 {got.dtype}"
    if shape is not None and _shape(got) != tuple(shape):
        return (f"expected shape {tuple(shape)}, got {_shape(got)}",
                f"形状应为 {tuple(shape)}，实际是 {_shape(got)}")
    return None


def tensor_problem(got, want, atol: float = 1e-5, rtol: float = 1e-4, *, numbers: bool = False) -> Problem | None:
    """Why ``got`` differs from the tensor ``want`` (type, shape or values); None when they agree.

    ``numbers=True`` also accepts plain numbers and lists (both sides are compared in float64).
    """
    if numbers:
        try:
            got = torch.as_tensor(got, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):
            return (f"expected a tensor or a number, got {type(got).__name__}",
                    f"应该返回张量或数，实际返回的是 {type(got).__name__}")
        want = torch.as_tensor(want, dtype=torch.float64)
    problem = type_problem(got, want.shape)
    if problem is not None:
        return problem
    got = got.detach().to(want.dtype)
    if not torch.allclose(got, want, atol=atol, rtol=rtol):
        err = float((got - want).abs().max())
        return f"the values differ (largest difference {err:.3g})", f"数值不一致（最大差值 {err:.3g}）"
    return None


def number_problem(got, want: float, rel: float = 1e-6) -> Problem | None:
    """Why the number ``got`` differs from ``want`` (relative tolerance, absolute below 1)."""
    try:
        value = float(got)
    except (TypeError, ValueError, RuntimeError):
        return f"expected a number, got {type(got).__name__}", f"应该返回一个数，实际返回的是 {type(got).__name__}"
    if not math.isfinite(value) or abs(value - want) > rel * max(1.0, abs(want)):
        return f"expected {want:.6g}, got {value:.6g}", f"应为 {want:.6g}，实际是 {value:.6g}"
    return None


def equal_problem(got, want) -> Problem | None:
    """Why ``got != want``, for plain values (strings, ints)."""
    if got == want:
        return None
    return f"expected {want!r}, got {got!r}", f"应为 {want!r}，实际得到 {got!r}"


# --- checks on one result -------------------------------------------------------------------------------------


def is_tensor(got, shape=None, what_en: str = "result", what_zh: str = "结果", *,
              dtype: torch.dtype | None = None) -> bool:
    """Check that ``got`` is a tensor of the given shape (and dtype); print what is wrong."""
    return report(type_problem(got, shape, dtype), what_en, what_zh)


def is_mask(got, shape=None) -> bool:
    """Check that ``got`` is a keep-mask: a bool tensor, True = may attend (the course's convention)."""
    return is_tensor(got, shape, "mask (True = may attend)", "掩码（True = 可以关注）", dtype=torch.bool)


def tensor_close(got, want: torch.Tensor, what_en: str, what_zh: str, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    """Compare a student's tensor with the reference; print what is wrong (type, shape or values)."""
    return report(tensor_problem(got, want, atol, rtol), what_en, what_zh)


# --- checks over a list of cases ------------------------------------------------------------------------------


def _short(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"tensor{_shape(value)}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def run_check(student: Callable, cases: Iterable, compare: Callable = equal_problem, lang: str | None = None) -> bool:
    """Call ``student(*args)`` for each ``(args, expected)`` case; print one verdict; True if all pass.

    ``compare(got, expected)`` returns None when they agree, else a :data:`Problem` (or one string). Never
    raises: a stub left as ``raise NotImplementedError`` prints "not attempted yet", any other error is feedback.
    """
    for args, expected in cases:
        ok, got = _call(student, tuple(args), {}, lang)
        if ok is None:
            return not_attempted(lang)
        if not ok:
            return False
        problem = compare(got, expected)
        if problem is not None:
            shown = ", ".join(_short(a) for a in args)
            return report(problem, f"Not yet, for input ({shown})", f"还不对，输入为 ({shown}) 时", lang)
    return passed(lang=lang)


# --- shortcuts an exercise forbids ------------------------------------------------------------------------------


class Calls(list):
    """Names of the watched functions that were called (see :func:`watching`); empty when none was."""


@contextlib.contextmanager
def watching(fn: Callable, targets: Iterable[tuple[object, str]]):
    """Within the block, record calls to ``owner.name`` for each ``(owner, name)`` in ``targets``.

    A check uses it to recognise the shortcut an exercise forbids (calling the library function the student is
    asked to write). The watched function still runs, so the student's code finishes and the check can say what
    was used. Globals of ``fn`` bound to a watched object (``from course_utils.masks import padding_mask``) are
    watched too. Everything is restored on exit. Yields a :class:`Calls` list.
    """
    calls, saved, globals_ = Calls(), [], getattr(fn, "__globals__", {})
    for owner, name in targets:
        original = getattr(owner, name)

        def spy(*args, __original=original, __name=name, **kwargs):
            calls.append(__name)
            return __original(*args, **kwargs)

        own = isinstance(owner, type) and name not in vars(owner)    # inherited: delete again on exit
        saved.append((owner, name, None if own else original))
        setattr(owner, name, spy)
        for key, value in list(globals_.items()):
            if value is original:
                saved.append((globals_, key, value))
                globals_[key] = spy
    try:
        yield calls
    finally:
        for owner, name, original in reversed(saved):
            if isinstance(owner, dict):
                owner[name] = original
            elif original is None:
                delattr(owner, name)
            else:
                setattr(owner, name, original)


def has_python_loop(fn: Callable) -> bool:
    """True if the function's code (or a comprehension or function defined inside it) has a Python ``for`` loop:
    for checks of exercises that ask for one vectorised call instead of a loop over the batch."""
    codes = [getattr(fn, "__code__", None)]
    while codes:
        code = codes.pop()
        if code is None:
            continue
        if any(ins.opname == "FOR_ITER" for ins in dis.get_instructions(code)):
            return True
        codes.extend(c for c in code.co_consts if hasattr(c, "co_code"))
    return False
