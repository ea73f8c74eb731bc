"""table_health on hand-built logs: every expected figure is computed by hand from the actions written here."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import deltalake
import numpy as np
import pyarrow as pa
import pytest

from airflow_provider_deltalite.engine.errors import InvalidArgument
from airflow_provider_deltalite.maintenance.health import SIZE_BUCKET_EDGES, ColumnClustering, table_health
from airflow_provider_deltalite.maintenance.health.clustering_quality import group_clustering
from airflow_provider_deltalite.maintenance.planner import MaintenancePolicy, plan_maintenance
from airflow_provider_deltalite.table import DeltaTable
from tests.maintenance.health_tables import (
    HOUR,
    MIB,
    add,
    commit,
    deletion_vector,
    field,
    info,
    metadata,
    protocol,
    remove,
    stats,
)

NOW = int(datetime(2024, 3, 10, 12, tzinfo=UTC).timestamp() * 1000)
D1, D2, GONE = {"date": "2024-01-01"}, {"date": "2024-01-02"}, {"date": "2023-12-31"}
NULL = {"date": None}


def partitioned_table(root: Path) -> Path:
    """Partitioned by date (one null partition), a DV, three tombstones, a Z-order then a compaction, a VACUUM."""
    t = root / "events"
    fields = [field("date", "string"), field("id", "long"), field("name", "string")]
    meta = metadata(
        fields,
        ["date"],
        **{"delta.targetFileSize": str(100 * MIB), "delta.logRetentionDuration": "interval 240 hours"},
    )
    dv = ["deletionVectors"]
    commit(t, 0, [protocol(dv, dv), meta, info("CREATE TABLE", NOW - 300 * HOUR)], NOW - 300 * HOUR)
    files = [
        add("f1", 10 * MIB, D1, stats(100, "id", 0, 99)),
        add("f2", 200 * MIB, D1, stats(1000, "id", 50, 149)),
        add("f3", 50 * MIB, D1, stats(500, "id", 200, 299)),
        add("f4", 300 * MIB, D2, stats(2000, "id", 0, 999)),
        add("f5", 1 * MIB, D2),  # no statistics
        add("f6", 5 * MIB, NULL, stats(10, "id", 7, 7)),
        add("f7", 5 * MIB, NULL, stats(10, "id", 7, 7)),
        add("o1", 20 * MIB, D1, stats(1, "id", 0, 0)),
        add("o2", 30 * MIB, D2, stats(1, "id", 0, 0)),
        add("o3", 40 * MIB, GONE, stats(1, "id", 0, 0)),
    ]
    commit(t, 1, [*files, info("WRITE", NOW - 250 * HOUR)], NOW - 250 * HOUR)
    commit(t, 2, [remove("o1", 20 * MIB, NOW - 200 * HOUR, D1), info("DELETE", 0)], NOW - 200 * HOUR)
    commit(t, 3, [info("OPTIMIZE", 0, zOrderBy=["id"], predicate=[])], NOW - 150 * HOUR)
    commit(t, 4, [info("VACUUM END", 0, status="COMPLETED")], NOW - 120 * HOUR)
    commit(t, 5, [remove("o3", 40 * MIB, NOW - 100 * HOUR, GONE), info("DELETE", 0)], NOW - 100 * HOUR)
    # a DELETE with deletion vectors: the file stays live under a new DV, its old entry's tombstone frees nothing
    dv_commit = [remove("f2", 200 * MIB, NOW - 50 * HOUR, D1), add("f2", 200 * MIB, D1, stats(1000, "id", 50, 149), 10)]
    commit(t, 6, [*dv_commit, info("DELETE", 0)], NOW - 50 * HOUR)
    commit(t, 7, [info("OPTIMIZE", 0, zOrderBy=[], predicate=[])], NOW - 20 * HOUR)
    commit(t, 8, [remove("o2", 30 * MIB, NOW - 10 * HOUR, D2), info("DELETE", 0)], NOW - 10 * HOUR)
    return t


def test_partitioned_table_with_dvs_tombstones_and_a_zorder(tmp_path: Path) -> None:
    t = partitioned_table(tmp_path)
    h = DeltaTable(str(t)).health(now=NOW)
    assert (h.version, h.computed_at, h.partition_columns, h.min_file_size) == (8, NOW, ("date",), 100 * MIB)
    assert (h.files, h.bytes, h.rows, h.files_without_stats) == (7, 571 * MIB, 3620, 1)
    # small (< 100 MiB): f1 10, f3 50, f5 1, f6 5, f7 5
    assert (h.small_files, h.small_bytes, h.small_file_share) == (5, 71 * MIB, 5 / 7)
    assert (h.deleted_rows, h.deleted_row_share, h.files_with_deletion_vectors) == (10, 10 / 3620, 1)
    histogram = {(b.lower, b.upper): (b.files, b.bytes) for b in h.size_histogram}
    assert [b.lower for b in h.size_histogram] == list(SIZE_BUCKET_EDGES)
    assert {k: v for k, v in histogram.items() if v != (0, 0)} == {
        (MIB, 4 * MIB): (1, MIB),
        (4 * MIB, 16 * MIB): (3, 20 * MIB),
        (16 * MIB, 64 * MIB): (1, 50 * MIB),
        (64 * MIB, 256 * MIB): (1, 200 * MIB),
        (256 * MIB, 1024 * MIB): (1, 300 * MIB),
    }

    # clustering on the Z-order's column (the newest OPTIMIZE, v7, is a compaction; v3 is the Z-order)
    assert (h.clustering_columns, h.clustering_source, h.last_runs.zorder_columns) == (("id",), "zorder", ("id",))
    # 2024-01-01: [0,99] [50,149] [200,299]: point queries 1+2+1; intervals [0,50]=1 [50,99]=2 [99,149]=1 [200,299]=1
    # 2024-01-02: [0,999] (f5 has no stats); null: two files [7,7]: point queries 2+2, one point interval of depth 2
    day1 = ColumnClustering("id", 3, 0, 4 / 3, 5 / 4, 2)
    day2 = ColumnClustering("id", 1, 1, 1.0, 1.0, 1)
    null = ColumnClustering("id", 2, 0, 2.0, 2.0, 2)
    assert h.clustering == (ColumnClustering("id", 6, 1, 9 / 6, (5 / 4 * 3 + 1 * 1 + 2 * 2) / 6, 2),)

    # partitions: null first, then by value; the dropped partition holds a tombstone only
    got = [(p.partition_values, p.files, p.bytes, p.rows, p.small_files, p.small_bytes) for p in h.partitions]
    assert got == [
        (NULL, 2, 10 * MIB, 20, 2, 10 * MIB),
        (GONE, 0, 0, 0, 0, 0),
        (D1, 3, 260 * MIB, 1600, 2, 60 * MIB),
        (D2, 2, 301 * MIB, 2000, 1, MIB),
    ]
    got = [(p.deleted_rows, p.files_with_deletion_vectors, p.tombstone_files, p.tombstone_bytes) for p in h.partitions]
    assert got == [(0, 0, 0, 0), (0, 0, 1, 40 * MIB), (10, 1, 1, 20 * MIB), (0, 0, 1, 30 * MIB)]
    assert [p.clustering for p in h.partitions] == [
        (null,),
        (ColumnClustering("id", 0, 0, None, None, None),),
        (day1,),
        (day2,),
    ]

    # tombstones (168 h): o1 due 32 h ago; o3 due in 68 h (Mar 13 08:00); o2 in 158 h (Mar 17 02:00); f2 is live
    ts = h.tombstones
    assert (ts.retention_hours, ts.files, ts.bytes, ts.files_without_size) == (168.0, 3, 90 * MIB, 0)
    assert (ts.reclaimable_files, ts.reclaimable_bytes) == (1, 20 * MIB)
    assert (ts.next_reclaimable_at, ts.all_reclaimable_at) == (NOW + 68 * HOUR, NOW + 158 * HOUR)
    assert ts.reclaimable_by_day == (
        ("2024-03-10", 1, 20 * MIB),
        ("2024-03-13", 1, 40 * MIB),
        ("2024-03-17", 1, 30 * MIB),
    )

    log = h.log
    sizes = [p.stat().st_size for p in (t / "_delta_log").iterdir()]
    assert (log.version, log.last_checkpoint_version, log.commits_since_checkpoint, log.checkpoint_interval) == (
        8,
        None,
        9,
        10,
    )
    assert (log.log_files, log.log_bytes, log.log_retention_hours, log.oldest_version) == (9, sum(sizes), 240.0, 0)
    # commits at -300 -250 -200 -150 -120 -100 -50 -20 -10 hours: 7 within 240 h, 6 within 168 h
    assert (log.versions_in_log_retention, log.versions_in_file_retention) == (7, 6)

    runs = h.last_runs
    assert (runs.optimize_version, runs.optimize_timestamp, runs.hours_since_optimize) == (7, NOW - 20 * HOUR, 20.0)
    assert (runs.vacuum_version, runs.vacuum_timestamp, runs.hours_since_vacuum) == (4, NOW - 120 * HOUR, 120.0)

    doc = h.to_dict()
    assert doc["tombstones"]["reclaimableBytes"] == 20 * MIB
    assert doc["partitions"][0]["partitionValues"] == {"date": None}


def test_given_columns_and_minimum_size_override_the_defaults(tmp_path: Path) -> None:
    t = partitioned_table(tmp_path)
    h = DeltaTable(str(t)).health(columns=["name"], min_file_size=6 * MIB, now=NOW)
    # no file has name statistics: measured on nothing, every file counted without stats
    assert (h.clustering_source, h.clustering) == ("given", (ColumnClustering("name", 0, 7, None, None, None),))
    assert (h.small_files, h.small_bytes) == (3, 11 * MIB)  # f5 1, f6 5, f7 5
    # the newest OPTIMIZE is not a Z-order and the columns were given: the older Z-order is not looked for
    assert h.last_runs.zorder_columns == ()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"columns": ["nope"]}, "column 'nope' is not in the table schema"),
        ({"columns": ["date"]}, "column 'date' is a partition column"),
        ({"min_file_size": -1}, "min_file_size must be a positive number of bytes, got -1"),
        ({"now": "yesterday"}, "now: not a timestamp: 'yesterday'"),
    ],
)
def test_bad_arguments_name_the_problem(tmp_path: Path, kwargs: dict, message: str) -> None:
    t = partitioned_table(tmp_path)
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(")):
        table_health(DeltaTable(str(t)), **kwargs)


def test_liquid_clustered_table_is_measured_on_its_string_clustering_column(tmp_path: Path) -> None:
    t = tmp_path / "liquid"
    writer = ["domainMetadata", "clustering"]
    domain = {"domain": "delta.clustering", "configuration": '{"clusteringColumns": [["name"]]}', "removed": False}
    meta = metadata([field("id", "long"), field("name", "string")])
    files = [
        add(path, MIB, None, stats(1, "name", lo, hi))
        for path, lo, hi in [
            ("a", "apple", "cherry"),
            ("b", "banana", "date"),
            ("c", "cherry", "cherry"),
            ("d", "fig", "grape"),
            ("e", "elder", "fig"),
        ]
    ]
    commit(t, 0, [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": writer}}, meta], NOW)
    commit(t, 1, [{"domainMetadata": domain}, *files], NOW)
    h = table_health(DeltaTable(str(t)), now=NOW)
    assert (h.clustering_columns, h.clustering_source) == (("name",), "liquid")
    # point queries on each file's min: apple 1 (a), banana 2 (a b), cherry 3 (a b c), fig 2 (d e), elder 1 (e)
    # intervals: apple-banana 1, banana-cherry 2, cherry-date 1 (b), date-elder none, elder-fig 1, fig-grape 1;
    # the point cherry (c) held by a, b, c: 3
    assert h.clustering == (ColumnClustering("name", 5, 0, 9 / 5, 9 / 6, 3),)
    # the one partition of an unpartitioned table: all five 1 MiB files, one row each, the same hand-counted figures
    [whole] = h.partitions
    assert (whole.partition_values, whole.files, whole.bytes, whole.rows) == ({}, 5, 5 * MIB, 5)
    assert whole.clustering == (ColumnClustering("name", 5, 0, 9 / 5, 9 / 6, 3),)


def test_in_commit_timestamps_date_the_versions_and_runs(tmp_path: Path) -> None:
    t = tmp_path / "ict"
    meta = metadata([field("id", "long")], **{"delta.enableInCommitTimestamps": "true"})

    def ict(operation: str, at: int) -> dict:
        return {"commitInfo": {"inCommitTimestamp": at, "timestamp": at, "operation": operation}}

    proto = protocol((), ["inCommitTimestamp"])
    # the file times all say "now": only the in-commit timestamps place the versions in time
    commit(t, 0, [ict("CREATE TABLE", NOW - 300 * HOUR), proto, meta], NOW)
    commit(t, 1, [ict("WRITE", NOW - 200 * HOUR), add("x", MIB, None, stats(5))], NOW)
    commit(t, 2, [ict("OPTIMIZE", NOW - 100 * HOUR)], NOW)
    commit(t, 3, [ict("VACUUM END", NOW - HOUR)], NOW)
    h = table_health(DeltaTable(str(t)), now=NOW)
    assert (h.log.versions_in_log_retention, h.log.versions_in_file_retention) == (4, 2)  # 720 h, 168 h
    assert (h.last_runs.optimize_version, h.last_runs.hours_since_optimize) == (2, 100.0)
    assert (h.last_runs.vacuum_version, h.last_runs.vacuum_timestamp) == (3, NOW - HOUR)


def test_a_healthy_delta_rs_table_with_a_checkpoint_needs_nothing(tmp_path: Path) -> None:
    """Written by delta-rs, checkpointed by deltalite; files, bytes and rows cross-checked with delta-rs."""
    t = tmp_path / "healthy"
    for i in range(3):
        rows = pa.table({"id": pa.array(range(i * 100, i * 100 + 100), pa.int64()), "p": ["x", "y"] * 50})
        deltalake.write_deltalake(str(t), rows, mode="append", partition_by=["p"])
    DeltaTable(str(t)).checkpoint()
    h = DeltaTable(str(t)).health(min_file_size=1)

    actions = deltalake.DeltaTable(str(t)).get_add_actions(flatten=True)
    actions = actions if isinstance(actions, pa.Table) else pa.RecordBatchReader.from_stream(actions).read_all()
    sizes, records = actions.column("size_bytes").to_pylist(), actions.column("num_records").to_pylist()
    on_disk = [p.stat().st_size for p in t.glob("p=*/*.parquet")]  # appends only: every data file is live
    assert (h.files, h.bytes, h.rows) == (len(sizes), sum(sizes), sum(records))
    assert (len(sizes), sum(sizes), sum(records)) == (len(on_disk), sum(on_disk), 300)
    assert len(on_disk) == 6
    assert (h.small_files, h.small_file_share, h.deleted_rows, h.files_with_deletion_vectors) == (0, 0.0, 0, 0)
    assert (h.tombstones.files, h.tombstones.bytes, h.tombstones.next_reclaimable_at) == (0, 0, None)
    assert h.tombstones.reclaimable_by_day == ()
    log_files = [p for p in (t / "_delta_log").iterdir() if p.is_file()]
    assert (h.log.last_checkpoint_version, h.log.commits_since_checkpoint, h.log.oldest_version) == (2, 0, 0)
    assert (h.log.log_files, h.log.log_bytes) == (len(log_files), sum(p.stat().st_size for p in log_files))
    assert (h.log.versions_in_log_retention, h.log.versions_in_file_retention) == (3, 3)
    assert (h.clustering_columns, h.clustering_source, h.clustering) == ((), None, ())
    assert (h.last_runs.optimize_version, h.last_runs.vacuum_version, h.last_runs.zorder_columns) == (None, None, ())
    assert [(p.partition_values, p.files, p.rows) for p in h.partitions] == [({"p": "x"}, 3, 150), ({"p": "y"}, 3, 150)]
    # and the planner agrees: with a policy fitted to the table (no file is a fragment: the target is at most 8 times
    # the smallest file; nothing is below min_file_size), as with the defaults (three fragments per partition, below
    # min_input_files=5), nothing is due: no tombstone, a checkpoint at the newest version
    fitted = MaintenancePolicy(target_file_size=8 * min(sizes), min_file_size=1)
    for policy in (fitted, MaintenancePolicy()):
        plan = plan_maintenance(DeltaTable(str(t)), policy)
        assert (plan.version, plan.actions, plan.deferred, plan.is_empty) == (2, (), (), True)


def test_rows_come_from_numrecords_wherever_the_writer_put_it(tmp_path: Path) -> None:
    t = tmp_path / "records"
    files = [
        add("first", MIB, None, '{"numRecords":5,"minValues":{"id":1},"maxValues":{"id":9},"nullCount":{"id":0}}'),
        add("last", MIB, None, '{"minValues":{"id":1},"maxValues":{"id":9},"nullCount":{"id":0},"numRecords":7}'),
        add("spaced", MIB, None, '{ "numRecords" : 11 }'),
        add("none", MIB),
        add("broken", MIB, None, '{"minValues": oops'),
    ]
    commit(t, 0, [protocol(), metadata([field("id", "long")]), *files], NOW)
    h = table_health(DeltaTable(str(t)), now=NOW)
    assert (h.files, h.rows, h.files_without_stats) == (5, 23, 2)
    with_columns = table_health(DeltaTable(str(t)), columns=["id"], now=NOW)
    assert (with_columns.rows, with_columns.files_without_stats) == (23, 2)


def test_a_file_removed_under_several_deletion_vectors_is_one_tombstone(tmp_path: Path) -> None:
    """Replay keeps a remove per (path, DV); the file's bytes count once, its newest deletion time decides."""
    t = tmp_path / "dvs"
    dv = ["deletionVectors"]
    first, second = deletion_vector(3, "aaaaaaaaaaaaaaaaaaaa"), deletion_vector(5, "bbbbbbbbbbbbbbbbbbbb")
    x = add("x", 10 * MIB, None, stats(20))
    commit(t, 0, [protocol(dv, dv), metadata([field("id", "long")]), x, add("y", MIB, None, stats(1))], NOW)
    commit(t, 1, [remove("x", 10 * MIB, NOW - 300 * HOUR), {"add": {**x["add"], "deletionVector": first}}], NOW)
    commit(
        t, 2, [remove("x", 10 * MIB, NOW - 200 * HOUR, dv=first), {"add": {**x["add"], "deletionVector": second}}], NOW
    )
    commit(t, 3, [remove("x", 10 * MIB, NOW - 2 * HOUR, dv=second)], NOW)
    h = table_health(DeltaTable(str(t)), now=NOW)
    assert (h.files, h.deleted_rows, h.files_with_deletion_vectors) == (1, 0, 0)
    ts = h.tombstones
    assert (ts.files, ts.bytes, ts.reclaimable_files) == (1, 10 * MIB, 0)
    assert (ts.next_reclaimable_at, ts.all_reclaimable_at) == (NOW + 166 * HOUR, NOW + 166 * HOUR)


# the liquid table's five ranges (apple..cherry, banana..date, cherry, fig..grape, elder..fig) as other types
_RANGES = [(1, 3), (2, 4), (3, 3), (6, 7), (5, 6)]


@pytest.mark.parametrize(
    "to_type",
    [
        lambda v: pa.array(v, pa.int64()),
        lambda v: pa.array(v, pa.int8()),
        lambda v: pa.array([float(x) / 4 for x in v], pa.float64()),
        lambda v: pa.array([date(2024, 1, x) for x in v], pa.date32()),
        lambda v: pa.array([datetime(2024, 1, 1, x, tzinfo=UTC) for x in v], pa.timestamp("us", "UTC")),
        lambda v: pa.array([Decimal(x) / 10 for x in v], pa.decimal128(5, 2)),
        lambda v: pa.array([f"v{x}" for x in v], pa.string()),
    ],
    ids=["long", "byte", "double", "date", "timestamp", "decimal", "string"],
)
def test_depth_and_point_queries_do_not_depend_on_the_type(to_type) -> None:
    lows, highs = to_type([lo for lo, _ in _RANGES]), to_type([hi for _, hi in _RANGES])
    sums = group_clustering(lows, highs, np.zeros(5, np.int64), 1)
    got = (sums.files_with_stats[0], sums.point_query_sum[0], sums.depth_sum[0], sums.intervals[0], sums.max_depth[0])
    assert got == (5, 9, 9, 6, 3)


def test_partitions_do_not_mix_and_missing_bounds_are_left_out() -> None:
    # group 0: [1,3] [2,4]; group 1: [2,4] and [3,3]; a file without a max in group 1
    lows = pa.array([1, 2, 2, 3, 1])
    highs = pa.array([3, 4, 4, 3, None])
    sums = group_clustering(lows, highs, np.array([0, 0, 1, 1, 1]), 2)
    assert sums.files_with_stats.tolist() == [2, 2]
    assert sums.point_query_sum.tolist() == [3, 3]  # group 0: 1 + 2; group 1: 1 + 2
    # group 0: [1,2]=1 [2,3]=2 [3,4]=1; group 1: [2,3]=1 [3,4]=1 and the point 3 held by both
    assert (sums.depth_sum.tolist(), sums.intervals.tolist(), sums.max_depth.tolist()) == ([4, 4], [3, 3], [2, 2])


def test_an_empty_partitioned_table(tmp_path: Path) -> None:
    t = tmp_path / "empty"
    commit(t, 0, [protocol(), metadata([field("p", "string"), field("id", "long")], ["p"])], NOW - HOUR)
    h = table_health(DeltaTable(str(t)), columns=["id"], now=NOW)
    assert (h.files, h.bytes, h.rows, h.small_file_share, h.deleted_row_share, h.partitions) == (0, 0, 0, 0.0, 0.0, ())
    assert h.clustering == (ColumnClustering("id", 0, 0, None, None, None),)
    assert sum(b.files for b in h.size_histogram) == 0
    assert (h.tombstones.files, h.log.commits_since_checkpoint, h.log.versions_in_file_retention) == (0, 1, 1)


def test_oldest_version_is_the_oldest_one_deltars_can_still_load(tmp_path: Path) -> None:
    """Commits 0 and 1 cleaned up, a checkpoint at 2: versions 2 and 3 load, 0 and 1 do not (delta-rs decides)."""
    t = tmp_path / "pruned"
    for i in range(4):
        deltalake.write_deltalake(str(t), pa.table({"id": pa.array([i], pa.int64())}), mode="append")
        if i == 2:
            DeltaTable(str(t)).checkpoint()
    for v in (0, 1):
        (t / "_delta_log" / f"{v:020d}.json").unlink()
    loadable = []
    for v in range(4):
        try:
            deltalake.DeltaTable(str(t), version=v)
            loadable.append(v)
        except Exception:
            pass
    assert loadable == [2, 3]
    assert DeltaTable(str(t)).health().log.oldest_version == min(loadable) == 2


REGIONS = ["af", "ap", "eu", "sa", "us"]  # in the order health sorts them
DAYS = [1, 2, 3, 5, 8, 10, 20, 30]  # an integer column: sorted as numbers (10 after 8), not as the strings in the log


def _delta_rs_files(t: Path, columns: list[str]) -> dict[tuple[Any, ...], list[tuple[int, int]]]:
    """(size, numRecords) of every live file, by partition values (typed), as delta-rs reads the log."""
    files: dict[tuple[Any, ...], list[tuple[int, int]]] = {}
    for a in pa.table(deltalake.DeltaTable(str(t)).get_add_actions(flatten=True)).to_pylist():
        key = tuple(a[f"partition.{c}"] for c in columns)
        files.setdefault(key, []).append((a["size_bytes"], a["num_records"]))
    return files


def test_forty_partitions_on_two_columns_have_exact_figures_and_ranking(tmp_path: Path) -> None:
    """delta-rs writes 5 regions x 8 days: partition number i (in region, day order) gets one large file of 2,000
    random longs and i % 4 small files of 5 rows; files below 4 KiB are small. Sizes and rows are delta-rs's."""
    t = tmp_path / "many"
    partitions = [(r, d) for r in REGIONS for d in DAYS]
    rng = np.random.default_rng(4)
    for k, rows in enumerate([2000, 5, 5, 5]):  # append k writes to the partitions with i % 4 >= k
        chosen = [(r, d) for i, (r, d) in enumerate(partitions) if i % 4 >= k]
        data = pa.table(
            {
                "id": pa.array(rng.integers(0, 2**62, rows * len(chosen)), pa.int64()),
                "region": [r for r, _ in chosen for _ in range(rows)],
                "day": pa.array([d for _, d in chosen for _ in range(rows)], pa.int64()),
            }
        )
        deltalake.write_deltalake(str(t), data, mode="append", partition_by=["region", "day"])
    minimum = 4096
    files = _delta_rs_files(t, ["region", "day"])
    assert sorted(files) == sorted(partitions)  # delta-rs reads the days back as integers
    expected = []
    for i, (r, d) in enumerate(partitions):
        found = files[(r, d)]
        sizes = [size for size, _ in found]
        # the design holds: one large file, i % 4 small ones
        assert (len(found), sum(size < minimum for size in sizes)) == (1 + i % 4, i % 4)
        assert sorted(rows for _, rows in found) == [5] * (i % 4) + [2000]
        small_bytes = sum(size for size in sizes if size < minimum)
        expected.append(({"region": r, "day": str(d)}, 1 + i % 4, sum(sizes), 2000 + 5 * (i % 4), i % 4, small_bytes))

    h = table_health(DeltaTable(str(t)), min_file_size=minimum, now=NOW)
    assert h.partition_columns == ("region", "day")
    figures = [(p.partition_values, p.files, p.bytes, p.rows, p.small_files, p.small_bytes) for p in h.partitions]
    assert figures == expected
    assert all(
        (p.deleted_rows, p.tombstone_files, p.tombstone_bytes, p.clustering) == (0, 0, 0, ()) for p in h.partitions
    )
    all_sizes = [size for found in files.values() for size, _ in found]
    assert (h.files, h.bytes, h.rows) == (len(all_sizes), sum(all_sizes), 40 * 2000 + 5 * 60)
    assert (len(all_sizes), 40 * 2000 + 5 * 60) == (100, 80_300)
    assert (h.small_files, h.small_bytes) == (60, sum(size for size in all_sizes if size < minimum))
    # worst first: the ten partitions with 3 small files (i = 3, 7, ..., 39) in partition order, then those with 2
    worst = [p.partition_values for p in h.worst_partitions(12)]
    assert worst == [expected[i][0] for i in [3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 2, 6]]
    assert [p.partition_values for p in h.worst_partitions(100)][-10:] == [expected[i][0] for i in range(0, 40, 4)]


def test_more_partition_value_combinations_than_an_int64_holds_are_renumbered(tmp_path: Path) -> None:
    """`partition_groups` numbers a file's partition by mixed radix over the columns' distinct values and renumbers
    the combinations seen so far when the product of the distinct counts would reach 2**62. Two columns never get
    there: each distinct value needs a file (an add or a remove), so d1 * d2 >= 2**62 needs 2**31 actions. Eleven
    columns of 64 values do with 127 files: 64**10 = 2**60 after ten columns, times 64 at the eleventh. Without the
    renumbering the first column's code would lose its top two bits (2**60 * 64 wraps around 2**64): the 63 files
    that differ from the all-v00 file only in the first column would share keys with it, four by four."""
    t = tmp_path / "wide"
    columns = [f"c{j:02d}" for j in range(11)]
    rows = [[f"v{i:02d}"] * 11 for i in range(64)]  # 64 distinct values in every column
    rows += [[f"v{a:02d}"] + ["v00"] * 10 for a in range(1, 64)]
    data = pa.table(
        {"id": pa.array(range(len(rows)), pa.int64())} | {c: [r[j] for r in rows] for j, c in enumerate(columns)}
    )
    deltalake.write_deltalake(str(t), data, partition_by=columns)
    files = _delta_rs_files(t, columns)
    assert len(files) == 127 and all(len(found) == 1 for found in files.values())
    assert [len({r[j] for r in rows}) for j in range(11)] == [64] * 11  # 64**11 = 2**66 combinations

    h = table_health(DeltaTable(str(t)), now=NOW)
    assert h.files == 127
    expected = [(dict(zip(columns, key, strict=True)), 1, files[key][0][0], 1) for key in sorted(files)]
    assert [(p.partition_values, p.files, p.bytes, p.rows) for p in h.partitions] == expected
