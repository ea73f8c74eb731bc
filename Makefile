# `make demo`, `make test` (everything) and `make test-fast` (no JVM, no Airflow: the tests not marked spark or airflow).
# Each creates the virtualenv from this project's own files first. `make test` also creates .venv-spark40 (env-spark40):
# the oldest supported Spark's client, for the tests that run the CLI over Spark Connect against a Spark 4.0 server.
# .venv-spark43 (env-spark43), the newest supported Spark (classic pyspark 4.3, its Connect client included), is made
# by the tests that use it (tests/executors/spark43.py), while the other pytest worker runs other tests: its pyspark
# is built from source, minutes that would otherwise come before the suite starts.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
STAMP := $(VENV)/.installed-stamp
SPARK40 := .venv-spark40
SPARK40_STAMP := $(SPARK40)/.installed-stamp
SPARK43 := .venv-spark43
SPARK43_STAMP := $(SPARK43)/.installed-stamp
JSA := $(VENV)/spark-classes.jsa
CORPUS ?= ../shared/corpus
# Classic pyspark is a source distribution only, and uv builds it afresh on most installs of the test environment
# (about a gigabyte of uv's cache, and most of a minute, each time). pip keeps the wheels it builds, so pip builds each
# release's wheel once, into this directory outside the checkout that every checkout's installs find; uv caches a
# local wheel by its path and time, so the same file is not unpacked again either. tests/install reads it too.
WHEELS ?= $(HOME)/.cache/deltalite-tests/wheels
export DELTALITE_WHEELS := $(WHEELS)
PYSPARK_WHEEL := $(WHEELS)/pyspark-$(shell sed -n 's/^pyspark==//p' constraints.txt)-py2.py3-none-any.whl
PYSPARK43_WHEEL := $(WHEELS)/pyspark-$(shell sed -n 's/^pyspark==//p' constraints-spark43.txt)-py2.py3-none-any.whl
PYSPARK40_WHEEL := $(WHEELS)/pyspark-$(shell sed -n 's/^pyspark==//p' constraints-spark40.txt)-py2.py3-none-any.whl

.PHONY: env env-spark40 env-spark43 chromium demo test test-fast test-install lint typecheck conformance-doc bench clean

# uv installs the packages (pip took most of the ~4 minutes of a fresh `make test`'s two environments); pip itself
# only installs uv, at the version constraints.txt pins, into the venv, so nothing needs to be installed beforehand.
# --compile-bytecode: installed as pip installs them, with bytecode (uv compiles none by default), so that no test's or
# benchmark's process compiles numpy's and pyarrow's modules again (PYTHONDONTWRITEBYTECODE keeps Python from caching).
$(UV):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -c constraints.txt uv

# Built in a directory of its own and renamed into place, so a checkout installing at the same time never reads half
# a wheel.
$(WHEELS)/pyspark-%-py2.py3-none-any.whl: | $(UV)
	mkdir -p $(WHEELS)
	tmp=$$(mktemp -d $(WHEELS)/.build-XXXXXX) && $(PY) -m pip wheel --quiet --no-deps -w $$tmp "pyspark==$*" \
		&& mv $$tmp/pyspark-$*-py2.py3-none-any.whl $@; rm -rf $$tmp

$(STAMP): pyproject.toml constraints.txt | $(UV) $(PYSPARK_WHEEL)
	$(PY) -m pip install --quiet -c constraints.txt uv
	$(UV) pip install --quiet --compile-bytecode --python $(PY) -c constraints.txt --find-links $(WHEELS) \
		-e '.[test]' pyspark
	touch $(STAMP)

env: $(STAMP)

# The class-data-sharing archive of the test environment's Spark driver (tests/jvm_archive.py): the suite's hundred
# or so Spark JVMs start in about two thirds of the time. Built once per environment, by one Z-order on local Spark.
$(JSA): $(STAMP)
	$(PY) -m tests.jvm_archive $@

# A client-only environment (pyspark-client 4.0, no classic pyspark, no Airflow) with this package installed without
# its dependencies, and the Spark 4.0 distribution (classic pyspark's jars and scripts) in $(SPARK40)/server for the
# tests to start a 4.0 Connect server from. tests/executors/spark40.py finds both here.
# The main venv's uv does the installs (this venv gets no pip). Only uv's presence is required (order-only), so a
# `make -q env-spark40` (tests/executors/spark40.py) never rebuilds the main venv.
# The distribution's classic pyspark from the wheel directory ($(WHEELS)): tests/install's user of pyspark-client 4.0
# asks for the same release, and finds its wheel there instead of building it a second time.
$(SPARK40_STAMP): pyproject.toml constraints-spark40.txt | $(UV) $(PYSPARK40_WHEEL)
	rm -rf $(SPARK40)
	$(PYTHON) -m venv --without-pip $(SPARK40)
	$(UV) pip install --quiet --compile-bytecode --python $(SPARK40)/bin/python -c constraints-spark40.txt pyspark-client fsspec
	$(UV) pip install --quiet --python $(SPARK40)/bin/python --no-deps -e .
	$(UV) pip install --quiet --python $(SPARK40)/bin/python --no-deps -c constraints-spark40.txt \
		--find-links $(WHEELS) --target $(SPARK40)/server pyspark
	touch $(SPARK40_STAMP)

env-spark40: $(SPARK40_STAMP)

# The newest supported Spark, 4.3: classic pyspark 4.3 (there is no pyspark-client 4.3 on the index), whose `connect`
# extra brings what its Spark Connect client needs, and this package without its dependencies (no Airflow). The same
# environment is the 4.3 client, the 4.3 Connect server's distribution and the 4.3 spark-submit
# (tests/executors/spark43.py).
# Its classic pyspark from the wheel directory above ($(WHEELS)), as the test environment's.
$(SPARK43_STAMP): pyproject.toml constraints-spark43.txt | $(UV) $(PYSPARK43_WHEEL)
	rm -rf $(SPARK43)
	$(PYTHON) -m venv --without-pip $(SPARK43)
	$(UV) pip install --quiet --compile-bytecode --python $(SPARK43)/bin/python -c constraints-spark43.txt \
		--find-links $(WHEELS) 'pyspark[connect]' fsspec
	$(UV) pip install --quiet --python $(SPARK43)/bin/python --no-deps -e .
	touch $(SPARK43_STAMP)

env-spark43: $(SPARK43_STAMP)

# tests/report renders the health page in Debian's chromium (playwright drives it; no browser is downloaded).
chromium:
	@test -x /usr/bin/chromium || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

demo: env
	$(PY) -m airflow_provider_deltalite demo

lint: env
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: env
	$(VENV)/bin/mypy

# The suite runs on PYTEST_WORKERS processes (pytest-xdist), a whole test file on one process (--dist loadfile): the
# module-scoped fixtures (an Airflow DAG run, a secrets sweep) then run once, and each process starts the session
# fixtures (moto_server, Spark sessions and servers, an Airflow home) it needs on its own free ports and temp dirs.
# Files go out in collection order (--no-loadscope-reorder), which tests/conftest.py makes the dearest first.
# PYTEST_WORKERS=0 runs the suite in one process, as before. Four on two cores: with two, a quarter of the CPU idled
# while tests waited on JVMs, servers and Airflow's loops; with four, both cores stay busy from the first minute to
# the last (sampled from /proc/stat) and a fresh clone's suite took 15:17 where three took 17:47 in the same state.
PYTEST_WORKERS ?= 4
PYTEST_XDIST = -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder

# The package's own bytecode too: the suite starts hundreds of CLI and job processes, each importing it afresh.
# What comes before pytest runs two recipes at a time: the installs wait on the index and on building pyspark's wheels,
# ruff and mypy use one core each, the class archive one JVM.
test:
	$(MAKE) --no-print-directory -j2 --output-sync=target lint typecheck env-spark40 chromium $(JSA)
	$(PY) -m compileall -q airflow_provider_deltalite
	$(PY) -m pytest -q --durations=15 $(PYTEST_XDIST)

# The README's install commands in fresh environments from the package index (no constraints file): a new user and
# users with pyspark-client 4.0 or 4.1, then an OPTIMIZE on local Spark in each, over Spark Connect with the new user's
# and the 4.1 client, and through the new user's spark-submit. `make test` runs the same file (tests/install) with the
# rest of the suite.
test-install: env
	$(PY) -m pytest -q -n 0 tests/install

test-fast: lint typecheck chromium
	$(PY) -m pytest -q --durations=15 $(PYTEST_XDIST) -m "not spark and not airflow"

conformance-doc: env
	$(PY) tests/conformance/write_report.py

bench: env
	$(PY) benchmarks/snapshot_load.py
	$(PY) benchmarks/commit_and_checkpoint.py

clean:
	rm -rf $(VENV) $(SPARK40) $(SPARK43) .pytest_cache .mypy_cache
