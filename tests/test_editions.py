"""The two editions of every lesson (tools/build_notebooks.py): the committed student notebooks hold no speaker
notes, no test probes and no solution in plain sight; the instructor edition keeps the notes for the decks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import build_notebooks as bn
import pytest

ROOT = Path(__file__).resolve().parents[1]
STUDENT = sorted((ROOT / "notebooks" / "en").glob("*.ipynb")) + sorted((ROOT / "notebooks" / "zh").glob("*.ipynb"))
SUMMARY = re.compile(r"<summary>\s*(Solution|参考答案)", re.I)
PROBE_WORDS = ("What the tests do", "how the tests use it", "测试也是这样")


def _text(cell: dict) -> str:
    return "".join(cell["source"])


def student_problems(nb: dict) -> list[str]:
    """Why a notebook is not a student edition: each speaker note, probe and uncollapsed solution, by cell."""
    problems = []
    for index, cell in enumerate(nb["cells"]):
        text = _text(cell)
        if cell["metadata"].get("slideshow", {}).get("slide_type") == "notes":
            problems.append(f"cell {index}: speaker note")
        if bn.PROBE_TAG in cell["metadata"].get("tags", []) or any(w in text for w in PROBE_WORDS):
            problems.append(f"cell {index}: test probe")
        if cell["cell_type"] == "markdown" and re.search(r"^#+ *(Solution|参考答案)", text, re.M):
            problems.append(f"cell {index}: a solution under a heading, not in <details>")
        if cell["cell_type"] == "markdown" and SUMMARY.search(text):
            stripped = text.strip()
            if not (stripped.startswith("<details>") and stripped.endswith("</details>")):
                problems.append(f"cell {index}: a solution not collapsed (the cell is not one closed <details>)")
    return problems


@pytest.mark.parametrize("path", STUDENT, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_student_notebook_has_no_instructor_material(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert student_problems(nb) == [], path
    assert any(SUMMARY.search(_text(c)) for c in nb["cells"]), "every lesson has collapsed solutions"


def test_the_check_catches_each_kind():
    def cell(kind, text, slide="-", tags=()):
        meta = {"slideshow": {"slide_type": slide}, "tags": list(tags)}
        return {"cell_type": kind, "metadata": meta, "source": text}

    nb = {"cells": [cell("markdown", "Ask the room", slide="notes"), cell("code", "x = 1", tags=["probe"]),
                    cell("markdown", "<details open><summary>Solution</summary>4d</details>"),
                    cell("markdown", "## Solution\n4d"), cell("markdown", "<details><summary>Solution</summary>x")]}
    problems = student_problems(nb)
    assert [p.split(":")[0] for p in problems] == ["cell 0", "cell 1", "cell 2", "cell 3", "cell 4"], problems


@pytest.mark.parametrize("source", bn.lesson_sources(bn.SOURCE_DIR), ids=lambda p: p.stem)
def test_instructor_edition_keeps_every_cell(source):
    cells = bn.parse_source(source.read_text(encoding="utf-8"), source.stem)
    for lang in bn.LANGUAGES:
        full = bn.build_notebook(cells, source.stem, lang, "instructor")
        student = bn.build_notebook(cells, source.stem, lang, "student")
        notes = [c for c in full["cells"] if c["metadata"].get("slideshow", {}).get("slide_type") == "notes"]
        assert notes, "every lesson has speaker notes for the decks"
        assert len(full["cells"]) == len(student["cells"]) + sum(map(bn.instructor_only, cells))
        assert {c["id"] for c in student["cells"]} <= {c["id"] for c in full["cells"]}  # the same ids


def test_instructor_edition_needs_its_own_folder(capsys):
    with pytest.raises(SystemExit):
        bn.main(["--edition", "instructor"])
    assert "--out-dir" in capsys.readouterr().err
