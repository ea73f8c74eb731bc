"""OPTIMIZE through Spark: the same files as the local executor, and the spark-submit job on a standalone cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.executors import LocalExecutor
from airflow_provider_deltalite.executors.spark import SparkExecutor
from airflow_provider_deltalite.maintenance.optimize import optimize
from tests.conformance.corpus import row_multiset
from tests.executors.spark_cluster import spark_submit
from tests.helpers import copy_table

DV_TABLE = "kernel-rs-golden/dv-partitioned-with-checkpoint/delta"  # deletion vectors, partitions, a checkpoint


def _new_files(path: Path, version: int) -> list[tuple[Any, ...]]:
    """Each file the commit added: partition values, stats, and its rows as a sorted multiset."""
    lines = (path / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    out = []
    for add in (json.loads(line)["add"] for line in lines if '"add"' in line):
        rows = pq.read_table(path / unquote(add["path"]))
        multiset = sorted(row_multiset(rows, rows.column_names).items(), key=repr)
        out.append((json.dumps(add["partitionValues"], sort_keys=True), add["stats"], repr(multiset)))
    return sorted(out)


def _comparable(stats: Any) -> dict[str, Any]:
    doc = stats.to_dict()
    for key in ("startTimeMs", "endTimeMs", "executor", "totalClusterParallelism"):
        doc.pop(key)
    return doc


def test_spark_and_local_executors_write_the_same_files(spark_any: SparkExecutor, tmp_path: Path) -> None:
    local_copy = copy_table(DV_TABLE, tmp_path / "local")
    spark_copy = copy_table(DV_TABLE, tmp_path / "spark")
    by_local = optimize(DeltaTable(str(local_copy)), executor=LocalExecutor(2))
    by_spark = optimize(DeltaTable(str(spark_copy)), executor=spark_any)
    assert (by_spark.executor, by_spark.total_cluster_parallelism) == ("spark", 2)
    assert _comparable(by_spark) == _comparable(by_local)
    assert by_local.num_files_added == 7
    assert _new_files(spark_copy, by_spark.committed_version) == _new_files(local_copy, by_local.committed_version)


@pytest.mark.slow
def test_spark_submit_job_compacts_from_the_shipped_zip(tmp_path: Path) -> None:
    # local[2]: the job and its tasks on a standalone cluster's executors are tests/executors/test_spark.py's (one
    # cluster for the suite's cluster tests, in one file)
    path = tmp_path / "t"
    for k in range(6):
        data = pa.table({"id": pa.array(range(k * 10, k * 10 + 10), pa.int64()), "p": ["a", "b"] * 5})
        deltalake.write_deltalake(str(path), data, mode="append", partition_by=["p"])
    rows_before = pa.table(deltalake.DeltaTable(str(path)).to_pyarrow_table())
    options_file = tmp_path / "options.json"
    options_file.write_text(json.dumps({}))
    result = tmp_path / "result.json"
    out = spark_submit(
        "local[2]",
        ["optimize", "--table", str(path), "--result", str(result), "--storage-options-file", str(options_file)],
        {},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    stats = json.loads(result.read_text())
    printed = [line for line in out.stdout.splitlines() if line.startswith("DELTALITE_RESULT ")]
    assert [json.loads(line.split(" ", 1)[1]) for line in printed] == [stats]
    assert (stats["executor"], stats["totalClusterParallelism"]) == ("spark", 2)
    assert (stats["readVersion"], stats["committedVersion"], stats["numFilesRemoved"], stats["numFilesAdded"]) == (
        5,
        6,
        12,
        2,
    )
    rows_after = pa.table(deltalake.DeltaTable(str(path)).to_pyarrow_table())
    assert row_multiset(rows_after, rows_after.column_names) == row_multiset(rows_before, rows_before.column_names)
    lines = (path / "_delta_log" / f"{6:020d}.json").read_text().splitlines()
    assert json.loads(lines[0])["commitInfo"]["operation"] == "OPTIMIZE"
