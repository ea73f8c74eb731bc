"""Liquid clustering on Spark: the shuffle writes the files the local executor writes, with Delta's tags."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.executors import LocalExecutor
from airflow_provider_deltalite.executors.spark import SparkExecutor
from airflow_provider_deltalite.maintenance.clustering import shuffle as clustering_shuffle
from airflow_provider_deltalite.maintenance.optimize import optimize
from tests.helpers import copy_table
from tests.maintenance import liquid_tables as lt
from tests.maintenance.test_liquid_clustering import _delta_rs_rows, _kernel_rows


def _written(path: Path, version: int) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """Each file the commit added: its stats, its clustering fields and its rows in order."""
    lines = (path / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    adds = [json.loads(line)["add"] for line in lines if '"add"' in line]
    return sorted(
        (
            a["stats"],
            json.dumps([a["clusteringProvider"], a["tags"]["ZCUBE_ZORDER_BY"], a["tags"]["ZCUBE_ZORDER_CURVE"]]),
            pq.read_table(path / a["path"]).to_pylist(),
        )
        for a in adds
    )


@pytest.mark.slow
def test_spark_clusters_a_liquid_table_file_for_file_as_the_local_executor(
    spark_local: SparkExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = lt.clustered_points(tmp_path / "a", files=6, rows=3000)
    b = copy_table(a, tmp_path / "b")
    before = _delta_rs_rows(a), _kernel_rows(a)
    # one map task per input file and three output files: every stage of the shuffle has several tasks
    monkeypatch.setattr(clustering_shuffle, "GROUP_BYTES", 1)
    monkeypatch.setattr(clustering_shuffle, "SHUFFLE_ABOVE_BYTES", 0)
    target = DeltaTable(str(a)).snapshot().size_in_bytes // 3
    by_local = optimize(DeltaTable(str(a)), target_size=target, executor=LocalExecutor(2))
    by_spark = optimize(DeltaTable(str(b)), target_size=target, executor=spark_local)
    assert (by_local.num_files_removed, by_local.num_files_added) == (6, 3)
    assert (by_spark.num_files_removed, by_spark.num_files_added, by_spark.executor) == (6, 3, "spark")
    assert _written(b, 7) == _written(a, 7)
    assert {x[1] for x in _written(b, 7)} == {json.dumps(["liquid", '["x","y"]', "hilbert"])}
    assert (_delta_rs_rows(b), _kernel_rows(b)) == before
