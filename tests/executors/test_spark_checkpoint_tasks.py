"""A partition-pruned plan whose checkpoint Spark tasks read (`engine.checkpoint_tasks`): the same files as delta-rs
and as the local pruned replay, for a multi-part checkpoint and a V2 checkpoint with sidecars from the corpus, with
files removed after the checkpoint; a corrupt part read on a task is one line naming it, exit 2, nothing written.
Whole-table health and the planner's first pass summed by the tasks (`health.task_sums`): every figure equal to the
local stream's, files removed and added after the checkpoint.

The session executors of `tests/conftest.py` are reused, their threshold set to 0 for the test (every checkpoint is
read by tasks), so this adds no JVM.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_deltalite.cli import main
from airflow_provider_deltalite.engine.checkpoint_tasks import load_snapshot_with_tasks, split_row_groups
from airflow_provider_deltalite.engine.partition_filter import PartitionFilter
from airflow_provider_deltalite.engine.snapshot import load_snapshot
from airflow_provider_deltalite.engine.storage.table_storage import Storage
from airflow_provider_deltalite.engine.table import Table
from airflow_provider_deltalite.executors.spark import SparkExecutor
from airflow_provider_deltalite.maintenance.health.compute import table_health
from airflow_provider_deltalite.maintenance.optimize import optimize
from airflow_provider_deltalite.maintenance.planner import MaintenancePolicy, health_and_plan
from airflow_provider_deltalite.table import DeltaTable
from tests.conformance.corpus import deltars_paths, normalise_path
from tests.helpers import copy_table, tree_state

pytestmark = pytest.mark.spark

MULTI_PART = "kernel-rs-data/v1-multi-part-partitioned-struct-stats-only"  # multipart@5 (3 parts), partitioned by part
V2_SIDECARS = "kernel-rs-data/v2-checkpoints-parquet-with-sidecars"  # V2 parquet checkpoint at 6, 2 sidecars


@pytest.fixture
def tasks_always(spark_local: SparkExecutor, monkeypatch: pytest.MonkeyPatch) -> SparkExecutor:
    """The session's local[2] executor with every checkpoint read by its tasks."""
    monkeypatch.setattr(spark_local, "checkpoint_task_bytes", 0)
    return spark_local


@pytest.fixture
def any_tasks_always(spark_any: SparkExecutor, monkeypatch: pytest.MonkeyPatch) -> SparkExecutor:
    """The classic, then the Spark Connect session executor, with every checkpoint read by its tasks."""
    monkeypatch.setattr(spark_any, "checkpoint_task_bytes", 0)
    return spark_any


def _commit(table: Path, version: int, actions: list[dict[str, Any]]) -> None:
    info = {"commitInfo": {"timestamp": 1_800_000_000_000 + version, "operation": "DELETE"}}
    lines = [json.dumps(a) for a in [info, *actions]]
    (table / "_delta_log" / f"{version:020d}.json").write_text("\n".join(lines) + "\n")


def _remove_all_of(table: Path, version: int, predicate: str, *, keep_partition_values: bool = True) -> list[str]:
    """Commit ``version`` removing every live file ``predicate`` selects; the removed paths."""
    snap = load_snapshot(Storage(str(table)), partition_filter=PartitionFilter(predicate))
    rows = snap.raw_files.to_pylist()
    removes = []
    for row in rows:
        remove: dict[str, Any] = {"path": row["path"], "deletionTimestamp": 1_800_000_000_000, "dataChange": True}
        if keep_partition_values:
            remove["partitionValues"] = row["partitionValues"]
        if row.get("deletionVector"):
            remove["deletionVector"] = row["deletionVector"]
        removes.append({"remove": remove})
    _commit(table, version, removes)
    return [r["path"] for r in rows]


def _paths(snap: Any, root: Path) -> set[str]:
    return {normalise_path(p, root) for p in snap.raw_files.column("path").to_pylist()}


def _same(a: Any, b: Any) -> None:
    key = lambda r: (r["path"], json.dumps(r.get("deletionVector"), sort_keys=True))  # noqa: E731
    assert sorted(a.raw_files.to_pylist(), key=key) == sorted(b.raw_files.to_pylist(), key=key)
    assert sorted(a.tombstones.to_pylist(), key=key) == sorted(b.tombstones.to_pylist(), key=key)
    assert (a.version, a.metadata, a.protocol, a.domain_metadata, a.app_transactions) == (
        b.version,
        b.metadata,
        b.protocol,
        b.domain_metadata,
        b.app_transactions,
    )


def test_multi_part_checkpoint_read_by_tasks_equals_delta_rs_and_the_local_replay(
    tasks_always: SparkExecutor, tmp_path: Path
) -> None:
    table = copy_table(MULTI_PART, tmp_path / "t")
    # partition 2's files are removed after the checkpoint, one of them by a remove without partition values
    removed = _remove_all_of(table, 6, "part = 2")
    assert len(removed) == 2
    storage = Storage(str(table))
    theirs = deltars_paths(table)
    assert theirs is not None and len(theirs) == 3
    assert not {normalise_path(p, table) for p in removed} & theirs  # delta-rs: partition 2 is empty too
    # (each load is two Spark queries: one predicate and the plan keep this test cheap; the other tests compare
    # every file with delta-rs)
    ours = load_snapshot_with_tasks(storage, None, PartitionFilter("part = 2"), tasks_always)
    assert ours is not None and ours.num_files == 0 and ours.pruned_by == "part = 2"
    assert ours.tombstones.num_rows == 2
    _same(ours, load_snapshot(storage, partition_filter=PartitionFilter("part = 2")))
    # the plan through the executor: OPTIMIZE's dry run considers the same files
    stats = optimize(
        DeltaTable(str(table)), where="part = 1", dry_run=True, min_file_size=1 << 30, executor=tasks_always
    )
    assert stats.total_considered_files == 2


def test_v2_checkpoint_sidecars_read_by_tasks_equal_delta_rs(any_tasks_always: SparkExecutor, tmp_path: Path) -> None:
    table = copy_table(V2_SIDECARS, tmp_path / "t")
    storage = Storage(str(table))
    full = load_snapshot(storage)
    gone = sorted(full.raw_files.column("path").to_pylist())[:7]
    rows = {r["path"]: r for r in full.raw_files.to_pylist()}
    _commit(
        table, 7, [{"remove": {"path": p, "dataChange": True, "deletionTimestamp": 1, **_dv(rows[p])}} for p in gone]
    )
    theirs = deltars_paths(table)
    assert theirs is not None and len(theirs) == 101 - 7
    # the table has no partition column: a scan's predicate on a data column keeps every file
    keep_all = PartitionFilter("id > 5", partition_columns_only=False)
    ours = load_snapshot_with_tasks(storage, None, keep_all, any_tasks_always)
    assert ours is not None
    _same(ours, load_snapshot(storage, partition_filter=keep_all))
    assert _paths(ours, table) == theirs
    assert not {normalise_path(p, table) for p in gone} & _paths(ours, table)


def _dv(row: dict[str, Any]) -> dict[str, Any]:
    return {"deletionVector": row["deletionVector"]} if row.get("deletionVector") else {}


def test_a_classic_checkpoint_of_many_row_groups_read_by_tasks_equals_delta_rs(
    tasks_always: SparkExecutor, tmp_path: Path
) -> None:
    import pyarrow.parquet as pq

    table = copy_table("delta-golden/dv-partitioned-with-checkpoint", tmp_path / "t")
    checkpoint = table / "_delta_log" / "00000000000000000010.checkpoint.parquet"
    # the same rows in row groups of 6: the file spreads over row-group ranges, as a delta-rs checkpoint of millions
    pq.write_table(pq.read_table(checkpoint), checkpoint, row_group_size=6)
    assert pq.ParquetFile(checkpoint).num_row_groups >= 4
    _remove_all_of(table, 16, "part = 2", keep_partition_values=False)
    storage = Storage(str(table))
    theirs = deltars_paths(table)
    assert theirs is not None
    # partition 2's files were removed after the checkpoint by removes without partition values
    for predicate in ("part = 2", "part IS NULL OR part IS NOT NULL"):
        ours = load_snapshot_with_tasks(storage, None, PartitionFilter(predicate), tasks_always)
        assert ours is not None
        _same(ours, load_snapshot(storage, partition_filter=PartitionFilter(predicate)))
        assert _paths(ours, table) <= theirs
    assert _paths(ours, table) == theirs


NOW_MS = 1_900_000_000_000


def _task_jobs(executor: SparkExecutor, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the functions ``executor`` runs as tasks from now on (so a test knows the tasks did the work)."""
    jobs: list[str] = []
    real = executor.map_tasks

    def counted(fn: Any, items: Any) -> Any:
        jobs.append(fn.__name__)
        return real(fn, items)

    monkeypatch.setattr(executor, "map_tasks", counted)
    return jobs


def test_health_summed_by_tasks_equals_the_local_stream_on_a_multi_part_checkpoint(
    any_tasks_always: SparkExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = copy_table(MULTI_PART, tmp_path / "t")
    _remove_all_of(table, 6, "part = 2")  # after the checkpoint: not counted, the removes are tombstones
    jobs = _task_jobs(any_tasks_always, monkeypatch)
    # on Spark Connect a worker keeps the job's items loaded for all of its tasks: each task sums into its own
    ours = table_health(Table(str(table)), now=NOW_MS, tasks=any_tasks_always)
    assert jobs == ["read_slice_first", "sum_slice"]
    local = table_health(Table(str(table)), now=NOW_MS)
    assert ours.to_dict() == local.to_dict()
    assert (ours.files, ours.tombstones.files, len(ours.partitions)) == (3, 2, 3)
    assert [(p.files, p.tombstone_files) for p in ours.partitions] == [(1, 0), (2, 0), (0, 2)]


def test_health_summed_by_tasks_equals_the_local_stream_on_a_v2_checkpoint_with_sidecars(
    tasks_always: SparkExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = copy_table(V2_SIDECARS, tmp_path / "t")
    jobs = _task_jobs(tasks_always, monkeypatch)
    ours = table_health(Table(str(table)), now=NOW_MS, tasks=tasks_always)
    assert jobs == ["read_slice_first", "sum_slice"]  # the sidecars' removes, then their sums
    assert ours.to_dict() == table_health(Table(str(table)), now=NOW_MS).to_dict()
    assert ours.files == 101


def test_health_cli_with_the_spark_executor_sums_a_checkpoint_on_tasks(
    spark_local: SparkExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    table = copy_table(MULTI_PART, tmp_path / "t")
    wrapped = SparkExecutor(spark_local.spark, checkpoint_task_bytes=0)  # not owned: closing it keeps the session
    monkeypatch.setattr(SparkExecutor, "start", classmethod(lambda cls, *a, **k: wrapped))
    jobs = _task_jobs(wrapped, monkeypatch)
    spark = ["--executor", "spark", "--spark-checkpoint-tasks", "0"]
    assert main(["health", str(table), "--json", *spark]) == 0
    ours = json.loads(capsys.readouterr().out)
    assert jobs == ["read_slice_first", "sum_slice"]
    assert main(["health", str(table), "--json"]) == 0
    local = json.loads(capsys.readouterr().out)
    assert (ours["files"], ours["partitions"], ours["sizeHistogram"]) == (
        5,
        local["partitions"],
        local["sizeHistogram"],
    )
    # below the threshold no session starts: the local stream
    monkeypatch.setattr(SparkExecutor, "start", classmethod(lambda cls, *a, **k: pytest.fail("a session started")))
    assert main(["health", str(table), "--json", "--executor", "spark"]) == 0


def test_health_and_plan_summed_by_tasks_equal_the_local_stream_on_a_classic_checkpoint(
    tasks_always: SparkExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow.parquet as pq

    table = copy_table("delta-golden/dv-partitioned-with-checkpoint", tmp_path / "t")
    checkpoint = table / "_delta_log" / "00000000000000000010.checkpoint.parquet"
    # row groups of 6: the checkpoint spreads over row-group ranges; two files kept with a new deletion vector have
    # their tombstone in another range than their live row (live again, so not reclaimable)
    pq.write_table(pq.read_table(checkpoint), checkpoint, row_group_size=6)
    _remove_all_of(table, 16, "part = 2", keep_partition_values=False)
    _commit(
        table,
        17,
        [
            {
                "add": {
                    "path": "part=99/new.parquet",
                    "partitionValues": {"part": "99"},
                    "size": 10,
                    "modificationTime": 1,
                    "dataChange": True,
                    "stats": '{"numRecords": 3}',
                }
            }
        ],
    )
    policy = MaintenancePolicy()
    jobs = _task_jobs(tasks_always, monkeypatch)
    health, plan = health_and_plan(Table(str(table)), policy, now=NOW_MS, tasks=tasks_always)
    # the first pass (the partitions that need work are replayed in this process)
    assert jobs == ["read_slice_first", "sum_slice"]
    local_health, local_plan = health_and_plan(Table(str(table)), policy, now=NOW_MS)
    assert health.to_dict() == local_health.to_dict()
    assert plan.to_dict() == local_plan.to_dict()
    assert not plan.is_empty
    parts = {p.partition_values["part"]: p for p in health.partitions}
    assert parts["2"].files == 0 and parts["99"].files == 1 and parts["99"].rows == 3


def test_a_single_file_checkpoint_spreads_over_row_group_ranges(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"x": list(range(100))}), path, row_group_size=10)
    slices = split_row_groups(Storage(str(tmp_path)), "c.parquet", 3, 0, 4)
    assert [s.row_groups for s in slices] == [(0, 1, 2), (3, 4, 5), (6, 7, 8), (9,)]
    assert [s.first_row for s in slices] == [0, 30, 60, 90]


def test_a_corrupt_checkpoint_part_read_on_a_task_is_one_line_and_exit_2(
    spark_local: SparkExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    table = copy_table(MULTI_PART, tmp_path / "t")
    log = table / "_delta_log"
    for v in range(5):  # no full log to fall back on
        (log / f"{v:020d}.json").unlink()
        (log / f"{v:020d}.crc").unlink()
    part = log / "00000000000000000005.checkpoint.0000000002.0000000003.parquet"
    part.write_bytes(b"PAR1 not a parquet file")
    before = tree_state(table)
    wrapped = SparkExecutor(spark_local.spark, checkpoint_task_bytes=0)  # not owned: closing it keeps the session
    monkeypatch.setattr(SparkExecutor, "start", classmethod(lambda cls, *a, **k: wrapped))
    argv = [
        "optimize",
        str(table),
        "--where",
        "part = 1",
        "--executor",
        "spark",
        "--spark-checkpoint-tasks",
        "0",
        "--json",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and part.name in err[0], err
    assert tree_state(table) == before
