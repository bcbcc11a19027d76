"""A font that can draw Chinese in matplotlib figures, found among the installed ones (lessons 00 and every
Chinese notebook).

Never a bare ``SimHei`` guess: a font is used only if matplotlib finds it installed *and* its file really has
glyphs for the characters the labels use. When none exists, :func:`setup_fonts` says once, clearly, how to
install one on each system. :mod:`course_lab.viz` re-exports :func:`setup_fonts` and :func:`use_language`,
which is how the lessons call them.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

from . import i18n

# Most preferred first: fonts with full Simplified Chinese coverage and a sans-serif design, then the system
# fonts of macOS / Windows, then fallbacks with wide coverage. Only fonts matplotlib finds installed are used.
CJK_FONT_PREFERENCE = (
    "Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "Source Han Sans CN", "WenQuanYi Micro Hei",
    "WenQuanYi Zen Hei", "Sarasa Gothic SC", "Sarasa UI SC", "PingFang SC", "Hiragino Sans GB",
    "Microsoft YaHei", "SimHei", "Heiti SC", "STHeiti", "Noto Sans CJK JP", "Noto Serif CJK SC",
    "Source Han Serif SC", "AR PL UMing CN", "Droid Sans Fallback", "Arial Unicode MS",
)
# Names that suggest a CJK font not in the list above; each candidate is still checked for real coverage.
_CJK_NAME_HINT = re.compile(r"CJK|Han Sans|Han Serif|Hei|Song|Kai|Ming|Sarasa|Fallback|Unicode", re.I)
_PROBE = "注意力层头位置维度"  # characters the Chinese labels really use
_CJK_TEXT = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")

_coverage_cache: dict[str, bool] = {}
_warned_missing_font = False
_rescanned = False


class CJKFontWarning(UserWarning):
    """No installed font can draw Chinese characters."""


def _installed_fonts():
    from matplotlib import font_manager
    return font_manager.fontManager.ttflist


def _covers_cjk(fname: str) -> bool:
    """True if the font file has glyphs for the probe characters (cached: opening a font takes ms)."""
    if fname not in _coverage_cache:
        from matplotlib.ft2font import FT2Font
        try:
            font = FT2Font(fname)
            _coverage_cache[fname] = all(font.get_char_index(ord(c)) for c in _PROBE)
        except (OSError, RuntimeError, ValueError):  # unreadable or unsupported file: not usable
            _coverage_cache[fname] = False
    return _coverage_cache[fname]


def _register_fonts_missing_from_cache() -> int:
    """Add CJK fonts installed after matplotlib built its font cache; return how many were added.

    matplotlib scans the system fonts once and caches the list (``fontlist-*.json``). A font installed later,
    the order a student naturally follows (run, read the hint, install the font, run again), stays invisible
    until that list is rebuilt. Here the new font files that really cover Chinese are added to the running
    font manager, and the stale cache file is deleted so that the next kernel rebuilds it and finds them too.
    """
    from matplotlib import font_manager
    known = {str(e.fname) for e in font_manager.fontManager.ttflist}
    added = 0
    for path in font_manager.findSystemFonts():
        if path in known or not _covers_cjk(path):
            continue
        try:
            font_manager.fontManager.addfont(path)
            added += 1
        except (OSError, RuntimeError, ValueError):  # unreadable file: skip it, as matplotlib's own scan does
            continue
    if added:  # drop the stale list: the next kernel's matplotlib rebuilds it from the system's fonts
        import matplotlib
        for cache in Path(matplotlib.get_cachedir()).glob("fontlist-*.json"):
            cache.unlink(missing_ok=True)
    return added


def find_cjk_font() -> str | None:
    """Name of the best installed font that can draw Simplified Chinese, or None.

    If none is in matplotlib's (possibly stale) font list, the system's font folders are scanned once for CJK
    fonts installed after the list was cached (:func:`_register_fonts_missing_from_cache`).
    """
    global _rescanned
    name = _best_cjk_font()
    if name is None and not _rescanned:
        _rescanned = True  # once per session: an English-only machine without CJK fonts pays the scan once
        if _register_fonts_missing_from_cache():
            name = _best_cjk_font()
    return name


def _best_cjk_font() -> str | None:
    by_name: dict[str, list[str]] = {}
    for entry in _installed_fonts():
        by_name.setdefault(entry.name, []).append(entry.fname)
    candidates = [n for n in CJK_FONT_PREFERENCE if n in by_name]
    candidates += sorted(n for n in by_name if n not in CJK_FONT_PREFERENCE and _CJK_NAME_HINT.search(n))
    for name in candidates:
        if any(_covers_cjk(f) for f in by_name[name]):
            return name
    return None


def missing_font_message() -> str:
    """What to do when no installed font can draw Chinese: per-system install steps, then the cache to clear."""
    import matplotlib
    cache = matplotlib.get_cachedir()
    return (
        "No installed font can draw Chinese characters, so Chinese labels would show as empty boxes.\n"
        "没有找到可以显示中文的字体，图中的中文会显示为方框。Install one, then restart the kernel:\n"
        "  Debian/Ubuntu/Colab: sudo apt-get install fonts-noto-cjk   (smaller: fonts-wqy-microhei)\n"
        "  Fedora: sudo dnf install google-noto-sans-cjk-fonts   Arch: sudo pacman -S noto-fonts-cjk\n"
        "  macOS / Windows ship PingFang SC / Microsoft YaHei: if they are not found, the cache is stale.\n"
        "  conda (no root): conda search -c conda-forge '*cjk*' and install the Noto CJK package it lists.\n"
        f"The course finds a newly installed font by itself; if it still does not, delete matplotlib's font cache\n"
        f"({cache}/fontlist-*.json) so that it rescans the fonts.\n"
        "Or register a downloaded font file for this session only:\n"
        "  matplotlib.font_manager.fontManager.addfont('/path/to/NotoSansCJKsc-Regular.otf')"
    )


def setup_fonts(lang: str | None = None) -> str | None:
    """Make matplotlib able to draw Chinese when the language is ``zh``; return the font used (or None).

    The chosen font goes first in ``rcParams["font.sans-serif"]``, and ``axes.unicode_minus`` is turned off
    because many CJK fonts have no U+2212 minus sign. For English nothing is changed. If no CJK font is
    installed, a :class:`CJKFontWarning` with install instructions is issued once per session.
    """
    global _warned_missing_font
    code = i18n.current_language() if lang is None else i18n.normalize_language(lang)
    if code != "zh":
        return None
    name = find_cjk_font()
    if name is None:
        if not _warned_missing_font:
            _warned_missing_font = True
            warnings.warn(missing_font_message(), CJKFontWarning, stacklevel=2)
        return None
    import matplotlib
    others = [f for f in matplotlib.rcParams["font.sans-serif"] if f != name]
    matplotlib.rcParams["font.sans-serif"] = [name] + others
    matplotlib.rcParams["font.family"] = ["sans-serif"]
    matplotlib.rcParams["axes.unicode_minus"] = False
    return name


def use_language(lang: str | None = None, *texts) -> str:
    """``"en"`` or ``"zh"`` for ``lang`` (None: the notebook's language), with a font set up for what is drawn.

    A CJK font is set up when the language is Chinese or when any of the ``texts`` (groups of labels or tokens)
    contains Chinese, so Chinese data in an English figure draws too. Every function that draws starts here.
    """
    code = i18n.current_language() if lang is None else i18n.normalize_language(lang)
    strings = [str(t) for group in texts if group is not None for t in group]
    if code == "zh" or any(_CJK_TEXT.search(s) for s in strings):
        setup_fonts("zh")
    return code
