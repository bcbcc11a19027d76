"""Issue 24: the hostile rerun (tools/hostile_rerun.py) of the turn-3 review's rows and the new cases of classes 2-7
ends in OK or a clear error every time: no silent wrong answer, crash, hang, NaN, raw library error or refusal of a
legitimate call. Class 1 (exercise checks) runs the review's rows and a sweep: every lesson's ``check_*`` fed every
hostile answer (a hang, a string, None, an exception, an in-place change, NaN) must refuse it."""

import importlib.util
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parent.parent / "tools" / "hostile_rerun.py"


@pytest.fixture(scope="module")
def rerun():
    spec = importlib.util.spec_from_file_location("hostile_rerun", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules["hostile_rerun"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_case_of_classes_2_to_7_is_ok_or_clear(rerun):
    counts, rows = rerun.run(include_class1=False)
    assert sum(1 for c, _, _ in rows if c.row.startswith("N")) >= 50
    assert sum(1 for c, _, _ in rows if c.row.startswith("R")) >= 21
    bad = [(c.row, c.what, o, d) for c, o, d in rows if o not in ("OK", "clear")]
    assert not bad, bad


def test_every_exercise_check_refuses_every_hostile_answer(rerun):
    rows = [(case, rerun.classify(case)) for case in rerun.class1_rows() + rerun.class1_sweep()]
    checks = {case.what.split("(")[0] for case, _ in rows if case.row.startswith("N")}
    assert len(checks) >= 45, sorted(checks)      # the sweep found the lessons' checks
    bad = [(case.row, case.what, outcome, detail) for case, (outcome, detail) in rows if outcome != "OK"]
    assert not bad, bad


def test_the_classifier_can_fail(rerun):
    """The harness itself: a wrong call that returns is silent, a raw library error is cryptic, NaN is NaN."""
    import torch
    assert rerun.classify(rerun.Case("4", "X", "returns", lambda: 1))[0] == "silent"
    assert rerun.classify(rerun.Case("7", "X", "raw", lambda: torch.ones(2) @ torch.ones(3)))[0] == "crash"
    assert rerun.classify(rerun.Case("7", "X", "raw", lambda: int("x")))[0] == "cryptic"
    assert rerun.classify(rerun.Case("5", "X", "nan", lambda: torch.tensor([float("nan")]), bool))[0] == "NaN"
    assert rerun.classify(rerun.Case("5", "X", "wrong", lambda: 2, lambda r: r == 3))[0] == "silent"
    # A check that takes a string for a number is caught by the sweep's own predicate.
    lenient = rerun.Case("1", "X", "lenient check", lambda: float("0.5") == 0.5, lambda r: r is False)
    assert rerun.classify(lenient)[0] == "silent"
