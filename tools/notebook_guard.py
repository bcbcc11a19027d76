"""The install guard at the top of every notebook's first code cell (tools/build_notebooks.py puts it there).

A notebook opened where the course's package is not installed (a lone notebook on Colab or Kaggle, a fresh kernel,
another virtual environment) would fail deep in its setup cell with ``ModuleNotFoundError: No module named
'course_lab'``. The guard checks first and says, in the notebook's language, what to install into the kernel's
Python and where from: the package is not on PyPI, so from the course's folder (a clone of its repository), whose
path the guard prints when the notebook sits inside one.
"""

from __future__ import annotations

# What every lesson imports: the course's two packages and the notebook layer's own dependencies (the `lab` extra).
# The two texts share their code (tests/test_notebook_guard.py checks it); strings and comments are per language.
GUARD = {
    "en": r"""# The course's package must be installed in this kernel's Python; if it is not, say what to install.
import importlib.util as _util
if not all(_util.find_spec(_name) for _name in ("course_utils", "course_lab", "matplotlib", "ipywidgets")):
    from pathlib import Path as _Path
    _root = next((str(_p) for _p in (_Path.cwd(), *_Path.cwd().parents)
                  if (_p / "course_lab" / "__init__.py").is_file()), "<the course's folder>")
    raise ModuleNotFoundError(
        "This notebook needs the course's Python package (course_utils, course_lab) and its lesson extras, "
        "which this kernel's Python does not have. Install them in a cell of this notebook:\n"
        f"    %pip install -e \"{_root}[lessons]\"\n"
        "then restart the kernel and run the notebook again. The package is not on PyPI: the course's "
        "folder is a clone of its repository (git clone <repository URL>).")
""",
    "zh": r"""# 本笔记本的内核必须装好课程的 Python 包；没装就在这里说明该装什么。
import importlib.util as _util
if not all(_util.find_spec(_name) for _name in ("course_utils", "course_lab", "matplotlib", "ipywidgets")):
    from pathlib import Path as _Path
    _root = next((str(_p) for _p in (_Path.cwd(), *_Path.cwd().parents)
                  if (_p / "course_lab" / "__init__.py").is_file()), "<课程文件夹>")
    raise ModuleNotFoundError(
        "本笔记本需要课程的 Python 包（course_utils、course_lab）以及课程用到的附加依赖，"
        "而当前内核的 Python 里没有。请在本笔记本的一个单元格里运行：\n"
        f"    %pip install -e \"{_root}[lessons]\"\n"
        "然后重启内核，再从头运行本笔记本。这个包没有发布到 PyPI：课程文件夹就是课程仓库的克隆"
        "（git clone <仓库地址>）。")
""",
}


def add_guard(source: str, language: str) -> str:
    """``source`` (a first code cell, already in ``language``) with the guard in front of it."""
    return GUARD[language] + "\n" + source
