"""Shared pytest plumbing: the ``device`` parametrization, the ``english`` fixture, the hypothesis profiles, and
the rule that tests of the notebook layer are skipped (with the reason) when the ``lab`` extra is not installed."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, settings

# Property tests run torch code on shared, sometimes slow CPUs: a per-example deadline would only make them
# flaky, and a few dozen examples per property are enough to find shape and masking bugs.
settings.register_profile(
    "ci",
    deadline=None,
    max_examples=25,
    derandomize=True,  # the same examples on every run, so a CI failure reproduces locally
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=10, suppress_health_check=[HealthCheck.too_slow])
# HYPOTHESIS_PROFILE=dev for quicker local runs; "ci" everywhere else, so `make test` matches CI.
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# Under pytest-xdist (`make test` runs tests/ with one worker per core) each worker's PyTorch keeps to one thread:
# two workers with two threads each on two cores would fight over them (torch's threads wait for each other).
# The same for what a test starts (a notebook kernel, a training script): OpenMP threads spin while they wait, so
# a two-thread kernel next to a busy worker runs many times slower than a one-thread one.
if os.environ.get("PYTEST_XDIST_WORKER") and int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    torch.set_num_threads(1)
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = "1"


def _devices() -> list[str]:
    # Strings rather than torch.device: torch accepts both, and `device == "cuda"` works with a string only.
    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


@pytest.fixture(params=_devices())
def device(request) -> str:
    """Run the test once per available device: ``"cpu"``, plus ``"cuda"`` when a GPU is visible."""
    return request.param


@pytest.fixture
def english():
    """Lesson tests read English messages: ``pytestmark = pytest.mark.usefixtures("english")`` in their module.
    The language goes back to "follow the environment" afterwards."""
    from course_lab import i18n

    i18n.set_language("en")
    yield
    i18n.set_language(None)


# ------------------------------------------------------------------------------------------------ the lab extra
# `pip install -e .[dev]` gives the library's tests; the notebook layer (course_lab: plots, widgets, lessons) needs
# the `lab` extra. A test module that imports course_lab, matplotlib or ipywidgets is then reported as skipped,
# with the command that installs what is missing, instead of failing to collect.
LAB_MISSING = [m for m in ("matplotlib", "ipywidgets") if importlib.util.find_spec(m) is None]
_LAB_IMPORT = re.compile(r"^\s*(?:from|import)\s+(?:course_lab|matplotlib|ipywidgets)\b"
                         r"|import_module\(f?[\"']course_lab", re.MULTILINE)


# Lesson 10 also needs the `lessons` extra (number words, Chinese numerals): so does a test of every lesson.
LESSONS_MISSING = [m for m in ("num2words", "cn2an") if importlib.util.find_spec(m) is None]
_LESSONS_IMPORT = re.compile(r"l10_seq2seq|course_lab\.lessons\.\{")


def missing_extra(path: Path) -> str | None:
    """The `pip install` hint for a test module whose extra is not installed, else None."""
    text = path.read_text(encoding="utf-8")
    if LAB_MISSING and _LAB_IMPORT.search(text):
        return f"needs the lab extra ({', '.join(LAB_MISSING)} missing): pip install -e '.[lab]'"
    if LESSONS_MISSING and _LESSONS_IMPORT.search(text):
        return f"needs the lessons extra ({', '.join(LESSONS_MISSING)} missing): pip install -e '.[lessons]'"
    return None


class _NeedsExtra(pytest.File):
    reason = ""

    def collect(self):
        pytest.skip(self.reason)


def pytest_pycollect_makemodule(module_path, parent):
    reason = missing_extra(Path(module_path))
    if reason is None:
        return None
    module = _NeedsExtra.from_parent(parent, path=Path(module_path))
    module.reason = reason
    return module


# The longest test files start first (each several minutes on 2 cores: lessons run from a wheel, the hostile sweep,
# every slide deck in Chromium). With one file per xdist worker, a long file collected last would run alone at the
# end while the other core idles.
LONGEST_FIRST = ("test_packaging.py", "test_hostile_rerun.py", "test_slides.py", "test_registry.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order
