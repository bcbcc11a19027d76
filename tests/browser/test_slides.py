"""The exported reveal.js decks (tools/export_slides.py), opened in a real browser with the internet cut off.

Every lesson is exported in both languages *without* execution (structure, maths, Chinese text) and opened from
disk (``file://``); one lesson with a slider widget is exported *with* execution in both languages and opened
through a local web server, to prove that figures and the saved widget state render offline. For every deck:
every request that leaves the machine is aborted and recorded (there must be none), no local file may be missing,
reveal.js must start with the expected number of slides, fragments and speaker notes, MathJax must have typeset
every formula, and in Chinese decks the Chinese characters must be drawn with real glyphs from a CJK font. One
screenshot per deck goes to ``build/slides/screenshots/`` (plus ``report.txt``: export times, sizes per deck).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import export_slides  # noqa: E402  (tools/ is not a package)
import slide_report  # noqa: E402
from conftest import GLYPHS  # noqa: E402  (tests/browser/conftest.py: shared with the website's test)

SCREENSHOTS = REPO / "build" / "slides" / "screenshots"
LANGS = ("en", "zh")
# Exported *with* execution (EN and ZH): a lesson whose LessonWidget has sliders and draws a figure.
EXECUTED_LESSON = "02_positional_encoding"

export_slides.build_instructor_edition()  # the decks come from it: build/instructor/{en,zh}, with the notes
DECKS = [(lang, path.stem) for lang in LANGS for path in export_slides.lessons(lang)]

pytestmark = pytest.mark.slow


def _deck_id(deck):
    return f"{deck[0]}-{deck[1]}"


# --- exporting (once per session) ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def exported(tmp_path_factory, playwright_api, require):
    """Export all decks without execution, and EXECUTED_LESSON with it; returns their folders and the times."""
    if not (export_slides.NODE_MODULES / "reveal.js" / "package.json").is_file():
        require("the slide decks' npm packages are not installed (slides/node_modules)")
    out = tmp_path_factory.mktemp("slides")
    times = {}

    def export(name, *args):
        start = time.perf_counter()
        result = subprocess.run([sys.executable, str(REPO / "tools" / "export_slides.py"), "--out",
                                 str(out / name), *args], cwd=REPO, capture_output=True, text=True, timeout=600)
        times[name] = time.perf_counter() - start
        assert result.returncode == 0, f"export_slides {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
        return out / name

    plain = export("plain", "--no-execute")
    executed = export("executed", "--execute", "--lessons", EXECUTED_LESSON, "--jobs", "2")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    report = SCREENSHOTS / "report.txt"
    report.write_text(f"export without execution, {len(DECKS)} decks: {times['plain']:.1f} s\n"
                      f"export with execution, {EXECUTED_LESSON} EN+ZH: {times['executed']:.1f} s\n"
                      "every slide at 1280x720 (tools/slide_report.py): body >= 24 px, code >= 18 px, "
                      "no scrolling, a heading, no dead control, one print page per slide:\n",
                      encoding="utf-8")
    measured = {}
    yield {"plain": plain, "executed": executed, "times": times, "report": report, "measured": measured}
    if measured:  # the figures of every deck measured in this session close the report
        with report.open("a", encoding="utf-8") as f:
            f.write(slide_report.totals(measured) + "\n")


# --- what the notebook says the deck must contain --------------------------------------------------------------

CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)
MATH = re.compile(r"\$\$.+?\$\$|\$[^$\s][^$\n]*\$", re.S)


def expected_structure(lang: str, stem: str) -> dict:
    nb = nbformat.read(export_slides.NOTEBOOKS / lang / f"{stem}.ipynb", as_version=4)  # the instructor edition
    checks = sum(cell.cell_type == "code" and export_slides._is_check(cell.source) for cell in nb.cells)
    nb, _ = export_slides.curate(nb, {})  # what the exporter shows: check cells off the slides
    types = [cell.metadata.get("slideshow", {}).get("slide_type", "-") for cell in nb.cells]
    first_visible = next(i for i, t in enumerate(types) if t not in ("skip", "notes"))
    types[first_visible] = "slide"
    return {
        "slides": sum(t in ("slide", "subslide") for t in types),
        "fragments": types.count("fragment"),
        "notes": types.count("notes"),
        "checks": checks,
        "math": any(MATH.search(CODE.sub("", cell.source)) for cell in nb.cells if cell.cell_type == "markdown"),
    }


# --- in the page ------------------------------------------------------------------------------------------------

WAIT_FOR_MATHJAX = """() => new Promise(done => {
  if (window.MathJax && MathJax.Hub && MathJax.Hub.Queue) { MathJax.Hub.Queue(() => done(true)); }
  else { done(false); }
})"""

INSPECT = """() => {
  const q = s => document.querySelectorAll(s).length;
  const broken = [...document.querySelectorAll('.reveal img')]
      .filter(img => img.complete && img.naturalWidth === 0).map(img => (img.src || '').slice(0, 80));
  return {
    ready: Reveal.isReady(),
    total: Reveal.getTotalSlides(),
    horizontal: Reveal.getHorizontalSlides().length,
    fragments: q('.reveal .slides .fragment'),
    notes: q('.reveal .slides aside.notes'),
    notesPlugin: Reveal.hasPlugin('notes'),
    mathSources: q('script[type^="math/tex"]'),
    mathRendered: q('.MathJax_CHTML'),
    mathErrors: q('.mjx-merror, .MathJax_Error'),
    images: q('.reveal img'),
    broken: broken,
    lang: document.documentElement.lang,
  };
}"""

MARK_CHINESE = """() => {
  // The first element on the current slide whose own text has Chinese characters: mark it for the checks.
  const slide = Reveal.getCurrentSlide();
  for (const el of slide.querySelectorAll('h1, h2, h3, p, li')) {
    const own = [...el.childNodes].filter(n => n.nodeType === 3).map(n => n.textContent).join('');
    if ((own.match(/[\\u4e00-\\u9fff]/g) || []).length >= 2) { el.setAttribute('data-cjk-probe', ''); return true; }
  }
  return false;
}"""

CJK_FAMILIES = {name.strip().strip('"').lower() for name in export_slides.CJK_FONTS.split(",")}


def open_deck(page, url: str) -> None:
    page.goto(url, wait_until="load")
    page.wait_for_function("window.Reveal && Reveal.isReady && Reveal.isReady()", timeout=60_000)
    page.evaluate(WAIT_FOR_MATHJAX)


def cjk_problems(page) -> list[str]:
    """Why the Chinese on the current slide is not drawn properly (empty list: it is)."""
    if not page.evaluate(MARK_CHINESE):
        return ["no element with Chinese text on the first slide"]
    selector = "[data-cjk-probe]"
    glyphs = page.evaluate(GLYPHS, selector)
    problems = []
    if len(glyphs["chars"]) < 2:
        problems.append(f"too few Chinese characters to compare: {glyphs['chars']!r}")
    elif glyphs["distinct"] < len(glyphs["chars"]) or glyphs["empty"]:
        problems.append(f"{glyphs['chars']!r} drawn as identical or empty boxes (missing glyphs) with font-family "
                        f"{glyphs['family']}")
    # Which font really drew the text (Chromium's own report, as in DevTools' "Rendered Fonts").
    cdp = page.context.new_cdp_session(page)
    try:
        cdp.send("DOM.enable")
        cdp.send("CSS.enable")
        root = cdp.send("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
        node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
        fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    finally:
        cdp.detach()
    used = {f["familyName"].lower(): f["glyphCount"] for f in fonts}
    if not any(name in CJK_FAMILIES or "cjk" in name for name in used):
        problems.append(f"no Chinese font of the deck's font stack drew the text; fonts used: {used}")
    return problems


def room_report(page, url: str, name: str, exported: dict) -> dict:
    """Measure every slide at 1280×720 (tools/slide_report.py) in ``page``, which shows the deck at ``url``; append
    the deck's line to report.txt. The page is left on the deck's print view."""
    report = exported["report"]
    measured = slide_report.measure_deck(page, url, opened=True)
    pages, count = slide_report.print_pages(page, url)
    if pages != count:
        measured["problems"].append(f"?print-pdf gives {pages} pages for {count} slides")
    with report.open("a", encoding="utf-8") as f:
        f.write("\n".join([slide_report.summary_line(name, measured), *(f"  {p}" for p in measured["problems"])])
                + "\n")
    exported["measured"][name] = measured
    return measured


def check_deck(page, network, errors, lang, stem, *, executed=False):
    info = page.evaluate(INSPECT)
    want = expected_structure(lang, stem)
    assert network.blocked == [], f"the deck tried to reach the internet: {network.blocked}"
    assert network.failed == [], f"local files missing or failing: {network.failed}"
    assert errors == [], f"JavaScript errors: {errors}"
    assert info["ready"] and info["total"] > 5, info
    assert info["lang"] == lang
    split = page.evaluate("document.querySelectorAll('.slides section[data-course-split]').length")
    assert info["total"] == want["slides"] + split, \
        f"{info['total']} slides: the notebook has {want['slides']}, plus {split} split off"
    # >=: a fragment of several cells too tall for one screen is split into one fragment per cell.
    assert info["fragments"] >= want["fragments"], (info["fragments"], want["fragments"])
    assert info["notes"] == want["notes"], (info["notes"], want["notes"])
    assert info["notesPlugin"], "reveal's notes plugin (speaker view, key s) is not loaded"
    if want["math"]:
        assert info["mathSources"] > 0, "the notebook has $maths$ but MathJax found none"
        assert info["mathRendered"] == info["mathSources"], f"MathJax typeset {info['mathRendered']} of " \
                                                           f"{info['mathSources']} formulas"
    assert info["mathErrors"] == 0, "MathJax reported TeX errors"
    assert info["broken"] == [], f"images that did not load: {info['broken']}"
    if executed:
        assert info["images"] > 0, "an executed deck without a single figure"
    if lang == "zh":
        assert cjk_problems(page) == []


# --- the tests --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("deck", DECKS, ids=_deck_id)
def test_deck_offline_from_disk(deck, exported, new_page):
    """Every deck, not executed: offline, structure, maths, glyphs, and every slide fits a 1280×720 room."""
    lang, stem = deck
    page, network, errors = new_page(viewport=slide_report.VIEWPORT)
    url = (exported["plain"] / lang / f"{stem}.html").as_uri()
    open_deck(page, url)
    check_deck(page, network, errors, lang, stem)
    page.screenshot(path=str(SCREENSHOTS / f"{lang}_{stem}.png"))
    measured = room_report(page, url, f"{lang}/{stem}", exported)
    assert measured["scale"] == 1, "at 1280×720 the deck must be drawn at scale 1"
    assert measured["problems"] == [], "\n".join(measured["problems"])


@pytest.mark.parametrize("lang", LANGS)
def test_executed_deck_static_widget_fits_the_room(lang, exported, new_page, serve_folder):
    """Executed: figures render offline; the lesson widget is its figure at default settings, captioned as static
    in the deck's language, with no control that could look live; every slide fits 1280×720."""
    with serve_folder(exported["executed"]) as base:
        page, network, errors = new_page(viewport=slide_report.VIEWPORT, allowed=(base + "/",))
        url = f"{base}/{lang}/{EXECUTED_LESSON}.html"
        open_deck(page, url)
        widget = page.evaluate("""() => {
          const fig = document.querySelector('.reveal figure.course-static-widget');
          if (!fig) { return null; }
          const idx = Reveal.getIndices(fig.closest('section'));
          return {h: idx.h, v: idx.v || 0, image: fig.querySelector('img').naturalWidth,
                  caption: fig.querySelector('figcaption').textContent,
                  controls: document.querySelectorAll('.reveal .slides input, .reveal .slides select, '
                                                      + '.reveal .slides .jupyter-widgets').length};
        }""")
        assert widget is not None, "the lesson widget is missing from the executed deck"
        assert widget["image"] > 100 and widget["controls"] == 0, widget
        assert widget["caption"].startswith(export_slides.STATIC_CAPTION[lang]), widget["caption"]
        # The widget's defaults (build_pe_explorer: d_model 32, position 10, dimension 4), not a test's settings.
        assert "32" in widget["caption"] and "10" in widget["caption"], widget["caption"]
        page.evaluate(f"Reveal.slide({widget['h']}, {widget['v']})")
        page.wait_for_timeout(800)  # the slide transition
        check_deck(page, network, errors, lang, EXECUTED_LESSON, executed=True)
        page.screenshot(path=str(SCREENSHOTS / f"{lang}_{EXECUTED_LESSON}_executed.png"))
        measured = room_report(page, url, f"{lang}/{EXECUTED_LESSON} (executed)", exported)
        assert measured["problems"] == [], "\n".join(measured["problems"])


def test_speaker_view_shows_the_notes(exported, new_page):
    """Key ``s`` opens reveal's speaker view (a pop-up) with the notes of the current slide, offline."""
    lang, stem = next((d for d in DECKS if d[0] == "zh" and expected_structure(*d)["notes"]), (None, None))
    assert stem is not None, "the instructor edition has no speaker notes: the decks would have none"
    page, network, errors = new_page()
    open_deck(page, (exported["plain"] / lang / f"{stem}.html").as_uri())
    where = page.evaluate("""() => {
      const aside = document.querySelector('.reveal .slides aside.notes');
      const idx = Reveal.getIndices(aside.closest('section'));
      return {h: idx.h, v: idx.v || 0, text: aside.textContent.trim().slice(0, 12)};
    }""")
    page.evaluate(f"Reveal.slide({where['h']}, {where['v']})")
    with page.expect_popup(timeout=30_000) as popup_info:
        page.keyboard.press("s")
    popup = popup_info.value
    popup.wait_for_function(f"document.querySelector('.speaker-controls-notes') && "
                            f"document.querySelector('.speaker-controls-notes').textContent.includes("
                            f"{json.dumps(where['text'])})", timeout=30_000)
    assert network.blocked == [] and network.failed == [], (network.blocked, network.failed)
    popup.close()


def test_cjk_check_fails_without_a_chinese_font(exported, launch_browser, tmp_path):
    """The Chinese-glyph check must catch a machine without a CJK font: Chromium with a font configuration that
    holds every installed font except those that cover Chinese draws boxes, and cjk_problems reports them."""
    if not shutil.which("fc-list"):
        pytest.skip("fontconfig's fc-list is not available")
    listed = subprocess.run(["fc-list", ":", "file"], capture_output=True, text=True).stdout
    chinese = subprocess.run(["fc-list", ":lang=zh", "file"], capture_output=True, text=True).stdout
    strip = lambda text: {line.split(":")[0].strip() for line in text.splitlines() if line.strip()}  # noqa: E731
    fonts = tmp_path / "fonts"
    fonts.mkdir()
    for i, file in enumerate(sorted(strip(listed) - strip(chinese))):
        (fonts / f"{i}_{Path(file).name}").symlink_to(file)
    conf = tmp_path / "fonts.conf"
    conf.write_text(f'<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig>'
                    f"<dir>{fonts}</dir><cachedir>{tmp_path / 'cache'}</cachedir></fontconfig>\n")
    browser = launch_browser(env={**os.environ, "FONTCONFIG_FILE": str(conf)})
    page = browser.new_context(viewport={"width": 1280, "height": 720}).new_page()
    stem = next(stem for lang, stem in DECKS if lang == "zh")
    open_deck(page, (exported["plain"] / "zh" / f"{stem}.html").as_uri())
    problems = cjk_problems(page)
    page.screenshot(path=str(SCREENSHOTS / "zh_without_a_chinese_font.png"))  # what the check catches
    assert any("missing glyphs" in p for p in problems), problems
    assert any("no Chinese font" in p for p in problems), problems


def test_unknown_lesson_is_a_clear_error():
    with pytest.raises(SystemExit, match="no lesson 99"):
        export_slides.main(["--no-execute", "--lessons", "99", "--out", "/nonexistent"])


# --- the exporter's curation, without a browser ----------------------------------------------------------------

LONG_CODE = "\n".join(
    ["import math", "", ""]
    + [line for k in range(6) for line in (f"def f{k}(x):", f"    y = x * {k}", "    if y > 1:",
                                           "        y = math.sqrt(y)", "    return y", "", "")]
    + ["total = sum(f(1) for f in (f0, f1, f2))", "print(total)"])


def test_long_code_becomes_parts_that_each_fit_and_read_as_code():
    parts = export_slides.split_code(LONG_CODE, max_rows=12)
    assert len(parts) > 1
    assert all(sum(export_slides._rows(line) for line in part.splitlines()) <= 12 for part in parts)
    for part in parts:  # cut between top-level statements: every part is valid Python on its own
        compile(part, "<part>", "exec")
        assert part.strip() == part.strip("\n") and part.splitlines()[0].strip()
    assert [line for part in parts for line in part.splitlines() if line.strip()] == \
        [line for line in LONG_CODE.splitlines() if line.strip()]
    assert export_slides.split_code("x = 1\ny = 2", max_rows=12) == ["x = 1\ny = 2"]


def test_code_shown_leaves_out_checks_and_plot_boilerplate():
    source = ("w = attention(q, k, v)\n# Rows sum to one\nassert w.sum(-1).allclose(torch.ones(3))\n"
              "torch.testing.assert_close(w, w.T)\nfig = plot(w)\ndisplay(fig)\nplt.close(fig)")
    assert export_slides._shown_source(source) == "w = attention(q, k, v)\nfig = plot(w)"
    assert export_slides._shown_source("assert x") == "assert x"  # a pure check cell is skipped, not emptied


def test_a_long_code_cell_becomes_continued_slides_with_its_output_last():
    import nbformat

    cell = nbformat.v4.new_code_cell(LONG_CODE, metadata={"slideshow": {"slide_type": "slide"}})
    cell.outputs = [nbformat.v4.new_output("stream", text="3.0\n")]
    nb = nbformat.v4.new_notebook(cells=[cell])
    rows = sum(export_slides._rows(line) for line in LONG_CODE.splitlines())
    assert rows > export_slides.MAX_CODE_LINES
    nb, _ = export_slides.curate(nb, {})
    kinds = [c.metadata["slideshow"]["slide_type"] for c in nb.cells]
    assert kinds[0] == "slide" and set(kinds[1:]) == {"subslide"} and len(kinds) > 1
    assert [bool(c.outputs) for c in nb.cells] == [False] * (len(kinds) - 1) + [True]
