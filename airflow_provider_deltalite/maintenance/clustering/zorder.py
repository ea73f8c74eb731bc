"""Z-ORDER / Hilbert clustering: rewrite each partition so rows close on the curve share files, incrementally.

Every partition matching ``where`` is one bin with all its files (as the reference does), rewritten into
``max(1, round(bytes / target_size))`` files along the curve (see `runs`). Unlike the reference and
delta-rs, a run is incremental: the files it writes are tagged with the columns, the curve and a cube id, and a later
run with the same columns and curve skips every partition whose files all still belong to one such cube (no new
files arrived since). Changing the columns or the curve re-clusters everything. With ``max_bytes_to_rewrite`` the
partitions are taken in order while their bytes fit it (`bin_packing.within_bytes`); the rest wait for a later run.

Example:
    >>> stats = zorder(DeltaTable("/data/flows"), ["sourceIP", "destIP"], curve="hilbert")  # doctest: +SKIP
    >>> stats.z_order_stats["numOutputCubes"]  # doctest: +SKIP
    4
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_deltalite.engine.clustering_domain import is_clustered
from airflow_provider_deltalite.engine.data_file_writer import WriterOptions
from airflow_provider_deltalite.engine.errors import InvalidArgument
from airflow_provider_deltalite.engine.expressions import column_path, format_column
from airflow_provider_deltalite.engine.file_actions import ensure_can_add_files, live_file_actions
from airflow_provider_deltalite.engine.rewrite import RewriteResult, TableContext
from airflow_provider_deltalite.engine.schema import find_field
from airflow_provider_deltalite.engine.snapshot import Snapshot
from airflow_provider_deltalite.engine.stats_collect import StatsCollector
from airflow_provider_deltalite.engine.table import Table
from airflow_provider_deltalite.engine.transaction import RetryPolicy
from airflow_provider_deltalite.maintenance.bin_packing import group_by, within_bytes
from airflow_provider_deltalite.maintenance.clustering.curves import is_orderable
from airflow_provider_deltalite.maintenance.clustering.runs import (
    TAG_COLUMNS,
    TAG_CUBE_ID,
    TAG_CURVE,
    cube_tasks,
)
from airflow_provider_deltalite.maintenance.clustering.shuffle import cluster_tasks
from airflow_provider_deltalite.maintenance.executor import Executor, LocalExecutor
from airflow_provider_deltalite.maintenance.history.record import recorded
from airflow_provider_deltalite.maintenance.optimize_stats import OptimizeStats, clustering_run_stats, size_metrics
from airflow_provider_deltalite.maintenance.options import CURVES, ZOrderOptions
from airflow_provider_deltalite.maintenance.rewrites import (
    OptimizeProgress,
    commit_rewrite,
    considered_files,
    resolve_sizes,
)

MAX_COLUMNS = 32


@dataclass(frozen=True)
class ClusterBin:
    """All files of one partition, rewritten into ``num_files`` files."""

    partition_values: Mapping[str, str | None]
    files: tuple[dict[str, Any], ...]
    num_files: int
    cube_files: int  # files that already belonged to a cube on the same columns and curve

    @property
    def size(self) -> int:
        return sum(int(f["size"]) for f in self.files)


@dataclass(frozen=True)
class ZOrderPlan:
    read_version: int
    predicate: str | None
    columns: tuple[str, ...]
    curve: str
    target_size: int
    total_considered_files: int
    bins: tuple[ClusterBin, ...]
    skipped_cubes: int
    skipped_files: tuple[dict[str, Any], ...]
    deferred: tuple[ClusterBin, ...] = ()  # partitions ``max_bytes_to_rewrite`` left for a later run


def validate_columns(snapshot: Snapshot, columns: Sequence[str]) -> tuple[str, ...]:
    """The clustering columns as the schema spells them, or a clear error naming the column and the reason.

    Raises:
        InvalidArgument: no column, more than 32, a duplicate, a partition column, an unknown column, a column that is
            not orderable (struct, array, map), or one without statistics.
    """
    uri = snapshot.table_uri
    if not columns:
        raise InvalidArgument("zorder needs at least one column", uri)
    if len(columns) > MAX_COLUMNS:
        raise InvalidArgument(f"zorder takes at most {MAX_COLUMNS} columns, got {len(columns)}", uri)
    partition = {c.lower() for c in snapshot.partition_columns}
    with_stats = StatsCollector(
        snapshot.schema,
        column_mapping_mode=snapshot.column_mapping_mode,
        partition_columns=snapshot.partition_columns,
        configuration=snapshot.properties.explicit,
        table_uri=uri,
    ).column_paths
    resolved: list[str] = []
    for text in columns:
        path = column_path(text)
        if path[0].lower() in partition and len(path) == 1:
            raise InvalidArgument(
                f"zorder column '{text}' is a partition column; every file holds one value of it already", uri
            )
        field, names = find_field(snapshot.schema["fields"], path)
        if field is None:
            raise InvalidArgument(f"zorder column '{text}' does not exist in the table", uri)
        kind = field["type"]
        if not is_orderable(kind):
            shown = kind if isinstance(kind, str) else kind["type"]
            raise InvalidArgument(f"zorder column '{text}' has type {shown}, which cannot be ordered", uri)
        dotted = ".".join(names)
        if dotted not in with_stats:
            raise InvalidArgument(
                f"zorder column '{text}' has no statistics, so clustering on it cannot help skipping: it is beyond "
                "delta.dataSkippingNumIndexedCols or not in delta.dataSkippingStatsColumns",
                uri,
            )
        name = format_column(names)
        if name in resolved:
            raise InvalidArgument(f"zorder column '{text}' is named twice", uri)
        resolved.append(name)
    return tuple(resolved)


def plan_zorder(
    snapshot: Snapshot,
    columns: Sequence[str],
    *,
    curve: str = "zorder",
    where: str | None = None,
    target_size: int | None = None,
    max_bytes_to_rewrite: int | None = None,
) -> ZOrderPlan:
    """Plan a clustering run without touching data: one bin per partition, cubes already in place skipped, and the
    partitions beyond ``max_bytes_to_rewrite`` deferred."""
    uri = snapshot.table_uri
    if curve not in CURVES:
        raise InvalidArgument(f"curve must be one of {', '.join(CURVES)}, got {curve!r}", uri)
    names = validate_columns(snapshot, columns)
    target, _, _ = resolve_sizes(snapshot, target_size, None, None, None)
    indexes = considered_files(snapshot, where)
    paths = snapshot.files.column("path").to_pylist()
    actions = {a["path"]: a for a in live_file_actions(snapshot, [paths[i] for i in indexes])}
    typed = snapshot.partition_values
    keys = list(zip(*[c.to_pylist() for c in typed.columns], strict=True)) if typed.num_columns else None
    groups = group_by(indexes, lambda i: keys[i] if keys is not None else ())
    columns_tag = json.dumps(list(names), separators=(",", ":"))
    bins: list[ClusterBin] = []
    skipped: list[dict[str, Any]] = []
    skipped_cubes = 0
    for members in groups.values():
        files = sorted((actions[paths[i]] for i in members), key=lambda a: a["path"])
        in_cube = [f for f in files if _cube_of(f, columns_tag, curve) is not None]
        cubes = {_cube_of(f, columns_tag, curve) for f in in_cube}
        if len(in_cube) == len(files) and len(cubes) == 1:
            skipped.extend(files)  # clustered by an earlier run and nothing arrived since
            skipped_cubes += 1
            continue
        size = sum(int(f["size"]) for f in files)
        bins.append(
            ClusterBin(
                partition_values=dict(files[0].get("partitionValues") or {}),
                files=tuple(files),
                num_files=max(1, round(size / target)),
                cube_files=len(in_cube),
            )
        )
    taken, left = within_bytes([b.size for b in bins], max_bytes_to_rewrite, uri)
    return ZOrderPlan(
        read_version=snapshot.version,
        predicate=where,
        columns=names,
        curve=curve,
        target_size=target,
        total_considered_files=len(indexes),
        bins=tuple(bins[i] for i in taken),
        skipped_cubes=skipped_cubes,
        skipped_files=tuple(skipped),
        deferred=tuple(bins[i] for i in left),
    )


def _cube_of(add: Mapping[str, Any], columns_tag: str, curve: str) -> str | None:
    tags = add.get("tags") or {}
    if tags.get(TAG_COLUMNS) == columns_tag and tags.get(TAG_CURVE) == curve:
        return tags.get(TAG_CUBE_ID)
    return None


def refuse_clustered(snapshot: Snapshot, columns: Sequence[str]) -> None:
    """Delta refuses ZORDER BY on a liquid-clustered table (DELTA_CLUSTERING_WITH_ZORDER_BY): its layout is the
    clustering's, which `optimize` maintains.

    Raises:
        InvalidArgument: the table has the ``clustering`` feature.
    """
    if is_clustered(snapshot.protocol):
        raise InvalidArgument(
            f"zorder cannot reorder a liquid-clustered table (zorder by {', '.join(columns)}): run optimize, "
            "which clusters such tables on their clustering columns",
            snapshot.table_uri,
        )


@recorded("zorder")
def zorder(
    table: Table,
    columns: Sequence[str] | ZOrderOptions,
    *,
    executor: Executor | None = None,
    max_concurrent_tasks: int | None = None,
    writer_options: WriterOptions | None = None,
    retry: RetryPolicy | None = None,
    progress: Callable[[OptimizeProgress], None] | None = None,
    snapshot: Snapshot | None = None,
    **fields: Any,
) -> OptimizeStats:
    """Cluster ``table`` along ``curve`` over ``columns`` (see the module docstring).

    Args:
        table: the table.
        columns: the clustering columns, or a whole `ZOrderOptions` (``columns``, ``curve``, ``where``,
            ``target_size``, ``dry_run``, ``num_ranges``, ``noise``, ``run_bytes``, ``max_bytes_to_rewrite``). With a
            list of columns, pass the other fields as keyword arguments.
        executor: where partitions are clustered (default `LocalExecutor`).
        max_concurrent_tasks: threads of the default local executor.
        writer_options: Parquet encoding of the new files.
        retry: the commit retry policy.
        progress: called after every partition.
        snapshot: the table's snapshot to plan from when the caller has loaded it already (default: the latest).

    Returns:
        OptimizeStats with ``z_order_stats``; ``committed_version`` None when every partition was already clustered.

    Raises:
        InvalidArgument: a column or the curve is invalid (see `validate_columns`), or the table is liquid-clustered
            (`optimize` clusters it).
        InvalidExpression: ``where`` is invalid or references a non-partition column.
        ProtocolNotSupported: the table has a feature deltalite cannot write.
        ConcurrentModification: a concurrent commit removed one of the rewritten files.
    """
    if isinstance(columns, ZOrderOptions):
        opts = ZOrderOptions.resolve(columns, fields, table.uri)
    else:
        opts = ZOrderOptions.build({"columns": columns, **fields}, table.uri)
    start_ms = int(time.time() * 1000)
    snapshot = table.planning_snapshot(snapshot, where=opts.where, tasks=executor)
    refuse_clustered(snapshot, opts.columns)
    ensure_can_add_files(snapshot)
    plan = plan_zorder(
        snapshot,
        opts.columns,
        curve=opts.curve,
        where=opts.where,
        target_size=opts.target_size,
        max_bytes_to_rewrite=opts.max_bytes_to_rewrite,
    )
    owned = executor is None
    executor = executor or LocalExecutor(max_concurrent_tasks)
    try:
        if opts.dry_run or not plan.bins:
            return _stats(plan, executor, start_ms, [], None, dry_run=opts.dry_run)
        ctx = TableContext.from_snapshot(snapshot)
        writer = writer_options or WriterOptions()
        deletion_timestamp = int(time.time() * 1000)
        tasks = cube_tasks(
            ctx,
            plan.bins,
            columns=plan.columns,
            curve=plan.curve,
            num_ranges=opts.num_ranges,
            noise=opts.noise,
            run_bytes=opts.run_bytes,
            writer=writer,
            deletion_timestamp=deletion_timestamp,
        )
        results = cluster_tasks(tasks, executor, progress)
        parameters = {
            "predicate": [plan.predicate] if plan.predicate else [],
            "zOrderBy": list(plan.columns),
            "curve": plan.curve,
            "auto": False,
        }
        version = commit_rewrite(table, snapshot, parameters, results, retry)
        return _stats(plan, executor, start_ms, results, version)
    finally:
        if owned:
            executor.close()


def _stats(
    plan: ZOrderPlan,
    executor: Executor,
    start_ms: int,
    results: list[RewriteResult],
    version: int | None,
    *,
    dry_run: bool = False,
) -> OptimizeStats:
    rewritten = [f for b in plan.bins for f in b.files]
    columns_tag = json.dumps(list(plan.columns), separators=(",", ":"))
    in_cubes = [f for f in rewritten if _cube_of(f, columns_tag, plan.curve) is not None]
    others = [f for f in rewritten if _cube_of(f, columns_tag, plan.curve) is None]
    z_order_stats = {
        "strategyName": "incremental" if plan.skipped_cubes else "all",
        "curve": plan.curve,
        "columns": list(plan.columns),
        "inputCubeFiles": size_metrics(in_cubes),
        "inputOtherFiles": size_metrics(others),
        "inputNumCubes": len({_cube_of(f, columns_tag, plan.curve) for f in in_cubes}),
        "mergedFiles": size_metrics(rewritten),
        "numOutputCubes": len(plan.bins),
        "numSkippedCubes": plan.skipped_cubes,
        "skippedCubeFiles": size_metrics(plan.skipped_files),
    }
    return clustering_run_stats(
        plan.bins,
        results,
        executor=executor,
        start_ms=start_ms,
        read_version=plan.read_version,
        version=version,
        total_considered_files=plan.total_considered_files,
        partitions_optimized=len(plan.bins),
        dry_run=dry_run,
        z_order_stats=z_order_stats,
        deferred=plan.deferred,
    )
