"""Z-order through Spark: sampling, routing and writing spread over tasks with a shuffle (`clustering.shuffle`)."""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow.parquet as pq
import pytest
from pyspark import cloudpickle

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.executors import LocalExecutor
from airflow_provider_deltalite.executors.spark import SparkExecutor
from airflow_provider_deltalite.maintenance.clustering import shuffle as clustering_shuffle
from airflow_provider_deltalite.maintenance.clustering.zorder import zorder
from tests.helpers import copy_table
from tests.maintenance.test_zorder import _flows, _rows

# The map and reduce functions below run on Spark workers, which cannot import `tests` (the Connect server's).
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _written(path: Path, version: int) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """Each file the commit added, in order of partition and stats: partition values, stats, and its rows in order."""
    lines = (path / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    adds = [json.loads(line)["add"] for line in lines if '"add"' in line]
    return sorted(
        (json.dumps(a["partitionValues"]), a["stats"], pq.read_table(path / unquote(a["path"])).to_pylist())
        for a in adds
    )


@pytest.mark.parametrize("path", ["shuffle", "shuffle, a payload per chunk", "per-partition"])
def test_shuffled_clustering_writes_the_local_executors_files_row_for_row(
    spark_any: SparkExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    a = _flows(tmp_path / "a", files=6, rows=3000, partitioned=True)
    b = copy_table(a, tmp_path / "b")
    before = _rows(a)
    target = DeltaTable(str(a)).snapshot().size_in_bytes // 6
    tasks: list[int] = []
    if path.startswith("shuffle"):
        # one map task per input file, and three output files per partition: every stage has several tasks
        monkeypatch.setattr(clustering_shuffle, "GROUP_BYTES", 1)
        monkeypatch.setattr(clustering_shuffle, "SHUFFLE_ABOVE_BYTES", 0)
        shuffled = clustering_shuffle.cluster_with_shuffle

        def counting(*args: Any) -> Any:
            tasks.append(len(args[0]))
            return shuffled(*args)

        monkeypatch.setattr(clustering_shuffle, "cluster_with_shuffle", counting)
        if path.endswith("per chunk"):
            # every routed chunk flushed at once, in a payload of its own: a run's rows come in many frames, from
            # every map task, in whatever order the shuffle delivers them
            monkeypatch.setattr(clustering_shuffle, "FLUSH_BYTES", 1)
            monkeypatch.setattr(clustering_shuffle, "PAYLOAD_BYTES", 1)
    by_local = zorder(DeltaTable(str(a)), ["sourceIP", "destPort"], target_size=target, executor=LocalExecutor(2))
    by_spark = zorder(DeltaTable(str(b)), ["sourceIP", "destPort"], target_size=target, executor=spark_any)
    assert tasks == (
        [2] if path.startswith("shuffle") else []
    )  # the two partitions went through the shuffle, or did not
    assert (by_local.num_files_removed, by_local.num_files_added) == (12, 6)
    assert (by_spark.num_files_removed, by_spark.num_files_added, by_spark.executor) == (12, 6, "spark")
    assert _written(b, by_spark.committed_version) == _written(a, by_local.committed_version)
    assert _rows(b) == before


def test_small_partitions_are_clustered_one_task_each_and_large_ones_through_the_shuffle(
    spark_local: SparkExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_provider_deltalite.maintenance.clustering.runs import ClusterTask

    def task(size: int) -> ClusterTask:
        return ClusterTask(None, 0, ({"size": size},), ("a",), "zorder", 10, 1, True, 0, 0)  # type: ignore[arg-type]

    monkeypatch.setattr(clustering_shuffle, "SHUFFLE_ABOVE_BYTES", 100)
    assert clustering_shuffle.wants_shuffle([task(60), task(101)], spark_local)
    assert not clustering_shuffle.wants_shuffle([task(60), task(100)], spark_local)
    assert not clustering_shuffle.wants_shuffle([task(101)], LocalExecutor(2))


def test_map_reduce_routes_payloads_and_returns_results_in_reducer_order(spark_any: SparkExecutor) -> None:
    results = spark_any.map_reduce(_emit, [1, 2, 3, 4, 5], _total, 3)
    # reducer r receives the values v with v % 3 == r, each emitted v times
    assert results == [(0, 3 * 3), (1, 1 + 4 * 4), (2, 2 * 2 + 5 * 5)]


def test_map_reduce_runs_a_reducer_no_payload_reaches(spark_any: SparkExecutor) -> None:
    # items 1 and 4 go to reducer 1, item 2 to reducer 2; reducers 0 and 3 receive nothing and still report
    assert spark_any.map_reduce(_emit, [1, 2, 4], _total, 4) == [(0, 0), (1, 1 + 4 * 4), (2, 2 * 2), (3, 0)]


def test_map_reduce_streams_large_payloads_intact(spark_any: SparkExecutor) -> None:
    # 3 map tasks x 4 payloads of about 3 MiB each, two reducers: every payload arrives whole
    digests = spark_any.map_reduce(_emit_large, [0, 1, 2], _digest, 2)
    expected = [
        sorted(hashlib.sha256(_large(i, k)).hexdigest() for i in range(3) for k in range(r, 4, 2)) for r in (0, 1)
    ]
    assert digests == expected


@pytest.mark.parametrize("side", ["map", "reduce"])
def test_map_reduce_sends_engine_errors_back_typed(spark_any: SparkExecutor, side: str) -> None:
    from airflow_provider_deltalite.engine.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match=f"bad {side}"):
        spark_any.map_reduce(
            functools.partial(_emit_or_fail, side), [1, 2, 3], functools.partial(_total_or_fail, side), 2
        )
    assert spark_any.map_reduce(_emit, [], _total, 2) == []


def _large(item: int, k: int) -> bytes:
    return bytes([item * 16 + k]) * (3 * 1024 * 1024 - item - k)


def _emit_large(item: int) -> Any:
    for k in range(4):
        yield k % 2, _large(item, k)


def _digest(reducer: int, payloads: Any) -> list[str]:
    return sorted(hashlib.sha256(p).hexdigest() for p in payloads)


def _emit(v: int) -> Any:
    for _ in range(v):
        yield v % 3, str(v).encode()


def _total(reducer: int, payloads: Any) -> tuple[int, int]:
    return reducer, sum(int(p) for p in payloads)


def _emit_or_fail(side: str, v: int) -> Any:
    from airflow_provider_deltalite.engine.errors import InvalidArgument

    yield v % 2, b"x"
    if v == 3 and side == "map":
        raise InvalidArgument("bad map", None)


def _total_or_fail(side: str, reducer: int, payloads: Any) -> int:
    from airflow_provider_deltalite.engine.errors import InvalidArgument

    count = sum(1 for _ in payloads)
    if side == "reduce" and reducer == 1:
        raise InvalidArgument("bad reduce", None)
    return count
