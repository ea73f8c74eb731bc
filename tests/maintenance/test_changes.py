"""Log tailing (`DeltaTable.changes`, `list_changes`, `new_data_event`, `poll_changes`) on real tables.

One table goes through the history of issue 7 (appends by deltalite and delta-rs 1.6.3, deltalite OPTIMIZE,
delta-rs Z-order and compaction, deltalite VACUUM, property change, delete, column added) and every version's kind
is asserted; counts are compared with what delta-rs reads; the edges (log cleanup, recreation, holes, corrupt
commits, bad arguments) on copies of it and on corpus tables; the S3 listing path on a moto_server.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine import CorruptLog, InvalidArgument, TableNotFound
from airflow_provider_deltalite.engine.checkpoint_writer import write_checkpoint
from airflow_provider_deltalite.engine.data_file_writer import WriterOptions
from airflow_provider_deltalite.engine.errors import LogGap, TableRecreated
from airflow_provider_deltalite.engine.rewrite import TableContext, write_data_file
from airflow_provider_deltalite.engine.storage import Storage
from airflow_provider_deltalite.maintenance.changes import (
    PROBE_LIMIT,
    ChangeSet,
    list_changes,
    new_data_event,
    poll_changes,
)
from airflow_provider_deltalite.maintenance.commit_kinds import decode_operation_parameters
from airflow_provider_deltalite.maintenance.vacuum import vacuum
from tests.helpers import CORPUS, copy_table, tree_state

KINDS = [
    "data",  # 0 delta-rs creates the table with 2,000 rows
    "data",  # 1 deltalite append
    "rearrange",  # 2 deltalite OPTIMIZE
    "rearrange",  # 3 delta-rs z_order
    "rearrange",  # 4 delta-rs compact
    "maintenance",  # 5 deltalite VACUUM START
    "maintenance",  # 6 deltalite VACUUM END
    "metadata",  # 7 delta-rs set_table_properties
    "data",  # 8 delta-rs delete
    "data",  # 9 deltalite append
    "metadata",  # 10 delta-rs add_columns
    "data",  # 11 delta-rs append
]
OPERATIONS = [
    "WRITE",
    "WRITE",
    "OPTIMIZE",
    "OPTIMIZE",
    "OPTIMIZE",
    "VACUUM START",
    "VACUUM END",
    "SET TBLPROPERTIES",
    "DELETE",
    "WRITE",
    "ADD COLUMN",
    "WRITE",
]
ICT_TABLE = "delta-rs/cdc_ict_table"
ZORDER_GOLDEN = "delta-golden/commit-info-containing-arbitrary-operationParams-types"


def _rows(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "v": pa.array([i / 4 for i in range(n)])})


def append_ours(path: Path, rows: pa.Table) -> int:
    """A blind append through deltalite's engine: one data file written by `write_data_file`, one commit."""
    table = DeltaTable(str(path))
    snapshot = table.snapshot()
    add = write_data_file(TableContext.from_snapshot(snapshot), {}, [rows], WriterOptions())
    txn = table.transaction(snapshot)
    txn.add({**add, "dataChange": True})
    return txn.commit("WRITE", {"mode": "Append"}, {"numFiles": 1, "numOutputRows": rows.num_rows}).version


def build_history(path: Path) -> Path:
    """The 12-version history of issue 7 item 7 (see KINDS)."""
    deltalake.write_deltalake(str(path), _rows(0, 2000))
    assert append_ours(path, _rows(2000, 2000)) == 1
    assert DeltaTable(str(path)).optimize().committed_version == 2
    deltalake.DeltaTable(str(path)).optimize.z_order(["id"], target_size=8_000)  # several small files
    assert deltalake.DeltaTable(str(path)).optimize.compact(target_size=1 << 24)["numFilesAdded"] == 1
    stats = vacuum(DeltaTable(str(path)), retention_hours=0, enforce_retention_duration=False)
    assert stats.committed_versions == (5, 6)
    deltalake.DeltaTable(str(path)).alter.set_table_properties({"delta.logRetentionDuration": "interval 60 days"})
    deltalake.DeltaTable(str(path)).delete("id < 500")
    assert append_ours(path, _rows(5000, 300)) == 9
    deltalake.DeltaTable(str(path)).alter.add_columns([deltalake.Field("note", "string", nullable=True)])
    extra = _rows(9000, 10).append_column("note", pa.array(["x"] * 10))
    deltalake.write_deltalake(str(path), extra, mode="append")
    assert deltalake.DeltaTable(str(path)).version() == 11
    return path


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_history(tmp_path_factory.mktemp("history") / "t")


@pytest.fixture
def history_copy(history: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(history, tmp_path / "copy"))


def _actions(path: Path, version: int) -> list[dict[str, Any]]:
    text = (path / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _write_commit(path: Path, version: int, actions: list[dict[str, Any]]) -> None:
    body = "".join(json.dumps(a) + "\n" for a in actions)
    (path / "_delta_log" / f"{version:020d}.json").write_text(body)


# -- classification -----------------------------------------------------------------------------------------------


def test_every_version_of_the_history_has_its_kind(history: Path) -> None:
    changes = DeltaTable(str(history)).changes(since=-1)
    assert [c.kind for c in changes.changes] == KINDS
    assert [c.operation for c in changes.changes] == OPERATIONS
    assert [c.version for c in changes.changes] == list(range(12))
    assert (changes.since, changes.latest, changes.gap_from, changes.recreated) == (-1, 11, None, False)
    (metadata,) = [a["metaData"] for a in _actions(history, 0) if "metaData" in a]
    assert changes.table_id == metadata["id"]
    assert [c.version for c in changes.of_kind("data")] == [0, 1, 8, 9, 11]
    assert [c.version for c in changes.of_kind("rearrange", "maintenance")] == [2, 3, 4, 5, 6]
    assert [v["version"] for v in changes.to_dict()["versions"]] == [0, 1, 8, 9, 11]
    assert [v["kind"] for v in changes.to_dict(all_kinds=True)["versions"]] == KINDS
    with pytest.raises(ValueError, match=r"unknown commit kind 'optimize'"):
        changes.of_kind("optimize")

    # the same through the function, from a cursor in the middle
    later = list_changes(Storage(str(history)), 4)
    assert [(c.version, c.kind) for c in later.changes] == list(enumerate(KINDS))[5:]
    assert later.changes == changes.changes[5:]


def test_rearrangements_and_maintenance_add_nothing(history: Path) -> None:
    changes = DeltaTable(str(history)).changes(since=1, until=7)
    for c in changes.changes:
        assert (c.added_files, c.removed_files, c.added_rows, c.removed_rows) == (0, 0, 0, 0), c
        assert (c.added_bytes, c.removed_bytes, c.added_paths) == (0, 0, ()), c
    optimize = changes.changes[0]
    assert optimize.operation_parameters == {"predicate": [], "zOrderBy": [], "auto": False}
    assert changes.changes[3].operation_parameters == {
        "retentionCheckEnabled": False,
        "defaultRetentionMillis": 604800000,
        "specifiedRetentionMillis": 0,
    }
    assert changes.changes[4].operation_parameters == {"status": "COMPLETED"}
    assert changes.changes[5].operation_parameters == {"properties": {"delta.logRetentionDuration": "interval 60 days"}}


def _live(path: Path, version: int) -> dict[str, tuple[int, int]]:
    """delta-rs' live files at ``version``: path -> (size, numRecords)."""
    adds = deltalake.DeltaTable(str(path), version=version).get_add_actions(flatten=True)
    return {
        p: (s, n)
        for p, s, n in zip(
            adds.column("path").to_pylist(),
            adds.column("size_bytes").to_pylist(),
            adds.column("num_records").to_pylist(),
            strict=True,
        )
    }


@pytest.mark.parametrize("version", [1, 8, 9, 11])
def test_data_counts_equal_what_delta_rs_reads(history: Path, version: int) -> None:
    (change,) = DeltaTable(str(history)).changes(since=version - 1, until=version).changes
    before, after = _live(history, version - 1), _live(history, version)
    added = {p: after[p] for p in after if p not in before}
    removed = {p: before[p] for p in before if p not in after}
    assert sorted(change.added_paths) == sorted(added)
    assert change.added_files == len(added) >= 1
    assert change.added_bytes == sum(s for s, _ in added.values())
    assert change.added_rows == sum(n for _, n in added.values())
    assert change.removed_files == len(removed)
    assert change.removed_bytes == sum(s for s, _ in removed.values())
    metrics = next(h for h in deltalake.DeltaTable(str(history)).history() if h["version"] == version)
    metrics = metrics.get("operationMetrics", {})
    if version == 8:  # delta-rs' own account of its DELETE
        assert change.added_files == metrics["num_added_files"] == 1
        assert change.removed_files == metrics["num_removed_files"] == 1
        assert change.added_rows == metrics["num_copied_rows"] == 3500
        assert change.removed_rows is None  # delta-rs writes its removes without stats
    else:
        assert change.removed_rows == 0
        assert change.added_rows == {1: 2000, 9: 300, 11: 10}[version]
    commit_info = _actions(history, version)[0]["commitInfo"]
    assert change.timestamp == commit_info["timestamp"]


def test_commit_info_data_change_is_trusted_only_when_the_actions_agree(
    history_copy: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = history_copy
    meta = next(a for a in _actions(path, 0) if "metaData" in a)
    add = {"path": "f1.parquet", "partitionValues": {}, "size": 100, "modificationTime": 1, "dataChange": True}
    stats = {"numRecords": 10}
    dv = {"storageType": "u", "pathOrInlineDv": "ab", "offset": 1, "sizeInBytes": 40, "cardinality": 3}
    history_actions = [
        # 12: claims no data change, adds data -> data
        [{"commitInfo": {"timestamp": 12, "operation": "WRITE", "dataChange": False}}, {"add": add}],
        # 13: claims a data change, only rearranges -> rearrange
        [
            {"commitInfo": {"timestamp": 13, "operation": "OPTIMIZE", "dataChange": True}},
            {"remove": {"path": "f1.parquet", "deletionTimestamp": 13, "dataChange": False, "size": 100}},
            {"add": {**add, "path": "f2.parquet", "dataChange": False}},
        ],
        # 14: claims a data change, has no file actions -> maintenance
        [{"commitInfo": {"timestamp": 14, "operation": "VACUUM END", "dataChange": True}}],
        # 15: mixes true and false, with a deletion vector: rows 10 - 3 -> data
        [
            {"commitInfo": {"timestamp": 15, "operation": "DELETE", "dataChange": True}},
            {
                "remove": {
                    "path": "f2.parquet",
                    "deletionTimestamp": 15,
                    "dataChange": True,
                    "size": 100,
                    "stats": json.dumps(stats),
                }
            },
            {"add": {**add, "path": "f2.parquet", "deletionVector": dv, "stats": json.dumps(stats)}},
            {"add": {**add, "path": "f3.parquet", "dataChange": False}},
        ],
        # 16: change-data files only -> data
        [
            {"commitInfo": {"timestamp": 16, "operation": "DELETE"}},
            {"cdc": {"path": "_change_data/c.parquet", "partitionValues": {}, "size": 5, "dataChange": False}},
        ],
        # 17: metadata and a rearrangement together -> metadata
        [
            {"commitInfo": {"timestamp": 17, "operation": "REORG"}},
            {"metaData": meta["metaData"]},
            {"remove": {"path": "f3.parquet", "deletionTimestamp": 17, "dataChange": False}},
        ],
        # 18: a protocol upgrade alone -> metadata
        [{"commitInfo": {"timestamp": 18}}, {"protocol": {"minReaderVersion": 1, "minWriterVersion": 4}}],
        # 19: an add without a dataChange field (invalid, but a sensor must not miss it) -> data
        [{"add": {k: v for k, v in add.items() if k != "dataChange"} | {"path": "f4.parquet"}}],
    ]
    for offset, actions in enumerate(history_actions):
        _write_commit(path, 12 + offset, actions)
    os.utime(path / "_delta_log" / f"{19:020d}.json", ns=(1_700_000_000_123_000_000,) * 2)
    with caplog.at_level(logging.WARNING, logger="airflow_provider_deltalite.maintenance.commit_kinds"):
        changes = DeltaTable(str(path)).changes(since=11).changes
    assert [c.kind for c in changes] == [
        "data",
        "rearrange",
        "maintenance",
        "data",
        "data",
        "metadata",
        "metadata",
        "data",
    ]
    lies = [r.getMessage() for r in caplog.records]
    assert lies == [
        f"commit 12 of {path}: commitInfo.dataChange=false disagrees with its actions; classified by the actions "
        "as data",
        f"commit 13 of {path}: commitInfo.dataChange=true disagrees with its actions; classified by the actions "
        "as rearrange",
        f"commit 14 of {path}: commitInfo.dataChange=true disagrees with its actions; classified by the actions "
        "as maintenance",
    ]
    mixed = changes[3]
    assert (mixed.added_files, mixed.removed_files, mixed.added_paths) == (1, 1, ("f2.parquet",))
    assert (mixed.added_rows, mixed.removed_rows, mixed.added_bytes, mixed.removed_bytes) == (7, 10, 100, 100)
    assert changes[0].added_rows is None  # an add without stats: rows unknown
    assert [c.timestamp for c in changes] == [12, 13, 14, 15, 16, 17, 18, 1_700_000_000_123]
    assert (changes[7].operation, changes[7].operation_parameters) == (None, {})


# -- timestamps and operationParameters -------------------------------------------------------------------------


def test_in_commit_timestamp_wins_over_the_commit_info_timestamp() -> None:
    changes = DeltaTable(str(CORPUS / ICT_TABLE)).changes(since=-1).changes
    # version 1 of this table has an in-commit timestamp 100,000,000 s before its commitInfo.timestamp
    assert [c.timestamp for c in changes] == [1783874203271, 1683874206883, 1783874212175, 1783874213881]
    assert [c.kind for c in changes] == ["metadata", "data", "data", "data"]
    delete = changes[2]  # removes without stats, change-data files
    assert (delete.removed_files, delete.removed_bytes, delete.removed_rows, delete.added_files) == (2, 1390, None, 0)
    assert (changes[1].added_files, changes[1].added_rows, changes[1].added_bytes) == (4, 4, 2795)


def test_operation_parameters_in_both_encodings(tmp_path: Path) -> None:
    # JSON text, the reference implementation's encoding (a real Spark OPTIMIZE ZORDER BY commit)
    golden = DeltaTable(str(CORPUS / ZORDER_GOLDEN)).changes(since=1, until=2).changes[0]
    assert (golden.kind, golden.operation) == ("rearrange", "OPTIMIZE")
    assert golden.operation_parameters == {"predicate": [], "zOrderBy": ["id"], "clusterBy": [], "auto": False}
    created = DeltaTable(str(CORPUS / ICT_TABLE)).changes(since=-1, until=0).changes[0]
    assert created.operation_parameters == {
        "partitionBy": ["birthyear"],
        "clusterBy": [],
        "description": None,
        "isManaged": "false",
        "properties": {"delta.enableChangeDataFeed": "true", "delta.enableInCommitTimestamps": "true"},
    }
    # native arrays (Databricks Runtime); the corpus holds none, so this commit is written here
    path = copy_table(ZORDER_GOLDEN, tmp_path / "t")
    native = _actions(path, 2)
    native[0]["commitInfo"]["operationParameters"] = {
        "predicate": [],
        "zOrderBy": ["id"],
        "clusterBy": [],
        "auto": False,
        "batchId": 0,
    }
    _write_commit(path, 3, native)
    (again,) = DeltaTable(str(path)).changes(since=2).changes
    assert again.operation_parameters == {**golden.operation_parameters, "batchId": 0}
    assert again.to_dict()["operation_parameters"] == {**golden.operation_parameters, "batchId": 0}
    # text that only looks like JSON stays text; so do scalars written as strings
    assert decode_operation_parameters({"predicate": "[a] > 1", "batchId": "0", "x": "{}"}) == {
        "predicate": "[a] > 1",
        "batchId": "0",
        "x": {},
    }
    assert decode_operation_parameters(None) == {}


# -- new_data_event ---------------------------------------------------------------------------------------------


def test_new_data_event_counts_only_data_by_default(history: Path) -> None:
    table = DeltaTable(str(history))
    changes = table.changes(since=1)
    infos = {v: _actions(history, v)[0]["commitInfo"] for v in range(12)}
    event = new_data_event(changes, baseline_version=1)
    assert event == {
        "table_uri": str(history),
        "baseline_version": 1,
        "version": 11,
        "versions": [8, 9, 11],
        "skipped": [
            {"version": 2, "kind": "rearrange"},
            {"version": 3, "kind": "rearrange"},
            {"version": 4, "kind": "rearrange"},
            {"version": 5, "kind": "maintenance"},
            {"version": 6, "kind": "maintenance"},
            {"version": 7, "kind": "metadata"},
            {"version": 10, "kind": "metadata"},
        ],
        "operations": ["DELETE", "WRITE", "WRITE"],
        "added_files": 3,
        "added_rows": 3500 + 300 + 10,
        "added_bytes": sum(c.added_bytes for c in changes.changes if c.version in (8, 9, 11)),
        "timestamp": infos[11]["timestamp"],
    }
    json.dumps(event)  # JSON-safe
    wider = new_data_event(changes, baseline_version=1, include_rearrangements=True, include_metadata_changes=True)
    assert wider is not None
    assert wider["versions"] == [2, 3, 4, 7, 8, 9, 10, 11]
    assert wider["skipped"] == [{"version": 5, "kind": "maintenance"}, {"version": 6, "kind": "maintenance"}]
    # only the rearrangements since the baseline: nothing counts
    assert new_data_event(table.changes(since=1, until=7), baseline_version=1) is None
    # the event ends at the newest counting version; later commits wait for the next one
    partial = new_data_event(table.changes(since=7, until=10), baseline_version=7)
    assert partial is not None
    assert (partial["version"], partial["versions"], partial["skipped"]) == (9, [8, 9], [])
    # the baseline can be ahead of the ChangeSet's cursor
    assert new_data_event(changes, baseline_version=9)["versions"] == [11]  # type: ignore[index]
    # metadata counts when the listing asked for it
    with_meta = table.changes(since=9, include_metadata_changes=True)
    assert [v["version"] for v in with_meta.to_dict()["versions"]] == [10, 11]
    assert new_data_event(with_meta, baseline_version=9)["versions"] == [10, 11]  # type: ignore[index]


# -- cursors, bounds, polling -----------------------------------------------------------------------------------


def test_until_bounds_and_nothing_new(history: Path) -> None:
    table = DeltaTable(str(history))
    bounded = table.changes(since=2, until=6)
    assert ([c.version for c in bounded.changes], bounded.latest) == ([3, 4, 5, 6], 6)
    same = table.changes(since=6, until=6)
    assert (same.changes, same.latest) == ((), 6)
    beyond = table.changes(since=9, until=1000)
    assert ([c.version for c in beyond.changes], beyond.latest) == ([10, 11], 11)
    nothing = table.changes(since=11)
    assert nothing == ChangeSet(str(history), 11, 11, (), table_id=None)
    assert nothing.to_dict() == {"since": 11, "latest": 11, "versions": []}


def test_catching_up_past_the_probe_limit_lists_once_and_checks_for_holes(history_copy: Path) -> None:
    assert PROBE_LIMIT < 11
    every = DeltaTable(str(history_copy)).changes(since=-1)
    assert [c.kind for c in every.changes] == KINDS
    (history_copy / "_delta_log" / f"{10:020d}.json").unlink()
    with pytest.raises(CorruptLog) as err:
        DeltaTable(str(history_copy)).changes(since=-1)
    assert str(err.value) == (
        f"table {history_copy}: version 10 is missing from the log (commits 8..11 must be contiguous)"
    )


def test_poll_changes_yields_each_new_commit(history_copy: Path) -> None:
    storage = Storage(str(history_copy))
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 1:
            append_ours(history_copy, _rows(7000, 5).append_column("note", pa.array(["y"] * 5)))
        if len(waits) == 2:
            DeltaTable(str(history_copy)).optimize()

    polls = poll_changes(storage, 11, interval=0.25, sleep=sleep)
    first = next(polls)
    assert ([(c.version, c.kind, c.added_rows) for c in first.changes], first.since) == ([(12, "data", 5)], 11)
    second = next(polls)
    assert [(c.version, c.kind) for c in second.changes] == [(13, "rearrange")]
    assert waits == [0.25, 0.25]
    with pytest.raises(InvalidArgument, match=r"interval must be a positive number of seconds, got 0$"):
        next(poll_changes(storage, 11, interval=0))


# -- edges ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("keep_checkpoint_commit", [True, False])
def test_log_gap_raises_or_resumes_with_a_warning(
    history_copy: Path, keep_checkpoint_commit: bool, caplog: pytest.LogCaptureFixture
) -> None:
    path = history_copy
    write_checkpoint(DeltaTable(str(path)).snapshot(version=8))
    for v in range(9 if not keep_checkpoint_commit else 8):
        (path / "_delta_log" / f"{v:020d}.json").unlink()
    oldest = 8 if keep_checkpoint_commit else 9
    table = DeltaTable(str(path))
    for since in (-1, 3):
        with pytest.raises(LogGap) as err:
            table.changes(since=since)
        assert (err.value.since, err.value.oldest_available) == (since, oldest)
        assert str(err.value) == (
            f"table {path}: the commits after version {since} were removed by log cleanup; the oldest that can be "
            f"listed is {oldest} (start again from a newer version, or use on_gap='resume' to skip the gap)"
        )
    with caplog.at_level(logging.WARNING, logger="airflow_provider_deltalite.maintenance.changes"):
        resumed = table.changes(since=3, on_gap="resume")
    assert (resumed.gap_from, resumed.since, resumed.latest) == (oldest, 3, 11)
    assert [c.kind for c in resumed.changes] == KINDS[oldest:]
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: the commits after version 3 were removed by log cleanup; resuming from version {oldest}"
    ]
    assert resumed.to_dict()["gap_from"] == oldest
    event = new_data_event(resumed, baseline_version=3)
    assert event is not None and event["versions"] == [v for v in (8, 9, 11) if v >= oldest]
    # a cursor at or after the oldest retained commit has no gap
    assert [c.version for c in table.changes(since=oldest - 1).changes] == list(range(oldest, 12))


def test_missing_version_without_a_checkpoint_is_corrupt(history_copy: Path) -> None:
    for v in range(5):
        (history_copy / "_delta_log" / f"{v:020d}.json").unlink()
    with pytest.raises(CorruptLog) as err:
        DeltaTable(str(history_copy)).changes(since=2)
    assert str(err.value) == (
        f"table {history_copy}: version 3 is missing from the log (the commits after 2 must be contiguous; "
        "the next one is 5)"
    )


def test_recreated_table_raises_or_resumes(history_copy: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = history_copy
    old_id = DeltaTable(str(path)).changes(since=-1).table_id
    shutil.rmtree(path)
    deltalake.write_deltalake(str(path), _rows(0, 3))
    deltalake.write_deltalake(str(path), _rows(3, 4), mode="append")
    table = DeltaTable(str(path))
    with pytest.raises(TableRecreated) as err:
        table.changes(since=5)
    assert (err.value.since, err.value.latest) == (5, 1)
    assert str(err.value) == (
        f"table {path}: the newest version is 1, below the cursor 5: the table was recreated (start again from -1, "
        "or use on_recreate='resume')"
    )
    with caplog.at_level(logging.WARNING, logger="airflow_provider_deltalite.maintenance.changes"):
        resumed = table.changes(since=5, on_recreate="resume")
    assert len(caplog.records) == 1
    assert ([c.version for c in resumed.changes], resumed.latest, resumed.recreated) == ([0, 1], 1, True)
    assert resumed.table_id not in (None, old_id)
    event = new_data_event(resumed, baseline_version=5)
    assert event is not None
    assert (event["versions"], event["added_rows"], event["baseline_version"]) == ([0, 1], 7, 5)
    # the new table, grown past the cursor, is told apart by its id
    for i in range(6):
        deltalake.write_deltalake(str(path), _rows(10 + i, 1), mode="append")
    with pytest.raises(TableRecreated, match=r"commit 0 carries table id .*, not wrong-id: the table was recreated"):
        table.changes(since=-1, table_id="wrong-id")
    assert table.changes(since=-1, table_id=resumed.table_id).latest == 7


def test_metadata_with_the_same_id_is_not_a_recreation(history: Path) -> None:
    table = DeltaTable(str(history))
    table_id = table.changes(since=-1).table_id
    assert table_id is not None
    assert [c.kind for c in table.changes(since=6, table_id=table_id).changes] == KINDS[7:]
    with pytest.raises(TableRecreated) as err:
        table.changes(since=6, table_id="another")
    assert (err.value.table_id, err.value.latest) == (table_id, 11)
    assert str(err.value).startswith(f"table {history}: commit 7 carries table id {table_id}, not another: ")
    resumed = table.changes(since=6, table_id="another", on_recreate="resume")
    assert (resumed.recreated, resumed.table_id, [c.version for c in resumed.changes]) == (
        True,
        table_id,
        list(range(7, 12)),
    )


def test_unreadable_commit_json_names_the_version(history_copy: Path) -> None:
    commit = history_copy / "_delta_log" / f"{9:020d}.json"
    before = tree_state(history_copy)
    text = commit.read_text()
    commit.write_text(text.splitlines()[0] + "\n" + text.splitlines()[1][:40] + "\n")
    before = tree_state(history_copy)
    with pytest.raises(CorruptLog) as err:
        DeltaTable(str(history_copy)).changes(since=8)
    assert str(err.value) == (
        f"table {history_copy}: commit 9 line 2 is not valid JSON (truncated or corrupt commit file)"
    )
    commit.write_text("")
    with pytest.raises(CorruptLog, match=r"commit 9 is an empty file$"):
        DeltaTable(str(history_copy)).changes(since=7)
    commit.write_text('["add"]\n')
    with pytest.raises(CorruptLog, match=r"commit 9 line 1 is not a JSON object$"):
        DeltaTable(str(history_copy)).changes(since=7)
    commit.write_text('{"add": {"size": 3}}\n')
    with pytest.raises(CorruptLog, match=r"commit 9 line 1: add action without a path$"):
        DeltaTable(str(history_copy)).changes(since=7)
    assert set(tree_state(history_copy)) == set(before)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"since": -2}, "since must be a version, or -1 for from the beginning, got -2"),
        ({"since": "3"}, "since must be a version, or -1 for from the beginning, got '3'"),
        ({"since": True}, "since must be a version, or -1 for from the beginning, got True"),
        ({"since": 1.5}, "since must be a version, or -1 for from the beginning, got 1.5"),
        ({"since": 5, "until": 4}, "until (4) must not be below since (5)"),
        ({"since": 5, "until": -1}, "until must be a non-negative version, got -1"),
        ({"since": 5, "on_gap": "skip"}, "on_gap must be 'raise' or 'resume', got 'skip'"),
        ({"since": 5, "on_recreate": None}, "on_recreate must be 'raise' or 'resume', got None"),
        ({"since": 5, "table_id": 7}, "table_id must be a string, got 7"),
    ],
)
def test_bad_arguments_are_refused_and_nothing_is_written(history: Path, kwargs: dict, message: str) -> None:
    before = tree_state(history)
    with pytest.raises(InvalidArgument) as err:
        DeltaTable(str(history)).changes(**kwargs)
    assert str(err.value) == f"table {history}: {message}"
    assert tree_state(history) == before


def test_missing_table(tmp_path: Path) -> None:
    for since in (-1, 0, 4):
        with pytest.raises(TableNotFound, match=r"path does not exist$"):
            DeltaTable(str(tmp_path / "nope")).changes(since=since)
    (tmp_path / "empty" / "_delta_log").mkdir(parents=True)
    with pytest.raises(TableNotFound, match=r"_delta_log holds no commits$"):
        DeltaTable(str(tmp_path / "empty")).changes(since=-1)
    assert os.listdir(tmp_path / "empty" / "_delta_log") == []


# -- S3: one listing from since + 1 --------------------------------------------------------------------------------


@pytest.mark.s3
def test_s3_lists_from_the_cursor(history: Path, s3_endpoint: dict[str, Any]) -> None:
    import s3fs

    fs = s3fs.S3FileSystem(**s3_endpoint)
    fs.call_s3("create_bucket", Bucket="changes")
    fs.put(str(history) + "/", "changes/t/", recursive=True)
    uri = "s3://changes/t"
    table = DeltaTable(uri, storage_options=s3_endpoint)
    local = DeltaTable(str(history))
    remote = table.changes(since=-1)
    assert remote.changes == local.changes(since=-1).changes
    assert (remote.latest, remote.table_uri) == (11, uri)
    assert table.changes(since=11).changes == ()
    with pytest.raises(TableRecreated, match=r"the newest version is 11, below the cursor 20"):
        table.changes(since=20)
    fs.rm("changes/t/_delta_log/00000000000000000010.json")
    with pytest.raises(CorruptLog, match=r"version 10 is missing from the log \(commits 9..11 must be contiguous\)"):
        table.changes(since=8)
    with pytest.raises(TableNotFound):
        DeltaTable("s3://changes/absent", storage_options=s3_endpoint).changes(since=3)


def test_memory_store_reads_the_next_commits_by_name(history: Path) -> None:
    import fsspec

    fs = fsspec.filesystem("memory")
    root = f"/changes-{os.getpid()}"
    try:
        fs.put(str(history) + "/", root + "/", recursive=True)
        table = DeltaTable(f"memory://{root}")
        assert table.changes(since=-1).changes == DeltaTable(str(history)).changes(since=-1).changes
        assert table.changes(since=10).latest == 11
        assert table.changes(since=11).changes == ()
        fs.rm(f"{root}/_delta_log/{10:020d}.json")
        with pytest.raises(CorruptLog, match=r"version 10 is missing from the log \(commits 8..11"):
            table.changes(since=-1)
    finally:
        fs.rm(root, recursive=True)
