# Two entry points: `make demo` runs the default job, `make test` runs ruff, mypy and every test
# (what CI runs), after putting the Anserini jar the Lucene tests run in the user's cache (a
# no-op once it is there; `python -m run.lucene fetch`). `make fast` is the inner loop: the
# tests not marked slow. Both run the tests on two workers, a test module per worker at a time
# (its module fixtures run once; see ARCHITECTURE.md, Tests).
# Each creates .venv and installs what it needs on first use.
PYTHON ?= python3
# Python writes its bytecode caches (gitignored __pycache__/) even where the environment says not
# to: otherwise every xdist worker recompiles and re-rewrites every test module at collection
# (~3.5 s each) and every process a test starts recompiles the package.
unexport PYTHONDONTWRITEBYTECODE
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_WORKERS ?= -n 2 --dist loadscope

.PHONY: demo test fast mutation lint sweep monthly explorer-png clean

demo: $(VENV)/.installed-base
	$(PY) -m run

test: $(VENV)/.installed-test
	$(VENV)/bin/ruff check .
	$(PY) -m mypy src
	$(PY) -m run.lucene fetch
	$(PY) -m pytest -q $(PYTEST_WORKERS)

fast: $(VENV)/.installed-test
	$(PY) -m pytest -q $(PYTEST_WORKERS) -m "not slow"

# Deliberate bugs in the filter, gate, pipeline, fusion, metrics and tie-break: each must make
# a test fail (tests/mutation_check.py).
mutation: $(VENV)/.installed-test
	$(PY) tests/mutation_check.py

sweep: $(VENV)/.installed-base
	$(PY) -m run -m retriever=bm25,dense,hybrid

monthly: $(VENV)/.installed-base
	$(PY) -m run experiment=monthly

# docs/explorer.png, the README's screenshot of report.html (needs Chromium, as the browser test).
explorer-png: $(VENV)/.installed-test
	$(PY) tests/support/explorer_png.py

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.installed-base: pyproject.toml setup.py $(wildcard src/retrieval_bench/*.h src/retrieval_bench/*/*.c) | $(VENV)/bin/python
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml setup.py $(wildcard src/retrieval_bench/*.h src/retrieval_bench/*/*.c) | $(VENV)/bin/python
	$(PY) -m pip install -q -e '.[test]'
	touch $@ $(VENV)/.installed-base

clean:
	rm -rf $(VENV) outputs
