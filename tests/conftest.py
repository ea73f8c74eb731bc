"""Session-wide real components, started by the suite itself on 127.0.0.1.

- `s3_endpoint`: a `moto_server` S3 API, reached through s3fs.
- `spark_local`: a `SparkExecutor` on local[2] (one JVM for the whole session: a process holds one SparkContext).
- `spark_cluster`: a standalone Spark cluster (one master, two 1-core workers); tests drive it from subprocesses.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Storage options for an s3fs client talking to a moto_server this session owns."""
    pytest.importorskip("s3fs")
    port = _free_port()
    server = Path(sys.executable).with_name("moto_server")
    log = (tmp_path_factory.mktemp("moto") / "moto.log").open("w")
    proc = subprocess.Popen([str(server), "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail(f"moto_server did not start on 127.0.0.1:{port}")
            time.sleep(0.1)
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    options = {
        "key": "testing",
        "secret": "testing",
        "endpoint_url": f"http://127.0.0.1:{port}",
        "client_kwargs": {"region_name": "us-east-1"},
    }
    try:
        yield options
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


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
