"""VACUUM on real tables: corpus tables as the oracle (the repartitioned/vacuumed pair, deletion vectors, change
data, the trap table whose log paths do not match its files), rows read back by delta-rs 1.6.3, and the safety
rules (retention checks, hidden files, links, absolute paths, files outside the root, live files missing)."""

from __future__ import annotations

import collections
import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import deltalake
import fsspec
import pyarrow as pa
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine import (
    InvalidArgument,
    ProtocolNotSupported,
    RetentionTooShort,
    StorageError,
    TableNotFound,
    VacuumRefused,
    remove_from_add,
)
from airflow_provider_deltalite.engine.deletion_vectors import dv_absolute_path
from airflow_provider_deltalite.engine.file_actions import live_file_actions
from airflow_provider_deltalite.maintenance.vacuum import vacuum
from airflow_provider_deltalite.maintenance.vacuum.lite import LAST_VACUUM_INFO_PATH
from airflow_provider_deltalite.maintenance.vacuum.paths import HiddenRule, normal_relative
from tests.conformance.corpus import row_multiset
from tests.helpers import CORPUS, copy_table, tree_state
from tests.oracles import assert_rows_agree

WEEK_MS = 7 * 24 * 3_600_000
OLD_NS = (time.time_ns() - 30 * 24 * 3_600_000 * 1_000_000,) * 2
RETAIN_NOTHING = {"retention_hours": 0, "enforce_retention_duration": False}
TRAP = "delta-kernel-defaults/spark-variant-stable-feature-checkpoint"


def _files(root: Path, *, hidden: bool = False) -> set[str]:
    """Files outside `_delta_log`, relative to the root; hidden ones (a segment starting with `.` or `_`, other than
    partition and `_change_data` directories) only when asked."""
    out = set()
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            rel = str((Path(dirpath) / name).relative_to(root))
            if rel.startswith("_delta_log/"):
                continue
            is_hidden = any(p.startswith((".", "_")) and not p.startswith("_change_data") for p in rel.split("/"))
            if is_hidden == hidden:
                out.add(rel)
    return out


def _rows(path: Path) -> collections.Counter:
    """delta-rs' rows of the latest version (its query engine, which applies deletion vectors)."""
    table = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(str(path))).execute("select * from t")
    table = pa.table(table.read_all())
    assert_rows_agree(path, table)  # and delta-kernel-rs, and delta-rs's plain reader where it reads the table
    return row_multiset(table, table.column_names)


def _commit(path: Path, version: int) -> list[dict[str, Any]]:
    lines = (path / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _age(path: Path) -> None:
    """Move a table 30 days back: its JSON commits' timestamps and removes' deletionTimestamp, and the mtime of every
    file and directory (a copy or a table just written is new)."""
    old_ms = OLD_NS[0] // 1_000_000
    for log in sorted((path / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        for a in actions:
            if "remove" in a and "deletionTimestamp" in a["remove"]:
                a["remove"]["deletionTimestamp"] = old_ms
            if "commitInfo" in a and "timestamp" in a["commitInfo"]:
                a["commitInfo"]["timestamp"] = old_ms
        log.write_text("".join(json.dumps(a) + "\n" for a in actions))
    for dirpath, dirs, names in os.walk(path):
        for name in dirs + names:
            os.utime(Path(dirpath) / name, ns=OLD_NS, follow_symlinks=False)


def _comparable(stats: Any) -> dict[str, Any]:
    doc = stats.to_dict()
    for key in ("minRetainedTimestamp", "timeTakenToIdentifyEligibleFiles", "timeTakenForDelete"):
        doc.pop(key)
    for key in ("vacuumStartTime", "vacuumEndTime"):
        doc.pop(key)
    return doc


# -- the corpus pair ---------------------------------------------------------------------------------------------


def test_repartitioned_becomes_exactly_the_vacuumed_corpus_table(tmp_path: Path) -> None:
    path = copy_table("delta-golden/snapshot-repartitioned", tmp_path / "t")
    # Commit times are the commit files' mtimes. A fresh copy gives them all about "now" (made increasing 1 ms apart),
    # so the newest could fall after the horizon of a fast run: date them a month back, in order.
    for i, log in enumerate(sorted((path / "_delta_log").glob("*.json"))):
        os.utime(log, ns=(OLD_NS[0] + i * 1_000_000,) * 2)
    vacuumed = CORPUS / "delta-golden/snapshot-vacuumed"
    gone = sorted(_files(path) - _files(vacuumed))
    hidden = _files(path, hidden=True)
    assert len(gone) == 9
    log_before = tree_state(path / "_delta_log")

    dry = vacuum(DeltaTable(str(path)), **RETAIN_NOTHING, dry_run=True)
    assert tree_state(path / "_delta_log") == log_before
    assert dry.files_to_delete == [{"path": p, "size": os.path.getsize(path / p)} for p in gone]
    stats = vacuum(DeltaTable(str(path)), **RETAIN_NOTHING)

    assert _files(path) == _files(vacuumed)
    assert _files(path, hidden=True) == hidden  # Hadoop's .crc sidecars are hidden: VACUUM keeps them
    assert _rows(path) == _rows(vacuumed)
    size = sum(f["size"] for f in dry.files_to_delete)
    assert _comparable(stats) == {
        "isDryRun": False,
        "mode": "FULL",
        "specifiedRetentionMillis": 0,
        "defaultRetentionMillis": WEEK_MS,
        "dirsPresentBeforeDelete": 1,
        "filesAndDirsPresentBeforeDelete": 11,
        "numFilesToDelete": 9,
        "sizeOfDataToDelete": size,
        "objectsDeleted": 9,
        "latestCommitVersion": 5,
        "filesToDelete": None,
        "dirsToDelete": None,
        "eligibleStartCommitVersion": None,
        "eligibleEndCommitVersion": None,
        "numPartitionColumns": 0,
        "committedVersions": [6, 7],
        "executor": "local",
        "filesAlreadyGone": 0,
        "numFilesDeferred": 0,
    }
    assert _comparable(dry) == {
        **_comparable(stats),
        "isDryRun": True,
        "filesToDelete": dry.files_to_delete,
        "dirsToDelete": [],
        "committedVersions": [],
    }
    (start,) = _commit(path, 6)
    (end,) = _commit(path, 7)
    assert start["commitInfo"]["operation"] == "VACUUM START"
    assert start["commitInfo"]["operationParameters"] == {
        "retentionCheckEnabled": False,
        "specifiedRetentionMillis": 0,
        "defaultRetentionMillis": WEEK_MS,
    }
    assert start["commitInfo"]["operationMetrics"] == {"numFilesToDelete": "9", "sizeOfDataToDelete": str(size)}
    assert end["commitInfo"]["operation"] == "VACUUM END"
    assert end["commitInfo"]["operationParameters"] == {"status": "COMPLETED"}
    assert end["commitInfo"]["operationMetrics"] == {"numDeletedFiles": "9", "numVacuumedDirectories": "1"}
    assert start["commitInfo"]["isolationLevel"] == end["commitInfo"]["isolationLevel"] == "SnapshotIsolation"
    # the newest commit before the horizon of the version it planned on (its own START and END remove nothing)
    assert (path / LAST_VACUUM_INFO_PATH).read_bytes() == b'{"latestCommitVersionOutsideOfRetentionWindow":5}\n'
    assert deltalake.DeltaTable(str(path)).version() == 7


def test_default_retention_keeps_files_younger_than_a_week(tmp_path: Path) -> None:
    """The copy's files are minutes old; their tombstones are years old. Age protects them, not the log."""
    path = copy_table("delta-golden/snapshot-repartitioned", tmp_path / "t")
    data = tree_state(path)
    stats = vacuum(DeltaTable(str(path)))
    assert (stats.num_files_to_delete, stats.objects_deleted, stats.specified_retention_millis) == (0, 0, None)
    assert stats.default_retention_millis == WEEK_MS
    assert stats.min_retained_timestamp == stats.vacuum_start_time - WEEK_MS
    assert {k: v for k, v in tree_state(path).items() if not k.startswith("_delta_log")} == {
        k: v for k, v in data.items() if not k.startswith("_delta_log")
    }
    _age(path)
    assert vacuum(DeltaTable(str(path))).objects_deleted == 9  # once they are old, the expired ones go


# -- retention -----------------------------------------------------------------------------------------------


def _delta_rs_table(path: Path, configuration: dict[str, str] | None = None) -> Path:
    for k in range(3):
        data = pa.table({"id": pa.array([k], pa.int64()), "p": ["x y"]})
        deltalake.write_deltalake(str(path), data, mode="overwrite", partition_by=["p"], configuration=configuration)
    return path


def test_retention_check_refuses_shorter_retentions_and_says_how_to_override(tmp_path: Path) -> None:
    path = _delta_rs_table(tmp_path / "t")
    _age(path)
    state = tree_state(path)
    with pytest.raises(RetentionTooShort) as info:
        vacuum(DeltaTable(str(path)), retention_hours=1)
    assert str(info.value) == (
        f"table {path}: a retention of 1 hours is shorter than the table's delta.deletedFileRetentionDuration of "
        "168 hours: VACUUM would delete files that readers of recent versions, time travel and writers whose "
        "commits are still in flight may need, which breaks their reads or corrupts their commits; use a retention "
        "of at least 168 hours, or, only if no reader or writer can need files older than 1 hours, turn the check "
        "off with enforce_retention_duration=False (CLI: --no-enforce-retention-duration)"
    )
    with pytest.raises(InvalidArgument, match=r"retention_hours must not be negative, got -1$"):
        vacuum(DeltaTable(str(path)), retention_hours=-1, enforce_retention_duration=False)
    with pytest.raises(InvalidArgument, match=r"mode must be 'full' or 'lite', got 'fast'$"):
        vacuum(DeltaTable(str(path)), mode="fast")
    assert tree_state(path) == state

    longer = vacuum(DeltaTable(str(path)), retention_hours=24 * 31)  # longer is honoured: the files are 30 days old
    assert (longer.specified_retention_millis, longer.objects_deleted) == (31 * 24 * 3_600_000, 0)
    shorter = vacuum(DeltaTable(str(path)), retention_hours=1, enforce_retention_duration=False)
    assert shorter.objects_deleted == 2 and len(_files(path)) == 1
    (start,) = _commit(path, 5)
    assert start["commitInfo"]["operationParameters"] == {
        "retentionCheckEnabled": False,
        "specifiedRetentionMillis": 3_600_000,
        "defaultRetentionMillis": WEEK_MS,
    }


def test_table_retention_comes_from_the_interval_property(tmp_path: Path) -> None:
    path = _delta_rs_table(tmp_path / "t", {"delta.deletedFileRetentionDuration": "interval 2 days"})
    _age(path)
    with pytest.raises(RetentionTooShort, match=r"deletedFileRetentionDuration of 48 hours"):
        vacuum(DeltaTable(str(path)), retention_hours=47)
    stats = vacuum(DeltaTable(str(path)), retention_hours=48)
    assert (stats.default_retention_millis, stats.objects_deleted) == (2 * 24 * 3_600_000, 2)


def test_log_retention_shorter_than_file_retention_is_refused(tmp_path: Path) -> None:
    path = _delta_rs_table(tmp_path / "t", {"delta.logRetentionDuration": "interval 1 days"})
    _age(path)
    state = tree_state(path)
    with pytest.raises(RetentionTooShort) as info:
        vacuum(DeltaTable(str(path)))
    assert info.value.problem == (
        "the table's delta.logRetentionDuration (24 hours) is shorter than its delta.deletedFileRetentionDuration "
        "(168 hours): the log of versions whose files VACUUM keeps would be cleaned up first, as the reference "
        "refuses; raise delta.logRetentionDuration to at least 168 hours, or turn the check off with "
        "enforce_retention_duration=False (CLI: --no-enforce-retention-duration)"
    )
    assert tree_state(path) == state
    assert vacuum(DeltaTable(str(path)), enforce_retention_duration=False).objects_deleted == 2


# -- the trap: log paths that do not match the files -----------------------------------------------------------------


def test_trap_table_live_files_missing_from_storage_refuses_and_deletes_nothing(tmp_path: Path) -> None:
    """Its log says `test%25file%25prefix-part-…` (decoded once: `test%file%prefix-part-…`); storage has `part-…`.
    Every file on storage looks unreferenced; deleting them would delete the table's data."""
    path = copy_table(TRAP, tmp_path / "t")
    _age(path)
    state = tree_state(path)
    for kwargs in ({"dry_run": True}, {}, {"mode": "full", **RETAIN_NOTHING}):
        with pytest.raises(VacuumRefused) as info:
            vacuum(DeltaTable(str(path)), **kwargs)
        assert info.value.problem.startswith(
            "4 files the log references as live are not in storage "
            "(e.g. 'test%file%prefix-part-00000-5f6f82ed-28c5-4f4e-b358-93904826c84d-c000.snappy.parquet'): "
        )
    assert tree_state(path) == state
    # LITE reads only removes (there are none) and never deletes unreferenced files
    assert vacuum(DeltaTable(str(path)), mode="lite", **RETAIN_NOTHING).objects_deleted == 0
    assert _files(path) == _files(CORPUS / TRAP)


def test_trap_table_with_its_files_named_as_the_log_says_keeps_every_one(tmp_path: Path) -> None:
    path = copy_table(TRAP, tmp_path / "t")
    for name in _files(path):
        os.rename(path / name, path / f"test%file%prefix-{name}")
    _age(path)
    before = _files(path)
    assert vacuum(DeltaTable(str(path)), **RETAIN_NOTHING).objects_deleted == 0
    assert _files(path) == before and len(before) == 4


# -- deletion vectors -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "deleted_dvs", "deleted_data"),
    [
        ("delta-kernel-defaults/basic-dv-with-checkpoint", 44, 0),
        ("delta-golden/dv-partitioned-with-checkpoint", 13, 5),
    ],
)
def test_deletion_vector_files_of_live_files_stay(
    tmp_path: Path, table: str, deleted_dvs: int, deleted_data: int
) -> None:
    path = copy_table(table, tmp_path / "t")
    rows = _rows(path)
    stats = vacuum(DeltaTable(str(path)), **RETAIN_NOTHING, dry_run=True)
    planned = [f["path"] for f in stats.files_to_delete]
    assert sum(p.endswith(".bin") for p in planned) == deleted_dvs
    assert sum(p.endswith(".parquet") for p in planned) == deleted_data
    vacuum(DeltaTable(str(path)), **RETAIN_NOTHING)
    assert _rows(path) == rows
    assert not set(planned) & _files(path)
    live = {u[len(str(path)) + 1 :] for u in deltalake.DeltaTable(str(path)).file_uris()}
    assert {f for f in _files(path) if f.endswith(".parquet")} == live


def test_absolute_deletion_vector_path_with_special_characters_is_protected(tmp_path: Path) -> None:
    path = copy_table("delta-spark-resources/table-with-dv-special-char", tmp_path / "t")
    log = path / "_delta_log" / "00000000000000000000.json"
    folder = path / "folder&with%special char"
    # the resource is a template; Delta's own test substitutes the folder's URL-encoded URI
    log.write_text(log.read_text().replace("{{FOLDER_WITH_SPECIAL_CHAR}}", quote(str(folder))))
    orphan = folder / "deletion_vector_00000000-0000-0000-0000-000000000000.bin"
    orphan.write_bytes(b"x")
    _age(path)
    rows = _rows(path)
    stats = vacuum(DeltaTable(str(path)), **RETAIN_NOTHING)
    assert stats.objects_deleted == 1 and not orphan.exists()
    assert _files(path) == _files(CORPUS / "delta-spark-resources/table-with-dv-special-char")
    assert _rows(path) == rows and sum(rows.values()) == 5


def test_relative_deletion_vector_under_a_prefix_with_special_characters(tmp_path: Path) -> None:
    """A `u` deletion vector under a prefix with a space, `&` and `=` (joined to the root as written) keeps its file,
    and delta-rs still reads every row."""
    path = copy_table("delta-golden/dv-partitioned-with-checkpoint", tmp_path / "t")
    table = DeltaTable(str(path))
    snapshot = table.snapshot()
    with_dv = [a for a in snapshot.raw_files.to_pylist() if a["deletionVector"]]
    dv = with_dv[0]["deletionVector"]
    assert dv["storageType"] == "u"
    old_file = Path(dv_absolute_path(str(path), "u", dv["pathOrInlineDv"]))
    prefix = "a b&="
    new_file = Path(dv_absolute_path(str(path), "u", prefix + dv["pathOrInlineDv"]))
    assert new_file.parent.name == prefix
    new_file.parent.mkdir()
    shutil.copyfile(old_file, new_file)
    # a commit that moves the DV under the prefix: remove with the old DV, add with the new one
    txn = table.transaction()
    (action,) = live_file_actions(snapshot, [with_dv[0]["path"]])
    txn.remove(remove_from_add(action, int(time.time() * 1000), data_change=False))
    moved = dict(action)
    moved["deletionVector"] = {**action["deletionVector"], "pathOrInlineDv": prefix + dv["pathOrInlineDv"]}
    moved["dataChange"] = False
    txn.add(moved)
    txn.commit("test: move DV", {}, {})
    _age(path)
    rows = _rows(path)
    vacuum(DeltaTable(str(path)), retention_hours=0, enforce_retention_duration=False)
    assert new_file.exists()
    assert _rows(path) == rows


# -- change data -----------------------------------------------------------------------------------------------


def test_change_data_files_are_protected_by_age_only(tmp_path: Path) -> None:
    path = copy_table("delta-rs/cdf-table", tmp_path / "t")
    cdc = {f for f in _files(path) if f.startswith("_change_data/")}
    rows = _rows(path)
    young = vacuum(DeltaTable(str(path)), retention_hours=1, enforce_retention_duration=False, dry_run=True)
    assert young.files_to_delete == []  # the copy is minutes old
    _age(path)
    stats = vacuum(DeltaTable(str(path)), **RETAIN_NOTHING, dry_run=True)
    planned = {f["path"] for f in stats.files_to_delete}
    assert cdc <= planned and len(cdc) == 13
    vacuum(DeltaTable(str(path)), **RETAIN_NOTHING)
    assert not {f for f in _files(path) if f.startswith("_change_data/")}
    assert _rows(path) == rows


# -- special characters in partition values ---------------------------------------------------------------------


def test_partition_values_that_need_escaping_decode_once(tmp_path: Path) -> None:
    path = tmp_path / "t"
    values = ["b c", "d%e", "f=g", "ü/x", "h:i", "%25"]
    for k, value in enumerate(values):
        data = pa.table({"id": pa.array([k], pa.int64()), "p": [value]})
        deltalake.write_deltalake(str(path), data, mode="append", partition_by=["p"])
    deltalake.DeltaTable(str(path)).optimize.compact()  # one file per partition anyway: nothing compacted
    deltalake.write_deltalake(
        str(path), pa.table({"id": pa.array([9], pa.int64()), "p": ["d%e"]}), mode="overwrite", predicate="p = 'd%e'"
    )
    _age(path)
    rows = _rows(path)
    live = {u[len(str(path)) + 1 :] for u in deltalake.DeltaTable(str(path)).file_uris()}
    stats = vacuum(DeltaTable(str(path)), **RETAIN_NOTHING)
    assert stats.objects_deleted == 1  # the overwritten file of p=d%e
    assert _files(path) == live
    assert _rows(path) == rows and sum(rows.values()) == 6


# -- what is never touched -------------------------------------------------------------------------------------


def test_hidden_links_absolute_paths_and_outside_files_are_never_deleted(tmp_path: Path) -> None:
    path = tmp_path / "t"
    deltalake.write_deltalake(str(path), pa.table({"id": pa.array([1, 2], pa.int64())}))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "part-outside.parquet").write_bytes(b"outside")
    (tmp_path / "t_sibling").mkdir()
    (tmp_path / "t_sibling" / "part-0.parquet").write_bytes(b"sibling")
    abs_inside = path / "abs" / "part-abs.parquet"
    abs_inside.parent.mkdir()
    shutil.copyfile(next(path.glob("part-*.parquet")), abs_inside)
    table = DeltaTable(str(path))
    txn = table.transaction()
    for target in (abs_inside, outside / "part-outside.parquet"):
        txn.add({"path": "file://" + quote(str(target)), "size": target.stat().st_size, "dataChange": True})
    txn.commit("WRITE", {"mode": "Append"}, {})
    for rel in ("_SUCCESS", ".part-x.parquet.crc", "_tmp/part-0.parquet", "_delta_log/junk.json.tmp"):
        (path / rel).parent.mkdir(exist_ok=True)
        (path / rel).write_bytes(b"hidden")
    (path / "orphan.parquet").write_bytes(b"orphan")
    os.symlink(outside / "part-outside.parquet", path / "link.parquet")
    os.symlink(outside, path / "linkdir")
    os.symlink(path, path / "loop")  # a cycle a listing that followed links would never leave
    _age(path)
    young = path / "young.parquet"
    young.write_bytes(b"young")
    outside_state = tree_state(tmp_path / "outside") | tree_state(tmp_path / "t_sibling")

    stats = vacuum(DeltaTable(str(path)), retention_hours=1, enforce_retention_duration=False)
    assert stats.objects_deleted == 1 and not (path / "orphan.parquet").exists()
    for rel in ("_SUCCESS", ".part-x.parquet.crc", "_tmp/part-0.parquet", "_delta_log/junk.json.tmp"):
        assert (path / rel).read_bytes() == b"hidden"
    assert all((path / link).is_symlink() for link in ("link.parquet", "linkdir", "loop"))
    assert abs_inside.exists() and young.exists()
    assert tree_state(tmp_path / "outside") | tree_state(tmp_path / "t_sibling") == outside_state


def test_an_empty_old_directory_goes_and_a_young_one_stays(tmp_path: Path) -> None:
    path = _delta_rs_table(tmp_path / "t")
    (path / "p=gone" / "deeper").mkdir(parents=True)
    (path / "p=gone" / "deeper" / "orphan.parquet").write_bytes(b"x")
    _age(path)
    (path / "p=new").mkdir()
    live = {u[len(str(path)) + 1 :] for u in deltalake.DeltaTable(str(path)).file_uris()}
    hour = {"retention_hours": 1, "enforce_retention_duration": False}
    dry = vacuum(DeltaTable(str(path)), **hour, dry_run=True)
    assert dry.dirs_to_delete == ["p=gone/deeper", "p=gone"]
    assert [f["path"] for f in dry.files_to_delete] == sorted(_files(path) - live)
    assert len(dry.files_to_delete) == 3
    stats = vacuum(DeltaTable(str(path)), **hour)
    assert stats.objects_deleted == dry.objects_deleted == 5  # 2 expired files, the orphan, 2 directories
    assert not (path / "p=gone").exists() and (path / "p=new").is_dir() and (path / "p=x%20y").is_dir()


# -- LITE ------------------------------------------------------------------------------------------------------


def _long_history(path: Path, commits: int) -> Path:
    for k in range(commits):
        data = pa.table({"id": pa.array([k], pa.int64())})
        deltalake.write_deltalake(str(path), data, mode="overwrite")
    return path


def test_lite_refuses_after_log_cleanup_until_a_full_run_records_where_to_start(tmp_path: Path) -> None:
    path = _long_history(tmp_path / "t", 12)
    deltalake.DeltaTable(str(path)).create_checkpoint()
    for v in range(5):
        (path / "_delta_log" / f"{v:020d}.json").unlink()
    _age(path)
    state = tree_state(path)
    with pytest.raises(VacuumRefused) as info:
        vacuum(DeltaTable(str(path)), mode="lite", **RETAIN_NOTHING)
    assert info.value.problem == (
        "VACUUM LITE needs every commit since version 0 or since the last vacuum, but the log starts at version 5 "
        "(older commits were cleaned up) and there is no _last_vacuum_info; run a FULL vacuum once (it lists "
        "storage and records where LITE can start next time)"
    )
    assert tree_state(path) == state
    full = vacuum(DeltaTable(str(path)), **RETAIN_NOTHING)
    assert full.objects_deleted == 11
    # the newest commit of the snapshot it planned on (its own START and END remove nothing)
    assert json.loads((path / LAST_VACUUM_INFO_PATH).read_text()) == {"latestCommitVersionOutsideOfRetentionWindow": 11}
    deltalake.write_deltalake(str(path), pa.table({"id": pa.array([99], pa.int64())}), mode="overwrite")
    _age(path)
    lite = vacuum(DeltaTable(str(path)), mode="lite", **RETAIN_NOTHING)
    assert (lite.mode, lite.eligible_start_commit_version, lite.eligible_end_commit_version) == ("LITE", 12, 14)
    assert lite.objects_deleted == 1 and len(_files(path)) == 1
    # the progress went back to an old version: the commits after it are gone, so LITE refuses again
    (path / LAST_VACUUM_INFO_PATH).write_text('{"latestCommitVersionOutsideOfRetentionWindow":2}\n')
    # (delta-rs' own commit above cleaned up the 30-day-old log below its checkpoint)
    earliest = min(int(p.stem) for p in (path / "_delta_log").glob("*.json"))
    assert earliest > 3
    with pytest.raises(VacuumRefused, match=rf"after version 2 .* now starts at version {earliest}"):
        vacuum(DeltaTable(str(path)), mode="lite", **RETAIN_NOTHING)


def test_lite_reads_only_the_expired_commits_since_the_last_vacuum(tmp_path: Path) -> None:
    path = _long_history(tmp_path / "t", 4)
    _age(path)
    first = vacuum(DeltaTable(str(path)), mode="lite", **RETAIN_NOTHING, dry_run=True)
    assert (first.eligible_start_commit_version, first.eligible_end_commit_version) == (0, 3)
    assert first.files_and_dirs_present_before_delete == 3 and len(first.files_to_delete) == 3
    assert not (path / LAST_VACUUM_INFO_PATH).exists()
    real = vacuum(DeltaTable(str(path)), mode="lite", **RETAIN_NOTHING)
    assert real.objects_deleted == 3
    again = vacuum(DeltaTable(str(path)), mode="lite", **RETAIN_NOTHING)
    assert (again.eligible_start_commit_version, again.eligible_end_commit_version) == (4, 5)
    assert (again.num_files_to_delete, again.objects_deleted) == (0, 0)
    info = (path / LAST_VACUUM_INFO_PATH).read_bytes()
    assert info == b'{"latestCommitVersionOutsideOfRetentionWindow":5}\n'
    # with the default week only the aged commits 0..3 are expired, all read already: nothing, and no going back
    default = vacuum(DeltaTable(str(path)), mode="lite")
    assert (default.eligible_start_commit_version, default.objects_deleted) == (None, 0)
    assert (path / LAST_VACUUM_INFO_PATH).read_bytes() == info


# -- commits, failures and concurrency ----------------------------------------------------------------------------


def test_no_log_entries_when_asked(tmp_path: Path) -> None:
    path = _delta_rs_table(tmp_path / "t")
    _age(path)
    stats = vacuum(DeltaTable(str(path)), **RETAIN_NOTHING, commit_log_entries=False)
    assert (stats.objects_deleted, stats.committed_versions) == (2, ())
    assert deltalake.DeltaTable(str(path)).version() == 2


def test_a_file_that_cannot_be_deleted_ends_failed(tmp_path: Path) -> None:
    path = _delta_rs_table(tmp_path / "t")
    _age(path)
    victim = sorted(_files(path) - {u[len(str(path)) + 1 :] for u in deltalake.DeltaTable(str(path)).file_uris()})[0]

    def swap(event: Any) -> None:
        # after listing, the old file is replaced by a directory: unlink fails with EISDIR
        if event.phase == "listing" and (path / victim).is_file():
            (path / victim).unlink()
            (path / victim).mkdir()

    with pytest.raises(StorageError) as info:
        vacuum(DeltaTable(str(path)), **RETAIN_NOTHING, progress=swap, max_concurrent_tasks=1)
    assert info.value.problem.startswith(
        f"VACUUM deleted 1 of 2 files and directories; 1 files could not be deleted (first: {victim}: "
    )
    (end,) = _commit(path, 4)
    assert end["commitInfo"]["operation"] == "VACUUM END"
    assert end["commitInfo"]["operationParameters"] == {"status": "FAILED"}
    assert not (path / LAST_VACUUM_INFO_PATH).exists()


def test_a_file_re_added_after_planning_is_kept(tmp_path: Path) -> None:
    path = _delta_rs_table(tmp_path / "t")
    _age(path)
    table = DeltaTable(str(path))
    expired = sorted(_files(path) - {u[len(str(path)) + 1 :] for u in deltalake.DeltaTable(str(path)).file_uris()})

    def restore(event: Any) -> None:
        if event.phase == "listing" and DeltaTable(str(path)).latest_version() == 2:
            txn = DeltaTable(str(path)).transaction()
            txn.add({"path": quote(expired[0]), "size": 1, "partitionValues": {"p": "x y"}, "dataChange": True})
            txn.commit("RESTORE", {}, {})

    stats = vacuum(table, **RETAIN_NOTHING, progress=restore, max_concurrent_tasks=1)
    assert stats.committed_versions == (4, 5)
    assert stats.objects_deleted == 1
    assert (path / expired[0]).exists() and not (path / expired[1]).exists()


# -- bad input ----------------------------------------------------------------------------------------------------


def test_not_a_table_and_unsupported_writer_features_delete_nothing(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "part-0.parquet").write_bytes(b"x")
    _age(plain)
    state = tree_state(plain)
    with pytest.raises(TableNotFound, match="not a Delta table: no _delta_log directory"):
        vacuum(DeltaTable(str(plain)), **RETAIN_NOTHING)
    assert tree_state(plain) == state
    iceberg = copy_table("delta-golden/table-with-icebegCompatV2Enabled", tmp_path / "iceberg")
    _age(iceberg)
    state = tree_state(iceberg)
    with pytest.raises(ProtocolNotSupported, match="unsupported writer feature 'icebergCompatV2'"):
        vacuum(DeltaTable(str(iceberg)), **RETAIN_NOTHING)
    assert tree_state(iceberg) == state


def test_vacuum_protocol_check_feature_is_supported(tmp_path: Path) -> None:
    path = copy_table("delta-golden/basic-with-vacuum-protocol-check-feature", tmp_path / "t")
    _age(path)
    stats = vacuum(DeltaTable(str(path)), **RETAIN_NOTHING)
    assert stats.objects_deleted == 0 and len(_files(path)) == 2


# -- pure pieces -----------------------------------------------------------------------------------------------


def test_hidden_rule_and_path_normalisation() -> None:
    rule = HiddenRule(("_p=", "p="), iceberg_metadata_hidden=False)
    names = ("_delta_log", ".x.crc", "_SUCCESS", "_change_data", "_delta_index", "_p=1", "p=1", "part-0", "metadata")
    assert [rule.is_hidden(n) for n in names] == [True, True, True, False, False, False, False, False, False]
    assert HiddenRule((), iceberg_metadata_hidden=True).is_hidden("metadata")
    assert rule.is_hidden_path("p=1/_tmp/x") and not rule.is_hidden_path("_change_data/_p=1/x")
    paths = ("a/./b", "a//b", "a/../b", "../a", "a/../..", "", "a/b", ".a/b")
    assert [normal_relative(p) for p in paths] == ["a/b", "a/b", "b", None, None, None, "a/b", ".a/b"]


def test_a_relative_dv_prefix_with_a_percent_keeps_both_readings(tmp_path: Path) -> None:
    """Spark joins a `u` prefix as written, delta-rs URL-decodes it: under either reading the file is kept."""
    path = tmp_path / "t"
    (path / "_delta_log").mkdir(parents=True)
    encoded_uuid = "ez<lZtr+[-FjEr]9gKyA"  # from delta-kernel-defaults/basic-dv-with-checkpoint
    literal = Path(dv_absolute_path(str(path), "u", "p%20q" + encoded_uuid))
    decoded = path / "p q" / literal.name
    orphan = path / "p%20q" / "deletion_vector_00000000-0000-0000-0000-000000000000.bin"
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    dv = {
        "storageType": "u",
        "pathOrInlineDv": "p%20q" + encoded_uuid,
        "offset": 1,
        "sizeInBytes": 10,
        "cardinality": 1,
    }
    actions = [
        {
            "protocol": {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": ["deletionVectors"],
                "writerFeatures": ["deletionVectors"],
            }
        },
        {
            "metaData": {
                "id": "x",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": [],
                "configuration": {},
            }
        },
        {
            "add": {
                "path": "part-0.parquet",
                "partitionValues": {},
                "size": 1,
                "modificationTime": 0,
                "dataChange": True,
                "stats": '{"numRecords":2}',
                "deletionVector": dv,
            }
        },
    ]
    (path / "_delta_log" / f"{0:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    for f in (path / "part-0.parquet", literal, decoded, orphan):
        f.parent.mkdir(exist_ok=True)
        f.write_bytes(b"x")
    _age(path)
    stats = vacuum(DeltaTable(str(path)), **RETAIN_NOTHING)
    assert stats.objects_deleted == 1 and not orphan.exists()
    assert literal.parent.name == "p%20q" and literal.exists() and decoded.exists()


def test_the_generic_fsspec_branch_on_memory_storage() -> None:
    """Stores without a listing of their own (here memory://) go through fsspec's ls and rm_file."""
    fs = fsspec.filesystem("memory")
    source = CORPUS / "delta-golden/snapshot-repartitioned"
    root = f"/vacuum-{uuid.uuid4().hex}/t"
    for f in source.rglob("*"):
        if f.is_file():
            fs.pipe_file(f"{root}/{f.relative_to(source)}", f.read_bytes())
    time.sleep(0.01)  # memory:// stamps files with their creation time; the horizon must be after it
    try:
        dry = vacuum(DeltaTable(f"memory://{root}"), **RETAIN_NOTHING, dry_run=True)
        expected = sorted(_files(source) - _files(CORPUS / "delta-golden/snapshot-vacuumed"))
        assert [f["path"] for f in dry.files_to_delete] == expected
        stats = vacuum(DeltaTable(f"memory://{root}"), **RETAIN_NOTHING)
        assert (stats.objects_deleted, stats.committed_versions, stats.dirs_present_before_delete) == (9, (6, 7), 1)
        left = {p[len(root) + 1 :] for p in fs.find(root) if "/_delta_log/" not in p}
        assert {p for p in left if not p.startswith(".")} == _files(CORPUS / "delta-golden/snapshot-vacuumed")
    finally:
        fs.rm(root.rsplit("/", 1)[0], recursive=True)
