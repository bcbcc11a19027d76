"""After Run All, every displayed lesson widget still shows its defaults (issue 12 point 7, slides review item 5).

A cell that drives a widget from code (the way the tests do) must drive its own copy, not the one on screen: a
student, and the slides, would otherwise see the test's settings instead of the intended defaults.
"""

from __future__ import annotations

import pathlib
import re

import pytest

SOURCES = sorted((pathlib.Path(__file__).resolve().parents[1] / "notebooks" / "source").glob("[0-9][0-9]_*.md"))
BUILT = re.compile(r"^(\w+) = l\d\d\.build_\w+\(", re.M)


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_displayed_widgets_are_never_changed_by_later_cells(source):
    text = source.read_text(encoding="utf-8")
    problems = []
    for match in BUILT.finditer(text):
        name = match.group(1)
        shown = re.search(rf"^{name}\s*$", text[match.end():], re.M)
        if not shown:
            continue  # built but not displayed: a copy driven from code
        later = text[match.end() + shown.end():]
        for line in later.splitlines():
            if re.search(rf"\b{name}\.(set\(|controls\[[^\]]+\]\.value\s*=)", line):
                problems.append(f"{name}: {line.strip()}")
    assert not problems, (f"{source.name}: a displayed widget is changed after it is shown; drive a second copy "
                          f"instead (probe = l.build_...()): {problems}")
