# Self-Attention in Vision: every command a reader, student, instructor or
# contributor needs. `make help` lists them.

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
BUILD := _build/html
PORT ?= 8000
SUBMISSIONS ?= submissions
WRITTEN ?= scores
NOTEBOOKS := $(sort $(wildcard chapters/*.ipynb appendices/*.ipynb))

.DEFAULT_GOAL := help
# Python may cache what it compiles (__pycache__/, ignored by git), even where
# the environment says not to: otherwise every test worker, nbval kernel and
# sandboxed grading job compiles the library and pytest rewrites every test
# module again (make unit: 68 s without the cache, 58 s with it).
unexport PYTHONDONTWRITEBYTECODE
.PHONY: help install lint book slides pdf test sweep unit execute notebooks train assignments grade written gradescope sample-gradebook bench serve clean

help:  ## List the commands
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | \
	  awk -F':.*## ' '{printf "  make %-17s %s\n", $$1, $$2}'

install: $(STAMP)  ## Create .venv with the pinned versions (done on first use)
	@test -x /usr/bin/chromium || echo "Note: the browser check" \
	  "(tests/e2e/test_browser.py) needs Chromium: apt-get install -y chromium"

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check \
	  -c constraints.txt -e ".[dev]"
	# jsonschema 4.26 imports rfc3987_syntax (jsonschema/_format.py), which
	# jupyter-events' jsonschema[format-nongpl] brings, when it is imported:
	# it builds a Lark grammar, about 3 s in every process that imports
	# nbformat (each test worker, the grader's runner for each notebook, the
	# build). No schema of nbformat, jupyter-events or jupyter-server uses
	# a "format", so only that time goes (python-jsonschema/jsonschema#1428).
	$(PY) -m pip uninstall --quiet --disable-pip-version-check -y \
	  rfc3987-syntax
	touch $@

# SOLUTIONS=hidden builds the course edition (no solutions, student
# notebooks to download, no launch buttons) into $(COURSE_BUILD)/_build/html.
SOLUTIONS ?= shown
COURSE_BUILD := _build/course

book: $(STAMP)  ## Build the HTML book strictly; SOLUTIONS=hidden: course edition
ifeq ($(SOLUTIONS),hidden)
	# The site offers the student notebooks that the instructors' command
	# makes, and the extension reads them; Sphinx tracks neither it nor
	# the book's tooling: a change there means building afresh.
	@stamp=$(COURSE_BUILD)/_build/html/.nojekyll; if [ -e $$stamp ] && \
	  [ -n "$$(find lib/selfattention_course lib/selfattention_book \
	  -name '*.py' -newer $$stamp)" ]; then rm -rf $(COURSE_BUILD); fi
	$(VENV)/bin/selfattention-assign --out $(COURSE_BUILD)/assignments
	SELFATTENTION_SOLUTIONS=hidden \
	  SELFATTENTION_ASSIGNMENTS=$(COURSE_BUILD)/assignments \
	  $(VENV)/bin/jupyter-book build . -W -n --keep-going \
	  --path-output $(COURSE_BUILD)
	@echo "Open $(abspath $(COURSE_BUILD))/_build/html/index.html"
else ifeq ($(SOLUTIONS),shown)
	$(VENV)/bin/jupyter-book build . -W -n --keep-going
	@echo "Open $(abspath $(BUILD))/index.html"
else
	$(error SOLUTIONS must be shown or hidden, not $(SOLUTIONS))
endif

# Each chapter's deck, from its outline slides/NN_name.yml: make book writes
# them into the site (_build/html/slides/); make slides writes a folder that
# works alone, offline, with its own MathJax (_build/slides/).
slides: $(STAMP)  ## A slide deck per chapter in _build/slides/ (outlines: slides/)
	$(PY) -m selfattention_book.slides build --out _build/slides

# Both editions' PDFs and each chapter's, printed by Chromium from a
# single-page build, into _build/pdf/ and the sites' pdf/ folders.
# The course edition's build reads the student notebooks that the
# instructors' command writes, as make book SOLUTIONS=hidden does.
pdf: book  ## The book and the course edition as PDF, and each chapter alone
	$(VENV)/bin/selfattention-assign --out $(COURSE_BUILD)/assignments
	SELFATTENTION_ASSIGNMENTS=$(abspath $(COURSE_BUILD))/assignments \
	  $(PY) -m selfattention_book.pdf

lint: $(STAMP)  ## Check the code style: ruff (Python), Biome (the figures' JS)
	$(VENV)/bin/ruff check lib scripts tests chapters appendices
	$(VENV)/bin/biome lint --error-on-warnings lib/selfattention/static _static

unit: lint  ## The fast lane (<= 60 s): lint, then the tests not marked slow
	$(PY) -m pytest tests -q -n 2 --dist loadfile --no-loadscope-reorder -m "not slow" \
	  --durations=10 \
	  --ignore=tests/e2e/test_browser.py --ignore=tests/book/test_launch_links.py

# pytest's exit status 5 means it collected no test: a failure here.
NO_TEST = status=$$?; if [ $$status -eq 5 ]; then \
	  echo "make $@: pytest ran no test" >&2; fi; exit $$status
# How many of the slowest tests pytest prints (0: all).
DURATIONS ?= 15
XDIST = -n 2 --dist loadfile --no-loadscope-reorder --durations=$(DURATIONS)

# One thread per test process: the tests run in two workers on two cores,
# and PyTorch's and OpenBLAS's thread pools would otherwise spin against
# each other's (chapter 11's pair ablation: 1 s alone, 20 s beside another
# worker). The graded kernels get the same (selfattention_course.runner).
unit test sweep: export OMP_NUM_THREADS = 1
unit test sweep: export OPENBLAS_NUM_THREADS = 1

test: lint book  ## Every kind of check, the long sweeps on a sample (about 7 min)
	$(PY) -m pytest tests chapters appendices $(XDIST) -m "not sweep" \
	  --nbval --nbval-current-env \
	  --nbval-sanitize-with tests/nbval_sanitize.cfg; $(NO_TEST)

sweep: book pdf  ## The sweeps' other cases: every page, chapter, draw and model, the PDFs (CI)
	$(PY) -m pytest tests $(XDIST) -m sweep; $(NO_TEST)

execute: $(STAMP)  ## Re-run the notebooks in place after an edit (NB=path for one)
	$(PY) scripts/sync_code.py $(or $(NB),$(NOTEBOOKS))
	$(PY) scripts/execute_notebooks.py $(or $(NB),$(NOTEBOOKS))
	$(PY) scripts/plain_notebooks.py

notebooks: $(STAMP)  ## Rewrite notebooks/: chapters and appendix notebooks as plain Jupyter
	$(PY) scripts/plain_notebooks.py

diagrams: $(STAMP) ; $(PY) scripts/diagrams.py  ## Redraw the diagrams (_static/diagrams/)
train: $(STAMP)  ## Retrain every model of the book (NAMES="a b" for some)
	$(PY) scripts/train.py $(NAMES)

# Grading: seconds a cell and a whole notebook may run, notebooks graded at
# the same time, and the isolation (auto: bubblewrap, else docker/podman).
GRADE_TIMEOUT ?= 60
GRADE_NOTEBOOK_TIMEOUT ?= 600
GRADE_JOBS ?= 2
GRADE_SANDBOX ?= auto

assignments: $(STAMP)  ## Student notebooks (solutions removed) in assignments/
	$(VENV)/bin/selfattention-assign --out assignments

grade: assignments  ## Grade SUBMISSIONS=folder/<student>/*.ipynb into gradebook/
	$(VENV)/bin/selfattention-grade "$(SUBMISSIONS)" --out gradebook \
	  --manifest assignments/grader/manifest.json \
	  --timeout $(GRADE_TIMEOUT) --notebook-timeout $(GRADE_NOTEBOOK_TIMEOUT) \
	  --jobs $(GRADE_JOBS) --sandbox $(GRADE_SANDBOX)

# WRITTEN=scores: merge the filled scoresheets (written parts' points) into
# gradebook/ without grading again.
written: $(STAMP)  ## Merge filled scoresheets WRITTEN=folder into gradebook/
	$(VENV)/bin/selfattention-grade --out gradebook --written "$(WRITTEN)"

gradescope: assignments  ## One Gradescope autograder.zip per chapter in gradescope/
	$(PY) -m selfattention_course.gradescope build --project . \
	  --manifest assignments/grader/manifest.json --out gradescope

sample-gradebook: $(STAMP)  ## Grade the instructors' page's sample class, print its CSV
	$(PY) scripts/sample_gradebook.py

bench: $(STAMP)  ## Time every chapter, the build and grading a class
	$(PY) scripts/bench.py
	$(PY) -m selfattention_course.bench

serve: book  ## Serve the built book on http://127.0.0.1:$(PORT)
	$(PY) -m http.server $(PORT) --bind 127.0.0.1 --directory $(BUILD)

clean:  ## Remove the built book and caches (keeps .venv)
	rm -rf _build build .pytest_cache .hypothesis
	find . -name __pycache__ -not -path './.venv/*' -prune -exec rm -rf {} +
