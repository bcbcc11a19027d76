"""Build the course website: every lesson, executed, in English and Chinese, with Sphinx + MyST-NB.

    python tools/build_site.py                      # what `make site` runs: build/site/{en,zh}/
    python tools/build_site.py --lessons 00 02      # a few lessons only (while developing)
    python tools/build_site.py --requirements       # the packages it needs (pyproject.toml's `site` extra)

The pages are made from the notebooks *with their outputs*. ``make test`` (nbval) leaves a copy of every notebook
it ran, with the outputs it received, in ``build/executed/{en,zh}/`` (notebooks/conftest.py), stamped with the
sha256 of the committed notebook: those copies are used as they are. Only a notebook without such a copy, or whose
copy is older than the committed notebook, is executed here (tools/export_slides.py's ``execute``: in its own
folder and language, a warning or a missing CJK glyph fails).

A lesson widget (``LessonWidget``) cannot work without a kernel, so no page shows its controls: the widget appears
as its figure at the default settings, captioned as a static figure whose controls work when the notebook runs
(as in the slide decks). Each language is its own Sphinx project (its own search index: Chinese is indexed with
jieba, English with its stemmer) in ``build/site/<lang>/``; every page has a bar with the same page in the other
language, the lesson's slide deck (``<lang>/slides/``, exported from the same executed notebook) and the notebook
to download. ``build/site/index.html`` lets the reader choose a language. Everything a page loads (MathJax 2 from
``slides/node_modules``, the theme's own files) is copied into the site: no CDN, it works offline and as it is on
GitHub Pages (``.nojekyll``).
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import hashlib
import html
import json
import multiprocessing
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import export_slides  # noqa: E402  (tools/ is not a package)

NOTEBOOKS = REPO / "notebooks"
EXECUTED = REPO / "build" / "executed"
DEFAULT_OUT = REPO / "build" / "site"
LANGS = ("en", "zh")
OTHER = {"en": "zh", "zh": "en"}
SPHINX_LANGUAGE = {"en": "en", "zh": "zh_CN"}
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
MATHJAX = "../slides/assets/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe"  # relative to _static/

TEXT = {
    "en": {"lang_name": "English", "switch": "中文", "slides": "Slide deck", "download": "Download the notebook",
           "map": "Course map", "glossary": "Glossary", "lesson": "Lesson", "covers": "What it covers",
           "intro": "Every lesson of the course, executed, with its figures and outputs. Run a lesson yourself: "
                    "download its notebook (or clone the repository) and open it in JupyterLab (`make lab`); "
                    "the widgets, shown here as static figures, then respond to their controls.",
           "static": "Static figure at default settings; the controls work when the notebook runs "
                     "(in JupyterLab).",
           "slides_col": "Slides", "deck_note": "student edition: no speaker notes; instructors build theirs with "
                                                  "`make slides`",
           "deck_title": "Slide deck (student edition, no speaker notes)", "back": "← Lesson page",
           "repo": "Repository", "colab": "Open in Colab",
           "run": "Run it: `git clone {url}`, then `make lab` in the folder (or `make test` to run every "
                  "lesson); on a cloud notebook, its first cell says what to install.",
           "run_norepo": "Run it: clone the course's repository, then `make lab` in its folder.",
           "glossary_intro": "The terms of the course, with the words the Chinese edition uses.",
           "search_done": None},
    "zh": {"lang_name": "简体中文", "switch": "English", "slides": "幻灯片", "download": "下载 notebook",
           "map": "课程地图", "glossary": "术语表", "lesson": "课", "covers": "内容",
           "intro": "课程的每一课都已运行，附带图表和输出。想亲手运行：下载这一课的 notebook（或克隆仓库），"
                    "在 JupyterLab 中打开（`make lab`）；这里以静态图显示的交互控件，运行 notebook 时才能调节。",
           "static": "静态图：默认设置；运行 notebook（在 JupyterLab 中）时控件才可以调节。",
           "slides_col": "幻灯片", "deck_note": "学生版：不含讲者备注；讲师请用 `make slides` 生成自己的版本",
           "deck_title": "幻灯片（学生版，不含讲者备注）", "back": "← 返回本课页面",
           "repo": "代码仓库", "colab": "在 Colab 中打开",
           "run": "亲手运行：`git clone {url}`，然后在该文件夹中运行 `make lab`（或用 `make test` 运行全部课程）；"
                  "在云端 notebook 中运行时，第一个单元格会说明需要安装什么。",
           "run_norepo": "亲手运行：克隆课程仓库，然后在其文件夹中运行 `make lab`。",
           "glossary_intro": "课程中的术语，以及中文版所用的译名。",
           "search_done": "搜索完成，共找到 ${resultCount} 个匹配的页面。"},
}

# English pages draw Latin text with Latin fonts first (a CJK font first draws curly quotes full-width:
# "PyTorch’ s"); Chinese pages put the CJK fonts first so that Chinese punctuation takes its Chinese form.
LATIN_FONTS = '"Source Sans Pro", "Helvetica Neue", Helvetica, Arial, "Liberation Sans", "DejaVu Sans"'
FONTS = {"en": f"{LATIN_FONTS}, {export_slides.CJK_FONTS}, sans-serif",
         "zh": f"{export_slides.CJK_FONTS}, {LATIN_FONTS}, sans-serif"}

CSS = """
:root {
  --pst-font-family-base: __SANS__;
  --pst-font-family-heading: __SANS__;
  --pst-font-family-monospace: __MONO__;
}
/* A display formula wider than the column scrolls instead of being cut off (the theme hides the overflow of
   .math and lets only MathJax 3's containers scroll; the site ships MathJax 2). */
div.math, .math .MathJax_Display, .cell_output .MathJax_Display { overflow-x: auto; overflow-y: hidden; }
div.math { max-width: 100%; }
/* Code and output blocks keep their lines and scroll sideways, on a phone too. */
div.highlight pre, .cell_output pre { overflow-x: auto; }
/* Output tables (pandas-free Markdown tables printed by the lessons) scroll rather than overflow. */
.cell_output table { display: block; overflow-x: auto; max-width: 100%; }
/* ☰ on a laptop: sphinx-book-theme toggles this class, which its pydata-sphinx-theme 0.20 has no rule for. */
@media (min-width: 992px) { .bd-sidebar-primary.pst-sidebar-hidden { display: none; } }
html[data-theme="dark"] nav.course-bar { background: #1e2430; border-color: #3a4456; }
nav.course-bar { display: flex; flex-wrap: wrap; gap: 0.4em 1.2em; padding: 0.4em 0.8em; margin-bottom: 1em;
  border: 1px solid #d0d7e2; border-radius: 6px; background: #f6f8fb; font-size: 0.95em; }
nav.course-bar a { text-decoration: none; }
figure.course-static-widget { margin: 0.5em 0; }
figure.course-static-widget img { max-width: 100%; height: auto; }
figure.course-static-widget figcaption { color: #5b6577; font-style: italic; }
nav.course-bar .course-run { flex-basis: 100%; color: #5b6577; font-size: 0.9em; }
table.course-map td:first-child { white-space: nowrap; }
"""


def css(lang: str) -> str:
    return CSS.replace("__SANS__", FONTS[lang]).replace("__MONO__", export_slides.MONO)

# The site's icon: the attention pattern of a causal mask, drawn in the course's blue.
FAVICON = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 4 4"><rect width="4" height="4" rx="0.6" '
           'fill="#f6f8fb"/><path d="M0.5 0.5h1v1h-1zM0.5 1.5h2v1h-2zM0.5 2.5h3v1h-3z" fill="#2f5d9f"/></svg>\n')

CONF = '''# Generated by tools/build_site.py: do not edit.
project = {project!r}
author = "Transformers from scratch"
language = {language!r}
extensions = ["myst_nb", "sphinx_copybutton"]
master_doc = "index"
exclude_patterns = ["_build"]
html_theme = "sphinx_book_theme"
html_title = {project!r}
html_static_path = ["_static"]
html_css_files = ["course.css"]
html_favicon = "_static/favicon.svg"  # without one, every browser asks the server for /favicon.ico (a 404)
html_copy_source = False
html_show_sourcelink = False
html_last_updated_fmt = None
# The theme's light/dark switch needs a default, or it logs "Got invalid theme mode" on the console.
html_context = {{"default_mode": "light"}}
html_theme_options = {{"use_download_button": False, "use_fullscreen_button": False,
                      "use_repository_button": False, "show_toc_level": 2}}
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
nb_execution_mode = "off"
nb_output_stderr = "show"
nb_merge_streams = True
# A widget never reaches a page (build_site.py replaced each one by its static figure); never render one.
nb_mime_priority_overrides = [("html", "{widget}", None)]
mathjax_path = {mathjax!r}
mathjax_options = {{"async": "async"}}
# MathJax 2 (the decks' offline copy) skips everything inside MyST-NB's "tex2jax_ignore mathjax_ignore" wrapper
# unless told to process Sphinx's .math elements: the same rule Sphinx gives MathJax 3 (processHtmlClass).
mathjax2_config = {{"tex2jax": {{"processClass": "math|output_area|tex2jax_process|mathjax_process",
                                "ignoreClass": "tex2jax_ignore|mathjax_ignore|document"}}}}
suppress_warnings = ["mystnb.unknown_mime_type", "myst.header"]
# Printed Markdown (the lessons' result tables) is rendered with MyST, which has tables; CommonMark has none.
nb_render_markdown_format = "myst"
# The copy button copies the code, not the prompts or the outputs; it ships with the site (offline).
copybutton_exclude = ".linenos, .gp, .go"
html_js_files = [("course.js", {{"defer": "defer"}})]
html_search_scorer = {scorer!r}
html_search_options = {search_options!r}
'''


def requirements() -> list[str]:
    """pyproject.toml's `site` extra: what this script needs beyond the course's own packages."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return list(data["project"]["optional-dependencies"]["site"])


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def executed_copy(path: Path) -> Path | None:
    """The copy that `make test` left of ``path`` (with outputs), if it ran the notebook as committed now."""
    import nbformat

    copy = EXECUTED / path.parent.name / path.name
    if not copy.is_file():
        return None
    try:
        stamp = nbformat.read(copy, as_version=4).metadata.get("course_executed", {})
    except Exception:
        return None
    return copy if stamp.get("source_sha256") == sha256(path) else None


def run_one(path: str, lang: str, timeout: int) -> str:
    """Execute one notebook (in a worker process) and keep it in build/executed, stamped; returns its path."""
    import nbformat

    source = Path(path)
    nb = export_slides.execute(source, lang, timeout)
    nb.metadata["course_executed"] = {"source_sha256": sha256(source), "by": "build_site"}
    target = EXECUTED / lang / source.name
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(target))
    return str(target)


def static_widgets(nb, lang: str, name: str) -> int:
    """Replace every widget output by the figure the widget showed at its default settings, captioned.

    Under nbval a LessonWidget's output area is not a widget but the cell's own outputs: the figure it drew when
    it was built (its defaults) comes right before the widget's view. Returns the number replaced; a widget with
    no figure before it fails (a page must never show a control that does nothing)."""
    replaced = 0
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        outputs = []
        for out in cell.get("outputs", []):
            if WIDGET_MIME not in out.get("data", {}):
                outputs.append(out)
                continue
            figure = next((o for o in reversed(outputs) if "image/png" in o.get("data", {})), None)
            if figure is None:
                raise SystemExit(f"build_site: {lang}/{name}: cell {index} shows a widget with no figure drawn "
                                 "before it: a page cannot show it honestly")
            outputs.remove(figure)
            png = figure["data"]["image/png"]
            png = png if isinstance(png, str) else base64.b64encode(png).decode("ascii")
            caption = html.escape(TEXT[lang]["static"])
            outputs.append({"output_type": "display_data", "metadata": {}, "data": {
                "text/html": f'<figure class="course-static-widget"><img src="data:image/png;base64,'
                             f'{png.strip()}" alt="{caption}"><figcaption>{caption}</figcaption></figure>',
                "text/plain": TEXT[lang]["static"]}})
            replaced += 1
        cell.outputs = [_node(o) for o in outputs]
    return replaced


def _node(out):
    import nbformat

    return nbformat.from_dict(out) if isinstance(out, dict) and not hasattr(out, "output_type") else out


def quiet_stderr(nb) -> None:
    """Progress bars and other chatter on stderr leave the page; a warning or a traceback stays."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.get("outputs", []) if not (
                o.get("output_type") == "stream" and o.get("name") == "stderr"
                and not export_slides.WARNING_RE.search(o.get("text", "")))]


def repository_url() -> str | None:
    """The repository's web address, for the links and the clone command on every page: ``COURSE_REPO_URL``, else
    the one GitHub Actions gives the build (``GITHUB_SERVER_URL``/``GITHUB_REPOSITORY``: the Pages workflow), else
    pyproject.toml's ``[project.urls] Repository``, else the clone's ``origin`` when it is a web address (an SSH
    address is turned into its https form). None when none is known: the pages then say how to run a lesson
    without a link, and the build says so."""
    import os

    url = os.environ.get("COURSE_REPO_URL", "").strip()
    if not url and os.environ.get("GITHUB_REPOSITORY"):
        url = f"{os.environ.get('GITHUB_SERVER_URL', 'https://github.com')}/{os.environ['GITHUB_REPOSITORY']}"
    if not url:
        try:
            import tomllib
        except ImportError:  # Python 3.10
            import tomli as tomllib
        urls = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"].get("urls", {})
        url = urls.get("Repository", "")
    if not web_address(url):
        found = subprocess.run(["git", "remote", "get-url", "origin"], cwd=REPO, capture_output=True, text=True)
        url = found.stdout.strip() if found.returncode == 0 else ""
    return web_address(url)


def web_address(url: str) -> str | None:
    """``url`` as a repository's web page (an SSH address in its https form, no ``.git``); None for a local path."""
    ssh = re.fullmatch(r"git@([^:]+):(.+)", url.strip())
    url = re.sub(r"\.git$", "", (f"https://{ssh[1]}/{ssh[2]}" if ssh else url.strip()).rstrip("/"))
    return url if re.match(r"https?://[^/\s]+/\S+$", url) else None


def colab_url(repo: str | None, lang: str, stem: str) -> str | None:
    """Colab opens a notebook straight from GitHub; its first cell (tools/notebook_guard.py) installs the course."""
    found = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+)", repo or "")
    return (f"https://colab.research.google.com/github/{found[1]}/{found[2]}/blob/main/notebooks/{lang}/{stem}.ipynb"
            if found else None)


def bar(lang: str, page: str, lesson: bool, repo: str | None = None) -> str:
    """The bar on top of every page: the same page in the other language, the deck, the notebook, the repository
    and how to run the lesson."""
    t, other = TEXT[lang], OTHER[lang]
    links = [f'<a class="course-lang-switch" href="../{other}/{page}.html" hreflang="{other}" lang="{other}">'
             f"{TEXT[other]['lang_name']}</a>"]
    if lesson:
        links.append(f'<a class="course-slides" href="slides/{page}.html" title="{html.escape(t["deck_note"])}">'
                     f'{t["slides"]}</a>')
        links.append(f'<a class="course-download" href="notebooks/{page}.ipynb" download>{t["download"]}</a>')
        colab = colab_url(repo, lang, page)
        if colab:
            links.append(f'<a class="course-colab" href="{colab}">{t["colab"]}</a>')
    links.append(f'<a class="course-map" href="index.html">{t["map"]}</a>')
    links.append(f'<a class="course-glossary" href="glossary.html">{t["glossary"]}</a>')
    if repo:
        links.append(f'<a class="course-repo" href="{html.escape(repo)}">{t["repo"]}</a>')
    run = t["run"].format(url=repo) if repo else t["run_norepo"]
    run = "".join(f"<code>{html.escape(part)}</code>" if i % 2 else html.escape(part, quote=False)
                  for i, part in enumerate(run.split("`")))
    links.append(f'<span class="course-run">{run}</span>')
    return '<nav class="course-bar">' + " ".join(links) + "</nav>"


NOT_ATTEMPTED = ("⏳ Not attempted yet", "⏳ 还没有作答")
CJK_END = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]$")
FULLWIDTH_END = re.compile(r"[\u3000-\u303f\uff00-\uffef]$")  # 。，、：；！？）」 …: their own spacing
CJK_START = re.compile(r"^[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
BLOCK_START = re.compile(r"^\s*([-*+>|#]|\d+[.)]\s|\$\$|```|~~~|<|:::|\\\[)")


def join_cjk_lines(text: str) -> str:
    """Chinese prose written over several lines: a line break after a Chinese character or full-width punctuation
    (or before one) is shown by the browser as a space ("加权平均。 PyTorch"). Join such lines of a paragraph;
    lists, tables, headings, maths, code and HTML keep their lines."""
    lines, out, fence = text.split("\n"), [], ""
    for line in lines:
        stripped = line.strip()
        if fence:  # inside code or display maths: lines stay as they are until the block closes
            closed = stripped.startswith(fence) if fence != "$$" else "$$" in stripped
            fence = "" if closed else fence
            out.append(line)
            continue
        if stripped.startswith(("```", "~~~")) or (stripped.startswith("$$") and stripped.count("$$") == 1):
            fence = stripped[:3] if not stripped.startswith("$$") else "$$"
            out.append(line)
            continue
        prev = out[-1] if out else ""
        joinable = (out and not fence and prev.strip() and line.strip() and not BLOCK_START.match(line)
                    and not prev.lstrip().startswith(("#", "|", "```", "~~~", "$$"))
                    and (FULLWIDTH_END.search(prev.rstrip())
                         or (CJK_END.search(prev.rstrip()) and CJK_START.search(line.lstrip()))))
        if joinable:
            out[-1] = prev.rstrip() + line.lstrip()
        else:
            out.append(line)
    return "\n".join(out)


def site_notebook(nb, lang: str) -> None:
    """What only the page needs: the setup cell (the install guard and the imports) folded away, exercise checks
    that have not been attempted folded away (their output is for the student who runs the notebook), and Chinese
    paragraphs joined (see join_cjk_lines)."""
    codes = [c for c in nb.cells if c.cell_type == "code"]
    if codes:
        tags = codes[0].metadata.setdefault("tags", [])
        tags.append("hide-input") if "hide-input" not in tags else None
    for cell in codes:
        text = "".join(str(o.get("text", "")) for o in cell.get("outputs", []) if o.get("output_type") == "stream")
        if any(marker in text for marker in NOT_ATTEMPTED):
            tags = cell.metadata.setdefault("tags", [])
            tags.append("hide-output") if "hide-output" not in tags else None
    if lang == "zh":
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = join_cjk_lines(cell.source)


def student_glossary(lang: str) -> str:
    """The glossary page: the term table only, in the page's language first (no editing rules, no rejected column,
    which are for the course's authors: docs/glossary.md)."""
    text = (REPO / "docs" / "glossary.md").read_text(encoding="utf-8")
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines()
            if line.startswith("|")]
    body = [r for r in rows[2:] if len(r) >= 3]
    title = {"en": "Glossary", "zh": "术语表"}[lang]
    head = {"en": "| English | 简体中文 | note |", "zh": "| 简体中文 | English | 说明 |"}[lang]
    table = [head, "|---|---|---|"]
    for en, zh, note, *_ in body:
        table.append(f"| {en} | {zh} | {note} |" if lang == "en" else f"| {zh} | {en} | {note} |")
    return f"# {title}\n\n{{bar}}\n\n{TEXT[lang]['glossary_intro']}\n\n" + "\n".join(table) + "\n"


def glossary_terms() -> list[tuple[str, str]]:
    """(English, Chinese) per row of docs/glossary.md's table; a Chinese cell may hold alternatives ("A / B")."""
    text = (REPO / "docs" / "glossary.md").read_text(encoding="utf-8")
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines()
            if line.startswith("|")]
    return [(r[0], r[1]) for r in rows[2:] if len(r) >= 2 and r[0] and r[1]]


SEARCHABLE = {"en": re.compile(r"[a-z][a-z0-9]*(?:[ -][a-z0-9]+)*"), "zh": re.compile(r"[\u4e00-\u9fff]{2,}")}


def teaching_lessons(lang: str, pages: dict[str, tuple[object, str]]) -> dict[str, str]:
    """Which lesson teaches each glossary term, in ``lang``: the first lesson whose title holds the term, else the
    first lesson that writes it in bold (where the course introduces a term). Terms no lesson teaches are left out,
    and so are one-character Chinese terms, which Sphinx's Chinese index never holds.
    The search ranks that lesson first (course_js's Scorer); tests/browser/test_site.py checks every term."""
    taught = {}
    for en, zh in glossary_terms():
        # What a search box can take as one word: Sphinx's Chinese index leaves out one-character words (键, 值, 层);
        # symbols (√d_k, <pad>, W^O) are split away by both languages' indexers.
        candidates = [en.lower()] if lang == "en" else [t.strip() for t in zh.split("/")]
        for term in (t for t in candidates if SEARCHABLE[lang].fullmatch(t)):
            title_hit = next((stem for stem, (_, title) in pages.items() if term in title.lower()), None)
            bold_hit = next((stem for stem, (nb, _) in pages.items() if any(
                re.search(r"\*\*[^*\n]*" + re.escape(term) + r"[^*\n]*\*\*", c.source, re.I)
                for c in nb.cells if c.cell_type == "markdown")), None)
            if title_hit or bold_hit:
                taught[term] = title_hit or bold_hit
    return taught


def search_setup(lang: str, pages: dict[str, tuple[object, str]], src: Path) -> dict[str, object]:
    """The search: Chinese is split into words by jieba, which does not know the course's terms (交叉熵 would be
    indexed as 交叉 + 熵 and never found): the glossary's Chinese column becomes jieba's user dictionary. The
    scorer puts the lesson that teaches a term first when the query is that term."""
    options = {}
    if lang == "zh":
        words = sorted({t.strip() for _, zh in glossary_terms() for t in zh.split("/")
                        if re.search(r"[\u4e00-\u9fff]", t)})
        (src / "jieba_course_terms.txt").write_text("".join(f"{w} 100000 n\n" for w in words if " " not in w),
                                                    encoding="utf-8")
        options = {"dict": str(src / "jieba_course_terms.txt")}
    taught = teaching_lessons(lang, pages)
    (src / "course_scorer.js").write_text(SCORER.replace("__TAUGHT__", json.dumps(taught, ensure_ascii=False)),
                                          encoding="utf-8")
    (src / "_static" / "taught_terms.json").write_text(json.dumps(taught, ensure_ascii=False, indent=0),
                                                       encoding="utf-8")
    return {"scorer": str(src / "course_scorer.js"), "search_options": options}


SCORER = """// Generated by tools/build_site.py: Sphinx's default scores; the lesson that teaches the term first.
var Scorer = {
  objNameMatch: 11, objPartialMatch: 6, objPrio: {0: 15, 1: 5, 2: -5}, objPrioDefault: 0,
  title: 15, partialTitle: 7, term: 5, partialTerm: 2,
  taught: __TAUGHT__,
  score: function (result) {
    const query = (new URLSearchParams(window.location.search).get("q") || "").trim().toLowerCase();
    const lesson = Scorer.taught[query];
    return lesson && result[0] === lesson ? result[4] + 1000 : result[4];
  },
};
"""


def course_js(lang: str) -> str:
    """The site's own script (deferred, so it runs before the theme's handlers are bound on DOMContentLoaded).

    * The theme pair (sphinx-book-theme 1.4, pydata-sphinx-theme 0.20) puts a second, hidden set of sidebar toggles
      in ``#pst-header``; the theme binds its click handler to the first ``.primary-toggle`` it finds, the hidden
      one, so on a phone neither drawer opens and on a laptop ☰ does nothing (pydata-sphinx-theme #2451). Remove
      the hidden duplicates before the theme looks for them.
    * Sphinx's Chinese catalogue lacks the current wording of the search summary: give it its Chinese line.
      (``Documentation`` is a top-level ``const`` of doctools.js: a global binding, but not a ``window`` property.)
    """
    done = TEXT[lang]["search_done"]
    translate = ("" if done is None else
                 "  if (typeof Documentation !== 'undefined' && Documentation.TRANSLATIONS) {\n"
                 "    Documentation.TRANSLATIONS['Search finished, found one page matching the search query.'] = "
                 f"[{json.dumps(done, ensure_ascii=False)}];\n  }}\n")
    return ("// Generated by tools/build_site.py.\n(function () {\n"
            "  document.querySelectorAll('#pst-header .primary-toggle, #pst-header .secondary-toggle')"
            ".forEach(function (el) { el.remove(); });\n" + translate + "})();\n")


def course_map(lang: str) -> list[tuple[str, str]]:
    """(number, one line) per lesson, from the lesson registry (course_lab/registry.py), as lesson 00's map."""
    import build_notebooks

    return [(f"{lesson.number:02d}", lesson.summary[lang]) for lesson in build_notebooks.load_registry().LESSONS]


def prepare_project(lang: str, src: Path, pages: dict[str, tuple[object, str]], out_lang: Path,
                    repo: str | None = None) -> None:
    """Write the Sphinx project of one language: conf.py, index (course map), glossary, the lessons."""
    import nbformat

    t = TEXT[lang]
    if src.exists():
        shutil.rmtree(src)
    (src / "_static").mkdir(parents=True)
    (src / "_static" / "course.css").write_text(css(lang), encoding="utf-8")
    (src / "_static" / "favicon.svg").write_text(FAVICON, encoding="utf-8")
    title = export_slides.COURSE_NAME[lang]
    search = search_setup(lang, pages, src)
    (src / "conf.py").write_text(CONF.format(project=title, language=SPHINX_LANGUAGE[lang], widget=WIDGET_MIME,
                                             mathjax=MATHJAX, **search), encoding="utf-8")
    (src / "_static" / "course.js").write_text(course_js(lang), encoding="utf-8")
    lines = {number: text for number, text in course_map(lang)}
    # The lesson's title links its page once; the number column is the lesson's number only.
    rows = [f"| {t['lesson']} | {t['covers']} | {t['slides_col']} |", "|---|---|---|"]
    for stem, (_, lesson_title) in pages.items():
        deck = f'<a class="course-deck" href="slides/{stem}.html" title="{html.escape(t["deck_note"])}">' \
               f'{t["slides_col"]}</a>'
        rows.append(f"| {stem[:2]} | [{lesson_title}]({stem}.ipynb): {lines.get(stem[:2], '')} | {deck} |")
    toctree = "\n".join(["```{toctree}", ":hidden:", ":maxdepth: 1", "", *pages, "glossary", "```"])
    (src / "index.md").write_text(
        f"# {title}\n\n{bar(lang, 'index', False, repo)}\n\n{t['intro']}\n\n## {t['map']}\n\n"
        + "\n".join(rows) + f"\n\n{t['slides_col']}: {t['deck_note']}.\n\n[{t['glossary']}](glossary.md)\n\n"
        + f"{toctree}\n", encoding="utf-8")
    (src / "glossary.md").write_text(student_glossary(lang).replace("{bar}", bar(lang, "glossary", False, repo)),
                                     encoding="utf-8")
    for stem, (nb, _) in pages.items():
        site_notebook(nb, lang)
        nb.cells.insert(0, nbformat.v4.new_markdown_cell(bar(lang, stem, True, repo)))
        # The bar goes under the lesson's title: split the first markdown cell after its heading.
        first = next((c for c in nb.cells[1:] if c.cell_type == "markdown"), None)
        if first is not None and first.source.lstrip().startswith("# "):
            heading, _, body = first.source.lstrip().partition("\n")
            first.source = body
            nb.cells.insert(0, nbformat.v4.new_markdown_cell(heading))
        nbformat.write(nb, str(src / f"{stem}.ipynb"))
        (out_lang / "notebooks").mkdir(parents=True, exist_ok=True)
        download = (NOTEBOOKS / lang / f"{stem}.ipynb").read_text(encoding="utf-8")
        if repo:  # the downloaded notebook's install guard names the real repository
            download = download.replace("<repository URL>", repo).replace("<仓库地址>", repo)
        (out_lang / "notebooks" / f"{stem}.ipynb").write_text(download, encoding="utf-8")


def export_decks(lang: str, pages: dict[str, tuple[object, str]], out_lang: Path) -> None:
    """The lesson's slide deck, from the same executed notebook: out/<lang>/slides/NN_name.html (+ assets)."""
    import copy

    export_slides.copy_assets(out_lang / "slides" / "assets")
    for stem, (nb, title) in pages.items():
        deck = copy.deepcopy(nb)
        deck.metadata["title"] = title
        body, _ = export_slides.build_exporter(lang, title).from_notebook_node(
            deck, resources={"metadata": {"name": stem}})
        body = export_slides.notes_maths(body, f"{lang}/{stem}")
        (out_lang / "slides" / f"{stem}.html").write_text(deck_links(body, lang, stem), encoding="utf-8")


def deck_links(body: str, lang: str, stem: str) -> str:
    """A deck on the site: the site's icon (no request for /favicon.ico), a link back to its lesson page, and what
    edition it is (the student edition: no speaker notes)."""
    t = TEXT[lang]
    icon = '<link rel="icon" href="../../favicon.svg" type="image/svg+xml">'
    back = (f'<a class="course-deck-back" href="../{stem}.html" title="{html.escape(t["deck_title"])}" '
            'style="position:fixed;top:6px;left:10px;z-index:40;font-size:18px;color:#2f5d9f;'
            f'text-decoration:none;background:rgba(255,255,255,.85);padding:2px 8px;border-radius:4px">'
            f'{html.escape(t["back"])}</a>')
    body = body.replace("</head>", f"{icon}\n</head>", 1)
    return re.sub(r"(<body[^>]*>)", lambda m: m[1] + back, body, count=1)


def write_root(out: Path, langs: list[str]) -> None:
    links = "\n".join(f'<li><a href="{lang}/index.html" lang="{lang}">{export_slides.COURSE_NAME[lang]} · '
                      f"{TEXT[lang]['lang_name']}</a></li>" for lang in langs)
    (out / "index.html").write_text(
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="favicon.svg" type="image/svg+xml">'
        f"<title>{export_slides.COURSE_NAME['en']} · {export_slides.COURSE_NAME['zh']}</title>"
        f"<style>body{{font-family:{export_slides.SANS};margin:3em auto;max-width:40em;padding:0 1em;"
        "font-size:20px;line-height:1.5}</style>"
        f"</head>\n<body>\n<h1>{export_slides.COURSE_NAME['en']} · {export_slides.COURSE_NAME['zh']}</h1>\n"
        f"<ul>\n{links}\n</ul>\n</body></html>\n", encoding="utf-8")
    (out / ".nojekyll").write_text("", encoding="utf-8")
    (out / "favicon.svg").write_text(FAVICON, encoding="utf-8")


def share_base_jupyter() -> None:
    """In build/site-env (a virtual environment that sees the course Python's packages: tools/child_env.py),
    Jupyter looks for nbconvert's templates under the environment only: add the course Python's share/jupyter too
    (that Python's prefix, recorded by child_env; a venv's, not its base's)."""
    import os

    record = Path(sys.prefix) / "course-parent.json"
    parent = Path(json.loads(record.read_text(encoding="utf-8"))["prefix"]) if record.is_file() else None
    base = (parent or Path(sys.base_prefix)) / "share" / "jupyter"
    if sys.prefix != str(parent or sys.base_prefix) and base.is_dir():
        paths = [p for p in os.environ.get("JUPYTER_PATH", "").split(os.pathsep) if p]
        if str(base) not in paths:
            os.environ["JUPYTER_PATH"] = os.pathsep.join([*paths, str(base)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lessons", nargs="+", metavar="NN", help="lesson numbers or names (default: all)")
    parser.add_argument("--langs", nargs="+", choices=LANGS, default=list(LANGS))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: build/site)")
    parser.add_argument("--jobs", "-j", type=int, default=1, help="notebooks executed in parallel (default: 1)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds one cell may run (default: 900)")
    parser.add_argument("--requirements", action="store_true", help="print the packages needed, one a line")
    args = parser.parse_args(argv)
    if args.requirements:
        print("\n".join(requirements()))
        return 0

    import nbformat

    share_base_jupyter()
    start = time.perf_counter()
    repo = repository_url()
    if repo is None:
        print("build_site: no repository address known (set COURSE_REPO_URL, or [project.urls] Repository in "
              "pyproject.toml): the pages say how to run a lesson without a link to it", flush=True)
    out = args.out.resolve()
    # The student edition, as nbval ran it: a reader of the site sees what a student sees (no speaker notes).
    todo = [(p, lang) for lang in args.langs for p in export_slides.lessons(lang, args.lessons, NOTEBOOKS)]
    if not todo:
        raise SystemExit("build_site: no lesson notebooks found under notebooks/")
    stale = [(p, lang) for p, lang in todo if executed_copy(p) is None]
    print(f"{len(todo) - len(stale)}/{len(todo)} notebooks already executed by `make test` (build/executed); "
          f"executing {len(stale)}", flush=True)
    if stale:
        pool = concurrent.futures.ProcessPoolExecutor(max_workers=max(1, args.jobs), max_tasks_per_child=1,
                                                      mp_context=multiprocessing.get_context("spawn"))
        failures = []
        with pool:
            futures = {pool.submit(run_one, str(p), lang, args.timeout): (p, lang) for p, lang in stale}
            for future in concurrent.futures.as_completed(futures):
                p, lang = futures[future]
                try:
                    future.result()
                    print(f"executed {lang}/{p.name}", flush=True)
                except Exception as err:
                    failures.append(f"{lang}/{p.name}: {type(err).__name__}: {str(err)[:2000]}")
        if failures:
            print("build_site: failed to execute:\n  " + "\n  ".join(failures), file=sys.stderr)
            return 1
    t_exec = time.perf_counter() - start

    out.mkdir(parents=True, exist_ok=True)
    for lang in args.langs:
        t0 = time.perf_counter()
        pages = {}
        widgets = 0
        for p, lang_ in todo:
            if lang_ != lang:
                continue
            nb = nbformat.read(EXECUTED / lang / p.name, as_version=4)
            widgets += static_widgets(nb, lang, p.stem)
            quiet_stderr(nb)
            pages[p.stem] = (nb, export_slides._title(nb, p))
        out_lang = out / lang
        src = REPO / "build" / "site-src" / lang
        export_decks(lang, pages, out_lang)
        prepare_project(lang, src, pages, out_lang, repo)
        t1 = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-d",
                                 str(REPO / "build" / "site-doctrees" / lang), str(src), str(out_lang)],
                                cwd=REPO)
        # MyST-NB writes the output images next to the output folder too (<out>/jupyter_execute): not part of it.
        shutil.rmtree(out / "jupyter_execute", ignore_errors=True)
        if result.returncode != 0:
            print(f"build_site: sphinx-build failed for {lang}", file=sys.stderr)
            return result.returncode
        print(f"{lang}: {len(pages)} lessons, {widgets} widgets as static figures; decks and notebooks in "
              f"{t1 - t0:.1f} s, sphinx in {time.perf_counter() - t1:.1f} s", flush=True)
    write_root(out, args.langs)
    total = time.perf_counter() - start
    (out / "build_times.json").write_text(json.dumps({"executed": len(stale), "reused": len(todo) - len(stale),
                                                      "execute_s": round(t_exec, 1), "total_s": round(total, 1)})
                                          + "\n", encoding="utf-8")
    print(f"site: {len(todo)} pages in {total:.1f} s ({len(stale)} notebooks executed): {out}/index.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
