"""Log cleanup: exactly which files go (commits, .crc, checkpoints, compactions, sidecars), which checkpoint is kept,
that every retained version still loads (for us and for delta-rs 1.6.3), and the cases that must delete nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine import InvalidTableProperty, ProtocolNotSupported, VersionNotFound
from airflow_provider_deltalite.engine.checkpoint_writer import write_checkpoint
from airflow_provider_deltalite.engine.log_cleanup import CleanupResult, cleanup_cutoff, cleanup_expired_logs
from tests.conformance.corpus import deltars_paths, normalise_path
from tests.helpers import copy_table, tree_state

DAY = 86_400_000
NOW = 1_790_000_000_000  # 2026-09-21T14:13:20Z
CUTOFF = 1_787_356_800_000  # NOW - 30 days = 2026-08-22T14:13:20Z, truncated to 2026-08-22T00:00:00Z
LOG = "_delta_log"


@pytest.fixture(scope="module")
def deltalake() -> Any:
    import deltalake

    return deltalake


def commit(version: int) -> str:
    return f"{LOG}/{version:020d}.json"


def set_mtime(path: Path, ms: int) -> None:
    os.utime(path, ns=(ms * 1_000_000, ms * 1_000_000))


def our_paths(table: Path, version: int) -> set[str]:
    snap = DeltaTable(str(table)).snapshot(version=version)
    return {normalise_path(p, table) for p in snap.raw_files.column("path").to_pylist()}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, deltalake: Any) -> Path:
    """A delta-rs table with commits 0..11 (partitioned, one overwrite), and our checkpoints at 5 and 10."""
    path = tmp_path_factory.mktemp("cleanup") / "t"
    for i in range(12):
        batch = pa.table({"id": pa.array([i], pa.int64()), "part": [f"p{i % 2}"]})
        mode = "overwrite" if i == 6 else "append"
        deltalake.write_deltalake(str(path), batch, partition_by=["part"], mode=mode)
    table = DeltaTable(str(path))
    write_checkpoint(table.snapshot(version=5), now_ms=NOW)
    write_checkpoint(table.snapshot(version=10), now_ms=NOW)
    return path


def fresh_copy(template: Path, dest: Path, old_versions: range) -> Path:
    """Copy the template; commits in ``old_versions`` get mtimes before the cutoff, the rest yesterday's."""
    path = copy_table(template, dest)
    for version in range(12):
        ms = NOW - 40 * DAY + version * 1000 if version in old_versions else NOW - DAY + version
        set_mtime(path / commit(version), ms)
    return path


def test_cutoff_is_truncated_to_midnight_utc() -> None:
    assert cleanup_cutoff(NOW, 30 * DAY) == CUTOFF
    assert cleanup_cutoff(CUTOFF, 0) == CUTOFF
    assert cleanup_cutoff(CUTOFF - 1, 0) == CUTOFF - DAY


def test_keeps_newest_checkpoint_at_or_before_the_newest_expired_commit(
    template: Path, tmp_path: Path, deltalake: Any
) -> None:
    path = fresh_copy(template, tmp_path / "t", range(8))  # commits 0..7 expired: checkpoint 5 is the newest <= 7
    expected = {v: deltars_paths(path, v) for v in range(5, 12)}
    result = cleanup_expired_logs(DeltaTable(str(path)).snapshot(), now_ms=NOW)
    assert result == CleanupResult(CUTOFF, 5, tuple(commit(v) for v in range(5)), False, True)
    assert result.to_dict() == {
        "cutoffTimestamp": CUTOFF,
        "checkpointVersion": 5,
        "filesDeleted": [commit(v) for v in range(5)],
        "numFilesDeleted": 5,
        "isDryRun": False,
        "enabled": True,
    }
    remaining = sorted(os.listdir(path / LOG))
    assert remaining == [
        "00000000000000000005.checkpoint.parquet",
        *[f"{v:020d}.json" for v in range(5, 10)],
        "00000000000000000010.checkpoint.parquet",
        *[f"{v:020d}.json" for v in range(10, 12)],
        "_last_checkpoint",
    ]
    for version, theirs in expected.items():
        assert theirs is not None and our_paths(path, version) == theirs
        assert deltars_paths(path, version) == theirs
    with pytest.raises(VersionNotFound, match="version 4 cannot be reconstructed"):
        DeltaTable(str(path)).snapshot(version=4)


def test_everything_expired_keeps_the_newest_checkpoint(template: Path, tmp_path: Path, deltalake: Any) -> None:
    path = fresh_copy(template, tmp_path / "t", range(12))
    expected = {v: deltars_paths(path, v) for v in (10, 11)}
    result = cleanup_expired_logs(DeltaTable(str(path)).snapshot(), now_ms=NOW)
    deleted = [commit(v) for v in range(5)] + [f"{LOG}/00000000000000000005.checkpoint.parquet"]
    deleted += [commit(v) for v in range(5, 10)]
    assert (result.checkpoint_version, list(result.files_deleted)) == (10, deleted)
    assert sorted(os.listdir(path / LOG)) == [
        "00000000000000000010.checkpoint.parquet",
        "00000000000000000010.json",
        "00000000000000000011.json",
        "_last_checkpoint",
    ]
    for version, theirs in expected.items():
        assert our_paths(path, version) == theirs == deltars_paths(path, version)
    # a second run finds nothing more to do
    assert cleanup_expired_logs(DeltaTable(str(path)).snapshot(), now_ms=NOW).files_deleted == ()


def test_commit_after_the_truncated_cutoff_is_not_expired(template: Path, tmp_path: Path) -> None:
    path = fresh_copy(template, tmp_path / "t", range(12))
    for version in range(12):  # 0..9 at or before midnight, 10 and 11 one ms after it (still older than now - 30d)
        set_mtime(path / commit(version), CUTOFF - 1000 + version if version < 10 else CUTOFF + version - 9)
    result = cleanup_expired_logs(DeltaTable(str(path)).snapshot(), now_ms=NOW)
    assert result.checkpoint_version == 5
    assert list(result.files_deleted) == [commit(v) for v in range(5)]


def test_file_times_are_made_monotonic_first(template: Path, tmp_path: Path) -> None:
    path = fresh_copy(template, tmp_path / "t", range(12))
    set_mtime(path / commit(7), NOW - DAY)  # a newer time at 7 holds back 8..11 too, old as their files look
    result = cleanup_expired_logs(DeltaTable(str(path)).snapshot(), now_ms=NOW)
    assert result.checkpoint_version == 5
    assert list(result.files_deleted) == [commit(v) for v in range(5)]


def test_dry_run_lists_and_deletes_nothing(template: Path, tmp_path: Path) -> None:
    path = fresh_copy(template, tmp_path / "t", range(8))
    before = tree_state(path)
    result = cleanup_expired_logs(DeltaTable(str(path)).snapshot(), now_ms=NOW, dry_run=True)
    assert (result.is_dry_run, result.checkpoint_version) == (True, 5)
    assert list(result.files_deleted) == [commit(v) for v in range(5)]
    assert tree_state(path) == before


def test_nothing_deleted_when_no_checkpoint_qualifies(template: Path, tmp_path: Path) -> None:
    path = fresh_copy(template, tmp_path / "t", range(5))  # newest expired commit 4: no checkpoint at or before it
    before = tree_state(path)
    result = cleanup_expired_logs(DeltaTable(str(path)).snapshot(), now_ms=NOW)
    assert result == CleanupResult(CUTOFF, None, (), False, True)
    assert tree_state(path) == before
    recent = fresh_copy(template, tmp_path / "u", range(0))  # nothing expired at all
    before = tree_state(recent)
    assert cleanup_expired_logs(DeltaTable(str(recent)).snapshot(), now_ms=NOW).files_deleted == ()
    assert tree_state(recent) == before


def test_nothing_deleted_when_cleanup_is_disabled(tmp_path: Path, deltalake: Any) -> None:
    path = tmp_path / "t"
    config = {"delta.enableExpiredLogCleanup": "false"}
    for i in range(3):
        batch = pa.table({"id": pa.array([i], pa.int64())})
        deltalake.write_deltalake(str(path), batch, mode="append", configuration=config if i == 0 else None)
    write_checkpoint(DeltaTable(str(path)).snapshot(), now_ms=NOW)
    for version in range(3):
        set_mtime(path / commit(version), NOW - 400 * DAY)
    before = tree_state(path)
    result = cleanup_expired_logs(DeltaTable(str(path)).snapshot(), now_ms=NOW)
    assert result == CleanupResult(CUTOFF, None, (), False, False)
    assert tree_state(path) == before


def test_damaged_newest_candidate_falls_back_to_an_intact_checkpoint(template: Path, tmp_path: Path) -> None:
    path = fresh_copy(template, tmp_path / "t", range(12))
    checkpoint = path / LOG / "00000000000000000010.checkpoint.parquet"
    checkpoint.write_bytes(checkpoint.read_bytes()[:500])  # truncated: no footer
    result = cleanup_expired_logs(DeltaTable(str(path)).snapshot(), now_ms=NOW)
    assert result.checkpoint_version == 5
    assert list(result.files_deleted) == [commit(v) for v in range(5)]
    for version in range(5, 12):  # 10 and 11 load by falling back past the damaged checkpoint
        assert DeltaTable(str(path)).snapshot(version=version).version == version


def test_crc_and_compacted_files_below_the_checkpoint_go(tmp_path: Path, deltalake: Any) -> None:
    path = copy_table("kernel-rs-data/compacted-log-files-table", tmp_path / "t")  # 0..25, compactions 0-5, 6-10, 6-15
    for version in range(26):
        (path / LOG / f"{version:020d}.crc").write_text('{"tableSizeBytes":0}')
    write_checkpoint(DeltaTable(str(path)).snapshot(version=10), now_ms=NOW)
    for f in (path / LOG).iterdir():
        set_mtime(f, NOW - 60 * DAY)
    expected = {v: our_paths(path, v) for v in range(10, 26)}
    result = cleanup_expired_logs(DeltaTable(str(path)).snapshot(), now_ms=NOW)
    assert result.checkpoint_version == 10
    assert sorted(result.files_deleted) == sorted(
        [commit(v) for v in range(10)]
        + [f"{LOG}/{v:020d}.crc" for v in range(10)]
        + [
            f"{LOG}/00000000000000000000.00000000000000000005.compacted.json",
            f"{LOG}/00000000000000000006.00000000000000000010.compacted.json",
            f"{LOG}/00000000000000000006.00000000000000000015.compacted.json",
        ]
    )
    assert (path / LOG / "00000000000000000010.crc").exists() and (path / LOG / commit(10).split("/")[1]).exists()
    for version, paths in expected.items():
        assert our_paths(path, version) == paths


def _sidecar_refs(checkpoint: Path) -> set[str]:
    rows = pq.read_table(checkpoint, columns=["sidecar"]).column("sidecar").to_pylist()
    return {r["path"] for r in rows if r is not None}


def test_unreferenced_old_sidecars_go_with_their_checkpoints(tmp_path: Path, deltalake: Any) -> None:
    path = copy_table("kernel-rs-data/v2-checkpoints-parquet-with-sidecars", tmp_path / "t")  # UUID cps at 1..6
    log = path / LOG
    for version in range(7):  # 0..4 expired: the checkpoint at 4 is kept
        set_mtime(log / f"{version:020d}.json", NOW - 40 * DAY + version if version <= 4 else NOW - DAY)
    sidecars = log / "_sidecars"
    (sidecars / "orphan-old.parquet").write_bytes(b"x")
    (sidecars / "orphan-new.parquet").write_bytes(b"x")
    for f in sidecars.iterdir():
        set_mtime(f, NOW - 3600_000 if f.name == "orphan-new.parquet" else NOW - 2 * DAY)
    checkpoints = {int(f.name[:20]): f for f in log.glob("*.checkpoint.*.parquet")}
    kept_refs = set().union(*(_sidecar_refs(checkpoints[v]) for v in (4, 5, 6)))
    gone_refs = set().union(*(_sidecar_refs(checkpoints[v]) for v in (1, 2, 3))) - kept_refs
    assert (len(kept_refs), len(gone_refs)) == (7, 5)
    expected_paths = {v: deltars_paths(path, v) for v in (4, 5, 6)}

    result = cleanup_expired_logs(DeltaTable(str(path)).snapshot(), now_ms=NOW)
    assert result.checkpoint_version == 4
    expected = [commit(v) for v in range(4)] + [f"{LOG}/{v:020d}.crc" for v in range(4)]
    expected += [f"{LOG}/{checkpoints[v].name}" for v in (1, 2, 3)]
    expected += [f"{LOG}/_sidecars/{name}" for name in gone_refs | {"orphan-old.parquet"}]
    assert sorted(result.files_deleted) == sorted(expected)
    # hidden entries (Hadoop's `.<name>.crc` companions here) are never sidecars and never touched
    assert {f.name for f in sidecars.iterdir() if not f.name.startswith(".")} == kept_refs | {"orphan-new.parquet"}
    assert len([f for f in sidecars.iterdir() if f.name.startswith(".")]) == 12
    for version, theirs in expected_paths.items():
        assert our_paths(path, version) == theirs == deltars_paths(path, version)


def _ict_table(root: Path, checkpoints: tuple[int, ...]) -> Path:
    """A log-only table with in-commit timestamps one day apart (commits 0..5), checkpointed at ``checkpoints``."""
    base = CUTOFF - 3 * DAY - 1000  # ICTs of 0..3 at or before the cutoff, 4 and 5 after it
    id_field = {"name": "id", "type": "long", "nullable": True, "metadata": {}}
    schema = json.dumps({"type": "struct", "fields": [id_field]})
    log = root / LOG
    log.mkdir(parents=True)
    for version in range(6):
        actions: list[dict] = [{"commitInfo": {"inCommitTimestamp": base + version * DAY, "operation": "WRITE"}}]
        if version == 0:
            actions.append(
                {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["inCommitTimestamp"]}}
            )
            config = {"delta.enableInCommitTimestamps": "true"}
            actions.append(
                {
                    "metaData": {
                        "id": "x",
                        "format": {"provider": "parquet", "options": {}},
                        "schemaString": schema,
                        "partitionColumns": [],
                        "configuration": config,
                    }
                }
            )
        actions.append(
            {
                "add": {
                    "path": f"f{version}.parquet",
                    "partitionValues": {},
                    "size": 1,
                    "modificationTime": 0,
                    "dataChange": True,
                }
            }
        )
        (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    for version in checkpoints:
        write_checkpoint(DeltaTable(str(root)).snapshot(version=version), now_ms=NOW)
    return root


def test_in_commit_timestamps_decide_instead_of_file_times(tmp_path: Path) -> None:
    fresh = _ict_table(tmp_path / "fresh", (3, 5))  # files written just now; ICTs of 0..3 at or before the cutoff
    result = cleanup_expired_logs(DeltaTable(str(fresh)).snapshot(), now_ms=NOW)
    assert result.checkpoint_version == 3
    assert list(result.files_deleted) == [commit(v) for v in range(3)]

    stale = _ict_table(tmp_path / "stale", (3, 5))
    for version in range(6):  # file times say everything is expired; the ICTs of 4 and 5 say otherwise
        set_mtime(stale / commit(version), NOW - 400 * DAY)
    result = cleanup_expired_logs(DeltaTable(str(stale)).snapshot(), now_ms=NOW)
    assert result.checkpoint_version == 3
    assert list(result.files_deleted) == [commit(v) for v in range(3)]
    assert DeltaTable(str(stale)).snapshot(version=3).num_files == 4


@pytest.mark.parametrize(
    ("key", "value"),
    [("delta.logRetentionDuration", "forever"), ("delta.enableExpiredLogCleanup", "sometimes")],
)
def test_bad_property_raises_and_deletes_nothing(template: Path, tmp_path: Path, key: str, value: str) -> None:
    path = fresh_copy(template, tmp_path / "t", range(12))
    line = json.dumps({"metaData": {**DeltaTable(str(path)).snapshot().metadata, "configuration": {key: value}}})
    (path / LOG / "00000000000000000012.json").write_text(line + "\n")
    before = tree_state(path)
    with pytest.raises(InvalidTableProperty) as info:
        cleanup_expired_logs(DeltaTable(str(path)).snapshot(), now_ms=NOW)
    assert key in str(info.value) and str(info.value).startswith(f"table {path}: ")
    assert tree_state(path) == before


def test_checkpoint_protection_is_refused(tmp_path: Path) -> None:
    schema = json.dumps({"type": "struct", "fields": []})
    actions = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["checkpointProtection"]}},
        {
            "metaData": {
                "id": "x",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": schema,
                "partitionColumns": [],
                "configuration": {},
            }
        },
    ]
    (tmp_path / LOG).mkdir()
    (tmp_path / LOG / commit(0).split("/")[1]).write_text("".join(json.dumps(a) + "\n" for a in actions))
    before = tree_state(tmp_path)
    with pytest.raises(ProtocolNotSupported, match="checkpointProtection"):
        cleanup_expired_logs(DeltaTable(str(tmp_path)).snapshot(), now_ms=NOW)
    assert tree_state(tmp_path) == before


def test_day_old_temporary_files_of_killed_writers_go_and_younger_ones_stay(template: Path, tmp_path: Path) -> None:
    path = fresh_copy(template, tmp_path / "t", range(0))  # nothing expired: only the temporary files are at stake
    log_dir = path / LOG
    ours = f".{1:020d}.json.{'a' * 32}.tmp"  # deltalite's create-only write, killed before the link
    hadoop = f".{2:020d}.json.{'12345678-abcd-ef01-2345-6789abcdef01'}.tmp"  # Spark's HDFSLogStore, same fate
    young = f".{3:020d}.json.{'b' * 32}.tmp"
    other = ".notes.tmp"  # hidden, but not a writer's temporary file: never ours to delete
    for name, age in ((ours, DAY + 1), (hadoop, 3 * DAY), (young, DAY - 60_000), (other, 10 * DAY)):
        (log_dir / name).write_bytes(b"{}")
        set_mtime(log_dir / name, NOW - age)
    (log_dir / "_sidecars").mkdir()
    sidecar_tmp = f"._sidecar.parquet.{'c' * 32}.tmp"
    (log_dir / "_sidecars" / sidecar_tmp).write_bytes(b"x")
    set_mtime(log_dir / "_sidecars" / sidecar_tmp, NOW - 2 * DAY)
    expected = (f"{LOG}/{ours}", f"{LOG}/{hadoop}", f"{LOG}/_sidecars/{sidecar_tmp}")  # listing order

    before = tree_state(path)
    dry = cleanup_expired_logs(DeltaTable(str(path)).snapshot(), now_ms=NOW, dry_run=True)
    assert dry == CleanupResult(CUTOFF, None, expected, True, True)
    assert tree_state(path) == before

    result = cleanup_expired_logs(DeltaTable(str(path)).snapshot(), now_ms=NOW)
    assert result == CleanupResult(CUTOFF, None, expected, False, True)
    left = sorted(p.name for p in log_dir.iterdir() if p.name.startswith("."))
    assert left == sorted([young, other])
    assert not (log_dir / "_sidecars" / sidecar_tmp).exists()
