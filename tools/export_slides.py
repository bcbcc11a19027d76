"""Export the lesson notebooks to reveal.js slide decks that work without internet.

    python tools/export_slides.py                      # every lesson, EN and ZH, executed (what `make slides` runs)
    python tools/export_slides.py --no-execute         # structure, text and maths only: fast
    python tools/export_slides.py --lessons 02 06 --langs zh

Each notebook ``notebooks/{en,zh}/NN_name.ipynb`` becomes ``build/slides/{en,zh}/NN_name.html``. Everything a
deck loads (reveal.js, require.js, jQuery, MathJax 2, the ipywidgets HTML manager) is copied from the npm
packages in ``slides/node_modules`` (``npm ci --prefix slides``) into ``build/slides/{en,zh}/assets/`` and
referenced by *relative* URLs: zip ``build/slides`` (or one language folder), unzip it anywhere and open a deck
from disk or from any web server; nothing is fetched from the internet. (The assets sit next to the decks of
each language, not one level up, because Firefox refuses fonts from a parent folder of a ``file://`` page.)

``--execute`` (the default) runs every notebook first, in its own folder and with its language, and keeps the
widget state (``store_widget_state``): figures, printed results and the lesson widgets appear in the slides (the
widgets are drawn from the saved state: their controls show, but moving them needs a live kernel, i.e. RISE in
JupyterLab). ``--no-execute`` exports the notebooks as they are committed (no outputs).

Slide structure comes from each cell's ``metadata.slideshow.slide_type``: ``slide`` starts a new slide,
``subslide`` a slide below it, ``fragment`` appears on the next key press, ``notes`` go to the speaker view
(key ``s``), ``skip`` is left out (setup code, test-only cells).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
import os
import re
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
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
    # embed-amd.js loads its icon fonts (Font Awesome) from its own folder. Its CSS offers each font as eot, woff2,
    # woff, ttf and svg; browsers take the first format they support, woff2 (woff for the oldest): 2.5 MB less.
    "html-manager": ("@jupyter-widgets/html-manager", ["dist/embed-amd.js", "dist/*.woff2", "dist/*.woff",
                                                       "dist/embed.js.LICENSE.txt"]),
}
# The URLs nbconvert's reveal template is given, relative to the deck (see build_exporter).
URLS = {
    "reveal_url_prefix": "assets/reveal.js",
    "require_js_url": "assets/requirejs/require.js",
    "jquery_url": "assets/jquery/dist/jquery.min.js",
    "mathjax_url": "assets/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe",
    "widget_renderer_url": "assets/html-manager/dist/embed-amd.js",
}

# Fonts. Latin first (Source Sans Pro ships with reveal.js); then the Chinese fonts of macOS, Windows and Linux
# (fonts-wqy-microhei, fonts-noto-cjk): the browser takes each character from the first font that has it.
CJK_FONTS = ('"PingFang SC", "Hiragino Sans GB", "Microsoft YaHei", "Noto Sans CJK SC", "Source Han Sans SC", '
             '"WenQuanYi Micro Hei", "WenQuanYi Zen Hei", "Noto Sans SC"')
SANS = f'"Source Sans Pro", "Helvetica Neue", Helvetica, Arial, {CJK_FONTS}, sans-serif'
MONO = (f'"DejaVu Sans Mono", Menlo, Consolas, "Liberation Mono", "Noto Sans Mono CJK SC", '
        f'"WenQuanYi Micro Hei Mono", {CJK_FONTS}, monospace')

DECK_WIDTH, DECK_HEIGHT = 1280, 800

CSS = """
:root {
  --course-sans: %(sans)s;
  --course-mono: %(mono)s;
  --jp-content-font-family: var(--course-sans);
  --jp-ui-font-family: var(--course-sans);
  --jp-code-font-family: var(--course-mono);
  --jp-code-font-family-default: var(--course-mono);
  --jp-content-font-size1: 22px;
  --jp-ui-font-size1: 20px;
  --jp-code-font-size: 17px;
  --jp-content-line-height: 1.45;
  --r-main-font: var(--course-sans);
  --r-heading-font: var(--course-sans);
  --r-code-font: var(--course-mono);
  --r-main-font-size: 30px;
}
body.jp-Notebook { background: #fff; }
.reveal { font-family: var(--course-sans); font-size: 30px; }
.reveal .slides { text-align: left; }
.reveal .slides section { box-sizing: border-box; padding: 0 8px; }
.reveal h1, .reveal h2, .reveal h3, .reveal h4 {
  font-family: var(--course-sans); text-transform: none; color: #1f3a60; letter-spacing: normal;
}
.reveal h1 { font-size: 1.9em; }
.reveal h2 { font-size: 1.45em; border-bottom: 3px solid #e8a33d; padding-bottom: 0.15em; margin-bottom: 0.5em; }
.reveal h3 { font-size: 1.15em; }
.reveal .jp-RenderedHTMLCommon { font-size: var(--jp-content-font-size1); line-height: 1.45; padding-right: 0; }
.reveal .jp-RenderedHTMLCommon p, .reveal .jp-RenderedHTMLCommon li { line-height: 1.45; }
.reveal .jp-RenderedHTMLCommon h1, .reveal .jp-RenderedHTMLCommon h2 { margin-top: 0.2em; }
.reveal .jp-RenderedHTMLCommon code {
  font-family: var(--course-mono); font-size: 0.9em; background: #f3f4f6; padding: 0 0.2em; border-radius: 3px;
}
.reveal .jp-RenderedHTMLCommon pre code { background: none; padding: 0; }
.reveal .jp-Cell { padding: 2px 0; }
.reveal .jp-InputArea-editor { border: none; border-left: 4px solid #8aa4c8; border-radius: 0;
  background: #f7f8fa; }
.reveal div.highlight > pre, .reveal .jp-OutputArea-output > pre {
  font-family: var(--course-mono); font-size: var(--jp-code-font-size); line-height: 1.35;
}
.reveal .jp-OutputArea-output > pre { width: 100%%; white-space: pre-wrap; }
.reveal .jp-OutputArea-output img, .reveal .jupyter-widgets img {
  max-width: 100%%; max-height: 520px; width: auto; height: auto; object-fit: contain;
}
.reveal .jupyter-widgets { font-family: var(--course-sans); font-size: 18px; }
.reveal table { font-size: 20px; margin: 0.4em 0; }
.reveal aside.notes { display: none; }
/* Title slide: the lesson's first slide, under the course name. */
.reveal .slides > section:first-of-type > section:first-of-type { padding-top: 70px; }
.reveal .slides > section:first-of-type > section:first-of-type::before {
  content: "%(course)s"; display: block; font-size: 0.8em; letter-spacing: 0.04em; color: #e8a33d;
  font-weight: 600; margin-left: 10px;
}
.reveal .slides > section:first-of-type > section:first-of-type .jp-RenderedHTMLCommon h1 {
  font-size: 2.2em; margin: 0.1em 0 0.6em; padding-bottom: 0.25em; border-bottom: 4px solid #e8a33d;
}
.course-footer {
  position: fixed; left: 16px; bottom: 10px; z-index: 30; font: 14px var(--course-sans); color: #8a94a6;
  pointer-events: none;
}
.reveal .slide-number { font-family: var(--course-sans); background: transparent; color: #8a94a6; }
"""

FOOTER_JS = """
<script>
require(
  {waitSeconds: 30},
  ["%(reveal)s/dist/reveal.js", "%(reveal)s/plugin/notes/notes.js", "%(reveal)s/plugin/zoom/zoom.js",
   "%(reveal)s/plugin/search/search.js"],
  function (Reveal, RevealNotes, RevealZoom, RevealSearch) {
    window.Reveal = Reveal;  // for the browser tests and the console
    // Too much content for one screen: shrink the slide (down to MIN_ZOOM, still readable); what is still too
    // tall scrolls (mouse wheel or trackpad over the slide) instead of being cut off.
    var MIN_ZOOM = 0.7, FOOTER = 36;  // FOOTER: the strip at the bottom kept for the footer line
    function fitSlide() {
      var slide = Reveal.getCurrentSlide();
      if (!slide) { return; }
      slide.style.zoom = '';
      slide.style.height = '';
      slide.style.overflowY = '';
      slide.removeAttribute('data-course-zoom');
      var room = Reveal.getConfig().height - FOOTER, need = slide.scrollHeight;
      if (need > room + 2) {
        var k = Math.max(MIN_ZOOM, room / need);
        slide.style.zoom = k;
        slide.setAttribute('data-course-zoom', k.toFixed(2));
        if (need * k > room + 2) {
          slide.style.height = (room / k) + 'px';
          slide.style.overflowY = 'auto';
        }
      }
    }
    function typeset() {
      if (window.MathJax && MathJax.Hub) {
        MathJax.Hub.Queue(["Rerender", MathJax.Hub, Reveal.getCurrentSlide()], fitSlide);
      } else {
        fitSlide();
      }
    }
    // A notes cell after a fragment cell lands inside that fragment, and reveal would show those notes only
    // while that fragment is the newest one shown: make every note a note of its whole slide, as in RISE.
    document.querySelectorAll('.reveal .slides .fragment aside.notes').forEach(function (note) {
      note.closest('section').appendChild(note);
    });
    Reveal.initialize({
      controls: true,
      progress: true,
      hash: true,
      center: false,
      transition: "%(transition)s",
      slideNumber: "c/t",
      width: %(width)d,
      height: %(height)d,
      margin: 0.04,
      plugins: [RevealNotes, RevealZoom, RevealSearch]
    }).then(typeset);
    Reveal.on('slidechanged', typeset);
    Reveal.on('resize', typeset);
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

COURSE_NAME = {"en": "Transformers from scratch", "zh": "从零实现 Transformer"}


def lessons(lang: str, wanted: list[str] | None = None) -> list[Path]:
    """The lesson notebooks of one language, sorted; ``wanted`` filters by number ("02") or name."""
    found = sorted(p for p in (NOTEBOOKS / lang).glob("*.ipynb") if LESSON_RE.match(p.name))
    if not wanted:
        return found

    def matches(path: Path, word: str) -> bool:
        return path.stem in (word, Path(word).stem) or path.stem.startswith(f"{word}_")

    unknown = [w for w in wanted if not any(matches(p, w) for p in found)]
    if unknown:
        raise SystemExit(f"export_slides: no lesson {', '.join(unknown)} in notebooks/{lang} "
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


def execute(path: Path, lang: str, timeout: int):
    """Run the notebook in its own folder with its language; keep the widget state for the static deck."""
    import nbformat
    from nbclient import NotebookClient

    class Client(NotebookClient):
        """nbclient plays the front end of ipywidgets' Output widgets (the lesson widgets draw their figures in
        one): it keeps what they show in the saved widget state, and also sends it back to the kernel, on the
        shell socket that it is reading the cell's reply from at the same moment. Now and then that reply is then
        never seen and the export hangs until the cell timeout (jupyter/nbclient#312). A static deck needs the
        saved state only: skip the echo to the kernel."""

        def on_comm_open_jupyter_widget(self, msg):
            widget = super().on_comm_open_jupyter_widget(msg)
            if widget is not None and hasattr(widget, "sync_state"):
                widget.sync_state = lambda: None
            return widget

    nb = nbformat.read(path, as_version=4)
    client = Client(nb, timeout=timeout, kernel_name="python3", store_widget_state=True,
                    resources={"metadata": {"path": str(path.parent)}})
    # COURSE_LANG: labels and messages in the deck's language, whatever folder the kernel is started from.
    client.execute(env={**os.environ, "COURSE_LANG": lang})
    return nb


def build_exporter(lang: str, title: str):
    from nbconvert import SlidesExporter
    from nbconvert.preprocessors import TagRemovePreprocessor

    footer = f"{COURSE_NAME[lang]} · {title}"
    css = CSS % {"sans": SANS, "mono": MONO, "course": COURSE_NAME[lang]}
    template = (TEMPLATE.replace("__CSS__", css)
                .replace("__FOOTER__", _escape(footer))
                .replace("__FOOTER_JS__", FOOTER_JS % {"reveal": URLS["reveal_url_prefix"], "transition": "slide",
                                                       "width": DECK_WIDTH, "height": DECK_HEIGHT}))
    exporter = SlidesExporter(
        reveal_url_prefix=URLS["reveal_url_prefix"],
        require_js_url=URLS["require_js_url"],
        jquery_url=URLS["jquery_url"],
        mathjax_url=URLS["mathjax_url"],
        widget_renderer_url=URLS["widget_renderer_url"],
        # Not used (the template drops mermaid), but never let a default CDN address into a deck.
        mermaid_js_url="", mermaid_layout_elk_js_url="", font_awesome_url="",
        reveal_theme="white",
        language_code=lang,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
    )
    exporter.raw_template = template
    tags = TagRemovePreprocessor(remove_input_tags={"hide-input", "remove-input"},
                                 remove_cell_tags={"remove-cell"}, enabled=True)
    exporter.register_preprocessor(tags, enabled=True)
    exporter.register_preprocessor(_drop_stderr, enabled=True)
    return exporter


def _drop_stderr(nb, resources):
    """Warnings and progress text on stderr are noise on a slide (the notebook still shows them)."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.get("outputs", [])
                            if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]
    return nb, resources


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
    t1 = time.perf_counter()
    title = _title(nb, path_)
    nb.metadata["title"] = title
    body, _ = build_exporter(lang, title).from_notebook_node(nb, resources={"metadata": {"name": path_.stem}})
    # Speaker notes keep their maths as TeX source: reveal's speaker view (key s) is a separate window without
    # MathJax, where typeset maths would show up garbled.
    body = body.replace('<aside class="notes">', '<aside class="notes tex2jax_ignore">')
    target = out_ / lang / f"{path_.stem}.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(body, encoding="utf-8")
    return str(target), t1 - t0, time.perf_counter() - t1


def write_index(out: Path) -> None:
    """build/slides/index.html: links to every deck, so that the unzipped folder has a starting page."""
    rows = []
    for lang in LANGS:
        decks = sorted((out / lang).glob("*.html"))
        if decks:
            items = "\n".join(f'<li><a href="{lang}/{d.name}">{_escape(d.stem)}</a></li>' for d in decks)
            rows.append(f"<h2>{COURSE_NAME[lang]} ({lang})</h2>\n<ul>\n{items}\n</ul>")
    (out / "index.html").write_text(
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Slides</title>'
        f"<style>body{{font-family:{SANS};margin:2em auto;max-width:50em}}</style></head>\n<body>\n"
        + "\n".join(rows) + "\n</body></html>\n", encoding="utf-8")


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
    todo = [(p, lang) for lang in args.langs for p in lessons(lang, args.lessons)]
    if not todo:
        raise SystemExit("export_slides: no lesson notebooks found under notebooks/")
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
