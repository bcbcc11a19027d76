"""Time every notebook that nbval runs, and print the table at the end of the run.

The course's budget is 90 s per notebook on 2 CPU cores and 10 minutes for the whole course (both languages).
nbval reports one test per cell; this sums setup (the kernel start), call and teardown per notebook, prints the
slowest first, and writes ``build/notebook_times.json``. With ``NOTEBOOK_BUDGET_S`` set (e.g. 90) a notebook
over it fails the run, naming it; by default the table is a report only, since a shared CI machine can be slower
than the 2 idle cores the budget is for.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

_TIMES: dict[str, float] = defaultdict(float)
_ROOT = Path(__file__).resolve().parents[1]


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
