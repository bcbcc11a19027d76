"""The shared exercise-check plumbing (course_lab.exercises), and every lesson check written with it.

A check prints one verdict in the notebook's language and returns True/False; it never raises, and a stub left
as ``raise NotImplementedError`` means "not attempted yet". Every ``check_*`` function of the lessons listed in
:data:`FINISHED` is driven with a stub, a crash and a nonsense answer, in English and in Chinese.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import pkgutil
import sys
from pathlib import Path

import pytest
import torch

import course_lab.lessons as lessons_pkg
from course_lab import exercises as ex
from course_lab import i18n

pytestmark = pytest.mark.usefixtures("english")  # tests/conftest.py: messages in English


def not_started(*args, **kwargs):
    raise NotImplementedError


def crashes(*args, **kwargs):
    raise ZeroDivisionError("boom-42")


# --- verdicts -------------------------------------------------------------------------------------------------


def test_verdicts_return_and_mark(capsys):
    assert ex.passed() is True and capsys.readouterr().out == "✓ Correct!\n"
    assert ex.passed("All good.", "都对了。", lang="zh") is True and capsys.readouterr().out == "✓ 都对了。\n"
    assert ex.fail("Swapped.", "弄反了。") is False and capsys.readouterr().out == "✗ Swapped.\n"
    ex.say("hint", "提示")
    assert capsys.readouterr().out == "hint\n"
    assert ex.report(None, "x", "x") is True and capsys.readouterr().out == ""
    assert ex.report("plain text", "what", "什么") is False and "✗ what: plain text" in capsys.readouterr().out


@pytest.mark.parametrize("lang, text", [("en", "⏳ Not attempted yet"), ("zh", "⏳ 还没有作答")])
def test_not_attempted_in_both_languages(lang, text, capsys):
    i18n.set_language(lang)
    assert ex.not_attempted() is False
    assert capsys.readouterr().out.startswith(text)
    ok, got = ex.attempt(not_started, 1, key=2)
    assert (ok, got) == (False, None) and capsys.readouterr().out.startswith(text)


@pytest.mark.parametrize("lang, text", [("en", "✗ Your function raised ZeroDivisionError: boom-42"),
                                        ("zh", "✗ 你的函数抛出了 ZeroDivisionError：boom-42")])
def test_crash_is_reported_not_raised(lang, text, capsys):
    i18n.set_language(lang)
    assert ex.attempt(crashes, 1) == (False, None)
    assert capsys.readouterr().out.strip() == text
    assert ex.attempt(crashes) == (False, None)
    assert capsys.readouterr().out.strip() == text


def test_never_raises_turns_a_judging_error_into_a_verdict(capsys):
    @ex.never_raises
    def check_float64(fn):
        """Compares without converting: a float32 answer makes torch.allclose raise."""
        ok, got = ex.attempt(fn)
        return ok and torch.allclose(got, torch.ones(2, dtype=torch.float64)) and ex.passed()

    assert check_float64.__name__ == "check_float64" and "float32" in check_float64.__doc__
    assert check_float64(lambda: torch.ones(2, dtype=torch.float64)) is True
    capsys.readouterr()
    assert check_float64(lambda: torch.ones(2)) is False
    assert capsys.readouterr().out.startswith("✗ Could not check your answer (RuntimeError: ")
    i18n.set_language("zh")
    assert check_float64(lambda: "ones") is False
    assert capsys.readouterr().out.startswith("✗ 无法检查你的答案（TypeError：")


def test_attempt_passes_arguments_and_returns_the_result(capsys):
    assert ex.attempt(lambda a, b=0: a + b, 2, b=3) == (True, 5)
    assert capsys.readouterr().out == ""
    assert ex.attempt(lambda: None) == (True, None)               # returning None is a result, not a failure
    assert capsys.readouterr().out == ""


# --- what is wrong with a result ------------------------------------------------------------------------------


@pytest.mark.parametrize("lang, wrong_type, wrong_shape, wrong_values", [
    ("en", "✗ out: expected a tensor, got list", "✗ out: expected shape (2, 3), got (3, 2)",
     "✗ out: the values differ (largest difference 1)"),
    ("zh", "✗ 输出：应该返回张量，实际返回的是 list", "✗ 输出：形状应为 (2, 3)，实际是 (3, 2)",
     "✗ 输出：数值不一致（最大差值 1）"),
])
def test_tensor_close_messages(lang, wrong_type, wrong_shape, wrong_values, capsys):
    i18n.set_language(lang)
    want = torch.zeros(2, 3)
    assert ex.tensor_close(torch.zeros(2, 3, dtype=torch.float64), want, "out", "输出") is True
    assert capsys.readouterr().out == ""
    assert ex.tensor_close([[0.0] * 3] * 2, want, "out", "输出") is False
    assert capsys.readouterr().out.strip() == wrong_type
    assert ex.tensor_close(torch.zeros(3, 2), want, "out", "输出") is False
    assert capsys.readouterr().out.strip() == wrong_shape
    got = want.clone()
    got[1, 2] = 1.0
    assert ex.tensor_close(got, want, "out", "输出") is False
    assert capsys.readouterr().out.strip() == wrong_values


def test_tensor_close_tolerances_and_grad():
    want = torch.ones(4)
    assert ex.tensor_close(want + 5e-6, want, "x", "x")
    assert not ex.tensor_close(want + 1e-3, want, "x", "x")
    assert ex.tensor_close(want + 1e-3, want, "x", "x", atol=1e-2)
    assert ex.tensor_close(torch.ones(4, requires_grad=True) * 1, want, "x", "x")   # detached, no error


def test_is_tensor_and_is_mask(capsys):
    assert ex.is_tensor(torch.zeros(2), (2,)) and ex.is_tensor(torch.zeros(2))
    assert not ex.is_tensor(None)
    assert "✗ result: expected a tensor, got NoneType" in capsys.readouterr().out
    assert ex.is_mask(torch.ones(2, 2, dtype=torch.bool), (2, 2))
    assert not ex.is_mask(torch.ones(2, 2))
    assert "mask (True = may attend): expected a torch.bool tensor, got torch.float32" in capsys.readouterr().out
    assert not ex.is_mask(torch.ones(2, dtype=torch.bool), (2, 2))
    assert "expected shape (2, 2), got (2,)" in capsys.readouterr().out
    i18n.set_language("zh")
    assert not ex.is_mask(torch.ones(2))
    assert "✗ 掩码（True = 可以关注）：应该返回 torch.bool 张量" in capsys.readouterr().out


@pytest.mark.parametrize("lang, wrong_type, wrong_value", [
    ("en", "✗ n: expected a number, got str", "✗ n: expected 3, got 4"),
    ("zh", "✗ 数：应该返回一个数，实际返回的是 str", "✗ 数：应为 3，实际是 4"),
])
def test_number_problem_messages(lang, wrong_type, wrong_value, capsys):
    i18n.set_language(lang)

    def close(got, want):
        return ex.report(ex.number_problem(got, want), "n", "数")

    assert close(3, 3.0) and close(torch.tensor(3.0), 3)
    assert not close("three", 3)
    assert capsys.readouterr().out.strip() == wrong_type
    assert not close(4, 3)
    assert capsys.readouterr().out.strip() == wrong_value
    assert not close(float("nan"), 3)                           # NaN is never "close"


def test_problems_are_bilingual_pairs():
    assert ex.tensor_problem(torch.ones(2), torch.ones(2)) is None
    assert ex.tensor_problem(2.0, torch.tensor(2.0), numbers=True) is None     # plain numbers accepted
    assert ex.tensor_problem([1.0, 2.0], torch.tensor([1.0, 2.0]), numbers=True) is None
    assert ex.tensor_problem([1.0, 2.0], torch.tensor([1.0, 2.0])) is not None  # but only when asked for
    en, zh = ex.tensor_problem("about 30", 30.0, numbers=True)
    assert "tensor or a number" in en and "张量或数" in zh
    assert ex.number_problem(1e9 + 1, 1e9) is None and ex.number_problem(1e-7, 0.0) is None
    assert ex.equal_problem("cpu", "cpu") is None
    assert ex.equal_problem("tpu", "cpu") == ("expected 'cpu', got 'tpu'", "应为 'cpu'，实际得到 'tpu'")
    assert ex.type_problem(torch.zeros(2, dtype=torch.int64), dtype=torch.float32) is not None


# --- checks over a list of cases ------------------------------------------------------------------------------


def test_run_check_verdicts(capsys):
    cases = [((2,), 4), ((3,), 9)]
    assert ex.run_check(lambda x: x * x, cases, ex.equal_problem) is True
    assert "Correct" in capsys.readouterr().out
    assert ex.run_check(lambda x: x + x, cases, ex.equal_problem) is False  # right for 2, wrong for 3
    assert "expected 9, got 6" in capsys.readouterr().out
    assert ex.run_check(not_started, cases, ex.equal_problem) is False
    assert "Not attempted yet" in capsys.readouterr().out
    assert ex.run_check(lambda x: 1 / 0, cases, ex.equal_problem) is False
    assert "ZeroDivisionError" in capsys.readouterr().out
    assert ex.run_check(not_started, cases, ex.equal_problem, lang="zh") is False
    assert "还没有作答" in capsys.readouterr().out


def test_run_check_names_the_input_in_the_given_language(capsys):
    cases = [((torch.zeros(2, 3), "x" * 60), 1)]
    assert ex.run_check(lambda t, s: 2, cases, lang="zh") is False      # equal_problem is the default
    out = capsys.readouterr().out
    assert out.startswith("✗ 还不对，输入为 (tensor(2, 3), 'xxx") and "...)" in out and "应为 1，实际得到 2" in out
    assert ex.run_check(lambda t, s: 1 / 0, cases, lang="zh") is False
    assert "你的函数抛出了 ZeroDivisionError" in capsys.readouterr().out
    assert ex.run_check(lambda t, s: "1", cases, lambda got, want: "plain") is False    # a one-string problem
    out = capsys.readouterr().out
    assert out.startswith("✗ Not yet, for input (tensor(2, 3), ") and out.strip().endswith(": plain")


# --- every check of the finished lessons ----------------------------------------------------------------------

# Lessons whose checks are written with the shared plumbing and finished. A lesson joins when its checks are
# done: then its stubs, crashes and nonsense answers are covered here in both languages.
FINISHED = ("l00_welcome", "l01_tokens", "l02_positional", "l03_attention", "l04_multihead", "l05_masking",
            "l06_ffn_norm", "l07_encoder_decoder", "l08_output_loss", "l09_classifier", "l10_seq2seq", "l11_gpt",
            "l12_masked_lm", "l13_pretrained", "l14_fast", "l15_bpe", "l16_modern_decoder", "l17_fine_tuning")


def _own(fn, module) -> bool:
    """Defined by the lesson: in its module, or in a submodule when the lesson is a package (lesson + checks.py)."""
    return fn.__module__ == module.__name__ or fn.__module__.startswith(module.__name__ + ".")


def _lesson_namespace(name: str) -> dict:
    """The lesson module's names, plus those of its submodules (e.g. the imports of its checks.py)."""
    module = importlib.import_module(f"course_lab.lessons.{name}")
    namespace = dict(vars(module))
    for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
        namespace.update(vars(importlib.import_module(f"{module.__name__}.{info.name}")))
    return namespace


def _lesson_checks():
    found = []
    for name in FINISHED:
        module = importlib.import_module(f"course_lab.lessons.{name}")
        for fn_name, fn in inspect.getmembers(module, inspect.isfunction):
            if fn_name.startswith("check_") and _own(fn, module):
                found.append(pytest.param(fn, id=f"{name}.{fn_name}"))
    return found


CHECKS = _lesson_checks()


def test_the_finished_lessons_use_the_shared_plumbing():
    names = {info.name for info in pkgutil.iter_modules(lessons_pkg.__path__)}
    assert set(FINISHED) <= names
    for name in FINISHED:
        module = _lesson_namespace(name)
        assert any(getattr(v, "__module__", None) == ex.__name__ for v in module.values()), name
        assert not {"_say", "_run", "_close", "_not_attempted", "_figure", "_lang"} & set(module), name
    for param in CHECKS:
        assert hasattr(param.values[0], "__wrapped__"), f"{param.id} is not decorated with @never_raises"
    assert len(CHECKS) >= 3 * len(FINISHED)          # at least three exercises per lesson


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("lang, attempted, raised", [("en", "⏳ Not attempted yet", "✗ Your function raised"),
                                                     ("zh", "⏳ 还没有作答", "✗ 你的函数抛出了")])
def test_every_check_never_raises(check, lang, attempted, raised, capsys):
    i18n.set_language(lang)
    assert check(not_started) is False
    assert capsys.readouterr().out.startswith(attempted)
    assert check(crashes) is False
    out = capsys.readouterr().out
    assert out.startswith(raised) and "ZeroDivisionError" in out and "boom-42" in out
    assert check(lambda *args, **kwargs: object()) is False              # nonsense: a verdict, no traceback
    out = capsys.readouterr().out
    assert "✗" in out and "✓" not in out


def test_number_problem_scale():
    # relative above 1, absolute below: 1e-6 of a billion is 1000, of 0.001 it is still 1e-6
    assert ex.number_problem(1e9 + 999, 1e9) is None and ex.number_problem(1e9 + 2000, 1e9) is not None
    assert ex.number_problem(0.001 + 5e-7, 0.001) is None and ex.number_problem(0.001 + 2e-6, 0.001) is not None
    assert ex.number_problem(float("inf"), 1.0) is not None


# --- every exercise of every lesson with a correct answer, a wrong one and the forbidden shortcut ------------------

def _load_answers(path: Path) -> dict:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module                     # dataclasses (and the other tables) look it up there
    spec.loader.exec_module(module)
    return module.ANSWERS


def _all_answers() -> dict:
    """Every tests/exercise_answers_*.py table, merged: {lesson module: [Answer, ...]} (the record is
    tests/exercise_answer.py's Answer)."""
    here = Path(__file__).parent
    files = sorted(here.glob("exercise_answers_*.py"))
    answers: dict = {}
    for path in files:
        for lesson, table in _load_answers(path).items():
            assert lesson not in answers, f"{lesson} has answers in two files"
            answers[lesson] = table
    return answers


ALL_ANSWERS = _all_answers()


def test_every_lesson_lists_every_exercise():
    assert set(ALL_ANSWERS) == set(FINISHED), sorted(set(FINISHED) - set(ALL_ANSWERS))
    for lesson, answers in ALL_ANSWERS.items():
        module = importlib.import_module(f"course_lab.lessons.{lesson}")
        checks = {name for name, fn in inspect.getmembers(module, inspect.isfunction)
                  if name.startswith("check_") and _own(fn, module)}
        assert len(answers) >= 3 and {a.check for a in answers} == checks, lesson


@pytest.mark.parametrize("lesson, answer", [pytest.param(lesson, a, id=f"{lesson}.{a.check}")
                                            for lesson, answers in ALL_ANSWERS.items()
                                            for a in answers])
def test_every_check_accepts_the_answer_and_rejects_mistake_and_shortcut(lesson, answer, capsys):
    check = getattr(importlib.import_module(f"course_lab.lessons.{lesson}"), answer.check)
    assert check(answer.correct, *answer.args) is True
    assert "✓" in capsys.readouterr().out
    assert check(answer.wrong, *answer.args) is False
    assert "✗" in capsys.readouterr().out
    assert check(answer.shortcut, *answer.args) is False
    out = capsys.readouterr().out
    assert "✗" in out and answer.says in out, out


RIGHT = [pytest.param(lesson, a.check, a.args, right, id=f"{lesson}.{a.check}.{i}")
         for lesson, answers in ALL_ANSWERS.items() for a in answers for i, right in enumerate(a.right)]


def test_right_answers_in_other_styles_are_listed():
    lessons = {f"l0{n}" for n in range(8)}
    covered = {lesson[:3] for lesson, answers in ALL_ANSWERS.items() for a in answers if a.right}
    assert lessons <= covered, sorted(lessons - covered)
    # Issue 39 §1: every check it names also has a right answer written another way, not only the reference.
    named = {("l09_classifier", "check_early_stop"), ("l13_pretrained", "check_symmetric_loss"),
             ("l13_pretrained", "check_wordpiece"), ("l14_fast", "check_cross_attention_flops"),
             ("l08_output_loss", "check_binary_cross_entropy"), ("l11_gpt", "check_min_p"),
             ("l05_masking", "check_left_padded_mask")}
    missing = {(lesson, a.check) for lesson, answers in ALL_ANSWERS.items() for a in answers
               if (lesson, a.check) in named and not a.right}
    assert not missing and named <= {(lesson, a.check) for lesson, answers in ALL_ANSWERS.items() for a in answers}, \
        sorted(missing)


@pytest.mark.parametrize("lesson, check_name, args, right", RIGHT)
def test_every_check_accepts_right_answers_in_other_styles(lesson, check_name, args, right, capsys):
    check = getattr(importlib.import_module(f"course_lab.lessons.{lesson}"), check_name)
    assert check(right, *args) is True, capsys.readouterr().out
    assert "✓" in capsys.readouterr().out


ALSO = [pytest.param(lesson, a.check, a.args, wrong, says, id=f"{lesson}.{a.check}.{i}")
        for lesson, answers in ALL_ANSWERS.items() for a in answers for i, (wrong, says) in enumerate(a.also)]


def _issue_refusals() -> list:
    """tests/exercise_refusals.py: every shortcut and wrong answer of issue 21 §2, with the check's extra arguments
    taken from the lesson's answer table."""
    import exercise_refusals as refusals

    args = {(lesson, a.check): a.args for lesson, answers in ALL_ANSWERS.items() for a in answers}
    return [pytest.param(lesson, check, args[lesson, check], wrong, says, id=f"{lesson}.{check}.{bullet}.{i}")
            for lesson, table in refusals.REFUSALS.items() for check, entries in table.items()
            for i, (bullet, wrong, says) in enumerate(entries)]


ALSO += _issue_refusals()


def test_every_item_of_issue_21_is_reproduced():
    import exercise_refusals as refusals

    covered = {bullet for table in refusals.REFUSALS.values() for entries in table.values()
               for bullet, _, _ in entries}
    covered.add("table of the check's inputs")          # test_every_check_refuses_a_table_of_its_own_inputs
    assert covered == set(refusals.BULLETS), sorted(set(refusals.BULLETS) ^ covered)
    assert len(ALSO) >= 55


@pytest.mark.parametrize("lesson, check_name, args, wrong, says", ALSO)
def test_every_check_refuses_the_other_shortcuts_and_wrong_answers(lesson, check_name, args, wrong, says,
                                                                     monkeypatch, capsys):
    monkeypatch.setattr(ex, "TIME_LIMIT_S", 3.0)        # a function that never returns: stopped after 3 s
    check = getattr(importlib.import_module(f"course_lab.lessons.{lesson}"), check_name)
    assert check(wrong, *args) is False
    out = capsys.readouterr().out
    assert "✗" in out and "✓" not in out and says in out, out


# --- the hostile student: a hang, an input changed in place, a string for a number, a loop in disguise ---------

def _spin(*args):
    while True:
        pass


def test_a_function_that_never_returns_is_stopped(monkeypatch, capsys):
    monkeypatch.setattr(ex, "TIME_LIMIT_S", 0.5)
    assert ex.attempt(_spin, 1) == (False, None)
    assert "ran longer than 0.5 s" in capsys.readouterr().out

    def swallows(*args):
        try:
            _spin()
        except Exception:                                  # the limit is not an Exception: not swallowed
            return 1
    assert ex.attempt(swallows) == (False, None)
    assert ex.attempt(lambda: 2) == (True, 2)              # the timer is off again
    i18n.set_language("zh")
    assert ex.run_check(_spin, [((1,), 1)]) is False and "运行超过了 0.5 秒" in capsys.readouterr().out


def test_an_input_changed_in_place_is_refused_and_restored(capsys):
    x = torch.arange(6.0)

    def doubles_in_place(t, *, other=None):
        return t.mul_(2)
    assert ex.attempt(doubles_in_place, x) == (False, None)
    assert "changed its input in place (argument 1)" in capsys.readouterr().out
    assert torch.equal(x, torch.arange(6.0))              # the caller gets its tensor back
    assert ex.attempt(lambda ts: ts[1].zero_(), [x, x.clone() + 1])[0] is False   # inside a list too
    assert ex.attempt(lambda t: t * 2, torch.tensor([float("nan")]))[0] is True  # NaN stays NaN: unchanged


def test_a_string_is_not_a_number():
    assert ex.number_problem("0.5", 0.5) is not None and ex.number_problem(b"1", 1.0) is not None
    assert ex.tensor_problem("0.5", torch.tensor(0.5), numbers=True) is not None
    assert ex.grad_problem(torch.ones(2)) is not None and ex.grad_problem("1") is not None
    assert ex.grad_problem(torch.ones(2, requires_grad=True) * 2) is None


def _helper_with_a_loop(rows):
    return [r * 2 for r in rows]


def _calls_the_helper(x):
    return torch.stack(_helper_with_a_loop(x))


def _while(x):
    i = 0
    while i < 3:
        i += 1
    return x


def _vectorised(x):
    return x * 2


@pytest.mark.parametrize("fn, loops", [
    (_calls_the_helper, True), (_while, True), (_helper_with_a_loop, True), (_vectorised, False),
    (lambda x: torch.stack(list(map(torch.flip, x))), True), (lambda x: [r for r in x], True),
    (lambda x: x.flip(-1), False), (lambda x: _vectorised(x), False), (lambda x: _calls_the_helper(x), True),
])
def test_one_loop_detector(fn, loops):
    assert ex.has_python_loop(fn) is loops


def _two_constant_masks(x):                    # a generator over a literal pair: fixed by the code, not the data
    a, b = (m.bool() for m in (x > 0, x < 3))
    return a & b


def _starmap_rows(x):
    import itertools
    return torch.stack(list(itertools.starmap(torch.mul, zip(x, x))))


class _CallableWithWhile:                      # the loop is in __call__: no __code__ to read on the object itself
    def __call__(self, x):
        rows, i = [], 0
        while i < len(x):
            rows.append(x[i] * 2)
            i += 1
        return torch.stack(rows)


def _recursive_rows(x):
    return x[:0] if len(x) == 0 else torch.cat([x[:1] * 2, _recursive_rows(x[1:])])


def test_the_loop_detector_reads_constants_and_runs_what_it_cannot_read():
    x, big = torch.arange(6.0).reshape(2, 3), torch.arange(48.0).reshape(16, 3)
    assert not ex.has_python_loop(_two_constant_masks)
    assert not ex.steps_grow(_two_constant_masks, (x,), (big,))
    assert ex.has_python_loop(_starmap_rows)       # (torch.mul per row runs no Python line: only the source shows it)
    assert not ex.has_python_loop(_CallableWithWhile()) and ex.steps_grow(_CallableWithWhile(), (x,), (big,))
    assert not ex.has_python_loop(_recursive_rows) and ex.steps_grow(_recursive_rows, (x,), (big,))
    assert not ex.steps_grow(_vectorised, (x,), (big,)) and ex.python_steps(crashes, x) is None


def test_autograd_by_any_door_is_watched():
    def forward_mode(a):
        return torch.func.vmap(torch.func.jacfwd(torch.sin))(a)

    def jvp(a):
        return torch.func.jvp(torch.sin, (a,), (torch.ones_like(a),))[1]

    def dual(a):
        import torch.autograd.forward_ad as fwAD
        with fwAD.dual_level():
            return fwAD.unpack_dual(torch.sin(fwAD.make_dual(a, torch.ones_like(a)))).tangent

    def backward(a):
        a = a.clone().requires_grad_(True)
        torch.sin(a).sum().backward()
        return a.grad

    for fn in (forward_mode, jvp, dual, backward):
        with ex.watching(fn, ex.autograd_routes()) as calls:
            fn(torch.ones(3))
        assert calls, fn.__name__
    with ex.watching(_vectorised, ex.autograd_routes()) as calls:
        _vectorised(torch.ones(3))
    assert not calls


def test_calling_sees_a_library_function_by_any_name():
    import torch.nn.functional as F
    with ex.calling({"dropout", "dropout1d", "feature_dropout"}) as calls:
        F.dropout1d(torch.ones(3, 4), 0.5)
        torch._VF.dropout(torch.ones(3), 0.5, True)
        torch.nn.Dropout(0.2)(torch.ones(2))
        _ = torch.rand(3) < 0.5                             # not a dropout
    assert calls == ["dropout1d", "dropout", "dropout"]


def test_watching_sees_every_alias_and_every_route_to_a_class():
    import torch.nn.functional as F

    import course_utils
    import course_utils.multihead

    layer = course_utils.MultiHeadAttention(8, 2)
    with ex.watching(_vectorised, [(torch, "softmax")]) as calls:
        torch.softmax(torch.ones(2), -1)
    assert calls == ["softmax"]
    with ex.watching(_vectorised, [(F, "layer_norm")]) as calls:
        torch.nn.functional.layer_norm(torch.ones(2, 4), (4,))
    assert calls == ["layer_norm"]
    with ex.watching(_vectorised, [(course_utils.multihead, "MultiHeadAttention")]) as calls:
        type(layer)(8, 2)                                  # built through the instance's class
        course_utils.EncoderLayer(8, 2, 16)                # built inside another class
    assert calls == ["MultiHeadAttention"] * 2
    assert isinstance(layer, course_utils.MultiHeadAttention)    # classes keep working inside the block
    assert torch.softmax is not None and "spy" not in repr(torch.softmax)


# --- no public name in course_lab computes an exercise's answer (issue 21 §4) ------------------------------------

def _exercise_stub_names() -> set[str]:
    """The functions the lessons ask the student to write: ``def name(...)`` in a cell that raises
    NotImplementedError."""
    import re

    import build_notebooks as bn

    names = set()
    for source in bn.lesson_sources(bn.SOURCE_DIR):
        for cell in bn.parse_source(source.read_text(encoding="utf-8"), source.stem):
            if cell.kind == "code" and "raise NotImplementedError" in cell.text["en"]:
                names |= set(re.findall(r"^def (\w+)\(", cell.text["en"], re.M))
    return names


def test_no_public_name_in_course_lab_is_an_exercise_stub():
    import course_lab

    stubs = _exercise_stub_names()
    assert len(stubs) >= 40 and {"left_padded_mask", "lean_decoder_layer_params", "gqa_cache_bytes"} <= stubs
    found = {("", name) for name in stubs if hasattr(course_lab, name)}
    for info in pkgutil.iter_modules(lessons_pkg.__path__):
        module = importlib.import_module(f"course_lab.lessons.{info.name}")
        found |= {(info.name, name) for name in stubs if hasattr(module, name)}
    assert not found, f"public names that are exercise stubs (make them private): {sorted(found)}"
    for lesson in ("l05_masking", "l07_encoder_decoder"):    # their reference solutions are private
        module = importlib.import_module(f"course_lab.lessons.{lesson}")
        assert not [n for n in vars(module) if n.startswith("reference_")], lesson


# --- no public function of course_lab passes a check (issue 21 §4, by behaviour) -------------------------------

_NOT_ANSWERS = ("build_", "plot_", "render_", "load_", "print_", "show_", "save_")   # figures, widgets, files


def _public_functions() -> list[tuple[str, object]]:
    """Every public function the student can reach in course_lab: its modules and every lesson's names."""
    import course_lab

    modules = [course_lab] + [importlib.import_module(f"course_lab.{m.name}")
                              for m in pkgutil.iter_modules(course_lab.__path__) if m.name != "lessons"]
    modules += [importlib.import_module(f"course_lab.lessons.{m.name}")
                for m in pkgutil.iter_modules(lessons_pkg.__path__)]
    found = {}
    for module in modules:
        for name, fn in vars(module).items():
            if (inspect.isfunction(fn) and not name.startswith(("_", "check_")) and not name.startswith(_NOT_ANSWERS)
                    and fn.__module__.startswith("course_lab") and fn.__module__ != ex.__name__):
                found.setdefault(id(fn), (f"{module.__name__.split('.')[-1]}.{name}", fn))
    return sorted(found.values(), key=lambda pair: pair[0])


def _takes(fn, n: int) -> bool:
    try:
        inspect.signature(fn).bind(*range(n))
        return True
    except TypeError:
        return False


def _positional_count(fn) -> int:
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(p.kind in kinds for p in inspect.signature(fn).parameters.values())


PUBLIC = _public_functions()
AS_ANSWER = [pytest.param(lesson, a, id=f"{lesson}.{a.check}")
             for lesson, answers in ALL_ANSWERS.items() for a in answers]


@pytest.mark.parametrize("lesson, answer", AS_ANSWER)
def test_no_public_function_of_course_lab_passes_a_check(lesson, answer, monkeypatch, capsys):
    """Every public function of course_lab whose signature fits the exercise's is handed to its check as the
    answer: none may pass (an answer helper would, whatever its name)."""
    monkeypatch.setattr(ex, "TIME_LIMIT_S", 3.0)
    check = getattr(importlib.import_module(f"course_lab.lessons.{lesson}"), answer.check)
    n = _positional_count(answer.correct)
    passed_ = [name for name, fn in PUBLIC if _takes(fn, n) and check(fn, *answer.args)]
    capsys.readouterr()
    assert not passed_, f"{answer.check} accepts the public course_lab function(s) {passed_}: make them private"


# --- a table of the check's inputs is refused: every check draws fresh inputs on every run (issue 21 §2) ----------

def _key(value):
    """A hashable fingerprint of one argument: tensors by dtype, shape and bytes, containers element-wise."""
    if isinstance(value, torch.Tensor):
        with torch._C.DisableTorchFunctionSubclass():      # a check's recording subclass must not see this
            data = value.detach().cpu().contiguous().numpy().tobytes()
        return ("tensor", str(value.dtype), tuple(value.shape), data)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, _key(v)) for k, v in value.items())))
    if isinstance(value, (int, float, str, bool, type(None))):
        return value
    return ("object", id(value))                       # a model, a tokenizer: the same object every run


class _Table:
    """The student who learnt the check's inputs by heart: records the correct answer for every input of one run
    of the check, then answers from the table only (anything else: the answer for the first input it saw)."""

    def __init__(self, correct):
        self.correct, self.table, self.recording = correct, {}, True
        functools.update_wrapper(self, correct)

    def __call__(self, *args):
        key = tuple(_key(a) for a in args)
        if self.recording:
            self.table[key] = self.correct(*args)
            return self.table[key]
        if key in self.table:
            return self.table[key]
        return next(iter(self.table.values()))


TABLED = [pytest.param(lesson, a, id=f"{lesson}.{a.check}") for lesson, answers in ALL_ANSWERS.items()
          for a in answers if _positional_count(a.correct) > 0]


@pytest.mark.parametrize("lesson, answer", TABLED)
def test_every_check_refuses_a_table_of_its_own_inputs(lesson, answer, capsys):
    check = getattr(importlib.import_module(f"course_lab.lessons.{lesson}"), answer.check)
    table = _Table(answer.correct)
    assert check(table, *answer.args) is True, capsys.readouterr().out
    table.recording = False
    assert check(table, *answer.args) is False, f"{answer.check} passes a table of the inputs of its last run"
    assert "✗" in capsys.readouterr().out


# Lessons 08-14 (issue 39 §1): the right answers in other styles listed in tests/exercise_answers_NN.py must pass.
RIGHT_08_14 = [pytest.param(lesson, a.check, a.args, right, id=f"{lesson}.{a.check}.right{i}")
               for lesson, answers in ALL_ANSWERS.items() if lesson[1:3] in {f"{n:02d}" for n in range(8, 15)}
               for a in answers for i, right in enumerate(getattr(a, "right", ()))]


@pytest.mark.parametrize("lesson, check_name, args, right", RIGHT_08_14)
def test_lessons_08_14_accept_right_answers_in_other_styles(lesson, check_name, args, right, capsys):
    check = getattr(importlib.import_module(f"course_lab.lessons.{lesson}"), check_name)
    assert check(right, *args) is True, capsys.readouterr().out
