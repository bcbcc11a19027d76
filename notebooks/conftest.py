"""Time every notebook that nbval runs, and print the table at the end of the run; keep
every notebook it ran, with its outputs, for the website (``make site``).

The course's budget is 90 s per notebook on 2 CPU cores and 10 minutes for the whole course (both languages).
nbval reports one test per cell; this sums setup (the kernel start), call and teardown per notebook, prints the
slowest first, and writes ``build/notebook_times.json``. With ``NOTEBOOK_BUDGET_S`` set (e.g. 90) a notebook
over it fails the run, naming it; by default the table is a report only, since a shared CI machine can be slower
than the 2 idle cores the budget is for.

A notebook whose every cell ran without failing is also written, with the outputs nbval received, to
``build/executed/{en,zh}/NN_name.ipynb``, stamped with the sha256 of the committed notebook it ran:
``tools/build_site.py`` builds the website from these instead of running every notebook a second time (it runs
only the notebooks that have no copy, or whose copy is older than the committed notebook).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

_TIMES: dict[str, float] = defaultdict(float)
_ROOT = Path(__file__).resolve().parents[1]
EXECUTED = _ROOT / "build" / "executed"
# nodeid of a notebook -> {"failed": bool, "outputs": {index of the code cell in nbval's notebook: outputs}}
_RUNS: dict[str, dict] = {}


def pytest_runtest_logreport(report):
    path = str(report.location[0]) if report.location else ""
    if path.endswith(".ipynb"):
        _TIMES[path] += report.duration


def _budget() -> float | None:
    value = os.environ.get("NOTEBOOK_BUDGET_S", "").strip()
    return float(value) if value else None


def pytest_terminal_summary(terminalreporter):
    if not _TIMES:
        return
    budget = _budget()
    rows = sorted(_TIMES.items(), key=lambda item: -item[1])
    terminalreporter.section("notebook times (kernel start + every cell)")
    for path, seconds in rows:
        flag = "  OVER BUDGET" if budget is not None and seconds > budget else ""
        terminalreporter.write_line(f"{seconds:7.1f} s  {path}{flag}")
    terminalreporter.write_line(f"{sum(_TIMES.values()):7.1f} s  all {len(rows)} notebooks")
    out = _ROOT / "build" / "notebook_times.json"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"seconds": dict(rows), "total_s": sum(_TIMES.values()), "budget_s": budget},
                                  indent=1) + "\n", encoding="utf-8")
    except OSError:
        pass


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    budget = _budget()
    over = [path for path, seconds in _TIMES.items() if budget is not None and seconds > budget]
    if over and session.exitstatus == 0:
        session.exitstatus = 1
        print(f"\nnotebooks over the {budget:g} s budget: {', '.join(sorted(over))}")


def source_sha256(path: Path) -> str:
    """What an executed copy is stamped with: the sha256 of the committed notebook that was run."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _is_nbval_cell(item) -> bool:
    return hasattr(item, "cell") and hasattr(item, "test_outputs") and hasattr(item.parent, "nb")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if not _is_nbval_cell(item):
        return
    report = outcome.get_result()
    run = _RUNS.setdefault(item.parent.nodeid, {"failed": False, "outputs": {}})
    if report.failed or report.skipped:
        run["failed"] = True
    elif call.when == "call" and item.test_outputs is not None:
        run["outputs"][id(item.cell)] = copy.deepcopy(item.test_outputs)


def pytest_runtest_teardown(item, nextitem):
    """After the last cell of a notebook: write it with its outputs when every cell ran and passed."""
    if not _is_nbval_cell(item) or (nextitem is not None and nextitem.parent is item.parent):
        return
    run = _RUNS.pop(item.parent.nodeid, None)
    if run is None or run["failed"]:
        return
    source = Path(str(item.parent.fspath))
    write_executed(source, item.parent.nb, run["outputs"])


def write_executed(source: Path, nb, outputs: dict) -> Path | None:
    """Write ``nb`` (nbval's copy of ``source``) with the received outputs to build/executed/<lang>/."""
    import nbformat

    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    if any(id(cell) not in outputs for cell in code):
        return None  # a cell did not run (e.g. -k selected a few cells): no complete copy
    executed = copy.deepcopy(nb)
    number = 0
    for cell, original in zip(executed.cells, nb.cells):
        if cell.cell_type != "code":
            continue
        number += 1
        cell.execution_count = number
        cell.outputs = [nbformat.from_dict(dict(out)) for out in outputs[id(original)]]
        for out in cell.outputs:
            if out.output_type == "execute_result":
                out.execution_count = number
            if out.output_type in ("display_data", "execute_result"):
                out.setdefault("metadata", {})
    executed.metadata["course_executed"] = {"source_sha256": source_sha256(source), "by": "nbval"}
    target = EXECUTED / source.parent.name / source.name
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".ipynb.tmp")
        nbformat.write(executed, str(tmp))
        tmp.replace(target)
    except OSError:
        return None
    return target
