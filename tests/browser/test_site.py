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
    """Every lesson of the registry (course_lab/registry.py), in both languages; COURSE_SITE_LESSONS="03 08"
    checks a site built with --lessons 03 08."""
    wanted = os.environ.get("COURSE_SITE_LESSONS", "").split()
    return [(lang, lesson.slug) for lang in LANGS for lesson in registry.LESSONS
            if not wanted or lesson.slug[:2] in wanted]


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


# --- A student's reading: on a phone, in Chinese search, with a way to run the lesson (issue 40) ----------------
PHONE = (390, 844)
LAPTOP = (1366, 768)


def open_at(new_page, url: str, viewport):
    page, network, errors = new_page(viewport=viewport, allowed=(url.split("/", 3)[0] + "//" + url.split("/")[2],))
    console = []
    page.on("console", lambda msg: console.append(msg.text) if msg.type == "error" else None)
    page.goto(url, wait_until="networkidle")
    page.evaluate(WAIT_FOR_MATHJAX)
    return page, errors, console


DRAWERS = """() => ({
  primary: !!(document.querySelector('#pst-primary-sidebar-modal') || {}).open,
  secondary: !!(document.querySelector('#pst-secondary-sidebar-modal') || {}).open,
})"""


@pytest.mark.parametrize("lang", LANGS)
def test_both_drawers_open_and_close_on_a_phone(site, lang, new_page):
    page, errors, console = open_at(new_page, f"{site}/{lang}/{ATTENTION_LESSON}.html", PHONE)
    for which in ("primary", "secondary"):
        assert page.evaluate(DRAWERS) == {"primary": False, "secondary": False}
        page.locator(f".{which}-toggle:visible").first.click()
        page.wait_for_timeout(300)
        assert page.evaluate(DRAWERS)[which], f"the {which} drawer did not open at 390 px"
        page.keyboard.press("Escape")
        page.wait_for_timeout(300)
        assert not page.evaluate(DRAWERS)[which], f"the {which} drawer did not close"
    assert errors == [] and console == [], (errors, console)


@pytest.mark.parametrize("lang", LANGS)
def test_the_menu_button_collapses_the_sidebar_on_a_laptop(site, lang, new_page):
    page, errors, console = open_at(new_page, f"{site}/{lang}/{ATTENTION_LESSON}.html", LAPTOP)
    width = "() => document.querySelector('#pst-primary-sidebar').getBoundingClientRect().width"
    assert page.evaluate(width) > 100
    page.locator(".primary-toggle:visible").first.click()
    page.wait_for_timeout(300)
    assert page.evaluate(width) == 0, "☰ did not collapse the lesson list at 1366 px"
    page.locator(".primary-toggle:visible").first.click()
    page.wait_for_timeout(300)
    assert page.evaluate(width) > 100, "☰ did not bring the lesson list back"


# Every display formula, code block and output block either fits the column or scrolls sideways (overflow-x auto
# or scroll): none is cut off with no way to see its end. Printed Markdown tables are tables, not lines of pipes.
CUT_BLOCKS = """() => {
  const main = document.querySelector('main') || document.body;
  const column = (document.querySelector('article') || main).getBoundingClientRect();
  const cut = [];
  for (const el of main.querySelectorAll('div.math, div.highlight pre, .cell_output pre')) {
    const style = getComputedStyle(el);
    const scrolls = ['auto', 'scroll'].includes(style.overflowX);
    const overflows = el.scrollWidth > el.clientWidth + 1;
    const sticksOut = el.getBoundingClientRect().right > column.right + 1;
    if ((overflows && !scrolls) || sticksOut) cut.push(el.textContent.trim().slice(0, 50));
  }
  const pipes = [...main.querySelectorAll('.cell_output p, .cell_output pre')]
    .filter(p => /\\|\\s*:?-{3,}:?\\s*\\|/.test(p.textContent)).map(p => p.textContent.slice(0, 60));
  return {cut, pipes};
}"""


@pytest.mark.parametrize("lang,stem", lesson_pages(), ids=lambda v: v)
def test_nothing_is_cut_off_on_a_phone(site, lang, stem, new_page):
    page, errors, console = open_at(new_page, f"{site}/{lang}/{stem}.html", PHONE)
    facts = page.evaluate(CUT_BLOCKS)
    assert facts["cut"] == [], f"cut off without a scrollbar at 390 px: {facts['cut'][:5]}"
    assert facts["pipes"] == [], f"a Markdown table printed as pipes: {facts['pipes'][:3]}"
    # What a page needs and nothing a reader does not: the setup cell and untried checks folded away, a copy
    # button on code, a way to run the lesson, the same reading on every page.
    extras = page.evaluate("""() => ({
      setup: !!document.querySelector('.cell.tag_hide-input'),
      untried: [...document.querySelectorAll('.cell_output')].filter(o => /⏳/.test(o.textContent)
                 && !o.closest('.tag_hide-output')).length,
      copy: document.querySelectorAll('button.copybtn').length,
      code: document.querySelectorAll('div.highlight pre').length,
      run: !!document.querySelector('nav.course-bar .course-run'),
      todo: /No GPU table measured yet|还没有 GPU 实测结果/.test(document.body.textContent),
    })""")
    assert extras["setup"] and extras["untried"] == 0 and extras["run"] and not extras["todo"], extras
    assert extras["copy"] >= extras["code"] > 0, extras


def taught_terms(lang: str) -> dict[str, str]:
    return json.loads((SITE_SRC / lang / "_static" / "taught_terms.json").read_text(encoding="utf-8"))


def test_the_glossary_terms_are_taught_somewhere():
    """The search test below must have something to check: most of the glossary is taught by a lesson."""
    if not (SITE_SRC / "zh" / "_static" / "taught_terms.json").is_file():
        pytest.fail("build/site-src has no taught_terms.json: `make site-test` builds the site first")
    zh, en = taught_terms("zh"), taught_terms("en")
    assert zh.get("交叉熵", "").startswith("08_") and zh.get("层归一化", "").startswith("06_"), zh
    if not os.environ.get("COURSE_SITE_LESSONS"):  # the whole course: most terms have their lesson
        assert len(zh) >= 60 and len(en) >= 60, (len(zh), len(en))


FIRST_QUERY = {"en": "attention", "zh": "注意力"}
# The search as the search page runs it, in one loaded page: the query in the address (the scorer reads it there),
# then Sphinx's own parse and search; the page shows the results from the last one down.
TOP_HITS = """(term) => {
  history.replaceState(null, '', '?q=' + encodeURIComponent(term));
  const results = Search._performSearch(...Search._parseQuery(term));
  return results.slice(-3).reverse().map(r => r[0]);
}"""


@pytest.mark.parametrize("lang", LANGS)
def test_every_taught_term_finds_its_lesson_first(site, lang, new_page):
    page, errors, console = open_at(new_page, f"{site}/{lang}/search.html?q={quote(FIRST_QUERY[lang])}",
                                    LAPTOP)
    page.wait_for_function("document.querySelectorAll('#search-results ul.search li').length > 0", timeout=60_000)
    status = page.evaluate("document.querySelector('#search-results p.search-summary').textContent")
    failures = []
    for term, stem in sorted(taught_terms(lang).items()):
        top = page.evaluate(TOP_HITS, term)
        if not top or top[0] != stem:
            failures.append((term, stem, top))
    assert failures == [], f"{len(failures)} terms do not find their lesson first: {failures[:10]}"
    if lang == "zh":
        assert re.search(r"[\u4e00-\u9fff]", status) and "Search" not in status, status
    assert errors == [] and console == [], (errors, console)


@pytest.mark.parametrize("lang", LANGS)
def test_the_course_map_lists_each_deck_and_each_deck_links_back(site, lang, new_page):
    page, errors, console = open_at(new_page, f"{site}/{lang}/index.html", LAPTOP)
    decks = page.evaluate("[...document.querySelectorAll('main a.course-deck')].map(a => a.getAttribute('href'))")
    stems = [stem for lang_, stem in lesson_pages() if lang_ == lang]
    assert decks == [f"slides/{stem}.html" for stem in stems], decks
    assert re.search(r"no speaker notes|不含讲者备注", page.evaluate("document.body.textContent"))
    page.goto(f"{site}/{lang}/slides/{ATTENTION_LESSON}.html", wait_until="networkidle")
    page.click("a.course-deck-back")
    page.wait_for_load_state("networkidle")
    assert page.url.endswith(f"/{lang}/{ATTENTION_LESSON}.html"), page.url
