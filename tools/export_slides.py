"""Export the lesson notebooks to reveal.js slide decks that work without internet.

    python tools/export_slides.py                      # every lesson, EN and ZH, executed (what `make slides` runs)
    python tools/export_slides.py --no-execute         # structure, text and maths only: fast
    python tools/export_slides.py --lessons 02 06 --langs zh

The decks come from the *instructor* edition of the notebooks, which keeps the speaker notes (the student notebooks
in ``notebooks/`` do not): it is built first, from ``notebooks/source``, into ``build/instructor/{en,zh}``
(what ``make instructor`` does). Each ``build/instructor/{en,zh}/NN_name.ipynb`` becomes
``build/slides/{en,zh}/NN_name.html``. Everything a
deck loads (reveal.js, require.js, jQuery, MathJax 2, the ipywidgets HTML manager) is copied from the npm
packages in ``slides/node_modules`` (``npm ci --prefix slides``) into ``build/slides/{en,zh}/assets/`` and
referenced by *relative* URLs: zip ``build/slides`` (or one language folder), unzip it anywhere and open a deck
from disk or from any web server; nothing is fetched from the internet. (The assets sit next to the decks of
each language, not one level up, because Firefox refuses fonts from a parent folder of a ``file://`` page.)

``--execute`` (the default) runs every notebook first, in its own folder and with its language, and fails loudly,
naming the deck and the cell, on a cell error, a warning (missing CJK glyphs included), an ipywidget left in the
deck, or (Chinese decks) a matplotlib that draws Chinese as boxes. A lesson widget appears as its figure at its
default settings, captioned as a static figure: no control in a deck looks live without being live. Cells that
only check (asserts, exercise checks) are left off the slides. ``--no-execute`` exports the notebooks as they are
committed (no outputs).

Slide structure comes from each cell's ``metadata.slideshow.slide_type``: ``slide`` starts a new slide,
``subslide`` a slide below it, ``fragment`` appears on the next key press, ``notes`` go to the speaker view
(key ``s``, maths drawn as pictures), ``skip`` is left out (setup code, test-only cells). The code shown leaves
out top-level checks and plotting boilerplate (``display(fig)``, ``plt.close(fig)``). The decks are laid out for
1280×720 at scale 1: a code cell longer than a screen becomes several slides, cut between statements; a slide
too full for the screen is split into slides below it (between cells, paragraphs, list items, table rows, lines);
a figure too tall for the space left is scaled down; a slide without a heading repeats its predecessor's, marked
"continued"; text is never shrunk (tests/browser/test_slides.py and tools/slide_report.py measure every slide).
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import json
import multiprocessing
import os
import re
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "build" / "instructor"  # the instructor edition: the notes go to the speaker view
NODE_MODULES = REPO / "slides" / "node_modules"
DEFAULT_OUT = REPO / "build" / "slides"
LANGS = ("en", "zh")
LESSON_RE = re.compile(r"^(\d\d)_[a-z0-9_]+\.ipynb$")

# What is copied from slides/node_modules into <lang>/assets/<name>/: name -> (npm package, [globs relative to the
# package folder]); each file keeps its path inside the package. Only what the decks load (MathJax: the TeX input,
# the CommonHTML output and its fonts) instead of the whole packages (about 200 MB with their dependencies).
ASSETS = {
    "reveal.js": ("reveal.js", ["dist/reveal.js", "dist/reset.css", "dist/reveal.css", "dist/theme/white.css",
                                "dist/theme/fonts/source-sans-pro/*", "plugin/notes/notes.js",
                                "plugin/zoom/zoom.js", "plugin/search/search.js", "LICENSE"]),
    "mathjax": ("mathjax", ["MathJax.js", "config/TeX-AMS_CHTML-full.js", "config/Safe.js", "config/local/*",
                            "extensions/**/*", "jax/element/**/*", "jax/input/TeX/**/*",
                            "jax/output/CommonHTML/**/*", "jax/output/PreviewHTML/**/*",
                            "fonts/HTML-CSS/TeX/woff/**/*", "fonts/HTML-CSS/TeX/otf/**/*", "localization/**/*",
                            "LICENSE"]),
    "requirejs": ("requirejs", ["require.js", "README.md"]),
    "jquery": ("jquery", ["dist/jquery.min.js", "LICENSE.txt"]),
}
# The URLs nbconvert's reveal template is given, relative to the deck (see build_exporter).
URLS = {
    "reveal_url_prefix": "assets/reveal.js",
    "require_js_url": "assets/requirejs/require.js",
    "jquery_url": "assets/jquery/dist/jquery.min.js",
    "mathjax_url": "assets/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe",
}

# Fonts. Latin first (Source Sans Pro ships with reveal.js); then the Chinese fonts of macOS, Windows and Linux
# (fonts-wqy-microhei, fonts-noto-cjk): the browser takes each character from the first font that has it.
CJK_FONTS = ('"PingFang SC", "Hiragino Sans GB", "Microsoft YaHei", "Noto Sans CJK SC", "Source Han Sans SC", '
             '"WenQuanYi Micro Hei", "WenQuanYi Zen Hei", "Noto Sans SC"')
SANS = f'"Source Sans Pro", "Helvetica Neue", Helvetica, Arial, {CJK_FONTS}, sans-serif'
MONO = (f'"DejaVu Sans Mono", Menlo, Consolas, "Liberation Mono", "Noto Sans Mono CJK SC", '
        f'"WenQuanYi Micro Hei Mono", {CJK_FONTS}, monospace')

# The deck's own size is the common projector's, 1280×720, with no margin: at that screen size reveal draws it at
# scale 1, so the CSS sizes below are the sizes on the wall (body text >= 24 px, code >= 18 px). Nothing is ever
# shrunk to fit: a slide that holds too much is split (see FOOTER_JS) into slides stacked below it.
DECK_WIDTH, DECK_HEIGHT = 1280, 720
FOOTER_HEIGHT = 34  # the strip at the bottom kept for the footer line
MIN_BODY_PX, MIN_CODE_PX = 24, 18  # what tests/browser and tools/slide_report.py hold every slide to

CSS = """
:root {
  --course-sans: %(sans)s;
  --course-mono: %(mono)s;
  --jp-content-font-family: var(--course-sans);
  --jp-ui-font-family: var(--course-sans);
  --jp-code-font-family: var(--course-mono);
  --jp-code-font-family-default: var(--course-mono);
  --jp-content-font-size1: 26px;
  --jp-ui-font-size1: 24px;
  --jp-code-font-size: 18px;
  --jp-content-line-height: 1.4;
  --r-main-font: var(--course-sans);
  --r-heading-font: var(--course-sans);
  --r-code-font: var(--course-mono);
  --r-main-font-size: 26px;
}
body.jp-Notebook { background: #fff; }
.reveal { font-family: var(--course-sans); font-size: 26px; }
.reveal .slides { text-align: left; }
.reveal .slides > section { padding: 0; }
.reveal .slides section section { box-sizing: border-box; padding: 6px 28px 0; }
.reveal h1, .reveal h2, .reveal h3, .reveal h4 {
  font-family: var(--course-sans); text-transform: none; color: #1f3a60; letter-spacing: normal;
}
.reveal h1 { font-size: 1.8em; }
.reveal h2 { font-size: 1.4em; border-bottom: 3px solid #e8a33d; padding-bottom: 0.12em; margin: 0 0 0.4em; }
.reveal h3 { font-size: 1.12em; }
.reveal h2.course-continued .course-continued-mark { color: #8a94a6; font-weight: normal; font-size: 0.7em; }
.reveal .jp-RenderedHTMLCommon { font-size: var(--jp-content-font-size1); line-height: 1.4; padding-right: 0; }
.reveal .jp-RenderedHTMLCommon p, .reveal .jp-RenderedHTMLCommon li { line-height: 1.4; }
.reveal .jp-RenderedHTMLCommon p { margin: 0 0 0.5em; }
.reveal .jp-RenderedHTMLCommon h1, .reveal .jp-RenderedHTMLCommon h2 { margin-top: 0.1em; }
.reveal .jp-RenderedHTMLCommon code {
  font-family: var(--course-mono); font-size: 0.85em; background: #f3f4f6; padding: 0 0.2em; border-radius: 3px;
}
.reveal .jp-RenderedHTMLCommon pre code { background: none; padding: 0; }
.reveal .jp-Cell { padding: 2px 0; }
.reveal .jp-InputPrompt, .reveal .jp-OutputPrompt { display: none; }
.reveal .jp-InputArea-editor { border: none; border-left: 4px solid #8aa4c8; border-radius: 0;
  background: #f7f8fa; }
.reveal div.highlight > pre, .reveal .jp-OutputArea-output > pre, .reveal .jp-RenderedHTMLCommon pre {
  font-family: var(--course-mono); font-size: var(--jp-code-font-size); line-height: 1.3;
}
.reveal .jp-OutputArea-output > pre, .reveal div.highlight > pre { width: 100%%; box-sizing: border-box;
  white-space: pre-wrap; overflow-wrap: anywhere; }
.reveal .jp-OutputArea-output img {
  max-width: 100%%; max-height: 540px; width: auto; height: auto; object-fit: contain;
}
.reveal table, .reveal .jp-RenderedHTMLCommon table { font-size: 24px; margin: 0.3em 0; }
.reveal figure.course-static-widget { margin: 0; }
.reveal figure.course-static-widget img { display: block; max-width: 100%%; max-height: 520px; }
.reveal figure.course-static-widget figcaption { font-size: 24px; color: #5b6577; font-style: italic; }
.reveal aside.notes { display: none; }
/* Title slide: the lesson's first slide, under the course name. */
.reveal .slides > section:first-of-type > section:first-of-type { padding-top: 60px; }
.reveal .slides > section:first-of-type > section:first-of-type::before {
  content: "%(course)s"; display: block; font-size: 0.8em; letter-spacing: 0.04em; color: #e8a33d;
  font-weight: 600; margin-left: 10px;
}
.reveal .slides > section:first-of-type > section:first-of-type .jp-RenderedHTMLCommon h1 {
  font-size: 2.1em; margin: 0.1em 0 0.6em; padding-bottom: 0.25em; border-bottom: 4px solid #e8a33d;
}
.course-footer {
  position: fixed; left: 16px; bottom: 8px; z-index: 30; font: 14px var(--course-sans); color: #8a94a6;
  pointer-events: none;
}
.reveal .slide-number { font-family: var(--course-sans); background: transparent; color: #8a94a6; }
/* Before reveal starts, every slide is laid out at the deck's width, one under the other, to be measured. */
.reveal.course-measuring .slides { width: %(width)dpx; height: auto; position: absolute; left: 0; top: 0;
  transform: none; }
.reveal.course-measuring .slides section { display: flow-root !important; position: relative !important;
  visibility: hidden; height: auto !important; top: auto !important; }
"""

# Runs before reveal.js starts: (1) every slide without a heading gets its predecessor's, marked "continued";
# (2) a slide taller than the screen (at 1280×720, fonts, maths and figures loaded) is split into slides stacked
# below it, each under the same heading: at the cells first, then a code cell between its code and its output,
# a multi-cell fragment into one fragment per cell, then inside a piece: text between its paragraphs / list
# items, a table between rows (header repeated), a <pre> between lines (after a blank line or before a statement;
# long code cells were already cut between statements by curate/split_code). A figure a little too tall for the
# space left is scaled down (to >= 60 %), one alone on its slide as far as needed. Text is never shrunk. A piece
# still too tall is flagged (data-course-overflow), which tests/browser and tools/slide_report.py report.
FOOTER_JS = r"""
<script>
(function () {
  var reveal = document.querySelector('.reveal');
  if (reveal) { reveal.classList.add('course-measuring'); }
})();
require(
  {waitSeconds: 30},
  ["%(reveal)s/dist/reveal.js", "%(reveal)s/plugin/notes/notes.js", "%(reveal)s/plugin/zoom/zoom.js",
   "%(reveal)s/plugin/search/search.js"],
  function (Reveal, RevealNotes, RevealZoom, RevealSearch) {
    window.Reveal = Reveal;  // for the browser tests and the console
    var ROOM = %(height)d - %(footer)d - 6, CONTINUED = %(continued)s;  // 6 px to spare
    var reveal = document.querySelector('.reveal');
    function mathDone() {
      return new Promise(function (done) {
        if (window.MathJax && MathJax.Hub && MathJax.Hub.Register) {
          MathJax.Hub.Register.StartupHook("End", function () { MathJax.Hub.Queue(done); });
        } else { done(); }
        setTimeout(done, 20000);  // never wait forever for MathJax
      });
    }
    function imagesDone() {
      return Promise.all([].slice.call(document.querySelectorAll('.reveal img')).map(function (img) {
        return img.complete ? null : new Promise(function (ok) { img.onload = img.onerror = ok; });
      }));
    }
    function leaves() {
      return [].slice.call(reveal.querySelectorAll('.slides section')).filter(function (s) {
        return !s.querySelector('section');
      });
    }
    function units(section) {
      return [].slice.call(section.children).filter(function (el) {
        return !el.matches('aside.notes, .course-continued');
      });
    }
    function continuedHeading(from) {
      var h = from.querySelector('h1, h2, h3');
      var made = document.createElement('h2');
      made.className = 'course-continued';
      if (h) {
        var copy = h.cloneNode(true);
        [].slice.call(copy.querySelectorAll('.anchor-link, .course-continued-mark')).forEach(function (a) {
          a.remove();
        });
        [].slice.call(copy.querySelectorAll('[id]')).forEach(function (e) { e.removeAttribute('id'); });
        made.innerHTML = copy.innerHTML + ' ';
      }
      var mark = document.createElement('span');
      mark.className = 'course-continued-mark';
      mark.textContent = CONTINUED;
      made.appendChild(mark);
      return made;
    }
    function refine(unit) {  // split one piece that is too tall into smaller ones, in place
      if (unit.classList.contains('fragment') && unit.children.length > 1) {
        [].slice.call(unit.children).forEach(function (child) {
          var one = document.createElement('div');
          one.className = unit.className;
          one.appendChild(child);
          unit.parentNode.insertBefore(one, unit);
        });
        unit.remove();
        return true;
      }
      var cell = unit.classList.contains('fragment') ? unit.firstElementChild : unit;
      if (cell && cell.classList.contains('jp-CodeCell') && !cell.classList.contains('course-outputs')) {
        var input = cell.querySelector(':scope > .jp-Cell-inputWrapper');
        var output = cell.querySelector(':scope > .jp-Cell-outputWrapper');
        if (input && output) {
          var part = document.createElement('div');
          part.className = cell.className + ' course-outputs';
          part.appendChild(output);
          var wrap = part;
          if (unit !== cell) {
            wrap = document.createElement('div');
            wrap.className = unit.className;
            wrap.appendChild(part);
          }
          unit.parentNode.insertBefore(wrap, unit.nextSibling);
          return true;
        }
      }
      return false;
    }
    function visibleKids(el) {
      return [].slice.call(el.children).filter(function (k) {
        return !k.matches('script, style, aside.notes, .jp-Collapser') && k.getClientRects().length;
      });
    }
    function container(el) {  // a block whose children can go to different slides
      return /^(DIV|UL|OL|TABLE|TBODY|BLOCKQUOTE|DL)$/.test(el.tagName) && !/MathJax/.test(el.className || '')
        && !el.matches('.course-static-widget, .jp-OutputArea-output.jp-RenderedImage');
    }
    function textOf(html) { var d = document.createElement('div'); d.innerHTML = html; return d.textContent; }
    // A <pre> (code or printed output) that does not fit above `limit`: the lines that fit stay, the others go to
    // a new <pre> after it (returned), cut after a blank line, else before a line that starts a statement.
    function splitPre(pre, limit) {
      var whole = pre.innerHTML, lines = whole.replace(/\n$/, '').split('\n'), lo = 0, hi = lines.length;
      while (lo < hi) {  // the most lines that fit
        var mid = (lo + hi + 1) >> 1;
        pre.innerHTML = lines.slice(0, mid).join('\n');
        if (pre.getBoundingClientRect().bottom <= limit) { lo = mid; } else { hi = mid - 1; }
      }
      pre.innerHTML = whole;
      if (lo < 3 || lo >= lines.length) { return null; }
      var texts = lines.map(textOf), cut = -1, i, least = Math.max(2, Math.ceil(lo / 2));
      for (i = lo; i >= least && cut < 0; i--) {
        if (!texts[i - 1].trim() && texts[i].trim()) { cut = i; }
      }
      for (i = lo; i >= least && cut < 0; i--) {
        if (/^\S/.test(texts[i]) && !/^[)\]}]/.test(texts[i]) && !/[,(\[{\\:]\s*$/.test(texts[i - 1])) { cut = i; }
      }
      if (cut < 0) { cut = lo; }
      var head = lines.slice(0, cut), tail = lines.slice(cut);
      while (head.length > 1 && !textOf(head[head.length - 1]).trim()) { head.pop(); }
      while (tail.length > 1 && !textOf(tail[0]).trim()) { tail.shift(); }
      var rest = pre.cloneNode(false);
      rest.removeAttribute('id');
      pre.innerHTML = head.join('\n');
      rest.innerHTML = tail.join('\n');
      pre.parentNode.insertBefore(rest, pre.nextSibling);
      return rest;
    }
    // Where to cut `el` so that its first part ends above `limit`: the first node of the second part (a paragraph,
    // list item, table row, output, or the lines of a <pre> split off), or null. A heading stays with what follows.
    function findCut(el, limit) {
      var kids = visibleKids(el);
      var i = kids.findIndex(function (k) { return k.getBoundingClientRect().bottom > limit + 0.5; });
      if (i < 0) { return null; }
      var inner = null;
      if (kids[i].tagName === 'PRE') { inner = splitPre(kids[i], limit); }
      else if (container(kids[i])) { inner = findCut(kids[i], limit); }
      if (inner || el.tagName === 'TABLE') { return inner; }
      var j = i;
      while (j > 0 && /^H[1-6]$/.test(kids[j - 1].tagName)) { j--; }
      return j > 0 ? kids[j] : null;
    }
    function trailing(unit) {  // margins and paddings below the last line of `unit`, inside it
      var last = unit, kids;
      while ((kids = visibleKids(last)).length && !/^(P|LI|H[1-6]|TR|PRE|IMG|FIGURE)$/.test(last.tagName)) {
        last = kids[kids.length - 1];
      }
      return Math.max(0, unit.getBoundingClientRect().bottom - last.getBoundingClientRect().bottom);
    }
    // Move `node`, the nodes after it, and the same in each of its ancestors up to `unit`, into copies of those
    // ancestors: a second `unit` right after the first. Lists keep their numbering, tables their header row.
    function splitAt(unit, node) {
      var moving = node, parent = node.parentNode, inner = null;
      for (;;) {
        var copy = parent.cloneNode(false);
        copy.removeAttribute('id');
        if (inner) { copy.appendChild(inner); }
        for (var n = moving; n;) { var next = n.nextSibling; copy.appendChild(n); n = next; }
        if (parent.tagName === 'OL') {
          copy.setAttribute('start', parseInt(parent.getAttribute('start') || '1', 10) + parent.children.length);
        }
        var thead = parent.tagName === 'TABLE' && parent.querySelector(':scope > thead');
        if (thead && !copy.querySelector(':scope > thead')) {
          copy.insertBefore(thead.cloneNode(true), copy.firstChild);
        }
        if (parent === unit) { unit.parentNode.insertBefore(copy, unit.nextSibling); return copy; }
        inner = copy;
        moving = parent.nextSibling;
        parent = parent.parentNode;
      }
    }
    // Scale the tallest figure in `el` down by `excess` px, if it keeps at least `keep` of its height.
    function shrinkFigure(el, excess, keep) {
      var imgs = [].slice.call(el.querySelectorAll('img')).filter(function (img) {
        return img.offsetHeight > 0 && !img.closest('aside.notes');
      });
      if (!imgs.length) { return false; }
      var img = imgs.reduce(function (a, b) { return b.offsetHeight > a.offsetHeight ? b : a; });
      var height = img.offsetHeight, want = Math.floor(height - excess - 2);
      if (want < Math.max(80, keep * height)) { return false; }
      img.style.maxHeight = want + 'px';
      img.style.width = 'auto';
      img.style.height = 'auto';
      img.classList.add('course-scaled');
      return true;
    }
    function split(section) {
      for (var guard = 0; guard < 80 && section.offsetHeight > ROOM + 1; guard++) {
        var parts = units(section), box = section.getBoundingClientRect();
        // The room for the pieces' boxes: less the margins below the last one (inside the slide, see the CSS).
        var lowest = Math.max.apply(null, parts.map(function (u) { return u.getBoundingClientRect().bottom; }));
        var limit = box.top + ROOM - Math.max(0, box.bottom - lowest);
        var cut = parts.findIndex(function (u) { return u.getBoundingClientRect().bottom > limit + 0.5; });
        if (cut < 0) { break; }
        var unit = parts[cut], excess = section.offsetHeight - ROOM;
        if (refine(unit)) { continue; }
        // A figure a little too tall for the space left is scaled; one much too tall goes to the next slide.
        if (cut === parts.length - 1 && shrinkFigure(unit, excess, cut === 0 ? 0 : 0.6)) { continue; }
        // A piece alone too tall for a slide, or text, is cut between its blocks / list items / rows / lines.
        var markdown = unit.matches('.jp-MarkdownCell') || !!unit.querySelector(':scope > .jp-MarkdownCell');
        var node = (cut === 0 || markdown) ? findCut(unit, limit - trailing(unit)) : null;
        if (node) { splitAt(unit, node); continue; }
        if (cut === 0 && parts.length > 1) { cut = 1; }
        if (cut <= 0) { break; }
        var next = document.createElement('section');
        next.setAttribute('data-course-continued', '');
        next.setAttribute('data-course-split', '');
        next.appendChild(continuedHeading(section));
        parts.slice(cut).forEach(function (u) { next.appendChild(u); });
        section.parentNode.insertBefore(next, section.nextSibling);
        section = next;
      }
    }
    function lastResort(section) {  // still too tall: scale its tallest figure to fit, whatever it takes; else flag
      if (section.offsetHeight > ROOM + 1) { shrinkFigure(section, section.offsetHeight - ROOM, 0); }
      if (section.offsetHeight > ROOM + 1) { section.setAttribute('data-course-overflow', ''); }
    }
    function layoutSlides() {
      // A notes cell after a fragment cell lands inside that fragment, and reveal would show those notes only
      // while that fragment is the newest one shown: make every note a note of its whole slide, as in RISE.
      document.querySelectorAll('.reveal .slides .fragment aside.notes').forEach(function (note) {
        note.closest('section').appendChild(note);
      });
      var all = leaves(), last = null;
      all.forEach(function (s, i) {
        if (i > 0 && !s.querySelector('h1, h2, h3') && last) {
          s.insertBefore(continuedHeading(last), s.firstChild);
          s.setAttribute('data-course-continued', '');
        }
        if (s.querySelector('h1, h2, h3')) { last = s; }
      });
      all.forEach(split);
      leaves().forEach(lastResort);
      reveal.classList.remove('course-measuring');
    }
    function start() {
      Reveal.initialize({
        controls: true,
        progress: true,
        hash: true,
        center: false,
        transition: "%(transition)s",
        slideNumber: "c/t",
        width: %(width)d,
        height: %(height)d,
        margin: 0,
        minScale: 0.2,
        maxScale: 2.0,
        pdfMaxPagesPerSlide: 1,
        pdfSeparateFragments: false,
        plugins: [RevealNotes, RevealZoom, RevealSearch]
      });
    }
    Promise.all([mathDone(), imagesDone(), document.fonts ? document.fonts.ready : null])
      .then(layoutSlides, layoutSlides).then(start);
  }
);
</script>
"""

TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{% block body_header %}
<style type="text/css">
__CSS__
</style>
{{ super() }}
{% endblock body_header %}
{% block body_footer %}
</div>
</div>
<div class="course-footer">__FOOTER__</div>
</main>
</body>
{% endblock body_footer %}
{% block footer_js %}
__FOOTER_JS__
{% endblock footer_js %}
"""

CONTINUED = {"en": "(continued)", "zh": "（续）"}
STATIC_CAPTION = {"en": "Static figure at default settings", "zh": "静态图：默认设置"}
STATIC_HINT = {"en": "move the controls live in JupyterLab", "zh": "在 JupyterLab 里可以实时调节"}

COURSE_NAME = {"en": "Transformers from scratch", "zh": "从零实现 Transformer"}


def build_instructor_edition() -> None:
    """Write the instructor edition (every cell, speaker notes included) into :data:`NOTEBOOKS`, from the sources."""
    sys.path.insert(0, str(REPO / "tools"))
    import build_notebooks

    if build_notebooks.main(["--edition", "instructor", "--out-dir", str(NOTEBOOKS)]) != 0:
        raise SystemExit("export_slides: the instructor edition does not build (see the errors above)")


def lessons(lang: str, wanted: list[str] | None = None, folder: Path = NOTEBOOKS) -> list[Path]:
    """The lesson notebooks of one language in ``folder`` (default: the instructor edition), sorted; ``wanted``
    filters by number ("02") or name."""
    found = sorted(p for p in (folder / lang).glob("*.ipynb") if LESSON_RE.match(p.name))
    if not wanted:
        return found

    def matches(path: Path, word: str) -> bool:
        return path.stem in (word, Path(word).stem) or path.stem.startswith(f"{word}_")

    unknown = [w for w in wanted if not any(matches(p, w) for p in found)]
    if unknown:
        raise SystemExit(f"export_slides: no lesson {', '.join(unknown)} in {folder / lang} "
                         f"(there are: {', '.join(p.stem[:2] for p in found)})")
    return [p for p in found if any(matches(p, w) for w in wanted)]


def copy_assets(dest: Path, node_modules: Path = NODE_MODULES) -> int:
    """Copy the JavaScript/CSS/fonts the decks need into ``dest`` (``<out>/<lang>/assets``); returns bytes."""
    missing = [pkg for pkg, _ in ASSETS.values() if not (node_modules / pkg / "package.json").is_file()]
    if missing:
        raise SystemExit(f"export_slides: {', '.join(missing)} not found in {node_modules}. Install the slide "
                         "assets first (needs npm, once): npm ci --prefix slides   (or simply: make slides)")
    total = 0
    for name, (pkg, patterns) in ASSETS.items():
        src_root = node_modules / pkg
        for pattern in patterns:
            files = [p for p in src_root.glob(pattern) if p.is_file()]
            if not files:
                raise SystemExit(f"export_slides: {pkg}/{pattern} matched no file: did the npm package change? "
                                 "(see slides/package.json)")
            for src in files:
                target = dest / name / src.relative_to(src_root)
                if not target.exists() or target.stat().st_size != src.stat().st_size:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(src, target)
                total += src.stat().st_size
    return total


# Run first in every exported notebook's kernel (then removed from the deck). A lesson widget (LessonWidget)
# shows, instead of controls that nothing would answer in a static deck, its figure as it is when the cell shows
# it, i.e. at the widget's default settings, captioned as a static figure. Missing glyphs are errors.
KERNEL_SETUP = r'''
import warnings as _course_warnings
_course_warnings.filterwarnings("error", message="Glyph", category=UserWarning)


def _course_static_widgets(caption, hint, lang):
    import base64
    import html
    import importlib
    import io

    from IPython.display import HTML, display

    def show(self):
        if self.figure is None:
            raise RuntimeError(f"the widget has no figure to show (last error: {self.error})")
        buffer = io.BytesIO()
        self.figure.savefig(buffer, format="png", bbox_inches="tight")
        settings = []
        if len(self.controls) <= 4:
            for name, control in self.controls.items():
                value = getattr(control, "label", None) if hasattr(control, "options") else control.value
                settings.append(f"{control.description or name} = {value}")
        if lang == "zh":
            text = caption + (f"（{'，'.join(settings)}）" if settings else "") + f"；{hint}。"
        else:
            text = caption + (f" ({', '.join(settings)})" if settings else "") + f"; {hint}."
        image = base64.b64encode(buffer.getvalue()).decode("ascii")
        display(HTML(f'<figure class="course-static-widget"><img src="data:image/png;base64,{image}" '
                     f'alt="{html.escape(caption)}"><figcaption>{html.escape(text)}</figcaption></figure>'))

    for name in ("course_lab.widgets", "course_utils.widgets"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "LessonWidget"):
            module.LessonWidget._ipython_display_ = show


_course_static_widgets(%(caption)r, %(hint)r, %(lang)r)
del _course_static_widgets
'''

# Run last in a Chinese notebook's kernel: a figure with Chinese text must draw without a missing glyph, whether or
# not the lesson drew one (matplotlib's font cache can predate the CJK font: then it falls back to boxes).
CJK_PROBE = r'''
import io as _course_io
import warnings as _course_warnings

import matplotlib.pyplot as _course_plt

_course_figure = _course_plt.figure(figsize=(2, 1))
_course_figure.text(0.1, 0.4, "位置编码与注意力")
try:
    with _course_warnings.catch_warnings():
        _course_warnings.simplefilter("error")
        _course_figure.savefig(_course_io.BytesIO(), format="png")
except UserWarning as _course_error:
    import matplotlib as _course_mpl
    raise RuntimeError(
        f"matplotlib draws Chinese as empty boxes ({_course_error}); fonts tried: "
        f"{_course_mpl.rcParams['font.family']} / {_course_mpl.rcParams['font.sans-serif'][:6]}. Install a CJK font "
        "(fonts-noto-cjk or fonts-wqy-microhei); if one is installed, matplotlib's font cache predates it: delete "
        f"{_course_mpl.get_cachedir()}/fontlist-*.json and run again") from None
finally:
    _course_plt.close(_course_figure)
'''


class ExportError(RuntimeError):
    """A deck cannot be exported honestly; the message names the deck and the cell."""


def _first_line(source: str) -> str:
    lines = [line.strip() for line in source.splitlines() if line.strip()]
    return (lines[0][:70] if lines else "").replace("\n", " ")


def execute(path: Path, lang: str, timeout: int):
    """Run the notebook in its own folder with its language; a cell error, a warning or a missing glyph fails."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    class Client(NotebookClient):
        """nbclient plays the front end of ipywidgets: it echoes widget state back to the kernel, on the shell
        socket that it is reading the cell's reply from at the same moment. Now and then that reply is then never
        seen and the export hangs until the cell timeout (jupyter/nbclient#312). The deck keeps no widget: skip
        the echo."""

        def on_comm_open_jupyter_widget(self, msg):
            widget = super().on_comm_open_jupyter_widget(msg)
            if widget is not None and hasattr(widget, "sync_state"):
                widget.sync_state = lambda: None
            return widget

    nb = nbformat.read(path, as_version=4)
    deck = f"{lang}/{path.stem}"
    setup = nbformat.v4.new_code_cell(KERNEL_SETUP % {"caption": STATIC_CAPTION[lang], "hint": STATIC_HINT[lang],
                                                   "lang": lang})
    probe = nbformat.v4.new_code_cell(CJK_PROBE)
    nb.cells = [setup, *nb.cells] + ([probe] if lang == "zh" else [])
    # store_widget_state: nbclient's comm bookkeeping needs it (KeyError otherwise); the deck drops the state.
    client = Client(nb, timeout=timeout, kernel_name="python3", store_widget_state=True,
                    resources={"metadata": {"path": str(path.parent)}})
    # COURSE_LANG: labels and messages in the deck's language, whatever folder the kernel is started from.
    env = {**os.environ, "COURSE_LANG": lang,
           "PYTHONWARNINGS": ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"), "error:Glyph:UserWarning"]))}
    try:
        client.execute(env=env)
    except CellExecutionError as err:
        index = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code" and any(
            o.get("output_type") == "error" for o in c.get("outputs", []))), None)
        where = ("the Chinese-font check after the last cell" if index == len(nb.cells) - 1 and lang == "zh"
                 else f"cell {index - 1} ({_first_line(nb.cells[index].source)!r})" if index else "a cell")
        raise ExportError(f"{deck}: {where} failed: {err.ename}: {err.evalue}"[:3000]) from None
    nb.cells = nb.cells[1:len(nb.cells) - (lang == "zh")]
    nb.metadata.pop("widgets", None)  # no widget is shown in a deck (loud_outputs): no state, no renderer
    return nb


WARNING_RE = re.compile(r"\b\w*(Warning|Error)\b|Traceback \(most recent call last\)")


def loud_outputs(nb, deck: str) -> None:
    """Fail on what an executed deck must not hide: a warning or traceback on stderr, an error output that the
    cell does not expect, a widget (its controls would look live but do nothing without a kernel)."""
    problems = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        where = f"cell {index} ({_first_line(cell.source)!r})"
        for out in cell.get("outputs", []):
            kind = out.get("output_type")
            if kind == "stream" and out.get("name") == "stderr" and WARNING_RE.search(out.get("text", "")):
                problems.append(f"{where} printed on stderr: {out['text'].strip()[:300]}")
            elif kind == "error" and "raises-exception" not in cell.metadata.get("tags", []):
                problems.append(f"{where} raised {out.get('ename')}: {out.get('evalue', '')[:200]}")
            elif "application/vnd.jupyter.widget-view+json" in out.get("data", {}):
                problems.append(f"{where} shows an ipywidget, which would look live but do nothing in the deck: "
                                "use a LessonWidget (shown as a static figure) or mark the cell `skip`")
    if problems:
        raise ExportError(f"{deck}: " + "\n  ".join(problems))


CHECK_CALL = re.compile(r"^(check|assert)")


def _is_check(source: str) -> bool:
    """A cell that only checks: asserts, assert_*(...), check*(...) calls, possibly assigned to `_`."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False

    def check_call(node) -> bool:
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        return bool(CHECK_CALL.match(name))

    for node in tree.body:
        if isinstance(node, ast.Assert):
            continue
        if isinstance(node, ast.Expr) and check_call(node.value):
            continue
        if (isinstance(node, ast.Assign) and check_call(node.value)
                and all(isinstance(t, ast.Name) and t.id == "_" for t in node.targets)):
            continue
        return False
    return bool(tree.body)


# Top-level statements that a slide does not need, left out of the code *shown* (they still run): checks
# (assert, assert_*/check*(...) calls, e.g. torch.testing.assert_close) and plotting boilerplate.
BOILERPLATE_CALLS = {"display", "plt.close", "plt.show", "plt.tight_layout", "fig.tight_layout",
                     "matplotlib.pyplot.close", "plt.figure().tight_layout"}
# Code lines that fit one slide under its heading: 686 px of room, ~90 px of heading, 23.4 px per 18 px code line.
MAX_CODE_LINES = 22
CODE_COLUMNS = 108  # characters of 18 px monospace in a line (1280 px less padding); CJK characters count 2


def _dotted(node) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _left_out(node) -> bool:
    """A top-level statement that a slide leaves out: a check or plotting boilerplate (see _shown_source)."""
    if isinstance(node, ast.Assert):
        return True
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        name = _dotted(node.value.func)
        return name in BOILERPLATE_CALLS or bool(CHECK_CALL.match(name.rsplit(".", 1)[-1]))
    return False


def _shown_source(source: str) -> str:
    """The code a slide shows: the cell without its top-level checks and plotting boilerplate (with the comment
    lines right above them), blank lines collapsed. The cell itself is unchanged and runs as written."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    lines = source.splitlines()
    drop = set()
    for node in tree.body:
        if not _left_out(node):
            continue
        first = node.lineno - 1
        while first > 0 and lines[first - 1].lstrip().startswith("#") and not lines[first - 1].startswith(" "):
            first -= 1  # the comment that introduces the check goes with it
        drop.update(range(first, node.end_lineno))
    if not drop or len(drop) == len(lines):
        return source
    kept = [line for i, line in enumerate(lines) if i not in drop]
    text = re.sub(r"\n{3,}", "\n\n\n", "\n".join(kept))
    return text.strip("\n")


def _width(line: str) -> int:
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in line.rstrip())


def _rows(line: str) -> int:
    """Screen rows of one code line on a slide (long lines wrap)."""
    return max(1, -(-_width(line) // CODE_COLUMNS))


def _cut_costs(source: str) -> list[float]:
    """cost[i]: how bad it is to end a slide before line i. Best between top-level statements after a blank line,
    then between top-level statements, then between statements of a block; inside a statement, last resort."""
    lines = source.splitlines()
    cost = [100.0] * (len(lines) + 1)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        tree = None
    for node in ast.walk(tree) if tree else ():
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            for depth_node in block if isinstance(block, list) else ():
                if not isinstance(depth_node, ast.stmt):
                    continue
                start = min([depth_node.lineno] + [d.lineno for d in getattr(depth_node, "decorator_list", [])]) - 1
                while start > 0 and lines[start - 1].lstrip().startswith("#"):
                    start -= 1  # a comment belongs to the statement below it
                if start <= 0:
                    continue
                nested = not isinstance(node, ast.Module)
                blank = not lines[start - 1].strip()
                cost[start] = min(cost[start], (4.0 if nested else 0.0) + (0.0 if blank else 1.5))
    if tree is None:
        for i in range(1, len(lines)):
            if not lines[i - 1].strip() and lines[i].strip():
                cost[i] = 2.0
    return cost


def split_code(source: str, max_rows: int = MAX_CODE_LINES) -> list[str]:
    """A code cell too long for one slide, as consecutive parts that each fit one (at most ``max_rows`` screen
    rows), as few parts as possible, cut where the code reads well on its own (see _cut_costs), of similar size."""
    lines = source.splitlines()
    rows = [_rows(line) for line in lines]
    if sum(rows) <= max_rows:
        return [source]
    cost = _cut_costs(source)
    n = len(lines)
    prefix = [0]
    for r in rows:
        prefix.append(prefix[-1] + r)
    # best[j] = (parts, badness, previous cut) for the first j lines: the least badness
    best: list[tuple[int, float, int] | None] = [None] * (n + 1)
    best[0] = (0, 0.0, -1)
    for j in range(1, n + 1):
        if j < n and not lines[j].strip():
            continue  # never start a part with a blank line
        for i in range(j - 1, -1, -1):
            size = prefix[j] - prefix[i]
            if size > max_rows:
                break
            if best[i] is None:
                continue
            parts, badness, _ = best[i]
            # One more slide costs as much as two cuts between top-level statements without a blank line.
            step = 3.0 + (cost[j] if j < n else 0.0) + 0.002 * (max_rows - size) ** 2
            candidate = (parts + 1, badness + step, i)
            if best[j] is None or candidate[1] < best[j][1]:
                best[j] = candidate
    if best[n] is None:  # a single line longer than a slide: leave it to the browser
        return [source]
    cuts, j = [], n
    while j > 0:
        cuts.append(j)
        j = best[j][2]
    bounds = [0, *reversed(cuts)]
    return ["\n".join(lines[a:b]).strip("\n") for a, b in zip(bounds, bounds[1:])]


def curate(nb, resources):
    """What a room needs: cells that only check (asserts, exercise checks) leave the slides, their slide break
    moves to the next shown cell; the code shown drops top-level checks and plotting boilerplate (_shown_source);
    a code cell longer than a slide becomes consecutive slides, cut between statements (split_code), its outputs
    after the last part; progress text on stderr is dropped (warnings failed the export already)."""
    import nbformat

    carry = None
    cells = []
    for cell in nb.cells:
        cells.append(cell)
        meta = cell.metadata.setdefault("slideshow", {})
        kind = meta.get("slide_type", "-")
        if cell.cell_type == "code" and kind not in ("skip", "notes") and _is_check(cell.source):
            meta["slide_type"] = "skip"
            if kind in ("slide", "subslide") and carry != "slide":
                carry = kind
            continue
        if carry and kind in ("-", "fragment"):
            meta["slide_type"] = carry
        if kind not in ("skip", "notes"):
            carry = None
        if cell.cell_type != "code":
            continue
        cell.outputs = [o for o in cell.get("outputs", [])
                        if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]
        if meta.get("slide_type", "-") in ("skip", "notes") or "remove-input" in cell.metadata.get("tags", []):
            continue
        cell.source = _shown_source(cell.source)
        parts = split_code(cell.source)
        if len(parts) > 1:
            outputs = cell.outputs
            cell.source, cell.outputs = parts[0], []
            for number, part in enumerate(parts[1:], 2):
                more = nbformat.v4.new_code_cell(part, metadata={"slideshow": {"slide_type": "subslide"}})
                if cell.get("id"):
                    more.id = f"{cell.id[:50]}-{number}"  # stable: the same deck every export
                more.execution_count = cell.get("execution_count")
                cells.append(more)
            cells[-1].outputs = outputs
    nb.cells = cells
    # nbconvert's SlidesExporter turned slide types into section starts and ends before this preprocessor ran:
    # do it again for the slide types set here.
    from nbconvert.exporters.slides import _RevealMetadataPreprocessor

    for cell in nb.cells:
        for key in REVEAL_KEYS:
            cell.metadata.pop(key, None)
    return _RevealMetadataPreprocessor().preprocess(nb, resources)


REVEAL_KEYS = ("slide_type", "slide_start", "slide_end", "subslide_start", "subslide_end", "fragment_start",
               "fragment_end")


def build_exporter(lang: str, title: str):
    from nbconvert import SlidesExporter
    from nbconvert.preprocessors import TagRemovePreprocessor

    footer = f"{COURSE_NAME[lang]} · {title}"
    css = CSS % {"sans": SANS, "mono": MONO, "course": COURSE_NAME[lang], "width": DECK_WIDTH}
    footer_js = FOOTER_JS % {"reveal": URLS["reveal_url_prefix"], "transition": "slide", "width": DECK_WIDTH,
                             "height": DECK_HEIGHT, "footer": FOOTER_HEIGHT,
                             "continued": json.dumps(CONTINUED[lang], ensure_ascii=False)}
    template = (TEMPLATE.replace("__CSS__", css).replace("__FOOTER__", _escape(footer))
                .replace("__FOOTER_JS__", footer_js))
    exporter = SlidesExporter(
        reveal_url_prefix=URLS["reveal_url_prefix"],
        require_js_url=URLS["require_js_url"],
        jquery_url=URLS["jquery_url"],
        mathjax_url=URLS["mathjax_url"],
        # Never let a default CDN address into a deck (the decks keep no widget, the template drops mermaid).
        widget_renderer_url="", mermaid_js_url="", mermaid_layout_elk_js_url="", font_awesome_url="",
        reveal_theme="white",
        language_code=lang,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
    )
    exporter.raw_template = template
    tags = TagRemovePreprocessor(remove_input_tags={"hide-input", "remove-input"},
                                 remove_cell_tags={"remove-cell"}, enabled=True)
    exporter.register_preprocessor(tags, enabled=True)
    exporter.register_preprocessor(curate, enabled=True)
    return exporter


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _title(nb, path: Path) -> str:
    """The lesson title: the first heading of the first markdown cell, else the file name."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
            break
    return path.stem


def export_one(path: str, lang: str, out: str, run: bool, timeout: int) -> tuple[str, float, float]:
    """Export one notebook (in a worker process); returns (output file, seconds executing, seconds exporting)."""
    import nbformat

    path_, out_ = Path(path), Path(out)
    t0 = time.perf_counter()
    nb = execute(path_, lang, timeout) if run else nbformat.read(path_, as_version=4)
    if run:
        loud_outputs(nb, f"{lang}/{path_.stem}")
    t1 = time.perf_counter()
    title = _title(nb, path_)
    nb.metadata["title"] = title
    body, _ = build_exporter(lang, title).from_notebook_node(nb, resources={"metadata": {"name": path_.stem}})
    body = notes_maths(body, f"{lang}/{path_.stem}")
    target = out_ / lang / f"{path_.stem}.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(body, encoding="utf-8")
    return str(target), t1 - t0, time.perf_counter() - t1


NOTES_RE = re.compile(r'<aside class="notes">(.*?)</aside>', re.S)
NOTES_MATH_RE = re.compile(r"\$\$(.+?)\$\$|\$([^$\n]+?)\$", re.S)


def notes_maths(body: str, deck: str) -> str:
    """Maths in speaker notes as pictures: reveal's speaker view (key s) is a separate window without MathJax,
    where TeX would show as source. Each $...$ becomes an inline SVG drawn by matplotlib's mathtext; a formula
    mathtext cannot draw stays TeX source, with a note on stderr naming the deck."""
    if "<aside" not in body:
        return body

    def svg(tex: str) -> str:
        import base64
        import io

        from matplotlib import mathtext
        from matplotlib.font_manager import FontProperties

        buffer = io.BytesIO()
        tex_ = re.sub(r"\\sqrt\s+(\w)", r"\\sqrt{\1}", tex.strip())  # \sqrt 2 -> \sqrt{2}: mathtext needs braces
        try:
            mathtext.math_to_image(f"${tex_}$", buffer, prop=FontProperties(size=16), format="svg")
        except (ValueError, RuntimeError) as err:
            first = str(err).strip().splitlines()[-1][:120]
            print(f"note: {deck}: speaker notes keep ${tex}$ as TeX (matplotlib's mathtext: {first})",
                  file=sys.stderr)
            return f"<code>${_escape(tex)}$</code>"
        data = base64.b64encode(buffer.getvalue()).decode("ascii")
        return (f'<img class="course-notes-math" style="vertical-align: middle" alt="{_escape(tex)}" '
                f'src="data:image/svg+xml;base64,{data}">')

    def note(match) -> str:
        html_ = NOTES_MATH_RE.sub(lambda m: svg(_unescape(m.group(1) or m.group(2))), match.group(1))
        return f'<aside class="notes tex2jax_ignore">{html_}</aside>'

    return NOTES_RE.sub(note, body)


def _unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def write_index(out: Path) -> None:
    """build/slides/index.html: every lesson by number and title, with its deck in each language."""
    import nbformat

    rows = {}
    for lang in LANGS:
        for deck in sorted((out / lang).glob("*.html")):
            source = NOTEBOOKS / lang / f"{deck.stem}.ipynb"
            title = _title(nbformat.read(source, as_version=4), source) if source.is_file() else deck.stem
            rows.setdefault(deck.stem[:2], {})[lang] = (f"{lang}/{deck.name}", title)
    head = "".join(f"<th>{_escape(COURSE_NAME[lang])}</th>" for lang in LANGS)
    lines = []
    for number in sorted(rows):
        cells = "".join(f'<td><a href="{rows[number][lang][0]}" lang="{lang}">{_escape(rows[number][lang][1])}</a></td>'
                        if lang in rows[number] else "<td></td>" for lang in LANGS)
        lines.append(f"<tr><td>{number}</td>{cells}</tr>")
    (out / "index.html").write_text(
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Slides · 幻灯片</title>'
        f"<style>body{{font-family:{SANS};margin:2em auto;max-width:60em;font-size:20px}}"
        "td,th{padding:0.3em 0.8em;text-align:left}</style></head>\n<body>\n"
        f"<h1>{_escape(COURSE_NAME['en'])} · {_escape(COURSE_NAME['zh'])}</h1>\n"
        f"<table>\n<tr><th></th>{head}</tr>\n" + "\n".join(lines) + "\n</table>\n</body></html>\n",
        encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--execute", action=argparse.BooleanOptionalAction, default=True,
                        help="run the notebooks first so that figures and widgets appear (default: yes)")
    parser.add_argument("--lessons", nargs="+", metavar="NN",
                        help="lesson numbers or names (default: all), e.g. --lessons 02 06")
    parser.add_argument("--langs", nargs="+", choices=LANGS, default=list(LANGS))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: build/slides)")
    parser.add_argument("--jobs", "-j", type=int, default=1,
                        help="notebooks executed in parallel, each with its own kernel (default: 1)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds one cell may run (default: 900)")
    args = parser.parse_args(argv)

    out = args.out.resolve()
    build_instructor_edition()
    todo = [(p, lang) for lang in args.langs for p in lessons(lang, args.lessons)]
    if not todo:
        raise SystemExit(f"export_slides: no lesson notebooks found under {NOTEBOOKS}")
    start = time.perf_counter()
    for lang in sorted({lang for _, lang in todo}):
        size = copy_assets(out / lang / "assets")
        print(f"assets: {out / lang / 'assets'} ({size / 1e6:.1f} MB)")
    failures = []

    def report(p: Path, lang: str, outcome) -> None:
        if isinstance(outcome, Exception):  # report every failing lesson, not only the first
            failures.append(f"{lang}/{p.name}: {type(outcome).__name__}: {outcome}")
            print(f"FAILED {lang}/{p.name}: {type(outcome).__name__}: {str(outcome)[:2000]}", file=sys.stderr)
            return
        target, t_run, t_export = outcome
        what = f"executed in {t_run:.1f} s, " if args.execute else ""
        print(f"{lang}/{Path(target).name}: {what}exported in {t_export:.1f} s", flush=True)

    if args.execute:
        # Every notebook in a fresh process (spawned, used once), --jobs at a time: no state carries over from
        # one kernel client to the next, and a crash takes down one lesson only.
        pool = concurrent.futures.ProcessPoolExecutor(max_workers=max(1, args.jobs), max_tasks_per_child=1,
                                                      mp_context=multiprocessing.get_context("spawn"))
        with pool:
            futures = {pool.submit(export_one, str(p), lang, str(out), True, args.timeout): (p, lang)
                       for p, lang in todo}
            for future in concurrent.futures.as_completed(futures):
                try:
                    outcome = future.result()
                except Exception as err:
                    outcome = err
                report(*futures[future], outcome)
    else:
        # Nothing runs: convert in this process, one deck after the other (a second or two each).
        for p, lang in todo:
            try:
                outcome = export_one(str(p), lang, str(out), False, args.timeout)
            except Exception as err:
                outcome = err
            report(p, lang, outcome)
    write_index(out)
    mode = "executed" if args.execute else "not executed"
    print(f"{len(todo) - len(failures)}/{len(todo)} decks ({mode}) in {time.perf_counter() - start:.1f} s: "
          f"{out}/index.html")
    if failures:
        print("failed:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
