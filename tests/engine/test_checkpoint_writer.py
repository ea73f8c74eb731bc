"""Checkpoint writing: every corpus table round-trips through a checkpoint we write (checked against the replay
without it and against delta-rs 1.6.3), V2 checkpoints with sidecars, optional stats columns, tombstone and txn
expiry, the `_last_checkpoint` document and its checksum, and bad properties that must write nothing."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine import InvalidTableProperty
from airflow_provider_deltalite.engine.checkpoint_writer import write_checkpoint
from airflow_provider_deltalite.engine.last_checkpoint import last_checkpoint_checksum
from airflow_provider_deltalite.engine.properties import TableProperties, checkpoint_interval, should_checkpoint
from airflow_provider_deltalite.engine.snapshot import Snapshot
from tests.conformance.corpus import CorpusTable, corpus_tables, deltars_paths, normalise_path
from tests.helpers import CORPUS, copy_table, tree_state
from tests.oracles import KERNEL, assert_rows_agree, oracle_rows, record_no_oracle

DAY = 86_400_000
NOW = 1_790_000_000_000  # 2026-09-21T14:13:20Z, a fixed "now" for expiry arithmetic
LOG = "_delta_log"


@pytest.fixture(scope="module")
def deltalake() -> Any:
    import deltalake

    return deltalake


# -- log-only tables written by hand ---------------------------------------------------------------------------


def field(name: str, type_: Any, physical: str | None = None, column_id: int | None = None) -> dict[str, Any]:
    metadata = {}
    if physical is not None:
        metadata = {"delta.columnMapping.id": column_id, "delta.columnMapping.physicalName": physical}
    return {"name": name, "type": type_, "nullable": True, "metadata": metadata}


def metadata(fields: list[dict], partition_columns: list[str] = (), configuration: dict | None = None) -> dict:
    schema = json.dumps({"type": "struct", "fields": fields})
    return {
        "metaData": {
            "id": "6f6b1e1c-0000-4000-8000-000000000001",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": schema,
            "partitionColumns": list(partition_columns),
            "configuration": configuration or {},
            "createdTime": NOW - 30 * DAY,
        }
    }


def protocol(reader: int = 1, writer: int = 2, features: list[str] | None = None) -> dict:
    action: dict[str, Any] = {"minReaderVersion": reader, "minWriterVersion": writer}
    if reader >= 3:
        action["readerFeatures"] = list(features or [])
    if writer >= 7:
        action["writerFeatures"] = list(features or [])
    return {"protocol": action}


def add(path: str, partition: dict | None = None, stats: str | None = None, **extra: Any) -> dict:
    action = {"path": path, "partitionValues": partition or {}, "size": 100, "modificationTime": NOW - DAY}
    action["dataChange"] = True
    if stats is not None:
        action["stats"] = stats
    return {"add": action | extra}


def remove(path: str, deletion_timestamp: int | None, **extra: Any) -> dict:
    action: dict[str, Any] = {"path": path, "dataChange": True}
    if deletion_timestamp is not None:
        action["deletionTimestamp"] = deletion_timestamp
    return {"remove": action | extra}


def write_log(root: Path, commits: list[list[dict]]) -> Path:
    log = root / LOG
    log.mkdir(parents=True)
    for version, actions in enumerate(commits):
        (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    return root


def checkpoint_rows(path: Path, column: str) -> list[Any]:
    table = pq.read_table(path)
    return [row for row in table.column(column).to_pylist() if row is not None]


# -- state comparison --------------------------------------------------------------------------------------------


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value


def live_files(snap: Snapshot, with_stats: bool = True) -> set[tuple]:
    """(path, size, partition values of the current partition columns, deletion vector id, stats JSON) per file."""
    raw = snap.raw_files
    partitions = raw.column("partitionValues").to_pylist()
    out = set()
    for i, (path, size, dv, stats) in enumerate(
        zip(*(raw.column(c).to_pylist() for c in ("path", "size", "deletionVector", "stats")), strict=True)
    ):
        values = tuple((c, (partitions[i] or {}).get(c)) for c in snap.partition_physical_names)
        dv_id = None if dv is None else (dv["storageType"], dv["pathOrInlineDv"], dv["offset"])
        out.add((path, size, values, dv_id, stats if with_stats else None))
    return out


def parsed_stats_by_path(snap: Snapshot) -> dict[str, Any]:
    return dict(zip(snap.raw_files.column("path").to_pylist(), snap.stats.to_pylist(), strict=True))


def tombstones(snap: Snapshot, cutoff: int | None = None) -> list[tuple]:
    rows = snap.tombstones.select(["path", "deletionTimestamp", "size"]).to_pylist()
    kept = [r for r in rows if cutoff is None or (r["deletionTimestamp"] or 0) > cutoff]
    return sorted((r["path"], r["deletionTimestamp"], r["size"]) for r in kept)


def drop_other_checkpoints(table: Path, version: int, ours: tuple[str, ...]) -> None:
    """Remove checkpoints of ``version`` we did not write, so that the reload has to use ours (readers prefer UUID
    checkpoints, and two at one version would leave the choice to listing order)."""
    for f in (table / LOG).iterdir():
        if f.name.startswith(f"{version:020d}.checkpoint") and f"{LOG}/{f.name}" not in ours:
            f.unlink()


# -- every positive corpus table ------------------------------------------------------------------------------------

# tables deltalite refuses on purpose have no snapshot to checkpoint (tests/conformance/test_corpus.py checks them)
TABLES = [t for t in corpus_tables() if t.role == "positive" and t.refusal() is None] if CORPUS.is_dir() else []


@pytest.mark.parametrize("table", TABLES, ids=[t.name for t in TABLES])
def test_corpus_table_round_trips_through_our_checkpoint(table: CorpusTable, tmp_path: Path, deltalake: Any) -> None:
    copy = copy_table(table.path, tmp_path / "t")
    before = DeltaTable(str(copy)).snapshot()
    # "now" = the newest tombstone's time: tombstones of the last week survive, older ones expire
    stamps = [t for t in before.tombstones.column("deletionTimestamp").to_pylist() if t]
    now = max(stamps) if stamps else NOW
    # a classic checkpoint of this version already there would be reused (engine/checkpoint_file.py): remove it first
    drop_other_checkpoints(copy, before.version, ())
    info = write_checkpoint(before, now_ms=now)
    drop_other_checkpoints(copy, before.version, info.paths)

    after = DeltaTable(str(copy)).snapshot()
    assert after.version == before.version
    assert after.segment.checkpoint is not None and after.segment.checkpoint.version == before.version
    assert {f.path for f in after.segment.checkpoint.files} == {info.paths[0]}
    assert after.segment.commits == ()
    if before.properties.boolean("delta.checkpoint.writeStatsAsJson"):
        assert live_files(after) == live_files(before)
    else:  # only stats_parsed is written: the JSON text is rebuilt from it, so compare the parsed values
        assert live_files(after, with_stats=False) == live_files(before, with_stats=False)
        assert parsed_stats_by_path(after) == parsed_stats_by_path(before)
    retention = before.properties.interval_ms("delta.deletedFileRetentionDuration")
    assert tombstones(after) == tombstones(before, cutoff=now - retention)
    if "delta.setTransactionRetentionDuration" not in before.properties.explicit:
        assert after.app_transactions == {k: _drop_none(v) for k, v in before.app_transactions.items()}
    assert after.domain_metadata == before.domain_metadata
    assert after.protocol == before.protocol
    assert _drop_none(after.metadata) == _drop_none(before.metadata)
    assert info.num_of_add_files == before.num_files
    assert info.size_in_bytes == sum(os.path.getsize(copy / p) for p in info.paths)

    theirs = deltars_paths(copy)
    if theirs is not None:
        ours = {normalise_path(p, copy) for p in after.raw_files.column("path").to_pylist()}
        assert ours == theirs
    else:  # delta-rs cannot open these tables at all, with or without our checkpoint
        assert deltars_paths(table.path) is None
        # delta-kernel-rs, where it can read the table, reads the same rows through our checkpoint
        found, cannot = oracle_rows(table.path, corpus_name=table.name)
        if found:
            assert assert_rows_agree(copy, found[KERNEL], corpus_name=table.name) == [KERNEL]
        else:
            record_no_oracle(cannot)


# -- delta-rs reads our checkpoint on a table it wrote ---------------------------------------------------------------


def test_delta_rs_reads_our_checkpoint_after_older_commits_are_gone(tmp_path: Path, deltalake: Any) -> None:
    path = tmp_path / "t"
    for i in range(4):
        batch = pa.table(
            {
                "id": pa.array(range(i * 10, i * 10 + 10), pa.int64()),
                "part": [f"p{j % 3}" for j in range(10)],
                "day": [None if j == 0 else f"2024-01-0{1 + j % 2}" for j in range(10)],
            }
        )
        deltalake.write_deltalake(str(path), batch, partition_by=["part", "day"], mode="append")
    deltalake.DeltaTable(str(path)).delete("id < 5")  # version 4: tombstones and rewritten files
    snap = DeltaTable(str(path)).snapshot()
    assert (snap.version, snap.num_files, snap.tombstones.num_rows) == (4, 26, 5)
    info = write_checkpoint(snap, now_ms=max(snap.tombstones.column("deletionTimestamp").to_pylist()))
    assert (info.kind, info.size, info.num_of_add_files) == ("classic", 2 + 26 + 5, 26)
    extra = pa.table({"id": pa.array([100], pa.int64()), "part": ["p9"], "day": ["2024-02-01"]})
    deltalake.write_deltalake(str(path), extra, partition_by=["part", "day"], mode="append")  # version 5
    expected = {}
    for version in (4, 5):
        theirs = deltalake.DeltaTable(str(path), version=version)
        expected[version] = (deltars_paths(path, version), theirs.to_pyarrow_table().sort_by("id"))
    assert len(expected[4][0]) == 26 and len(expected[5][0]) == 27

    for version in range(4):
        (path / LOG / f"{version:020d}.json").unlink()
    assert sorted(os.listdir(path / LOG)) == [
        "00000000000000000004.checkpoint.parquet",
        "00000000000000000004.json",
        "00000000000000000005.json",
        "_last_checkpoint",
    ]
    for version, (paths, rows) in expected.items():
        theirs = deltalake.DeltaTable(str(path), version=version)
        assert deltars_paths(path, version) == paths
        assert theirs.to_pyarrow_table().sort_by("id").equals(rows)
        ours = DeltaTable(str(path)).snapshot(version=version)
        assert {normalise_path(p, path) for p in ours.raw_files.column("path").to_pylist()} == paths
    with pytest.raises(Exception):  # noqa: B017 - delta-rs has no public error type for a cleaned-up version
        deltalake.DeltaTable(str(path), version=3)


# -- V2 checkpoints ------------------------------------------------------------------------------------------------


def test_v2_checkpoint_splits_file_actions_into_sidecars_of_50000(tmp_path: Path, deltalake: Any) -> None:
    fields = [field("id", "long")]
    config = {"delta.checkpointPolicy": "v2"}
    commit0 = [protocol(3, 7, ["v2Checkpoint"]), metadata(fields, configuration=config)]
    commit0 += [add(f"f{i:05d}.parquet") for i in range(50_000)]
    commit1 = [remove(f"f{i:05d}.parquet", NOW - 3600_000) for i in range(9)]
    commit1 += [add(f"g{i}.parquet") for i in range(10)]
    path = write_log(tmp_path / "t", [commit0, commit1])
    snap = DeltaTable(str(path)).snapshot()
    info = write_checkpoint(snap, now_ms=NOW)

    assert info.kind == "v2"
    top, *sidecars = info.paths
    assert top.startswith(f"{LOG}/00000000000000000001.checkpoint.") and top.endswith(".parquet")
    assert len(sidecars) == 2 and all(s.startswith(f"{LOG}/_sidecars/") for s in sidecars)
    assert [pq.read_metadata(path / s).num_rows for s in sidecars] == [50_000, 10]
    assert pq.read_table(path / sidecars[0]).column_names == ["add", "remove"]
    # 50,001 adds + 9 tombstones in sidecars; checkpointMetadata, 2 sidecar rows, protocol, metaData on top
    assert (info.size, info.num_of_add_files) == (50_010 + 5, 50_001)
    assert checkpoint_rows(path / top, "checkpointMetadata") == [{"version": 1, "tags": None}]
    refs = checkpoint_rows(path / top, "sidecar")
    assert [r["path"] for r in refs] == [s.rsplit("/", 1)[1] for s in sidecars]
    assert [r["sizeInBytes"] for r in refs] == [os.path.getsize(path / s) for s in sidecars]
    assert all(r["modificationTime"] == os.stat(path / s).st_mtime_ns // 1_000_000 for r, s in zip(refs, sidecars))
    assert checkpoint_rows(path / top, "add") == [] and checkpoint_rows(path / top, "remove") == []

    last = json.loads((path / LOG / "_last_checkpoint").read_text())
    assert list(last) == ["version", "size", "sizeInBytes", "numOfAddFiles", "v2Checkpoint", "checksum"]
    assert last["v2Checkpoint"] == {
        "path": top.rsplit("/", 1)[1],
        "sizeInBytes": os.path.getsize(path / top),
        "modificationTime": os.stat(path / top).st_mtime_ns // 1_000_000,
    }
    assert last["sizeInBytes"] == sum(os.path.getsize(path / p) for p in info.paths) == info.size_in_bytes
    assert last["checksum"] == last_checkpoint_checksum(last)

    (path / LOG / "00000000000000000000.json").unlink()
    (path / LOG / "00000000000000000001.json").unlink()
    after = DeltaTable(str(path)).snapshot()
    assert after.version == 1 and after.segment.checkpoint.version == 1
    assert live_files(after) == live_files(snap)
    assert tombstones(after) == tombstones(snap)
    assert deltars_paths(path) == {f"f{i:05d}.parquet" for i in range(9, 50_000)} | {f"g{i}.parquet" for i in range(10)}


def test_v2_feature_with_classic_policy_writes_a_classic_checkpoint_with_metadata_row(tmp_path: Path) -> None:
    fields = [field("id", "long")]
    commit0 = [protocol(3, 7, ["v2Checkpoint"]), metadata(fields), add("a.parquet"), add("b.parquet")]
    path = write_log(tmp_path / "t", [commit0])
    info = write_checkpoint(DeltaTable(str(path)).snapshot(), now_ms=NOW)
    assert info.kind == "classic"
    assert info.paths == (f"{LOG}/00000000000000000000.checkpoint.parquet",)
    table = pq.read_table(path / info.paths[0])
    assert table.column_names == [
        "txn",
        "add",
        "remove",
        "metaData",
        "protocol",
        "domainMetadata",
        "checkpointMetadata",
        "sidecar",
    ]
    assert checkpoint_rows(path / info.paths[0], "checkpointMetadata") == [{"version": 0, "tags": None}]
    assert checkpoint_rows(path / info.paths[0], "sidecar") == []
    assert sorted(r["path"] for r in checkpoint_rows(path / info.paths[0], "add")) == ["a.parquet", "b.parquet"]
    assert info.size == 5  # checkpointMetadata, protocol, metaData, 2 adds


def test_corpus_v2_table_with_sidecars_round_trips_and_delta_rs_reads_it(tmp_path: Path, deltalake: Any) -> None:
    path = copy_table("kernel-rs-data/v2-checkpoints-parquet-with-sidecars", tmp_path / "t")
    snap = DeltaTable(str(path)).snapshot()
    info = write_checkpoint(snap, now_ms=NOW)
    assert (info.kind, info.version, info.num_of_add_files, len(info.paths)) == ("v2", 6, 101, 2)
    drop_other_checkpoints(path, 6, info.paths)
    for version in range(7):
        (path / LOG / f"{version:020d}.json").unlink()
    after = DeltaTable(str(path)).snapshot()
    assert after.segment.checkpoint.files[0].path == info.paths[0]
    assert live_files(after) == live_files(snap)
    assert deltars_paths(path) == {normalise_path(p, path) for p in snap.raw_files.column("path").to_pylist()}


# -- optional columns ------------------------------------------------------------------------------------------------


def _mapped_table(root: Path, configuration: dict[str, str]) -> Path:
    fields = [
        field("id", "long", "col-id", 1),
        field("name", "string", "col-name", 2),
        field("ts", "timestamp", "col-ts", 3),
        field("s", {"type": "struct", "fields": [field("x", "integer", "col-x", 5)]}, "col-s", 4),
        field("bin", "binary", "col-bin", 6),
        field("p", "integer", "col-p", 7),
    ]
    config = {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "7", **configuration}
    stats = {
        "numRecords": 3,
        "minValues": {"col-id": 1, "col-name": "a", "col-ts": "2024-01-01T00:00:00.000Z", "col-s": {"col-x": 5}},
        "maxValues": {"col-id": 9, "col-name": "z", "col-ts": "2024-01-02T00:00:00.000Z", "col-s": {"col-x": 6}},
        "nullCount": {"col-id": 0, "col-name": 1, "col-ts": 0, "col-s": {"col-x": 0}, "col-bin": 2},
    }
    commit0 = [
        protocol(2, 5),
        metadata(fields, ["p"], config),
        add("p=7/a.parquet", {"col-p": "7"}, json.dumps(stats)),
        add("p=null/b.parquet", {"col-p": None}, json.dumps({**stats, "numRecords": 4, "tightBounds": False})),
        add("c.parquet", {"col-p": ""}),
    ]
    return write_log(root, [commit0])


def _add_rows(table: Path, info_path: str) -> dict[str, dict]:
    return {row["path"]: row for row in checkpoint_rows(table / info_path, "add")}


def test_stats_parsed_written_only_when_asked(tmp_path: Path) -> None:
    asked = _mapped_table(tmp_path / "asked", {"delta.checkpoint.writeStatsAsStruct": "true"})
    info = write_checkpoint(DeltaTable(str(asked)).snapshot(), now_ms=NOW)
    rows = _add_rows(asked, info.paths[0])
    jan1, jan2 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC), dt.datetime(2024, 1, 2, tzinfo=dt.UTC)
    assert rows["p=7/a.parquet"]["stats_parsed"] == {
        "numRecords": 3,
        "minValues": {"col-id": 1, "col-name": "a", "col-ts": jan1, "col-s": {"col-x": 5}},
        "maxValues": {"col-id": 9, "col-name": "z", "col-ts": jan2, "col-s": {"col-x": 6}},
        "nullCount": {"col-id": 0, "col-name": 1, "col-ts": 0, "col-s": {"col-x": 0}, "col-bin": 2},
        "tightBounds": None,
    }
    assert rows["p=null/b.parquet"]["stats_parsed"]["tightBounds"] is False
    assert rows["c.parquet"]["stats_parsed"] is None
    assert {p: r["partitionValues_parsed"] for p, r in rows.items()} == {
        "p=7/a.parquet": {"col-p": 7},
        "p=null/b.parquet": {"col-p": None},
        "c.parquet": {"col-p": None},
    }
    # raw partition values keep the log's spelling: null stays null, "" stays ""
    assert {p: r["partitionValues"] for p, r in rows.items()} == {
        "p=7/a.parquet": [("col-p", "7")],
        "p=null/b.parquet": [("col-p", None)],
        "c.parquet": [("col-p", "")],
    }
    add_type = pq.read_schema(asked / info.paths[0]).field("add").type
    assert [f.name for f in add_type][-2:] == ["stats_parsed", "partitionValues_parsed"]

    default = _mapped_table(tmp_path / "default", {})
    info = write_checkpoint(DeltaTable(str(default)).snapshot(), now_ms=NOW)
    names = [f.name for f in pq.read_schema(default / info.paths[0]).field("add").type]
    assert "stats" in names and "stats_parsed" not in names and "partitionValues_parsed" not in names

    struct_only = _mapped_table(
        tmp_path / "struct_only",
        {"delta.checkpoint.writeStatsAsStruct": "true", "delta.checkpoint.writeStatsAsJson": "false"},
    )
    before = DeltaTable(str(struct_only)).snapshot()
    info = write_checkpoint(before, now_ms=NOW)
    names = [f.name for f in pq.read_schema(struct_only / info.paths[0]).field("add").type]
    assert "stats" not in names and "stats_parsed" in names
    after = DeltaTable(str(struct_only)).snapshot()
    assert after.segment.checkpoint.version == 0
    assert parsed_stats_by_path(after) == parsed_stats_by_path(before)


# -- expiry ------------------------------------------------------------------------------------------------------------


def test_expired_tombstones_are_dropped(tmp_path: Path) -> None:
    fields = [field("id", "long")]
    week = 7 * DAY
    commit0 = [protocol(), metadata(fields)] + [add(f"f{i}.parquet") for i in range(7)]
    commit1 = [
        remove("f0.parquet", NOW - week - 1),  # older than the retention: dropped
        remove("f1.parquet", NOW - week),  # exactly at the cutoff: dropped (kept only while newer)
        remove("f2.parquet", NOW - week + 1),  # kept
        remove("f3.parquet", NOW - 3600_000),  # kept
        remove("f4.parquet", None),  # no timestamp counts as 0: dropped
        remove("f5.parquet", NOW + DAY, size=5, extendedFileMetadata=True, partitionValues={}),  # kept
    ]
    path = write_log(tmp_path / "t", [commit0, commit1])
    snap = DeltaTable(str(path)).snapshot()
    assert snap.tombstones.num_rows == 6
    info = write_checkpoint(snap, now_ms=NOW)
    removes = checkpoint_rows(path / info.paths[0], "remove")
    assert sorted(r["path"] for r in removes) == ["f2.parquet", "f3.parquet", "f5.parquet"]
    assert all(r["dataChange"] is False for r in removes)
    assert "stats" not in removes[0] and "tags" not in removes[0]
    f5 = next(r for r in removes if r["path"] == "f5.parquet")
    assert (f5["size"], f5["extendedFileMetadata"], f5["partitionValues"]) == (5, True, [])
    assert (info.size, info.num_of_add_files) == (2 + 1 + 3, 1)  # protocol, metaData, f6, 3 tombstones
    after = DeltaTable(str(path)).snapshot()
    assert sorted(after.tombstones.column("path").to_pylist()) == ["f2.parquet", "f3.parquet", "f5.parquet"]

    # a shorter retention expires more
    (path / LOG / "00000000000000000001.checkpoint.parquet").unlink()
    (path / LOG / "_last_checkpoint").unlink()
    commit2 = [metadata(fields, configuration={"delta.deletedFileRetentionDuration": "interval 1 hour"})]
    (path / LOG / "00000000000000000002.json").write_text(json.dumps(commit2[0]) + "\n")
    info = write_checkpoint(DeltaTable(str(path)).snapshot(), now_ms=NOW)
    assert sorted(r["path"] for r in checkpoint_rows(path / info.paths[0], "remove")) == ["f5.parquet"]


def test_set_transaction_retention_expires_txns(tmp_path: Path) -> None:
    fields = [field("id", "long")]
    config = {"delta.setTransactionRetentionDuration": "interval 1 day"}
    commit0 = [protocol(), metadata(fields, configuration=config)]
    commit0 += [
        {"txn": {"appId": "fresh", "version": 3, "lastUpdated": NOW - 3600_000}},
        {"txn": {"appId": "stale", "version": 7, "lastUpdated": NOW - 2 * DAY}},
        {"txn": {"appId": "undated", "version": 1}},
    ]
    path = write_log(tmp_path / "t", [commit0])
    info = write_checkpoint(DeltaTable(str(path)).snapshot(), now_ms=NOW)
    assert checkpoint_rows(path / info.paths[0], "txn") == [
        {"appId": "fresh", "version": 3, "lastUpdated": NOW - 3600_000}
    ]

    no_retention = write_log(tmp_path / "u", [[protocol(), metadata(fields), *commit0[2:]]])
    info = write_checkpoint(DeltaTable(str(no_retention)).snapshot(), now_ms=NOW)
    assert sorted(r["appId"] for r in checkpoint_rows(no_retention / info.paths[0], "txn")) == [
        "fresh",
        "stale",
        "undated",
    ]


# -- protocol, metaData, domains --------------------------------------------------------------------------------------


def test_feature_lists_only_for_reader_3_and_writer_7(tmp_path: Path) -> None:
    fields = [field("id", "long")]
    legacy = write_log(tmp_path / "legacy", [[protocol(1, 2), metadata(fields)]])
    info = write_checkpoint(DeltaTable(str(legacy)).snapshot(), now_ms=NOW)
    assert checkpoint_rows(legacy / info.paths[0], "protocol") == [
        {"minReaderVersion": 1, "minWriterVersion": 2, "readerFeatures": None, "writerFeatures": None}
    ]
    writer_only = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["domainMetadata"]}}
    domains = [
        {"domainMetadata": {"domain": "kept", "configuration": '{"a":1}', "removed": False}},
        {"domainMetadata": {"domain": "gone", "configuration": "{}", "removed": False}},
    ]
    gone = {"domainMetadata": {"domain": "gone", "configuration": "{}", "removed": True}}
    features = write_log(tmp_path / "features", [[writer_only, metadata(fields), *domains], [gone]])
    info = write_checkpoint(DeltaTable(str(features)).snapshot(), now_ms=NOW)
    assert checkpoint_rows(features / info.paths[0], "protocol") == [
        {"minReaderVersion": 1, "minWriterVersion": 7, "readerFeatures": None, "writerFeatures": ["domainMetadata"]}
    ]
    assert checkpoint_rows(features / info.paths[0], "domainMetadata") == [
        {"domain": "kept", "configuration": '{"a":1}', "removed": False}
    ]
    meta = checkpoint_rows(features / info.paths[0], "metaData")
    assert meta == [
        {
            "id": "6f6b1e1c-0000-4000-8000-000000000001",
            "name": None,
            "description": None,
            "format": {"provider": "parquet", "options": []},
            "schemaString": json.dumps({"type": "struct", "fields": fields}),
            "partitionColumns": [],
            "configuration": [],
            "createdTime": NOW - 30 * DAY,
        }
    ]


# -- _last_checkpoint -------------------------------------------------------------------------------------------------


def test_last_checkpoint_checksum_protocol_test_vector() -> None:
    # PROTOCOL.md, "JSON checksum": the example JSON and its checksum
    document = json.loads(
        '{"k0":"\'v 0\'", "checksum": "adsaskfljadfkjadfkj", "k1":{"k2": 2, "k3": ["v3", [1, 2], '
        '{"k4": "v4", "k5": ["v5", "v6", "v7"]}]}}'
    )
    assert last_checkpoint_checksum(document) == "6a92d155a59bf2eecbd4b4ec7fd1f875"
    canonical = (
        '"k0"="%27v%200%27","k1"+"k2"=2,"k1"+"k3"+0="v3","k1"+"k3"+1+0=1,"k1"+"k3"+1+1=2,"k1"+"k3"+2+"k4"="v4",'
        '"k1"+"k3"+2+"k5"+0="v5","k1"+"k3"+2+"k5"+1="v6","k1"+"k3"+2+"k5"+2="v7"'
    )
    assert hashlib.md5(canonical.encode()).hexdigest() == "6a92d155a59bf2eecbd4b4ec7fd1f875"
    # non-ASCII and reserved characters are percent-encoded octet by octet, in uppercase hex
    euro = hashlib.md5(b'"k0"="normal","k1"="a%E2%82%AC%2B"').hexdigest()
    assert last_checkpoint_checksum({"k0": "normal", "k1": "a€+"}) == euro


def test_checksums_of_spark_written_last_checkpoint_files() -> None:
    checked = 0
    for f in sorted(CORPUS.rglob("_last_checkpoint")):
        try:
            document = json.loads(f.read_text())
        except ValueError:
            continue  # some corpus tables have a deliberately corrupt _last_checkpoint
        if isinstance(document, dict) and "checksum" in document:
            assert last_checkpoint_checksum(document) == document["checksum"], f
            checked += 1
    assert checked == 52  # these hold checkpointSchema and v2Checkpoint objects with long arrays


def test_last_checkpoint_document_and_never_moving_backwards(tmp_path: Path) -> None:
    path = copy_table("delta-golden/125-iterator-bug", tmp_path / "t")  # versions 0..11, checkpoint at 10
    table = DeltaTable(str(path))
    info = write_checkpoint(table.snapshot(), now_ms=NOW)
    assert (info.version, info.kind, info.last_checkpoint_updated) == (11, "classic", True)
    last = json.loads((path / LOG / "_last_checkpoint").read_text())
    assert list(last) == ["version", "size", "sizeInBytes", "numOfAddFiles", "checksum"]
    rows = pq.read_metadata(path / info.paths[0]).num_rows
    assert (last["version"], last["size"], last["numOfAddFiles"]) == (11, rows, table.snapshot().num_files)
    assert last["sizeInBytes"] == os.path.getsize(path / info.paths[0])
    assert last["checksum"] == last_checkpoint_checksum(last)
    assert info.to_dict() == {
        "version": 11,
        "kind": "classic",
        "paths": [f"{LOG}/00000000000000000011.checkpoint.parquet"],
        "size": rows,
        "sizeInBytes": last["sizeInBytes"],
        "numOfAddFiles": last["numOfAddFiles"],
        "lastCheckpointUpdated": True,
    }
    pointer = (path / LOG / "_last_checkpoint").read_bytes()
    older = write_checkpoint(table.snapshot(version=5), now_ms=NOW)
    assert older.last_checkpoint_updated is False
    assert older.paths == (f"{LOG}/00000000000000000005.checkpoint.parquet",)
    assert (path / LOG / "_last_checkpoint").read_bytes() == pointer
    assert table.snapshot(version=7).segment.checkpoint.version == 5


# -- interval and bad properties --------------------------------------------------------------------------------------


def test_checkpoint_interval_and_should_checkpoint() -> None:
    default = TableProperties({})
    assert checkpoint_interval(default) == 10
    assert [v for v in range(31) if should_checkpoint(v, default)] == [10, 20, 30]
    every = TableProperties({"delta.checkpointInterval": "1"})
    assert [should_checkpoint(v, every) for v in (0, 1, 2)] == [False, True, True]
    assert checkpoint_interval(TableProperties({"delta.checkpointInterval": "7"})) == 7
    for bad in ("ten", "0", "-3", "1.5", ""):
        with pytest.raises(InvalidTableProperty, match=r"delta\.checkpointInterval"):
            should_checkpoint(10, TableProperties({"delta.checkpointInterval": bad}, "/t"))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("delta.checkpointInterval", "ten"),
        ("delta.deletedFileRetentionDuration", "a while"),
        ("delta.checkpointPolicy", "v3"),
        ("delta.checkpoint.writeStatsAsJson", "yes"),
        ("delta.setTransactionRetentionDuration", "interval 2 months"),
    ],
)
def test_bad_property_raises_and_writes_nothing(tmp_path: Path, key: str, value: str) -> None:
    path = write_log(tmp_path / "t", [[protocol(), metadata([field("id", "long")], configuration={key: value})]])
    before = tree_state(tmp_path)
    with pytest.raises(InvalidTableProperty) as info:
        write_checkpoint(DeltaTable(str(path)).snapshot(), now_ms=NOW)
    message = str(info.value)
    assert key in message and "\n" not in message and message.startswith(f"table {path}: ")
    assert tree_state(tmp_path) == before
