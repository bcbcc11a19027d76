"""Build the English and Chinese notebooks of every lesson from one bilingual source.

    python tools/build_notebooks.py           # notebooks/source/NN_name.md -> notebooks/{en,zh}/NN_name.ipynb
    python tools/build_notebooks.py --check   # exit 1 and list notebooks that are stale, missing or orphaned
    python tools/build_notebooks.py --edition instructor --out-dir build/instructor   # `make instructor`

Two editions come from the one source. The *student* edition (``notebooks/{en,zh}``, committed) leaves out the
instructor-only cells: speaker notes (``%% markdown notes``) and test probes (cells tagged ``probe``, which
tests/test_widget_probes.py runs instead). The *instructor* edition (``build/instructor/{en,zh}``, not committed)
keeps every cell; tools/export_slides.py exports the decks from it, so the notes reach the speaker view.

The builder also keeps the course in step with its lesson registry (``course_lab/registry.py``): a source without a
registry row, or a row without a source, is an error; ``{{course_map}}``, ``{{lesson_count}}``, ``{{first:part}}`` and
``{{last:part}}`` in a markdown cell become the registry's table, count and numbers; and the lesson tables of
README.md and README_zh.md (between their ``<!-- lessons ... -->`` lines) are rewritten from it (``--check`` lists
them when stale).

The source format is documented in notebooks/source/README.md. The output is deterministic (fixed cell ids,
no outputs, sorted JSON keys) so that rebuilding an unchanged source gives byte-identical files and
``--check`` can compare bytes.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.util
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

try:
    import nbformat
except ImportError:  # the builder runs before `make setup` on a fresh checkout: say how to get it
    sys.exit("tools/build_notebooks.py needs nbformat: run `make setup` (or pip install nbformat)")

if __package__:  # `python -m tools.build_notebooks`
    from . import one_language
    from .nbcheck import check_pair
    from .notebook_guard import add_guard
else:  # `python tools/build_notebooks.py`, or imported with tools/ on sys.path (pytest's pythonpath)
    import one_language
    from nbcheck import check_pair
    from notebook_guard import add_guard

ROOT = Path(__file__).resolve().parents[1]
SOURCE_DIR = ROOT / "notebooks" / "source"
OUT_DIR = ROOT / "notebooks"
REGISTRY = ROOT / "course_lab" / "registry.py"  # the lesson registry: which lessons exist, their titles and parts
READMES = {"en": ROOT / "README.md", "zh": ROOT / "README_zh.md"}
# The READMEs' lesson tables sit between these two lines; the builder rewrites what is between them.
README_BEGIN = "<!-- lessons: made by tools/build_notebooks.py from course_lab/registry.py; do not edit -->"
README_END = "<!-- end of lessons -->"

LANGUAGES = ("en", "zh")
EDITIONS = ("student", "instructor")
PROBE_TAG = "probe"  # a code cell that drives a widget the way the tests do: instructor edition only
SLIDE_TYPES = ("slide", "subslide", "fragment", "skip", "notes", "-")
LESSON_NAME = re.compile(r"^\d{2}_[a-z0-9]+(_[a-z0-9]+)*$")

_MARKER = re.compile(r"^%%(\s.*)?$")  # "%% code ..."; IPython cell magics ("%%time") have no space
_SECTION = re.compile(r"^:: (en|zh)\s*$")
_LANG_COMMENT = re.compile(r"^(?P<indent>[ \t]*)# (?P<lang>en|zh):(?: (?P<text>.*))?$")
_LOOSE_LANG_COMMENT = re.compile(r"#\s*(en|zh)\s*:")  # to reject near misses such as "#en:" or inline ones
# A shared code line with a comment in each language at its end: `x = 1  # en: one # zh: 一`.
_INLINE_PAIR = re.compile(r"^(?P<code>.*\S)(?P<gap>[ \t]+)# en: (?P<en>\S.*?)[ \t]+# zh: (?P<zh>\S.*)$")

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
# No Python version here: it would change with every machine that rebuilds the notebooks.
LANGUAGE_INFO = {"name": "python", "file_extension": ".py", "mimetype": "text/x-python"}
# Live slides (jupyterlab-rise): reveal.js's "white" theme, as in the exported decks (tools/export_slides.py). RISE's
# default "simple" theme loads two web fonts from fonts.googleapis.com, which hangs or fails offline and behind the
# Great Firewall; "white" ships its font. `scroll` lets a slide taller than the screen scroll instead of being cut.
RISE = {"theme": "white", "scroll": True}


class SourceFormatError(ValueError):
    """A lesson source does not follow the format of notebooks/source/README.md."""


@dataclass(frozen=True)
class Cell:
    """One cell of a lesson: its text per language plus the metadata both languages share."""

    kind: str  # "markdown" or "code"
    slide_type: str
    tags: tuple[str, ...]
    text: dict[str, str]  # language -> cell source (code: before pick resolution, with `# lang-ok` markers)
    line: int  # line of the "%%" marker in the source, for error messages
    rows: dict[str, tuple[int, ...]] = field(default_factory=dict)  # code: language -> source line of each line


def _trim_range(lines: list[str]) -> tuple[int, int]:
    """``start, end`` of ``lines`` without the blank lines at either end (they only separate cells)."""
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return start, end


def _trim_blank_lines(lines: list[str]) -> str:
    """Join ``lines`` without the blank lines at either end."""
    start, end = _trim_range(lines)
    return "\n".join(lines[start:end])


def _parse_marker(line: str, where: str) -> tuple[str, str, tuple[str, ...]]:
    words = line[2:].split()
    if not words or words[0] not in ("markdown", "code"):
        raise SourceFormatError(f"{where}: {line!r} is not a cell marker; write `%% markdown` or `%% code`")
    kind, rest = words[0], words[1:]
    slide_type = rest.pop(0) if rest else "-"
    if slide_type not in SLIDE_TYPES:
        raise SourceFormatError(
            f"{where}: {slide_type!r} is not a slide type; use one of {', '.join(SLIDE_TYPES)} "
            f"(to give only tags, write `%% {kind} - {slide_type}`)"
        )
    bad_tags = [tag for tag in rest if "," in tag]
    if bad_tags:
        raise SourceFormatError(f"{where}: tags are separated by spaces, not commas: {' '.join(bad_tags)!r}")
    return kind, slide_type, tuple(dict.fromkeys(rest))  # dict.fromkeys: drop repeated tags, keep order


def _parse_markdown(lines: list[str], where: str) -> dict[str, str]:
    sections: dict[str, list[str]] = {}
    current = None
    for line in lines:
        match = _SECTION.match(line)
        if match:
            current = match.group(1)
            if current in sections:
                raise SourceFormatError(f"{where}: `:: {current}` appears twice; keep one per language")
            sections[current] = []
        elif current is None:
            if line.strip():
                raise SourceFormatError(f"{where}: {line!r} comes before `:: en` / `:: zh`; move it into one")
        else:
            sections[current].append(line)
    text = {}
    for language in LANGUAGES:
        text[language] = _trim_blank_lines(sections.get(language, []))
        if not text[language]:
            state = "is empty" if language in sections else "is missing"
            raise SourceFormatError(f"{where}: the `:: {language}` section {state}; write both languages")
    return text


def _parse_code(lines: list[str], where: str, first: int) -> tuple[dict[str, str], dict[str, tuple[int, ...]]]:
    """Per language, the cell's code and the source line (``first`` is that of ``lines[0]``) of each line."""
    out: dict[str, list[str]] = {language: [] for language in LANGUAGES}
    origin: dict[str, list[int]] = {language: [] for language in LANGUAGES}
    run: list[tuple[re.Match, int]] = []  # consecutive "# en:" / "# zh:" lines, checked as one block

    def flush() -> None:
        if not run:
            return
        languages = {m.group("lang") for m, _ in run}
        indents = {m.group("indent") for m, _ in run}
        if languages != set(LANGUAGES):
            missing = (set(LANGUAGES) - languages).pop()
            raise SourceFormatError(
                f"{where}: comment {run[0][0].group(0).strip()!r} has no `# {missing}:` partner; put the "
                f"translation on the line next to it"
            )
        if len(indents) > 1:
            raise SourceFormatError(
                f"{where}: the `# en:` / `# zh:` lines near {run[0][0].group(0).strip()!r} are indented "
                f"differently; indent both languages the same"
            )
        for m, number in run:
            text = m.group("text")
            out[m.group("lang")].append(f"{m.group('indent')}# {text}" if text else f"{m.group('indent')}#")
            origin[m.group("lang")].append(number)
        run.clear()

    for number, line in enumerate(lines, start=first):
        match = _LANG_COMMENT.match(line)
        if match:
            run.append((match, number))
            continue
        flush()
        pair = _INLINE_PAIR.match(line)
        if pair and not _LOOSE_LANG_COMMENT.search(pair.group("code")) and "#" not in pair.group("zh"):
            for language in LANGUAGES:
                out[language].append(f"{pair.group('code')}{pair.group('gap')}# {pair.group(language)}")
                origin[language].append(number)
            continue
        if _LOOSE_LANG_COMMENT.search(line):
            raise SourceFormatError(
                f"{where}: {line.strip()!r}: language comments must be whole lines written exactly "
                f"`# en: text` / `# zh: text`, or a pair at the end of a code line: `code  # en: text # zh: 文本`"
            )
        if _SECTION.match(line):
            raise SourceFormatError(
                f"{where}: `{line.strip()}` is for markdown cells; in code write `# en: ...` / `# zh: ...`"
            )
        for language in LANGUAGES:
            out[language].append(line)
            origin[language].append(number)
    flush()
    text, rows = {}, {}
    for language in LANGUAGES:
        start, end = _trim_range(out[language])
        text[language] = "\n".join(out[language][start:end])
        rows[language] = tuple(origin[language][start:end])
    if not text["en"]:
        raise SourceFormatError(f"{where}: the code cell is empty; remove its `%% code` line or add code")
    return text, rows


def parse_source(source: str, lesson: str) -> list[Cell]:
    """Parse the text of ``notebooks/source/<lesson>.md`` into cells (raises SourceFormatError)."""
    lines = source.splitlines()
    starts = [i for i, line in enumerate(lines) if _MARKER.match(line.rstrip())]
    preamble = [line for line in lines[: starts[0] if starts else len(lines)] if line.strip()]
    if preamble:
        raise SourceFormatError(
            f"{lesson}: text before the first `%% markdown` / `%% code` line: {preamble[0]!r}; "
            f"start every cell with a marker line"
        )
    if not starts:
        raise SourceFormatError(f"{lesson}: no cells; start each cell with `%% markdown` or `%% code`")
    cells = []
    for index, (start, end) in enumerate(zip(starts, starts[1:] + [len(lines)])):
        where = f"{lesson}, cell {index} (line {start + 1})"
        kind, slide_type, tags = _parse_marker(lines[start].rstrip(), where)
        body = lines[start + 1 : end]
        if kind == "markdown":
            cells.append(Cell(kind, slide_type, tags, _parse_markdown(body, where), start + 1))
        else:
            text, rows = _parse_code(body, where, first=start + 2)
            cells.append(Cell(kind, slide_type, tags, text, start + 1, rows))
    return cells


def one_language_problems(cells: list[Cell], lesson: str) -> tuple[list[str], list[str]]:
    """Errors (other-language text in a code cell's strings or comments, stale `# lang-ok` markers) and notes
    (run-time picks)."""
    errors, notes = [], []
    for index, cell in enumerate(cells):
        if cell.kind != "code":
            continue
        where = f"{lesson}, cell {index}"
        markers, used = set(), set()
        for language in LANGUAGES:
            code, rows = cell.text[language], cell.rows[language]
            problems, excused = one_language.foreign_text(code, language)
            errors += [f"{where} (line {rows[problem.row]}): {problem.message}" for problem in problems]
            used |= {rows[row] for row in excused}
            markers |= {rows[row] for row in one_language.marker_rows(code)}
            if language == "en":  # run-time picks are the same in both languages: note them once
                notes += [f"{where} (line {rows[n.row]}): {n.message}" for n in one_language.resolve(code, "en")[1]]
        errors += [f"{where} (line {line}): `{one_language.MARKER}` excuses nothing on this line: remove it"
                   for line in sorted(markers - used)]
    return errors, notes


# Characters between which a line break must not become a space: Chinese characters, CJK and full-width
# punctuation, and the curly quotes, dashes and ellipsis that Chinese text uses. Browsers other than Firefox render a
# newline between two of them as a space (Chromium shows "安装 可能"), so the Chinese notebooks join such lines.
_CJK = "\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef\u2018\u2019\u201c\u201d\u2014\u2026"
_CJK_END = re.compile(f"[{_CJK}](?:\\*\\*|\\*|__)?$")
_CJK_START = re.compile(f"^[ \\t]*(?:\\*\\*|\\*|__)?[{_CJK}]")
_FENCE = re.compile(r"^[ \t]*(```|~~~)")


def join_cjk_lines(markdown: str) -> str:
    """``markdown`` with every line break between two Chinese characters removed (the next line's indent too).

    Not joined: headings, a line that ends in a hard break (two spaces or a backslash), fenced code, table rows,
    list items and blank lines (paragraph breaks), since none of them is a soft break inside a paragraph; nor
    two emphasis marks that would run together ("**a**" + "**b**").
    """
    out: list[str] = []
    fenced = False
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
            out.append(line)
            continue
        prev = out[-1] if out else ""
        if (not fenced and out and _CJK_START.match(line) and _CJK_END.search(prev)
                and not prev.lstrip().startswith(("#", "|")) and not prev.endswith(("  ", "\\"))
                and not line.lstrip().startswith(("|", "* ", "- ", "+ "))
                and not (prev.endswith(("*", "_")) and line.lstrip().startswith(("*", "_")))):  # no "****"
            out[-1] = prev + line.lstrip()
        else:
            out.append(line)
    return "\n".join(out)


def cell_id(lesson: str, index: int) -> str:
    """Stable id of cell ``index`` of ``lesson``: rebuilding gives the same id, EN and ZH share it."""
    return hashlib.sha256(f"{lesson}/{index}".encode()).hexdigest()[:16]


def instructor_only(cell: Cell) -> bool:
    """Speaker notes and test probes: kept out of the student edition (they give answers away or get in the way)."""
    return cell.slide_type == "notes" or PROBE_TAG in cell.tags


def build_notebook(cells: list[Cell], lesson: str, language: str, edition: str = "student") -> dict:
    """The notebook of ``lesson`` in ``language`` as a validated nbformat 4.5 dict.

    ``edition="student"`` leaves out the :func:`instructor_only` cells; the other cells keep the ids they have in
    the instructor edition (ids come from the cell's place in the source).
    """
    if language not in LANGUAGES:
        raise ValueError(f"language={language!r} is not supported: use one of {LANGUAGES}")
    if edition not in EDITIONS:
        raise ValueError(f"edition={edition!r} is not supported: use one of {EDITIONS}")
    nb_cells = []
    first_code = next((index for index, cell in enumerate(cells) if cell.kind == "code"), None)
    for index, cell in enumerate(cells):
        if edition == "student" and instructor_only(cell):
            continue
        # "-" (continue the slide) is written as no slideshow metadata, nbformat's default: RISE and nbconvert read
        # both alike, but jupyterlab-slideshow (the live deck mode, docs/presenting.md) hides a cell marked "-".
        metadata: dict = {} if cell.slide_type == "-" else {"slideshow": {"slide_type": cell.slide_type}}
        if cell.tags:
            metadata["tags"] = list(cell.tags)
        nb_cell = {"cell_type": cell.kind, "id": cell_id(lesson, index), "metadata": metadata}
        nb_cell["source"] = cell.text[language]
        if cell.kind == "markdown" and language == "zh":
            nb_cell["source"] = join_cjk_lines(cell.text[language])
        if cell.kind == "code":  # one language per notebook: literal picks resolved, markers gone
            nb_cell["source"] = one_language.strip_markers(one_language.resolve(cell.text[language], language)[0])
            if index == first_code:  # says what to install when the course's package is missing (notebook_guard)
                nb_cell["source"] = add_guard(nb_cell["source"], language)
            nb_cell.update(execution_count=None, outputs=[])
        nb_cells.append(nb_cell)
    nb = {
        "cells": nb_cells,
        "metadata": {"kernelspec": KERNELSPEC, "language": language, "language_info": LANGUAGE_INFO, "rise": RISE},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    nbformat.validate(nbformat.from_dict(nb))
    return nb


def render(nb: dict) -> str:
    """Serialize like Jupyter does (sorted keys, indent 1, sources as line lists), plus a final newline."""
    nb = json.loads(json.dumps(nb))  # deep copy: do not modify the caller's notebook
    for cell in nb["cells"]:
        cell["source"] = cell["source"].splitlines(keepends=True)
    return json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def load_registry(path: Path = REGISTRY):
    """The lesson registry of this checkout, loaded from its file: the builder runs before the course's package is
    installed, and an installed ``course_lab`` may belong to another checkout."""
    name = "_course_registry"
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(path):
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the file runs
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


# `{{name}}` or `{{name:argument}}` in a markdown cell: text made from the registry (lesson 00's course map).
_PLACEHOLDER = re.compile(r"\{\{\s*([a-z_]+)(?::([a-z0-9_]+))?\s*\}\}")
PLACEHOLDERS = {
    "course_map": "the course-map table (number, title, one-liner of every lesson)",
    "lesson_count": "the number of lessons in words (fifteen / 十五)",
    "first": "the two-digit number of a part's first lesson, {{first:training}}",
    "last": "the two-digit number of a part's last lesson, {{last:training}}",
}


def expand_placeholders(text: str, language: str, where: str, registry=None) -> str:
    """Replace every ``{{placeholder}}`` of a markdown text with what the registry says (SourceFormatError when
    one is unknown)."""
    if "{{" not in text:
        return text
    registry = registry or load_registry()

    def one(match: re.Match) -> str:
        name, argument = match.group(1), match.group(2)
        if name not in PLACEHOLDERS or (argument is None) != (name in ("course_map", "lesson_count")):
            raise SourceFormatError(f"{where}: unknown placeholder {match.group(0)!r}; the builder knows "
                                    + "; ".join(f"{{{{{k}}}}}: {v}" for k, v in PLACEHOLDERS.items()))
        if name == "course_map":
            return registry.course_map_table(language)
        if name == "lesson_count":
            return registry.number_word(len(registry.LESSONS), language)
        try:
            lessons = registry.part_lessons(argument)
        except ValueError as error:
            raise SourceFormatError(f"{where}: {match.group(0)}: {error}") from None
        return f"{lessons[0 if name == 'first' else -1].number:02d}"

    return _PLACEHOLDER.sub(one, text)


def registry_problems(sources: list[Path], registry=None) -> list[str]:
    """A registered lesson exists exactly when its source exists: what differs between the two."""
    registry = registry or load_registry()
    registered = {lesson.slug for lesson in registry.LESSONS}
    present = {source.stem for source in sources}
    return ([f"notebooks/source/{slug}.md: no such source for the registered lesson {slug} "
             f"(write it, or remove its row from course_lab/registry.py)" for slug in sorted(registered - present)]
            + [f"notebooks/source/{stem}.md: not in the lesson registry; add its row to LESSONS in "
               f"course_lab/registry.py" for stem in sorted(present - registered)])


def readme_text(text: str, language: str, registry=None) -> str:
    """``text`` (a README) with the lesson table between README_BEGIN and README_END made from the registry."""
    registry = registry or load_registry()
    begin, end = text.find(README_BEGIN), text.find(README_END)
    if begin < 0 or end < begin:
        raise SourceFormatError(f"the README in {language} needs the lines {README_BEGIN!r} and {README_END!r} "
                                "around its lesson table")
    return (text[: begin + len(README_BEGIN)] + "\n" + registry.readme_table(language) + "\n" + text[end:])


def stale_readmes(registry=None) -> dict[Path, str]:
    """READMEs whose lesson table differs from the registry: ``{path: the text it should have}``."""
    stale = {}
    for language, path in READMES.items():
        text = path.read_text(encoding="utf-8")
        wanted = readme_text(text, language, registry)
        if wanted != text:
            stale[path] = wanted
    return stale


def lesson_sources(source_dir: Path) -> list[Path]:
    """The lesson sources in ``source_dir``, sorted; other markdown files must be README.md."""
    sources = []
    for path in sorted(source_dir.glob("*.md")):
        if path.name == "README.md":
            continue
        if not LESSON_NAME.match(path.stem):
            raise SourceFormatError(
                f"{path}: lesson sources are named NN_name.md (two digits, lowercase words joined by _); "
                f"rename it, e.g. 03_attention.md"
            )
        sources.append(path)
    return sources


def build_lesson(source: Path, notes: list[str] | None = None, edition: str = "student") -> dict[str, str]:
    """Rendered notebooks of one source, ``{"en": text, "zh": text}``; raises when the pair fails a check.

    Notes that are not errors (a ``pick(...)`` left to run time) are appended to ``notes`` when given.
    """
    lesson = source.stem
    cells = parse_source(source.read_text(encoding="utf-8"), lesson)
    # {{course_map}} and the other placeholders of markdown cells come from the registry.
    where = f"{lesson}, line"
    cells = [dataclasses.replace(cell, text={language: expand_placeholders(text, language, f"{where} {cell.line}")
                                             for language, text in cell.text.items()})
             if cell.kind == "markdown" else cell for cell in cells]
    errors, lesson_notes = one_language_problems(cells, lesson)
    if errors:
        raise SourceFormatError("\n".join(errors))
    if notes is not None:
        notes += lesson_notes
    notebooks = {language: build_notebook(cells, lesson, language, edition) for language in LANGUAGES}
    problems = check_pair(notebooks["en"], notebooks["zh"])
    if problems:
        raise SourceFormatError(f"{source.name}: " + "; ".join(problems))
    return {language: render(nb) for language, nb in notebooks.items()}


def build_all(source_dir: Path = SOURCE_DIR, notes: list[str] | None = None,
              edition: str = "student") -> dict[Path, str]:
    """Every notebook to write, as ``{Path("en/NN_name.ipynb"): text, ...}`` relative to the output folder.

    All sources are built before an error is raised, so that one run lists the problems of every lesson.
    """
    built, errors = {}, []
    sources = lesson_sources(source_dir)
    if source_dir.resolve() == SOURCE_DIR.resolve():  # the course itself: sources and registry agree
        errors += registry_problems(sources)
    for source in sources:
        try:
            for language, text in build_lesson(source, notes, edition).items():
                built[Path(language) / f"{source.stem}.ipynb"] = text
        except SourceFormatError as error:
            errors.append(str(error))
    if errors:
        raise SourceFormatError("\n".join(errors))
    return built


def find_problems(built: dict[Path, str], out_dir: Path) -> list[str]:
    """Notebooks under ``out_dir`` that differ from ``built``, are missing, or have no source."""
    problems = []
    for relative, text in built.items():
        path = out_dir / relative
        if not path.exists():
            problems.append(f"missing: {path}")
        elif path.read_bytes() != text.encode("utf-8"):
            problems.append(f"stale: {path}")
    for language in LANGUAGES:
        for path in sorted((out_dir / language).glob("*.ipynb")):
            if path.relative_to(out_dir) not in built:
                problems.append(f"orphan (no notebooks/source/{path.stem}.md): {path}")
    return problems


def write_all(built: dict[Path, str], out_dir: Path) -> int:
    """Write the notebooks that changed (unchanged files keep their timestamps); returns how many."""
    written = 0
    for relative, text in built.items():
        path = out_dir / relative
        data = text.encode("utf-8")
        if path.exists() and path.read_bytes() == data:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)  # bytes: no platform newline translation, so Windows builds are identical
        written += 1
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if any notebook is stale")
    parser.add_argument("--source-dir", type=Path, default=SOURCE_DIR, help="folder of NN_name.md sources")
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="folder that receives en/ and zh/ (default: notebooks/ for the student edition; "
                             "the instructor edition needs one, e.g. build/instructor)")
    parser.add_argument("--edition", choices=EDITIONS, default="student",
                        help="student: no speaker notes, no test probes (default); instructor: every cell")
    args = parser.parse_args(argv)
    if args.out_dir is None:
        if args.edition == "instructor":  # never overwrite the committed student notebooks with the notes
            parser.error("--edition instructor needs --out-dir, e.g. --out-dir build/instructor")
        args.out_dir = OUT_DIR
    notes: list[str] = []
    try:
        built = build_all(args.source_dir, notes, args.edition)
    except SourceFormatError as error:
        for line in str(error).splitlines():
            print(f"error: {line}", file=sys.stderr)
        return 2
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    # The READMEs' lesson tables belong to the course's own build (not to a folder of test sources).
    course = (args.source_dir.resolve() == SOURCE_DIR.resolve() and args.edition == "student"
              and args.out_dir.resolve() == OUT_DIR.resolve())
    try:
        readmes = stale_readmes() if course else {}
    except SourceFormatError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.check:
        problems = find_problems(built, args.out_dir)
        if course:
            problems += [f"stale lesson table (course_lab/registry.py changed): {path}" for path in readmes]
        for problem in problems:
            print(problem)
        if problems:
            print("run `make notebooks` (tools/build_notebooks.py) and commit the result", file=sys.stderr)
            return 1
        print(f"{len(built)} notebooks are up to date")
        return 0
    written = write_all(built, args.out_dir)
    print(f"wrote {written} of {len(built)} notebooks to {args.out_dir}")
    for path, text in readmes.items():
        path.write_bytes(text.encode("utf-8"))
        print(f"wrote the lesson table of {path.name}")
    for problem in find_problems(built, args.out_dir):  # only orphans can remain after writing
        print(f"warning: {problem}: delete it or add its source", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
