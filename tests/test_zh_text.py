"""The Chinese text reads the way a Chinese reader reads it.

1. Ratios: "快了 2 倍" / "慢 1.2 倍" are read as 3× / 2.2×, and a decrease is not written "小了 100 倍". Printed ratios
   go through ``course_lab.i18n.ratio``; no Chinese text says 快/慢/少/小/低/相差 … N 倍.
2. Percent: "15%", never "15 %".
3. Line breaks: a newline between two Chinese characters renders as a space in Chromium (the slides' browser), so
   the builder joins such lines in the Chinese notebooks (``build_notebooks.join_cjk_lines``).
4. Printed tables line up: ``i18n.ljust`` / ``rjust`` pad by display width.
5. Code comments of the Chinese notebooks have no English words (shapes, names and units are fine): a shared comment
   that says something in English is written as a pair in the source (``# en: … # zh: …``).

Scanned: the markdown and code of notebooks/zh, README_zh.md, docs/*_zh.md, and the Chinese strings of course_lab.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import build_notebooks as bn
import pytest
from test_zh_outputs import _function_names, _keyword_names, _trees, english_words

from course_lab import i18n

ROOT = Path(__file__).resolve().parents[1]
ZH_NOTEBOOKS = sorted((ROOT / "notebooks" / "zh").glob("*.ipynb"))
# The speaker notes (instructor edition only): their Chinese, read from the sources (tests/test_glossary.py).
NOTES = [ROOT / "notebooks" / "source" / f"notes:{path.stem}"
         for path in sorted((ROOT / "notebooks" / "source").glob("[0-9][0-9]_*.md"))]
ZH_DOCS = [ROOT / "README_zh.md", *sorted((ROOT / "docs").glob("*_zh.md"))]
LAB_FILES = sorted((ROOT / "course_lab").rglob("*.py"))
CJK = re.compile(r"[\u4e00-\u9fff]")

_AMOUNT = r"(?:\$[^$]*\$|\{[^{}]*\}|[\d.,–+\-e]+|几|好几|[一二两三四五六七八九十百千万]+)"
# 快了 2 倍, 慢 1.2 倍, 小了 {r:.1e} 倍, 少了 64 倍, 相差 2 倍, 快 3–4 倍, 小了大约 $10^4$ 倍, 多容纳 8 倍
AMBIGUOUS_TIMES = re.compile(
    r"(?:快|慢|少|小|大(?!约)|高|低|短|减少|降低|缩小|提高|增加|相差|多容纳|多)了?\s*(?:大约|约|近|将近)?\s*" + _AMOUNT
    + r"\s*倍")
SPACED_PERCENT = re.compile(r"[\d}] %(?![=(])")


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _chinese_lines(path: Path) -> list[tuple[str, str]]:
    """(where, line) for the lines a Chinese reader sees: every line of a Chinese document or notebook (code cells:
    the lines with a Chinese character, that is comments and strings), the Chinese lines of course_lab."""
    if path.name.startswith("notes:"):
        from test_glossary import notes_lines

        return notes_lines(path.with_name(path.name.removeprefix("notes:") + ".md"))
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        return [(f"cell {i}, line {n}", line) for i, cell in enumerate(cells)
                for n, line in enumerate("".join(cell["source"]).splitlines(), 1)
                if cell["cell_type"] == "markdown" or CJK.search(line)]
    lines = path.read_text(encoding="utf-8").splitlines()
    return [(f"line {n}", line) for n, line in enumerate(lines, 1) if path.suffix == ".md" or CJK.search(line)]


def _find(pattern: re.Pattern, path: Path) -> list[str]:
    return [f"{_rel(path)}, {where}: {m.group(0)!r} in {line.strip()[:80]!r}"
            for where, line in _chinese_lines(path) for m in pattern.finditer(line) if CJK.search(line)]


@pytest.mark.parametrize("path", ZH_NOTEBOOKS + ZH_DOCS + LAB_FILES + NOTES, ids=_rel)
def test_no_ratio_a_chinese_reader_reads_as_another(path):
    problems = _find(AMBIGUOUS_TIMES, path)
    assert not problems, ("write 是…的 N 倍 / 只有…的 1/N / 用时只有一半 (printed: course_lab.i18n.ratio):\n"
                          + "\n".join(problems))


@pytest.mark.parametrize("path", ZH_NOTEBOOKS + ZH_DOCS + LAB_FILES + NOTES, ids=_rel)
def test_no_space_before_percent_in_chinese(path):
    problems = _find(SPACED_PERCENT, path)
    assert not problems, "Chinese writes 15%, not 15 %:\n" + "\n".join(problems)


def test_the_patterns_catch_what_they_are_for():
    for bad in ("快了 2.0 倍", "慢 1.2 倍", "小了 {r:.1e} 倍", "少了 64 倍", "相差 2 倍", "快 3–4 倍",
                "梯度小了大约 $10^4$ 倍", "平均梯度小了好几倍", "能多容纳 8 倍的序列",
                "学出一个大 $\\sqrt{h}$ 倍的 $W^Q$", "分数高 3 倍"):
        assert AMBIGUOUS_TIMES.search(bad), bad
    for good in ("耗时是融合路径的 1.2 倍", "只有缩放时的 1/1.0e+04", "用时只有一半", "$T$ 每翻一倍",
                 "内存变成四倍", "是阈值的三十多倍", "速度提高到原来的 2.0 倍左右",
                 "大约 2 倍", "把 $W^Q$ 学成原来的 $\\sqrt{h}$ 倍"):
        assert not AMBIGUOUS_TIMES.search(good), good
    assert SPACED_PERCENT.search("准确率 80.7 %") and SPACED_PERCENT.search("{acc:.1f} %")
    assert not SPACED_PERCENT.search("准确率 80.7%") and not SPACED_PERCENT.search("i % 2 == 0")


def test_ratio_words_each_language():
    than = {"en": "ours", "zh": "我们的实现"}
    assert i18n.ratio(1.2, 1.0, than=than, what={"en": "time", "zh": "用时"}, lang="en") == "time 1.20× ours"
    assert i18n.ratio(1.2, 1.0, than=than, what={"en": "time", "zh": "用时"}, lang="zh") == "用时是我们的实现的 1.20 倍"
    assert i18n.ratio(1.0, 2.0, than=than, lang="zh") == "只有我们的实现的一半"
    assert i18n.ratio(1.0, 2.0, than=than, lang="en") == "1/2.00 of ours"
    assert i18n.ratio(1.0, 1e4, than="缩放时", fmt=".1e", lang="zh") == "只有缩放时的 1/1.0e+04"
    assert i18n.ratio(0.86, 1.0, than="float32", lang="zh") == "是 float32 的 0.86 倍"   # spaces around Latin
    assert i18n.ratio(0.86, 1.0, than="float32", lang="en") == "0.86× float32"
    for lang in ("en", "zh"):                                       # what the lessons print passes the test above
        for value in (0.001, 0.3, 0.5, 0.9, 1.0, 2.0, 4.0):
            text = i18n.ratio(value, 1.0, than=than, what={"en": "speed", "zh": "速度"}, lang=lang)
            assert not AMBIGUOUS_TIMES.search(text), text
    with pytest.raises(ValueError, match="positive reference"):
        i18n.ratio(1.0, 0.0, than=than)


def test_display_width_padding():
    assert i18n.width("注意力头 1") == 10 and i18n.width("head 1") == 6
    rows = [i18n.ljust(label, 18) + "|" for label in ("自由生成（贪心）", "教师强制", "greedy")]
    assert len({i18n.width(row) for row in rows}) == 1                  # the bars line up on screen
    assert i18n.rjust("比值", 5) == " 比值"


def test_join_cjk_lines():
    text = ("第一次安装\n可能要一分钟\n\n## 标题\n正文\n是**重点**\n**加粗**开头\n7 位\n：完\n"
            "```\n代码\n行\n```\n1. 第一项的\n   续行\n- 列表\n- 第二项\n用 $T$\n表示\n换行  \n硬换行")
    assert bn.join_cjk_lines(text) == ("第一次安装可能要一分钟\n\n## 标题\n正文是**重点**\n**加粗**开头\n7 位：完\n"
                                      "```\n代码\n行\n```\n1. 第一项的续行\n- 列表\n- 第二项用 $T$\n表示换行  \n硬换行")
    assert bn.join_cjk_lines("An English\nparagraph") == "An English\nparagraph"


@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=_rel)
def test_no_line_break_between_chinese_characters(path):
    """A soft break between two Chinese characters shows as a space in a rendered cell or slide."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    problems = []
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "markdown":
            continue
        text = "".join(cell["source"])
        if bn.join_cjk_lines(text) != text:
            lines = text.split("\n")
            joined = [n for n in range(1, len(lines)) if bn.join_cjk_lines("\n".join(lines[n - 1:n + 1])) !=
                      "\n".join(lines[n - 1:n + 1])]
            problems += [f"{_rel(path)}, cell {i}, line {n}: {lines[n - 1][-20:]!r} ⏎ {lines[n][:20]!r}"
                         for n in joined]
    assert not problems, "rebuild with tools/build_notebooks.py:\n" + "\n".join(problems)


def _comment_identifiers(notebook: dict) -> set[str]:
    """What a comment may name without being English: the notebook's identifiers (keyword arguments, functions,
    variables: ``# (…, T_q, block)``) and Python's type names (``# (B, T) bool``)."""
    import ast

    names = _keyword_names(notebook) | _function_names(notebook) | {"bool", "float", "int", "str"}
    return names | {node.id for tree in _trees(notebook) for node in ast.walk(tree) if isinstance(node, ast.Name)}


def english_comments(notebook: dict) -> list[str]:
    """Comments of a Chinese notebook's code, in code cells and in the solutions' ```python blocks, with an English
    word in them (names, shapes and units allowed)."""
    import io
    import tokenize

    names, found = _comment_identifiers(notebook), []
    blocks = [(i, "".join(cell["source"])) for i, cell in enumerate(notebook["cells"]) if cell["cell_type"] == "code"]
    blocks += [(i, code) for i, cell in enumerate(notebook["cells"]) if cell["cell_type"] == "markdown"  # solutions
               for code in re.findall(r"```python\n(.*?)```", "".join(cell["source"]), re.S)]
    for i, code in blocks:
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
        except (tokenize.TokenError, SyntaxError):
            continue
        found += [f"cell {i}, line {tok.start[0]}: {tok.string!r}" for tok in tokens if tok.type == tokenize.COMMENT
                  and not CJK.search(tok.string) and english_words(tok.string.lstrip("#"), names, names)]
    return found


@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=_rel)
def test_no_english_comment_in_chinese_code(path):
    """Shared code comments are language-neutral (shapes, names) or written as a pair: `# en: … # zh: …` at the end
    of a code line, `# en:` / `# zh:` lines above it (notebooks/source/README.md)."""
    problems = english_comments(json.loads(path.read_text(encoding="utf-8")))
    assert not problems, f"{_rel(path)}: English comments (translate them in the source):\n" + "\n".join(problems)


def test_the_comment_check_catches_english():
    def cell(code):
        return {"cells": [{"cell_type": "code", "source": code, "metadata": {}}]}
    assert english_comments(cell("x = y @ w  # rows sum to 1\n"))
    assert english_comments(cell("# block-diag\nz = 1\n"))
    assert not english_comments(cell("block = 4\nx = y.view(-1, block)  # (n / block, block)\n"
                                     "m = x > 0  # (B, T) bool\n"))
    assert not english_comments(cell("x = y @ w  # (B, h, T_q, T_k)，每行之和为 1\n"))
    solution = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": "```python\nx = 1  # no biases\n```"}]}
    assert english_comments(solution)
