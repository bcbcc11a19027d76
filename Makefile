# Transformers from scratch. On a fresh machine `make lab` and `make test` are all you need: both first run the
# setup step (install the course package and every dependency into the current Python, and a font that draws
# Chinese when there is none: tools/system_deps.py), then do their job.

# The interpreter everything runs with: `python` when it exists (virtual and conda environments), else `python3`.
PYTHON ?= $(shell command -v python >/dev/null 2>&1 && echo python || echo python3)
# Extra pytest arguments for local runs, e.g. `make test PYTEST_ARGS="-x -k attention"`.
PYTEST_ARGS ?=
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu

# Setup runs once per Python environment and again whenever pyproject.toml changes; after that `make test` works
# offline. The stamp name depends on the environment's prefix, so switching environments sets up the new one.
ENV_ID := $(shell $(PYTHON) -c "import hashlib, sys; print(hashlib.sha1(sys.prefix.encode()).hexdigest()[:12])")
SETUP_STAMP := .make/setup-$(ENV_ID).stamp

# Notebook folders that exist (pytest fails on a path that is missing, e.g. before the first lesson is built).
NOTEBOOK_DIRS := $(wildcard notebooks/en notebooks/zh)

.DEFAULT_GOAL := help
.PHONY: help setup lab test notebooks instructor check-notebooks lint clean slides site site-env site-test browser-deps

help:
	@echo "make lab              set everything up, then open the notebooks in JupyterLab"
	@echo "make test             set everything up, then run the tests and every notebook (EN and ZH)"
	@echo "make notebooks        rebuild notebooks/en and notebooks/zh from notebooks/source"
	@echo "make instructor       build the instructor edition (speaker notes, test probes) in build/instructor"
	@echo "make check-notebooks  list notebooks that are out of date with their source"
	@echo "make lint             ruff check"
	@echo "make slides           export every lesson (EN and ZH, executed) to offline reveal.js decks in build/slides"
	@echo "make site             build the course website (every lesson EN and ZH, executed) in build/site"
	@echo "make site-test        build the website, then check every page of it in a headless Chromium"
	@echo "make setup            (re)install the course package and its dependencies (and a CJK font if none)"
	@echo "make browser-deps     chromium, an emoji font and slides/node_modules, for the browser tests (tests/browser)"

# No PyTorch yet and no NVIDIA GPU: take the CPU build (~200 MB) instead of the default multi-GB CUDA one.
# An installed torch>=2.2, CPU or CUDA, is kept: `pip install -e` never re-downloads a dependency it already has.
$(SETUP_STAMP): pyproject.toml
	@$(PYTHON) -c "import sys; sys.exit(sys.version_info < (3, 10))" || { echo "The course needs Python >= 3.10 \
		but $(PYTHON) is $$($(PYTHON) -V 2>&1): pass one, e.g. make test PYTHON=python3.11"; exit 1; }
	@if ! $(PYTHON) -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)" \
		&& [ "$$(uname -s)" = Linux ] && ! command -v nvidia-smi >/dev/null 2>&1; then \
		echo "No NVIDIA GPU found: installing the CPU-only build of PyTorch"; \
		$(PYTHON) -m pip install torch --index-url $(TORCH_CPU_INDEX) --retries 1 --timeout 20 \
		|| { echo "The PyTorch CPU index ($(TORCH_CPU_INDEX)) is unreachable: installing torch from the default index"; \
		     $(PYTHON) -m pip install torch; }; \
	fi
	$(PYTHON) -m pip install -e ".[dev,lessons]"
	@$(PYTHON) tools/system_deps.py fonts
	@mkdir -p .make && touch $@

setup:
	@rm -f $(SETUP_STAMP)
	@$(MAKE) --no-print-directory $(SETUP_STAMP)

# Root (containers, cloud VMs) needs --allow-root; a machine without a display (SSH, servers) gets no browser
# launch, and JupyterLab prints the URL to open instead. LAB_ARGS adds options, e.g. LAB_ARGS="--port 8890".
LAB_ARGS ?=
LAB_ROOT := $(shell [ "$$(id -u 2>/dev/null)" = 0 ] && echo --allow-root)
LAB_HEADLESS := $(shell [ "$$(uname -s)" = Linux ] && [ -z "$$DISPLAY$$WAYLAND_DISPLAY" ] && echo --no-browser)

# No font for Chinese and none installable (not root, no password-less sudo): JupyterLab starts with a warning.
lab: $(SETUP_STAMP)
	@$(PYTHON) tools/system_deps.py fonts
	$(PYTHON) -m jupyterlab notebooks/ $(LAB_ROOT) $(LAB_HEADLESS) $(LAB_ARGS)

# Missing CJK glyphs in matplotlib figures are errors, not warnings: a Chinese plot full of boxes must fail, so
# without a font for Chinese (and none installable) `make test` stops before any test, with the command that fixes it.
# The notebooks run first and one at a time, so that their times (printed at the end, budget 90 s each) are those of
# a student's run; then tests/ runs on every core (pytest-xdist, one test file per worker: a file's fixtures and order
# stay together). Both runs always happen; `make test` fails if either fails. TEST_WORKERS=0 runs tests/ in-process.
# Exit status 5 is "no test selected" (e.g. PYTEST_ARGS="-k attention" matches no notebook cell): not a failure.
TEST_WORKERS ?= auto
test: $(SETUP_STAMP)
	@$(PYTHON) tools/system_deps.py fonts --require
	@status=0; \
	PYTHONWARNINGS="error:Glyph:UserWarning" $(PYTHON) -m pytest -p no:cacheprovider $(NOTEBOOK_DIRS) \
		--nbval-lax --nbval-current-env --durations=0 $(PYTEST_ARGS) || { rc=$$?; [ $$rc = 5 ] || status=$$rc; }; \
	PYTHONWARNINGS="error:Glyph:UserWarning" $(PYTHON) -m pytest -p no:cacheprovider tests \
		--numprocesses $(TEST_WORKERS) --dist loadfile --durations=30 $(PYTEST_ARGS) || { rc=$$?; [ $$rc = 5 ] || status=$$rc; }; \
	exit $$status

notebooks: $(SETUP_STAMP)
	$(PYTHON) tools/build_notebooks.py

# The instructor edition: every cell, speaker notes and test probes included (docs/presenting.md). Not committed;
# `make slides` builds it itself.
instructor: $(SETUP_STAMP)
	$(PYTHON) tools/build_notebooks.py --edition instructor --out-dir build/instructor

check-notebooks: $(SETUP_STAMP)
	$(PYTHON) tools/build_notebooks.py --check

lint: $(SETUP_STAMP)
	$(PYTHON) -m ruff check .

# --- Instructor slides (docs/presenting.md) ----------------------------------------------------------------------
# Every lesson in both languages, executed, as reveal.js decks that work without internet: build/slides/{en,zh}/.
# The decks' JavaScript (reveal.js, MathJax, ...) comes from npm, once: Node.js/npm are needed for this target only.
# Options go through SLIDES_ARGS, e.g. make slides SLIDES_ARGS="--lessons 02 06 --jobs 2" (or "--no-execute").
SLIDES_ARGS ?=

slides: $(SETUP_STAMP) slides/node_modules/.package-lock.json
	$(PYTHON) tools/export_slides.py $(SLIDES_ARGS)

slides/node_modules/.package-lock.json: slides/package.json slides/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "make slides needs Node.js and npm once, to fetch the decks' \
		JavaScript (https://nodejs.org, or: sudo apt-get install npm)"; exit 1; }
	cd slides && npm ci --ignore-scripts --no-audit --no-fund
	@touch $@

# --- The course website (README: "The course as a website") -----------------------------------------------------
# build/site/{en,zh}/: every lesson with its outputs, course map, glossary, search, decks, notebooks; offline.
# The notebooks `make test` ran are reused (build/executed); only the others are executed. Sphinx, MyST-NB, the book
# theme and jieba (pyproject.toml's `site` extra) go into a virtual environment of their own, build/site-env, which
# sees the course's packages (those of $(PYTHON), a venv, conda or the system Python) but keeps its newer docutils & co. away from the Python that `make setup` installed
# into. MathJax and the decks' JavaScript come from slides/node_modules (npm, once). SITE_ARGS: e.g.
# make site SITE_ARGS="--lessons 00 02".
SITE_ARGS ?=
SITE_ENV := build/site-env
SITE_STAMP := $(SITE_ENV)/.installed-$(ENV_ID)

site: $(SETUP_STAMP) $(SITE_STAMP) slides/node_modules/.package-lock.json
	$(SITE_ENV)/bin/python tools/build_site.py $(SITE_ARGS)
	@echo "open build/site/index.html, or serve it: python -m http.server -d build/site 8000"

site-env: $(SITE_STAMP)

# The website in a real browser (tests/browser/test_site.py): every lesson page in both languages loads offline with
# no console error, shows its figures and typeset maths, draws Chinese with real glyphs, and the language switch and
# the search work. CI runs it after `make test`, whose executed notebooks the site reuses.
site-test: site
	COURSE_SITE_TEST=1 $(PYTHON) -m pytest -p no:cacheprovider tests/browser/test_site.py $(PYTEST_ARGS)

# tools/child_env.py, not `venv --system-site-packages`: from a venv (the README's setup) that would see the base
# Python's packages instead of the course's.
$(SITE_STAMP): pyproject.toml tools/child_env.py
	$(PYTHON) tools/child_env.py $(SITE_ENV)
	$(SITE_ENV)/bin/python -m pip install $$($(PYTHON) tools/build_site.py --requirements)
	@touch $@

# The browser tests (tests/browser) need Debian's chromium and, for the slide decks, slides/node_modules. Without
# them they are skipped locally (one line says so) and fail in CI, which runs this target first (.ci/run).
browser-deps: $(SETUP_STAMP) slides/node_modules/.package-lock.json
	$(PYTHON) tools/system_deps.py browser

clean:
	rm -rf .make build dist *.egg-info .pytest_cache .ruff_cache
