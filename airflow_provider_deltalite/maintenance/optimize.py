"""OPTIMIZE (bin-packing compaction): plan from a snapshot, rewrite bins on an executor, commit with dataChange=false.

Planning follows the reference: the considered files are the live files matching a partition-only predicate; the
candidates are those smaller than ``min_file_size`` or whose deletion vector removes more than
``max_deleted_rows_ratio`` of their rows; per partition they are packed by size into bins of at most ``target_size``;
a bin of one file is dropped unless that file carries a deletion vector (rewriting it purges the deleted rows).
Bins are grouped into batches of ``batch_size`` input bytes, one commit each.

Every add and remove is ``dataChange=false``, so the commit is recorded as SnapshotIsolation: concurrent appends
never conflict with it, and streaming readers and the sensor ignore it. When another writer wins the race, the
transaction checks the winner; a commit that removed one of the compacted files aborts OPTIMIZE (its deleted rows
must stay deleted), anything else is retried as the reference does, on the newest snapshot, as long as every
compacted file is still live and the partitioning did not change.

Example:
    >>> stats = optimize(DeltaTable("/data/events"), where="date >= '2026-11-01'")  # doctest: +SKIP
    >>> stats.num_files_removed, stats.committed_version  # doctest: +SKIP
    (412, 8)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_deltalite.engine.crash_points import crash_point
from airflow_provider_deltalite.engine.errors import (
    ConcurrentModification,
    DeltaLiteError,
    InvalidExpression,
)
from airflow_provider_deltalite.engine.expressions import (
    bind,
    expression_columns,
    may_match_partitions,
    parse_expression,
)
from airflow_provider_deltalite.engine.file_actions import dv_key, ensure_can_add_files, live_file_actions
from airflow_provider_deltalite.engine.properties import TARGET_FILE_SIZE
from airflow_provider_deltalite.engine.rewrite import (
    RewriteResult,
    RewriteTask,
    TableContext,
    WriterOptions,
    rewrite_files,
)
from airflow_provider_deltalite.engine.snapshot import Snapshot
from airflow_provider_deltalite.engine.table import Table
from airflow_provider_deltalite.engine.transaction import RetryPolicy, Transaction
from airflow_provider_deltalite.maintenance.bin_packing import group_by, pack_batches, pack_greedy
from airflow_provider_deltalite.maintenance.executor import Executor, LocalExecutor
from airflow_provider_deltalite.maintenance.optimize_stats import FileSizeMetrics, OptimizeStats
from airflow_provider_deltalite.maintenance.options import OptimizeOptions, positive_bytes, share

log = logging.getLogger(__name__)

GIB = 1024**3
DEFAULT_FILE_SIZE = GIB  # the reference's optimize.minFileSize and optimize.maxFileSize
DEFAULT_MAX_DELETED_ROWS_RATIO = 0.05
# Outer retries after a conflict the transaction could not resolve (each on the newest snapshot).
MAX_REBASES = 10


@dataclass(frozen=True)
class CompactionBin:
    """Files of one partition that become one new file."""

    partition_values: Mapping[str, str | None]
    files: tuple[dict[str, Any], ...]

    @property
    def size(self) -> int:
        return sum(int(f["size"]) for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "partitionValues": dict(self.partition_values),
            "files": [f["path"] for f in self.files],
            "numFiles": len(self.files),
            "size": self.size,
        }


@dataclass(frozen=True)
class OptimizePlan:
    """What OPTIMIZE will rewrite: bins, and the batches (bin indexes) committed together."""

    read_version: int
    predicate: str | None
    target_size: int
    min_file_size: int
    max_deleted_rows_ratio: float
    total_considered_files: int
    bins: tuple[CompactionBin, ...]
    batches: tuple[tuple[int, ...], ...]
    partitions: int


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
    uri = snapshot.table_uri
    try:
        expr = bind(parse_expression(where), snapshot.arrow_schema)
    except InvalidExpression as exc:
        raise InvalidExpression(exc.problem, uri) from None
    others = sorted(expression_columns(expr) - set(snapshot.partition_columns))
    if others:
        partitions = ", ".join(snapshot.partition_columns) or "none"
        raise InvalidExpression(
            f"where may only reference partition columns; '{others[0]}' is not one (partition columns: {partitions})",
            uri,
        )
    mask = may_match_partitions(expr, snapshot.partition_values).to_pylist()
    return [i for i, keep in enumerate(mask) if keep]


def plan_optimize(
    snapshot: Snapshot,
    *,
    where: str | None = None,
    target_size: int | None = None,
    min_file_size: int | None = None,
    max_deleted_rows_ratio: float | None = None,
    batch_size: int | None = None,
) -> OptimizePlan:
    """Plan a compaction of ``snapshot`` without touching any data (deterministic for a given snapshot)."""
    target, minimum, ratio = resolve_sizes(snapshot, target_size, min_file_size, max_deleted_rows_ratio, batch_size)
    indexes = considered_files(snapshot, where)
    files = snapshot.files
    sizes = files.column("size").to_pylist()
    paths = files.column("path").to_pylist()
    num_records = files.column("numRecords").to_pylist()
    dvs = files.column("deletionVector").to_pylist()
    typed = snapshot.partition_values
    partition_keys = list(zip(*[c.to_pylist() for c in typed.columns], strict=True)) if typed.num_columns else None

    def is_candidate(i: int) -> bool:
        if sizes[i] < minimum:
            return True
        dv = dvs[i]
        if dv is None:
            return False
        records = num_records[i]
        if not records:
            return True  # without an exact row count the deleted share is unknown; the reference rewrites it
        return (dv.get("cardinality") or 0) / records > ratio

    candidates = [i for i in indexes if is_candidate(i)]
    # typed partition values, so two spellings of the same value (timestamps, numbers) share a partition
    groups = group_by(candidates, lambda i: partition_keys[i] if partition_keys is not None else ())
    chosen: list[list[int]] = []
    for members in groups.values():
        members.sort(key=lambda i: (sizes[i], paths[i]))
        for packed in pack_greedy(members, lambda i: sizes[i], target):
            if len(packed) > 1 or dvs[packed[0]] is not None:
                chosen.append(packed)
    actions = {a["path"]: a for a in live_file_actions(snapshot, [paths[i] for b in chosen for i in b])}
    bins = tuple(
        CompactionBin(
            partition_values=dict(actions[paths[b[0]]].get("partitionValues") or {}),
            files=tuple(actions[paths[i]] for i in b),
        )
        for b in chosen
    )
    batches = pack_batches([b.size for b in bins], batch_size)
    partitions = len({partition_keys[b[0]] if partition_keys is not None else () for b in chosen})
    return OptimizePlan(
        read_version=snapshot.version,
        predicate=where,
        target_size=target,
        min_file_size=minimum,
        max_deleted_rows_ratio=ratio,
        total_considered_files=len(indexes),
        bins=bins,
        batches=tuple(tuple(b) for b in batches),
        partitions=partitions,
    )


def optimize(
    table: Table,
    options: OptimizeOptions | None = None,
    *,
    executor: Executor | None = None,
    max_concurrent_tasks: int | None = None,
    writer_options: WriterOptions | None = None,
    retry: RetryPolicy | None = None,
    progress: Callable[[OptimizeProgress], None] | None = None,
    **fields: Any,
) -> OptimizeStats:
    """Compact the small files of ``table`` (see the module docstring for the rules).

    Args:
        table: the table.
        options: what to compact (`OptimizeOptions`: ``where``, ``target_size``, ``min_file_size``,
            ``max_deleted_rows_ratio``, ``batch_size``, ``dry_run``); or pass those fields as keyword arguments. With
            ``dry_run`` the stats describe the plan (``plan`` lists the bins) and nothing is written.
        executor: where bins are rewritten (default: `LocalExecutor` with ``max_concurrent_tasks`` threads).
        max_concurrent_tasks: threads of the default local executor.
        writer_options: Parquet encoding of the new files.
        retry: the commit retry policy.
        progress: called after every bin.

    Returns:
        OptimizeStats; ``committed_version`` is None when nothing was committed.

    Raises:
        InvalidExpression: ``where`` is invalid or references a non-partition column.
        InvalidArgument: a size or the ratio is out of range.
        ProtocolNotSupported: the table has a feature deltalite cannot write (checked before anything is written).
        ConcurrentModification: another commit removed a compacted file; the message says how many bytes of new files
            were left for VACUUM.
    """
    opts = OptimizeOptions.resolve(options, fields, table.uri)
    start_ms = int(time.time() * 1000)
    snapshot = table.snapshot()
    ensure_can_add_files(snapshot)
    plan = plan_optimize(
        snapshot,
        where=opts.where,
        target_size=opts.target_size,
        min_file_size=opts.min_file_size,
        max_deleted_rows_ratio=opts.max_deleted_rows_ratio,
        batch_size=opts.batch_size,
    )
    owned = executor is None
    executor = executor or LocalExecutor(max_concurrent_tasks)
    try:
        if opts.dry_run:
            return _stats(plan, executor, start_ms, [], [], dry_run=True)
        ctx = TableContext.from_snapshot(snapshot)
        writer = writer_options or WriterOptions()
        deletion_timestamp = int(time.time() * 1000)  # one timestamp for every remove, as the reference
        total_bytes = sum(b.size for b in plan.bins)
        done_bins = done_bytes = 0
        results: list[RewriteResult] = []
        versions: list[int] = []
        for batch in plan.batches:
            tasks = [RewriteTask(ctx, i, plan.bins[i].files, deletion_timestamp, writer) for i in batch]
            batch_results: list[RewriteResult] = []
            try:
                for result in executor.map(rewrite_files, tasks):
                    batch_results.append(result)
                    done_bins += 1
                    done_bytes += result.bytes_read
                    if progress is not None:
                        progress(OptimizeProgress(done_bins, len(plan.bins), done_bytes, total_bytes))
            except DeltaLiteError as exc:
                raise left_for_vacuum(exc, batch_results, "this batch was not committed") from None
            parameters = {"predicate": [plan.predicate] if plan.predicate else [], "zOrderBy": [], "auto": False}
            versions.append(commit_rewrite(table, snapshot, parameters, batch_results, retry))
            results.extend(batch_results)
        return _stats(plan, executor, start_ms, results, versions)
    finally:
        if owned:
            executor.close()


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
            latest = table.snapshot()
            if rebase == MAX_REBASES or not _still_applicable(snapshot, latest, removes):
                raise left_for_vacuum(exc, results, "the commit failed") from None
            log.info("OPTIMIZE retries on version %s after a concurrent commit: %s", latest.version, exc.problem)
            base = latest
    raise AssertionError("unreachable")


def _still_applicable(original: Snapshot, latest: Snapshot, removes: list[dict[str, Any]]) -> bool:
    """The reference's outer-retry condition: same partitioning, and every compacted (path, DV) still live."""
    if latest.partition_columns != original.partition_columns:
        return False
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


def _stats(
    plan: OptimizePlan,
    executor: Executor,
    start_ms: int,
    results: list[RewriteResult],
    versions: list[int],
    *,
    dry_run: bool = False,
) -> OptimizeStats:
    if dry_run:
        removed = [int(f["size"]) for b in plan.bins for f in b.files]
        added: list[int] = []
        dvs = sum(1 for b in plan.bins for f in b.files if f.get("deletionVector"))
        dv_rows = sum(
            int(f["deletionVector"].get("cardinality") or 0)
            for b in plan.bins
            for f in b.files
            if f.get("deletionVector")
        )
    else:
        removed = [int(x["size"]) for r in results for x in r.removes]
        added = [int(a["size"]) for r in results for a in r.adds]
        dvs = sum(r.deletion_vectors_removed for r in results)
        dv_rows = sum(r.deleted_rows_removed for r in results)
    return OptimizeStats(
        num_files_added=len(added),
        num_files_removed=len(removed),
        files_added=FileSizeMetrics.of(added),
        files_removed=FileSizeMetrics.of(removed),
        partitions_optimized=plan.partitions,
        num_bins=len(plan.bins),
        num_batches=max(len(plan.batches), 1),
        total_considered_files=plan.total_considered_files,
        total_files_skipped=plan.total_considered_files - len(removed),
        num_deletion_vectors_removed=dvs,
        num_deletion_vector_rows_removed=dv_rows,
        z_order_stats=None,
        start_time_ms=start_ms,
        end_time_ms=int(time.time() * 1000),
        read_version=plan.read_version,
        committed_version=versions[-1] if versions else None,
        committed_versions=tuple(versions),
        executor=executor.name,
        total_cluster_parallelism=executor.parallelism,
        dry_run=dry_run,
        plan=[b.to_dict() for b in plan.bins] if dry_run else None,
    )
