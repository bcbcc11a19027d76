"""The GitHub Pages workflow (.github/workflows/pages.yml) cannot run here: check its structure instead.

It must build the site with the same command as the README (`make site`), upload exactly the folder that
tools/build_site.py writes, deploy it with the Pages actions, and have the permissions those actions need.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / ".github" / "workflows" / "pages.yml"
sys.path.insert(0, str(REPO / "tools"))
import build_site  # noqa: E402


@pytest.fixture(scope="module")
def workflow():
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert isinstance(data, dict), "pages.yml is not a YAML mapping"
    return data


def _steps(job):
    steps = job.get("steps")
    assert isinstance(steps, list) and steps, "a job without steps"
    for step in steps:
        assert isinstance(step, dict) and ("uses" in step) != ("run" in step), f"a step needs uses or run: {step}"
    return steps


def test_triggers_and_permissions(workflow):
    # PyYAML reads the key `on` as True (YAML 1.1).
    on = workflow.get("on", workflow.get(True))
    assert isinstance(on, dict) and "push" in on and "workflow_dispatch" in on
    assert workflow["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}


def test_build_job_runs_make_site_and_uploads_the_site(workflow):
    build = workflow["jobs"]["build"]
    steps = _steps(build)
    uses = [s["uses"] for s in steps if "uses" in s]
    runs = "\n".join(s["run"] for s in steps if "run" in s)
    assert any(u.startswith("actions/checkout@") for u in uses)
    assert re.search(r"^\s*make site\b", runs, re.M), "the build job must run `make site`"
    upload = [s for s in steps if s.get("uses", "").startswith("actions/upload-pages-artifact@")]
    assert len(upload) == 1, "one actions/upload-pages-artifact step"
    out = build_site.DEFAULT_OUT.relative_to(REPO).as_posix()
    assert upload[0]["with"]["path"] == out, f"the artifact must be {out}, where tools/build_site.py writes"
    # The Makefile target that the workflow runs exists and calls the site builder.
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^site:", makefile, re.M) and "tools/build_site.py" in makefile


def test_deploy_job(workflow):
    deploy = workflow["jobs"]["deploy"]
    assert deploy["needs"] in ("build", ["build"])
    assert deploy["environment"]["name"] == "github-pages"
    steps = _steps(deploy)
    deploying = [s for s in steps if s.get("uses", "").startswith("actions/deploy-pages@")]
    assert len(deploying) == 1
    assert deploying[0].get("id") and deploying[0]["id"] in deploy["environment"]["url"]


def test_every_action_is_pinned_to_a_version(workflow):
    for name, job in workflow["jobs"].items():
        for step in _steps(job):
            if "uses" in step:
                assert re.fullmatch(r"[\w.-]+/[\w.-]+@v\d+", step["uses"]), f"{name}: unpinned {step['uses']}"
