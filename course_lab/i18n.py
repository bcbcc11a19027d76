"""Language selection and shared bilingual labels.

The notebooks exist twice (``notebooks/en`` and ``notebooks/zh``), built from one source. One-off texts are
written there as ``pick({"en": "...", "zh": "..."})``; when both values are literals the notebook builder
(``tools/one_language.py``) replaces the call by the notebook's literal, so each notebook shows one language.
What is left to run time (:func:`tr` labels shared by plots and widgets, a :func:`pick` of a dict from a lesson
module) has to find out which language to speak. :func:`current_language` looks, in order, at

1. an explicit :func:`set_language` call in this session,
2. the environment variable ``COURSE_LANG`` (``en`` or ``zh``),
3. ``JPY_SESSION_NAME``, which Jupyter Server sets to the notebook's path (``.../notebooks/zh/03.ipynb``),
4. the working directory (nbval and ``jupyter nbconvert --execute`` start the kernel in the notebook folder),

and falls back to English.
"""

from __future__ import annotations

import difflib
import os
import re
import unicodedata
from pathlib import Path

LANGUAGES = ("en", "zh")

# Spellings people actually type in COURSE_LANG or set_language(); path components are matched exactly instead
# (see _lang_from_path) so that a folder called "english-notes" does not switch the course language.
_ALIASES = {
    "en": "en", "english": "en", "en-us": "en", "en_us": "en", "en-gb": "en", "en_gb": "en",
    "zh": "zh", "chinese": "zh", "zh-cn": "zh", "zh_cn": "zh", "zh-hans": "zh", "zh_hans": "zh",
    "zh-sg": "zh", "cn": "zh", "中文": "zh", "简体中文": "zh",
}

_override: str | None = None

# Shared UI labels. The Chinese must agree with docs/glossary.md (checked by tests/test_i18n.py); entries with
# "{...}" are templates filled by tr(key, **fields) because word order differs ("Layer 2" / "第 2 层").
LABELS: dict[str, dict[str, str]] = {
    "position": {"en": "Position", "zh": "位置"},
    "dimension": {"en": "Dimension", "zh": "维度"},
    "token": {"en": "Token", "zh": "词元"},
    "query": {"en": "Query", "zh": "查询"},
    "key": {"en": "Key", "zh": "键"},
    "value": {"en": "Value", "zh": "值"},
    "head": {"en": "Head", "zh": "注意力头"},
    "layer": {"en": "Layer", "zh": "层"},
    "step": {"en": "Step", "zh": "步"},
    "epoch": {"en": "Epoch", "zh": "轮次"},
    "loss": {"en": "Loss", "zh": "损失"},
    "train": {"en": "Training", "zh": "训练"},
    "validation": {"en": "Validation", "zh": "验证"},
    "train_loss": {"en": "Training loss", "zh": "训练损失"},
    "val_loss": {"en": "Validation loss", "zh": "验证损失"},
    "learning_rate": {"en": "Learning rate", "zh": "学习率"},
    "attention_weights": {"en": "Attention weights", "zh": "注意力权重"},
    "positional_encoding": {"en": "Positional encoding", "zh": "位置编码"},
    "probability": {"en": "Probability", "zh": "概率"},
    "element_value": {"en": "Element value", "zh": "元素值"},
    "count": {"en": "Count", "zh": "数量"},
    "before": {"en": "Before", "zh": "之前"},
    "after": {"en": "After", "zh": "之后"},
    "mean": {"en": "mean", "zh": "均值"},
    "std": {"en": "std", "zh": "标准差"},
    "error": {"en": "Error", "zh": "错误"},
    "layer_n": {"en": "Layer {n}", "zh": "第 {n} 层"},
    "head_n": {"en": "Head {n}", "zh": "注意力头 {n}"},
    "layer_head": {"en": "Layer {layer}, head {head}", "zh": "第 {layer} 层 · 注意力头 {head}"},
}

def normalize_language(lang: str, *, source: str = "language") -> str:
    """``"en"`` or ``"zh"`` for a spelling such as ``"zh-CN"`` or ``"English"``; ValueError otherwise."""
    if not isinstance(lang, str):
        raise TypeError(f"{source} must be a string such as 'en' or 'zh', got {type(lang).__name__}")
    code = _ALIASES.get(lang.strip().lower())
    if code is None:
        raise ValueError(f"{source}={lang!r} is not supported: use 'en' (English) or 'zh' (简体中文)")
    return code


def _lang_from_path(path: str, *, skip_last: bool = False) -> str | None:
    """Language of the deepest ``en``/``zh`` folder in *path* (either slash style), or None.

    The deepest one wins because it is the most specific: ``/home/zh/course/notebooks/en`` is English.
    ``skip_last`` ignores the final component (the notebook's file name).
    """
    parts = [p for p in re.split(r"[\\/]+", path) if p]
    if skip_last:
        parts = parts[:-1]
    for part in reversed(parts):
        if part.lower() in LANGUAGES:
            return part.lower()
    return None


def current_language() -> str:
    """Return ``"en"`` or ``"zh"`` (see the module docstring for the order of the checks)."""
    if _override is not None:
        return _override
    env = os.environ.get("COURSE_LANG", "").strip()
    if env:
        return normalize_language(env, source="COURSE_LANG")
    session = os.environ.get("JPY_SESSION_NAME", "")
    if session:
        found = _lang_from_path(session, skip_last=True)
        if found:
            return found
    try:
        cwd = os.getcwd()
    except OSError:  # the working directory was deleted: nothing to learn from it
        cwd = ""
    return _lang_from_path(cwd) or "en"


def set_language(lang: str | None) -> None:
    """Force the language for this Python session (``None`` goes back to automatic detection)."""
    global _override
    _override = None if lang is None else normalize_language(lang)


def _resolve(lang: str | None) -> str:
    return current_language() if lang is None else normalize_language(lang)


class MissingTranslationError(ValueError, KeyError):
    """A text has no version in the requested language.

    It is a ValueError (bad input, as everywhere in the course) and a KeyError (a missing key), so either
    ``except`` catches it.
    """

    def __str__(self) -> str:  # KeyError would print the message inside quotes
        return str(self.args[0]) if self.args else ""


def pick(texts: dict, lang: str | None = None):
    """Return ``texts[lang]`` for the current (or given) language.

    ``pick({"en": "Attention", "zh": "注意力"})`` is how notebooks write one-off bilingual texts.
    """
    if not isinstance(texts, dict):
        raise TypeError(
            f"pick() expects a dict like {{'en': ..., 'zh': ...}}, got {type(texts).__name__}; "
            "wrap the text: pick({'en': text_en, 'zh': text_zh})"
        )
    code = _resolve(lang)
    if code not in texts:
        available = ", ".join(repr(k) for k in texts) or "none"
        raise MissingTranslationError(
            f"no text for language {code!r} (the dict has: {available}); add a {code!r} entry to the dict"
        )
    return texts[code]


def tr(key: str, lang: str | None = None, **fields) -> str:
    """Translate a shared UI label: ``tr("position")`` → ``"Position"`` or ``"位置"``.

    Template labels take their fields as keywords: ``tr("layer_n", n=2)`` → ``"Layer 2"`` / ``"第 2 层"``.
    """
    if key not in LABELS:
        close = difflib.get_close_matches(key, LABELS, n=3)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else f"; known: {sorted(LABELS)}"
        raise MissingTranslationError(f"unknown label {key!r}{hint} (add it to course_lab.i18n.LABELS)")
    text = pick(LABELS[key], lang)
    if fields or "{" in text:
        try:
            text = text.format(**fields)
        except KeyError as err:
            raise ValueError(
                f"label {key!r} needs the field {err.args[0]!r}: tr({key!r}, {err.args[0]}=...)") from None
    return text


def _spaced(text: str) -> str:
    """``text`` with a space on each side that touches Latin letters or digits, to sit between Chinese words."""
    if not text:
        return text
    left = " " if text[0].isascii() and text[0].isalnum() else ""
    right = " " if text[-1].isascii() and text[-1].isalnum() else ""
    return f"{left}{text}{right}"


def ratio(value: float, reference: float, *, than: str | dict, what: str | dict | None = None, fmt: str = ".2f",
          lang: str | None = None) -> str:
    """Say "``value`` is r times ``reference``" so that each language reads it as meant.

    Chinese readers take "快了 N 倍" as (N + 1)× and "慢 N 倍" as (N + 1)× the time, and a decrease is not written
    "小了 N 倍", so the Chinese is 是…的 r 倍 from r = 0.5 up, and 只有…的一半 / 只有…的 1/n below; the English is
    "r×" and "1/n of". ``than`` names the reference ({"en": "ours", "zh": "我们的实现"}), ``what`` the measured
    quantity ({"en": "time", "zh": "用时"}), either as such a dict or as the text of the notebook's language (a
    notebook writes ``than=pick({...})``, which the builder resolves); ``fmt`` formats r or n.
    ``ratio(3.0, 1.5, than={"en": "ours", "zh": "我们的实现"})`` → ``"2.00× ours"`` / ``"是我们的实现的 2.00 倍"``;
    ``ratio(1, 2, ...)`` → ``"1/2.00 of ours"`` / ``"只有我们的实现的一半"``.
    """
    if not reference or value < 0 or reference < 0:
        raise ValueError(f"ratio() needs a positive reference and a value >= 0, got {value!r} / {reference!r}")
    code = _resolve(lang)
    r = value / reference
    head = (pick(what, code) if isinstance(what, dict) else what) or ""
    ref = pick(than, code) if isinstance(than, dict) else than
    n = f"{reference / value:{fmt}}" if value else ""
    fraction = bool(value) and (r < 0.5 or float(n) == 2)
    if code == "en":
        head = f"{head} " if head else ""
        return f"{head}1/{n} of {ref}" if fraction else f"{head}{r:{fmt}}× {ref}"
    if not fraction:
        return f"{head}是{_spaced(ref)}的 {r:{fmt}} 倍".replace("  ", " ")
    if float(n) == 2:
        return f"{head}只有{_spaced(ref).rstrip()}的一半"
    return f"{head}只有{_spaced(ref)}的 1/{n}".replace("  ", " ")


def width(text: str) -> int:
    """Columns that ``text`` takes in a monospaced font: Chinese characters and full-width punctuation take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in str(text))


def ljust(text: str, columns: int) -> str:
    """``str.ljust`` by display width, so that columns of Chinese labels line up in printed tables."""
    text = str(text)
    return text + " " * max(0, columns - width(text))


def rjust(text: str, columns: int) -> str:
    """``str.rjust`` by display width (see :func:`ljust`)."""
    text = str(text)
    return " " * max(0, columns - width(text)) + text


def _clean_cell(cell: str) -> str:
    """Drop markdown emphasis and code marks so that '**token**' and '`token`' read as 'token'."""
    return re.sub(r"[*`]", "", cell).strip()


def _glossary_table(markdown: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the first markdown table whose header starts with ``English``."""
    header: list[str] = []
    rows: list[list[str]] = []
    for line in markdown.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            if header:  # the glossary is one table: the first non-table line after it ends it
                break
            continue
        cells = [_clean_cell(c) for c in line.strip("|").split("|")]
        if not header:
            header = cells if cells[0].lower() == "english" else []
            continue
        if len(cells) < 2 or set(cells[0]) <= set("-: "):  # the |---|---| separator row
            continue
        rows.append(cells)
    return header, rows


def parse_glossary(markdown: str) -> list[tuple[str, str]]:
    """(en, zh) pairs of the first markdown table whose header starts with ``English``."""
    return [(cells[0], cells[1]) for cells in _glossary_table(markdown)[1] if cells[0] and cells[1]]


def parse_rejected(markdown: str) -> list[tuple[str, str, str]]:
    """(rejected variant, preferred 中文, English term) for the comma-separated cells of the ``rejected`` column."""
    header, rows = _glossary_table(markdown)
    column = next((i for i, name in enumerate(header) if name.lower().startswith("rejected")), None)
    if column is None:
        return []
    return [(variant.strip(), cells[1], cells[0]) for cells in rows if len(cells) > column
            for variant in cells[column].split(",") if variant.strip()]


def glossary(path: str | os.PathLike | None = None) -> list[tuple[str, str]]:
    """The course glossary as (English, 中文) pairs: the table of ``path`` (``docs/glossary.md`` of a clone, which
    the package never looks for by itself), or without a path the plain (non-template) built-in labels."""
    if path is None:
        return [(v["en"].lower(), v["zh"]) for v in LABELS.values() if "{" not in v["en"]]
    if not Path(path).is_file():
        raise FileNotFoundError(f"glossary file {str(path)!r} not found: pass docs/glossary.md of the course's "
                                "folder, or no path for the built-in labels")
    return parse_glossary(Path(path).read_text(encoding="utf-8"))
