"""SparkExecutor on a Spark Connect session (a real server on 127.0.0.1, `spark_connect_server`), and the CLI's
``--spark-master sc://...`` and ``SPARK_REMOTE``.

The functions run on the server's Python workers are defined here and pickled by value: the workers cannot import
the `tests` package, and the engine they call must come from the zip the executor adds as an artifact.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyspark import cloudpickle

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine import ExecutorError, VersionNotFound
from airflow_provider_deltalite.executors import LocalExecutor
from airflow_provider_deltalite.executors.engine_zip import build_package_zip
from airflow_provider_deltalite.executors.spark import SparkExecutor
from airflow_provider_deltalite.executors.spark_session import resolve_master, shown_master
from airflow_provider_deltalite.maintenance.optimize import optimize
from tests.executors.spark_cluster import free_port
from tests.helpers import CORPUS, cli_failure, copy_table, tree_state
from tests.maintenance.test_optimize_spark import DV_TABLE, _new_files

cloudpickle.register_pickle_by_value(sys.modules[__name__])

pytestmark = pytest.mark.spark

SIMPLE_TABLE = str(CORPUS / "delta-rs/simple_table")


def snapshot_at(item: tuple[str, int]) -> int:
    uri, version = item
    return DeltaTable(uri).snapshot(version=version).version


def engine_location(_: int) -> str:
    import airflow_provider_deltalite

    return airflow_provider_deltalite.__file__


def fail_plainly(x: int) -> int:
    if x == 3:
        raise ValueError(f"bad item {x}\nsecond line")
    return x


def test_work_items_run_on_the_servers_workers_with_the_shipped_engine(spark_connect: SparkExecutor) -> None:
    assert (spark_connect.remote, spark_connect.parallelism) == (True, 2)
    assert sorted(spark_connect.map(snapshot_at, [(SIMPLE_TABLE, v) for v in range(5)])) == [0, 1, 2, 3, 4]
    zip_name = Path(build_package_zip()).name
    # the server's workers import the engine from the artifact the executor added, not from this checkout
    locations = list(spark_connect.map(engine_location, [0, 1]))
    assert all(f"/{zip_name}/airflow_provider_deltalite/__init__.py" in loc for loc in locations), locations


def test_errors_come_back_typed_or_as_one_line(spark_connect: SparkExecutor, spark_connect_server: str) -> None:
    with pytest.raises(VersionNotFound) as info:
        list(spark_connect.map(snapshot_at, [(SIMPLE_TABLE, 999)]))
    assert str(info.value) == f"table {SIMPLE_TABLE}: version 999 does not exist (latest is 4)"
    assert info.value.latest == 4
    with pytest.raises(ExecutorError) as plain:
        list(spark_connect.map(fail_plainly, [1, 3]))
    assert (
        str(plain.value)
        == f"Spark task fail_plainly failed on {spark_connect_server}: ValueError: bad item 3 second line"
    )


def hang_unless_zero(x: int) -> int:
    time.sleep(0 if x == 0 else 120)
    return x


def test_stopping_early_interrupts_the_running_queries(spark_connect: SparkExecutor) -> None:
    started = time.monotonic()
    results = spark_connect.map(hang_unless_zero, [0, 1])
    assert next(results) == 0
    results.close()
    assert time.monotonic() - started < 30  # the hanging task (120 s) was interrupted, not awaited
    assert sorted(spark_connect.map(hang_unless_zero, [0, 0])) == [0, 0]  # the session is still usable


def test_unreachable_server_fails_fast_with_one_line() -> None:
    port = free_port()  # bound and released: nothing listens there
    started = time.monotonic()
    with pytest.raises(ExecutorError) as info:
        SparkExecutor.start(f"sc://127.0.0.1:{port}/;token=s3cr3t")
    assert time.monotonic() - started < 5
    assert str(info.value) == (
        f"cannot reach Spark Connect server sc://127.0.0.1:{port} (127.0.0.1:{port}: Connection refused)"
    )


def test_master_resolution_follows_pysparks_spark_remote(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    assert resolve_master(None) == "local[*]"
    monkeypatch.setenv("SPARK_REMOTE", "sc://example.test:15002")
    assert resolve_master(None) == "sc://example.test:15002"
    assert resolve_master("local[2]") == "local[2]"  # an explicit master wins
    assert shown_master("sc://h:1/;token=abc;user_id=u") == "sc://h:1"


def _cli(args: list[str], env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    env = {**os.environ, **env_extra}
    return subprocess.run(
        [sys.executable, "-m", "airflow_provider_deltalite", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )


@pytest.mark.parametrize("how", ["--spark-master", "SPARK_REMOTE"])
def test_cli_optimizes_through_spark_connect_writing_the_local_executors_files(
    spark_connect_server: str, tmp_path: Path, how: str
) -> None:
    local_copy = copy_table(DV_TABLE, tmp_path / "local")
    connect_copy = copy_table(DV_TABLE, tmp_path / "connect")
    by_local = optimize(DeltaTable(str(local_copy)), executor=LocalExecutor(2))
    args = ["optimize", str(connect_copy), "--json", "--executor", "spark"]
    if how == "--spark-master":
        out = _cli([*args, "--spark-master", spark_connect_server], {})
    else:
        out = _cli(args, {"SPARK_REMOTE": spark_connect_server})
    assert out.returncode == 0, out.stderr[-3000:]
    stats = json.loads(out.stdout)
    assert (stats["executor"], stats["totalClusterParallelism"], stats["numFilesAdded"]) == ("spark", 2, 7)
    assert _new_files(connect_copy, stats["committedVersion"]) == _new_files(local_copy, by_local.committed_version)


def test_cli_unreachable_server_exits_2_with_one_line_and_writes_nothing(tmp_path: Path) -> None:
    table = copy_table(DV_TABLE, tmp_path / "t")
    before = tree_state(table)
    port = free_port()
    line = cli_failure("optimize", table, "--executor", "spark", "--spark-master", f"sc://127.0.0.1:{port}")
    assert line == (
        f"deltalite: error: cannot reach Spark Connect server sc://127.0.0.1:{port} "
        f"(127.0.0.1:{port}: Connection refused)"
    )
    assert tree_state(table) == before
