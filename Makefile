# Two entry points: `make demo` runs the default job, `make test` runs the test suite.
# Each creates .venv and installs what it needs on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test lint sweep monthly clean

demo: $(VENV)/.installed-base
	$(PY) -m run

test: $(VENV)/.installed-test
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q

sweep: $(VENV)/.installed-base
	$(PY) -m run -m retriever=bm25,dense,hybrid

monthly: $(VENV)/.installed-base
	$(PY) -m run experiment=monthly

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.installed-base: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install -q -e '.[test]'
	touch $@ $(VENV)/.installed-base

clean:
	rm -rf $(VENV) outputs
