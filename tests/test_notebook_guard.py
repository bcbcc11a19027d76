"""The install guard at the top of every notebook (tools/notebook_guard.py): a notebook opened where the course's
package is not installed says, in its own language, what to install instead of failing deep in its setup cell."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import build_notebooks
import nbcheck
import pytest
from notebook_guard import GUARD

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[ez][nh]/[0-9][0-9]_*.ipynb"))


def run_guard(language: str, cwd: Path) -> subprocess.CompletedProcess:
    """The guard in a Python without site-packages (-S): the course's package cannot be imported there."""
    return subprocess.run([sys.executable, "-S", "-c", GUARD[language]], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


def test_every_notebook_starts_with_the_guard_in_its_language():
    registry = build_notebooks.load_registry()
    assert [p.relative_to(ROOT / "notebooks").as_posix() for p in NOTEBOOKS] == sorted(
        f"{language}/{lesson.slug}.ipynb" for language in ("en", "zh") for lesson in registry.LESSONS)
    for path in NOTEBOOKS:
        nb = json.loads(path.read_text(encoding="utf-8"))
        first = next(c for c in nb["cells"] if c["cell_type"] == "code")
        assert "".join(first["source"]).startswith(GUARD[nb["metadata"]["language"]] + "\n"), path.name
    assert nbcheck.same_code(GUARD["en"], GUARD["zh"])  # only strings and comments differ


@pytest.mark.parametrize("language, words", [("en", "Install them in a cell of this notebook"),
                                             ("zh", "请在本笔记本的一个单元格里运行")])
def test_without_the_package_the_guard_says_what_to_install(tmp_path, language, words):
    inside = run_guard(language, ROOT / "notebooks" / language)  # a notebook of a clone: the clone's own path
    assert inside.returncode == 1 and "ModuleNotFoundError" in inside.stderr
    message = inside.stderr.splitlines()
    assert any(words in line for line in message)
    assert f'    %pip install -e "{ROOT}[lessons]"' in message
    alone = run_guard(language, tmp_path)  # a lone notebook (Colab, Kaggle): no clone around it
    placeholder = {"en": "<the course's folder>", "zh": "<课程文件夹>"}[language]
    assert f'    %pip install -e "{placeholder}[lessons]"' in alone.stderr.splitlines()
    assert "PyPI" in alone.stderr and "git clone" in alone.stderr


def test_with_the_package_the_guard_is_silent(tmp_path):
    for language in GUARD:
        done = subprocess.run([sys.executable, "-c", GUARD[language]], cwd=tmp_path, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0 and done.stdout == done.stderr == ""
