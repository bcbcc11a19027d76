"""What the course needs beyond pip, installed where it can be: a font that draws Chinese, and for the browser tests
only, Chromium and an emoji font.

    python tools/system_deps.py fonts            # make setup / make lab: find a CJK font, else install one, else warn
    python tools/system_deps.py fonts --require  # make test: the same, but stop with one line when there is none
    python tools/system_deps.py browser          # make browser-deps: chromium + fonts-noto-color-emoji (apt-get)

A system package is installed only as root or with password-less sudo (``sudo -n``), never with a password prompt,
and the script says what it installs and why. The font is looked up the way the lessons do
(``course_lab.fonts.find_cjk_font``, in a fresh Python so that a font installed a moment ago is seen) and
matplotlib's font cache is rebuilt after an install.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

# Per package manager, the package that brings a font for Chinese.
# apt: WenQuanYi Micro Hei (4 MB), which CI has always used; the others: Noto Sans CJK, as course_lab.fonts suggests.
FONT_PACKAGES = {
    "apt-get": "fonts-wqy-microhei",
    "dnf": "google-noto-sans-cjk-fonts",
    "pacman": "noto-fonts-cjk",
    "brew": "font-noto-sans-cjk-sc",
}
BROWSER_PACKAGES = ("chromium", "fonts-noto-color-emoji")  # apt-get only: what CI (Debian) uses
# How each package manager installs without asking questions (env: sudo drops the environment); Homebrew needs no
# root (and refuses it).
INSTALL = {
    "apt-get": ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-q", "--no-install-recommends"],
    "dnf": ["dnf", "install", "-y"],
    "pacman": ["pacman", "-S", "--noconfirm", "--needed"],
    "brew": ["brew", "install", "--cask"],
}


class CannotInstall(Exception):
    """Nothing was installed; the message says why."""


def say(message: str) -> None:
    print(f"setup: {message}", flush=True)


def package_manager() -> str | None:
    return next((name for name in FONT_PACKAGES if shutil.which(name)), None)


def root_prefix() -> tuple[str, ...] | None:
    """``()`` as root, ``("sudo", "-n")`` with password-less sudo, None when neither (then nothing is installed)."""
    try:
        uid = subprocess.run(["id", "-u"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):  # no `id` (Windows): not root
        uid = ""
    if uid == "0":
        return ()
    if shutil.which("sudo"):
        try:
            if subprocess.run(["sudo", "-n", "true"], capture_output=True, timeout=10).returncode == 0:
                return ("sudo", "-n")
        except (OSError, subprocess.SubprocessError):
            pass
    return None


def install(manager: str, packages: tuple[str, ...], why: str) -> None:
    """Install ``packages``, saying what and why; CannotInstall when that is impossible here or fails."""
    prefix = () if manager == "brew" else root_prefix()
    if prefix is None:
        raise CannotInstall("not root, and no password-less sudo")
    command = [*prefix, *INSTALL[manager], *packages]
    as_who = "" if manager == "brew" else " with sudo" if prefix else " as root"
    say(f"{why}: installing {' '.join(packages)} with {manager}{as_who}")
    if subprocess.run(command, timeout=1800).returncode == 0:
        return
    if manager == "apt-get":  # a fresh machine has no package lists yet
        updated = subprocess.run([*prefix, "apt-get", "update", "-q"], timeout=900).returncode == 0
        if updated and subprocess.run(command, timeout=1800).returncode == 0:
            return
    raise CannotInstall(f"`{' '.join(command)}` failed")


# ------------------------------------------------------------------------------------------------------------ fonts
def find_font() -> str | None:
    """The font the lessons would use for Chinese, looked up in a fresh Python (course_lab.fonts), or None."""
    code = "from course_lab.fonts import find_cjk_font; print(find_cjk_font() or '')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        raise SystemExit(f"setup: cannot look for fonts ({last}): run make setup first")
    return done.stdout.strip() or None


def clear_font_cache() -> None:
    """Delete matplotlib's list of fonts: the next Python that imports matplotlib rebuilds it, new font included."""
    code = "import matplotlib; print(matplotlib.get_cachedir())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    if done.returncode == 0 and done.stdout.strip():
        for cache in Path(done.stdout.strip()).glob("fontlist-*.json"):
            cache.unlink(missing_ok=True)


def font_fix(manager: str | None) -> str:
    """The command a person runs to get the font (in the one-line message)."""
    if manager is None:
        return "install a font that covers Simplified Chinese (e.g. Noto Sans CJK SC) for your system"
    return {"apt-get": "sudo apt-get install {}", "dnf": "sudo dnf install {}", "pacman": "sudo pacman -S {}",
            "brew": "brew install --cask {}"}[manager].format(FONT_PACKAGES[manager])


def fonts(require: bool) -> int:
    if find_font():
        return 0
    manager = package_manager()
    why = "no installed font can draw Chinese, and the Chinese notebooks' plots need one"
    try:
        if manager is None:
            raise CannotInstall("no apt-get, dnf, pacman or brew found")
        install(manager, (FONT_PACKAGES[manager],), why)
        clear_font_cache()
        found = find_font()
        if found is None:
            raise CannotInstall(f"{FONT_PACKAGES[manager]} was installed, but matplotlib finds no CJK font in it")
        say(f"installed {FONT_PACKAGES[manager]}: matplotlib's font cache rebuilt, Chinese labels use {found}")
        return 0
    except CannotInstall as reason:
        line = (f"no installed font can draw Chinese (the Chinese notebooks need one) and none could be installed "
                f"({reason}): run `{font_fix(manager)}`")
        if require:
            print(f"make test stopped before any test: {line}, then make test again", file=sys.stderr, flush=True)
            return 1
        print(f"warning: Chinese plot labels will show as empty boxes: {line}", file=sys.stderr, flush=True)
        return 0


# ---------------------------------------------------------------------------------------------------------- browser
def chromium() -> str | None:
    candidates = (os.environ.get("COURSE_CHROMIUM"), "chromium", "chromium-browser")
    return next((found for name in candidates if name and (found := shutil.which(name))), None)


def has_emoji_font() -> bool:
    if not shutil.which("fc-list"):
        return True  # cannot tell: the emoji font only makes screenshots complete
    listed = subprocess.run(["fc-list", ":family=Noto Color Emoji"], capture_output=True, text=True, timeout=60)
    return bool(listed.stdout.strip())


def browser() -> int:
    missing = tuple(p for p, ok in zip(BROWSER_PACKAGES, (chromium(), has_emoji_font())) if not ok)
    if not missing:
        say(f"browser tests: chromium ({chromium()}) and an emoji font are installed")
        return 0
    manager = package_manager()
    try:
        if manager != "apt-get":
            raise CannotInstall("the browser tests are set up with apt-get (Debian, Ubuntu) only")
        install(manager, missing, "the browser tests (tests/browser) drive a headless Chromium")
        return 0
    except CannotInstall as reason:
        print(f"make browser-deps: {' '.join(missing)} not installed ({reason}): install them (Debian/Ubuntu: "
              f"sudo apt-get install {' '.join(missing)}), or set COURSE_CHROMIUM to a Chromium binary",
              file=sys.stderr, flush=True)
        return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    fonts_parser = sub.add_parser("fonts", help="a font that draws Chinese (make setup, make test, make lab)")
    fonts_parser.add_argument("--require", action="store_true", help="exit 1 with one line when none can be had")
    sub.add_parser("browser", help="chromium and an emoji font for tests/browser (make browser-deps)")
    args = parser.parse_args(argv)
    return fonts(args.require) if args.what == "fonts" else browser()


if __name__ == "__main__":
    sys.exit(main())
