"""What OPTIMIZE and clustering share when they rewrite files: the files a partition predicate selects, the size
defaults, progress, and committing the rewritten files (``dataChange=false``) with the reference's retries."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_deltalite.engine.crash_points import crash_point
from airflow_provider_deltalite.engine.errors import (
    ConcurrentModification,
    DeltaLiteError,
)
from airflow_provider_deltalite.engine.file_actions import dv_key
from airflow_provider_deltalite.engine.partition_filter import bind_partition_predicate
from airflow_provider_deltalite.engine.properties import TARGET_FILE_SIZE
from airflow_provider_deltalite.engine.rewrite import RewriteResult
from airflow_provider_deltalite.engine.row_tracking import materialized_columns
from airflow_provider_deltalite.engine.snapshot import Snapshot
from airflow_provider_deltalite.engine.table import Table
from airflow_provider_deltalite.engine.transaction import RetryPolicy, Transaction
from airflow_provider_deltalite.maintenance.option_values import positive_bytes, share

log = logging.getLogger(__name__)

GIB = 1024**3


DEFAULT_FILE_SIZE = GIB  # the reference's optimize.minFileSize and optimize.maxFileSize


DEFAULT_MAX_DELETED_ROWS_RATIO = 0.05


# OPTIMIZE copies row groups of at least this many compressed bytes and re-encodes smaller ones (min_row_group_size).
# Measured (benchmarks/optimize_stitch.py --read-cost: a pyarrow full scan of the same 104 MiB of rows in row groups of
# each size, snappy, a noisy shared 2-core machine): 0.1-0.5 MiB groups scan 3.4-3.9x slower than the best, 1 MiB
# 1.9x, 2-4 MiB about 1.6x, 7.5 MiB the best; larger groups gained nothing more. So a copied row group is never one
# that makes readers pay for its size (PARQUET-1115), and DuckDB's 122,880-row groups (a few MiB) are re-encoded
# together into the writer's 16 MiB groups rather than kept.
DEFAULT_MIN_ROW_GROUP_SIZE = 8 * 1024 * 1024


# Outer retries after a conflict the transaction could not resolve (each on the newest snapshot).
MAX_REBASES = 10


@dataclass(frozen=True)
class OptimizeProgress:
    """Reported after each bin: how many bins and input bytes are done."""

    bins_done: int
    bins_total: int
    bytes_done: int
    bytes_total: int


def resolve_sizes(
    snapshot: Snapshot,
    target_size: int | None,
    min_file_size: int | None,
    max_deleted_rows_ratio: float | None,
    batch_size: int | None,
) -> tuple[int, int, float]:
    """Apply the defaults (``delta.targetFileSize``, else 1 GiB for both sizes) and validate every size."""
    default = DEFAULT_FILE_SIZE
    if TARGET_FILE_SIZE in snapshot.properties.explicit:
        default = snapshot.properties.positive_integer(TARGET_FILE_SIZE)
    target = default if target_size is None else target_size
    minimum = default if min_file_size is None else min_file_size
    ratio = DEFAULT_MAX_DELETED_ROWS_RATIO if max_deleted_rows_ratio is None else max_deleted_rows_ratio
    for name, value in (("target_size", target), ("min_file_size", minimum), ("batch_size", batch_size)):
        positive_bytes(name, value, snapshot.table_uri)
    return target, minimum, float(share("max_deleted_rows_ratio", ratio, snapshot.table_uri) or 0.0)


def considered_files(snapshot: Snapshot, where: str | None) -> list[int]:
    """Indexes (into ``snapshot.files``) of the live files matching ``where``, a predicate on partition columns only.

    Raises:
        InvalidExpression: ``where`` does not parse, names an unknown column, or names a non-partition column.
    """
    n = snapshot.num_files
    if not where:
        return list(range(n))
    from airflow_provider_deltalite.engine.expressions import may_match_partitions

    expr = bind_partition_predicate(where, snapshot.arrow_schema, snapshot.partition_columns, snapshot.table_uri)
    mask = may_match_partitions(expr, snapshot.partition_values).to_pylist()
    return [i for i, keep in enumerate(mask) if keep]


def commit_rewrite(
    table: Table,
    snapshot: Snapshot,
    parameters: Mapping[str, Any],
    results: list[RewriteResult],
    retry: RetryPolicy | None,
) -> int:
    """Commit rewritten files as one OPTIMIZE version, retrying on newer snapshots while that stays valid.

    Raises:
        ConcurrentModification: a concurrent commit removed a rewritten file (or the retries ran out); the message
            says how many bytes of new files are left for VACUUM.
    """
    crash_point("after_data_files")
    adds = [a for r in results for a in r.adds]
    removes = [x for r in results for x in r.removes]
    metrics = operation_metrics(adds, removes)
    base = snapshot
    for rebase in range(MAX_REBASES + 1):
        txn = Transaction(table.storage, base, retry=retry)
        txn.read_files(r["path"] for r in removes)
        for action in removes:
            txn.remove(action)
        for action in adds:
            txn.add(action)
        try:
            return txn.commit("OPTIMIZE", parameters, metrics).version
        except ConcurrentModification as exc:
            latest = table.planning_snapshot(None, where=snapshot.pruned_by)
            if rebase == MAX_REBASES or not _still_applicable(snapshot, latest, removes):
                raise left_for_vacuum(exc, results, "the commit failed") from None
            log.info("OPTIMIZE retries on version %s after a concurrent commit: %s", latest.version, exc.problem)
            base = latest
    raise AssertionError("unreachable")


def _still_applicable(original: Snapshot, latest: Snapshot, removes: list[dict[str, Any]]) -> bool:
    """The reference's outer-retry condition: same partitioning, and every compacted (path, DV) still live; and the
    same row-tracking columns, which the new files were written with."""
    if latest.partition_columns != original.partition_columns:
        return False
    if materialized_columns(latest) != materialized_columns(original):
        return False  # row tracking was turned on or off: the new files carry the wrong row-tracking columns
    live = latest.raw_files
    dvs = live.column("deletionVector").to_pylist()
    keys = {(p, dv_key({"deletionVector": d})) for p, d in zip(live.column("path").to_pylist(), dvs, strict=True)}
    return all((r["path"], dv_key(r)) in keys for r in removes)


def left_for_vacuum(exc: DeltaLiteError, results: list[RewriteResult], what: str) -> DeltaLiteError:
    """The same error, saying how many bytes of new files the failure left behind for VACUUM."""
    written = [a for r in results for a in r.adds]
    if not written:
        return exc
    nbytes = sum(int(a["size"]) for a in written)
    again = exc.extended(
        f"{what}: {len(written)} new files ({nbytes} bytes) are not in the table and are left for VACUUM"
    )
    again.orphaned_bytes = nbytes  # type: ignore[attr-defined]
    return again


def operation_metrics(adds: list[dict[str, Any]], removes: list[dict[str, Any]]) -> dict[str, int]:
    """commitInfo.operationMetrics of an OPTIMIZE commit, as the reference names and computes them."""
    added = sorted(int(a["size"]) for a in adds)
    n = len(added)

    def at(fraction: float) -> int:
        return added[int(n * fraction)] if n else 0

    return {
        "numAddedFiles": n,
        "numRemovedFiles": len(removes),
        "numAddedBytes": sum(added),
        "numRemovedBytes": sum(int(r["size"]) for r in removes),
        "minFileSize": added[0] if n else 0,
        "p25FileSize": at(0.25),
        "p50FileSize": at(0.5),
        "p75FileSize": at(0.75),
        "maxFileSize": added[-1] if n else 0,
        "numDeletionVectorsRemoved": sum(1 for r in removes if r.get("deletionVector")),
    }
