"""OPTIMIZE (bin-packing compaction): plan from a snapshot, rewrite bins on an executor, commit with dataChange=false.

Planning follows the reference: the considered files are the live files matching a partition-only predicate; the
candidates are those smaller than ``min_file_size`` or whose deletion vector removes more than
``max_deleted_rows_ratio`` of their rows; per partition they are packed by size into bins of at most ``target_size``;
a bin of one file is dropped unless that file carries a deletion vector (rewriting it purges the deleted rows).
With ``max_bytes_to_rewrite`` the bins are taken in that order while their input bytes fit it (`within_bytes`);
the rest are deferred to a later run and counted in the stats. Bins are grouped into batches of ``batch_size`` input
bytes, one commit each.

Each bin is written by `engine.rewrite_stitch.compact_files`: the row groups of at least ``min_row_group_size``
compressed bytes of inputs that can be copied are copied byte for byte under a new footer (stitched), the rest of the
rows re-encoded into the same file; the stats count both (``numFilesCopied``, ``numFilesReencoded``,
``bytesCopied``).

On a liquid-clustered table (writer feature ``clustering`` with clustering columns) OPTIMIZE clusters instead, as
Delta's does: `clustering.liquid` (``where`` is refused there; ``min_file_size``, ``max_deleted_rows_ratio`` and
``batch_size`` do not apply; ``full`` and ``min_cube_size`` apply only there).

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

from airflow_provider_deltalite.engine.clustering_domain import clustering_spec
from airflow_provider_deltalite.engine.data_file_writer import WriterOptions
from airflow_provider_deltalite.engine.errors import (
    DeltaLiteError,
    InvalidArgument,
    redact_uri,
)
from airflow_provider_deltalite.engine.file_actions import ensure_can_add_files, live_file_actions
from airflow_provider_deltalite.engine.rewrite import RewriteResult, RewriteTask, TableContext
from airflow_provider_deltalite.engine.rewrite_stitch import compact_files
from airflow_provider_deltalite.engine.snapshot import Snapshot
from airflow_provider_deltalite.engine.table import Table
from airflow_provider_deltalite.engine.transaction import RetryPolicy
from airflow_provider_deltalite.maintenance.bin_packing import group_by, pack_batches, pack_greedy, within_bytes
from airflow_provider_deltalite.maintenance.executor import Executor, LocalExecutor
from airflow_provider_deltalite.maintenance.history.record import recorded
from airflow_provider_deltalite.maintenance.optimize_stats import FileSizeMetrics, OptimizeStats
from airflow_provider_deltalite.maintenance.options import OptimizeOptions
from airflow_provider_deltalite.maintenance.rewrites import (
    DEFAULT_MIN_ROW_GROUP_SIZE,
    OptimizeProgress,
    commit_rewrite,
    considered_files,
    left_for_vacuum,
    resolve_sizes,
)

log = logging.getLogger(__name__)


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
    """What OPTIMIZE will rewrite: bins, and the batches (bin indexes) committed together; ``deferred`` are the
    bins ``max_bytes_to_rewrite`` left for a later run."""

    read_version: int
    predicate: str | None
    target_size: int
    min_file_size: int
    max_deleted_rows_ratio: float
    total_considered_files: int
    bins: tuple[CompactionBin, ...]
    batches: tuple[tuple[int, ...], ...]
    partitions: int
    deferred: tuple[CompactionBin, ...] = ()


def plan_optimize(
    snapshot: Snapshot,
    *,
    where: str | None = None,
    target_size: int | None = None,
    min_file_size: int | None = None,
    max_deleted_rows_ratio: float | None = None,
    batch_size: int | None = None,
    max_bytes_to_rewrite: int | None = None,
) -> OptimizePlan:
    """Plan a compaction of ``snapshot`` without touching any data (deterministic for a given snapshot)."""
    target, minimum, ratio = resolve_sizes(snapshot, target_size, min_file_size, max_deleted_rows_ratio, batch_size)
    indexes = considered_files(snapshot, where)
    # the raw columns: the row counts matter only for files with a deletion vector, and parsing every file's
    # statistics for them is most of the planning time of a table without any (400 files: 17-20 ms of 25)
    files = snapshot.raw_files
    sizes = files.column("size").to_pylist()
    paths = files.column("path").to_pylist()
    dvs = files.column("deletionVector").to_pylist()
    num_records = snapshot.num_records().to_pylist() if any(dv is not None for dv in dvs) else []
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
    # the cap is applied here, where the bins are chosen, so a dry run shows what a run would defer
    taken, left = within_bytes([sum(sizes[i] for i in b) for b in chosen], max_bytes_to_rewrite, snapshot.table_uri)
    actions = {a["path"]: a for a in live_file_actions(snapshot, [paths[i] for b in chosen for i in b])}
    planned = [
        CompactionBin(
            partition_values=dict(actions[paths[b[0]]].get("partitionValues") or {}),
            files=tuple(actions[paths[i]] for i in b),
        )
        for b in chosen
    ]
    bins = tuple(planned[i] for i in taken)
    batches = pack_batches([b.size for b in bins], batch_size)
    partitions = len({partition_keys[chosen[i][0]] if partition_keys is not None else () for i in taken})
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
        deferred=tuple(planned[i] for i in left),
    )


@recorded("optimize")
def optimize(
    table: Table,
    options: OptimizeOptions | None = None,
    *,
    executor: Executor | None = None,
    max_concurrent_tasks: int | None = None,
    writer_options: WriterOptions | None = None,
    retry: RetryPolicy | None = None,
    progress: Callable[[OptimizeProgress], None] | None = None,
    snapshot: Snapshot | None = None,
    **fields: Any,
) -> OptimizeStats:
    """Compact the small files of ``table``, or cluster it when it is liquid-clustered (see the module docstring).

    Args:
        table: the table.
        options: what to compact (`OptimizeOptions`: ``where``, ``target_size``, ``min_file_size``,
            ``max_deleted_rows_ratio``, ``batch_size``, ``max_bytes_to_rewrite``, ``min_row_group_size``,
            ``dry_run``); or pass those fields as keyword arguments. With ``dry_run`` the stats describe the plan
            (``plan`` lists the bins) and nothing is written. ``full`` and ``min_cube_size`` apply to clustered
            tables (`clustering.liquid`).
        executor: where bins are rewritten (default: `LocalExecutor` with ``max_concurrent_tasks`` threads).
        max_concurrent_tasks: threads of the default local executor.
        writer_options: Parquet encoding of the new files.
        retry: the commit retry policy.
        progress: called after every bin.
        snapshot: the table's snapshot to plan from when the caller has loaded it already (default: the latest).

    Returns:
        OptimizeStats; ``committed_version`` is None when nothing was committed.

    Raises:
        InvalidExpression: ``where`` is invalid or references a non-partition column.
        InvalidArgument: a size or the ratio is out of range; ``where`` on a clustered table; ``full`` or
            ``min_cube_size`` on a table without clustering columns.
        CorruptLog: the clustering domain names a column the schema does not have.
        InvalidTableProperty: a clustering column has no statistics.
        ProtocolNotSupported: the table has a feature deltalite cannot write (checked before anything is written).
        ConcurrentModification: another commit removed a compacted file; the message says how many bytes of new files
            were left for VACUUM.
    """
    opts = OptimizeOptions.resolve(options, fields, table.uri)
    start_ms = int(time.time() * 1000)
    snapshot = table.planning_snapshot(snapshot, where=opts.where, tasks=executor)
    ensure_can_add_files(snapshot)
    spec = clustering_spec(snapshot)
    if spec is not None and spec.columns:
        # a liquid-clustered table: cluster as Delta's OPTIMIZE does, never bin-pack its cubes away
        ignored = [
            n
            for n in ("min_file_size", "max_deleted_rows_ratio", "batch_size", "min_row_group_size")
            if getattr(opts, n) is not None
        ]
        if ignored:
            # Delta ignores them too; say so, since a user who set them expects them to matter
            log.warning(
                "table %s is liquid-clustered: %s apply to compaction only and are ignored",
                redact_uri(table.uri),
                ", ".join(ignored),
            )
        # only a clustered table needs the clustering modules: compaction's process does without their imports
        from airflow_provider_deltalite.maintenance.clustering.liquid import cluster_table

        owned = executor is None
        executor = executor or LocalExecutor(max_concurrent_tasks)
        try:
            return cluster_table(
                table, snapshot, spec, opts, executor, writer_options=writer_options, retry=retry, progress=progress
            )
        finally:
            if owned:
                executor.close()
    _refuse_clustering_options(opts, spec is not None, table.uri)
    plan = plan_optimize(
        snapshot,
        where=opts.where,
        target_size=opts.target_size,
        min_file_size=opts.min_file_size,
        max_deleted_rows_ratio=opts.max_deleted_rows_ratio,
        batch_size=opts.batch_size,
        max_bytes_to_rewrite=opts.max_bytes_to_rewrite,
    )
    owned = executor is None
    executor = executor or LocalExecutor(max_concurrent_tasks)
    try:
        if opts.dry_run:
            return _stats(plan, executor, start_ms, [], [], dry_run=True)
        ctx = TableContext.from_snapshot(snapshot)
        writer = writer_options or WriterOptions()
        min_row_group = opts.min_row_group_size or DEFAULT_MIN_ROW_GROUP_SIZE
        deletion_timestamp = int(time.time() * 1000)  # one timestamp for every remove, as the reference
        total_bytes = sum(b.size for b in plan.bins)
        done_bins = done_bytes = 0
        results: list[RewriteResult] = []
        versions: list[int] = []
        for batch in plan.batches:
            # a batch of fewer bins than the executor runs at once leaves cores for pyarrow's decoding threads
            decode_threads = len(batch) < executor.parallelism
            tasks = [
                RewriteTask(
                    ctx,
                    i,
                    plan.bins[i].files,
                    deletion_timestamp,
                    writer,
                    min_row_group_size=min_row_group,
                    decode_threads=decode_threads,
                )
                for i in batch
            ]
            batch_results: list[RewriteResult] = []
            try:
                for result in executor.map(compact_files, tasks):
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


def _refuse_clustering_options(opts: OptimizeOptions, clustered: bool, table_uri: str) -> None:
    """On a table without clustering columns: ``full`` and ``min_cube_size`` mean nothing; ``where`` is refused on a
    clustered table even when it clusters on no column, as Delta does."""
    if clustered:
        from airflow_provider_deltalite.maintenance.clustering.liquid import refuse_where

        refuse_where(opts.where, table_uri)
    for name, given in (("full", opts.full), ("min_cube_size", opts.min_cube_size is not None)):
        if given:
            raise InvalidArgument(
                f"{name} applies only to a liquid-clustered table (one with clustering columns), and this one has none",
                table_uri,
            )


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
    copied = sum(r.files_copied for r in results)
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
        num_bins_deferred=len(plan.deferred),
        bytes_deferred=sum(b.size for b in plan.deferred),
        num_files_copied=copied,
        num_files_reencoded=len(removed) - copied if not dry_run else 0,
        bytes_copied=sum(r.bytes_copied for r in results),
        bytes_uploaded=sum(r.bytes_uploaded for r in results),
    )
