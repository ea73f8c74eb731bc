"""How the `deltalite` CLI shows results: JSON documents, sizes, summaries and progress lines.

Light on purpose: every command prints through it, so it imports no engine module. The documents built from a
snapshot (describe, files) are in `cli/documents.py`.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_provider_deltalite.maintenance.wording import human_size

if TYPE_CHECKING:
    from airflow_provider_deltalite.maintenance.optimize_stats import OptimizeStats
    from airflow_provider_deltalite.maintenance.rewrites import OptimizeProgress
    from airflow_provider_deltalite.maintenance.vacuum import VacuumProgress
    from airflow_provider_deltalite.maintenance.vacuum.stats import VacuumStats

__all__ = [
    "change_line",
    "human_size",
    "json_default",
    "print_json",
    "print_rewrite_summary",
    "print_vacuum_summary",
    "progress_bar",
    "vacuum_progress",
]


def json_default(value: Any) -> Any:
    """JSON encoder fallback for values coming out of Arrow (dates, decimals, bytes)."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def print_json(doc: Any) -> None:
    """Exactly one JSON document on stdout."""
    sys.stdout.write(json.dumps(doc, default=json_default, ensure_ascii=False) + "\n")


def change_line(change: dict[str, Any]) -> str:
    """One readable line for a commit of `deltalite changes` / `watch` (a `CommitChange.to_dict()`)."""
    ts = change["timestamp"]
    when = datetime.fromtimestamp(ts / 1000, UTC).isoformat(timespec="seconds") if ts is not None else "-"
    line = f"{change['version']:>8}  {change['kind']:<11}  {change['operation'] or '-':<18}  {when}"
    if change["kind"] == "data":
        rows = "?" if change["added_rows"] is None else change["added_rows"]
        line += (
            f"  +{change['added_files']} files ({rows} rows, {human_size(change['added_bytes'])})"
            f"  -{change['removed_files']} files"
        )
    return line


def progress_bar(event: OptimizeProgress) -> None:
    """OPTIMIZE / Z-order progress on stderr, redrawn in place."""
    width = 30
    filled = width * event.bins_done // max(event.bins_total, 1)
    sys.stderr.write(
        f"\r[{'#' * filled}{'.' * (width - filled)}] {event.bins_done}/{event.bins_total} bins, "
        f"{human_size(event.bytes_done)} of {human_size(event.bytes_total)} rewritten"
    )
    sys.stderr.flush()


def vacuum_progress(event: VacuumProgress) -> None:
    """VACUUM progress on stderr, redrawn in place."""
    if event.phase == "listing":
        text = f"listing: {event.files:,} files in {event.done:,} directories, {event.rate:,.0f} files/s"
    else:
        text = f"deleting: {event.done}/{event.total} files"
    sys.stderr.write(f"\r{text}\x1b[K")
    sys.stderr.flush()


def print_rewrite_summary(stats: OptimizeStats, command: str, did: str, would: str) -> None:
    """The readable summary of OPTIMIZE or Z-order."""
    what = f"would {would}" if stats.dry_run else did
    print(
        f"{command:<9} {what} {stats.num_files_removed} files ({human_size(stats.files_removed.total_size)}) "
        f"in {stats.num_bins} bins across {stats.partitions_optimized} partitions"
    )
    if not stats.dry_run:
        print(f"  added {stats.num_files_added} files ({human_size(stats.files_added.total_size)})")
    print(
        f"  considered {stats.total_considered_files} files, skipped {stats.total_files_skipped}; "
        f"deletion vectors purged: {stats.num_deletion_vectors_removed}"
    )
    if stats.committed_version is None:
        print("  nothing committed" + (" (dry run)" if stats.dry_run else ""))
    else:
        versions = ", ".join(str(v) for v in stats.committed_versions)
        print(f"  committed version {versions} (read version {stats.read_version}), executor {stats.executor}")


def print_vacuum_summary(stats: VacuumStats) -> None:
    """The readable summary of VACUUM."""
    retention = stats.specified_retention_millis
    if retention is None:
        retention = stats.default_retention_millis
    horizon = datetime.fromtimestamp(stats.min_retained_timestamp / 1000, UTC).isoformat(timespec="seconds")
    what = "would delete" if stats.is_dry_run else "deleted"
    count = stats.num_files_to_delete if stats.is_dry_run else stats.objects_deleted
    print(
        f"vacuum    {stats.mode}: {what} {count} files and directories ({human_size(stats.size_of_data_to_delete)}) "
        f"of version {stats.latest_commit_version}"
    )
    print(
        f"  retention {retention / 3_600_000:g} hours (table: {stats.default_retention_millis / 3_600_000:g} hours); "
        f"unreferenced files modified before {horizon} are deleted"
    )
    if stats.mode == "FULL":
        print(
            f"  listed {stats.files_and_dirs_present_before_delete} files and directories in "
            f"{stats.dirs_present_before_delete} directories ({stats.time_taken_to_identify_eligible_files} ms)"
        )
    elif stats.eligible_start_commit_version is None:
        print("  no commits expired since the last vacuum")
    else:
        print(f"  read commits {stats.eligible_start_commit_version}..{stats.eligible_end_commit_version}")
    if stats.is_dry_run:
        for f in stats.files_to_delete or []:
            print(f"  {f['size']:>12}  {f['path']}")
        for d in stats.dirs_to_delete or []:
            print(f"  {'dir':>12}  {d}/")
        print("  nothing deleted or committed (dry run)")
    elif stats.committed_versions:
        start, end = stats.committed_versions
        print(f"  committed VACUUM START (version {start}) and VACUUM END (version {end}), executor {stats.executor}")
    else:
        print(f"  no log entries committed, executor {stats.executor}")
