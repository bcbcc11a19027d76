"""The course website (``make site``: tools/build_site.py), opened in a headless Chromium with the internet cut off.

Run by ``make site-test``, which builds the site first (CI runs it after ``make test``, whose executed notebooks the
site reuses); in a plain ``make test`` these tests are skipped, since the site is not built there. For every lesson
page in both languages: it loads from a local web server with no console error, no failed local request and no
request that leaves the machine; it shows every figure of its executed notebook (each image loaded, none broken);
every formula is typeset by the site's own MathJax; on Chinese pages the Chinese is drawn with real glyphs; the
language switch lands on the same lesson in the other language. The search finds 注意力 and "attention" on the
attention lesson's page.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from urllib.parse import quote

import nbformat
import pytest
from conftest import GLYPHS

from course_lab import registry

REPO = Path(__file__).resolve().parents[2]
SITE = REPO / "build" / "site"
SITE_SRC = REPO / "build" / "site-src"  # the notebooks Sphinx read: executed, widgets replaced by their figures
LANGS = ("en", "zh")
OTHER = {"en": "zh", "zh": "en"}
ATTENTION_LESSON = "03_scaled_dot_product_attention"
IMAGE_MIMES = ("image/png", "image/svg+xml", "image/jpeg")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("COURSE_SITE_TEST") != "1",
                       reason="the website is checked by `make site-test`, which builds it first"),
]


def lesson_pages() -> list[tuple[str, str]]:
    """Every lesson of the registry (course_lab/registry.py), in both languages."""
    return [(lang, lesson.slug) for lang in LANGS for lesson in registry.LESSONS]


@pytest.fixture(scope="module")
def site(serve_folder, playwright_api):
    if not (SITE / "index.html").is_file():
        pytest.fail("build/site has no index.html: `make site-test` builds the site before testing it")
    built = {(lang, p.stem) for lang in LANGS for p in (SITE / lang).glob("[0-9][0-9]_*.html")}
    missing = sorted(set(lesson_pages()) - built)
    assert not missing, f"lesson pages missing from build/site (rebuild with make site): {missing}"
    with serve_folder(SITE) as base:
        yield base


def expected(lang: str, stem: str) -> dict:
    """What the page must show, from the notebook Sphinx built it from: its figures and whether it has maths."""
    nb = nbformat.read(SITE_SRC / lang / f"{stem}.ipynb", as_version=4)
    outputs = [out for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])]
    # Plots are image outputs; a widget is an HTML figure (its default picture, captioned as static).
    figures = sum(1 for out in outputs if any(m in out.get("data", {}) for m in IMAGE_MIMES))
    figures += sum(str(out.get("data", {}).get("text/html", "")).count("<img") for out in outputs
                   if not any(m in out.get("data", {}) for m in IMAGE_MIMES))
    maths = any(re.search(r"\$[^$\n]+\$|\$\$", cell.source) for cell in nb.cells if cell.cell_type == "markdown")
    return {"figures": figures, "maths": maths}


WAIT_FOR_MATHJAX = """() => new Promise(resolve => {
  if (!window.MathJax || !MathJax.Hub) { resolve(false); return; }
  MathJax.Hub.Queue(() => resolve(true));
})"""

PAGE_FACTS = """() => {
  const main = document.querySelector('main') || document.body;
  const imgs = [...main.querySelectorAll('.cell_output img, .output img')];
  const maths = [...main.querySelectorAll('.math')];
  return {
    lang: document.documentElement.lang,
    images: imgs.length,
    broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src')),
    maths: maths.length,
    untypeset: maths.filter(m => !m.querySelector('.MathJax_CHTML, .MathJax_Display, .MathJax, mjx-container'))
                    .map(m => m.textContent.slice(0, 40)),
    switch: (document.querySelector('a.course-lang-switch') || {}).href || null,
  };
}"""

MARK_CHINESE = """() => {
  const main = document.querySelector('main') || document.body;
  for (const el of main.querySelectorAll('p, li, h1, h2')) {
    const own = [...el.childNodes].filter(n => n.nodeType === 3).map(n => n.textContent).join('');
    if ((own.match(/[\\u4e00-\\u9fff]/g) || []).length >= 4) { el.setAttribute('data-cjk-probe', ''); return true; }
  }
  return false;
}"""


def open_page(new_page, url: str):
    page, network, errors = new_page(viewport=(1280, 900), allowed=(url.split("/", 3)[0] + "//" + url.split("/")[2],))
    console = []
    page.on("console", lambda msg: console.append(msg.text) if msg.type == "error" else None)
    # networkidle: leaving a page while its icon is still loading would abort that request (net::ERR_ABORTED).
    page.goto(url, wait_until="networkidle")
    page.evaluate(WAIT_FOR_MATHJAX)
    return page, network, errors, console


@pytest.mark.parametrize("lang,stem", lesson_pages(), ids=lambda v: v)
def test_lesson_page(site, lang, stem, new_page):
    page, network, errors, console = open_page(new_page, f"{site}/{lang}/{stem}.html")
    facts = page.evaluate(PAGE_FACTS)
    want = expected(lang, stem)
    assert errors == [] and console == [], (errors, console)
    assert network.blocked == [] and network.failed == [], (network.blocked, network.failed)
    assert facts["lang"].lower().startswith(lang), facts["lang"]
    assert facts["images"] == want["figures"] and facts["broken"] == [], (facts, want)
    if want["maths"]:
        assert facts["maths"] > 0, "the notebook has maths but the page has none"
    assert facts["untypeset"] == [], f"formulas MathJax did not typeset: {facts['untypeset'][:5]}"
    if lang == "zh":
        assert page.evaluate(MARK_CHINESE), "no paragraph with Chinese text found"
        glyphs = page.evaluate(GLYPHS, "[data-cjk-probe]")
        assert glyphs["distinct"] == len(glyphs["chars"]) >= 2 and not glyphs["empty"], \
            f"{glyphs['chars']!r} drawn as identical or empty boxes with font-family {glyphs['family']}"
    # The language switch points at the same lesson in the other language (that page has its own test; one click
    # through is test_the_language_switch_is_a_working_link: clicking on every page doubled this test's time).
    assert facts["switch"] and facts["switch"].endswith(f"/{OTHER[lang]}/{stem}.html"), facts["switch"]


@pytest.mark.parametrize("lang", LANGS)
def test_the_language_switch_is_a_working_link(site, lang, new_page):
    stem = ATTENTION_LESSON
    page, network, errors, console = open_page(new_page, f"{site}/{lang}/{stem}.html")
    page.click("a.course-lang-switch")
    page.wait_for_load_state("networkidle")
    assert page.url.endswith(f"/{OTHER[lang]}/{stem}.html")
    assert page.evaluate("document.documentElement.lang").lower().startswith(OTHER[lang])
    assert errors == [] and console == [] and network.failed == [], (errors, console, network.failed)


@pytest.mark.parametrize("lang,query", [("zh", "注意力"), ("en", "attention")])
def test_search_finds_the_attention_lesson(site, lang, query, new_page):
    page, network, errors, console = open_page(new_page, f"{site}/{lang}/search.html?q={quote(query)}")
    page.wait_for_function("document.querySelectorAll('#search-results ul.search li').length > 0", timeout=60_000)
    hits = page.evaluate("[...document.querySelectorAll('#search-results ul.search li a')].map(a => a.href)")
    assert any(f"/{ATTENTION_LESSON}.html" in h for h in hits), json.dumps(hits[:10], ensure_ascii=False)
    assert errors == [] and console == [], (errors, console)
    assert network.blocked == [], network.blocked


def test_the_root_page_offers_both_languages(site, new_page):
    page, network, errors, console = open_page(new_page, f"{site}/index.html")
    links = page.evaluate("[...document.querySelectorAll('a')].map(a => a.getAttribute('href'))")
    assert set(links) >= {"en/index.html", "zh/index.html"}, links
    for lang in LANGS:
        page.goto(f"{site}/{lang}/index.html", wait_until="networkidle")
        rows = page.evaluate("[...document.querySelectorAll('main table a')].map(a => a.getAttribute('href'))")
        assert len([r for r in rows if re.match(r"\d\d_", r or "")]) == len([p for p in lesson_pages() if p[0] == lang])
    assert errors == [] and console == [] and network.failed == [], (errors, console, network.failed)
