"""`table_health`: a table's health at one version from its log and file statistics, per partition and in total.

Without a snapshot the table is read as a stream (`engine.snapshot_stream.stream_snapshot`: the checkpoint a batch at a
time, without tags or row-tracking fields) and summed batch by batch (`accumulate.HealthAccumulator`); a snapshot the
caller has loaded is summed as one batch. With a task runner (the Spark executor) and a checkpoint of at least its
``checkpoint_task_bytes``, the runner's tasks sum the checkpoint a slice each and the parts are merged (`task_sums`).
Per batch, files are grouped by partition and every per-partition figure is a `bincount` over the group ids; no loop
runs per file. Statistics are parsed for ``numRecords`` and the measured columns only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from airflow_provider_deltalite.engine.arrow_util import contiguous
from airflow_provider_deltalite.engine.errors import InvalidArgument
from airflow_provider_deltalite.engine.properties import DELETED_FILE_RETENTION_DURATION, TARGET_FILE_SIZE
from airflow_provider_deltalite.engine.snapshot import Snapshot
from airflow_provider_deltalite.engine.snapshot_stream import ReplayStream, stream_snapshot
from airflow_provider_deltalite.engine.table import Table, parse_timestamp_ms
from airflow_provider_deltalite.maintenance.health.accumulate import HealthAccumulator
from airflow_provider_deltalite.maintenance.health.clustering_columns import (
    MeasuredColumn,
    choose_columns,
    needs_zorder,
)
from airflow_provider_deltalite.maintenance.health.clustering_quality import GroupClustering, group_clustering
from airflow_provider_deltalite.maintenance.health.histogram import buckets_of
from airflow_provider_deltalite.maintenance.health.log_health import LogView, last_runs, log_health
from airflow_provider_deltalite.maintenance.health.metrics import (
    GIB,
    ColumnClustering,
    PartitionHealth,
    TableHealth,
)
from airflow_provider_deltalite.maintenance.health.tombstones import dead_tombstones, tombstone_figures

if TYPE_CHECKING:
    from airflow_provider_deltalite.engine.checkpoint_task_stream import TaskStream
    from airflow_provider_deltalite.maintenance.health.task_sums import BatchObserver

DEFAULT_MIN_FILE_SIZE = GIB  # OPTIMIZE's default minimum file size without delta.targetFileSize
# what health reads of the file actions besides their keys (everything but tags and row-tracking fields): without
# deletionTimestamp, a checkpoint's tombstones would all count as deleted at the epoch, reclaimable whatever their age
HEALTH_FILE_FIELDS = frozenset({"size", "stats", "deletionTimestamp"})


def table_health(
    table: Table,
    *,
    snapshot: Snapshot | None = None,
    columns: Sequence[str] | None = None,
    min_file_size: int | None = None,
    now: datetime | int | str | None = None,
    tasks: Any = None,
) -> TableHealth:
    """The health of ``table`` from its log and file statistics (no data file is read).

    Args:
        table: the table.
        snapshot: the version to assess when the caller has loaded it already (default: the latest).
        columns: the columns to measure clustering on (default: the table's liquid clustering columns, else the
            columns of the newest Z-order in the log, else none).
        min_file_size: files below it count as small (default: ``delta.targetFileSize``, else 1 GiB, as OPTIMIZE).
        now: the time the time-based figures are measured at (datetime, epoch ms or ISO-8601; default: now).
        tasks: a `checkpoint_tasks.CheckpointTaskRunner` (the Spark executor): without ``snapshot``, a checkpoint of at
            least its ``checkpoint_task_bytes`` is summed by its tasks, a slice each (`task_sums`); the same figures.

    Returns:
        TableHealth (see `maintenance.health.metrics` for each figure).

    Raises:
        InvalidArgument: a column is not in the table or is a partition column; ``min_file_size`` is not a positive
            whole number; ``now`` is not a time.
        TableNotFound, CorruptLog, InvalidTableProperty: as a snapshot load raises them.

    Example:
        >>> health = table_health(Table("/data/events"), columns=["user_id"])  # doctest: +SKIP
        >>> health.small_file_share, health.clustering[0].average_depth  # doctest: +SKIP
        (0.83, 41.5)
    """
    uri = table.uri
    if isinstance(columns, str):
        columns = [columns]
    if min_file_size is not None and (
        isinstance(min_file_size, bool) or not isinstance(min_file_size, int) or min_file_size <= 0
    ):
        raise InvalidArgument(f"min_file_size must be a positive number of bytes, got {min_file_size!r}", uri)
    try:
        now_ms = int(time.time() * 1000) if now is None else parse_timestamp_ms(now)
    except ValueError as exc:
        raise InvalidArgument(f"now: {exc}", uri) from None
    if snapshot is not None:
        snap = table.planning_snapshot(snapshot)
        batches: Iterable[tuple[pa.Table, pa.Table]] = [(snap.raw_files, snap.tombstones)]
        fill = _summing(batches, contiguous(snap.tombstones.column("path")))
        return _health(uri, snap, fill, columns, min_file_size, now_ms)
    # the table as a stream: memory follows a batch of files (and the tombstones), not the table; a large
    # checkpoint summed by the tasks of ``tasks`` (the Spark executor) from its ``checkpoint_task_bytes``
    stream = open_stream(table, HEALTH_FILE_FIELDS, tasks)
    return stream_health(table, stream, columns=columns, min_file_size=min_file_size, now_ms=now_ms)


def open_stream(table: Table, file_fields: frozenset[str], tasks: Any = None) -> ReplayStream | TaskStream:
    """The latest version as a stream of ``file_fields``: read by the tasks of ``tasks`` (a
    `checkpoint_tasks.CheckpointTaskRunner`) when its checkpoint has at least their ``checkpoint_task_bytes``, else
    in this process."""
    if tasks is not None and getattr(tasks, "checkpoint_task_bytes", None) is not None:
        from airflow_provider_deltalite.engine.checkpoint_task_stream import stream_with_tasks

        found = stream_with_tasks(table.storage, None, tasks, file_fields)
        if found is not None:
            return found
    return stream_snapshot(table.storage, file_fields=file_fields)


def stream_health(
    table: Table,
    stream: ReplayStream | TaskStream,
    *,
    columns: Sequence[str] | None = None,
    min_file_size: int | None = None,
    now_ms: int,
    observer: BatchObserver | None = None,
) -> TableHealth:
    """`table_health` of a stream the caller opened (with `HEALTH_FILE_FIELDS` at least), handing each batch of
    live files and tombstones to ``observer`` as well (on a `TaskStream`, a copy per task, merged): one pass over the
    log for the health and whatever else the caller sums (the maintenance planner's per-partition triggers)."""
    if isinstance(stream, ReplayStream):
        fill = _summing(stream.batches(), stream.removed_paths(), observer)
    else:  # a command without Spark never loads the tasks' code
        from airflow_provider_deltalite.maintenance.health.task_sums import summing_on_tasks

        fill = summing_on_tasks(stream, observer)
    return _health(table.uri, stream.snapshot, fill, columns, min_file_size, now_ms)


def _summing(
    batches: Iterable[tuple[pa.Table, pa.Table]], removed: pa.Array, observer: BatchObserver | None = None
) -> Callable[[HealthAccumulator], None]:
    def fill(acc: HealthAccumulator) -> None:
        for live, stones in batches:
            acc.add(live, stones, removed)
            if observer is not None:
                observer.add(live, stones)

    return fill


def _health(
    uri: str,
    snap: Snapshot,
    fill: Callable[[HealthAccumulator], None],
    columns: Sequence[str] | None,
    min_file_size: int | None,
    now_ms: int,
) -> TableHealth:
    if columns:  # bad names fail before any work
        choose_columns(snap, columns, ())
    if min_file_size is None:
        min_file_size = (
            snap.properties.positive_integer(TARGET_FILE_SIZE)
            if TARGET_FILE_SIZE in snap.properties.explicit
            else DEFAULT_MIN_FILE_SIZE
        )
    view = LogView.read(snap)
    runs = last_runs(view, now_ms, want_zorder=needs_zorder(snap, columns))
    measured, source = choose_columns(snap, columns, runs.zorder_columns)
    file_retention_ms = snap.properties.interval_ms(DELETED_FILE_RETENTION_DURATION)

    acc = HealthAccumulator(snap, measured, min_file_size)
    fill(acc)
    tombstones = dead_tombstones(acc.all_tombstones(), acc.relive_paths())
    dead_groups = acc.add_dead(tombstones)
    n_groups = len(acc.partitions)
    used = np.zeros(n_groups, bool)
    used[acc.per_group("files") > 0] = True
    used[dead_groups[dead_groups >= 0]] = True
    order = acc.partitions.order(used)

    clustering_sums = []
    for k, column in enumerate(measured):
        found = acc.column_bounds(k)
        if found is None:
            empty = np.zeros(n_groups, np.int64)
            clustering_sums.append((column, GroupClustering(empty, empty.astype(float), empty, empty, empty)))
        else:
            groups, mins, maxs = found
            clustering_sums.append((column, group_clustering(mins, maxs, groups, n_groups)))

    part = {name: acc.per_group(name) for name in ("files", "bytes", "rows", "small", "small_bytes", "deleted")}
    part_dv_files, part_dead, part_dead_bytes = (acc.per_group(n) for n in ("dv_files", "dead", "dead_bytes"))
    partitions = []
    for i in order:
        partitions.append(
            PartitionHealth(
                partition_values=acc.partitions.as_dict(i),
                files=int(part["files"][i]),
                bytes=int(part["bytes"][i]),
                rows=int(part["rows"][i]),
                small_files=int(part["small"][i]),
                small_bytes=int(part["small_bytes"][i]),
                deleted_rows=int(part["deleted"][i]),
                files_with_deletion_vectors=int(part_dv_files[i]),
                tombstone_files=int(part_dead[i]),
                tombstone_bytes=int(part_dead_bytes[i]),
                clustering=tuple(_column_figures(c, sums, int(part["files"][i]), [i]) for c, sums in clustering_sums),
            )
        )

    n_files = acc.files
    total_rows = int(part["rows"].sum())
    total_deleted = int(part["deleted"].sum())
    total_small = int(part["small"].sum())
    counts, sums = acc.histogram
    return TableHealth(
        table_uri=uri,
        version=snap.version,
        computed_at=now_ms,
        partition_columns=tuple(snap.partition_columns),
        min_file_size=int(min_file_size),
        files=n_files,
        bytes=int(part["bytes"].sum()),
        rows=total_rows,
        files_without_stats=int(n_files - acc.with_records),
        size_histogram=buckets_of(counts, sums),
        small_files=total_small,
        small_bytes=int(part["small_bytes"].sum()),
        small_file_share=total_small / n_files if n_files else 0.0,
        deleted_rows=total_deleted,
        deleted_row_share=total_deleted / total_rows if total_rows else 0.0,
        files_with_deletion_vectors=int(part_dv_files.sum()),
        clustering_columns=tuple(c.name for c in measured),
        clustering_source=source,
        clustering=tuple(_column_figures(c, sums, n_files, list(range(n_groups))) for c, sums in clustering_sums),
        tombstones=tombstone_figures(tombstones, file_retention_ms, now_ms),
        log=log_health(view, now_ms, file_retention_ms),
        last_runs=runs,
        partitions=tuple(partitions),
    )


def _column_figures(column: MeasuredColumn, sums: GroupClustering, files: int, groups: list[int]) -> ColumnClustering:
    """One column's figures over ``groups``: one partition's own, or the table's as the mean over its partitions
    weighted by their files with statistics (a point query is pruned to one partition)."""
    idx = np.asarray(groups, np.int64)
    with_stats = int(sums.files_with_stats[idx].sum())
    if not with_stats:
        return ColumnClustering(column.name, 0, files, None, None, None)
    weights = sums.files_with_stats[idx]
    has = sums.intervals[idx] > 0
    depth_means = sums.depth_sum[idx][has] / sums.intervals[idx][has]
    return ColumnClustering(
        column=column.name,
        files_with_stats=with_stats,
        files_without_stats=files - with_stats,
        point_query_files=float(sums.point_query_sum[idx].sum() / with_stats),
        average_depth=float((depth_means * weights[has]).sum() / weights[has].sum()),
        max_depth=int(sums.max_depth[idx].max()),
    )
