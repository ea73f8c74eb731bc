"""Session-wide real components, started by the suite itself on 127.0.0.1.

- `s3_endpoint`: a `moto_server` S3 API (atomic conditional writes, as on S3: `tests/moto_server.py`), through s3fs.
- `spark_local`: a `SparkExecutor` on local[2] (one JVM for the whole session: a process holds one SparkContext).
- `spark_cluster`: a standalone Spark cluster (one master, two 1-core workers); tests drive it from subprocesses.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from tests.moto_server import start_moto_server, stop_moto_server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Storage options for an s3fs client talking to a moto_server this session owns (`tests/moto_server.py`)."""
    pytest.importorskip("s3fs")
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
