"""`deltalite vacuum` as a subprocess: JSON consistent with the commits, a readable summary, a dry run that lists
what it would delete, and every bad input as one line on stderr, exit 2, nothing deleted."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa

from tests.helpers import CORPUS, cli_failure, copy_table, run_cli, tree_state

OLD_NS = (time.time_ns() - 30 * 24 * 3_600_000 * 1_000_000,) * 2
ICEBERG = CORPUS / "delta-golden/table-with-icebegCompatV2Enabled"  # writer feature icebergCompatV2 (not writable)
STATS_KEYS = {
    "isDryRun",
    "mode",
    "specifiedRetentionMillis",
    "defaultRetentionMillis",
    "minRetainedTimestamp",
    "dirsPresentBeforeDelete",
    "filesAndDirsPresentBeforeDelete",
    "numFilesToDelete",
    "sizeOfDataToDelete",
    "objectsDeleted",
    "timeTakenToIdentifyEligibleFiles",
    "timeTakenForDelete",
    "latestCommitVersion",
    "filesToDelete",
    "dirsToDelete",
    "eligibleStartCommitVersion",
    "eligibleEndCommitVersion",
    "numPartitionColumns",
    "committedVersions",
    "vacuumStartTime",
    "vacuumEndTime",
    "executor",
    "filesAlreadyGone",
    "numFilesDeferred",
}


def _run(*args: Any) -> subprocess.CompletedProcess:
    return run_cli("vacuum", *args)


def _failed(*args: Any) -> str:
    return cli_failure("vacuum", *args)


def _table(path: Path) -> Path:
    """Three overwrites of one partition (two expired files), then everything made 30 days old."""
    for k in range(3):
        data = pa.table({"id": pa.array([k], pa.int64()), "p": ["x y"]})
        deltalake.write_deltalake(str(path), data, mode="overwrite", partition_by=["p"])
    old_ms = OLD_NS[0] // 1_000_000
    for log in (path / "_delta_log").glob("*.json"):
        actions = [json.loads(line) for line in log.read_text().splitlines()]
        for a in actions:
            if "remove" in a:
                a["remove"]["deletionTimestamp"] = old_ms
        log.write_text("".join(json.dumps(a) + "\n" for a in actions))
    for dirpath, dirs, names in os.walk(path):
        for name in dirs + names:
            os.utime(os.path.join(dirpath, name), ns=OLD_NS)
    return path


def _expired(path: Path) -> list[str]:
    live = {u[len(str(path)) + 1 :] for u in deltalake.DeltaTable(str(path)).file_uris()}
    files = {str(f.relative_to(path)) for f in path.glob("p=*/*.parquet")}
    return sorted(files - live)


def test_json_is_one_document_consistent_with_the_commits(tmp_path: Path) -> None:
    path = _table(tmp_path / "t")
    expired = _expired(path)
    size = sum((path / e).stat().st_size for e in expired)
    out = _run("--json", path)
    assert out.returncode == 0 and out.stderr == ""
    assert out.stdout.count("\n") == 1
    doc = json.loads(out.stdout)
    assert set(doc) == STATS_KEYS
    assert doc["sizeOfDataToDelete"] == size
    assert (doc["mode"], doc["isDryRun"], doc["objectsDeleted"], doc["numFilesToDelete"]) == ("FULL", False, 2, 2)
    assert (doc["specifiedRetentionMillis"], doc["defaultRetentionMillis"]) == (None, 604_800_000)
    assert (doc["latestCommitVersion"], doc["committedVersions"], doc["executor"]) == (2, [3, 4], "local")
    assert (doc["dirsPresentBeforeDelete"], doc["filesAndDirsPresentBeforeDelete"]) == (2, 4)
    assert (doc["filesToDelete"], doc["dirsToDelete"]) == (None, None)
    assert not any((path / e).exists() for e in expired)
    start = json.loads((path / "_delta_log" / f"{3:020d}.json").read_text())["commitInfo"]
    end = json.loads((path / "_delta_log" / f"{4:020d}.json").read_text())["commitInfo"]
    assert start["operationMetrics"] == {"numFilesToDelete": "2", "sizeOfDataToDelete": str(size)}
    assert start["operationParameters"] == {"retentionCheckEnabled": True, "defaultRetentionMillis": 604_800_000}
    assert end["operationMetrics"] == {"numDeletedFiles": "2", "numVacuumedDirectories": "2"}


def test_dry_run_lists_the_files_with_sizes_and_writes_nothing(tmp_path: Path) -> None:
    path = _table(tmp_path / "t")
    expired = _expired(path)
    state = tree_state(path)
    out = _run("--dry-run", "--json", path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert tree_state(path) == state
    assert doc["filesToDelete"] == [{"path": e, "size": (path / e).stat().st_size} for e in expired]
    assert (doc["isDryRun"], doc["committedVersions"], doc["dirsToDelete"]) == (True, [], [])
    human = _run("--dry-run", path)
    lines = human.stdout.splitlines()
    assert lines[0] == (
        f"vacuum    FULL: would delete 2 files and directories ({doc['sizeOfDataToDelete']} B) of version 2"
    )
    assert lines[1].startswith("  retention 168 hours (table: 168 hours); unreferenced files modified before ")
    assert lines[2].startswith("  listed 4 files and directories in 2 directories (")
    assert lines[3:5] == [f"  {(path / e).stat().st_size:>12}  {e}" for e in expired]
    assert lines[5:] == ["  nothing deleted or committed (dry run)"]
    assert tree_state(path) == state


def test_human_summary_of_a_lite_run(tmp_path: Path) -> None:
    path = _table(tmp_path / "t")
    out = _run("--mode", "lite", path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("vacuum    LITE: deleted 2 files and directories (")
    assert lines[2:] == [
        "  read commits 0..2",
        "  committed VACUUM START (version 3) and VACUUM END (version 4), executor local",
    ]
    again = _run("--mode", "lite", "--no-commit-log-entries", path)
    assert again.stdout.splitlines()[2:] == [
        "  no commits expired since the last vacuum",
        "  no log entries committed, executor local",
    ]


def test_bad_inputs_are_one_line_exit_2_and_delete_nothing(tmp_path: Path) -> None:
    path = _table(tmp_path / "t")
    state = tree_state(path)
    assert _failed("--retention-hours", "-1", path) == (
        f"deltalite: error: table {path}: retention_hours must not be negative, got -1"
    )
    line = _failed("--retention-hours", "24", path)
    assert line.startswith(
        f"deltalite: error: table {path}: a retention of 24 hours is shorter than the table's "
        "delta.deletedFileRetentionDuration of 168 hours: "
    )
    assert line.endswith(
        "turn the check off with enforce_retention_duration=False (CLI: --no-enforce-retention-duration)"
    )
    assert _failed("--retention-hours", "soon", path) == (
        "deltalite: error: argument --retention-hours: not a number of hours: 'soon'"
    )
    assert _failed("--spark-master", "local[2]", path) == "deltalite: error: --spark-master needs --executor spark"
    assert _failed("--max-concurrent-tasks", "0", path) == (
        f"deltalite: error: table {path}: max_concurrent_tasks must be at least 1, got 0"
    )
    assert tree_state(path) == state

    missing = tmp_path / "missing"
    assert _failed("--json", missing) == f"deltalite: error: table {missing}: path does not exist"
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "part-0.parquet").write_bytes(b"x")
    os.utime(plain / "part-0.parquet", ns=OLD_NS)
    plain_state = tree_state(plain)
    assert _failed(plain) == f"deltalite: error: table {plain}: not a Delta table: no _delta_log directory"
    assert tree_state(plain) == plain_state

    iceberg = copy_table(ICEBERG, tmp_path / "iceberg")
    iceberg_state = tree_state(iceberg)
    line = _failed("--retention-hours", "0", "--no-enforce-retention-duration", iceberg)
    assert line.startswith(f"deltalite: error: table {iceberg}: unsupported writer feature 'icebergCompatV2'")
    assert tree_state(iceberg) == iceberg_state

    cleaned = _table(tmp_path / "cleaned")
    deltalake.DeltaTable(str(cleaned)).create_checkpoint()
    (cleaned / "_delta_log" / f"{0:020d}.json").unlink()
    cleaned_state = tree_state(cleaned)
    line = _failed("--mode", "lite", cleaned)
    assert line == (
        f"deltalite: error: table {cleaned}: VACUUM LITE needs every commit since version 0 or since the last "
        "vacuum, but the log starts at version 1 (older commits were cleaned up) and there is no _last_vacuum_info; "
        "run a FULL vacuum once (it lists storage and records where LITE can start next time)"
    )
    assert tree_state(cleaned) == cleaned_state
