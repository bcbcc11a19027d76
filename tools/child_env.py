"""Create a virtual environment that sees the packages of the Python running this script, whatever that Python is:
a venv, a conda environment or the system Python.

    python tools/child_env.py DIR [--without-pip]

`python -m venv --system-site-packages` is not enough: from inside a venv it exposes the *base* interpreter's
packages (sys.base_prefix), not the venv's, so the course's packages (torch, nbconvert, ...) are missing there. Here
the new environment is isolated, and a .pth file in its site-packages adds this Python's site folders *after* its
own: what is installed into the child wins (the course's wheel in tests/test_packaging.py, Sphinx's newer docutils
in build/site-env), the rest comes from here, with no network. `course-parent.json` in the child records this
Python's prefix, for what lives outside site-packages (Jupyter's share/jupyter templates: tools/build_site.py)."""

from __future__ import annotations

import argparse
import json
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

PTH_NAME = "_course_parent_env.pth"
PARENT_FILE = "course-parent.json"


def parent_site_dirs() -> list[str]:
    """This Python's site folders, in its own order: the environment's, then (for a venv made with
    --system-site-packages) the base's, then the user's when enabled."""
    dirs = [*site.getsitepackages(), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    seen: list[str] = []
    for d in dirs:
        if Path(d).is_dir() and d not in seen:
            seen.append(d)
    return seen


def child_site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True, timeout=120)
    return Path(out.stdout.strip())


def create(directory: str | Path, *, with_pip: bool = True) -> Path:
    """Create (or update) the environment at ``directory``; return its python."""
    directory = Path(directory).absolute()
    command = [sys.executable, "-m", "venv", str(directory)]
    if not with_pip:
        command.insert(3, "--without-pip")
    subprocess.run(command, check=True, timeout=600)
    python = directory / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    # site.addsitedir, not bare paths: the parent's own .pth files (namespace packages, editable installs) apply too
    lines = [f"import site; site.addsitedir({d!r})" for d in parent_site_dirs()]
    (child_site_packages(python) / PTH_NAME).write_text("\n".join(lines) + "\n", encoding="utf-8")
    (directory / PARENT_FILE).write_text(json.dumps({"prefix": sys.prefix, "executable": sys.executable,
                                                     "site": parent_site_dirs()}, indent=1), encoding="utf-8")
    return python


def parent_prefix() -> Path | None:
    """In an environment made by :func:`create`: the prefix of the Python that made it, else None."""
    record = Path(sys.prefix) / PARENT_FILE
    if not record.is_file():
        return None
    return Path(json.loads(record.read_text(encoding="utf-8"))["prefix"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--without-pip", action="store_true", help="no pip of its own (the parent's is seen)")
    args = parser.parse_args(argv)
    print(create(args.directory, with_pip=not args.without_pip))
    return 0


if __name__ == "__main__":
    sys.exit(main())
