"""One language per notebook: resolve ``pick({"en": ..., "zh": ...})`` at build time and check what is left.

The source of a code cell is shared by both languages. A one-off label or message is written in it as

    print(pick({"en": f"loss {loss:.3f}", "zh": f"损失 {loss:.3f}"}))

and :func:`resolve` turns it into ``print(f"loss {loss:.3f}")`` in the English notebook and
``print(f"损失 {loss:.3f}")`` in the Chinese one. A call is resolved when its only argument is a dict display
with exactly the keys ``"en"`` and ``"zh"`` whose values are string literals or f-strings (implicit
concatenation across lines included); the literal's own text is copied, so formatting, quotes and f-string
expressions stay as written. Every other ``pick(...)`` (a variable, a dict built elsewhere, an explicit
language) stays a run-time choice and is reported as a :class:`Note`.

:func:`foreign_text` then lists what would still show the other language: a string literal or comment with
Chinese characters in the English notebook, a string literal or comment of English prose (at least
``MIN_PROSE_WORDS`` words, see :func:`english_words`) in the Chinese one. Lesson *data* in the other language
(Chinese sentences a lesson translates, English test sentences) is allowed on lines that end with the marker
comment ``# lang-ok``; :func:`strip_markers` removes the marker from the generated notebook.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass

from nbcheck import has_cjk

LANGUAGES = ("en", "zh")
MARKER = "# lang-ok"

# A string or comment of the Chinese notebook with at least this many English words (see english_words) and no
# Chinese character is untranslated prose. Three words still pass: "Transformers are unaffable!", "max |diff|".
MIN_PROSE_WORDS = 4

_MAGIC = re.compile(r"^[ \t]*[%!]")  # IPython magics and shell escapes: not Python, hidden before parsing
_MARKER_LINE = re.compile(r"[ \t]*# lang-ok[ \t]*$")
# Not prose inside a string: URLs, paths and dotted names, {fields}, identifiers with _ or digits, CamelCase.
_NOT_WORDS = re.compile(r"https?://\S+|\S+/\S+|\{[^{}]*\}|\S*[._]\S+|\S*\d\S*|\b[A-Za-z]*[a-z][A-Z]\w*")
_WORD = re.compile(r"(?<![\w\\])[A-Za-z][a-z]+(?![\w\\])")


@dataclass(frozen=True)
class Note:
    """Something worth telling the author: ``row`` counts from 0 within the cell."""

    row: int
    message: str


@dataclass(frozen=True)
class _Pick:
    start: int  # character offsets into the cell's code: the whole call ``pick(...)``
    end: int
    values: dict[str, tuple[int, int]]  # language -> (start, end) of its literal
    in_brackets: bool  # the call sits inside (), [] or {}: a value may span lines without extra parentheses


def english_words(text: str) -> int:
    """Number of English words in ``text``: lower-case or capitalised runs of 2+ letters.

    URLs, paths, dotted and snake_case names, ``{fields}``, CamelCase and words with digits are not counted,
    so ``"nn.LayerNorm (ε = 1e-5)"`` has none and ``"max |difference| vs nn.LayerNorm:"`` has three.
    """
    return len(_WORD.findall(_NOT_WORDS.sub(" ", text)))


def is_english_prose(text: str) -> bool:
    """True for text with no Chinese character and at least MIN_PROSE_WORDS English words."""
    return not has_cjk(text) and english_words(text) >= MIN_PROSE_WORDS


def _parse(code: str) -> ast.Module | None:
    """The cell as Python, magics hidden (same length, so positions stay valid); None when it does not parse."""
    lines = code.split("\n")
    for row, line in enumerate(lines):
        if _MAGIC.match(line):
            indent = len(line) - len(line.lstrip())
            lines[row] = line[:indent] + "#" + line[indent + 1 :]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


class _Offsets:
    """Convert ast positions (1-based rows, UTF-8 byte columns) into character offsets of the code."""

    def __init__(self, code: str):
        self.lines = code.split("\n")
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line) + 1)

    def __call__(self, row: int, byte_col: int) -> int:
        line = self.lines[row - 1]
        return self.starts[row - 1] + len(line.encode("utf-8")[:byte_col].decode("utf-8"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self(node.lineno, node.col_offset), self(node.end_lineno, node.end_col_offset)

    def row(self, offset: int) -> int:
        """0-based row of a character offset."""
        low, high = 0, len(self.starts) - 1
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if self.starts[mid] <= offset else (low, mid)
        return low


def _is_pick(node: ast.AST) -> bool:
    func = node.func if isinstance(node, ast.Call) else None
    return isinstance(func, ast.Name) and func.id == "pick" or isinstance(func, ast.Attribute) and func.attr == "pick"


def _literal_dict(call: ast.Call) -> dict[str, ast.expr] | None:
    """``{"en": value, "zh": value}`` of a pick call with one literal bilingual dict, else None."""
    if call.keywords or len(call.args) != 1 or not isinstance(call.args[0], ast.Dict):
        return None
    keys, values = call.args[0].keys, call.args[0].values
    if not all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in keys):
        return None
    found = {k.value: v for k, v in zip(keys, values)}
    if len(found) != len(keys) or set(found) != set(LANGUAGES):
        return None
    if not all(isinstance(v, ast.JoinedStr) or isinstance(v, ast.Constant) and isinstance(v.value, str)
               for v in found.values()):
        return None
    return found


def _bracket_depths(code: str) -> dict[int, int]:
    """Bracket depth at the start of every token, keyed by character offset (empty if the code does not lex)."""
    offsets, depth, depths = _Offsets(code), 0, {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            start = offsets.starts[tok.start[0] - 1] + tok.start[1]
            depths[start] = depth
            if tok.type == tokenize.OP and tok.string in "([{":
                depth += 1
            elif tok.type == tokenize.OP and tok.string in ")]}":
                depth -= 1
    except (tokenize.TokenError, SyntaxError):
        return {}
    return depths


def _analyse(code: str) -> tuple[list[_Pick], list[Note], ast.Module | None]:
    """The resolvable pick calls of ``code`` (any nesting) and notes about the others."""
    tree = _parse(code)
    if tree is None:
        notes = [Note(0, "the cell is not valid Python, so its pick(...) calls stay run-time choices")]
        return [], notes if "pick(" in code else [], None
    offsets, depths = _Offsets(code), None
    picks, notes = [], []
    for node in ast.walk(tree):
        if not _is_pick(node):
            continue
        found = _literal_dict(node)
        start, end = offsets.span(node)
        if found is None:
            call = code[start:end].split("\n")[0][:60]
            notes.append(Note(node.lineno - 1, f"{call!r} is not a pick of two literals: chosen at run time"))
            continue
        if not code[start:end].endswith(")"):  # positions inside old-Python f-strings can be wrong: do not guess
            notes.append(Note(node.lineno - 1, "a pick(...) inside an f-string: write it outside the f-string"))
            continue
        depths = _bracket_depths(code) if depths is None else depths
        picks.append(_Pick(start, end, {lang: offsets.span(v) for lang, v in found.items()},
                           depths.get(start, 0) > 0))
    return sorted(picks, key=lambda p: p.start), sorted(notes, key=lambda n: n.row), tree


def _string_rows(text: str) -> set[int]:
    """0-based rows of ``text`` that begin inside a multi-line string literal (their spaces are content)."""
    inside: set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING:
                inside.update(range(tok.start[0], tok.end[0]))  # the rows after its first, 0-based
    except (tokenize.TokenError, SyntaxError):
        pass
    return inside


def _shift(lines: list[str], rows: range, shift: int, skip: set[int], beyond: int = -1) -> None:
    """Indent ``lines[rows]`` by ``shift`` more columns (never below 0), except rows in ``skip`` and rows
    indented ``beyond`` columns or less."""
    for row in rows:
        line = lines[row]
        indent = len(line) - len(line.lstrip(" "))
        if row not in skip and line.strip() and indent > beyond:
            lines[row] = " " * max(0, indent + shift) + line[indent:]


def _align(text: str, column: int) -> str:
    """Align the continuation lines of a literal that now starts at ``column``: the leftmost one goes to
    ``column``, the others keep their offset from it (lines inside a multi-line string are left alone)."""
    lines = text.split("\n")
    skip = _string_rows("(" + text + ")")
    rows = [r for r in range(1, len(lines)) if r not in skip and lines[r].strip()]
    if not rows:
        return text
    leftmost = min(len(lines[r]) - len(lines[r].lstrip(" ")) for r in rows)
    _shift(lines, range(1, len(lines)), column - leftmost, skip)
    return "\n".join(lines)


def _statement_end(code: str, offset: int) -> int:
    """Row (0-based) where the logical line that contains character ``offset`` ends."""
    offsets = _Offsets(code)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            at = offsets.starts[tok.start[0] - 1] + tok.start[1]
            if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER) and at >= offset:
                return tok.start[0] - 1
    except (tokenize.TokenError, SyntaxError):
        pass
    return offsets.row(offset)


def resolve(code: str, language: str) -> tuple[str, list[Note]]:
    """``code`` with every literal ``pick({"en": ..., "zh": ...})`` replaced by its ``language`` literal.

    Continuation lines keep their alignment: those of the literal move with it, and the lines of the same
    statement after the call that were aligned to its right (``.format(`` arguments) move by as much as its end.
    """
    if language not in LANGUAGES:
        raise ValueError(f"language={language!r} is not supported: use one of {LANGUAGES}")
    picks, notes, _ = _analyse(code)
    original = _Offsets(code)

    def column(offset: int) -> int:
        return offset - original.starts[original.row(offset)]

    def render(pick: _Pick) -> str:
        start, end = pick.values[language]
        out, cursor = [], start
        for inner in picks:  # picks nested in this literal (inside its f-string expressions)
            if start <= inner.start and inner.end <= end and inner.start >= cursor:
                out += [code[cursor:inner.start], render(inner)]
                cursor = inner.end
        text = "".join(out) + code[cursor:end]
        if "\n" in text and not pick.in_brackets:  # a literal split over lines needs brackets around it
            return "(" + _align(text, column(pick.start) + 1) + ")"
        return _align(text, column(pick.start))

    outermost = [p for p in picks if not any(q is not p and q.start <= p.start and p.end <= q.end for q in picks)]
    for pick in reversed(outermost):  # from the end, so that the offsets of earlier picks stay valid
        text = render(pick)
        new_end = (column(pick.start) if "\n" not in text else 0) + len(text.rsplit("\n", 1)[-1])
        before = code[: pick.start] + text
        code = before + code[pick.end :]
        lines = code.split("\n")
        end_row = before.count("\n")
        _shift(lines, range(end_row + 1, _statement_end(code, len(before)) + 1), new_end - column(pick.end),
               _string_rows(code), beyond=column(pick.start))
        code = "\n".join(lines)
    return code, notes


def marker_rows(code: str) -> set[int]:
    """0-based rows whose last comment is the ``# lang-ok`` marker."""
    rows = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type == tokenize.COMMENT and tok.string.strip() == MARKER:
                rows.add(tok.start[0] - 1)
    except (tokenize.TokenError, SyntaxError):
        pass
    return rows


def strip_markers(code: str) -> str:
    """``code`` without the ``# lang-ok`` markers (and the spaces before them)."""
    rows = marker_rows(code)
    return "\n".join(_MARKER_LINE.sub("", line) if row in rows else line for row, line in enumerate(code.split("\n")))


def _literal_text(node: ast.expr) -> str:
    """The text a string literal shows: an f-string's literal parts, without its {expressions}."""
    if isinstance(node, ast.Constant):
        return node.value
    return " ".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))


def _literals(tree: ast.Module) -> list[ast.expr]:
    """Outermost string literals and f-strings (not the strings nested inside an f-string's expressions)."""
    found, nested = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            nested.update(id(n) for n in ast.walk(node) if n is not node)
    for node in ast.walk(tree):
        if id(node) in nested:
            continue
        if isinstance(node, ast.JoinedStr) or isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append(node)
    return found


def _comments(code: str) -> list[tuple[int, str]]:
    try:
        return [(tok.start[0] - 1, tok.string) for tok in tokenize.generate_tokens(io.StringIO(code).readline)
                if tok.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError):
        return [(row, line.strip()) for row, line in enumerate(code.split("\n")) if line.lstrip().startswith("#")]


def _wrong(text: str, language: str) -> bool:
    return has_cjk(text) if language == "en" else is_english_prose(text)


def foreign_text(code: str, language: str) -> tuple[list[Note], set[int]]:
    """Strings and comments that would show the other language in the ``language`` notebook.

    ``code`` is the ``language`` version of one cell *before* :func:`resolve` (the other language's pick values
    are skipped) and with its ``# lang-ok`` markers. Returns the problems and the rows whose marker excused
    something (a marker that excuses nothing in either language is stale: the builder reports it).
    """
    picks, _, tree = _analyse(code)
    offsets, markers = _Offsets(code), marker_rows(code)
    other = [p.values[lang] for p in picks for lang in LANGUAGES if lang != language]
    what = "Chinese" if language == "en" else "English prose"
    problems, used = [], set()

    def report(first: int, last: int, kind: str, text: str) -> None:
        excused = set(range(first, last + 1)) & markers
        if excused:
            used.update(excused)
        else:
            problems.append(Note(first, f"{kind} {text.strip()[:50]!r} is {what} in the {language.upper()} notebook"))

    for node in _literals(tree) if tree is not None else []:
        start, end = offsets.span(node)
        if any(s <= start and end <= e for s, e in other):
            continue  # the other language's pick value: not in this notebook
        text = _literal_text(node)
        if _wrong(text, language):
            report(node.lineno - 1, node.end_lineno - 1, "string", text)
    for row, comment in _comments(code):
        text = comment.lstrip("#").strip()
        if comment.strip() != MARKER and _wrong(text, language):
            report(row, row, "comment", text)
    return sorted(problems, key=lambda n: n.row), used
