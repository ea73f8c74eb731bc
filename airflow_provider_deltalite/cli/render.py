"""How the `deltalite` CLI shows results: JSON documents, sizes, summaries and progress lines."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_deltalite.engine.arrow_util import contiguous
from airflow_provider_deltalite.engine.clustering_domain import clustering_spec
from airflow_provider_deltalite.engine.snapshot import ReplayStream, Snapshot, json_default
from airflow_provider_deltalite.maintenance.health.histogram import bucket_counts
from airflow_provider_deltalite.maintenance.wording import human_size

if TYPE_CHECKING:
    from airflow_provider_deltalite.maintenance.optimize_stats import OptimizeStats
    from airflow_provider_deltalite.maintenance.rewrites import OptimizeProgress
    from airflow_provider_deltalite.maintenance.vacuum import VacuumProgress
    from airflow_provider_deltalite.maintenance.vacuum.stats import VacuumStats

_SIZE_BINS = ((1 << 20, "<1MB"), (8 << 20, "<8MB"), (64 << 20, "<64MB"), (128 << 20, "<128MB"), (1 << 30, "<1GB"))


def size_histogram(sizes: Sequence[int] | pa.Array) -> dict[str, int]:
    """How many files fall under 1 MB, 8 MB, 64 MB, 128 MB, 1 GB, and above."""
    values = sizes.to_numpy(zero_copy_only=False) if isinstance(sizes, pa.Array) else np.asarray(sizes, np.int64)
    # bucket i holds the sizes below limit i and at or above limit i - 1; the last one everything at or above 1 GB
    counts, _ = bucket_counts(values, (0, *(limit for limit, _ in _SIZE_BINS)))
    return dict(zip([label for _, label in _SIZE_BINS] + [">=1GB"], (int(c) for c in counts), strict=True))


# what describe reads of the file actions besides their keys: sizes, not statistics
DESCRIBE_FILE_FIELDS = ("size",)


def describe_document(table: Snapshot | ReplayStream) -> dict[str, Any]:
    """What `deltalite describe --json` prints, of a snapshot or, summed a batch at a time, of a stream (what the CLI
    reads: memory follows a batch of file sizes, not the table)."""
    if isinstance(table, ReplayStream):
        snap = table.snapshot
        files = size = 0
        histogram: dict[str, int] = {}
        for adds, _ in table.batches():
            sizes = contiguous(adds.column("size")).fill_null(0)
            files += len(sizes)
            size += int(pc.sum(sizes).as_py() or 0)
            for label, count in size_histogram(sizes).items():
                histogram[label] = histogram.get(label, 0) + count
        histogram = histogram or size_histogram(pa.array([], pa.int64()))
    else:
        snap = table
        sizes = contiguous(snap.raw_files.column("size")).fill_null(0)
        files, size, histogram = snap.num_files, snap.size_in_bytes, size_histogram(sizes)
    clustering = clustering_spec(snap)
    return {
        "table": snap.table_uri,
        "version": snap.version,
        "timestamp": snap.timestamp,
        "id": snap.table_id,
        "numFiles": files,
        "sizeInBytes": size,
        "partitionColumns": snap.partition_columns,
        # None: not a clustered table; []: clustered on no column (CLUSTER BY NONE)
        "clusteringColumns": list(clustering.names) if clustering is not None else None,
        "schema": snap.schema,
        "protocol": {**snap.protocol.to_dict(), "features": list(snap.protocol.features)},
        "properties": snap.properties.explicit,
        "fileSizeHistogram": histogram,
    }


def files_document(snap: Snapshot, indexes: np.ndarray | None = None) -> dict[str, Any]:
    """What `deltalite files --json` prints: paths exactly as written in the log (of the files at ``indexes`` of
    ``snap.files`` when given: those a ``--where`` selects)."""
    files = snap.files
    partition = snap.partition_values
    if indexes is not None:
        files, partition = files.take(indexes), partition.take(indexes)
    raw = files.column("partitionValues").combine_chunks()
    raw_columns = {
        logical: raw.field(physical).to_pylist()
        for logical, physical in zip(snap.partition_columns, snap.partition_physical_names, strict=True)
    }
    out = []
    paths = files.column("path").to_pylist()
    sizes = files.column("size").to_pylist()
    records = files.column("numRecords").to_pylist()
    mtimes = files.column("modificationTime").to_pylist()
    dvs = files.column("deletionVector").is_valid().to_pylist()
    for i, path in enumerate(paths):
        out.append(
            {
                "path": path,
                "size": sizes[i],
                "partitionValues": {c: raw_columns[c][i] for c in partition.column_names},
                "numRecords": records[i],
                "modificationTime": mtimes[i],
                "deletionVector": bool(dvs[i]),
            }
        )
    return {"version": snap.version, "files": out}


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
