"""The operators through a ``spark_connect`` connection (issue 18, item 3): a real ``dag.test()`` in a migrated Airflow
home, each task in a task process of its own, against the `spark_connect_server` fixture (a real Spark Connect
server on 127.0.0.1), on local files.

The DAG (tests/airflow/connect_dags/connect_dags.py) runs OPTIMIZE, Z-order and VACUUM on one table and an OPTIMIZE
through an ``sc://`` address nothing listens on. Checked: the rows at every version and the live files against
delta-rs, VACUUM's deletions against the files an independent listing says are unreferenced, the XCom stats (the
spark-submit path's keys, the numbers of the log), that the task processes started no JVM and no Java gateway, and
that the unreachable server fails the task with one line and writes nothing.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import deltalake
import pyarrow as pa
import pytest

from airflow_provider_deltalite.demo import create_small_file_table
from airflow_provider_deltalite.maintenance.optimize_stats import OptimizeStats, camel_case
from airflow_provider_deltalite.maintenance.vacuum.stats import VacuumStats
from tests.airflow.conftest import AirflowHome
from tests.executors.spark_cluster import free_port
from tests.helpers import tree_state

pytestmark = pytest.mark.slow

CONNECT_DAGS = Path(__file__).resolve().parent / "connect_dags"
REPO_ROOT = Path(__file__).resolve().parents[2]
DAG_ID = "deltalite_spark_connect"
OPTIMIZE_KEYS = {camel_case(f.name) for f in fields(OptimizeStats)} - {"plan"} | {"skippedReason"}
VACUUM_KEYS = {camel_case(f.name) for f in fields(VacuumStats)} | {"skippedReason"}
TABLE_FILES = 6
OPERATORS = ("optimize", "zorder", "vacuum", "zorder_shuffle")
ZORDER_COLUMNS = ["user_id", "amount"]


@dataclass
class ConnectRun:
    """What one run of the Spark Connect DAG left behind."""

    result: dict[str, Any]
    xcom: dict[str, Any]
    probes: dict[str, dict[str, Any]]
    shuffles: dict[str, int]
    failures: dict[str, dict[str, Any]]
    task_logs: dict[str, str]
    output: str
    errors: str


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def run_connect_dag(
    home: AirflowHome, out: Path, work: Path, connections: dict[str, Any], extra_env: dict[str, str] | None = None
) -> ConnectRun:
    """Run the Spark Connect DAG once with ``connections`` (connection id -> its JSON form) and gather its records."""
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    env = {
        **home.env,
        **{f"AIRFLOW_CONN_{name.upper()}": json.dumps(conn) for name, conn in connections.items()},
        "AIRFLOW__CORE__DAGS_FOLDER": str(CONNECT_DAGS),
        "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
        "DELTALITE_CONNECT_OUT": str(out),
        # the DAG file imports tests.airflow.task_process; its process starts in ``work``, not the repository
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
        **(extra_env or {}),
    }
    env.pop("SPARK_REMOTE", None)
    proc = subprocess.run(
        [sys.executable, str(CONNECT_DAGS / "connect_dags.py")],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    [result] = [
        json.loads(line.removeprefix("RESULT ")) for line in proc.stdout.splitlines() if line.startswith("RESULT ")
    ]
    metadata = json.loads((out / "metadata.json").read_text())
    logs = home.path / "logs" / f"dag_id={DAG_ID}"
    task_logs: dict[str, str] = collections.defaultdict(str)
    for path in sorted((logs / f"run_id={result['run_id']}").glob("*/*.log")):
        task_logs[path.parent.name.removeprefix("task_id=")] += path.read_text()
    return ConnectRun(
        result=result,
        xcom={x["task"]: x["value"] for x in metadata["xcom"] if x["key"] == "return_value"},
        probes={r["task"]: r for r in _jsonl(out / "probes.jsonl")},
        shuffles={r["task"]: r["map_reduce_calls"] for r in _jsonl(out / "shuffles.jsonl")},
        failures={r["task"]: r for r in _jsonl(out / "failures.jsonl")},
        task_logs=dict(task_logs),
        output=proc.stdout,
        errors=proc.stderr,
    )


def _rows(path: Path, version: int | None = None) -> collections.Counter:
    table = pa.table(deltalake.DeltaTable(str(path), version=version).to_pyarrow_table())
    return collections.Counter(map(repr, table.to_pylist()))


def _live(path: Path, version: int | None = None) -> set[str]:
    uris = deltalake.DeltaTable(str(path), version=version).file_uris()
    return {str(Path(unquote(u.removeprefix("file://"))).relative_to(path)) for u in uris}


def _data_files(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*.parquet") if "_delta_log" not in p.parts}


def _actions(path: Path, version: int) -> list[dict[str, Any]]:
    text = (path / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines()]


def _operation(path: Path, version: int) -> str:
    return next(a["commitInfo"]["operation"] for a in _actions(path, version) if "commitInfo" in a)


def _file_rows(path: Path, files: set[str]) -> dict[str, list[list[dict[str, Any]]]]:
    """The rows of each of ``files`` in file order, grouped by partition directory (each group sorted)."""
    import pyarrow.parquet as pq

    grouped: dict[str, list[list[dict[str, Any]]]] = collections.defaultdict(list)
    for name in files:
        grouped[str(Path(name).parent)].append(pq.read_table(path / name).to_pylist())
    return {partition: sorted(tables, key=repr) for partition, tables in grouped.items()}


@dataclass
class Tables:
    events: Path
    idle: Path
    shuffled: Path
    rows: collections.Counter
    shuffled_rows: collections.Counter
    files_before: set[str]
    idle_state: dict[str, tuple]
    local: Path  # copies of events and shuffled, maintained with the local executor


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> Tables:
    lake = tmp_path_factory.mktemp("connect-lake")
    local = tmp_path_factory.mktemp("local-lake")
    create_small_file_table(str(lake / "events"), files=TABLE_FILES, rows_per_file=50)
    create_small_file_table(str(lake / "idle"), files=3, rows_per_file=10)
    create_small_file_table(str(lake / "compacted"), files=2, rows_per_file=10)  # a file per partition
    create_small_file_table(str(lake / "shuffled"), files=8, rows_per_file=40)
    for name in ("events", "shuffled"):
        shutil.copytree(lake / name, local / name)
    events = lake / "events"
    return Tables(
        events, lake / "idle", lake / "shuffled", _rows(events), _rows(lake / "shuffled"), _data_files(events),
        tree_state(lake / "idle"), local,
    )  # fmt: skip


@pytest.fixture(scope="module")
def unreachable_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def connect_run(
    airflow_home: AirflowHome,
    spark_connect_server: str,
    tables: Tables,
    unreachable_port: int,
    tmp_path_factory: pytest.TempPathFactory,
) -> ConnectRun:
    host, port = spark_connect_server.removeprefix("sc://").rsplit(":", 1)
    root = tmp_path_factory.mktemp("connect-run")
    connections = {
        "lake": {"conn_type": "deltalite", "host": str(tables.events.parent)},
        "spark_connect": {"conn_type": "spark_connect", "host": host, "port": int(port), "login": "deltalite-tests"},
        "spark_unreachable": {"conn_type": "spark_connect", "host": "127.0.0.1", "port": unreachable_port},
    }
    return run_connect_dag(airflow_home, root / "out", root / "work", connections)


def test_every_task_ended_as_planned(connect_run: ConnectRun) -> None:
    assert connect_run.result["tasks"] == {
        "optimize": "success",
        "zorder": "success",
        "vacuum": "success",
        "zorder_shuffle": "success",
        "optimize_skipped": "success",
        "optimize_unreachable": "failed",
        "optimize_bad_where": "failed",
    }, connect_run.output[-3000:] + connect_run.errors[-3000:]


def test_optimize_compacts_as_the_log_and_delta_rs_say(connect_run: ConnectRun, tables: Tables) -> None:
    stats = connect_run.xcom["optimize"]
    assert set(stats) == OPTIMIZE_KEYS  # the spark-submit path's stats, key for key
    version = TABLE_FILES + 1
    assert (stats["committedVersion"], _operation(tables.events, version)) == (version, "OPTIMIZE")
    removed = {a["remove"]["path"] for a in _actions(tables.events, version) if "remove" in a}
    added = {unquote(a["add"]["path"]) for a in _actions(tables.events, version) if "add" in a}
    # every small file of the two partitions into one file per partition
    assert {unquote(p) for p in removed} == tables.files_before
    assert _live(tables.events, version) == added and len(added) == 2
    assert (stats["numFilesRemoved"], stats["numFilesAdded"]) == (TABLE_FILES, 2)
    assert stats["executor"] == "spark" and stats["skippedReason"] is None
    # the rows of this version's files are checked at the end (test_vacuum...): VACUUM deleted them since


def test_zorder_clusters_without_changing_a_row(connect_run: ConnectRun, tables: Tables) -> None:
    stats = connect_run.xcom["zorder"]
    assert set(stats) == OPTIMIZE_KEYS
    version = TABLE_FILES + 2
    assert (stats["committedVersion"], _operation(tables.events, version)) == (version, "OPTIMIZE")
    assert stats["zOrderStats"]["columns"] == ZORDER_COLUMNS
    added = {unquote(a["add"]["path"]) for a in _actions(tables.events, version) if "add" in a}
    assert _live(tables.events, version) == added
    assert (stats["numFilesRemoved"], stats["numFilesAdded"]) == (2, len(added))
    assert _live(tables.events) == added  # what the table reads at the end (test_vacuum...) are these files


def test_vacuum_deletes_exactly_the_unreferenced_files(connect_run: ConnectRun, tables: Tables) -> None:
    stats = connect_run.xcom["vacuum"]
    assert set(stats) == VACUUM_KEYS
    written = tables.files_before | {
        unquote(a["add"]["path"])
        for v in (TABLE_FILES + 1, TABLE_FILES + 2)
        for a in _actions(tables.events, v)
        if "add" in a
    }
    live = _live(tables.events)
    assert stats["committedVersions"] == [TABLE_FILES + 3, TABLE_FILES + 4]
    assert [_operation(tables.events, v) for v in stats["committedVersions"]] == ["VACUUM START", "VACUUM END"]
    assert _data_files(tables.events) == live  # everything else is gone...
    assert len(written - live) == TABLE_FILES + 2  # ...which is the 6 small files and the 2 compacted ones
    assert stats["numFilesToDelete"] >= len(written - live)  # files plus emptied directories (none here)
    assert stats["objectsDeleted"] == stats["numFilesToDelete"]
    assert _rows(tables.events) == tables.rows


def test_no_jvm_and_no_java_gateway_in_the_task_processes(connect_run: ConnectRun) -> None:
    assert sorted(connect_run.probes) == sorted(
        [*OPERATORS, "optimize_skipped", "optimize_unreachable", "optimize_bad_where"]
    )
    for task, probe in connect_run.probes.items():
        children = probe["children"]
        assert ["sleep", "30"] in children, task  # the watch saw the canary: it would have seen a JVM too
        assert not [c for c in children if "java" in os.path.basename(c[0]) or "spark-submit" in " ".join(c)], task
        assert probe["gateway"] == "None", task
    assert all(connect_run.probes[t]["pyspark_connect_loaded"] for t in OPERATORS)
    for task in OPERATORS:
        assert "Spark-Submit cmd" not in connect_run.task_logs[task]


def test_an_unreachable_server_fails_the_task_with_one_line_and_writes_nothing(
    connect_run: ConnectRun, tables: Tables, unreachable_port: int
) -> None:
    failure = connect_run.failures["optimize_unreachable"]
    address = f"127.0.0.1:{unreachable_port}"
    assert (failure["type"], failure["str"]) == (
        "DeltaLiteJobFailed",
        f"table {tables.idle}: optimize job failed: cannot reach Spark Connect server sc://{address} "
        f"({address}: Connection refused)",
    )
    assert "Traceback" not in failure["str"] and "\n" not in failure["str"]
    # the engine's error, raised by the run in the worker, is the spark-submit job's line too
    bad_where = connect_run.failures["optimize_bad_where"]
    assert (bad_where["type"], bad_where["str"]) == (
        "DeltaLiteJobFailed",
        f"table {tables.idle}: optimize job failed: where may only reference partition columns; 'amount' is not one "
        "(partition columns: date)",
    )
    assert tree_state(tables.idle) == tables.idle_state


def test_zorder_writes_the_files_the_local_executor_writes(connect_run: ConnectRun, tables: Tables) -> None:
    """Per partition and through the shuffle, Spark Connect writes the rows of each file in the order the in-process
    executor does on a copy of the table (the engine's parity promise), and delta-rs reads the table's rows."""
    from airflow_provider_deltalite import DeltaTable

    local_events = DeltaTable(str(tables.local / "events"))
    local_events.optimize()
    local_events.zorder(columns=ZORDER_COLUMNS)
    local_shuffled = DeltaTable(str(tables.local / "shuffled"))
    local_shuffled.zorder(columns=ZORDER_COLUMNS)
    assert connect_run.shuffles == {"zorder_shuffle": 1}  # one shuffle (map_reduce) for the operation's partitions
    stats = connect_run.xcom["zorder_shuffle"]
    assert (stats["committedVersion"], stats["numFilesRemoved"]) == (9, 8)
    assert _rows(tables.shuffled) == tables.shuffled_rows
    for name, path in (("events", tables.events), ("shuffled", tables.shuffled)):
        local = tables.local / name
        assert _file_rows(path, _live(path)) == _file_rows(local, _live(local)), name


def test_the_preflight_decides_in_the_worker_without_contacting_the_server(connect_run: ConnectRun) -> None:
    stats = connect_run.xcom["optimize_skipped"]  # through the unreachable address: never contacted
    assert (stats["skippedReason"], stats["dryRun"], stats["numFilesRemoved"]) == ("nothing to compact", True, 0)
    assert "skipped without starting Spark: nothing to compact" in connect_run.task_logs["optimize_skipped"]


def test_spark_submit_arguments_are_named_as_ignored(connect_run: ConnectRun) -> None:
    assert "spark-submit arguments ignored on Spark Connect: executor_memory" in connect_run.task_logs["zorder"]
    assert "ignored on Spark Connect" not in connect_run.task_logs["optimize"]
