"""Transactions: commitInfo, create-only commits, conflict rules, retries, writer-feature gating and bad input.

Tables are written by delta-rs 1.6.3 (the independent oracle), committed to by deltalite, and read back by both.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.local import LocalFileSystem

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine import (
    CommitTooLate,
    ConcurrentAppend,
    ConcurrentDeleteDelete,
    ConcurrentDeleteRead,
    ConcurrentTransaction,
    CreateOnlyNotSupported,
    InvalidTableProperty,
    MetadataChanged,
    StorageError,
    TransactionError,
    VersionNotFound,
    remove_from_add,
)
from airflow_provider_deltalite.engine import transaction as transaction_module
from airflow_provider_deltalite.engine.file_actions import live_file_actions
from airflow_provider_deltalite.engine.storage import Storage
from airflow_provider_deltalite.engine.transaction import RetryPolicy, Transaction
from tests.helpers import copy_table, tree_state
from tests.oracles import assert_rows_agree

FAST = RetryPolicy(max_attempts=5, base_delay_s=0.0, max_delay_s=0.0)


@pytest.fixture(scope="module")
def deltalake() -> Any:
    import deltalake

    return deltalake


def make_table(deltalake: Any, path: Path, commits: int = 2, properties: dict[str, str] | None = None) -> Path:
    """A partitioned table written by delta-rs: `commits` appends of 4 rows each, one file per partition."""
    for i in range(commits):
        data = pa.table({"id": pa.array(range(i * 4, i * 4 + 4), pa.int64()), "part": ["a", "b", "a", "b"]})
        deltalake.write_deltalake(
            str(path), data, partition_by=["part"], mode="append", configuration=properties if i == 0 else None
        )
    return path


def data_file(table: Path, ids: list[int], part: str) -> dict[str, Any]:
    """Write a parquet file of `ids` into partition `part` and return its add action (with exact stats)."""
    rel = f"part={part}/deltalite-{uuid.uuid4()}.parquet"
    (table / rel).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), table / rel)
    stats = {
        "numRecords": len(ids),
        "minValues": {"id": min(ids)},
        "maxValues": {"id": max(ids)},
        "nullCount": {"id": 0},
    }
    return {
        "path": rel,
        "partitionValues": {"part": part},
        "size": (table / rel).stat().st_size,
        "modificationTime": int(time.time() * 1000),
        "dataChange": True,
        "stats": json.dumps(stats),
    }


def commit_line(table: Path, version: int, action: str) -> dict[str, Any]:
    lines = (table / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    return [json.loads(line)[action] for line in lines if action in json.loads(line)]


def rows(deltalake: Any, table: Path, version: int | None = None) -> list[tuple[int, str]]:
    data = deltalake.DeltaTable(str(table), version=version).to_pyarrow_table()
    assert_rows_agree(table, data, version=version)  # delta-kernel-rs reads the same rows
    return sorted(zip(data.column("id").to_pylist(), data.column("part").to_pylist(), strict=True))


def rewrite(txn: Transaction, table: Path, part: str) -> None:
    """Stage a dataChange=false rewrite of every file of `part` into one file with the same rows."""
    files = [f for f in live_file_actions(txn.snapshot) if f["partitionValues"]["part"] == part]
    ids = sorted(i for f in files for i in pq.read_table(table / f["path"]).column("id").to_pylist())
    txn.read_files(f["path"] for f in files)
    for f in files:
        txn.remove(remove_from_add(f, 1_700_000_000_000, data_change=False))
    new = data_file(table, ids, part)
    new["dataChange"] = False
    txn.add(new)


# -- commits ---------------------------------------------------------------------------------------------


def test_blind_append_commit_info_and_delta_rs_reads_it(deltalake: Any, tmp_path: Path) -> None:
    table = make_table(deltalake, tmp_path / "t")
    txn = DeltaTable(str(table)).transaction()
    txn.add(data_file(table, [100, 101], "c"))
    result = txn.commit("WRITE", {"mode": "Append", "partitionBy": ["part"]}, {"numFiles": 1, "numOutputRows": 2})
    assert (result.version, result.attempts) == (2, 1)
    (info,) = commit_line(table, 2, "commitInfo")
    assert info["operation"] == "WRITE"
    assert info["operationParameters"] == {"mode": "Append", "partitionBy": '["part"]'}
    assert info["operationMetrics"] == {"numFiles": "1", "numOutputRows": "2"}
    assert (info["readVersion"], info["isolationLevel"], info["isBlindAppend"]) == (1, "Serializable", True)
    assert info["engineInfo"].startswith("deltalite/")
    assert str(uuid.UUID(info["txnId"])) == info["txnId"] == result.txn_id
    first = (table / "_delta_log" / f"{2:020d}.json").read_text().splitlines()[0]
    assert first.startswith('{"commitInfo"')
    assert rows(deltalake, table) == sorted([(i, "ab"[i % 2]) for i in range(8)] + [(100, "c"), (101, "c")])
    assert deltalake.DeltaTable(str(table)).version() == 2


def test_rewrite_is_snapshot_isolation_and_keeps_rows(deltalake: Any, tmp_path: Path) -> None:
    table = make_table(deltalake, tmp_path / "t", commits=3)
    before = rows(deltalake, table)
    txn = DeltaTable(str(table)).transaction()
    rewrite(txn, table, "a")
    result = txn.commit("OPTIMIZE", {"predicate": [], "zOrderBy": [], "auto": False})
    (info,) = commit_line(table, result.version, "commitInfo")
    assert (info["isolationLevel"], info["isBlindAppend"]) == ("SnapshotIsolation", False)
    assert info["operationParameters"] == {"predicate": "[]", "zOrderBy": "[]", "auto": False}
    removes = commit_line(table, result.version, "remove")
    assert len(removes) == 3 and all(r["dataChange"] is False and r["extendedFileMetadata"] for r in removes)
    assert rows(deltalake, table) == before
    ours = DeltaTable(str(table)).snapshot()
    theirs = pa.table(deltalake.DeltaTable(str(table)).get_add_actions(flatten=True))
    assert sorted(ours.files.column("path").to_pylist()) == sorted(theirs.column("path").to_pylist())
    assert ours.num_files == 4  # 3 files of b + the rewritten a


def test_transaction_commits_once(deltalake: Any, tmp_path: Path) -> None:
    table = make_table(deltalake, tmp_path / "t")
    txn = DeltaTable(str(table)).transaction()
    txn.add(data_file(table, [1], "a"))
    txn.commit("WRITE")
    with pytest.raises(TransactionError, match="already committed version 2"):
        txn.commit("WRITE")


# -- conflicts -----------------------------------------------------------------------------------------


def test_rewrite_tolerates_a_concurrent_append(deltalake: Any, tmp_path: Path) -> None:
    table = make_table(deltalake, tmp_path / "t")
    dt = DeltaTable(str(table))
    optimize = dt.transaction(retry=FAST)
    rewrite(optimize, table, "a")
    append = dt.transaction()
    append.add(data_file(table, [50], "a"))
    assert append.commit("WRITE").version == 2
    result = optimize.commit("OPTIMIZE")
    assert (result.version, result.attempts, result.winning_commits) == (3, 2, (2,))
    assert rows(deltalake, table) == sorted([(i, "ab"[i % 2]) for i in range(8)] + [(50, "a")])


def test_two_rewrites_of_the_same_files_exactly_one_wins(deltalake: Any, tmp_path: Path) -> None:
    """The case that makes delta-rs 1.6.4-1.6.6 duplicate rows."""
    table = make_table(deltalake, tmp_path / "t")
    dt = DeltaTable(str(table))
    first, second = dt.transaction(retry=FAST), dt.transaction(retry=FAST)
    rewrite(first, table, "a")
    rewrite(second, table, "a")
    assert first.commit("OPTIMIZE").version == 2
    with pytest.raises(ConcurrentDeleteRead) as err:
        second.commit("OPTIMIZE")
    assert (err.value.winning_version, err.value.winning_operation) == (2, "OPTIMIZE")
    assert "conflicting commit: version 2 (OPTIMIZE)" in str(err.value)
    assert not (table / "_delta_log" / f"{3:020d}.json").exists()
    assert rows(deltalake, table) == sorted((i, "ab"[i % 2]) for i in range(8))


def test_delete_after_a_concurrent_delete_of_the_same_file(deltalake: Any, tmp_path: Path) -> None:
    table = make_table(deltalake, tmp_path / "t")
    dt = DeltaTable(str(table))
    snap = dt.snapshot()
    (victim,) = [f for f in live_file_actions(snap) if f["partitionValues"]["part"] == "a"][:1]
    for_first, for_second = dt.transaction(snap, retry=FAST), dt.transaction(snap, retry=FAST)
    for txn in (for_first, for_second):
        txn.remove(remove_from_add(victim, 1, data_change=True))
    assert for_first.commit("DELETE").version == 2
    with pytest.raises(ConcurrentDeleteDelete, match="already removed"):
        for_second.commit("DELETE")


def test_serializable_delete_conflicts_with_an_append_into_what_it_read(deltalake: Any, tmp_path: Path) -> None:
    table = make_table(deltalake, tmp_path / "t")
    dt = DeltaTable(str(table))
    delete = dt.transaction(retry=FAST)
    delete.read_predicate("part = 'a'")
    (victim,) = [f for f in live_file_actions(delete.snapshot) if f["partitionValues"]["part"] == "a"][:1]
    delete.remove(remove_from_add(victim, 1, data_change=True))
    other = dt.transaction()
    other.add(data_file(table, [7], "b"))  # another partition: no conflict
    other.commit("WRITE")
    into = dt.transaction()
    into.add(data_file(table, [9], "a"))
    into.commit("WRITE")
    with pytest.raises(ConcurrentAppend) as err:
        delete.commit("DELETE")
    assert err.value.winning_version == 3


def test_same_app_transaction_conflicts(deltalake: Any, tmp_path: Path) -> None:
    table = make_table(deltalake, tmp_path / "t")
    dt = DeltaTable(str(table))
    a, b = dt.transaction(retry=FAST), dt.transaction(retry=FAST)
    for txn, ids in ((a, [1]), (b, [2])):
        assert txn.read_app_transaction("stream-1") is None
        txn.add(data_file(table, ids, "a"))
        txn.set_app_transaction("stream-1", 1)
    a.commit("STREAMING UPDATE")
    with pytest.raises(ConcurrentTransaction, match="stream-1"):
        b.commit("STREAMING UPDATE")
    assert DeltaTable(str(table)).snapshot().app_transactions["stream-1"]["version"] == 1


def test_concurrent_metadata_change_conflicts(deltalake: Any, tmp_path: Path) -> None:
    table = make_table(deltalake, tmp_path / "t")
    txn = DeltaTable(str(table)).transaction(retry=FAST)
    rewrite(txn, table, "a")
    deltalake.DeltaTable(str(table)).alter.set_table_properties({"delta.logRetentionDuration": "interval 60 days"})
    with pytest.raises(MetadataChanged) as err:
        txn.commit("OPTIMIZE")
    assert err.value.winning_version == 2


class _LosesResponses(Storage):
    """A store whose first commit write lands but reports a failure, as when the response is lost on the network."""

    lost = 0

    def write_create_only(self, path: str, data: bytes) -> None:
        super().write_create_only(path, data)
        if path.endswith(".json") and self.lost == 0:
            self.lost += 1
            raise StorageError("connection reset while reading the response", self.table_uri)


def test_lost_response_does_not_commit_twice(deltalake: Any, tmp_path: Path) -> None:
    table = make_table(deltalake, tmp_path / "t")
    storage = _LosesResponses(str(table))
    txn = Transaction(storage, DeltaTable(str(table)).snapshot(), retry=FAST)
    txn.add(data_file(table, [42], "a"))
    result = txn.commit("WRITE")
    assert result.version == 2 and storage.lost == 1
    assert not (table / "_delta_log" / f"{3:020d}.json").exists()
    assert rows(deltalake, table).count((42, "a")) == 1


# -- writer features and bad input ---------------------------------------------------------------------------


def test_append_only_refuses_data_changing_removes_but_allows_rewrites(deltalake: Any, tmp_path: Path) -> None:
    table = make_table(deltalake, tmp_path / "t", properties={"delta.appendOnly": "true"})
    dt = DeltaTable(str(table))
    delete = dt.transaction()
    victim = live_file_actions(delete.snapshot)[0]
    delete.remove(remove_from_add(victim, 1, data_change=True))
    before = tree_state(table)
    with pytest.raises(TransactionError, match="append-only"):
        delete.commit("DELETE")
    assert tree_state(table) == before
    txn = dt.transaction()
    rewrite(txn, table, "a")
    assert txn.commit("OPTIMIZE").version == 2


def test_removing_a_file_that_is_not_live_is_refused(deltalake: Any, tmp_path: Path) -> None:
    table = make_table(deltalake, tmp_path / "t")
    txn = DeltaTable(str(table)).transaction()
    live = live_file_actions(txn.snapshot)[0]
    txn.remove(remove_from_add({**live, "deletionVector": {"storageType": "i", "pathOrInlineDv": "abc"}}, 1, True))
    before = tree_state(table)
    with pytest.raises(TransactionError, match="not a live file at version 1"):
        txn.commit("DELETE")
    assert tree_state(table) == before


def test_a_remove_naming_its_live_file_by_absolute_uri_is_accepted(deltalake: Any, tmp_path: Path) -> None:
    # removes are matched on the path as written first; one written differently is still found by its resolved path
    table = make_table(deltalake, tmp_path / "t")
    txn = DeltaTable(str(table)).transaction()
    live = live_file_actions(txn.snapshot)[0]
    absolute = {**live, "path": (table / live["path"]).resolve().as_uri()}
    txn.remove(remove_from_add(absolute, 1, True))
    assert txn.commit("DELETE").version == 2
    assert (table / "_delta_log" / f"{2:020d}.json").exists()


def test_removing_a_path_the_table_never_had_is_refused(deltalake: Any, tmp_path: Path) -> None:
    table = make_table(deltalake, tmp_path / "t")
    txn = DeltaTable(str(table)).transaction()
    live = live_file_actions(txn.snapshot)[0]
    txn.remove(remove_from_add({**live, "path": "part-00000-never-written.parquet"}, 1, True))
    before = tree_state(table)
    with pytest.raises(TransactionError, match=r"cannot remove part-00000-never-written\.parquet: it is not a live"):
        txn.commit("DELETE")
    assert tree_state(table) == before


def test_mixed_data_change_is_refused(deltalake: Any, tmp_path: Path) -> None:
    table = make_table(deltalake, tmp_path / "t")
    txn = DeltaTable(str(table)).transaction()
    txn.remove(remove_from_add(live_file_actions(txn.snapshot)[0], 1, data_change=False))
    txn.add(data_file(table, [1], "a"))
    with pytest.raises(TransactionError, match="mix dataChange"):
        txn.commit("WRITE")


@pytest.mark.parametrize(
    ("key", "value"),
    [("delta.checkpointInterval", "often"), ("delta.logRetentionDuration", "a while")],
)
def test_invalid_properties_fail_before_writing(deltalake: Any, tmp_path: Path, key: str, value: str) -> None:
    table = make_table(deltalake, tmp_path / "t", properties={key: value})
    txn = DeltaTable(str(table)).transaction()
    txn.add(data_file(table, [1], "a"))
    before = tree_state(table)
    with pytest.raises(InvalidTableProperty, match=key):
        txn.commit("WRITE")
    assert tree_state(table) == before


def test_snapshot_of_another_table_is_refused(deltalake: Any, tmp_path: Path) -> None:
    one = make_table(deltalake, tmp_path / "one")
    two = make_table(deltalake, tmp_path / "two")
    with pytest.raises(TransactionError, match="another table"):
        DeltaTable(str(one)).transaction(DeltaTable(str(two)).snapshot())


def test_read_version_beyond_the_log_is_refused(deltalake: Any, tmp_path: Path) -> None:
    table = make_table(deltalake, tmp_path / "t")
    with pytest.raises(VersionNotFound, match="version 9 does not exist"):
        DeltaTable(str(table)).transaction(read_version=9)


class _PlainLocal(LocalFileSystem):
    """The local filesystem under another protocol name: a store deltalite knows no put-if-absent for."""

    protocol = ("plainlocal",)

    @classmethod
    def _strip_protocol(cls, path: str) -> str:
        return super()._strip_protocol(path.replace("plainlocal://", "", 1))


def test_store_without_create_only_is_refused_unless_single_writer(deltalake: Any, tmp_path: Path) -> None:
    fsspec.register_implementation("plainlocal", _PlainLocal, clobber=True)
    table = make_table(deltalake, tmp_path / "t")
    uri = f"plainlocal://{table}"
    txn = DeltaTable(uri).transaction()
    txn.add(data_file(table, [1], "a"))
    before = tree_state(table)
    with pytest.raises(CreateOnlyNotSupported) as err:
        txn.commit("WRITE")
    message = str(err.value)
    assert "plainlocal://" in message and "deltalite_single_writer=true" in message
    assert tree_state(table) == before
    opted_in = DeltaTable(uri, {"deltalite_single_writer": "true"}).transaction()
    opted_in.add(data_file(table, [2], "a"))
    assert opted_in.commit("WRITE").version == 2
    assert os.path.exists(table / "_delta_log" / f"{2:020d}.json")


# -- interoperability and in-commit timestamps -----------------------------------------------------------------


def test_every_version_of_a_table_we_commit_to_reads_the_same_in_delta_rs(deltalake: Any, tmp_path: Path) -> None:
    """Mixed commits by deltalite and delta-rs across the checkpoint interval: at every version delta-rs sees the
    same live files and rows as deltalite, and the checkpoint deltalite wrote at version 10 is what both load from."""
    table = make_table(deltalake, tmp_path / "t")
    dt = DeltaTable(str(table))
    for step in range(12):
        kind = step % 4
        if kind == 0:
            txn = dt.transaction()
            txn.add(data_file(table, [1000 + step, 2000 + step], "ab"[step % 2]))
            txn.commit("WRITE")
        elif kind == 1:
            txn = dt.transaction()
            rewrite(txn, table, "a")
            txn.commit("OPTIMIZE")
        elif kind == 2:
            txn = dt.transaction()
            victim = sorted(live_file_actions(txn.snapshot), key=lambda f: f["path"])[0]
            txn.read_files([victim["path"]])
            txn.remove(remove_from_add(victim, 1_700_000_000_000, data_change=True))
            txn.commit("DELETE")
        else:
            data = pa.table({"id": pa.array([3000 + step], pa.int64()), "part": ["b"]})
            deltalake.write_deltalake(str(table), data, partition_by=["part"], mode="append")
    latest = dt.latest_version()
    assert latest == 13
    assert (table / "_delta_log" / f"{10:020d}.checkpoint.parquet").exists()
    assert json.loads((table / "_delta_log" / "_last_checkpoint").read_text())["version"] == 10
    assert dt.snapshot().segment.checkpoint.version == 10
    from airflow_provider_deltalite.engine.scan import scan

    for version in range(latest + 1):
        ours = dt.snapshot(version=version)
        theirs = deltalake.DeltaTable(str(table), version=version)
        their_paths = sorted(pa.table(theirs.get_add_actions(flatten=True)).column("path").to_pylist())
        assert sorted(ours.files.column("path").to_pylist()) == their_paths, version
        our_rows, _ = scan(ours, columns=["id", "part"])
        assert sorted(zip(our_rows.column("id").to_pylist(), our_rows.column("part").to_pylist(), strict=True)) == rows(
            deltalake, table, version
        ), version


def test_in_commit_timestamps_are_first_and_monotonic(tmp_path: Path) -> None:
    # a delta-rs table with the inCommitTimestamp writer feature enabled (and changeDataFeed, appendOnly listed)
    table = copy_table("delta-rs/cdc_ict_table", tmp_path / "t")
    dt = DeltaTable(str(table))
    before = dt.snapshot()
    txn = dt.transaction()
    txn.set_app_transaction("ict-test", 1)
    result = txn.commit("STREAMING UPDATE")
    first = json.loads((table / "_delta_log" / f"{result.version:020d}.json").read_text().splitlines()[0])
    info = first["commitInfo"]
    assert next(iter(info)) == "inCommitTimestamp"
    assert info["inCommitTimestamp"] > before.timestamp
    assert info["timestamp"] == info["inCommitTimestamp"]
    assert dt.snapshot().timestamp == info["inCommitTimestamp"]


class _FrozenClock:
    """The ``time`` module as the transaction module sees it, with ``time()`` stopped at ``now_s``."""

    def __init__(self, now_s: float) -> None:
        self.now_s = now_s

    def time(self) -> float:
        return self.now_s

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.mark.parametrize(
    ("retention", "age_s", "refused"),
    [
        (None, 4 * 86_400, True),
        (None, 3 * 86_400, False),
        ("interval 60 seconds", 31, True),
        ("interval 60 seconds", 25, False),
    ],
)
def test_files_older_than_half_the_retention_are_not_committed(
    deltalake: Any, tmp_path: Path, retention: str | None, age_s: int, refused: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A concurrent VACUUM deletes unreferenced files older than the retention; a new file that old may be gone."""
    props = {"delta.deletedFileRetentionDuration": retention} if retention else None
    table = make_table(deltalake, tmp_path / "t", properties=props)
    # The commit reads the clock this file's age is measured from: the age is exactly age_s however long loading the
    # snapshot and committing take (a second's stall on a loaded machine made "written 31.0 s" read "32.0 s").
    now_s = time.time()
    monkeypatch.setattr(transaction_module, "time", _FrozenClock(now_s))
    add = {**data_file(table, [100], "c"), "modificationTime": int(now_s * 1000) - age_s * 1000}
    before = tree_state(table / "_delta_log")
    txn = DeltaTable(str(table)).transaction()
    txn.add(add)
    if not refused:
        assert txn.commit("WRITE", {"mode": "Append"}).version == 2
        return
    with pytest.raises(CommitTooLate) as caught:
        txn.commit("WRITE", {"mode": "Append"})
    half = 302_400 if retention is None else 30
    assert f"written {age_s}." in str(caught.value) and f"({half * 2:g} s)" in str(caught.value)
    assert tree_state(table / "_delta_log") == before


def test_a_lost_race_is_retried_at_once_at_the_next_free_version(deltalake: Any, tmp_path: Path) -> None:
    """No backoff after a lost race without a conflict: the winners are read and the next version written at once."""
    slept: list[int] = []

    class Recording(RetryPolicy):
        def delay(self, attempt: int) -> float:
            slept.append(attempt)
            return 0.0

    table = make_table(deltalake, tmp_path / "t")
    ours = DeltaTable(str(table)).transaction(retry=Recording())
    ours.add(data_file(table, [200], "c"))
    for ids in ([300], [301], [302]):  # three blind appends win versions 2..4 after we read version 1
        other = DeltaTable(str(table)).transaction()
        other.add(data_file(table, ids, "d"))
        other.commit("WRITE", {"mode": "Append"})
    result = ours.commit("WRITE", {"mode": "Append"})
    assert (result.version, result.attempts, result.winning_commits) == (5, 2, (2, 3, 4))
    assert slept == []  # before the change it backed off once (attempt 1) before writing version 5
