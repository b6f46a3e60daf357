# Two commands for a newcomer: `make app` and `make test`. Each sets itself up:
# a local virtual environment, the pinned CPU torch first (a bare `torch` would pull
# a multi-GB CUDA build), then this project with its dev extras (and transformers, for the
# Marian interop tests; captum, to check the attribution's gradients).
#   TORCH_SPEC="torch==2.13.0" make app     # choose another torch build
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
PORT ?= 8501
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# axe-core, the accessibility checker the browser tests run on every page (npm; without it they skip)
AXE := .cache/axe/node_modules/axe-core/axe.min.js

.PHONY: app serve test test-fast e2e setup clean-venv catalogs

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[dev,hf,captum]"
	touch $(STAMP)

$(AXE):
	npm install --prefix .cache/axe --no-audit --no-fund --silent axe-core@4.14.1 \
	    || echo "warning: axe-core could not be installed (npm); the accessibility checks will skip"

app: $(STAMP)
	$(PY) -m streamlit run app/main.py --server.port $(PORT) --browser.gatherUsageStats false

# A class: one app process per core behind HAProxy (apt-get install -y haproxy), classes in Redis
# (apt-get install -y redis-server; the launcher starts it).
# BIND=0.0.0.0:8501 to reach it from the network; see python -m serving.launcher --help.
BIND ?= 127.0.0.1:$(PORT)
serve: $(STAMP)
	$(PY) -m serving.launcher --bind $(BIND)

# The tests in one worker per core (pytest-xdist): most of their time is spent waiting on the app,
# a browser or a subprocess, so two workers on two cores finish in about 0.7 of the time (BENCHMARKS.md).
# worksteal: a worker that runs out takes tests queued for the other (a few browser walks take 30-60 s each).
# --durations=15: the slowest fifteen, printed at the end (CI shows where the time goes).
test: $(STAMP) $(AXE)
	$(PY) -m pytest -q -n auto --dist worksteal --durations=15

test-fast: $(STAMP)
	$(PY) -m pytest -q -n auto --dist worksteal -m "not e2e"

# The interface's languages (i18n/): every marked text into i18n/messages.pot, merged into each
# language's .po (what a translator edits), compiled into the .mo the app reads. README: "Add a language".
catalogs: $(STAMP)
	$(PY) -m i18n.catalogs

clean-venv:
	rm -rf $(VENV)
