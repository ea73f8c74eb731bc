"""Session-wide real components, started by the suite itself on 127.0.0.1.

- `s3_endpoint`: a `moto_server` S3 API (atomic conditional writes, as on S3: `tests/moto_server.py`), through s3fs.
- `spark_local`: a `SparkExecutor` on local[2] (one JVM for the whole session: a process holds one SparkContext).
- `spark_cluster`: a standalone Spark cluster (one master, two 1-core workers); tests drive it from subprocesses.
- `spark_connect_server`: a Spark Connect server (its own local[2] Spark) on 127.0.0.1, started with spark-submit;
  `spark_connect` is a `SparkExecutor` on a session of it, and `spark_any` runs a test on local[2] and on Connect.

Test tiers: `pytest_collection_modifyitems` marks each test `spark`, `airflow`, `s3` or `corpus` from the fixtures it
uses and from where it lives (see `_needs`), so `-m "not spark and not airflow"` (`make test-fast`) runs without a JVM
or Airflow. A missing corpus fails the run at once, naming the path, instead of skipping the tests that read it.

`make test` runs the suite on four pytest-xdist workers, a file at a time (dearest files first:
`_longest_files_first`). Session fixtures are per worker process: each starts its own servers on free ports under its
own temp dir, so a fixture must not assume it is the only one of its kind on the machine (no fixed ports or paths).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import CORPUS
from tests.jvm_archive import jvm_options
from tests.moto_server import start_moto_server, stop_moto_server

TESTS = Path(__file__).resolve().parent

# A test needs what its fixtures need (item.fixturenames holds the fixtures' own fixtures too).
FIXTURE_MARKS = {
    "spark_local": "spark",  # a JVM in this process
    "spark_cluster": "spark",  # a standalone cluster: JVMs, spark-submit
    "spark_connect_server": "spark",  # a Spark Connect server: a JVM started with spark-submit
    "spark_any": "spark",  # spark_local or spark_connect
    "airflow_home": "airflow",
    "s3_endpoint": "s3",
}
# Module globals through which a test module reads the corpus (tests.helpers, tests.conformance.corpus).
CORPUS_GLOBALS = ("CORPUS", "copy_table", "corpus_tables")


def _needs(item: pytest.Item) -> set[str]:
    """The tiers ``item`` belongs to, besides the marks it carries itself (module `pytestmark`, decorators)."""
    needs = {FIXTURE_MARKS[name] for name in item.fixturenames if name in FIXTURE_MARKS}
    path = Path(str(item.path)).resolve()
    if TESTS / "airflow" in path.parents:
        needs.add("airflow")  # these modules import Airflow, or run it in subprocesses
    module = getattr(item, "module", None)
    if module is not None and any(hasattr(module, name) for name in CORPUS_GLOBALS):
        needs.add("corpus")
    return needs


def pytest_configure(config: pytest.Config) -> None:
    # Every Spark driver the suite starts (spark-submit jobs, Connect servers, the local executor's gateway) inherits
    # this: C1, the serial collector and the class archive `make test` builds (tests/jvm_archive.py) start it in
    # about two thirds of the time. A value of the caller's own is kept.
    os.environ.setdefault("SPARK_SUBMIT_OPTS", jvm_options())
    # py4j logs every connection it closes at INFO, the last ones from `__del__` as the process exits, after pytest has
    # closed the streams the handlers (Airflow's, once a test configured its logging) write to: "--- Logging error ---"
    # tracebacks after the summary. Its warnings still show.
    logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.hookimpl(tryfirst=True)  # before -m deselects by these marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for name in sorted(_needs(item) - {m.name for m in item.iter_markers()}):
            item.add_marker(name)
    if hasattr(config, "workerinput"):  # a pytest-xdist worker
        _longest_files_first(items)


# Rough cost of a test by its marks, for the order of files under pytest-xdist (`_longest_files_first`).
MARK_COST = {"slow": 20.0, "spark": 2.0, "airflow": 2.0, "s3": 1.0}


def _longest_files_first(items: list[pytest.Item]) -> None:
    """Order the files by their estimated cost, the dearest first (each file's tests keep their order).

    `make test` hands whole files to its workers in collection order (``--dist loadfile --no-loadscope-reorder``;
    xdist's own order is by test count, which left a DAG run of five tests, minutes long, for the very end while the
    other worker idled). Every worker computes the same order from the same items, as xdist requires.
    """
    cost: dict[str, float] = {}
    for item in items:
        marks = {m.name for m in item.iter_markers()}
        module = item.nodeid.split("::", 1)[0]
        cost[module] = cost.get(module, 0.0) + 1.0 + sum(MARK_COST.get(name, 0.0) for name in marks)
    rank = {module: n for n, module in enumerate(sorted(cost, key=lambda m: -cost[m]))}
    items.sort(key=lambda item: rank[item.nodeid.split("::", 1)[0]])  # stable: a file's own order stays


CORPUS_MISSING = (
    f"the test corpus is missing: {CORPUS} is not a directory. Tests marked `corpus` read it; point "
    "DELTALITE_CORPUS at it, or deselect them with -m 'not corpus'."
)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Under pytest-xdist, the corpus check below would run in the workers, where a usage error crashes the run with
    an INTERNALERROR: the controller checks first. It has no items, so it goes by the ``-m`` expression."""
    config = session.config
    distributed = getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput")
    if distributed and not CORPUS.is_dir() and "not corpus" not in (config.option.markexpr or ""):
        raise pytest.UsageError(CORPUS_MISSING)


def pytest_collection_finish(session: pytest.Session) -> None:
    """A selected test needs the corpus and it is not there: stop the run with one line, not hundreds of failures."""
    if not CORPUS.is_dir() and any(item.get_closest_marker("corpus") for item in session.items):
        raise pytest.UsageError(CORPUS_MISSING)


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Storage options for an s3fs client talking to a moto_server this session owns (`tests/moto_server.py`)."""
    try:
        proc, options = start_moto_server(tmp_path_factory.mktemp("moto") / "moto.log")
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield options
    finally:
        stop_moto_server(proc)


@pytest.fixture(scope="session")
def spark_local() -> Iterator[Any]:
    """A `SparkExecutor` on ``local[2]``, shared by the whole session (a JVM start costs seconds)."""
    from airflow_provider_deltalite.executors.spark import SparkExecutor

    executor = SparkExecutor.start("local[2]", app_name="deltalite-tests")
    try:
        yield executor
    finally:
        executor.close()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The master URL of a standalone cluster (one master, two 1-core 1 GiB workers) on 127.0.0.1."""
    from tests.executors.spark_cluster import start_cluster

    cluster = start_cluster(tmp_path_factory.mktemp("spark-cluster"), workers=2, cores=1, memory="1g")
    try:
        yield cluster.master_url
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def spark_connect_server(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The ``sc://127.0.0.1:PORT`` address of a Spark Connect server (local[2], Python workers = this interpreter);
    one server for the whole session, whichever xdist worker asks first (`tests/session_services.py`)."""
    from tests.executors.spark_cluster import start_connect_server
    from tests.session_services import shared

    def start(work_dir: Path) -> tuple[str, int]:
        try:
            server = start_connect_server(work_dir)
        except RuntimeError as exc:
            pytest.fail(str(exc))
        return server.url, server.process.pid

    return shared(tmp_path_factory, "spark-connect", start)


@pytest.fixture(scope="session")
def spark_connect(spark_connect_server: str) -> Iterator[Any]:
    """A `SparkExecutor` on a Spark Connect session of `spark_connect_server`, shared by the whole session."""
    from airflow_provider_deltalite.executors.spark import SparkExecutor

    executor = SparkExecutor.start(spark_connect_server, app_name="deltalite-tests")
    try:
        yield executor
    finally:
        executor.close()


@pytest.fixture(params=["classic", "connect"])
def spark_any(request: pytest.FixtureRequest) -> Any:
    """The classic local[2] executor, then the Spark Connect one: the same test on both kinds of session."""
    return request.getfixturevalue("spark_local" if request.param == "classic" else "spark_connect")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On a pytest-xdist worker: hand this process's `NO_ORACLE` counts to the controller, which prints the summary.
    On the controller: stop the servers the workers shared."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        from tests.oracles import NO_ORACLE

        workeroutput["no_oracle"] = json.dumps(NO_ORACLE)
    else:  # the controller (or a run without xdist): the session's shared servers end with it
        from tests.session_services import shared_root, stop_all

        stop_all(shared_root(session.config._tmp_path_factory))  # type: ignore[attr-defined]


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: the controller learns that a worker finished
def pytest_testnodedown(node: Any, error: Any) -> None:
    from tests.oracles import NO_ORACLE

    for test, reasons in json.loads(getattr(node, "workeroutput", {}).get("no_oracle", "{}")).items():
        NO_ORACLE[test].extend(reasons)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """How many row comparisons neither delta-rs nor delta-kernel-rs could make (tests/oracles.py), per test (under
    pytest-xdist, the workers' counts together: `pytest_testnodedown`)."""
    from tests.oracles import NO_ORACLE

    if NO_ORACLE:
        total = sum(len(reasons) for reasons in NO_ORACLE.values())
        terminalreporter.write_sep("-", f"comparisons no oracle could make: {total}")
        for test, reasons in sorted(NO_ORACLE.items()):
            terminalreporter.write_line(f"{len(reasons):4d} {test}: {'; '.join(sorted(set(reasons)))}")
