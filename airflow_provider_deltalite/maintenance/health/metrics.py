"""What `table_health` reports: the health of a Delta table and of each of its partitions, from the log and the
file statistics only (no data file is opened).

Every class turns into a plain JSON-ready dict with camelCase keys (`to_dict`), the form of ``deltalite health
--json``, the operators' XCom and the OpenLineage facet. Sizes are bytes, times are epoch milliseconds (UTC), ages
are hours.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_deltalite.maintenance.optimize_stats import camel_case

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
# Log-scale size buckets, a factor of 4 apart: bucket i holds sizes in [SIZE_BUCKET_EDGES[i], SIZE_BUCKET_EDGES[i+1]),
# the last one everything at or above 4 GiB.
SIZE_BUCKET_EDGES: tuple[int, ...] = (
    0,
    64 * KIB,
    256 * KIB,
    MIB,
    4 * MIB,
    16 * MIB,
    64 * MIB,
    256 * MIB,
    GIB,
    4 * GIB,
)


@dataclass(frozen=True)
class SizeBucket:
    """Files whose size is in ``[lower, upper)`` (``upper`` None: no upper bound)."""

    lower: int
    upper: int | None
    files: int
    bytes: int


@dataclass(frozen=True)
class ColumnClustering:
    """How well the files are clustered on one column, from their min/max statistics (per partition, or for the
    table as the mean over its partitions weighted by their ``files_with_stats``, ``max_depth`` the largest of theirs:
    a point query is assumed to be pruned to one partition).

    - ``point_query_files``: the mean, over the files with statistics, of how many files' ``[min, max]`` contain that
      file's ``min``: how many files a point query on a value the table holds must read. 1.0 is perfect.
    - ``average_depth`` / ``max_depth``: Snowflake-style overlap depth: sweep the sorted ``min``/``max`` bounds; the
      depth of each elementary interval between consecutive distinct bounds that some file covers is the number of
      files covering it; ``average_depth`` is their mean (each interval counted once), ``max_depth`` the largest.
      A file whose ``min == max`` covers a single point, counted as one interval as deep as the files holding it.
    - ``files_with_stats``: files with both a min and a max for the column (others cannot be skipped on it and are
      left out of the figures above; ``files_without_stats`` counts them).
    """

    column: str
    files_with_stats: int
    files_without_stats: int
    point_query_files: float | None
    average_depth: float | None
    max_depth: int | None


@dataclass(frozen=True)
class PartitionHealth:
    """One partition (``partition_values`` as written in the log; ``{}`` for an unpartitioned table). A partition
    whose files are all removed still appears while tombstones of it remain (``files`` 0); a tombstone without
    partition values counts for the table only."""

    partition_values: dict[str, str | None]
    files: int
    bytes: int
    rows: int  # sum of numRecords over the files that have it (rows in the files, deleted ones included)
    small_files: int  # files below the minimum file size
    small_bytes: int
    deleted_rows: int  # rows removed by deletion vectors (their cardinality)
    files_with_deletion_vectors: int
    tombstone_files: int  # remove actions still in the log whose file is not live again
    tombstone_bytes: int
    clustering: tuple[ColumnClustering, ...]


@dataclass(frozen=True)
class Tombstones:
    """Files only tombstones (remove actions kept in the log) still point at: what VACUUM would reclaim, and when.

    A file is reclaimable once its ``deletionTimestamp`` is older than ``now - retention_hours``; files VACUUM
    finds by listing (never in the log) are not counted: health reads no directory but ``_delta_log``.
    """

    retention_hours: float  # delta.deletedFileRetentionDuration, else 168
    files: int
    bytes: int
    files_without_size: int  # remove actions without a size (counted in ``files``, not in ``bytes``)
    reclaimable_files: int  # reclaimable now
    reclaimable_bytes: int
    # deletionTimestamp + retention of the first / the last tombstone not reclaimable yet (None: none is pending)
    next_reclaimable_at: int | None
    all_reclaimable_at: int | None
    # (day "YYYY-MM-DD" in UTC, files, bytes) of the tombstones that become reclaimable on that day; past days are
    # folded into the first entry (today)
    reclaimable_by_day: tuple[tuple[str, int, int], ...]


@dataclass(frozen=True)
class LogHealth:
    """The log: how far the newest checkpoint lags, its size, and how many versions each retention window holds."""

    version: int
    last_checkpoint_version: int | None
    commits_since_checkpoint: int  # version - last checkpoint version (version + 1 without a checkpoint)
    checkpoint_interval: int  # delta.checkpointInterval, else 10
    log_files: int  # every file in _delta_log (commits, checkpoints, checksums, ...)
    log_bytes: int
    log_retention_hours: float  # delta.logRetentionDuration, else 720
    oldest_version: int  # the oldest version the log can still reconstruct
    versions_in_log_retention: int  # versions whose commit time is within log_retention_hours of now
    versions_in_file_retention: int  # versions within the deleted-file retention (safe to time travel after VACUUM)


@dataclass(frozen=True)
class LastRuns:
    """The newest maintenance commits the log still holds (None: none in the retained log)."""

    optimize_version: int | None  # OPTIMIZE of any kind: compaction, Z-order, clustering
    optimize_timestamp: int | None
    hours_since_optimize: float | None
    vacuum_version: int | None  # VACUUM END
    vacuum_timestamp: int | None
    hours_since_vacuum: float | None
    # the zOrderBy of the newest Z-order in the log, () if none; looked for past the newest OPTIMIZE only when the
    # clustering columns may come from it (none given, no liquid clustering columns): the history read stays bounded
    zorder_columns: tuple[str, ...]


@dataclass(frozen=True)
class TableHealth:
    """The health of a Delta table at one version; see `maintenance.health.table_health`.

    Example:
        >>> health = DeltaTable("/data/events").health()  # doctest: +SKIP
        >>> health.small_files, health.tombstones.reclaimable_bytes  # doctest: +SKIP
        (412, 73400320)
    """

    table_uri: str
    version: int
    computed_at: int  # "now" of the time-based figures
    partition_columns: tuple[str, ...]
    min_file_size: int  # files below it are small (OPTIMIZE's default: delta.targetFileSize, else 1 GiB)
    files: int
    bytes: int
    rows: int
    files_without_stats: int  # files without numRecords
    size_histogram: tuple[SizeBucket, ...]
    small_files: int
    small_bytes: int
    small_file_share: float  # small_files / files (0.0 for an empty table)
    deleted_rows: int
    deleted_row_share: float  # deleted_rows / rows (0.0 when rows is 0)
    files_with_deletion_vectors: int
    # the columns clustering quality is measured on, and where they came from: "given" (the caller's), "liquid" (the
    # table's clustering columns), "zorder" (the newest Z-order in the log), or None (no columns: clustering is ())
    clustering_columns: tuple[str, ...]
    clustering_source: str | None
    clustering: tuple[ColumnClustering, ...]
    tombstones: Tombstones
    log: LogHealth
    last_runs: LastRuns
    partitions: tuple[PartitionHealth, ...]  # sorted by partition values (None first)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form (camelCase keys), as ``deltalite health --json`` prints it."""
        return plain(self)

    def worst_partitions(self, limit: int) -> list[PartitionHealth]:
        """At most ``limit`` partitions holding live files, worst first (see `worst_partition_indexes`): what the
        CLI lists, the page draws and the operator keeps in XCom."""
        live = [p for p in self.partitions if p.files]
        return [live[i] for i in worst_partition_indexes([p.small_files for p in live], [p.files for p in live], limit)]


def worst_partition_indexes(small_files: Sequence[int], files: Sequence[int], limit: int) -> list[int]:
    """Indexes of at most ``limit`` partitions: the most small files first, then the most files, equal ones in their
    order."""
    return sorted(range(len(files)), key=lambda i: (-small_files[i], -files[i]))[:limit]


def plain(value: Any) -> Any:
    """A metrics dataclass (or a tuple of them) as JSON-ready data: camelCase field names, tuples as lists; the keys
    of plain dicts (partition values) are kept as they are."""
    if hasattr(value, "__dataclass_fields__"):
        return {camel_case(name): plain(getattr(value, name)) for name in value.__dataclass_fields__}
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value
