"""`advance_snapshot`: the state at a later version from an earlier snapshot and the commits between, as a fresh
replay builds it; and the checkpoint a transaction writes from it."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite.engine.errors import DeltaLiteError
from airflow_provider_deltalite.engine.snapshot import Snapshot, load_snapshot
from airflow_provider_deltalite.engine.snapshot_advance import advance_snapshot
from airflow_provider_deltalite.engine.storage.table_storage import Storage
from airflow_provider_deltalite.maintenance.optimize import optimize
from airflow_provider_deltalite.table import DeltaTable
from tests.conformance.corpus import corpus_tables, deltars_paths, normalise_path
from tests.helpers import CORPUS, copy_table
from tests.test_process_cost import ReadCounter, write_table


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda r: (r["path"], json.dumps(r.get("deletionVector"), sort_keys=True)))


def _state(snapshot: Snapshot) -> dict[str, Any]:
    p = snapshot.protocol
    return {
        "version": snapshot.version,
        "protocol": (p.min_reader_version, p.min_writer_version, sorted(p.reader_features), sorted(p.writer_features)),
        "metadata": snapshot.metadata,
        "txn": snapshot.app_transactions,
        "domains": snapshot.domain_metadata,
        "files_schema": snapshot.raw_files.schema,
        "files": _rows(snapshot.raw_files),
        "tombstones_schema": snapshot.tombstones.schema,
        "tombstones": _rows(snapshot.tombstones),
        "partition_values": snapshot.partition_values.sort_by([(c, "ascending") for c in snapshot.partition_columns])
        if snapshot.partition_columns
        else None,
    }


def test_advancing_corpus_tables_gives_the_state_a_fresh_replay_gives() -> None:
    """Every readable corpus table with commits after its newest checkpoint, from up to three earlier versions on the
    same checkpoint to the latest: the advanced state equals the replayed one, file by file and action by action, and
    its live files are delta-rs's wherever delta-rs opens the table."""
    outcome: Counter[str] = Counter()
    features: set[str] = set()
    for entry in corpus_tables():
        if entry.role != "positive":
            continue
        storage = Storage(str(entry.path))
        try:
            latest = load_snapshot(storage)
        except DeltaLiteError:
            continue  # refused on purpose (docs/conformance.md); the conformance suite checks those errors
        segment = latest.segment
        first = segment.checkpoint.version if segment.checkpoint else segment.commits[0].version
        earlier = sorted({first, (first + latest.version) // 2, latest.version - 1} & set(range(first, latest.version)))
        for version in earlier:
            advanced = advance_snapshot(load_snapshot(storage, version), latest.version)
            if advanced is None:
                outcome["metadata or protocol changed"] += 1
                continue
            assert _state(advanced) == _state(latest), (entry.name, version)
            outcome["advanced"] += 1
            # and, where delta-rs opens the table, the live files are the ones it reads: an oracle that is not ours
            theirs = deltars_paths(entry.path)
            if theirs is not None:
                ours = {normalise_path(p, entry.path) for p in advanced.raw_files.column("path").to_pylist()}
                assert ours == theirs, (entry.name, version)
                outcome["live files as delta-rs reads them"] += 1
            features |= set(latest.protocol.writer_features)
            features |= (
                {"dv"} if any(r is not None for r in latest.raw_files.column("deletionVector").to_pylist()) else set()
            )
            features |= {"tombstones"} if latest.tombstones.num_rows else set()
            features |= {"txn"} if latest.app_transactions else set()
    assert outcome == {"advanced": 222, "live files as delta-rs reads them": 222, "metadata or protocol changed": 38}
    # the comparisons cover the state that is easy to get wrong: deletion vectors, tombstones, app transactions,
    # column mapping, in-commit timestamps (domain metadata and row tracking: the next test)
    assert features == {
        "appendOnly",
        "changeDataFeed",
        "checkConstraints",
        "columnMapping",
        "deletionVectors",
        "dv",
        "generatedColumns",
        "inCommitTimestamp",
        "invariants",
        "materializePartitionColumns",
        "timestampNtz",
        "tombstones",
        "txn",
        "variantShredding-preview",
        "variantType",
    }


def test_advancing_over_our_commit_to_a_liquid_row_tracking_table_gives_the_replayed_state(tmp_path: Path) -> None:
    # delta-rs's corpus table: liquid clustering (domain delta.liquid), row tracking (domain delta.rowTracking, whose
    # high-water mark our OPTIMIZE moves) and deletion vectors
    path = copy_table(CORPUS / "delta-rs" / "table_with_liquid_clustering", tmp_path / "t")
    storage = Storage(str(path))
    before = load_snapshot(storage)
    assert optimize(DeltaTable(str(path))).committed_version == 1
    actions = [json.loads(line) for line in (path / "_delta_log" / f"{1:020d}.json").read_text().splitlines()]
    assert [a["domainMetadata"]["domain"] for a in actions if "domainMetadata" in a] == ["delta.rowTracking"]
    advanced = advance_snapshot(before, 1)
    assert advanced is not None
    latest = load_snapshot(storage)
    assert _state(advanced) == _state(latest)
    assert set(latest.domain_metadata) == {"delta.liquid", "delta.rowTracking"}
    assert latest.domain_metadata != before.domain_metadata  # the high-water mark moved, and the advance followed it


def test_advancing_to_the_same_version_is_the_snapshot_and_backwards_is_none(tmp_path: Path) -> None:
    write_table(tmp_path / "t", 3)
    storage = Storage(str(tmp_path / "t"))
    snapshot = load_snapshot(storage, 1)
    assert advance_snapshot(snapshot, 1) is snapshot
    assert advance_snapshot(load_snapshot(storage), 1) is None


def test_a_missing_commit_is_none_so_the_caller_replays(tmp_path: Path) -> None:
    write_table(tmp_path / "t", 4)
    storage = Storage(str(tmp_path / "t"))
    snapshot = load_snapshot(storage, 1)
    (tmp_path / "t" / "_delta_log" / "00000000000000000002.json").unlink()
    assert advance_snapshot(snapshot, 3) is None


def test_a_metadata_change_is_none_so_the_caller_replays(tmp_path: Path) -> None:
    write_table(tmp_path / "t", 2)
    storage = Storage(str(tmp_path / "t"))
    snapshot = load_snapshot(storage)
    deltalake.DeltaTable(str(tmp_path / "t")).alter.set_table_properties(
        {"delta.logRetentionDuration": "interval 9 days"}
    )
    assert advance_snapshot(snapshot, 2) is None
    assert load_snapshot(storage).properties.explicit["delta.logRetentionDuration"] == "interval 9 days"


def test_an_optimize_on_a_checkpoint_interval_reads_the_checkpoint_once_and_writes_the_new_one_right(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "t"
    write_table(table, 20, checkpoint_at=10)  # versions 0-19, a checkpoint at 10: OPTIMIZE commits 20, a checkpoint
    before = deltalake.DeltaTable(str(table))
    files_before = {Path(u).relative_to(table).as_posix() for u in before.file_uris()}
    ids_before = sorted(before.to_pyarrow_table().column("id").to_pylist())
    counter = ReadCounter(monkeypatch)
    stats = optimize(DeltaTable(str(table)))
    assert stats.committed_version == 20
    # the table state is read once: _last_checkpoint, checkpoint 10 and commits 11-19 by the load, then only our own
    # commit 20 to advance it. The other listings and the second hint read are the checkpoint writer's (a classic
    # file another writer wrote, the hint never moved back) and log cleanup's (expired files, sidecars).
    assert counter.log_reads() == {
        ("read", "_last_checkpoint"): 2,
        ("list_from", "_delta_log"): 4,
        ("list_from", "_sidecars"): 1,
        ("read_many", "00000000000000000010.checkpoint.parquet"): 1,
        **{("read_many", f"{v:020d}.json"): 1 for v in range(11, 21)},
    }
    commit = [json.loads(line) for line in (table / "_delta_log" / f"{20:020d}.json").read_text().splitlines()]
    removed = {a["remove"]["path"] for a in commit if "remove" in a}
    added = {a["add"]["path"] for a in commit if "add" in a}
    assert len(removed) == 40 and len(added) == 2 and removed <= files_before
    # the checkpoint holds exactly the files the log says are live, read with pyarrow alone
    checkpoint = pq.read_table(table / "_delta_log" / f"{20:020d}.checkpoint.parquet").to_pylist()
    in_checkpoint = {r["add"]["path"] for r in checkpoint if r["add"] is not None}
    assert in_checkpoint == (files_before - removed) | added == added
    assert json.loads((table / "_delta_log" / "_last_checkpoint").read_text())["version"] == 20
    after = deltalake.DeltaTable(str(table))  # delta-rs reads the new checkpoint
    assert after.version() == 20
    assert {Path(u).relative_to(table).as_posix() for u in after.file_uris()} == added
    assert sorted(after.to_pyarrow_table().column("id").to_pylist()) == ids_before == list(range(200))
