"""course_lab: the notebook layer of the course "Transformers from scratch".

Everything a lesson needs around the maths, and nothing of the maths itself: figures (``viz``), interactive
widgets (``widgets``), the Chinese font (``fonts``), the notebook's language (``i18n``), exercise-check plumbing
(``exercises``), the lesson registry (``registry``) and per-lesson demo data, widget builders and checks
(``lessons.lNN_*``). The algorithms live in the notebook cells and, once they are shared, in ``course_utils``;
``course_utils`` never imports this package.

Install it with the ``lab`` extra: ``pip install -e ".[lab]"`` (``make lab`` / ``make test`` do that).
"""

from __future__ import annotations

import importlib

_LAZY = {"viz", "widgets", "fonts", "i18n", "exercises", "lessons", "registry"}


def __getattr__(name: str):
    if name in _LAZY:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'course_lab' has no attribute {name!r}")
