"""The test probes of the lessons: cells tagged ``probe`` (``%% code skip probe``) drive a widget the way the tests
do and assert on its state. They are instructor-only (not in the student notebooks, tools/build_notebooks.py), so
they run here instead: each probe with the lesson's setup cell and the earlier cells that define the names it uses
(found by reading the code, not by running the whole lesson).
"""

from __future__ import annotations

import os
import symtable
from pathlib import Path

import build_notebooks as bn
import pytest

SOURCES = bn.lesson_sources(bn.SOURCE_DIR)


def _code_cells(lesson: Path, edition: str) -> list[dict]:
    cells = bn.parse_source(lesson.read_text(encoding="utf-8"), lesson.stem)
    nb = bn.build_notebook(cells, lesson.stem, "en", edition)
    return [cell for cell in nb["cells"] if cell["cell_type"] == "code"]


def _names(code: str) -> tuple[set[str], set[str]]:
    """(names the cell binds at top level, module-level names it reads). From the compiler's own symbol tables: a
    name local to a function, lambda or comprehension of the cell (a loop variable, a parameter) is neither bound
    nor read at top level; a name such a scope reads from the module is a read. Reads include names bound later in
    the same cell, which over-approximates a little and only ever adds a cell."""
    table = symtable.symtable(code, "cell", "exec")
    bound = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    read: set[str] = set()

    def visit(scope: symtable.SymbolTable) -> None:
        for s in scope.get_symbols():
            if s.is_referenced() and (scope is table or s.is_global()):
                read.add(s.get_name())
        for child in scope.get_children():
            visit(child)

    visit(table)
    return bound, read


def probe_slice(cells: list[dict], probe: int) -> list[str]:
    """The code to run for ``cells[probe]``: the setup cell (the first), then, in order, every earlier cell that
    binds a name the probe (or a cell already taken) reads."""
    needed = _names(cells[probe]["source"])[1]
    taken = [probe]
    for index in range(probe - 1, 0, -1):
        bound, read = _names(cells[index]["source"])
        if bound & needed:
            taken.append(index)
            needed = (needed - bound) | read
    return [cells[0]["source"]] + [cells[i]["source"] for i in sorted(taken)]


PROBES = [pytest.param(source, index, id=f"{source.stem}#{index}")
          for source in SOURCES
          for index, cell in enumerate(_code_cells(source, "instructor"))
          if bn.PROBE_TAG in cell["metadata"].get("tags", [])]


def test_every_probe_is_instructor_only():
    assert len(PROBES) >= 11                                # lessons 01-09, 11, 12 each have one
    for source in SOURCES:
        student = _code_cells(source, "student")
        assert not [c for c in student if bn.PROBE_TAG in c["metadata"].get("tags", [])], source.stem


@pytest.mark.parametrize("source, index", PROBES)
def test_probe_runs(source, index, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(Path(__file__).resolve().parents[1] / "notebooks" / "en")  # where the lesson runs
    monkeypatch.setitem(os.environ, "MPLBACKEND", "Agg")
    namespace = {"__name__": "__main__"}
    for code in probe_slice(_code_cells(source, "instructor"), index):
        exec(compile(code, f"{source.stem}", "exec"), namespace)  # noqa: S102 - the lesson's own code
