"""The example DAGs end to end through `make demo`, and their branch and summary callables.

- `make demo` (``python -m airflow_provider_deltalite demo``: ``airflow dags test`` in a migrated Airflow home)
  runs ``deltalite_nightly_compaction`` on local Spark; its XComs are checked against the commits in the log, its
  rows against delta-rs 1.6.3.
- ``deltalite_retention_enforcement``'s branch callables are checked on both sides of the thresholds, the nightly
  summary's wording on a skipped OPTIMIZE.

The retention DAG's vacuum branch and a nightly run that fails on a bad ``where`` run in the real deployment
(`test_deployment.py`), where a DAG run costs its task processes only, not an ``airflow dags test`` process and a
standalone cluster of its own; spark-submit on a standalone cluster is `tests/maintenance/test_vacuum_spark.py`'s.
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

from airflow_provider_deltalite.demo import (
    DAG_ID,
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
