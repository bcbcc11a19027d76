"""tools/system_deps.py and its place in the Makefile: the setup step gets a font for Chinese itself (as root or with
password-less sudo), `make test` stops before any test with one line when it cannot, `make lab` warns and starts.

Nothing is installed or removed for real: the font lookup is faked, and so are `id`, `sudo` and `apt-get` (small
scripts first on PATH that record how they were called)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import system_deps

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(os.name == "nt", reason="fake commands are shell scripts")


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """Fake `id -u`, `sudo` and `apt-get` first on PATH. ``fake.uid``: what `id -u` prints; ``fake.sudo``: whether
    `sudo -n` works; ``fake.apt_fails``: how many apt-get calls fail first; ``fake.calls()``: every call, in order."""
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    scripts = {
        "id": f'#!/bin/sh\ncat "{tmp_path}/uid"\n',
        "sudo": f'#!/bin/sh\n[ "$1" = -n ] && shift\n[ -f "{tmp_path}/sudo_ok" ] || exit 1\n'
                f'echo "sudo $*" >> "{log}"\nexec "$@"\n',
        "apt-get": f'#!/bin/sh\necho "apt-get $*" >> "{log}"\nn=$(cat "{tmp_path}/apt_fails")\n'
                   f'if [ "$n" -gt 0 ]; then echo $((n - 1)) > "{tmp_path}/apt_fails"; exit 100; fi\n',
    }
    for name, text in scripts.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    class Fake:
        bin = bin_dir

        def __init__(self):
            self.uid, self.sudo, self.apt_fails = "1000", False, 0

        def write(self):
            (tmp_path / "uid").write_text(self.uid)
            (tmp_path / "apt_fails").write_text(str(self.apt_fails))
            if self.sudo:
                (tmp_path / "sudo_ok").touch()

        def calls(self) -> list[str]:
            return log.read_text().splitlines() if log.exists() else []

    return Fake()


@pytest.fixture
def fonts(monkeypatch, fake):
    """``fonts(found_before, found_after, require)`` -> exit code; the lookup answers ``found_before`` until
    something was installed, then ``found_after``; matplotlib's cache is not touched."""
    cleared = []
    monkeypatch.setattr(system_deps, "clear_font_cache", lambda: cleared.append(True))
    monkeypatch.setattr(system_deps, "package_manager", lambda: "apt-get")

    def run(found_before, found_after=None, require=False):
        fake.write()
        monkeypatch.setattr(system_deps, "find_font", lambda: found_after if fake.calls() else found_before)
        code = system_deps.main(["fonts", *(["--require"] if require else [])])
        run.cleared = bool(cleared)
        return code

    return run


def test_a_font_already_there_installs_nothing_and_says_nothing(fonts, fake, capsys):
    assert fonts("WenQuanYi Micro Hei", require=True) == 0
    assert fake.calls() == [] and capsys.readouterr() == ("", "")


def test_as_root_the_font_is_installed_said_why_and_the_cache_rebuilt(fonts, fake, capsys):
    fake.uid = "0"
    assert fonts(None, "WenQuanYi Micro Hei", require=True) == 0
    assert fake.calls() == ["apt-get install -y -q --no-install-recommends fonts-wqy-microhei"]
    out = capsys.readouterr().out
    assert "no installed font can draw Chinese, and the Chinese notebooks' plots need one" in out
    assert "installing fonts-wqy-microhei with apt-get as root" in out
    assert "font cache rebuilt, Chinese labels use WenQuanYi Micro Hei" in out and fonts.cleared


def test_password_less_sudo_installs_too(fonts, fake, capsys):
    fake.sudo = True
    assert fonts(None, "WenQuanYi Micro Hei") == 0
    assert fake.calls()[-1] == "apt-get install -y -q --no-install-recommends fonts-wqy-microhei"
    assert any(c.startswith("sudo env DEBIAN_FRONTEND=noninteractive apt-get install") for c in fake.calls())
    assert "with apt-get with sudo" in capsys.readouterr().out


def test_a_fresh_machine_without_package_lists_updates_them_first(fonts, fake):
    fake.uid, fake.apt_fails = "0", 1
    assert fonts(None, "WenQuanYi Micro Hei", require=True) == 0
    assert [c.split()[1] for c in fake.calls()] == ["install", "update", "install"]


def test_without_root_or_sudo_make_test_stops_with_one_line(fonts, fake, capsys):
    start = time.monotonic()
    assert fonts(None, require=True) == 1
    assert time.monotonic() - start < 30 and fake.calls() == []
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1
    assert err.startswith("make test stopped before any test: no installed font can draw Chinese")
    assert "not root, and no password-less sudo" in err and "run `sudo apt-get install fonts-wqy-microhei`" in err


def test_without_root_or_sudo_make_lab_only_warns(fonts, capsys):
    assert fonts(None) == 0
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("warning: Chinese plot labels will show as empty boxes")


def test_a_failed_install_or_an_unknown_system_says_what_to_do(fonts, fake, monkeypatch, capsys):
    fake.uid, fake.apt_fails = "0", 9
    assert fonts(None, require=True) == 1
    assert "failed" in capsys.readouterr().err
    monkeypatch.setattr(system_deps, "package_manager", lambda: None)
    assert fonts(None, require=True) == 1
    assert "install a font that covers Simplified Chinese" in capsys.readouterr().err


@pytest.mark.parametrize("manager, fix", [("dnf", "sudo dnf install google-noto-sans-cjk-fonts"),
                                          ("pacman", "sudo pacman -S noto-fonts-cjk"),
                                          ("brew", "brew install --cask font-noto-sans-cjk-sc")])
def test_other_systems_get_their_own_command(manager, fix):
    assert system_deps.font_fix(manager) == fix


def test_browser_deps_say_what_is_missing(fake, monkeypatch, capsys):
    fake.write()
    monkeypatch.setattr(system_deps, "chromium", lambda: None)
    monkeypatch.setattr(system_deps, "has_emoji_font", lambda: True)
    monkeypatch.setattr(system_deps, "package_manager", lambda: "apt-get")
    assert system_deps.main(["browser"]) == 1
    assert "sudo apt-get install chromium" in capsys.readouterr().err and fake.calls() == []
    fake.uid = "0"
    fake.write()
    assert system_deps.main(["browser"]) == 0
    assert fake.calls() == ["apt-get install -y -q --no-install-recommends chromium"]


# ------------------------------------------------------------------------------------ through make, as a user runs it
@pytest.fixture
def make(fake, tmp_path):
    """``make(target)`` -> CompletedProcess: the real Makefile, with a Python that finds no CJK font and runs no
    pytest and no JupyterLab (it says it would), and the setup step up to date."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    fake.write()
    python = tmp_path / "python"
    fake_lookup = ("import sys; sys.path.insert(0, 'tools'); import system_deps as s; s.find_font = lambda: None; "
                   "sys.exit(s.main(sys.argv[1:]))")
    python.write_text(f"""#!/bin/sh
if [ "$1" = tools/system_deps.py ]; then shift; exec "{sys.executable}" -c "{fake_lookup}" "$@"; fi
if [ "$1" = -m ] && {{ [ "$2" = pytest ] || [ "$2" = jupyterlab ]; }}; then echo "would run $2"; exit 0; fi
exec "{sys.executable}" "$@"
""")
    python.chmod(0o755)
    stamp = tmp_path / "setup.stamp"
    stamp.touch()  # newer than pyproject.toml: the setup step (pip install) is done
    env = {k: v for k, v in os.environ.items() if k not in {"MAKELEVEL", "MAKEFLAGS", "MFLAGS"}}

    def run(target):
        return subprocess.run(["make", "--no-print-directory", target, f"PYTHON={python}", f"SETUP_STAMP={stamp}"],
                              cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)

    return run


def test_make_test_stops_before_any_test_in_under_30_s(make):
    start = time.monotonic()
    result = make("test")
    assert time.monotonic() - start < 30
    assert result.returncode != 0 and "would run pytest" not in result.stdout
    ours = [line for line in result.stderr.splitlines() if not line.startswith(("make:", "make["))]  # make's own
    assert len(ours) == 1 and "run `sudo apt-get install fonts-wqy-microhei`" in ours[0], result.stderr


def test_make_lab_starts_with_a_warning(make):
    result = make("lab")
    assert result.returncode == 0 and "would run jupyterlab" in result.stdout
    assert result.stderr.startswith("warning: Chinese plot labels will show as empty boxes")
