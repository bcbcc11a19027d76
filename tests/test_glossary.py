"""Student-facing text keeps to docs/glossary.md and never mentions the material the course was written from.

1. The Chinese text (notebooks/zh: markdown, and the comments and strings of code cells; README_zh.md;
   docs/*_zh.md) uses none of the glossary's *rejected variants* (its last column).
2. No student-facing text, English or Chinese (both notebook folders, README*.md, docs/), mentions "seed"
   material (the seed deck, seed notes, 种子课件 ...): a mistake worth teaching is "a common mistake" / 常见错误.

Failures name the file, the notebook cell (counted from 0, as in Jupyter) or the line, and what to write instead.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from course_lab import i18n

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "docs" / "glossary.md"
REJECTED = i18n.parse_rejected(GLOSSARY.read_text(encoding="utf-8"))

# The speaker notes are in the instructor edition only (build/instructor/zh, not committed): their Chinese is read
# from the sources' ``%% markdown notes`` cells, as the file ``notes:NN_name`` (see _lines).
NOTES = [ROOT / "notebooks" / "source" / f"notes:{path.stem}"
         for path in sorted((ROOT / "notebooks" / "source").glob("[0-9][0-9]_*.md"))]
ZH_FILES = sorted((ROOT / "notebooks" / "zh").glob("*.ipynb")) + sorted(
    [ROOT / "README_zh.md", *(ROOT / "docs").glob("*_zh.md")]
) + NOTES
STUDENT_FILES = (
    sorted((ROOT / "notebooks" / "en").glob("*.ipynb"))
    + sorted((ROOT / "notebooks" / "zh").glob("*.ipynb"))
    + sorted(ROOT.glob("README*.md"))
    + sorted((ROOT / "docs").rglob("*.md"))
)

# The material the course was written from is not the students' business. "seed" alone is fine (random seeds).
SEED_MATERIAL = re.compile(
    r"\bseed(?:'s\b|\s+(?:deck|notes?|slides?|formula|task|material|course|lesson|version|mistakes?|design)s?\b)"
    r"|\bthe seed (?:has|does|is|says|uses|pads|gets)\b"
    r"|\|seed\b|\bseed\s*/|:\s*seed\b"
    r"|种子(?:课件|讲义|公式|幻灯片|版本|任务|笔记)|：种子 |原始讲义|原课程幻灯片|本课程最初的幻灯片",
    re.IGNORECASE,
)


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def notes_lines(source: Path) -> list[tuple[str, str]]:
    """(where, line) for the Chinese of a lesson source's speaker notes, named by source line."""
    import build_notebooks as bn

    cells = bn.parse_source(source.read_text(encoding="utf-8"), source.stem)
    return [(f"notes at line {cell.line}, +{n}", line) for cell in cells
            if cell.kind == "markdown" and cell.slide_type == "notes"
            for n, line in enumerate(cell.text["zh"].splitlines(), 1)]


def _lines(path: Path) -> list[tuple[str, str]]:
    """(where, line) for every line of a file; a notebook's lines are named by cell (from 0) and line (from 1)."""
    if path.name.startswith("notes:"):
        return notes_lines(path.with_name(path.name.removeprefix("notes:") + ".md"))
    if path.suffix != ".ipynb":
        return [(f"line {n}", line) for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)]
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [(f"cell {i}, line {n}", line) for i, cell in enumerate(cells)
            for n, line in enumerate("".join(cell["source"]).splitlines(), 1)]


# One form each where a plain variant cannot say it: 控件 is right inside 交互控件, and 随机失活 right after
# "dropout（", the form a lesson introduces the term with (docs/glossary.md, dropout).
PATTERNS = [(re.compile(r"(?<!交互)控件"), "交互控件", "widget"),
            (re.compile(r"(?<!dropout（)随机失活"), "dropout（随机失活） where a lesson introduces it, else dropout",
             "dropout"),
            # head labels: tr("head_n") prints 注意力头 1, so the prose says so too (not 头 1, not 第 1 个头)
            (re.compile(r"第 \d+ 个头|(?<!注意力)(?<!每个)头 \d"), "注意力头 N", "head")]


def rejected_variants_in(path: Path, rejected=REJECTED, patterns=PATTERNS) -> list[str]:
    """One message per rejected glossary variant (or PATTERNS match) found in ``path``."""
    problems = []
    for where, line in _lines(path):
        hits = [(v, p, e) for v, p, e in rejected if v in line]
        hits += [(m.group(0), p, e) for rx, p, e in patterns for m in rx.finditer(line)]
        problems += [f"{_rel(path)}, {where}: {variant!r} -> write {preferred!r} ({english}, docs/glossary.md) "
                     f"in {line.strip()[:70]!r}" for variant, preferred, english in hits]
    return problems


def seed_mentions_in(path: Path) -> list[str]:
    """One message per mention of the course's source material in ``path``."""
    return [f"{_rel(path)}, {where}: {match.group(0)!r} mentions the course's source material; say what is "
            f"commonly seen instead (a common mistake / 常见错误): {line.strip()[:80]!r}"
            for where, line in _lines(path) for match in SEED_MATERIAL.finditer(line)]


def _source_hint(path: Path) -> str:
    if path.suffix == ".ipynb":
        return f" (edit notebooks/source/{path.stem}.md, then run `make notebooks`)"
    return ""


def test_glossary_lists_rejected_variants_consistently():
    preferred = {zh for _, zh in i18n.glossary(GLOSSARY)}
    variants = [variant for variant, _, _ in REJECTED]
    assert len(variants) >= 30, "docs/glossary.md lost its rejected column"
    assert len(set(variants)) == len(variants), "a rejected variant is listed twice"
    clash = [v for v in variants if v in preferred]
    assert not clash, f"rejected variants that are also a preferred term: {clash}"
    terms = dict(i18n.glossary(GLOSSARY))
    for english, chinese in {"encoder-only": "仅编码器", "decoder-only": "仅解码器", "memory": "编码器输出",
                             "notebook": "笔记本", "dev set": "开发集", "layer normalization": "层归一化",
                             "token id": "词元 ID", "common mistake": "常见错误", "widget": "交互控件",
                             "attention pattern": "注意力模式", "n-gram": "n 元语法", "sentence embedding": "句向量",
                             "dropout": "dropout", "memory (RAM)": "内存", "exercise check": "检查函数"}.items():
        assert terms.get(english) == chinese, english
    assert ("纯编码器", "仅编码器", "encoder-only") in REJECTED
    for variant in ("小部件", "小工具", "注意模式", "只有解码器", "句子向量", "n 元组", "反向 dropout", "probe 模型",
                    "检查程序"):
        assert variant in variants, variant
    # d2l-zh's terms are alternatives students will meet, recorded in the note column, never rejected.
    for d2l in ("层规范化", "暂退法", "强制教学", "掩蔽", "掩蔽语言模型", "贪心搜索", "小批量"):
        assert d2l not in variants and d2l in GLOSSARY.read_text(encoding="utf-8"), d2l


def test_checks_name_file_cell_and_preferred_term(tmp_path):
    nb = {"cells": [{"cell_type": "markdown", "source": ["# 标题\n"]},
                    {"cell_type": "code", "source": ["x = 1\n", "# 先做层标准化，再相加\n"]}]}
    path = tmp_path / "06_demo.ipynb"
    path.write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
    assert rejected_variants_in(path) == ["06_demo.ipynb, cell 1, line 2: '层标准化' -> write '层归一化' "
                                          "(layer normalization, docs/glossary.md) in '# 先做层标准化，再相加'"]
    assert seed_mentions_in(path) == []
    path = tmp_path / "demo_zh.md"
    path.write_text("打开交互控件。拖动控件。\ndropout（随机失活）之后只写 dropout，不写随机失活。\n", encoding="utf-8")
    assert [p.split(" -> ")[0] for p in rejected_variants_in(path)] == [
        "demo_zh.md, line 1: '控件'", "demo_zh.md, line 2: '随机失活'"]
    path.write_text("第 1 个头看前一个词，头 2 看位置；注意力头 3 和每个头 4 列都可以。\n", encoding="utf-8")
    assert [p.split(" -> ")[0] for p in rejected_variants_in(path)] == [
        "demo_zh.md, line 1: '第 1 个头'", "demo_zh.md, line 1: '头 2'"]
    path = tmp_path / "notes_zh.md"
    path.write_text("这里比较了种子课件的公式。\nA random seed is fine; seed_everything(0).\n"
                    "The seed deck's formula\n", encoding="utf-8")
    assert [p.split(":")[0] for p in seed_mentions_in(path)] == ["notes_zh.md, line 1", "notes_zh.md, line 3"]


@pytest.mark.parametrize("path", ZH_FILES, ids=_rel)
def test_chinese_text_uses_the_glossary_terms(path):
    problems = rejected_variants_in(path)
    assert not problems, "\n".join(problems) + _source_hint(path)


@pytest.mark.parametrize("path", STUDENT_FILES, ids=_rel)
def test_student_text_never_mentions_seed_material(path):
    problems = seed_mentions_in(path)
    assert not problems, "\n".join(problems) + _source_hint(path)
