"""Checks that an English notebook and its Chinese partner really are the same lesson.

One implementation shared by ``tools/build_notebooks.py`` (which refuses to write a pair that fails) and by
``tests/test_bilingual.py`` (which checks the committed notebooks). Every checker takes notebooks as plain
dicts (``json.load`` output or ``nbformat.NotebookNode``) and returns a list of human-readable problems:
an empty list means the check passed.
"""

from __future__ import annotations

import io
import re
import tokenize

# Han ideographs: CJK Unified Ideographs, Extension A and the compatibility block. Punctuation such as "。" is
# deliberately not counted: a cell with Chinese punctuation but English words is still untranslated.
_CJK = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")

# A ZH markdown cell with more Latin letters of prose than this must contain Chinese. Small enough to catch an
# untranslated heading ("Attention weights"), large enough to let "Q, K, V" or "GPT / BERT" through.
MIN_PROSE_LETTERS = 8

# Markdown that is not prose: code, maths, HTML, URLs. Removed before counting letters, in this order
# (fenced blocks first so that a "$" or "`" inside them cannot open a false span).
_NON_PROSE = [
    re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[^\n]*$", re.S | re.M),  # fenced code blocks
    re.compile(r"\$\$.*?\$\$", re.S),  # display maths
    re.compile(r"\\\[.*?\\\]", re.S),
    re.compile(r"\\\(.*?\\\)", re.S),
    re.compile(r"(?<!\\)\$[^$\n]+?(?<!\\)\$"),  # inline maths
    re.compile(r"`[^`\n]*`"),  # inline code
    re.compile(r"\]\([^)]*\)"),  # link / image targets (the link text stays: it is prose)
    re.compile(r"<[^>\n]+>"),  # HTML tags
    re.compile(r"https?://\S+"),
    re.compile(r"&[a-zA-Z]+;"),  # HTML entities such as &nbsp;
]


def has_cjk(text: str) -> bool:
    """True when ``text`` contains at least one Chinese (Han) character."""
    return _CJK.search(text) is not None


def prose(markdown: str) -> str:
    """The prose of a markdown text: code, maths, HTML tags, URLs and link targets replaced by spaces."""
    for pattern in _NON_PROSE:
        markdown = pattern.sub(" ", markdown)
    return markdown


def prose_letters(markdown: str) -> int:
    """Number of Latin letters in the prose of a markdown text."""
    return sum(1 for ch in prose(markdown) if "a" <= ch.lower() <= "z")


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    # On disk nbformat stores sources as a list of lines; in memory as one string.
    return "".join(source) if isinstance(source, list) else source


STRING = '""'  # what every string literal (f-strings and implicit concatenations included) is compared as
_STRING_LITERAL = re.compile(r"""[rRbBuUfF]{0,2}("[^"\n]*"|'[^'\n]*')""")
# Python 3.12+ splits f-strings into several tokens; older versions give one STRING token.
_FSTRING_START, _FSTRING_END = getattr(tokenize, "FSTRING_START", None), getattr(tokenize, "FSTRING_END", None)


def _lines_form(source: str) -> list[str]:
    """Fallback form: non-blank lines that are not full-line comments, trailing spaces removed, strings as ""."""
    lines = [_STRING_LITERAL.sub(STRING, line).rstrip() for line in source.splitlines()]
    return [line for line in lines if line.strip() and not line.lstrip().startswith("#")]


def _normalise(tokens: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Tokens with every string literal replaced by one STRING, and ``( STRING )`` by STRING."""
    out: list[tuple[int, str]] = []
    depth = 0  # inside an f-string (3.12+ tokens)
    for kind, text in tokens:
        if kind == _FSTRING_START:
            depth += 1
            continue
        if depth:
            depth -= kind == _FSTRING_END
            if depth or kind != _FSTRING_END:
                continue
            kind = tokenize.STRING
        if kind == tokenize.STRING:
            if out and out[-1] == (tokenize.STRING, STRING):
                continue  # implicit concatenation: "a" "b" is one literal
            out.append((tokenize.STRING, STRING))
            continue
        if text == ")" and len(out) >= 2 and out[-1] == (tokenize.STRING, STRING) and out[-2][1] == "(" and (
            len(out) < 3 or out[-3][0] not in (tokenize.NAME, tokenize.STRING) and out[-3][1] not in ")]"
        ):  # a literal in brackets of its own, not a call: ("a"\n "b") == "a"
            out[-2:] = [(tokenize.STRING, STRING)]
            continue
        out.append((kind, text))
    return out


def _tokens_form(source: str) -> list[tuple[int, str]] | None:
    """Python tokens without comments and non-logical newlines, string literals normalised (see _normalise);
    None when ``source`` does not tokenize."""
    try:
        return _normalise([
            (tok.type, tok.string)
            for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type not in (tokenize.COMMENT, tokenize.NL)
        ])
    except (tokenize.TokenError, SyntaxError):
        return None


def same_code(en_source: str, zh_source: str) -> bool:
    """True when two code cells differ at most in their comments and the text of their string literals.

    One language per notebook: labels and messages are string literals in the notebook's language, so literals
    are compared as placeholders (an implicit concatenation over several lines, or one in brackets, counts as
    one literal). Everything else, ``#`` inside a string included, must be identical token for token.
    Cells the tokenizer rejects (IPython magics such as ``!echo it's``) are compared line by line with
    full-line comments removed and quoted strings replaced instead.
    """
    en_tokens, zh_tokens = _tokens_form(en_source), _tokens_form(zh_source)
    if en_tokens is not None and zh_tokens is not None:
        return en_tokens == zh_tokens
    return _lines_form(en_source) == _lines_form(zh_source)


def code_mismatches(en: dict, zh: dict) -> list[str]:
    """Problems where EN and ZH code cells differ in anything but comments (cells are paired by position)."""
    problems = []
    for index, (en_cell, zh_cell) in enumerate(zip(en["cells"], zh["cells"])):
        if en_cell["cell_type"] == zh_cell["cell_type"] == "code" and not same_code(
            _source(en_cell), _source(zh_cell)
        ):
            problems.append(
                f"cell {index}: EN and ZH code differ outside comments and string literals; translate "
                f"comments with # en: / # zh: and labels with pick({{\"en\": ..., \"zh\": ...}}) or tr(key)"
            )
    return problems


def structure_mismatches(en: dict, zh: dict) -> list[str]:
    """Problems where the two notebooks do not have the same cells, ids and slide/tag metadata."""
    if len(en["cells"]) != len(zh["cells"]):
        counts = f"EN has {len(en['cells'])} cells but ZH has {len(zh['cells'])}"
        return [f"{counts}: regenerate both from the source with `make notebooks`"]
    problems = []
    for index, (en_cell, zh_cell) in enumerate(zip(en["cells"], zh["cells"])):
        for key in ("cell_type", "id"):
            en_value, zh_value = en_cell.get(key), zh_cell.get(key)
            if en_value != zh_value:
                problems.append(f"cell {index}: {key} differs (EN {en_value!r}, ZH {zh_value!r})")
        for key in ("slideshow", "tags"):
            if en_cell["metadata"].get(key) != zh_cell["metadata"].get(key):
                problems.append(f"cell {index}: metadata.{key} differs between EN and ZH")
    return problems


def untranslated_cells(zh: dict, min_letters: int = MIN_PROSE_LETTERS) -> list[str]:
    """Problems for ZH markdown cells with more than ``min_letters`` letters of prose but no Chinese prose.

    Chinese inside code or maths does not count: English prose around a Chinese code comment is untranslated.
    """
    problems = []
    for index, cell in enumerate(zh["cells"]):
        text = _source(cell)
        if cell["cell_type"] != "markdown":
            continue
        if prose_letters(text) > min_letters and not has_cjk(prose(text)):
            start = text.strip().splitlines()[0][:60]
            problems.append(f"cell {index}: ZH markdown has no Chinese characters ({start!r}): translate it")
    return problems


def output_problems(nb: dict) -> list[str]:
    """Problems for code cells that carry outputs or execution counts (committed notebooks must be clean)."""
    problems = []
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        if cell.get("outputs"):
            problems.append(f"cell {index}: has outputs; regenerate with `make notebooks` instead of saving")
        if cell.get("execution_count") is not None:
            problems.append(f"cell {index}: has execution_count {cell['execution_count']}; regenerate it")
    return problems


def first_cell_problems(nb: dict) -> list[str]:
    """Problems unless the first cell starts a slide (the title slide of the deck)."""
    if not nb["cells"]:
        return ["the notebook has no cells"]
    slide_type = nb["cells"][0].get("metadata", {}).get("slideshow", {}).get("slide_type")
    if slide_type != "slide":
        return [f"cell 0: slide_type is {slide_type!r}; the first cell must be `%% markdown slide`"]
    return []


def language_problems(nb: dict, language: str) -> list[str]:
    """Problems unless ``metadata.language`` says ``language``."""
    found = nb.get("metadata", {}).get("language")
    return [] if found == language else [f"metadata.language is {found!r}, expected {language!r}"]


def check_pair(en: dict, zh: dict) -> list[str]:
    """Every check for one lesson: an empty list means the EN/ZH pair is consistent and clean."""
    problems = language_problems(en, "en") + language_problems(zh, "zh")
    problems += [f"EN {p}" for p in output_problems(en) + first_cell_problems(en)]
    problems += [f"ZH {p}" for p in output_problems(zh) + first_cell_problems(zh)]
    structure = structure_mismatches(en, zh)
    if structure:  # cells cannot be paired by position: the remaining checks would only add noise
        return problems + structure
    return problems + code_mismatches(en, zh) + untranslated_cells(zh)
