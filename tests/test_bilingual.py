"""The bilingual notebooks: the builder, its checks, and the committed EN/ZH notebooks themselves."""

from __future__ import annotations

import json
from pathlib import Path

import build_notebooks as bn
import nbcheck
import nbformat
import pytest
from notebook_guard import GUARD

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "tests" / "fixtures" / "99_format_demo.md"
LANGUAGES = ("en", "zh")


def _committed(language: str) -> dict[str, Path]:
    return {path.stem: path for path in sorted((bn.OUT_DIR / language).glob("*.ipynb"))}


def _sources() -> dict[str, Path]:
    return {path.stem: path for path in bn.lesson_sources(bn.SOURCE_DIR)} if bn.SOURCE_DIR.exists() else {}


COMMITTED = {language: _committed(language) for language in LANGUAGES}
PAIRED = sorted(set(COMMITTED["en"]) & set(COMMITTED["zh"]))


def _load(lesson: str) -> tuple[dict, dict]:
    return tuple(json.loads(COMMITTED[lang][lesson].read_text(encoding="utf-8")) for lang in LANGUAGES)


def _demo(edition: str = "instructor") -> dict[str, dict]:
    """The demo lesson; the instructor edition keeps every cell (the student one drops its speaker note)."""
    return {lang: json.loads(text) for lang, text in bn.build_lesson(DEMO, edition=edition).items()}


def _text(cell: dict) -> str:
    return "".join(cell["source"])


# --- the builder, on the demo lesson ---


def test_demo_cells_metadata_and_comments():
    notebooks = _demo()
    en, zh = notebooks["en"], notebooks["zh"]
    for language, nb in notebooks.items():
        nbformat.validate(nbformat.from_dict(nb))
        assert nb["nbformat"] == 4 and nb["nbformat_minor"] == 5
        assert nb["metadata"]["language"] == language
        assert nb["metadata"]["kernelspec"]["name"] == "python3"
        assert nb["metadata"]["language_info"]["name"] == "python"
        kinds = [c["cell_type"] for c in nb["cells"]]
        assert kinds == ["markdown", "code", "markdown", "code", "markdown", "code"]
        slides = [c["metadata"].get("slideshow", {}).get("slide_type", "-") for c in nb["cells"]]
        assert slides == ["slide", "-", "fragment", "subslide", "notes", "skip"]
        assert [c["metadata"].get("tags") for c in nb["cells"]] == [
            None,
            ["hide-input"],
            None,
            ["raises-exception", "nbval-ignore-output"],
            None,
            None,
        ]
        assert all(c["outputs"] == [] and c["execution_count"] is None for c in nb["cells"] if "outputs" in c)
    assert [c["id"] for c in en["cells"]] == [c["id"] for c in zh["cells"]]
    assert len({c["id"] for c in en["cells"]}) == len(en["cells"])

    assert _text(en["cells"][0]).startswith("# Format demo\n")
    assert _text(zh["cells"][0]).startswith("# 格式演示\n")
    assert _text(en["cells"][2]) == "Order does not matter: the Chinese section may come first."
    # The first code cell starts with the install guard (tools/notebook_guard.py), then the cell's own code.
    assert all(_text(nb["cells"][1]).startswith(GUARD[lang] + "\n") for lang, nb in (("en", en), ("zh", zh)))
    own = {lang: _text(nb["cells"][1]).removeprefix(GUARD[lang] + "\n") for lang, nb in (("en", en), ("zh", zh))}
    assert own["en"].splitlines()[0] == "# Shared code, language-specific comments."
    assert own["zh"].splitlines()[0] == "# 代码两种语言共用，只有注释分语言。"
    # Shared lines, shared comments and inline comments are verbatim in both languages.
    for nb in (en, zh):
        assert "# (B, T, C)" in _text(nb["cells"][1])                     # shape comments: shared
        assert "    return x  # (B, T)" in _text(nb["cells"][3])        # an inline shape comment stays in both
        assert _text(nb["cells"][5]) == "%%time\ntotal = sum(values)"
    assert _text(en["cells"][3]).splitlines()[1:3] == [
        "    # A comment may span several lines;",
        "    # the two languages need not have as many.",
    ]
    assert _text(zh["cells"][3]).splitlines()[1] == "    # 中英文注释的行数可以不同。"
    # An inline pair: each notebook keeps the code and its own half of the comment.
    assert "    y = x + 1  # one more\n" in _text(en["cells"][3]) and "多一个" not in _text(en["cells"][3])
    assert "    y = x + 1  # 多一个\n" in _text(zh["cells"][3]) and "one more" not in _text(zh["cells"][3])
    assert "        #\n" in _text(en["cells"][3])  # "# en:" without text becomes a bare "#"
    for nb in (en, zh):
        assert "# en:" not in json.dumps(nb, ensure_ascii=False) and "# zh:" not in json.dumps(nb)


def test_builds_are_byte_identical_and_check_detects_changes(tmp_path, capsys):
    source_dir = tmp_path / "source"
    source_dir.mkdir()
    (source_dir / DEMO.name).write_bytes(DEMO.read_bytes())
    first, second = tmp_path / "first", tmp_path / "second"
    args = ["--source-dir", str(source_dir)]
    assert bn.main([*args, "--out-dir", str(first)]) == 0
    assert bn.main([*args, "--out-dir", str(second)]) == 0
    files = sorted(p.relative_to(first) for p in first.rglob("*.ipynb"))
    assert files == [Path("en/99_format_demo.ipynb"), Path("zh/99_format_demo.ipynb")]
    for relative in files:
        assert (first / relative).read_bytes() == (second / relative).read_bytes()
        assert (first / relative).read_bytes().endswith(b"}\n")
    assert bn.main([*args, "--out-dir", str(first), "--check"]) == 0

    stale = first / "zh" / "99_format_demo.ipynb"
    stale.write_text(stale.read_text(encoding="utf-8").replace("格式演示", "格式示范"), encoding="utf-8")
    (first / "en" / "99_format_demo.ipynb").unlink()
    (first / "en" / "50_orphan.ipynb").write_text("{}", encoding="utf-8")
    capsys.readouterr()
    assert bn.main([*args, "--out-dir", str(first), "--check"]) == 1
    report = capsys.readouterr().out
    assert f"stale: {stale}" in report
    assert f"missing: {first / 'en' / '99_format_demo.ipynb'}" in report
    assert "orphan (no notebooks/source/50_orphan.md)" in report

    assert bn.main([*args, "--out-dir", str(first)]) == 0  # rebuilding repairs stale and missing files
    assert (first / "zh" / "99_format_demo.ipynb").read_bytes() == (
        second / "zh" / "99_format_demo.ipynb"
    ).read_bytes()


GOOD_TITLE = "%% markdown slide\n:: en\n# Title\n:: zh\n# 标题\n\n"

SOURCE_ERRORS = {
    "zh missing": (
        GOOD_TITLE + "%% markdown\n:: en\nOnly English.\n",
        "cell 1 (line 7)",
        "`:: zh` section is missing",
    ),
    "zh empty": (GOOD_TITLE + "%% markdown\n:: en\nText.\n:: zh\n\n", "cell 1", "`:: zh` section is empty"),
    "en twice": (GOOD_TITLE + "%% markdown\n:: en\nA\n:: en\nB\n:: zh\n乙\n", "cell 1", "appears twice"),
    "text before section": (GOOD_TITLE + "%% markdown\nstray\n:: en\nA\n:: zh\n甲\n", "cell 1", "'stray'"),
    "en comment alone": (GOOD_TITLE + "%% code\n# en: Only English\nx = 1\n", "cell 1", "no `# zh:` partner"),
    "zh comment alone": (GOOD_TITLE + "%% code\nx = 1\n# zh: 只有中文\n", "cell 1", "no `# en:` partner"),
    "indentation differs": (
        GOOD_TITLE + "%% code\nif True:\n    # en: inside\n# zh: 里面\n    x = 1\n",
        "cell 1",
        "indented differently",
    ),
    "blank line splits pair": (GOOD_TITLE + "%% code\n# en: a\n\n# zh: 甲\nx = 1\n", "cell 1", "partner"),
    "inline language comment": (GOOD_TITLE + "%% code\nx = 1  # en: one\n", "cell 1", "whole lines"),
    "near miss": (GOOD_TITLE + "%% code\n#en: no space\n#zh: 没有空格\nx = 1\n", "cell 1", "exactly"),
    "section in code": (GOOD_TITLE + "%% code\n:: en\nx = 1\n", "cell 1", "for markdown cells"),
    "empty code cell": (GOOD_TITLE + "%% code\n\n%% markdown\n:: en\nA\n:: zh\n甲\n", "cell 1", "empty"),
    "bad slide type": (GOOD_TITLE + "%% code hide-input\nx = 1\n", "cell 1", "`%% code - hide-input`"),
    "bad kind": (GOOD_TITLE + "%% cod\nx = 1\n", "cell 1", "not a cell marker"),
    "comma in tags": (GOOD_TITLE + "%% code - a,b\nx = 1\n", "cell 1", "not commas"),
    "text before first cell": ("hello\n" + GOOD_TITLE, "demo", "before the first"),
    "no cells": ("\n\n", "demo", "no cells"),
}


@pytest.mark.parametrize("case", SOURCE_ERRORS, ids=list(SOURCE_ERRORS))
def test_source_format_errors_name_lesson_and_cell(case):
    source, where, message = SOURCE_ERRORS[case]
    with pytest.raises(bn.SourceFormatError) as error:
        bn.parse_source(source, "demo")
    assert str(error.value).startswith("demo")
    assert where in str(error.value) and message in str(error.value)


@pytest.mark.parametrize(
    "source, message",
    [
        ("%% markdown\n:: en\n# Title\n:: zh\n# 标题\n", "the first cell must be"),
        (GOOD_TITLE + "%% markdown\n:: en\nAttention weights\n:: zh\nAttention weights\n", "no Chinese"),
    ],
    ids=["first cell not a slide", "untranslated zh"],
)
def test_build_refuses_pairs_that_fail_the_checks(tmp_path, source, message):
    path = tmp_path / "07_bad.md"
    path.write_text(source, encoding="utf-8")
    with pytest.raises(bn.SourceFormatError, match=message) as error:
        bn.build_lesson(path)
    assert str(error.value).startswith("07_bad.md")


def test_badly_named_source_is_rejected(tmp_path, capsys):
    (tmp_path / "README.md").write_text("not a lesson", encoding="utf-8")
    assert bn.lesson_sources(tmp_path) == []
    (tmp_path / "3_Attention.md").write_text(GOOD_TITLE, encoding="utf-8")
    assert bn.main(["--source-dir", str(tmp_path), "--out-dir", str(tmp_path / "out"), "--check"]) == 2
    assert "NN_name.md" in capsys.readouterr().err


# --- the checkers, on crafted notebooks ---


def _nb(language: str, *cells: tuple[str, str], slide_types=None) -> dict:
    nb = nbformat.v4.new_notebook(metadata={"language": language})
    for index, (kind, source) in enumerate(cells):
        cell = nbformat.v4.new_code_cell(source) if kind == "code" else nbformat.v4.new_markdown_cell(source)
        cell["id"] = f"c{index}"
        slide_type = (slide_types or ["slide"] + ["-"] * len(cells))[index]
        cell["metadata"]["slideshow"] = {"slide_type": slide_type}
        nb.cells.append(cell)
    return nb


def _code_pair(en_code: str, zh_code: str) -> list[str]:
    return nbcheck.code_mismatches(_nb("en", ("code", en_code)), _nb("zh", ("code", zh_code)))


@pytest.mark.parametrize(
    "en_code, zh_code",
    [
        ("x = 1  # one\n", "x = 1  # 一\n"),
        ("# Build the model\nmodel = f(2)\n", "# 构建模型\nmodel = f(2)\n"),
        ("def f():\n    # why\n    return 1\n", "def f():\n    # 为什么\n    #\n    return 1\n"),
        ('s = "# en: stays"\n', 's = "# en: stays"  # 中文\n'),
        ("%matplotlib inline\n!echo it's\n", "%matplotlib inline\n# 中文\n!echo it's\n"),
        ("!ls (\n# why\nx = 1\n", "!ls (\n# 为什么\nx = 1\n"),
        ('print("hello")\n', 'print("你好")\n'),
        ('s = "# en: a"\n', 's = "# zh: a"\n'),
        ('print(f"{n} steps {t:.1f} s".format())\n', 'print(f"{n} 步，"\n      f"用时 {t:.1f} 秒".format())\n'),
        ('x = "one line"\n', 'x = ("two"\n     "lines")\n'),
        ('!echo it\'s\nprint("hi")\n', '!echo it\'s\nprint("你好")\n'),
    ],
    ids=[
        "inline",
        "full line",
        "extra comment line",
        "hash in string",
        "magics",
        "untokenizable (line fallback)",
        "string literal",
        "hash in string literal",
        "implicit concatenation",
        "bracketed literal",
        "string in untokenizable cell",
    ],
)
def test_code_checker_accepts_comment_and_literal_differences(en_code, zh_code):
    assert _code_pair(en_code, zh_code) == []


@pytest.mark.parametrize(
    "en_code, zh_code",
    [
        ("x = 1\n", "x = 2\n"),
        ('print("hello")\n', 'print("hello", 1)\n'),
        ('x = "a"\n', "x = a\n"),
        ('f("a")\n', 'f(("a"), "b")\n'),
        ("if a:\n    b()\nc()\n", "if a:\n    b()\n    c()\n"),
        ("!echo it's\nx = 1\n", "!echo it's\nx = 2\n"),
        ("!ls (\nx = 1\n", "!ls (\nx = 2\n"),
    ],
    ids=[
        "number",
        "extra argument",
        "literal vs name",
        "extra literal",
        "indentation",
        "magics",
        "untokenizable (line fallback)",
    ],
)
def test_code_checker_rejects_code_differences(en_code, zh_code):
    problems = _code_pair(en_code, zh_code)
    assert len(problems) == 1 and problems[0].startswith("cell 0: EN and ZH code differ")


@pytest.mark.parametrize(
    "text",
    [
        "This paragraph was never translated into Chinese.",
        "## Attention weights",
        "Untranslated prose around Chinese code:\n```python\n# 中文注释\n```",
        "English text with `代码` only in code",
    ],
)
def test_untranslated_zh_cell_is_reported(text):
    problems = nbcheck.untranslated_cells(_nb("zh", ("markdown", text)))
    assert len(problems) == 1 and "no Chinese characters" in problems[0]


@pytest.mark.parametrize(
    "text",
    [
        "注意力权重（attention weights）",
        "## Q, K, V",
        "$$\\mathrm{softmax}\\left(\\frac{QK^\\top}{\\sqrt{d_k}}\\right)V$$",
        "```python\nmodel = Transformer(vocab_size=100)\n```",
        "[MiniLM](https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2)",
        "<img src='attention_pattern_visualisation.png' width=400>",
    ],
)
def test_translated_or_letterless_zh_cell_passes(text):
    assert nbcheck.untranslated_cells(_nb("zh", ("markdown", text))) == []


def test_untranslated_check_ignores_code_cells():
    assert nbcheck.untranslated_cells(_nb("zh", ("code", "print('English is fine in code cells')"))) == []


def test_output_and_first_cell_checks_on_crafted_notebooks():
    nb = _nb("en", ("markdown", "# Title"), ("code", "1 + 1"), slide_types=["-", "-"])
    assert nbcheck.output_problems(nb) == []
    assert nbcheck.first_cell_problems(nb) == [
        "cell 0: slide_type is '-'; the first cell must be `%% markdown slide`"
    ]
    nb.cells[1]["outputs"] = [
        nbformat.v4.new_output("execute_result", {"text/plain": "2"}, execution_count=1)
    ]
    nb.cells[1]["execution_count"] = 1
    assert len(nbcheck.output_problems(nb)) == 2
    assert nbcheck.first_cell_problems(_nb("en")) == ["the notebook has no cells"]


def test_structure_and_language_checks_on_crafted_notebooks():
    en = _nb("en", ("markdown", "# Title"), ("code", "x = 1"))
    zh = _nb("zh", ("markdown", "# 标题"), ("code", "x = 1"))
    assert nbcheck.check_pair(en, zh) == []
    assert nbcheck.check_pair(zh, en)  # swapped languages
    zh.cells[1]["metadata"]["tags"] = ["raises-exception"]
    assert nbcheck.structure_mismatches(en, zh) == ["cell 1: metadata.tags differs between EN and ZH"]
    zh.cells.pop()
    assert "EN has 2 cells but ZH has 1" in nbcheck.check_pair(en, zh)[0]


# --- the committed notebooks ---


def test_committed_notebooks_match_a_fresh_build(tmp_path):
    sources = _sources()
    if not sources and not COMMITTED["en"] and not COMMITTED["zh"]:
        pytest.skip("notebooks/source has no lessons yet")
    built = bn.build_all(bn.SOURCE_DIR)
    bn.write_all(built, tmp_path)
    fresh = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.ipynb"))
    committed = sorted(p.relative_to(bn.OUT_DIR) for lang in LANGUAGES for p in COMMITTED[lang].values())
    assert committed == fresh, (
        "notebooks without a source, or sources without notebooks: run `make notebooks`"
    )
    stale = [str(p) for p in fresh if (tmp_path / p).read_bytes() != (bn.OUT_DIR / p).read_bytes()]
    assert not stale, f"stale notebooks (edit notebooks/source, then run `make notebooks`): {stale}"


def test_every_lesson_has_a_source_and_both_languages():
    sources = set(_sources())
    assert set(COMMITTED["en"]) == set(COMMITTED["zh"]), "every EN notebook needs a ZH partner and vice versa"
    assert set(COMMITTED["en"]) == sources, "every notebook needs notebooks/source/NN_name.md and vice versa"


@pytest.mark.parametrize("lesson", PAIRED)
def test_committed_pair_code_is_identical_outside_comments(lesson):
    en, zh = _load(lesson)
    assert nbcheck.structure_mismatches(en, zh) == []
    assert nbcheck.code_mismatches(en, zh) == []


def _tokens_with_blank_strings(code: str) -> list[str]:
    """The code's tokens, each string literal (every piece of an implicit concatenation) replaced by "", comments
    and line breaks inside brackets dropped: what must be identical in both languages, token for token."""
    import io
    import re
    import tokenize

    code = re.sub(r"(?m)^[ \t]*[%!].*$", "", code)          # IPython magics and shell escapes are not Python
    skip = (tokenize.COMMENT, tokenize.NL)
    return ['""' if t.type == tokenize.STRING else t.string
            for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type not in skip]


@pytest.mark.parametrize("lesson", PAIRED)
def test_committed_pair_has_the_same_tokens_with_strings_blanked(lesson):
    """Stricter than nbcheck (which reads an implicit concatenation as one literal): the same number of string
    pieces too, so that any naive EN/ZH diff of the code sees no difference."""
    en, zh = _load(lesson)
    code = [[_text(c) for c in nb["cells"] if c["cell_type"] == "code"] for nb in (en, zh)]
    differing = [i for i, (a, b) in enumerate(zip(*code))
                 if _tokens_with_blank_strings(a) != _tokens_with_blank_strings(b)]
    assert not differing, f"{lesson}: code cells {differing} differ in tokens (give both languages as many pieces)"


@pytest.mark.parametrize("lesson", PAIRED)
def test_committed_zh_prose_is_chinese(lesson):
    assert nbcheck.untranslated_cells(_load(lesson)[1]) == []


@pytest.mark.parametrize("lesson", PAIRED)
def test_committed_notebooks_are_clean_slides(lesson):
    for language, nb in zip(LANGUAGES, _load(lesson)):
        assert nbcheck.output_problems(nb) == [], f"{language}/{lesson}.ipynb"
        assert nbcheck.first_cell_problems(nb) == [], f"{language}/{lesson}.ipynb"
        assert nbcheck.language_problems(nb, language) == [], f"{language}/{lesson}.ipynb"


# --- one language per notebook: pick(...) resolved at build time, other-language text refused ---

import one_language as ol  # noqa: E402  (tools/ is on pytest's pythonpath, like build_notebooks)


def test_demo_picks_are_resolved_and_markers_stripped():
    notebooks = _demo()
    en, zh = (_text(notebooks[lang]["cells"][1]) for lang in LANGUAGES)
    assert 'print(f"{len(values)} square roots")' in en and "平方根" not in en and "pick(" not in en
    assert 'print(f"{len(values)} 个平方根")' in zh and "square roots" not in zh
    for code in (en, zh):
        assert 'city = "北京"\n' in code + "\n" and "lang-ok" not in code


@pytest.mark.parametrize(
    "code, en, zh",
    [
        ('x = pick({"en": "a", "zh": "甲"})', 'x = "a"', 'x = "甲"'),
        ("x = i18n.pick({'zh': '甲', 'en': 'a'}) + '!'", "x = 'a' + '!'", "x = '甲' + '!'"),
        (  # multi-line values: continuation lines follow the literal, .format( arguments follow its end
            'print(pick({"en": "one {a} "\n'
            '                  "two",\n'
            '            "zh": "一 {a}"}).format(a=1,\n'
            '                                   b=2))',
            'print("one {a} "\n      "two".format(a=1,\n                   b=2))',
            'print("一 {a}".format(a=1,\n                     b=2))',
        ),
        (  # outside brackets a literal over several lines gets brackets of its own
            'h = pick({"en": "a"\n                "b", "zh": "甲"})',
            'h = ("a"\n     "b")',
            'h = "甲"',
        ),
        (  # f-strings with nested quotes, and a pick inside an f-string expression
            """s = pick({"en": f"{d['k']:.1%} of {pick({'en': 'all', 'zh': '全部'})}", "zh": f"{d['k']:.1%}"})""",
            """s = f"{d['k']:.1%} of {'all'}\"""",
            """s = f"{d['k']:.1%}\"""",
        ),
        ('%%time\ny = pick({"en": "b", "zh": "乙"})', '%%time\ny = "b"', '%%time\ny = "乙"'),
    ],
    ids=["one line", "attribute, keys reversed", "multi-line and format", "top level", "f-strings", "magic"],
)
def test_resolve_picks_literal_dicts(code, en, zh):
    assert ol.resolve(code, "en") == (en, [])
    assert ol.resolve(code, "zh") == (zh, [])
    assert nbcheck.same_code(ol.resolve(code, "en")[0], ol.resolve(code, "zh")[0])


@pytest.mark.parametrize(
    "code",
    ["pick(texts)", 'pick({"en": "a", "zh": name})', 'pick({"en": "a"})', 'pick({"en": "a", "zh": "甲"}, "zh")',
     'pick({"en": "a", "zh": "甲", "fr": "b"})', 'pick({"en": "a" + b, "zh": "甲"})'],
)
def test_non_literal_picks_stay_and_are_reported(code):
    resolved, notes = ol.resolve(code, "en")
    assert resolved == code
    assert len(notes) == 1 and "chosen at run time" in notes[0].message


@pytest.mark.parametrize(
    "text, words",
    [("Transformers are unaffable!", 3), ("nn.LayerNorm (ε = 1e-5)", 0), ("max |difference| vs nn.LayerNorm:", 3),
     ("the cat sat on the mat", 6), ("see docs/data.md or COURSE_DATA_DIR", 2), ("{n}: d_model {d:,}", 0)],
)
def test_english_words(text, words):
    assert ol.english_words(text) == words


def _lesson_errors(tmp_path, code: str) -> str:
    path = tmp_path / "07_lang.md"
    path.write_text(GOOD_TITLE + "%% code\n" + code + "\n", encoding="utf-8")
    with pytest.raises(bn.SourceFormatError) as error:
        bn.build_lesson(path)
    return str(error.value)


@pytest.mark.parametrize(
    "code, message",
    [
        ('print("loss 损失")', "07_lang, cell 1 (line 8): string 'loss 损失' is Chinese in the EN notebook"),
        ("x = 1\n# 中文注释", "cell 1 (line 9): comment '中文注释' is Chinese in the EN notebook"),
        ('print("the training loss went down")', "(line 8): string 'the training loss went down' is English prose"),
        ('print(pick({"en": "the loss went down", "zh": "the loss went down"}))', "is English prose in the ZH"),
        ('print(pick({"en": "损失", "zh": "损失"}))', "is Chinese in the EN notebook"),
        ('x = "plain"  # lang-ok', "(line 8): `# lang-ok` excuses nothing on this line: remove it"),
        ("x = 1  # the number of heads we keep", "comment 'the number of heads we keep' is English prose in the ZH"),
        ("# the number of heads we keep\nx = 1", "comment 'the number of heads we keep' is English prose in the ZH"),
    ],
    ids=["cjk in en", "cjk comment", "prose in zh", "untranslated pick", "chinese pick", "stale marker",
         "english trailing comment", "english comment line"],
)
def test_other_language_text_fails_the_build_naming_lesson_cell_and_line(tmp_path, code, message):
    assert message in _lesson_errors(tmp_path, code)


def test_lang_ok_marker_excuses_data_on_its_lines_only(tmp_path):
    path = tmp_path / "07_lang.md"
    source = 'data = ["我爱自然语言处理",  # lang-ok\n        "the cat sat on the mat"]  # lang-ok\n'
    path.write_text(GOOD_TITLE + "%% code\n" + source, encoding="utf-8")
    built = {lang: json.loads(text) for lang, text in bn.build_lesson(path).items()}
    for lang, nb in built.items():  # the lesson's first code cell: after the install guard
        assert _text(nb["cells"][1]) == GUARD[lang] + '\ndata = ["我爱自然语言处理",\n        "the cat sat on the mat"]'
    unmarked = 'data = ["我爱自然语言处理",  # lang-ok\n        "猫"]'
    assert "string '猫' is Chinese in the EN notebook" in _lesson_errors(tmp_path, unmarked)
