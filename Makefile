# `make demo`, `make test` (everything) and `make test-fast` (no JVM, no Airflow: the tests not marked spark or airflow).
# Each creates the virtualenv from this project's own files first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
CORPUS ?= ../shared/corpus

.PHONY: env demo test test-fast lint typecheck conformance-doc bench clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[test]'
	touch $(STAMP)

env: $(STAMP)

demo: env
	$(PY) -m airflow_provider_deltalite demo

lint: env
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: env
	$(VENV)/bin/mypy

test: lint typecheck
	$(PY) -m pytest -q --durations=15

test-fast: lint typecheck
	$(PY) -m pytest -q --durations=15 -m "not spark and not airflow"

conformance-doc: env
	$(PY) tests/conformance/write_report.py

bench: env
	$(PY) benchmarks/snapshot_load.py
	$(PY) benchmarks/commit_and_checkpoint.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache
