"""The exported reveal.js decks (tools/export_slides.py), opened in a real browser with the internet cut off.

Every lesson is exported in both languages *without* execution (structure, maths, Chinese text) and opened from
disk (``file://``); one lesson with a slider widget is exported *with* execution in both languages and opened
through a local web server, to prove that figures and the saved widget state render offline. For every deck:
every request that leaves the machine is aborted and recorded (there must be none), no local file may be missing,
reveal.js must start with the expected number of slides, fragments and speaker notes, MathJax must have typeset
every formula, and in Chinese decks the Chinese characters must be drawn with real glyphs from a CJK font. One
screenshot per deck goes to ``build/slides/screenshots/`` (plus ``report.txt``: export times, crowded slides).
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

SCREENSHOTS = REPO / "build" / "slides" / "screenshots"
LANGS = ("en", "zh")
# Exported *with* execution (EN and ZH): a lesson whose LessonWidget has sliders and draws a figure.
EXECUTED_LESSON = "02_positional_encoding"

DECKS = [(lang, path.stem) for lang in LANGS for path in export_slides.lessons(lang)]

pytestmark = pytest.mark.slow


def _deck_id(deck):
    return f"{deck[0]}-{deck[1]}"


# --- exporting (once per session) ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def exported(tmp_path_factory, playwright_api, require):
    """Export all decks without execution, and EXECUTED_LESSON with it; returns their folders and the times."""
    if not (export_slides.NODE_MODULES / "reveal.js" / "package.json").is_file():
        require("the slide assets are not installed: npm ci --prefix slides   (or: make slides)")
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
                      "slides too full for one screen, measured without outputs (executed decks have more): "
                      "zoom < 1 = shrunk to fit, 'scrolls' = too full even at the smallest zoom (0.7):\n",
                      encoding="utf-8")
    return {"plain": plain, "executed": executed, "times": times, "report": report}


# --- what the notebook says the deck must contain --------------------------------------------------------------

CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)
MATH = re.compile(r"\$\$.+?\$\$|\$[^$\s][^$\n]*\$", re.S)


def expected_structure(lang: str, stem: str) -> dict:
    nb = nbformat.read(REPO / "notebooks" / lang / f"{stem}.ipynb", as_version=4)
    types = [cell.metadata.get("slideshow", {}).get("slide_type", "-") for cell in nb.cells]
    first_visible = next(i for i, t in enumerate(types) if t not in ("skip", "notes"))
    types[first_visible] = "slide"
    return {
        "slides": sum(t in ("slide", "subslide") for t in types),
        "fragments": types.count("fragment"),
        "notes": types.count("notes"),
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

# Slides whose content is taller than the screen (measured without navigating; the deck shrinks them when shown).
MEASURE = """() => {
  // A heading as text, with its maths as TeX source ($d_k$) rather than MathJax's rendered pieces.
  const text = el => [...el.childNodes].map(n => {
    if (n.nodeType === 3) { return n.textContent; }
    if (n.nodeType !== 1) { return ''; }
    if (n.tagName === 'SCRIPT') { return n.type.startsWith('math/tex') ? '$' + n.textContent + '$' : ''; }
    if (/MathJax|MJX/.test(n.className) || n.classList.contains('anchor-link')) { return ''; }
    return text(n);
  }).join('');
  const room = Reveal.getConfig().height - 36;
  return Reveal.getSlides().map(slide => {
    const parent = slide.parentElement, shown = [slide.style.display, parent.style.display, slide.style.zoom];
    slide.style.display = 'block'; parent.style.display = 'block'; slide.style.zoom = '';
    const need = slide.scrollHeight;
    [slide.style.display, parent.style.display, slide.style.zoom] = shown;
    const idx = Reveal.getIndices(slide), heading = slide.querySelector('h1, h2, h3');
    return {h: idx.h, v: idx.v || 0, need: need, room: room,
            title: heading ? text(heading).trim() : ''};
  }).filter(s => s.need > s.room + 2);
}"""

# Chinese text must be drawn with real glyphs. Without a font that has them, Chromium draws the same empty box
# (.notdef) for every character: draw several different characters from the page, with the element's own font,
# on a canvas; real glyphs give different, non-empty bitmaps, boxes give identical ones.
GLYPHS = """(selector) => {
  const el = document.querySelector(selector);
  const style = getComputedStyle(el);
  const chars = [...new Set([...el.textContent].filter(c => /[\\u4e00-\\u9fff]/.test(c)))].slice(0, 8);
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = 64;
  const ctx = canvas.getContext('2d', {willReadFrequently: true});
  const bitmaps = chars.map(c => {
    ctx.clearRect(0, 0, 64, 64);
    ctx.font = `${style.fontStyle} ${style.fontWeight} 48px ${style.fontFamily}`;
    ctx.fillStyle = '#000';
    ctx.textBaseline = 'top';
    ctx.fillText(c, 4, 4);
    const data = ctx.getImageData(0, 0, 64, 64).data;
    let ink = 0, key = '';
    for (let i = 3; i < data.length; i += 4) { if (data[i] > 127) { ink++; key += (i >> 2).toString(36) + ','; } }
    return {char: c, ink: ink, key: key};
  });
  return {
    family: style.fontFamily,
    chars: chars.join(''),
    distinct: new Set(bitmaps.map(b => b.key)).size,
    empty: bitmaps.filter(b => b.ink === 0).map(b => b.char).join(''),
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


def crowded_report(page, lang, stem, report: Path) -> None:
    rows = [f"  {lang}/{stem} slide {s['h']}.{s['v']} '{s['title'][:60]}': zoom {s['room'] / s['need']:.2f}"
            + (" (scrolls)" if s["room"] / s["need"] < 0.7 else "") for s in page.evaluate(MEASURE)]
    if rows:
        with report.open("a", encoding="utf-8") as f:
            f.write("\n".join(rows) + "\n")


def check_deck(page, network, errors, lang, stem, *, executed=False):
    info = page.evaluate(INSPECT)
    want = expected_structure(lang, stem)
    assert network.blocked == [], f"the deck tried to reach the internet: {network.blocked}"
    assert network.failed == [], f"local files missing or failing: {network.failed}"
    assert errors == [], f"JavaScript errors: {errors}"
    assert info["ready"] and info["total"] > 5, info
    assert info["lang"] == lang
    assert info["total"] == want["slides"], f"{info['total']} slides, the notebook has {want['slides']}"
    assert info["fragments"] == want["fragments"], (info["fragments"], want["fragments"])
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
    lang, stem = deck
    page, network, errors = new_page()
    open_deck(page, (exported["plain"] / lang / f"{stem}.html").as_uri())
    check_deck(page, network, errors, lang, stem)
    crowded_report(page, lang, stem, exported["report"])
    page.screenshot(path=str(SCREENSHOTS / f"{lang}_{stem}.png"))


@pytest.mark.parametrize("lang", LANGS)
def test_executed_deck_with_widget_over_http(lang, exported, new_page, serve_folder):
    """Figures and the lesson widget, drawn from the saved widget state by the local ipywidgets renderer."""
    with serve_folder(exported["executed"]) as base:
        page, network, errors = new_page(allowed=(base + "/",))
        open_deck(page, f"{base}/{lang}/{EXECUTED_LESSON}.html")
        page.wait_for_selector(".reveal .jupyter-widgets .widget-slider", state="attached", timeout=30_000)
        widget = page.evaluate("""() => {
          const slider = document.querySelector('.reveal .jupyter-widgets .widget-slider');
          const view = slider.closest('.jupyter-widgets.jp-OutputArea-output') || slider.closest('section');
          const img = view.querySelector('img');
          const idx = Reveal.getIndices(slider.closest('section'));
          return {sliders: view.querySelectorAll('.widget-slider').length, h: idx.h, v: idx.v || 0,
                  image: img ? img.naturalWidth : 0};
        }""")
        assert widget["sliders"] >= 1 and widget["image"] > 100, f"the widget or its figure did not render: {widget}"
        page.evaluate(f"Reveal.slide({widget['h']}, {widget['v']})")
        page.wait_for_timeout(800)  # the slide transition
        check_deck(page, network, errors, lang, EXECUTED_LESSON, executed=True)
        crowded_report(page, f"{lang} (executed)", EXECUTED_LESSON, exported["report"])
        page.screenshot(path=str(SCREENSHOTS / f"{lang}_{EXECUTED_LESSON}_executed.png"))


def test_speaker_view_shows_the_notes(exported, new_page):
    """Key ``s`` opens reveal's speaker view (a pop-up) with the notes of the current slide, offline."""
    lang, stem = next((d for d in DECKS if d[0] == "zh" and expected_structure(*d)["notes"]), (None, None))
    if stem is None:
        pytest.skip("no lesson has speaker notes yet")
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
    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    stem = next(stem for lang, stem in DECKS if lang == "zh")
    open_deck(page, (exported["plain"] / "zh" / f"{stem}.html").as_uri())
    problems = cjk_problems(page)
    page.screenshot(path=str(SCREENSHOTS / "zh_without_a_chinese_font.png"))  # what the check catches
    assert any("missing glyphs" in p for p in problems), problems
    assert any("no Chinese font" in p for p in problems), problems


def test_unknown_lesson_is_a_clear_error():
    with pytest.raises(SystemExit, match="no lesson 99"):
        export_slides.main(["--no-execute", "--lessons", "99", "--out", "/nonexistent"])
