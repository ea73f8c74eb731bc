"""VACUUM's ``max_files_to_delete``: at most that many files per run, the oldest first, the rest counted and left for
the next run (whose LITE progress is not advanced past them)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

from airflow_provider_deltalite.engine.errors import InvalidArgument
from airflow_provider_deltalite.engine.table import Table
from airflow_provider_deltalite.maintenance.options import VacuumOptions
from airflow_provider_deltalite.maintenance.vacuum import vacuum
from airflow_provider_deltalite.maintenance.vacuum.lite import LAST_VACUUM_INFO_PATH
from tests.helpers import cli_failure, run_cli

DAY_MS = 24 * 3_600_000


def _table(path: Path) -> dict[str, int]:
    """Four overwrites (delta-rs): versions 1-3 each tombstone one file, dated 30, 10 and 20 days ago (in that
    order, so the log order is not the age order); plus a never-committed file last modified 40 days ago. Every
    file and commit is older than the 7-day retention. Returns each deletable file's age in days."""
    for k in range(4):
        deltalake.write_deltalake(str(path), pa.table({"id": pa.array([k], pa.int64())}), mode="overwrite")
    now = int(time.time() * 1000)
    ages = {}
    for version, days in zip((1, 2, 3), (30, 10, 20), strict=True):
        commit = path / "_delta_log" / f"{version:020d}.json"
        actions = [json.loads(line) for line in commit.read_text().splitlines()]
        (removed,) = [a["remove"] for a in actions if "remove" in a]
        removed["deletionTimestamp"] = now - days * DAY_MS
        commit.write_text("".join(json.dumps(a) + "\n" for a in actions))
        ages[removed["path"]] = days
    (path / "orphan.parquet").write_bytes(b"never committed")
    ages["orphan.parquet"] = 40
    old = (now - 40 * DAY_MS) / 1000
    for entry in [*path.glob("*.parquet"), *(path / "_delta_log").glob("*.json")]:
        os.utime(entry, (old, old))
    return ages


def test_a_run_deletes_the_oldest_files_and_counts_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "t"
    ages = _table(path)
    oldest_first = sorted(ages, key=lambda p: -ages[p])  # orphan (40), 30, 20, 10 days
    table = Table(str(path))
    dry = vacuum(table, max_files_to_delete=2, dry_run=True)
    assert dry.files_to_delete == [{"path": p, "size": (path / p).stat().st_size} for p in sorted(oldest_first[:2])]
    assert (dry.num_files_to_delete, dry.num_files_deferred) == (2, 2)

    stats = vacuum(table, max_files_to_delete=2)
    assert (stats.objects_deleted, stats.num_files_deferred) == (2, 2)
    assert sorted(p for p in ages if (path / p).exists()) == sorted(oldest_first[2:])
    # files were left: LITE's progress stays where it was, so a later LITE still sees their commits
    assert not (path / LAST_VACUUM_INFO_PATH).exists()

    stats = vacuum(table, max_files_to_delete=5)
    assert (stats.objects_deleted, stats.num_files_deferred) == (2, 0)
    assert not any((path / p).exists() for p in ages)
    assert (path / LAST_VACUUM_INFO_PATH).exists()
    assert deltalake.DeltaTable(str(path)).to_pyarrow_table().column("id").to_pylist() == [3]


def test_max_files_to_delete_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="max_files_to_delete must be a positive whole number, got 0"):
        VacuumOptions(max_files_to_delete=0)
    assert VacuumOptions.from_text({"max_files_to_delete": "7"}).max_files_to_delete == 7
    path = tmp_path / "t"
    _table(path)
    assert cli_failure("vacuum", path, "--max-files-to-delete", "-1") == (
        f"deltalite: error: table {path}: max_files_to_delete must be a positive whole number, got -1"
    )
    out = run_cli("vacuum", path, "--max-files-to-delete", "1", "--dry-run", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert (doc["numFilesToDelete"], doc["numFilesDeferred"]) == (1, 3)
    assert doc["filesToDelete"] == [{"path": "orphan.parquet", "size": len(b"never committed")}]


def test_directories_above_a_file_left_for_later_are_kept() -> None:
    from airflow_provider_deltalite.maintenance.vacuum.plan import VacuumPlan

    files = (("a/b/1.parquet", 10), ("a/b/2.parquet", 20), ("a/3.parquet", 30), ("c/d/4.parquet", 40))
    plan = VacuumPlan("FULL", files, ("a/b", "c/d", "a", "c"), 5, 9, None)
    cut = plan.without(["a/b/2.parquet"])
    # a/b still holds 2.parquet, so neither it nor a may go; c/d and c are emptied
    assert (cut.files, cut.dirs) == ((("a/b/1.parquet", 10), ("a/3.parquet", 30), ("c/d/4.parquet", 40)), ("c/d", "c"))
    assert plan.without([]) is plan
