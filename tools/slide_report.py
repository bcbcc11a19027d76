"""Measure exported slide decks in a real browser at projector size (1280×720) and report what fails in a room.

    python tools/slide_report.py                     # every deck under build/slides (after `make slides`)
    python tools/slide_report.py build/slides/zh/04_multi_head_attention.html --print-pdf

For every slide of every deck (fragments all shown): the slide must not need scrolling (its content taller than
the screen above the footer strip), body text must be drawn at >= 24 px and code at >= 18 px *after* reveal's
scaling, the slide must have a heading, and any control on it (input, select, button) must change something when
used. Per deck it also counts the slides with speaker notes, and how many slides short the deck is of notes on
every third slide (issue 13; reported, not a failure). ``--print-pdf`` also opens each deck with
``?print-pdf`` and checks that it gives one page per slide. Exit status 1 when anything fails.

Needs Chromium (Debian's ``chromium`` or ``COURSE_CHROMIUM``) and the ``playwright`` Python package; never
``playwright install``. tests/browser/test_slides.py uses the same measurement.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import export_slides  # noqa: E402  (tools/ is not a package)

VIEWPORT = (export_slides.DECK_WIDTH, export_slides.DECK_HEIGHT)
MIN_BODY, MIN_CODE = export_slides.MIN_BODY_PX, export_slides.MIN_CODE_PX

WAIT_READY = "window.Reveal && Reveal.isReady && Reveal.isReady()"

# One slide, shown with all its fragments: its size problems, in px on the screen.
MEASURE_SLIDE = """([h, v, room]) => {
  Reveal.slide(h, v);
  const slide = Reveal.getCurrentSlide();
  slide.querySelectorAll('.fragment').forEach(f => f.classList.add('visible'));
  const scale = Reveal.getScale() * (parseFloat(slide.style.zoom) || 1);
  const skip = el => el.closest('aside.notes, script, style, sub, sup, .MathJax_CHTML, .MathJax, mjx-container, '
                                + '.MJX_Assistive_MathML, .course-continued-mark, .anchor-link');
  let body = Infinity, code = Infinity, smallest = '';
  const walker = document.createTreeWalker(slide, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.textContent.trim()) { continue; }
    const el = node.parentElement;
    if (!el || skip(el) || !el.getClientRects().length) { continue; }
    const style = getComputedStyle(el);
    if (style.visibility === 'hidden' || style.display === 'none') { continue; }
    const px = parseFloat(style.fontSize) * scale;
    if (el.closest('pre, code, .highlight, .jp-CodeMirrorEditor')) { code = Math.min(code, px); }
    else if (px < body) { body = px; smallest = node.textContent.trim().slice(0, 40); }
  }
  const wide = [...slide.querySelectorAll('pre, table, img, .jp-OutputArea-output')]
      .filter(el => el.scrollWidth > el.clientWidth + 1
                    || el.getBoundingClientRect().right > Reveal.getConfig().width * scale + 1).length;
  const heading = slide.querySelector('h1, h2, h3');
  const controls = slide.querySelectorAll('input, select, button, textarea, .widget-slider').length;
  return {
    h: h, v: v,
    title: heading ? heading.textContent.replace('\\u00b6', '').trim().slice(0, 60) : '',
    need: slide.scrollHeight, room: room, overflowFlag: slide.hasAttribute('data-course-overflow'),
    body: body === Infinity ? null : Math.round(body * 10) / 10, smallest: smallest,
    code: code === Infinity ? null : Math.round(code * 10) / 10,
    notes: !!slide.querySelector('aside.notes'), controls: controls, wide: wide,
    continued: slide.hasAttribute('data-course-continued'),
  };
}"""

# Use every control of the current slide once; return those after which nothing on the slide changed.
DEAD_CONTROLS = """() => {
  const slide = Reveal.getCurrentSlide(), dead = [];
  const snapshot = () => slide.innerHTML + [...slide.querySelectorAll('img, canvas')].map(i => i.src || '').join();
  for (const el of slide.querySelectorAll('input, select, button, textarea')) {
    const before = snapshot();
    if (el.tagName === 'SELECT') { el.selectedIndex = (el.selectedIndex + 1) % Math.max(1, el.options.length); }
    else if (el.type === 'range' || el.type === 'number') { el.stepUp ? el.stepUp() : null; }
    else if (el.type === 'checkbox' || el.type === 'radio') { el.checked = !el.checked; }
    else if (el.tagName !== 'BUTTON') { el.value = el.value + '1'; }
    ['input', 'change', 'click'].forEach(t => el.dispatchEvent(new Event(t, {bubbles: true})));
    if (snapshot() === before) { dead.push(el.outerHTML.slice(0, 80)); }
  }
  return dead;
}"""


def slide_problems(s: dict) -> list[str]:
    where = f"slide {s['h']}.{s['v']} {s['title']!r}"
    problems = []
    if s["need"] > s["room"] + 1 or s["overflowFlag"]:
        problems.append(f"{where}: needs {s['need']} px of {s['room']} (scrolls)")
    if s.get("wide"):
        problems.append(f"{where}: {s['wide']} element(s) wider than the slide (cut at the right edge)")
    if s["body"] is not None and s["body"] < MIN_BODY - 0.05:
        problems.append(f"{where}: body text {s['body']} px < {MIN_BODY} ({s['smallest']!r})")
    if s["code"] is not None and s["code"] < MIN_CODE - 0.05:
        problems.append(f"{where}: code {s['code']} px < {MIN_CODE}")
    if not s["title"]:
        problems.append(f"{where}: no heading")
    for control in s.get("dead", []):
        problems.append(f"{where}: a control that does nothing: {control}")
    return problems


def measure_deck(page, url: str, *, opened: bool = False) -> dict:
    """Open a deck (URL) in ``page`` (viewport 1280×720) and measure every slide; returns a dict with ``slides``
    (one dict per slide), ``problems`` (strings) and summary figures. ``opened=True``: ``page`` already shows the
    deck, ready (a deck load typesets all its maths again, seconds per deck)."""
    if not opened:
        page.goto(url, wait_until="load")
    page.wait_for_function(WAIT_READY, timeout=60_000)
    room = export_slides.DECK_HEIGHT - export_slides.FOOTER_HEIGHT
    page.evaluate("Reveal.configure({transition: 'none', backgroundTransition: 'none'})")  # measure at rest
    indices = page.evaluate("() => Reveal.getSlides().map(s => { const i = Reveal.getIndices(s); "
                            "return [i.h, i.v || 0]; })")
    slides = []
    for h, v in indices:
        s = page.evaluate(MEASURE_SLIDE, [h, v, room])
        s["dead"] = page.evaluate(DEAD_CONTROLS) if s["controls"] else []
        slides.append(s)
    problems = [p for s in slides for p in slide_problems(s)]
    bodies = [s["body"] for s in slides if s["body"] is not None]
    codes = [s["code"] for s in slides if s["code"] is not None]
    return {
        "slides": slides, "problems": problems, "count": len(slides),
        "continued": sum(s["continued"] for s in slides), "notes": sum(s["notes"] for s in slides),
        "min_body": min(bodies, default=None), "min_code": min(codes, default=None),
        "controls": sum(s["controls"] for s in slides), "scale": page.evaluate("Reveal.getScale()"),
    }


def print_pages(page, url: str) -> tuple[int, int]:
    """(pages, slides) of the deck opened with ?print-pdf."""
    page.goto(url + "?print-pdf", wait_until="load")
    page.wait_for_function(WAIT_READY, timeout=60_000)
    page.wait_for_function("document.querySelectorAll('.pdf-page').length > 0", timeout=30_000)
    return page.evaluate("() => [document.querySelectorAll('.pdf-page').length, Reveal.getTotalSlides()]")


NOTES_EVERY = 3  # issue 13: speaker notes on at least every third slide


def notes_short(m: dict) -> int:
    """How many more slides of the deck need speaker notes to have them on every NOTES_EVERY-th slide."""
    return max(0, -(-m["count"] // NOTES_EVERY) - m["notes"])


def scrolling(m: dict) -> int:
    return sum("(scrolls)" in p for p in m["problems"])


def summary_line(name: str, m: dict) -> str:
    return (f"{name}: {m['count']} slides ({m['continued']} continued), notes on {m['notes']} "
            f"({notes_short(m)} short of one in {NOTES_EVERY}), min body {m['min_body']} px, "
            f"min code {m['min_code']} px, controls {m['controls']}, {scrolling(m)} scrolling, "
            f"{len(m['problems'])} problems")


def totals(measured: dict[str, dict]) -> str:
    """The figures of all decks measured (name -> measure_deck's dict): the lines that close a report."""
    bodies = [m["min_body"] for m in measured.values() if m["min_body"] is not None]
    codes = [m["min_code"] for m in measured.values() if m["min_code"] is not None]
    short = {name: notes_short(m) for name, m in measured.items() if notes_short(m)}
    return "\n".join([
        f"{len(measured)} decks, {sum(m['count'] for m in measured.values())} slides; min body "
        f"{min(bodies, default=None)} px, min code {min(codes, default=None)} px; "
        f"{sum(scrolling(m) for m in measured.values())} slides scrolling; "
        f"{sum(len(m['problems']) for m in measured.values())} problems",
        f"speaker notes on {sum(m['notes'] for m in measured.values())} slides; short of one slide in "
        f"{NOTES_EVERY}: " + (", ".join(f"{name} {n}" for name, n in short.items()) or "none"),
    ])


def chromium() -> str | None:
    for candidate in (os.environ.get("COURSE_CHROMIUM"), "chromium", "chromium-browser"):
        if candidate and (found := shutil.which(candidate)):
            return found
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path, default=[export_slides.DEFAULT_OUT],
                        help="decks (.html) or folders of decks (default: build/slides)")
    parser.add_argument("--print-pdf", action="store_true", help="also check one print page per slide")
    args = parser.parse_args(argv)
    decks = []
    for path in args.paths:
        decks += sorted(p for p in path.glob("*/*.html")) if path.is_dir() else [path]
    decks = [d for d in decks if export_slides.LESSON_RE.match(d.stem + ".ipynb")]
    if not decks:
        raise SystemExit(f"slide_report: no decks under {', '.join(map(str, args.paths))} (run make slides first)")
    if chromium() is None:
        raise SystemExit("slide_report: no Chromium (apt-get install chromium, or set COURSE_CHROMIUM)")
    from playwright.sync_api import sync_playwright

    measured = {}
    with sync_playwright() as api:
        browser = api.chromium.launch(executable_path=chromium(), headless=True,
                                      args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": VIEWPORT[0], "height": VIEWPORT[1]})
        for deck in decks:
            name = f"{deck.parent.name}/{deck.stem}"
            m = measured[name] = measure_deck(page, deck.resolve().as_uri())
            if args.print_pdf:
                pages, count = print_pages(page, deck.resolve().as_uri())
                if pages != count:
                    m["problems"].append(f"?print-pdf gives {pages} pages for {count} slides")
            print(summary_line(name, m))
            for problem in m["problems"]:
                print(f"  {problem}")
        browser.close()
    print(totals(measured))
    return 1 if any(m["problems"] for m in measured.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
