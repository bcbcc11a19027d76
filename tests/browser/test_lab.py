"""A lesson widget in a real JupyterLab: run all cells, move a slider in the browser, see the figure change.

The server runs on 127.0.0.1 (a free port, a random token, its own runtime, config, settings and workspace
folders in a temporary directory) on a copy of ``notebooks/en/02_positional_encoding.ipynb``; the browser is
headless Chromium with every request to anything but that server aborted and recorded.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LESSON = REPO / "notebooks" / "en" / "02_positional_encoding.ipynb"

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (our own local server)
        return response.read()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on a copy of the lesson; yields (base_url, token, notebook path relative to root)."""
    if not LESSON.is_file():
        pytest.skip(f"{LESSON.relative_to(REPO)} does not exist yet")
    yield from _serve(tmp_path_factory.mktemp("lab"), LESSON)


@pytest.fixture(scope="module")
def instructor_lab(tmp_path_factory):
    """The same server on lesson 02 of the instructor edition (``make instructor``), built from the source here."""
    out = tmp_path_factory.mktemp("instructor")
    subprocess.run([sys.executable, str(REPO / "tools" / "build_notebooks.py"), "--edition", "instructor",
                    "--out-dir", str(out)], check=True, capture_output=True)
    yield from _serve(tmp_path_factory.mktemp("lab"), out / "en" / LESSON.name)


def _serve(tmp_path: Path, notebook: Path):
    """Start JupyterLab on a copy of ``notebook``; yield (base_url, token, notebook path relative to root)."""
    root = tmp_path / "root"
    (root / "en").mkdir(parents=True)  # an `en` folder: the notebook's language, as in notebooks/en
    shutil.copy(notebook, root / "en" / notebook.name)
    # No "Would you like to get notified about official Jupyter news?" toast over the notebook.
    notification = tmp_path / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    notification.parent.mkdir(parents=True)
    notification.write_text(json.dumps({"fetchNews": "false"}))
    port, token = _free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    log = (tmp_path / "lab.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--LabApp.news_url=",
         "--LabApp.extension_manager=readonly", *(["--allow-root"] if os.geteuid() == 0 else [])],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _get(f"{base}/api/status?token={token}")
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    pytest.fail(f"jupyter lab did not start:\n{(tmp_path / 'lab.log').read_text()[-3000:]}")
                time.sleep(0.3)
        yield base, token, f"en/{notebook.name}"
    finally:
        # Clean shutdown through the API (kernels included), then make sure the process is gone.
        try:
            request = urllib.request.Request(f"{base}/api/shutdown", method="POST",
                                             headers={"Authorization": f"token {token}"})
            urllib.request.urlopen(request, timeout=10).read()  # noqa: S310
        except OSError:
            pass
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(10)
        log.close()


# Polled (not awaited): the notebook is open, its kernel started and idle.
READY = """() => {
  const app = window.jupyterapp, panel = app && app.shell.currentWidget;
  if (!panel || !panel.sessionContext || !panel.context || !panel.context.isReady) { return false; }
  const session = panel.sessionContext.session, kernel = session && session.kernel;
  return panel.sessionContext.isReady && !!kernel && kernel.status === 'idle'
      && kernel.connectionStatus === 'connected';
}"""

ALL_RUN = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const cells = panel.content.widgets.filter(c => c.model.type === 'code');
  const kernel = panel.sessionContext.session.kernel;
  return kernel.status === 'idle' && cells.every(c => c.model.executionCount !== null);
}"""

WIDGET = """() => {
  // The first lesson widget: a box with a slider and an image (the figure in its Output).
  for (const slider of document.querySelectorAll('.jp-OutputArea .widget-slider')) {
    const box = slider.closest('.widget-vbox');
    const img = box && box.querySelector('img');
    if (img) {
      box.setAttribute('data-test-widget', '');
      return {src: img.src, readout: slider.querySelector('.widget-readout').textContent,
              label: slider.querySelector('.widget-label').textContent};
    }
  }
  return null;
}"""


def open_notebook(new_page, lab, viewport=(1400, 1000)):
    base, token, notebook = lab
    page, network, errors = new_page(viewport=viewport, allowed=(base + "/",))
    page.goto(f"{base}/lab/tree/{notebook}?token={token}", wait_until="domcontentloaded")
    page.wait_for_function(READY, timeout=60_000, polling=500)
    return page, network, errors


def press_right_on_slider(page, before: dict) -> dict:
    """Focus the widget's first slider handle and press the right arrow, as a student can; wait for the new
    figure and return the widget's state after it (the readout and the figure must both have changed)."""
    handle = page.locator("[data-test-widget] .widget-slider .noUi-handle").first
    handle.scroll_into_view_if_needed()
    handle.focus()
    page.keyboard.press("ArrowRight")  # one step: one new render
    page.wait_for_function(
        "(old) => { const img = document.querySelector('[data-test-widget] img');"
        "           return img && img.complete && img.src !== old; }",
        arg=before["src"], timeout=30_000, polling=200)
    after = page.evaluate(WIDGET)
    assert after["readout"] != before["readout"], (before["readout"], after["readout"])
    assert after["src"] != before["src"]
    return after


def test_slider_changes_the_figure(lab, new_page):
    started = time.perf_counter()
    page, network, errors = open_notebook(new_page, lab)

    # Run > Run All Cells, through JupyterLab's own command.
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(ALL_RUN, timeout=120_000, polling=500)
    errors_in_cells = page.evaluate(
        "() => [...document.querySelectorAll('.jp-OutputArea-output[data-mime-type*=\"error\"]')]"
        ".map(e => e.textContent.slice(0, 300)).slice(0, 3)")
    before = page.evaluate(WIDGET)
    assert before is not None, f"no slider widget with a figure after running all cells; errors: {errors_in_cells}"
    assert before["src"].startswith("data:image/png") or before["src"].startswith("blob:"), before["src"][:40]

    # Move the slider with the keyboard, as a student can: focus its handle and press the right arrow.
    after = press_right_on_slider(page, before)
    page.locator("[data-test-widget]").screenshot(
        path=str(REPO / "build" / "slides" / "screenshots" / "lab_widget_after_slider.png"))
    assert errors == [], f"JavaScript errors: {errors}"
    assert network.blocked == [], f"JupyterLab tried to reach the internet: {json.dumps(network.blocked)[:500]}"
    print(f"lab test: {time.perf_counter() - started:.1f} s in the browser; slider {before['label']!r} "
          f"{before['readout']} -> {after['readout']}")


# Deck mode (jupyterlab-slideshow) runs inside JupyterLab itself, so the lesson widgets stay live there. (RISE's
# slideshow is a separate app built against JupyterLab 4.3 without @jupyterlab/console, which the ipywidgets 8
# manager needs: there the widgets show as `VBox(...)` text; jupyterlab-contrib/rise#119 and #126.)
ON_SCREEN = """() => {
  // What the audience sees: the visible cells' headings and the slider handles that are really on screen.
  const seen = el => { const r = el.getBoundingClientRect();
    if (!r.width || r.bottom <= 0 || r.top >= innerHeight) { return false; }
    const hit = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
    return !!hit && (hit === el || el.contains(hit)); };
  const heading = [...document.querySelectorAll('.jp-Notebook .jp-Cell h1, .jp-Notebook .jp-Cell h2')].find(seen);
  return {presenting: document.body.dataset.jpDeckMode || '',
          heading: heading ? heading.textContent.replace('\u00b6', '').trim() : '',
          handles: [...document.querySelectorAll('.jp-OutputArea .widget-slider .noUi-handle')].filter(seen).length};
}"""


def test_slideshow_widget_is_live(lab, new_page):
    """Run All, start the slideshow (deck mode) at the first slide, press → to the widget's slide, move its slider
    with the keyboard and see the figure change, as a presenter would; nothing may leave the machine."""
    started = time.perf_counter()
    page, network, errors = open_notebook(new_page, lab, viewport=(1280, 720))
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(ALL_RUN, timeout=120_000, polling=500)
    page.evaluate("() => { window.jupyterapp.shell.currentWidget.content.activeCellIndex = 0; }")
    page.evaluate("window.jupyterapp.commands.execute('deck:start')")
    page.wait_for_function("() => document.body.dataset.jpDeckMode === 'presenting'", timeout=30_000)
    seen = []
    for _ in range(40):  # lesson 02 reaches its widget after about ten presses
        page.wait_for_timeout(600)  # the deck's transition
        now = page.evaluate(ON_SCREEN)
        seen.append(now["heading"])
        if now["handles"]:
            break
        page.keyboard.press("ArrowRight")
    else:
        pytest.fail(f"no slide with a live slider after 40 presses of the right arrow; slides seen: {seen}")
    assert len(set(seen)) > 3, f"the deck did not move from slide to slide: {seen}"
    page.screenshot(path=str(REPO / "build" / "slides" / "screenshots" / "lab_deck_widget_before.png"))

    before = page.evaluate(WIDGET)
    assert before is not None, "the widget's slider is on screen but no figure is next to it"
    after = press_right_on_slider(page, before)
    assert page.evaluate(ON_SCREEN)["handles"], "the widget left the screen when its slider moved"
    page.screenshot(path=str(REPO / "build" / "slides" / "screenshots" / "lab_deck_widget_after.png"))
    assert errors == [], f"JavaScript errors: {errors}"
    assert network.blocked == [], f"the slideshow tried to reach the internet: {network.blocked}"
    print(f"deck test: {time.perf_counter() - started:.1f} s; slide {seen[-1]!r} after {len(seen) - 1} presses; "
          f"slider {before['label']!r} {before['readout']} -> {after['readout']}")


# The speaker notes of a cell the presenter is on: JupyterLab renders cells lazily, so bring each into view first.
NOTE_SHOWN = """async (index) => {
  const notebook = window.jupyterapp.shell.currentWidget.content;
  notebook.activeCellIndex = index;
  await notebook.scrollToItem(index, 'center');
  await new Promise(done => setTimeout(done, 300));
  const cell = notebook.widgets[index], r = cell.node.getBoundingClientRect();
  return {text: cell.node.innerText.trim(), height: r.height, top: r.top, bottom: r.bottom, inner: innerHeight};
}"""


def test_instructor_edition_shows_the_speaker_notes_in_the_live_notebook(instructor_lab, new_page):
    """Live teaching runs the instructor edition in JupyterLab (deck mode has no speaker view; the exported decks'
    speaker view is tested in test_slides.py): every speaker note of the lesson is there, rendered and on screen
    when the presenter reaches it, and none of them is in the student notebook."""
    source = json.loads(LESSON.read_text(encoding="utf-8"))
    assert not [c for c in source["cells"] if c["metadata"].get("slideshow", {}).get("slide_type") == "notes"]
    page, network, errors = open_notebook(new_page, instructor_lab, viewport=(1280, 720))
    kinds = page.evaluate("""() => window.jupyterapp.shell.currentWidget.content.widgets.map(
        c => ((c.model.getMetadata('slideshow') || {}).slide_type || ''))""")
    notes = [i for i, kind in enumerate(kinds) if kind == "notes"]
    assert len(notes) >= 3, f"the instructor edition of lesson 02 has {len(notes)} speaker notes"
    for index in notes:
        shown = page.evaluate(NOTE_SHOWN, index)
        assert len(shown["text"]) > 20 and shown["height"] > 0, (index, shown)
        assert shown["bottom"] > 0 and shown["top"] < shown["inner"], f"note {index} is not on screen: {shown}"
    assert errors == [], f"JavaScript errors: {errors}"
    assert network.blocked == [], f"the notebook tried to reach the internet: {network.blocked}"
