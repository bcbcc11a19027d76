"""The library boundary (docs/design.md): course_utils is what a GPU user imports, course_lab is the notebook layer.

- every course_utils module imports with matplotlib, ipywidgets, IPython and Jupyter absent;
- nothing in course_utils imports course_lab, and the package reads no file outside itself;
- size limits that keep the library small (≤ 5,000 lines, no module over 300 lines);
- a CJK font installed after matplotlib cached its font list is found (review first-run.md item 2).
"""

from __future__ import annotations

import ast
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORE = ROOT / "course_utils"
NOTEBOOK_LAYER = ("matplotlib", "ipywidgets", "IPython", "jupyter", "jupyterlab", "jupyter_client", "ipykernel",
                  "notebook", "nbformat", "course_lab")


def core_modules() -> list[str]:
    names = []
    for path in sorted(CORE.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts[-1] == "__main__":
            continue
        names.append(".".join(parts))
    return names


def test_every_course_utils_module_imports_without_the_notebook_layer():
    blocker = textwrap.dedent(f"""
        import importlib, importlib.abc, sys
        BLOCKED = {NOTEBOOK_LAYER!r}
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ImportError(f"{{name}} is not installed (blocked by the boundary test)")
        sys.meta_path.insert(0, Block())
        for name in {core_modules()!r}:
            importlib.import_module(name)
        leaked = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
        assert not leaked, leaked
        print("imported", len({core_modules()!r}))
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    run = subprocess.run([sys.executable, "-c", blocker], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"imported {len(core_modules())}" in run.stdout


def _imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("path", sorted(CORE.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_course_utils_never_imports_the_notebook_layer_or_reads_outside_itself(path):
    bad = {m for m in _imports(path) if m.split(".")[0] in NOTEBOOK_LAYER}
    assert not bad, f"{path.name} imports {sorted(bad)}: move that code to course_lab"
    text = path.read_text(encoding="utf-8")
    # The package never climbs out of its own folder (docs/, the project root, ...).
    for pattern in ("parents[2]", "parents[3]", 'parent.parent / "docs"', "parent.parent.parent"):
        assert pattern not in text, f"{path.name} reaches outside the package ({pattern})"


@pytest.mark.parametrize("path", sorted((ROOT / "benchmarks").glob("*.py")), ids=lambda p: p.name)
def test_benchmarks_import_the_library_only(path):
    """The trainers and benchmarks need no notebook layer: a GPU machine runs them with course_utils alone."""
    bad = {m for m in _imports(path) if m.split(".")[0] in NOTEBOOK_LAYER}
    assert not bad, f"benchmarks/{path.name} imports {sorted(bad)}: move what it needs down to course_utils"


def _line_counts() -> dict[str, int]:
    return {p.relative_to(ROOT).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
            for p in CORE.rglob("*.py")}


def test_no_course_utils_module_is_over_300_lines():
    too_long = {p: n for p, n in _line_counts().items() if n > 300}
    assert not too_long, f"modules over 300 lines: {too_long}"


def test_course_utils_is_at_most_5600_lines():
    """5,000 lines for lessons 00-14, plus 600 for Part III (issue 36: lessons 15-17 together)."""
    total = sum(_line_counts().values())
    assert total <= 5600, f"course_utils has {total} lines (limit 5,600)"


PART_III = ("course_utils/bpe.py", "course_utils/lora.py")  # lessons 15-17's own modules (the 600 lines above)


def test_course_utils_before_part_iii_is_at_most_5000_lines():
    """Issue 34: lessons 00-14 keep their 5,000 lines; Part III's modules count only towards the 5,600 total."""
    counts = _line_counts()
    assert all(p in counts for p in PART_III), f"a Part III module was renamed: update PART_III {PART_III}"
    total = sum(n for p, n in counts.items() if p not in PART_III)
    assert total <= 5000, f"course_utils without {PART_III} has {total} lines (limit 5,000)"


def test_required_dependencies_are_the_library_only():
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = {d.split(">")[0].split("=")[0].split("<")[0].split(";")[0].strip().lower() for d in project["dependencies"]}
    assert names == {"torch", "numpy", "safetensors", "tqdm"}, names
    lab = " ".join(project["optional-dependencies"]["lab"]).lower()
    for needed in ("matplotlib", "ipywidgets", "jupyterlab"):
        assert needed in lab


def _cjk_font_files() -> list[str]:
    try:
        from matplotlib import font_manager
        from matplotlib.ft2font import FT2Font
    except ImportError:
        return []
    files = []
    for path in font_manager.findSystemFonts():
        try:
            if FT2Font(path).get_char_index(ord("注")) and "LastResort" not in path:
                files.append(path)
        except (OSError, RuntimeError, ValueError):
            continue
    return files


def test_a_cjk_font_missing_from_a_stale_font_cache_is_found(tmp_path):
    """The cache predates the font: simulate it by removing every CJK entry from a freshly built cache."""
    cjk_files = _cjk_font_files()
    if not cjk_files:
        pytest.skip("no CJK font on this machine (CI installs fonts-wqy-microhei)")
    env = {**os.environ, "MPLCONFIGDIR": str(tmp_path)}
    env.pop("PYTHONWARNINGS", None)
    build = "import matplotlib.font_manager as fm; print(fm.get_cachedir() if hasattr(fm, 'get_cachedir') else '')"
    subprocess.run([sys.executable, "-c", build], env=env, check=True, capture_output=True, timeout=300)
    (cache,) = tmp_path.glob("fontlist-*.json")
    data = json.loads(cache.read_text(encoding="utf-8"))
    data["ttflist"] = [e for e in data["ttflist"] if e["fname"] not in cjk_files]
    cache.write_text(json.dumps(data), encoding="utf-8")

    probe = textwrap.dedent("""
        from course_lab import fonts
        print("before", fonts._best_cjk_font() is not None)  # what the font list alone offers
        print("found", fonts.find_cjk_font())
    """)
    run = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "before False" in run.stdout  # the stale cache really did not know the font
    assert "found None" not in run.stdout, run.stdout
    # The stale cache is gone: the next process rebuilds it and its font list alone has the font.
    assert not cache.exists()
    again = "from course_lab import fonts; print('list has it', fonts._best_cjk_font() is not None)"
    run = subprocess.run([sys.executable, "-c", again], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert "list has it True" in run.stdout, run.stderr[-2000:]


def test_design_doc_lists_every_module():
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    missing = []
    for package in ("course_utils", "course_lab"):
        for path in (ROOT / package).iterdir():
            name = path.stem if path.suffix == ".py" else path.name
            if name.startswith("_") or not (path.suffix == ".py" or (path / "__init__.py").exists()):
                continue
            if name == "lessons":
                name = "lessons/lNN_*"
            if f"`{name}`" not in design:
                missing.append(f"{package}.{name}")
    assert not missing, f"docs/design.md's module table does not list {missing}"


def _internal_imports(path: pathlib.Path) -> set[str]:
    """The course_utils modules ``path`` imports (absolute and relative, at any depth of the file)."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("course_utils")}
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            module = node.module if node.level == 0 else ".".join(filter(None, (base, node.module)))
            if not (module or "").startswith("course_utils"):
                continue
            # `from . import x` imports the module x when the package has one
            found |= {f"{module}.{a.name}" if f"{module}.{a.name}" in core_modules() else module for a in node.names}
    return found


def test_course_utils_import_graph_has_no_circles():
    graph = {}
    for path in CORE.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        graph[name] = {m for m in _internal_imports(path) if m != name}
    edges = graph  # packages are nodes too: a module that imports its own package's __init__ closes a circle
    state: dict[str, int] = {}

    def visit(node, trail):
        if state.get(node) == 1:
            raise AssertionError(f"import circle: {' -> '.join(trail[trail.index(node):] + [node])}")
        if state.get(node) == 2:
            return
        state[node] = 1
        for dep in sorted(edges.get(node, ())):
            visit(dep, trail + [node])
        state[node] = 2

    for node in sorted(edges):
        visit(node, [])
    assert _internal_imports(CORE / "config.py") == {"course_utils.validation"}  # config is a leaf


ALONE = textwrap.dedent("""
    import importlib, json, sys, traceback
    import numpy, safetensors, torch, tqdm  # third-party, imported once: they take 2 s of the 2.5 s a module took
    errors = {}
    for name in sys.argv[1:]:
        # Each module starts from no course_utils at all, as in a fresh interpreter: an import that only works
        # because another course_utils module was imported first (an order or circle bug) fails here too.
        for loaded in [m for m in sys.modules if m.split(".")[0] == "course_utils"]:
            del sys.modules[loaded]
        try:
            importlib.import_module(name)
        except BaseException:
            errors[name] = traceback.format_exc()[-2000:]
    print(json.dumps(errors))
""")


@pytest.fixture(scope="module")
def import_errors() -> dict[str, str]:
    """{module: traceback} for every course_utils module that fails to import on its own (one subprocess)."""
    run = subprocess.run([sys.executable, "-c", ALONE, *core_modules()], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, env={k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"})
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.splitlines()[-1])


@pytest.mark.parametrize("name", core_modules())
def test_each_course_utils_module_imports_alone(name, import_errors):
    assert name not in import_errors, import_errors.get(name)


def test_multihead_attention_reads_like_the_formula():
    """Issue 34: with the guards in ``attention_guards``, the class body of ``MultiHeadAttention`` is ≤ 80 lines."""
    import inspect

    from course_utils.multihead import MultiHeadAttention
    lines = len(inspect.getsource(MultiHeadAttention).splitlines())
    assert lines <= 80, f"MultiHeadAttention is {lines} lines: move input checks and refusals to attention_guards"
