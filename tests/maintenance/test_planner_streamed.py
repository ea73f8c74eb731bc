"""The streamed planner (`planner.streamed`: one pass over the log, pruned replays of the partitions that need work)
gives the plan and the health the whole snapshot gives, on the corpus and on random histories; its health counts
agree with delta-rs.

Groups and chunks are shrunk to a few files and partitions here, so every table is planned from several pruned
replays, each cut into several chunks.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_provider_deltalite.engine.errors import DeltaLiteError
from airflow_provider_deltalite.engine.partition_set import PartitionSetFilter
from airflow_provider_deltalite.engine.table import Table
from airflow_provider_deltalite.maintenance.checkpoint import checkpoint
from airflow_provider_deltalite.maintenance.clustering.runs import TAG_COLUMNS, TAG_CUBE_ID, TAG_CURVE
from airflow_provider_deltalite.maintenance.planner import (
    MaintenancePolicy,
    health_and_plan,
    plan_maintenance,
    streamed,
)
from tests.helpers import CORPUS
from tests.maintenance.planner_tables import (
    DATE_SCHEMA,
    HOUR,
    KIB,
    MIB,
    NOW,
    add,
    commit_info,
    metadata,
    protocol,
    remove,
    write_log,
)

# thresholds low enough that the corpus' tables of a few small files need work: compaction, purges, VACUUM
BUSY = MaintenancePolicy(
    target_file_size=MIB,
    min_input_files=2,
    optimize_cooldown_hours=0,
    vacuum_cooldown_hours=0,
    retention_hours=0,
)
POLICIES = {
    "default": MaintenancePolicy(),
    "busy": BUSY,
    "zorder": BUSY.replace(zorder_columns=("id",), max_point_query_files=1.0),
    "tight budget": BUSY.replace(max_rewrite_bytes_per_run=4 * KIB, max_files_deleted_per_run=2),
}


def _corpus_tables() -> list[str]:
    summary = json.loads((CORPUS / "summary.json").read_text())
    return sorted(
        t["staged_path"]
        for t in summary
        if t["test_role"] == "positive"
        and t["has_delta_log"]
        and not t["replay_error"]
        and t["protocol_readable"]
        and (t["partition_columns"] or t["live_files_with_dv"])
    )


@pytest.fixture(autouse=True)
def _small_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(streamed, "PLAN_GROUP_FILES", 3)
    monkeypatch.setattr(streamed, "MAX_PARTITIONS_PER_PREDICATE", 2)


def _both(table: Table, policy: MaintenancePolicy) -> tuple[Any, Any]:
    """(streamed health and plan, whole-snapshot health and plan), as dicts, or the error type each raised."""
    out = []
    for snapshot in (None, "whole"):
        try:
            given = table.snapshot() if snapshot else None
            health, plan = health_and_plan(table, policy, snapshot=given, now=NOW)
            out.append((health.to_dict(), plan.to_dict()))
        except DeltaLiteError as exc:
            out.append(type(exc).__name__)
    return out[0], out[1]


@pytest.mark.parametrize("name", _corpus_tables())
def test_the_streamed_plan_is_the_whole_snapshots_on_the_corpus(name: str) -> None:
    table = Table(str(CORPUS / name))
    for label, policy in POLICIES.items():
        streamed_result, whole = _both(table, policy)
        assert streamed_result == whole, f"{name} under the {label} policy"


def _random_history(root: Path, seed: int, dvs: bool = True) -> Table:
    """A partitioned table of random appends, removes crossing partitions, deletion vectors (unless not ``dvs``)
    and Z-order tags, with null and empty partition values, checkpointed part of the way."""
    rng = random.Random(seed)
    days = ["2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04", None]
    columns_tag = json.dumps(["id"], separators=(",", ":"))
    live: dict[str, tuple[int, str | None]] = {}
    commits: list[list[dict[str, Any]]] = [
        [protocol(dvs=True), metadata(DATE_SCHEMA, ["day"]), commit_info(NOW - 200 * HOUR)]
    ]
    n = 0
    for version in range(1, 14):
        actions: list[dict[str, Any]] = [commit_info(NOW - (200 - version) * HOUR)]
        for path in rng.sample(sorted(live), k=min(len(live), rng.randint(0, 3))):  # of earlier commits only
            size, day = live.pop(path)
            deleted = NOW - rng.choice([300, 5, 1]) * HOUR
            actions.append(remove(path, size, deleted, partition={"day": day}))
        for _ in range(rng.randint(1, 8)):
            day = rng.choice(days)
            path = f"day={day or '__HIVE_DEFAULT_PARTITION__'}/f{n}.parquet"
            n += 1
            size = rng.choice([20 * KIB, 90 * KIB, 400 * KIB, 2 * MIB])
            tags = None
            if rng.random() < 0.3:
                tags = {TAG_COLUMNS: columns_tag, TAG_CURVE: rng.choice(["zorder", "hilbert"]), TAG_CUBE_ID: "c1"}
            dv = rng.choice([None, None, 2, 40]) if dvs else None
            records = rng.choice([100, 100, None])
            actions.append(add(path, size, partition={"day": day}, records=records, dv_rows=dv, tags=tags))
            live[path] = (size, day)
        commits.append(actions)
    write_log(root, commits[:9])
    table = Table(str(root))
    checkpoint(table)
    log = root / "_delta_log"
    for version, actions in enumerate(commits[9:], start=9):
        (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    return table


@pytest.mark.parametrize("seed", range(4))
def test_the_streamed_plan_is_the_whole_snapshots_on_random_histories(tmp_path: Path, seed: int) -> None:
    table = _random_history(tmp_path / "t", seed)
    for label, policy in POLICIES.items():
        streamed_result, whole = _both(table, policy)
        assert isinstance(streamed_result, tuple), streamed_result
        assert streamed_result == whole, f"seed {seed}, the {label} policy"
    health, plan = health_and_plan(table, BUSY, now=NOW)
    assert plan.actions  # the histories are made to need work
    rs = pa.table(deltalake.DeltaTable(str(table.uri)).get_add_actions(flatten=True))
    assert health.files == rs.num_rows
    assert health.bytes == pc.sum(rs.column("size_bytes")).as_py()
    assert health.rows == pc.sum(rs.column("num_records")).as_py()
    assert health.files_without_stats == rs.column("num_records").null_count
    by_day = {p.partition_values["day"]: p.files for p in health.partitions}
    days = [None if d is None else d.isoformat() for d in rs.column("partition.day").to_pylist()]
    assert by_day == {d: days.count(d) for d in set(days)}


@pytest.mark.parametrize("seed", range(2))
def test_the_streamed_compaction_is_the_whole_snapshots_without_deletion_vectors(tmp_path: Path, seed: int) -> None:
    """Partitions without deletion vectors are compacted from the stream's sizes (many files of equal size, so
    bins are cut between ties), with no replay."""
    table = _random_history(tmp_path / "t", seed, dvs=False)
    policy = BUSY.replace(target_file_size=MIB + 300 * KIB)
    streamed_result, whole = _both(table, policy)
    assert streamed_result == whole
    assert [a.operation for a in plan_maintenance(table, policy, now=NOW).actions][:1] == ["optimize"]


def test_only_the_partitions_that_need_work_are_replayed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """day=A has 6 fragments, day=B 2 large files, day=C one file whose deletion vector removes 40% of its rows:
    C is replayed (purge); A, without deletion vectors, is compacted from the stream's sizes; B is not planned."""
    a, b, c = "2026-11-01", "2026-11-02", "2026-11-03"
    write_log(
        tmp_path,
        [
            [protocol(dvs=True), metadata(DATE_SCHEMA, ["day"]), commit_info(NOW - 100 * HOUR)],
            [add(f"day={a}/a{i}.parquet", 10 * KIB, partition={"day": a}) for i in range(6)]
            + [add(f"day={b}/b{i}.parquet", 4 * MIB, partition={"day": b}) for i in range(2)]
            + [add(f"day={c}/c0.parquet", 4 * MIB, partition={"day": c}, dv_rows=40)],
        ],
    )
    replayed: list[frozenset] = []
    real = streamed.load_snapshot

    def spy(storage: Any, version: Any = None, **kwargs: Any) -> Any:
        replayed.append(kwargs["partition_filter"].partitions)
        return real(storage, version, **kwargs)

    monkeypatch.setattr(streamed, "PLAN_GROUP_FILES", 100)
    monkeypatch.setattr(streamed, "load_snapshot", spy)
    plan = plan_maintenance(Table(str(tmp_path)), MaintenancePolicy(target_file_size=MIB), now=NOW)
    assert replayed == [frozenset({(c,)})]
    assert [(x.operation, x.partitions) for x in plan.actions] == [
        ("purge", ({"day": c},)),
        ("optimize", ({"day": a},)),
    ]


def test_a_null_partition_without_deletion_vectors_is_compacted_without_a_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A null partition value is no file without partition values: no key of a partition that holds no file makes
    the spellings collide (which replays the whole table)."""
    write_log(
        tmp_path,
        [
            [protocol(), metadata(DATE_SCHEMA, ["day"]), commit_info(NOW - 100 * HOUR)],
            [add(f"day=__HIVE_DEFAULT_PARTITION__/n{i}.parquet", 10 * KIB, partition={"day": None}) for i in range(6)],
        ],
    )

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("replayed")

    monkeypatch.setattr(streamed, "load_snapshot", refuse)
    plan = plan_maintenance(Table(str(tmp_path)), MaintenancePolicy(target_file_size=MIB), now=NOW)
    assert [(a.operation, a.partitions) for a in plan.actions] == [("optimize", ({"day": None},))]


def test_a_healthy_table_is_planned_without_a_replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_log(
        tmp_path,
        [
            [protocol(), metadata(DATE_SCHEMA, ["day"]), commit_info(NOW - 100 * HOUR)],
            [add(f"day=2026-11-0{i}/f.parquet", 4 * MIB, partition={"day": f"2026-11-0{i}"}) for i in range(1, 4)],
        ],
    )

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("replayed")

    monkeypatch.setattr(streamed, "load_snapshot", refuse)
    assert plan_maintenance(Table(str(tmp_path)), MaintenancePolicy(target_file_size=MIB), now=NOW).is_empty


def test_a_checkpoints_recent_tombstones_are_not_reclaimable(tmp_path: Path) -> None:
    """The stream reads the checkpoint's deletion times: a file removed an hour ago is not past the 168-hour
    retention (read as deleted at the epoch, it was), in the health and in the plan. The clock is the real one: the
    checkpoint keeps only the tombstones within the retention of it."""
    now = int(time.time() * 1000)
    write_log(
        tmp_path,
        [
            [protocol(), metadata(DATE_SCHEMA), commit_info(now - 300 * HOUR)],
            [add("old.parquet", 4 * MIB), add("new.parquet", 4 * MIB)],
            [remove("old.parquet", 4 * MIB, now - 160 * HOUR), remove("new.parquet", 4 * MIB, now - HOUR)],
        ],
    )
    table = Table(str(tmp_path))
    checkpoint(table)
    later = now + 10 * HOUR  # the older tombstone is past the retention then, the newer one is not
    health, plan = health_and_plan(table, MaintenancePolicy(vacuum_cooldown_hours=0), now=later)
    assert (health.tombstones.files, health.tombstones.reclaimable_files) == (2, 1)
    assert [(a.operation, a.estimate.files_deleted) for a in plan.actions] == [("vacuum", 1)]


def test_a_partition_set_matches_raw_values_exactly() -> None:
    """Null and "" are one value; a value holding the separator does not run into the next column's."""
    keep = PartitionSetFilter.of([{"a": "x\x02", "b": "y"}, {"a": None, "b": ""}, {"a": "é", "b": "z"}])
    fields = [{"name": n, "type": "string", "nullable": True, "metadata": {}} for n in ("a", "b")]
    meta = {"schemaString": json.dumps({"type": "struct", "fields": fields}), "partitionColumns": ["a", "b"]}
    a = pa.array(["x\x02", "x", None, "", "é", "é"])
    b = pa.array(["y", "\x02y", None, None, "z", "zz"])
    rows = pa.StructArray.from_arrays([a, b], names=["a", "b"], mask=pa.array([False] * 5 + [True]))
    assert keep.bind(meta, None).mask_struct(rows).tolist() == [True, False, True, True, True, True]
    assert keep.bind(meta, None).mask([a, b], 6).tolist() == [True, False, True, True, True, False]
