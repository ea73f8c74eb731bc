"""Z-order / Hilbert clustering on real tables: rows against delta-rs, skipping, incremental runs, validation."""

from __future__ import annotations

import collections
import itertools
import json
from pathlib import Path
from typing import Any

import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.parquet
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine import InvalidArgument, InvalidExpression
from airflow_provider_deltalite.executors import LocalExecutor
from airflow_provider_deltalite.maintenance.clustering.zorder import zorder
from tests.conformance.corpus import row_multiset
from tests.helpers import copy_table, tree_state
from tests.oracles import agreed_rows

FLOW_COLUMNS = ["sourceIP", "destIP", "sourcePort", "destPort"]


def _rows(path: Path) -> collections.Counter:
    """The rows delta-rs and delta-kernel-rs read alike (each where it can read the table), as a multiset."""
    return agreed_rows(path)


def _commit(path: Path, version: int) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (path / "_delta_log" / f"{version:020d}.json").read_text().splitlines()]


def _flows(path: Path, files: int = 8, rows: int = 2500, partitioned: bool = False, seed: int = 7) -> Path:
    rng = np.random.default_rng(seed)
    for _ in range(files):
        data = {
            "sourceIP": rng.integers(0, 2**32, rows),
            "destIP": rng.integers(0, 2**32, rows),
            "sourcePort": rng.integers(0, 2**16, rows),
            "destPort": rng.integers(0, 2**16, rows),
            "payload": pa.array([f"p{i}" for i in rng.integers(0, 100, rows)]),
        }
        if partitioned:
            data["day"] = pa.array(["d1", "d2"] * (rows // 2))
        deltalake.write_deltalake(
            str(path), pa.table(data), mode="append", partition_by=["day"] if partitioned else None
        )
    return path


def _skipped_share(path: Path, column: str, values: list[int]) -> float:
    """The share of files whose min/max excludes each point query `column = v`, averaged over the queries."""
    stats = DeltaTable(str(path)).snapshot().files.column("stats_parsed").to_pylist()
    lows = np.array([s["minValues"][column] for s in stats])
    highs = np.array([s["maxValues"][column] for s in stats])
    return float(np.mean([np.mean((v < lows) | (v > highs)) for v in values]))


def test_rows_survive_and_the_commit_records_columns_and_curve(tmp_path: Path) -> None:
    path = _flows(tmp_path / "t")
    before = _rows(path)
    total = DeltaTable(str(path)).snapshot().size_in_bytes
    stats = zorder(DeltaTable(str(path)), ["sourceIP", "destIP"], target_size=total // 4)
    assert (stats.read_version, stats.committed_version) == (7, 8)
    assert (stats.num_files_removed, stats.num_files_added, stats.partitions_optimized) == (8, 4, 1)
    assert _rows(path) == before
    actions = _commit(path, 8)
    info = actions[0]["commitInfo"]
    assert info["operation"] == "OPTIMIZE" and info["isolationLevel"] == "SnapshotIsolation"
    assert info["operationParameters"] == {
        "predicate": "[]",
        "zOrderBy": '["sourceIP","destIP"]',
        "curve": "zorder",
        "auto": False,
    }
    adds = [a["add"] for a in actions if "add" in a]
    assert all(a["dataChange"] is False for a in adds + [a["remove"] for a in actions if "remove" in a])
    cube_ids = {a["tags"]["ZCUBE_ID"] for a in adds}
    assert len(cube_ids) == 1
    assert {(a["tags"]["ZCUBE_ZORDER_BY"], a["tags"]["ZCUBE_ZORDER_CURVE"]) for a in adds} == {
        ('["sourceIP","destIP"]', "zorder")
    }
    assert sum(json.loads(a["stats"])["numRecords"] for a in adds) == 20_000
    z = stats.z_order_stats
    assert z == {
        "strategyName": "all",
        "curve": "zorder",
        "columns": ["sourceIP", "destIP"],
        "inputCubeFiles": {"num": 0, "size": 0},
        "inputOtherFiles": {"num": 8, "size": total},
        "inputNumCubes": 0,
        "mergedFiles": {"num": 8, "size": total},
        "numOutputCubes": 1,
        "numSkippedCubes": 0,
        "skippedCubeFiles": {"num": 0, "size": 0},
    }


@pytest.mark.parametrize(("curve", "floor"), [("zorder", 0.4), ("hilbert", 0.49)])
def test_clustering_makes_point_queries_skip_files_on_every_column(curve: str, floor: float, tmp_path: Path) -> None:
    path = _flows(tmp_path / "t", files=16, rows=2000)
    data = pa.table(deltalake.DeltaTable(str(path)).to_pyarrow_table())
    rng = np.random.default_rng(3)
    queries = {c: [int(v) for v in rng.choice(data.column(c).to_numpy(), 50)] for c in FLOW_COLUMNS}
    before = {c: _skipped_share(path, c, queries[c]) for c in FLOW_COLUMNS}
    total = DeltaTable(str(path)).snapshot().size_in_bytes
    zorder(DeltaTable(str(path)), FLOW_COLUMNS, curve=curve, target_size=total // 16)
    assert DeltaTable(str(path)).snapshot().num_files == 16
    after = {c: _skipped_share(path, c, queries[c]) for c in FLOW_COLUMNS}
    # random files: every file spans nearly the whole domain of every column
    assert before == {"sourceIP": 0.0, "destIP": 0.0, "sourcePort": 0.0, "destPort": 0.01}
    # 16 files on a 4-column curve: one bit per column, so at best each file covers half of each column's domain
    # (50% skipped); cuts snapped to cell edges get Hilbert there, Z-order within 10 points on its worst column
    assert all(after[c] >= floor for c in FLOW_COLUMNS), after
    assert _rows(path) == row_multiset(data, data.column_names)


def test_second_run_skips_clustered_partitions_and_a_new_file_reclusters_its_partition_only(tmp_path: Path) -> None:
    path = _flows(tmp_path / "t", files=4, partitioned=True)
    first = zorder(DeltaTable(str(path)), ["sourceIP", "destPort"])
    assert (first.num_files_removed, first.num_files_added, first.committed_version) == (8, 2, 4)

    state = tree_state(path)
    again = zorder(DeltaTable(str(path)), ["sourceIP", "destPort"])
    assert again.committed_version is None and tree_state(path) == state
    assert again.z_order_stats["numSkippedCubes"] == 2 and again.z_order_stats["numOutputCubes"] == 0
    assert again.z_order_stats["skippedCubeFiles"]["num"] == 2 and again.total_files_skipped == 2

    extra = pa.table(
        {
            "sourceIP": pa.array([1], pa.int64()),
            "destIP": pa.array([2], pa.int64()),
            "sourcePort": pa.array([3], pa.int64()),
            "destPort": pa.array([4], pa.int64()),
            "payload": ["late"],
            "day": ["d2"],
        }
    )
    deltalake.write_deltalake(str(path), extra, mode="append", partition_by=["day"])
    before = _rows(path)
    third = zorder(DeltaTable(str(path)), ["sourceIP", "destPort"])
    assert third.committed_version == 6
    z = third.z_order_stats
    assert (z["strategyName"], z["numOutputCubes"], z["numSkippedCubes"], z["inputNumCubes"]) == (
        "incremental",
        1,
        1,
        1,
    )
    assert (z["inputCubeFiles"]["num"], z["inputOtherFiles"]["num"]) == (1, 1)
    removed = [a["remove"]["partitionValues"]["day"] for a in _commit(path, 6) if "remove" in a]
    assert removed == ["d2", "d2"]
    assert _rows(path) == before


def test_other_columns_or_curve_recluster_everything(tmp_path: Path) -> None:
    path = _flows(tmp_path / "t", files=3, partitioned=True)
    assert DeltaTable(str(path)).zorder(["sourceIP"]).z_order_stats["numOutputCubes"] == 2  # the public method
    assert zorder(DeltaTable(str(path)), ["sourceIP"], curve="hilbert").z_order_stats["numOutputCubes"] == 2
    assert zorder(DeltaTable(str(path)), ["destIP"], curve="hilbert").z_order_stats["numOutputCubes"] == 2
    assert zorder(DeltaTable(str(path)), ["destIP"], curve="hilbert").committed_version is None


def test_output_file_count_follows_the_target_size(tmp_path: Path) -> None:
    path = _flows(tmp_path / "t", files=6, rows=3000)
    total = DeltaTable(str(path)).snapshot().size_in_bytes
    stats = zorder(DeltaTable(str(path)), ["sourceIP"], target_size=total // 3, noise=False)
    assert stats.num_files_added == 3
    files = DeltaTable(str(path)).snapshot().files.column("stats_parsed").to_pylist()
    ranges = sorted((f["minValues"]["sourceIP"], f["maxValues"]["sourceIP"]) for f in files)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(ranges))  # one column: disjoint ranges
    counts = [f["numRecords"] for f in files]
    # cuts move to cell edges by at most a quarter of a run (`aligned_splits`); 18 rows share a range id here
    assert sum(counts) == 18_000 and all(abs(c - 6000) <= 1500 + 18 for c in counts), counts


def test_local_and_spark_executors_write_the_same_files(spark_local: Any, tmp_path: Path) -> None:
    a = _flows(tmp_path / "a", files=4, partitioned=True)
    b = copy_table(a, tmp_path / "b")
    by_local = zorder(DeltaTable(str(a)), ["sourceIP", "destIP"], curve="hilbert", executor=LocalExecutor(2))
    by_spark = zorder(DeltaTable(str(b)), ["sourceIP", "destIP"], curve="hilbert", executor=spark_local)
    assert by_spark.executor == "spark" and by_local.executor == "local"

    def contents(path: Path, version: int) -> list[tuple[str, str]]:
        adds = [x["add"] for x in _commit(path, version) if "add" in x]
        return sorted((json.dumps(x["partitionValues"]), x["stats"]) for x in adds)

    assert contents(a, by_local.committed_version) == contents(b, by_spark.committed_version)
    assert _rows(a) == _rows(b)


# -- bad input -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("columns", "kwargs", "message"),
    [
        ([], {}, "zorder needs at least one column"),
        (["nope"], {}, "zorder column 'nope' does not exist in the table"),
        (["day"], {}, "zorder column 'day' is a partition column"),
        (["sourceIP", "sourceip"], {}, "zorder column 'sourceip' is named twice"),
        (["payload"] * 33, {}, "zorder takes at most 32 columns, got 33"),
        (["sourceIP"], {"curve": "peano"}, "curve must be one of zorder, hilbert, got 'peano'"),
        (["sourceIP"], {"num_ranges": 1}, "num_ranges must be at least 2, got 1"),
    ],
)
def test_invalid_requests_write_nothing(
    tmp_path: Path, columns: list[str], kwargs: dict[str, Any], message: str
) -> None:
    path = _flows(tmp_path / "t", files=2, rows=10, partitioned=True)
    state = tree_state(path)
    with pytest.raises(InvalidArgument) as info:
        zorder(DeltaTable(str(path)), columns, **kwargs)
    assert message in str(info.value) and str(path) in str(info.value)
    assert tree_state(path) == state


def test_a_column_without_statistics_is_refused(tmp_path: Path) -> None:
    path = _flows(tmp_path / "t", files=2, rows=10)
    deltalake.DeltaTable(str(path)).alter.set_table_properties({"delta.dataSkippingNumIndexedCols": "2"})
    state = tree_state(path)
    with pytest.raises(InvalidArgument, match="zorder column 'sourcePort' has no statistics"):
        zorder(DeltaTable(str(path)), ["sourceIP", "sourcePort"])
    assert tree_state(path) == state


def test_struct_columns_need_a_field_and_nested_fields_work(tmp_path: Path) -> None:
    path = copy_table("kernel-rs-golden/data-reader-nested-struct/delta", tmp_path / "t")
    with pytest.raises(InvalidArgument, match="zorder column 'a' has type struct, which cannot be ordered"):
        zorder(DeltaTable(str(path)), ["a"])
    before = _rows(path)
    stats = zorder(DeltaTable(str(path)), ["a.aa", "b"])
    assert stats.num_files_removed == 2 and stats.z_order_stats["columns"] == ["a.aa", "b"]
    assert _rows(path) == before


def test_where_must_name_partition_columns(tmp_path: Path) -> None:
    path = _flows(tmp_path / "t", files=2, rows=10, partitioned=True)
    with pytest.raises(InvalidExpression, match="where may only reference partition columns"):
        zorder(DeltaTable(str(path)), ["sourceIP"], where="destIP = 1")
    stats = zorder(DeltaTable(str(path)), ["sourceIP"], where="day = 'd1'")
    assert (stats.num_files_removed, stats.num_files_added, stats.total_considered_files) == (2, 1, 2)


def test_a_file_built_from_many_small_runs_is_still_in_curve_order(tmp_path: Path) -> None:
    from airflow_provider_deltalite.maintenance.clustering.curves import range_boundaries, range_ids

    path = _flows(tmp_path / "t", files=4, rows=3000)
    before = _rows(path)
    # runs of ~1/50 of the partition's estimated size: 50+ runs, sorted one at a time, appended to a single file
    size = DeltaTable(str(path)).snapshot().size_in_bytes
    stats = zorder(DeltaTable(str(path)), ["sourceIP"], noise=False, run_bytes=size * 3 // 50)
    assert stats.num_files_added == 1
    assert _rows(path) == before
    (add,) = DeltaTable(str(path)).snapshot().files.column("path").to_pylist()
    values = pa.parquet.read_table(path / add).column("sourceIP")
    # the sample is every row here, so these are the boundaries the clustering used
    ids = range_ids(values, range_boundaries(values, 1000))
    assert (np.diff(ids.astype(np.int64)) >= 0).all()
