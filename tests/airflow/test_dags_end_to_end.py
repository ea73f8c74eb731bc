"""The example DAGs end to end: ``airflow dags test`` in a migrated Airflow home, spark-submit on real Spark.

- `make demo` (``python -m airflow_provider_deltalite demo``) runs ``deltalite_nightly_compaction`` on local Spark;
  its XComs are checked against the commits in the log, its rows against delta-rs 1.6.3.
- ``deltalite_retention_enforcement`` runs on a standalone Spark cluster (master and two workers on 127.0.0.1) and
  takes the vacuum branch; its branch callables are checked on both sides of the thresholds.
- A run whose optimize gets a ``where`` on a data column fails with the engine's one line in the task log.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import deltalake
import pyarrow as pa
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.demo import (
    DAG_ID,
    FAST_JVM_CONF,
    create_small_file_table,
    example_dags_dir,
    read_return_values,
)
from airflow_provider_deltalite.maintenance.optimize_stats import OptimizeStats, camel_case
from airflow_provider_deltalite.maintenance.vacuum.stats import VacuumStats

pytestmark = pytest.mark.slow

OPTIMIZE_KEYS = {camel_case(f.name) for f in fields(OptimizeStats)} - {"plan"} | {"skippedReason"}
VACUUM_KEYS = {camel_case(f.name) for f in fields(VacuumStats)} | {"skippedReason"}
RETENTION_DAG = "deltalite_retention_enforcement"
EXAMPLE_DAGS = example_dags_dir()


def _rows(uri: str) -> collections.Counter:
    table = pa.table(deltalake.DeltaTable(uri).to_pyarrow_table())
    return collections.Counter(map(repr, table.to_pylist()))


def _commit(table: Path, version: int) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (table / "_delta_log" / f"{version:020d}.json").read_text().splitlines()]


def _data_files(table: Path) -> set[str]:
    return {str(p.relative_to(table)) for p in table.rglob("*.parquet") if "_delta_log" not in p.parts}


def _live_files(table: Path) -> set[str]:
    """delta-rs' live files, relative to the table."""
    uris = deltalake.DeltaTable(str(table)).file_uris()
    return {str(Path(unquote(u.removeprefix("file://"))).relative_to(table)) for u in uris}


def _dags_test(home: Any, dag_id: str, conf: dict[str, Any], extra_env: dict[str, str] | None = None) -> Any:
    return home.run("dags", "test", dag_id, "-c", json.dumps(conf), extra_env=extra_env, timeout=600)


def test_make_demo_runs_the_nightly_dag_and_every_number_matches_the_log(tmp_path: Path) -> None:
    work = tmp_path / "demo"
    # No wall-time assertion: timings belong to benchmarks/ (under the suite's two workers the demo shares the cores)
    out = subprocess.run(
        [sys.executable, "-m", "airflow_provider_deltalite", "demo", "--workdir", str(work)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert out.stdout.splitlines()[-1] == (
        "demo: 40 files -> 2, 10000 rows identical: yes; OPTIMIZE 40 -> 2, Z-ORDER 2 -> 2, VACUUM deleted 42 files"
    )

    from airflow_provider_deltalite.demo import airflow_env

    result = read_return_values(airflow_env(work / "airflow", work / "dags"), DAG_ID)
    assert result["state"] == "success"
    assert result["tasks"] == {
        "check_table": "success",
        "optimize": "success",
        "zorder": "success",
        "vacuum": "success",
        "summary": "success",
    }
    assert result["xcoms"]["check_table"] == 40  # the table's version when the run started
    assert (
        result["xcoms"]["summary"]
        == "OPTIMIZE 40 -> 2 files (version 41); VACUUM deleted 42 files, "
        + str(result["xcoms"]["vacuum"]["sizeOfDataToDelete"])
        + " bytes"
    )
    table = work / "events"
    optimize, zorder, vacuum = (result["xcoms"][t] for t in ("optimize", "zorder", "vacuum"))

    # OPTIMIZE: the XCom is OptimizeStats, and its numbers are the commit's
    assert set(optimize) == OPTIMIZE_KEYS
    assert (optimize["readVersion"], optimize["committedVersion"], optimize["executor"]) == (40, 41, "spark")
    commit = _commit(table, 41)
    [info] = [a["commitInfo"] for a in commit if "commitInfo" in a]
    adds = [a["add"] for a in commit if "add" in a]
    removes = [a["remove"] for a in commit if "remove" in a]
    assert info["operation"] == "OPTIMIZE"
    metrics = info["operationMetrics"]
    assert (int(metrics["numRemovedFiles"]), int(metrics["numAddedFiles"])) == (40, 2)
    assert (optimize["numFilesRemoved"], optimize["numFilesAdded"]) == (len(removes), len(adds)) == (40, 2)
    assert optimize["filesRemoved"]["totalSize"] == sum(r["size"] for r in removes) == int(metrics["numRemovedBytes"])
    assert optimize["filesAdded"]["totalSize"] == sum(a["size"] for a in adds) == int(metrics["numAddedBytes"])
    assert all(a["dataChange"] is False for a in adds + removes)

    # Z-order then VACUUM (START 43, END 44) with a retention of 0 hours
    assert set(zorder) == OPTIMIZE_KEYS
    assert (zorder["committedVersion"], zorder["zOrderStats"]["columns"]) == (42, ["user_id", "amount"])
    assert set(vacuum) == VACUUM_KEYS
    assert (vacuum["isDryRun"], vacuum["specifiedRetentionMillis"], vacuum["committedVersions"]) == (False, 0, [43, 44])
    assert (vacuum["numFilesToDelete"], vacuum["objectsDeleted"]) == (42, 42)
    assert _data_files(table) == _live_files(table)  # everything expired is gone, everything live is there
    assert len(_live_files(table)) == 2

    # the rows are those of the table the demo created (rebuilt here from the same deterministic generator)
    reference = tmp_path / "reference"
    create_small_file_table(str(reference))
    assert _rows(str(table)) == _rows(str(reference))


@pytest.fixture(scope="module")
def vacuum_ready(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A table with 8 files waiting for VACUUM (an in-process OPTIMIZE replaced them by 2)."""
    table = tmp_path_factory.mktemp("retention") / "events"
    create_small_file_table(str(table), files=8, rows_per_file=50)
    DeltaTable(str(table)).optimize()
    assert len(_data_files(table)) == 10
    return table


def _retention_conf(table: Path, **overrides: Any) -> dict[str, Any]:
    return {
        "table_uri": str(table),
        "retention_hours": 0,
        "enforce_retention_duration": False,
        "spark_conf": FAST_JVM_CONF,
        **overrides,
    }


def test_retention_enforcement_branches_on_the_dry_run_thresholds() -> None:
    # The branch callables of the DAG itself, on dry-run stats either side of the thresholds (the run below takes
    # the vacuum branch for real).
    from airflow.models import DagBag

    bag = DagBag(dag_folder=str(EXAMPLE_DAGS / "retention_enforcement.py"))
    dag = bag.dags[RETENTION_DAG]
    decide = dag.get_task("decide").python_callable
    report = dag.get_task("report_retained").python_callable
    params = {"min_files_to_delete": 100, "min_bytes_to_delete": 1000}
    assert decide({"numFilesToDelete": 100, "sizeOfDataToDelete": 1}, params=params) == "vacuum"
    assert decide({"numFilesToDelete": 2, "sizeOfDataToDelete": 1000}, params=params) == "vacuum"
    assert decide({"numFilesToDelete": 99, "sizeOfDataToDelete": 999}, params=params) == "report_retained"
    assert decide({"numFilesToDelete": 0, "sizeOfDataToDelete": 0}, params={**params, "min_bytes_to_delete": 1}) == (
        "report_retained"
    )
    assert report({"numFilesToDelete": 99, "sizeOfDataToDelete": 999}, params=params) == {
        "reason": "99 files (999 bytes) past the retention: below min_files_to_delete=100 and "
        "min_bytes_to_delete=1000, nothing deleted",
        "numFilesToDelete": 99,
    }


def test_retention_enforcement_vacuums_on_a_standalone_cluster(
    airflow_home: Any, vacuum_ready: Path, spark_cluster: str
) -> None:
    expired = _data_files(vacuum_ready) - _live_files(vacuum_ready)
    assert len(expired) == 8
    standalone = json.dumps({"conn_type": "spark", "host": spark_cluster, "extra": {"deploy-mode": "client"}})
    out = _dags_test(
        airflow_home,
        RETENTION_DAG,
        _retention_conf(vacuum_ready, min_files_to_delete=1, spark_conn_id="standalone"),
        extra_env={"AIRFLOW_CONN_STANDALONE": standalone},
    )
    assert out.returncode == 0, out.stdout[-3000:]
    assert f"--master {spark_cluster}" in out.stdout
    result = read_return_values(airflow_home.env, RETENTION_DAG)
    assert result["tasks"] == {
        "check_table": "success",
        "vacuum_dry_run": "success",
        "decide": "success",
        "report_retained": "skipped",
        "vacuum": "success",
    }
    vacuum = result["xcoms"]["vacuum"]
    assert (vacuum["isDryRun"], vacuum["numFilesToDelete"], vacuum["objectsDeleted"]) == (False, 8, 8)
    assert (vacuum["executor"], vacuum["skippedReason"]) == ("spark", None)
    assert _data_files(vacuum_ready) == _live_files(vacuum_ready)
    assert len(_live_files(vacuum_ready)) == 2


def test_a_failing_optimize_fails_the_run_with_the_engines_line_in_the_task_log(
    airflow_home: Any, tmp_path: Path
) -> None:
    table = tmp_path / "events"
    create_small_file_table(str(table), files=4, rows_per_file=20)
    out = _dags_test(airflow_home, DAG_ID, {"table_uri": str(table), "where": "amount > 3"})
    assert out.returncode == 1
    line = f"table {table}: where may only reference partition columns; 'amount' is not one (partition columns: date)"
    assert line in out.stdout
    result = read_return_values(airflow_home.env, DAG_ID)
    assert result["state"] == "failed"
    assert result["tasks"]["optimize"] == "failed"
    assert {result["tasks"][t] for t in ("zorder", "vacuum", "summary")} == {"upstream_failed"}
    assert DeltaTable(str(table)).latest_version() == 4  # nothing committed


def test_the_nightly_summary_says_skipped_when_optimize_rewrote_nothing() -> None:
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(EXAMPLE_DAGS / "nightly_compaction.py")).dags[DAG_ID]
    summary = dag.task_dict["summary"].python_callable
    skipped = {"numFilesRemoved": 2, "numFilesAdded": 0, "committedVersion": None, "skippedReason": "2 small files"}
    vacuumed = {"numFilesToDelete": 0, "sizeOfDataToDelete": 0}
    assert summary(skipped, vacuumed) == "OPTIMIZE skipped (2 small files); VACUUM deleted 0 files, 0 bytes"
    ran_empty = {**skipped, "skippedReason": None}  # the Spark job ran and found nothing to compact
    assert summary(ran_empty, vacuumed) == "OPTIMIZE skipped (nothing to compact); VACUUM deleted 0 files, 0 bytes"
    done = {"numFilesRemoved": 40, "numFilesAdded": 2, "committedVersion": 41, "skippedReason": None}
    assert summary(done, {"numFilesToDelete": 42, "sizeOfDataToDelete": 9}) == (
        "OPTIMIZE 40 -> 2 files (version 41); VACUUM deleted 42 files, 9 bytes"
    )
