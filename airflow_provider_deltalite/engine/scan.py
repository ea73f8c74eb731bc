"""Reading the rows of a snapshot: partition pruning, stats skipping, deletion vectors, column mapping."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine import data_files
from airflow_provider_deltalite.engine.errors import DeltaLiteError, InvalidArgument, InvalidExpression
from airflow_provider_deltalite.engine.expressions import (
    bind,
    may_match_partitions,
    may_match_stats,
    parse_expression,
    to_arrow_filter,
)
from airflow_provider_deltalite.engine.snapshot import Snapshot


@dataclass(frozen=True)
class ScanMetrics:
    """What a scan read: files in the snapshot, skipped by partition values, skipped by stats, read; rows out.

    ``pruned_in_replay``: the snapshot holds only the partitions the filter may select (`Table.snapshot` with
    ``where``), so ``files_total`` counts their files and the other partitions' files were never read.
    """

    files_total: int
    files_skipped_by_partition: int
    files_skipped_by_stats: int
    files_read: int
    rows: int
    pruned_in_replay: bool = False

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class ScanPlan:
    """The files a scan will read (indexes into ``snapshot.files``) and the bound filter."""

    indexes: np.ndarray
    filter: Any
    files_total: int
    skipped_by_partition: int
    skipped_by_stats: int


def plan_scan(snapshot: Snapshot, filter: str | None = None) -> ScanPlan:
    """Choose the files that may hold rows matching ``filter`` (partition pruning, then min/max/nullCount skipping).

    Raises:
        InvalidExpression: the filter does not parse or names an unknown column.
        InvalidArgument: the snapshot holds only the partitions of another predicate (`Snapshot.pruned_by`): its
            other partitions' files were never read, so the rows of this filter may be missing.
    """
    if snapshot.pruned_by is not None and snapshot.pruned_by != filter:
        raise InvalidArgument(
            f"the snapshot holds only the files of the partitions {snapshot.pruned_by!r} selects; scan it with that "
            "filter, or load the table with this one (Table.snapshot(where=...))",
            snapshot.table_uri,
        )
    files = snapshot.files
    n = files.num_rows
    if not filter:
        return ScanPlan(np.arange(n), None, n, 0, 0)
    try:
        expr = bind(parse_expression(filter), snapshot.arrow_schema)
    except InvalidExpression as exc:
        if exc.table_uri is not None:
            raise
        raise InvalidExpression(exc.problem, snapshot.table_uri) from None
    keep = np.ones(n, dtype=bool)
    if snapshot.partition_columns:
        keep &= _true_mask(may_match_partitions(expr, snapshot.partition_values))
    after_partitions = int(keep.sum())
    stats_keep = _true_mask(may_match_stats(expr, files.column("stats_parsed").combine_chunks(), n))
    keep &= stats_keep
    return ScanPlan(np.flatnonzero(keep), expr, n, n - after_partitions, after_partitions - int(keep.sum()))


def _true_mask(mask: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return pc.fill_null(mask, True).to_numpy(zero_copy_only=False).astype(bool)


def read_file_rows(snapshot: Snapshot, index: int) -> pa.Table:
    """The rows of one live file in the table's logical schema: deletion vector applied, partition values added."""
    files = snapshot.files
    rows = data_files.read_file_rows(
        snapshot.storage,
        files.column("path")[index].as_py(),
        files.column("deletionVector")[index].as_py(),
        snapshot.schema,
        mode=snapshot.column_mapping_mode,
        partition_columns=snapshot.partition_columns,
    )
    if snapshot.partition_columns:
        take = pa.array(np.full(rows.num_rows, index, dtype=np.int64))
        for name in snapshot.partition_columns:
            rows = rows.append_column(name, pc.take(snapshot.partition_values.column(name), take))
    return rows.select(snapshot.arrow_schema.names)


def scan(
    snapshot: Snapshot, columns: list[str] | None = None, filter: str | None = None, max_workers: int = 4
) -> tuple[pa.Table, ScanMetrics]:
    """The rows of ``snapshot`` matching ``filter``, projected to ``columns``, with what the scan read.

    A snapshot loaded with the filter as ``where`` holds only the partitions it may select, so the log replay reads
    no file of the others (memory follows the partitions scanned, not the table).

    Example:
        >>> table, metrics = scan(DeltaTable("/data/events").snapshot(), filter="date = '2024-01-01'")  # doctest: +SKIP
        >>> where = "date = '2024-01-01' AND id > 10"
        >>> table, metrics = scan(DeltaTable("/data/events").snapshot(where=where), filter=where)  # doctest: +SKIP
    """
    schema = snapshot.arrow_schema
    if columns:
        unknown = [c for c in columns if c not in schema.names]
        if unknown:
            raise InvalidExpression(f"unknown column '{unknown[0]}' in --columns", snapshot.table_uri)
    plan = plan_scan(snapshot, filter)
    row_filter = to_arrow_filter(plan.filter) if plan.filter is not None else None

    def one(i: int) -> pa.Table:
        rows = read_file_rows(snapshot, int(i))
        if row_filter is not None:
            rows = rows.filter(row_filter)
        return rows.select(columns) if columns else rows

    try:
        if len(plan.indexes) > 1 and max_workers > 1:
            with ThreadPoolExecutor(max_workers=max_workers) as pool:
                parts = list(pool.map(one, plan.indexes))
        else:
            parts = [one(i) for i in plan.indexes]
    except DeltaLiteError:
        raise
    target = pa.schema([schema.field(c) for c in columns]) if columns else schema
    result = pa.concat_tables(parts) if parts else target.empty_table()
    metrics = ScanMetrics(
        files_total=plan.files_total,
        files_skipped_by_partition=plan.skipped_by_partition,
        files_skipped_by_stats=plan.skipped_by_stats,
        files_read=len(plan.indexes),
        rows=result.num_rows,
        pruned_in_replay=snapshot.pruned_by is not None,
    )
    return result, metrics
