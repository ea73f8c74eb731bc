"""`table_health`: a table's health at one version from its log and file statistics, per partition and in total.

Everything runs on the snapshot's Arrow columns with NumPy: files are grouped by partition once (`partition_groups`),
then every per-partition figure is a `bincount` over the group ids; no loop runs per file. Statistics are parsed
for ``numRecords`` and the measured columns only, unless the snapshot has parsed them already.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_deltalite.engine.arrow_util import contiguous
from airflow_provider_deltalite.engine.errors import InvalidArgument
from airflow_provider_deltalite.engine.partition_values import parse_partition_values
from airflow_provider_deltalite.engine.properties import DELETED_FILE_RETENTION_DURATION, TARGET_FILE_SIZE
from airflow_provider_deltalite.engine.snapshot import Snapshot
from airflow_provider_deltalite.engine.table import Table, parse_timestamp_ms
from airflow_provider_deltalite.maintenance.health.clustering_columns import (
    MeasuredColumn,
    bounds,
    choose_columns,
    needs_zorder,
    stats_schema,
)
from airflow_provider_deltalite.maintenance.health.clustering_quality import GroupClustering, group_clustering
from airflow_provider_deltalite.maintenance.health.histogram import size_buckets
from airflow_provider_deltalite.maintenance.health.log_health import LogView, last_runs, log_health
from airflow_provider_deltalite.maintenance.health.metrics import (
    GIB,
    ColumnClustering,
    PartitionHealth,
    TableHealth,
)
from airflow_provider_deltalite.maintenance.health.tombstones import dead_tombstones, tombstone_figures

DEFAULT_MIN_FILE_SIZE = GIB  # OPTIMIZE's default minimum file size without delta.targetFileSize


def table_health(
    table: Table,
    *,
    snapshot: Snapshot | None = None,
    columns: Sequence[str] | None = None,
    min_file_size: int | None = None,
    now: datetime | int | str | None = None,
) -> TableHealth:
    """The health of ``table`` from its log and file statistics (no data file is read).

    Args:
        table: the table.
        snapshot: the version to assess when the caller has loaded it already (default: the latest).
        columns: the columns to measure clustering on (default: the table's liquid clustering columns, else the
            columns of the newest Z-order in the log, else none).
        min_file_size: files below it count as small (default: ``delta.targetFileSize``, else 1 GiB, as OPTIMIZE).
        now: the time the time-based figures are measured at (datetime, epoch ms or ISO-8601; default: now).

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
    snap = table.planning_snapshot(snapshot)
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

    live = snap.raw_files
    tombstones = dead_tombstones(snap.tombstones, live.column("path"))
    groups = partition_groups(snap, live, tombstones)
    n_groups = len(groups.values)
    g_live, g_dead = groups.live, groups.tombstones

    sizes = contiguous(live.column("size")).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    stats = _stats(snap, measured) if measured else None
    records = contiguous(stats.field("numRecords")) if stats is not None else snap.num_records()
    has_records = records.is_valid().to_numpy(zero_copy_only=False)
    rows = records.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    dv = contiguous(live.column("deletionVector"))
    has_dv = dv.is_valid().to_numpy(zero_copy_only=False)
    deleted = dv.field("cardinality").fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    deleted = np.where(has_dv, deleted, 0)
    small = sizes < min_file_size

    def per_group(values: np.ndarray, ids: np.ndarray = g_live) -> np.ndarray:
        return np.bincount(ids, weights=values, minlength=n_groups).astype(np.int64)

    part_files = np.bincount(g_live, minlength=n_groups)
    part_bytes = per_group(sizes)
    part_rows = per_group(rows)
    part_small = per_group(small.astype(np.int64))
    part_small_bytes = per_group(np.where(small, sizes, 0))
    part_deleted = per_group(deleted)
    part_dv_files = per_group(has_dv.astype(np.int64))
    attributed = g_dead >= 0
    dead_sizes = contiguous(tombstones.column("size")).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    part_dead = per_group(np.ones(int(attributed.sum()), np.int64), g_dead[attributed])
    part_dead_bytes = per_group(dead_sizes[attributed], g_dead[attributed])

    clustering_sums = []
    for column in measured:
        assert stats is not None
        found = bounds(stats, column)
        if found is None:
            empty = np.zeros(n_groups, np.int64)
            clustering_sums.append((column, GroupClustering(empty, empty.astype(float), empty, empty, empty)))
        else:
            clustering_sums.append((column, group_clustering(found[0], found[1], g_live, n_groups)))

    partitions = []
    for i in groups.order:
        partitions.append(
            PartitionHealth(
                partition_values=groups.values[i],
                files=int(part_files[i]),
                bytes=int(part_bytes[i]),
                rows=int(part_rows[i]),
                small_files=int(part_small[i]),
                small_bytes=int(part_small_bytes[i]),
                deleted_rows=int(part_deleted[i]),
                files_with_deletion_vectors=int(part_dv_files[i]),
                tombstone_files=int(part_dead[i]),
                tombstone_bytes=int(part_dead_bytes[i]),
                clustering=tuple(_column_figures(c, sums, int(part_files[i]), [i]) for c, sums in clustering_sums),
            )
        )

    n_files = len(sizes)
    total_rows = int(rows.sum())
    total_deleted = int(deleted.sum())
    total_small = int(small.sum())
    return TableHealth(
        table_uri=uri,
        version=snap.version,
        computed_at=now_ms,
        partition_columns=tuple(snap.partition_columns),
        min_file_size=int(min_file_size),
        files=n_files,
        bytes=int(sizes.sum()),
        rows=total_rows,
        files_without_stats=int(n_files - has_records.sum()),
        size_histogram=size_buckets(sizes),
        small_files=total_small,
        small_bytes=int(sizes[small].sum()),
        small_file_share=total_small / n_files if n_files else 0.0,
        deleted_rows=total_deleted,
        deleted_row_share=total_deleted / total_rows if total_rows else 0.0,
        files_with_deletion_vectors=int(has_dv.sum()),
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


def _stats(snap: Snapshot, measured: Sequence[MeasuredColumn]) -> pa.StructArray:
    return snap.stats_for(stats_schema(snap, measured))


class PartitionGroups:
    """Live files and tombstones grouped by partition: a group id per file (-1 for a tombstone without partition
    values on a partitioned table), each group's values as written in the log, and the groups' order by value."""

    def __init__(self, live: np.ndarray, tombstones: np.ndarray, values: list[dict[str, Any]], order: list[int]):
        self.live = live
        self.tombstones = tombstones
        self.values = values
        self.order = order


def partition_groups(snap: Snapshot, live: pa.Table, tombstones: pa.Table) -> PartitionGroups:
    """Group the live files and the tombstones by their partition values (raw strings, null its own value)."""
    n_live, n_dead = live.num_rows, tombstones.num_rows
    if not snap.partition_columns:
        values: list[dict[str, Any]] = [{}] if n_live or n_dead else []
        return PartitionGroups(np.zeros(n_live, np.int64), np.zeros(n_dead, np.int64), values, list(range(len(values))))
    physical = snap.partition_physical_names
    live_pv = contiguous(live.column("partitionValues"))
    dead_pv = contiguous(tombstones.column("partitionValues")) if n_dead else None
    raw_columns = []
    for name in physical:
        parts = [_field_or_nulls(live_pv, name)]
        if dead_pv is not None:
            parts.append(_field_or_nulls(dead_pv, name))
        raw_columns.append(pa.concat_arrays(parts))
    key = np.zeros(n_live + n_dead, np.int64)
    radix = 1
    codes = []
    for column in raw_columns:
        encoded = pc.dictionary_encode(column, null_encoding="encode")
        indices = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        codes.append((encoded.dictionary, indices))
        size = max(len(encoded.dictionary), 1)
        if radix * size >= 2**62:  # too many combinations for one integer: renumber what exists so far
            _, key = np.unique(key, return_inverse=True)
            radix = int(key.max()) + 1
        key = key * size + indices
        radix *= size
    unique_keys, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    inverse = inverse.astype(np.int64)
    if dead_pv is not None and dead_pv.null_count:  # a remove without partitionValues belongs to no partition
        dead_ids = np.where(dead_pv.is_valid().to_numpy(zero_copy_only=False), inverse[n_live:], -1)
    else:
        dead_ids = inverse[n_live:]
    # groups only a value-less tombstone formed stay numbered but are never reported
    used = np.zeros(len(unique_keys), bool)
    used[inverse[:n_live]] = True
    used[dead_ids[dead_ids >= 0]] = True
    group_values = []
    sort_keys = []
    fields = {f["name"]: f for f in snap.schema["fields"]}
    typed_columns = []
    for logical, column in zip(snap.partition_columns, raw_columns, strict=True):
        representatives = column.take(pa.array(first))
        typed = parse_partition_values(
            representatives, fields[logical]["type"], column=logical, table_uri=snap.table_uri
        )
        typed_columns.append((representatives.to_pylist(), typed.to_pylist()))
    for g in range(len(unique_keys)):
        group_values.append({c: typed_columns[j][0][g] for j, c in enumerate(snap.partition_columns)})
        # None first, then by typed value (1 < 2 < 10 for integers, not "1" < "10" < "2")
        sort_keys.append(tuple(_none_first(typed[g]) for _, typed in typed_columns))
    order = sorted((g for g in range(len(unique_keys)) if used[g]), key=lambda g: sort_keys[g])
    return PartitionGroups(inverse[:n_live], dead_ids, group_values, order)


def _none_first(value: Any) -> tuple[int, Any]:
    return (0, "") if value is None else (1, value)


def _field_or_nulls(struct: pa.Array, name: str) -> pa.Array:
    if pa.types.is_struct(struct.type) and struct.type.get_field_index(name) >= 0:
        return contiguous(struct.field(name)).cast(pa.string())
    return pa.nulls(len(struct), pa.string())
