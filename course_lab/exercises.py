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

import ast
import contextlib
import dis
import functools
import inspect
import math
import os
import signal
import sys
import textwrap
import threading
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


# Seconds one call of the student's function may take: a check never hangs the notebook (``while True: pass``).
TIME_LIMIT_S = 20.0


class _TooSlow(BaseException):
    """Raised in the student's code by the time limit: a BaseException, so their ``except Exception`` cannot
    swallow it."""


@contextlib.contextmanager
def time_limit(seconds: float):
    """Raise :class:`_TooSlow` in the block after ``seconds`` (``signal.setitimer``, so on the main thread of a
    POSIX machine only; elsewhere, e.g. on Windows, the block runs without a limit)."""
    usable = (hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
              and seconds > 0)
    if not usable:
        yield
        return

    def expire(signum, frame):
        raise _TooSlow

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def slow_exercise(factor: float = 15.0):
    """Within the block the student's calls may take ``factor`` times :data:`TIME_LIMIT_S`: for the experiment
    exercises whose function trains a small model (still a limit, so a hang still ends)."""
    global TIME_LIMIT_S
    saved, TIME_LIMIT_S = TIME_LIMIT_S, TIME_LIMIT_S * factor
    try:
        yield
    finally:
        TIME_LIMIT_S = saved


def _tensors(args: tuple, kwargs: dict) -> list[tuple[str, torch.Tensor]]:
    """The caller's tensors among the arguments (top level, and inside lists, tuples and dicts), by name."""
    found = []
    for where, value in [(f"argument {i + 1}", a) for i, a in enumerate(args)] + list(kwargs.items()):
        inner = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else [value]
        found += [(str(where), t) for t in inner if isinstance(t, torch.Tensor)]
    return found


def _where_zh(where: str) -> str:
    """"argument 2" → "第 2 个参数"; a keyword argument keeps its name."""
    return f"第 {where.split()[1]} 个参数" if where.startswith("argument ") else f"参数 {where}"


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit the same values (NaN equals NaN), shape and dtype."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a, b) or (a.is_floating_point() and torch.allclose(a, b, rtol=0, atol=0, equal_nan=True))


def _call(fn: Callable, args: tuple, kwargs: dict, lang: str | None):
    """``(True, result)``; ``(None, None)`` for a stub; ``(False, None)`` once a crash, a call over
    :data:`TIME_LIMIT_S` or an in-place change of the caller's tensors is reported."""
    inputs = _tensors(args, kwargs)
    before = [t.detach().clone() for _, t in inputs]     # to refuse an answer that changes its input in place
    try:
        with time_limit(TIME_LIMIT_S):
            result = fn(*args, **kwargs)
    except NotImplementedError:
        return None, None
    except _TooSlow:
        fail(f"Your function ran longer than {TIME_LIMIT_S:g} s: look for a loop that never ends.",
             f"你的函数运行超过了 {TIME_LIMIT_S:g} 秒：看看是不是有停不下来的循环。", lang)
        return False, None
    except SystemExit:  # sys.exit(), exit(), quit(): would end the check (or the script) with no verdict
        fail("Your function called exit(): return the value instead.",
             "你的函数调用了 exit()：请改为用 return 返回结果。", lang)
        return False, None
    except Exception as err:  # noqa: BLE001 - any bug in the student's code is reported, never raised
        fail(f"Your function raised {type(err).__name__}: {err}", f"你的函数抛出了 {type(err).__name__}：{err}",
             lang)
        return False, None
    changed = [where for (where, t), old in zip(inputs, before) if not _same(t.detach(), old)]
    if changed:
        for (_, t), old in zip(inputs, before):   # put the caller's tensors back for the rest of the notebook
            if t.shape == old.shape and t.dtype == old.dtype:
                with torch.no_grad():
                    t.copy_(old)
        fail(f"Your function changed its input in place ({changed[0]}): work on a copy (x.clone()) or use "
             "out-of-place operations (masked_fill, not masked_fill_).",
             f"你的函数原地修改了传入的张量（{_where_zh(changed[0])}）：请在副本（x.clone()）上操作，或用不修改原张量的运算"
             "（masked_fill，而不是 masked_fill_）。", lang)
        return False, None
    return True, result


def attempt(fn: Callable, *args, **kwargs):
    """``(True, result)``, or ``(False, None)`` once the verdict is printed: not attempted yet, or the crash."""
    ok, result = _call(fn, args, kwargs, None)
    if ok is None:
        not_attempted()
    return bool(ok), result


# --- inputs a check draws ------------------------------------------------------------------------------------


def fresh_generator() -> torch.Generator:
    """A generator seeded afresh on every run of a check (from the operating system, so the global RNG is left
    alone): the inputs a check draws with it differ from run to run, so no table of a previous run's inputs
    (and no answer tuned to one fixed input) can pass. Correct answers pass for any input."""
    return torch.Generator().manual_seed(int.from_bytes(os.urandom(6), "little"))


def fresh_int(low: int, high: int, generator: torch.Generator) -> int:
    """One integer drawn uniformly from ``[low, high)`` with ``generator``."""
    return int(torch.randint(low, high, (), generator=generator))


def other_ids(ids: torch.Tensor, special: dict[str, int], generator: torch.Generator):
    """The same batch under a random renumbering of its token ids: ``(ids', special')`` with every id (and each
    named special id: pad, bos, eos) mapped through one permutation. An answer that uses its arguments gives the
    renumbered result; one that hard-codes ``0`` for ``<pad>`` does not."""
    size = max(int(ids.max()), *special.values()) + 1
    perm = torch.randperm(size, generator=generator)
    while int(perm[special.get("pad_id", 0)]) == special.get("pad_id", 0):   # the pad id must really move
        perm = torch.randperm(size, generator=generator)
    return perm[ids], {name: int(perm[v]) for name, v in special.items()}


def fixed_id_problem(special: dict[str, int]) -> bool:
    """The verdict for an answer right only for the ids of the first case (a hard-coded pad id)."""
    shown = ", ".join(f"{k} = {v}" for k, v in special.items())
    return fail(f"Right for the first batch, wrong once the ids are renumbered ({shown}): use the arguments "
                "(pad_id, ...) instead of a fixed id such as 0.",
                f"第一个批次对了，但换一套编号（{shown}）后就错了：请使用参数（pad_id 等），"
                "不要写死某个 ID（比如 0）。")


def right_after_renumbering(fn: Callable, ids: torch.Tensor, reference: Callable, generator: torch.Generator) -> bool:
    """Run ``fn(ids', pad_id')`` on the same batch with its ids renumbered (:func:`other_ids`): True when the answer
    still equals ``reference(ids', pad_id')``; otherwise print why (a hard-coded pad id) and return False."""
    ids2, special = other_ids(ids, {"pad_id": 0}, generator)
    ok, got = attempt(fn, ids2.clone(), special["pad_id"])
    if not ok:
        return False
    want = reference(ids2, special["pad_id"])
    if not isinstance(got, torch.Tensor) or not torch.equal(got, want):
        return fixed_id_problem(special)
    return True


def _same_result(a, b) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return _same(a.detach(), b.detach())
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_result(x, y) for x, y in zip(a, b))
    return a == b


def uses_the_generator(fn: Callable, make_args: Callable[[torch.Generator], tuple], lang: str | None = None) -> bool:
    """True when every random number ``fn`` draws comes from the generator it is given: the same seed gives the
    same result, another seed another result, and the global RNG is left untouched (``torch.rand`` without
    ``generator=`` is refused, and the notebook's random state is put back). ``make_args(generator)`` builds the
    arguments of one call. Otherwise the verdict is printed and False returned."""
    state = torch.get_rng_state()
    results = []
    for seed in (1234, 1234, 98765):
        ok, result = _call(fn, make_args(torch.Generator().manual_seed(seed)), {}, lang)
        if not ok:
            if ok is None:
                not_attempted(lang)
            torch.set_rng_state(state)
            return False
        results.append(result)
    touched = not torch.equal(torch.get_rng_state(), state)
    torch.set_rng_state(state)
    if touched:
        return fail("Your function draws from the global random generator (torch.rand / randint without "
                    "generator=...): pass generator=generator to every draw, so that a seed reproduces the masking.",
                    "你的函数使用了全局随机数生成器（torch.rand / randint 没有传 generator=...）："
                    "请在每一次抽样时都传入 generator=generator，这样同一个种子才能复现同样的结果。", lang)
    if not _same_result(results[0], results[1]):
        return fail("The same generator seed gave two different results: draw every random number from the "
                    "generator argument.",
                    "同一个生成器种子给出了两个不同的结果：所有随机数都应该从参数 generator 里抽取。", lang)
    if _same_result(results[0], results[2]):
        return fail("Two different generator seeds gave the same result: the generator argument is not used. "
                    "Draw with torch.rand(..., generator=generator).",
                    "两个不同的生成器种子给出了相同的结果：参数 generator 没有被使用。"
                    "请用 torch.rand(..., generator=generator) 抽样。", lang)
    return True


def also_right_for(fn: Callable, args: tuple, want, compare: Callable, lang: str | None = None) -> bool:
    """One more case, drawn by the check on this run: call ``fn(*args)`` and compare with ``want``
    (``compare(got, want)`` returns None or a problem). True when it agrees; else the verdict is printed."""
    ok, got = _call(fn, tuple(args), {}, lang)
    if ok is None:
        return not_attempted(lang)
    if not ok:
        return False
    shown = ", ".join(_short(a) for a in args)
    return report(compare(got, want), f"Not yet, for the drawn input ({shown})", f"还不对，抽取的输入为 ({shown}) 时",
                  lang)


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
            if isinstance(got, (str, bytes)):
                raise TypeError
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


def as_number(got) -> tuple[float | None, Problem | None]:
    """``(float(got), None)`` for a finite number or a one-element tensor, else ``(None, why)``: a string is not a
    number (``float("3")`` would take it for one) and NaN is not an answer (``abs(nan - want) > tol`` is False, so
    a tolerance test alone would let it through)."""
    try:
        if isinstance(got, (str, bytes)):
            raise TypeError
        value = float(got.detach()) if isinstance(got, torch.Tensor) else float(got)
    except (TypeError, ValueError, RuntimeError):
        kind = type(got).__name__
        return None, (f"expected a number, got {kind}", f"应该返回一个数，实际返回的是 {kind}")
    if not math.isfinite(value):
        return None, (f"expected a finite number, got {value}", f"应该返回一个有限的数，实际是 {value}")
    return value, None


def one_value_problem(got, want) -> Problem | None:
    """A tensor of several values where ``want`` is one number: ``(en, zh)`` saying so, else None."""
    if isinstance(got, torch.Tensor) and not isinstance(want, torch.Tensor) and got.numel() != 1:
        what = ("one whole number", "一个整数") if isinstance(want, int) else ("one value", "一个值")
        return (f"expected {what[0]}, got a tensor of shape {tuple(got.shape)}",
                f"应该返回{what[1]}，实际返回的是形状为 {tuple(got.shape)} 的张量")
    return None


def number_problem(got, want: float, rel: float = 1e-6) -> Problem | None:
    """Why the number ``got`` differs from ``want`` (relative tolerance, absolute below 1)."""
    value, problem = as_number(got)
    if problem:
        return problem
    if abs(value - want) > rel * max(1.0, abs(want)):
        return f"expected {want:.6g}, got {value:.6g}", f"应为 {want:.6g}，实际是 {value:.6g}"
    return None


def equal_problem(got, want) -> Problem | None:
    """Why ``got != want``, for plain values (strings, ints); a tensor of several values for one is said as such
    (``==`` would give a tensor, whose truth is ambiguous)."""
    if (problem := one_value_problem(got, want)) is not None:
        return problem
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
    """Names of the watched functions that were called (see :func:`watching`); empty when none was.

    ``records`` keeps each call's ``(name, args, kwargs)``, for a check that judges *how* a function was used
    (e.g. the losses an experiment backpropagated)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.records: list[tuple[str, tuple, dict]] = []


# Where a watched function may be reached under another name: the public modules of PyTorch a student imports
# from, and the course's own packages. Private routes (torch._C, torch._VF, aten ops) are not chased.
_ALIAS_MODULES = ("torch", "torch.functional", "torch.nn.functional", "torch.func", "torch.linalg",
                  "torch.special", "torch.autograd")
_ALIAS_PACKAGES = ("course_utils", "course_lab")    # with every module inside them


def _alias_homes(original, globals_: dict) -> list[dict]:
    """Every namespace that binds ``original`` by identity: the student's globals and the modules above."""
    homes = [globals_] + [vars(module) for name, module in list(sys.modules.items())
                          if module is not None and (name in _ALIAS_MODULES or name.split(".")[0] in _ALIAS_PACKAGES
                                                     or name.startswith("torch.nn.modules."))]
    return [home for home in homes if any(value is original for value in home.values())]


def _watch_targets(targets: Iterable[tuple[object, str]]) -> list[tuple[object, str, str]]:
    """``(owner, attribute, label)``: a class is watched through its ``__init__``, so that every route that builds
    one (``type(obj)(...)``, another class that makes it inside) is seen, and ``isinstance`` keeps working."""
    out = []
    for owner, name in targets:
        value = getattr(owner, name)
        out.append((value, "__init__", name) if isinstance(value, type) else (owner, name, name))
    return list(dict.fromkeys(out))


@contextlib.contextmanager
def watching(fn: Callable, targets: Iterable[tuple[object, str]]):
    """Within the block, record calls to ``owner.name`` for each ``(owner, name)`` in ``targets``.

    A check uses it to recognise the shortcut an exercise forbids (calling the library function the student is
    asked to write). The watched function still runs, so the student's code finishes and the check can say what
    was used. A function is watched by identity wherever it is bound: in ``fn``'s globals and in the modules of
    :data:`_ALIAS_MODULES` (``from course_utils.masks import padding_mask``, ``F.softmax`` and ``torch.softmax``
    alike). A class is watched by its ``__init__``. Everything is restored on exit. Yields a :class:`Calls` list.
    """
    calls, saved, globals_ = Calls(), [], getattr(fn, "__globals__", {})
    for owner, name, label in _watch_targets(targets):
        original = getattr(owner, name)

        def spy(*args, __original=original, __label=label, **kwargs):
            calls.append(__label)
            calls.records.append((__label, args, kwargs))
            return __original(*args, **kwargs)

        own = isinstance(owner, type) and name not in vars(owner)    # inherited: delete again on exit
        saved.append((owner, name, None if own else original))
        setattr(owner, name, spy)
        if isinstance(owner, type) and name == "__init__":
            continue
        for home in _alias_homes(original, globals_):
            for key, value in list(home.items()):
                if value is original:
                    saved.append((home, key, value))
                    home[key] = spy
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


# --- how much memory an answer uses ------------------------------------------------------------------------------


class Sizes:
    """What :func:`tracking_sizes` saw: ``largest``, the most elements of any tensor an operation produced."""

    def __init__(self):
        self.largest = 0


@contextlib.contextmanager
def tracking_sizes():
    """Within the block, record the size of every tensor any torch function returns (factories included, on any
    device, ``meta`` too), by a torch function mode: a check that asks for O(d) work refuses an answer that builds
    a d × d matrix, whatever function builds it (``torch.zeros`` and strided assignment, ``block_diag``,
    ``diag_embed``, ...), and a check that asks for a formula refuses an answer that builds the tensor to measure
    it. (A function mode, not a dispatch mode: the first dispatch mode of a session imports sympy, seconds that
    would count against the student's time limit.)"""
    from torch.overrides import TorchFunctionMode
    from torch.utils._pytree import tree_leaves

    sizes = Sizes()

    class _Record(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for leaf in tree_leaves(out):
                if isinstance(leaf, torch.Tensor):
                    sizes.largest = max(sizes.largest, leaf.numel())
            return out

    with _Record():
        yield sizes


# --- "no Python loops": one detector for every check -------------------------------------------------------------

_LOOP_NODES = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
# A loop by another name: map(row, x), functools.reduce(f, rows), itertools.starmap(f, pairs), accumulate(rows).
_LOOP_CALLS = {"map", "filter", "reduce", "starmap", "accumulate"}


def _over_constants(node: ast.AST) -> bool:
    """A ``for`` or comprehension whose every iterable is a literal display (``for m in (tril, eye)``): its length
    is fixed by the code, not by the data, so it is not a loop over rows or cells."""
    iters = [node.iter] if isinstance(node, (ast.For, ast.AsyncFor)) else \
        [gen.iter for gen in getattr(node, "generators", ())]
    return bool(iters) and all(isinstance(it, (ast.Tuple, ast.List, ast.Set)) for it in iters)
_BACKWARD_JUMPS = {"FOR_ITER", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"}


def _own_functions(fn: Callable, names: Iterable[str]) -> list[Callable]:
    """The functions among ``names`` that the student wrote next to ``fn`` (same module, not a library)."""
    scope = dict(getattr(fn, "__globals__", {}))
    closure = getattr(fn, "__closure__", None) or ()
    scope.update(zip(getattr(getattr(fn, "__code__", None), "co_freevars", ()),
                     (c.cell_contents for c in closure if c.cell_contents is not None)))
    home = getattr(fn, "__module__", None)
    return [scope[n] for n in names if inspect.isfunction(scope.get(n)) and scope[n].__module__ == home]


def _loop_in_source(fn: Callable) -> tuple[bool, set[str]] | None:
    """``(has a loop, names it reads)`` from the function's source; None when there is no parsable source."""
    if getattr(fn, "__name__", "") == "<lambda>":
        return None                        # its source line may hold other code: read the bytecode instead
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None
    loop = False
    for node in ast.walk(tree):
        if isinstance(node, _LOOP_NODES):
            loop = loop or not _over_constants(node)
        elif isinstance(node, ast.Call):
            callee = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            loop = loop or callee in _LOOP_CALLS
    return loop, {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def _loop_in_code(fn: Callable) -> tuple[bool, set[str]]:
    """The same from the bytecode (lambdas, code without source): backward jumps, ``map``/``filter``."""
    codes, names, loop = [getattr(fn, "__code__", None)], set(), False
    while codes:
        code = codes.pop()
        if code is None:
            continue
        loop = loop or any(ins.opname in _BACKWARD_JUMPS for ins in dis.get_instructions(code))
        names |= set(code.co_names)
        codes.extend(c for c in code.co_consts if hasattr(c, "co_code"))
    return loop or bool(_LOOP_CALLS & names), names


def has_python_loop(fn: Callable, _seen: set | None = None) -> bool:
    """True if the student's function loops in Python: ``for``, ``while``, a comprehension, ``map``/``filter``/
    ``reduce``/``starmap``, in its own code or in any function of theirs that it calls (helpers, nested functions).
    A loop over a literal display of a few objects (``for m in (tril, eye)``) is not one. A loop the source does
    not show (recursion, a callable object, a function reached through a container) is found by running the
    answer: :func:`steps_grow`.

    The one loop detector of every check that asks for one vectorised computation instead of a loop.
    """
    seen = set() if _seen is None else _seen
    fn = inspect.unwrap(getattr(fn, "__func__", fn))
    if id(fn) in seen or not hasattr(fn, "__code__"):
        return False
    seen.add(id(fn))
    loop, names = _loop_in_source(fn) or _loop_in_code(fn)
    return loop or any(has_python_loop(helper, seen) for helper in _own_functions(fn, names))


def _library_file(filename: str) -> bool:
    """True for code the student did not write: the standard library, installed packages, the course's own."""
    import sysconfig

    roots = {sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    here = os.path.dirname(os.path.abspath(__file__))
    roots |= {os.path.dirname(os.path.dirname(torch.__file__)), here,                  # torch, course_lab
              os.path.join(os.path.dirname(here), "course_utils")}
    return filename.startswith("<frozen") or any(filename.startswith(root + os.sep) for root in roots)


def python_steps(fn: Callable, *args) -> int | None:
    """How many Python lines the student's own code runs in ``fn(*args)`` (library code not counted), or None
    when the call fails. A vectorised answer runs the same lines whatever the size of its input; a loop, however
    written (``while``, ``starmap``, recursion, a callable object), runs more lines for a bigger one."""
    steps, cache = [0], {}

    def own(code) -> bool:
        if code.co_filename not in cache:
            cache[code.co_filename] = not _library_file(code.co_filename)
        return cache[code.co_filename]

    def local(frame, event, arg):
        if event == "line":
            steps[0] += 1
        return local

    def tracer(frame, event, arg):
        if own(frame.f_code):
            steps[0] += 1
            return local
        return None

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        with time_limit(TIME_LIMIT_S):
            fn(*args)
    except BaseException:                    # noqa: BLE001 - the check's own call reports what went wrong
        return None
    finally:
        sys.settrace(previous)
    return steps[0]


def steps_grow(fn: Callable, small: tuple, large: tuple) -> bool:
    """True when ``fn`` runs more Python lines of its own on ``large`` than on ``small`` (the same inputs with more
    rows or cells): it loops over the data in Python, whatever the code looks like."""
    few, many = python_steps(fn, *small), python_steps(fn, *large)
    return few is not None and many is not None and many > few + 2


# --- autograd by any door ---------------------------------------------------------------------------------------

def autograd_routes() -> list[tuple[object, str]]:
    """Every way to have PyTorch differentiate for the student, for :func:`watching`: reverse mode (``backward``,
    ``torch.autograd.grad`` and ``torch.autograd.functional``, all through the engine's one entry point), forward
    mode (``torch.autograd.forward_ad``'s dual numbers) and every ``torch.func`` transform (``grad``, ``vjp``,
    ``jvp``, ``jacrev``, ``jacfwd``, ``hessian``, with or without ``vmap``: all enter a grad or jvp level)."""
    import torch.autograd.forward_ad as forward_ad
    import torch.autograd.functional as functional
    import torch.autograd.graph as graph

    routes = [(torch.Tensor, "backward"), (torch.autograd, "backward"), (torch.autograd, "grad"),
              (forward_ad, "make_dual"), (forward_ad, "enter_dual_level")]
    routes += [(functional, name) for name in ("jacobian", "hessian", "vjp", "jvp", "hvp", "vhp")]
    routes += [(torch.func, name) for name in ("grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian",
                                               "linearize") if hasattr(torch.func, name)]
    if hasattr(graph, "_engine_run_backward"):                       # the engine's entry point (torch >= 2.3)
        routes.append((graph, "_engine_run_backward"))
    try:
        import torch._functorch.eager_transforms as transforms  # where every torch.func transform enters
        routes += [(transforms, name) for name in ("grad_increment_nesting", "jvp_increment_nesting")
                   if hasattr(transforms, name)]
    except ImportError:                                              # another torch layout: the public names stay
        pass
    return routes


# --- a library function by any name -------------------------------------------------------------------------------

@contextlib.contextmanager
def calling(names: Iterable[str]):
    """Within the block, record every torch function called whose ``__name__`` is in ``names``, whatever route
    reached it: ``F.dropout1d``, ``torch._VF.feature_dropout``, ``nn.Dropout``, ``torch.layer_norm``... (a torch
    function mode sees every call of torch's Python API, public or private). Yields a :class:`Calls` list."""
    from torch.overrides import TorchFunctionMode

    wanted, seen = set(names), Calls()

    class _Names(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            name = getattr(func, "__name__", "")
            if name in wanted:
                seen.append(name)
                seen.records.append((name, args, kwargs or {}))
            return func(*args, **(kwargs or {}))

    with _Names():
        yield seen


def grad_problem(got) -> Problem | None:
    """Why ``got`` cannot carry a gradient back to the inputs: it is not a tensor, or it was detached."""
    if isinstance(got, torch.Tensor) and got.requires_grad:
        return None
    return ("the result carries no gradient (requires_grad is False): compute it from the inputs with torch "
            "operations, without .detach(), .item() or torch.no_grad()",
            "结果不带梯度（requires_grad 为 False）：请直接用 torch 运算从输入算出它，不要用 .detach()、"
            ".item() 或 torch.no_grad()")


# --- installed packages that reach what an exercise is about (appended by the lessons 08-14 pass) ----------------


def loaded_targets(spec: Iterable[tuple[str, Iterable[str]]]) -> list[tuple[object, str]]:
    """``(owner, name)`` targets for :func:`watching`, from packages outside the course (``transformers``,
    ``tokenizers``): ``spec`` is ``((module name, (attribute, ...)), ...)``, and only modules already imported
    count, so a check never pays for importing a large package. An answer that uses one has imported it by the
    time it returns: call the answer once before watching (:func:`watching_installed` does)."""
    out = []
    for module_name, names in spec:
        module = sys.modules.get(module_name)
        for name in names if module is not None else ():
            owner, _, attribute = name.rpartition(".")       # "Tokenizer.encode": a method of a class of the module
            owner = getattr(module, owner, None) if owner else module
            value = getattr(owner, attribute, None)
            if value is None or not callable(value):
                continue
            if isinstance(value, type) and value.__init__ is object.__init__:
                continue  # an extension type built in __new__: watched through the methods named instead
            out.append((owner, attribute))
    return out


def watching_installed(fn: Callable, first_args: tuple, targets: list, spec) -> contextlib.AbstractContextManager:
    """:func:`watching` over ``targets`` plus the installed-package targets of ``spec`` that ``fn`` reaches: ``fn``
    runs once on ``first_args`` first (its result is dropped), so that a package it imports inside is loaded."""
    try:
        # Importing a large package (transformers) may take long: three times a call's limit, 60 s by default;
        # the real calls then have the usual limit.
        with time_limit(3 * TIME_LIMIT_S):
            fn(*first_args)
    except (Exception, SystemExit, _TooSlow):  # the real calls report it; this one only loads what fn imports
        pass
    return watching(fn, list(targets) + loaded_targets(spec))
