# `make demo`, `make test` (everything) and `make test-fast` (no JVM, no Airflow: the tests not marked spark or airflow).
# Each creates the virtualenv from this project's own files first. `make test` also creates .venv-spark40 (env-spark40):
# the oldest supported Spark's client, for the tests that run the CLI over Spark Connect against a Spark 4.0 server.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
SPARK40 := .venv-spark40
SPARK40_STAMP := $(SPARK40)/.installed-stamp
CORPUS ?= ../shared/corpus

.PHONY: env env-spark40 demo test test-fast lint typecheck conformance-doc bench clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[test,spark]'
	touch $(STAMP)

env: $(STAMP)

# A client-only environment (pyspark-client 4.0, no classic pyspark, no Airflow) with this package installed without
# its dependencies, and the Spark 4.0 distribution (classic pyspark's jars and scripts) in $(SPARK40)/server for the
# tests to start a 4.0 Connect server from. tests/executors/spark40.py finds both here.
$(SPARK40_STAMP): pyproject.toml constraints-spark40.txt
	rm -rf $(SPARK40)
	$(PYTHON) -m venv $(SPARK40)
	$(SPARK40)/bin/python -m pip install --quiet --upgrade pip
	$(SPARK40)/bin/python -m pip install --quiet -c constraints-spark40.txt pyspark-client fsspec
	$(SPARK40)/bin/python -m pip install --quiet --no-deps -e .
	$(SPARK40)/bin/python -m pip install --quiet --no-deps -c constraints-spark40.txt --target $(SPARK40)/server pyspark
	touch $(SPARK40_STAMP)

env-spark40: $(SPARK40_STAMP)

demo: env
	$(PY) -m airflow_provider_deltalite demo

lint: env
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: env
	$(VENV)/bin/mypy

test: lint typecheck env-spark40
	$(PY) -m pytest -q --durations=15

test-fast: lint typecheck
	$(PY) -m pytest -q --durations=15 -m "not spark and not airflow"

conformance-doc: env
	$(PY) tests/conformance/write_report.py

bench: env
	$(PY) benchmarks/snapshot_load.py
	$(PY) benchmarks/commit_and_checkpoint.py

clean:
	rm -rf $(VENV) $(SPARK40) .pytest_cache .mypy_cache
