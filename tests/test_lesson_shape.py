"""Every lesson module of ``course_lab/lessons`` has one of two shapes (docs/design.md, "Recipe: a new lesson").

* a file ``lNN_name.py`` of at most ``FILE_LINES`` lines, or
* a package ``lNN_name/`` with ``__init__.py`` (plots, widgets, demo data) and ``checks.py`` (every ``check_*``
  function); a helper module both need (``l10_seq2seq/numbers.py``) sits beside them. ``checks.py`` and the other
  submodules never import the package's ``__init__``, so there is no import loop; ``__init__.py`` imports them at
  the top (no ``noqa: E402``) and re-exports a checks name in one style, ``from .checks import name as name``.

Read with ``ast``, so the rules hold for a lesson added later without touching this file.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from course_lab import registry

LESSONS = Path(__file__).resolve().parents[1] / "course_lab" / "lessons"
FILE_LINES = 300     # above this a lesson becomes a package
PACKAGE_LINES = 400  # one file of a package: split it further (as l10_seq2seq/numbers.py) above this
NAME = re.compile(r"^l\d\d_[a-z0-9_]+$")


def _modules() -> list[Path]:
    found = [p for p in sorted(LESSONS.iterdir()) if p.name not in ("__init__.py", "__pycache__")]
    registered = {f"l{lesson.number:02d}" for lesson in registry.LESSONS}
    assert found and {p.name[:3] for p in found} <= registered, f"a lesson module without a lesson: {found}"
    return found


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_a_lesson_is_a_short_file_or_a_package_with_checks(path):
    stem = path.stem if path.is_file() else path.name
    assert NAME.match(stem), f"{path.name}: a lesson module is named lNN_name"
    if path.is_file():
        assert path.suffix == ".py", path
        assert _lines(path) <= FILE_LINES, (
            f"{path.name} has {_lines(path)} lines: above {FILE_LINES} make it a package "
            f"{stem}/{{__init__.py, checks.py}} (docs/design.md, 'Recipe: a new lesson')")
        return
    files = {p.name for p in path.glob("*.py")}
    assert {"__init__.py", "checks.py"} <= files, f"{path.name} is a package without __init__.py and checks.py"
    for file in sorted(path.glob("*.py")):
        assert _lines(file) <= PACKAGE_LINES, f"{path.name}/{file.name} has {_lines(file)} lines: split it"


def _imports_own_init(node: ast.AST, package: str) -> bool:
    """``from . import x``, ``from .. import lNN_x``, ``from ..lNN_x import y``, ``import course_lab.lessons.lNN_x``."""
    if isinstance(node, ast.ImportFrom):
        if node.level == 1 and node.module is None:
            return True
        if node.level == 2 and node.module is None:
            return any(alias.name == package for alias in node.names)
        if node.level == 2 and node.module == package:
            return True
        return node.level == 0 and node.module == f"course_lab.lessons.{package}"
    if isinstance(node, ast.Import):
        return any(alias.name == f"course_lab.lessons.{package}" for alias in node.names)
    return False


_PACKAGES = [p for p in _modules() if p.is_dir()]


@pytest.mark.parametrize("path", _PACKAGES, ids=lambda p: p.name)
def test_no_submodule_imports_its_package(path):
    for file in sorted(path.glob("*.py")):
        if file.name == "__init__.py":
            continue
        loops = [node.lineno for node in ast.walk(_tree(file)) if _imports_own_init(node, path.name)]
        assert not loops, (f"{path.name}/{file.name} imports the package's __init__ at lines {loops}: move what "
                           "both need into a module beside them (as l10_seq2seq/numbers.py)")


@pytest.mark.parametrize("path", _PACKAGES, ids=lambda p: p.name)
def test_checks_live_in_checks_py_and_are_reexported_at_the_top(path):
    init_path = path / "__init__.py"
    init = _tree(init_path)
    assert "noqa: E402" not in init_path.read_text(encoding="utf-8"), f"{path.name}: import at the top instead"
    own = [n.name for n in init.body if isinstance(n, ast.FunctionDef) and n.name.startswith("check_")]
    assert not own, f"{path.name}/__init__.py defines {own}: exercise checks go in checks.py"
    first_def = min((n.lineno for n in init.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))), default=10**9)
    late = [n.lineno for n in init.body if isinstance(n, (ast.Import, ast.ImportFrom)) and n.lineno > first_def]
    assert not late, f"{path.name}/__init__.py imports after its first definition at lines {late}"
    used = {n.id for n in ast.walk(init) if isinstance(n, ast.Name)}
    imported = set()
    for node in init.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module == "checks":
            for alias in node.names:
                name = alias.asname or alias.name
                imported.add(name)
                assert name == alias.name, f"{path.name}: `{alias.name} as {alias.asname}` renames a check"
                assert alias.asname == alias.name or name in used, (
                    f"{path.name}/__init__.py re-exports {name} from checks: write `from .checks import {name} as "
                    f"{name}` (the one re-export style; ruff reads it as an explicit re-export)")
    checks = {n.name for n in _tree(path / "checks.py").body
              if isinstance(n, ast.FunctionDef) and n.name.startswith("check_")}
    assert checks, f"{path.name}/checks.py defines no check_* function"
    assert checks <= imported, f"{path.name}: re-export {sorted(checks - imported)} from __init__.py"


@pytest.mark.parametrize("path", _PACKAGES, ids=lambda p: p.name)
def test_the_notebook_reaches_every_check_through_the_lesson(path):
    lesson = importlib.import_module(f"course_lab.lessons.{path.name}")
    checks = importlib.import_module(f"course_lab.lessons.{path.name}.checks")
    names = [n for n in vars(checks) if n.startswith("check_") and callable(getattr(checks, n))
             and getattr(checks, n).__module__ == checks.__name__]
    assert names and all(getattr(lesson, n) is getattr(checks, n) for n in names), path.name


def test_the_rules_catch_a_loop_and_a_late_import():
    """The two shapes this file forbids are recognised (a test that cannot fail checks nothing)."""
    loop = ast.parse("from . import TARGET_CHARS\nfrom .. import l10_seq2seq\nfrom ..l10_seq2seq import x\n")
    assert all(_imports_own_init(n, "l10_seq2seq") for n in loop.body)
    fine = ast.parse("from .numbers import x\nfrom ...exercises import attempt\nfrom ..l03_attention import ROLES\n")
    assert not any(_imports_own_init(n, "l10_seq2seq") for n in fine.body)
