"""OPTIMIZE on a liquid-clustered table: cluster new data into cubes, merge small cubes, leave sealed cubes alone.

The columns come from the table's clustering domain (`engine.clustering_domain`); the curve is Hilbert over their range
ids (Z-order for one column), as Delta's ClusteringStrategy. Every file written carries what Delta writes for
clustered files (``clusteringProvider: "liquid"``, ``ZCUBE_ID`` one new UUID per cube, ``ZCUBE_ZORDER_BY`` the JSON list
of the logical column names, ``ZCUBE_ZORDER_CURVE``, ``dataChange: false``), so Spark's next OPTIMIZE sees them as
clustered.

Which files are rewritten (the candidates):

- **other files** (another ``clusteringProvider``, or ``ZCUBE_ZORDER_BY`` naming other columns) are left alone, unless
  ``full``;
- **sealed cubes** (all files of one ``ZCUBE_ID`` on the current columns, at least ``min_cube_size`` bytes) are
  not rewritten, unless ``full``;
- **new data** (files without cube tags) is always clustered, into a new cube of its own;
- **partial cubes** (below ``min_cube_size``) join it, smallest first, only while each is no larger than what is
  already being rewritten (the new data plus the cubes taken so far). A run with no new data rewrites nothing, and an
  append smaller than every partial cube rewrites only itself. Cubes grow like a binary counter: each byte is
  rewritten about log2(min_cube_size / append size) times before it is sealed, instead of on every run as in Delta
  (delta#4304: a 1 GB append made OPTIMIZE rewrite a 41 GB table).

With ``full`` every live file is reclustered, other files and sealed cubes included: Delta's ``OPTIMIZE FULL``, which
its documentation describes as reclustering all records (after changing the clustering columns, say).
Candidates are cut, whole cubes at a time, into new cubes of even size, each at least ``1.5 x min_cube_size`` bytes
unless there is only one (Delta's 150 GiB target cube over its 100 GiB minimum), each
clustered by `runs.cluster_files` (or the shuffle on Spark) into ``round(bytes / target_size)`` files. With
``max_bytes_to_rewrite`` the new cubes are taken in that order while their bytes fit it (`bin_packing.within_bytes`);
the cubes merged into a deferred one stay as they are until a later run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_deltalite.engine.clustering_domain import CLUSTERING_PROVIDER, ClusteringSpec
from airflow_provider_deltalite.engine.data_file_writer import WriterOptions
from airflow_provider_deltalite.engine.errors import InvalidArgument, InvalidTableProperty
from airflow_provider_deltalite.engine.file_actions import live_file_actions
from airflow_provider_deltalite.engine.rewrite import RewriteResult, TableContext
from airflow_provider_deltalite.engine.snapshot import Snapshot
from airflow_provider_deltalite.engine.stats_collect import StatsCollector
from airflow_provider_deltalite.engine.table import Table
from airflow_provider_deltalite.engine.transaction import RetryPolicy
from airflow_provider_deltalite.maintenance.bin_packing import within_bytes
from airflow_provider_deltalite.maintenance.clustering.curves import is_orderable
from airflow_provider_deltalite.maintenance.clustering.runs import (
    TAG_COLUMNS,
    TAG_CUBE_ID,
    cube_tasks,
)
from airflow_provider_deltalite.maintenance.clustering.shuffle import cluster_tasks
from airflow_provider_deltalite.maintenance.executor import Executor
from airflow_provider_deltalite.maintenance.optimize_stats import OptimizeStats, clustering_run_stats, size_metrics
from airflow_provider_deltalite.maintenance.options import DEFAULT_NUM_RANGES, DEFAULT_RUN_BYTES, OptimizeOptions
from airflow_provider_deltalite.maintenance.rewrites import (
    OptimizeProgress,
    commit_rewrite,
    resolve_sizes,
)

# A cube this many target-size files large is sealed: Delta's 100 GiB minCubeSize at its 1 GiB file size.
MIN_CUBE_FILES = 100


@dataclass(frozen=True)
class Cube:
    """Live files sharing one ``ZCUBE_ID`` on the current clustering columns."""

    cube_id: str
    files: tuple[dict[str, Any], ...]

    @property
    def size(self) -> int:
        return sum(int(f["size"]) for f in self.files)


@dataclass(frozen=True)
class NewCube:
    """Files clustered together into one new cube of ``num_files`` files."""

    files: tuple[dict[str, Any], ...]
    num_files: int
    cube_files: int  # of those, files that already belonged to a cube on the current columns

    @property
    def size(self) -> int:
        return sum(int(f["size"]) for f in self.files)


@dataclass(frozen=True)
class ClusteringPlan:
    read_version: int
    columns: tuple[str, ...]
    curve: str
    full: bool
    target_size: int
    min_cube_size: int
    total_considered_files: int
    bins: tuple[NewCube, ...]
    sealed: tuple[Cube, ...]
    partial_kept: tuple[Cube, ...]
    unclustered: int
    other_files: tuple[dict[str, Any], ...]
    merged_cubes: int
    deferred: tuple[NewCube, ...] = ()  # new cubes ``max_bytes_to_rewrite`` left for a later run


def validate_clustering(snapshot: Snapshot, spec: ClusteringSpec) -> None:
    """The checks Delta makes before clustering: an unpartitioned table, orderable columns, each with statistics.

    Raises:
        InvalidArgument: the table is partitioned, or a clustering column's type cannot be ordered.
        InvalidTableProperty: a clustering column has no statistics (beyond ``delta.dataSkippingNumIndexedCols`` or
            outside ``delta.dataSkippingStatsColumns``); the message names it.
    """
    uri = snapshot.table_uri
    if snapshot.partition_columns:
        raise InvalidArgument("a clustered table must not be partitioned, and this one is; nothing was clustered", uri)
    with_stats = StatsCollector(
        snapshot.schema,
        column_mapping_mode=snapshot.column_mapping_mode,
        partition_columns=snapshot.partition_columns,
        configuration=snapshot.properties.explicit,
        table_uri=uri,
    ).column_paths
    for column in spec.columns:
        kind = column.type
        if not is_orderable(kind):
            shown = kind if isinstance(kind, str) else kind.get("type")
            raise InvalidArgument(f"clustering column '{column.name}' has type {shown}, which cannot be ordered", uri)
        if column.dotted not in with_stats:
            raise InvalidTableProperty(
                f"clustering column '{column.name}' has no statistics: it is beyond delta.dataSkippingNumIndexedCols "
                "or not in delta.dataSkippingStatsColumns, and Delta requires statistics for every clustering column",
                uri,
            )


def cube_of(add: Mapping[str, Any]) -> tuple[str, list[str] | None] | None:
    """(``ZCUBE_ID``, the parsed ``ZCUBE_ZORDER_BY``) of a file written by a clustering run; None for other files.

    A ``ZCUBE_ZORDER_BY`` that is not a JSON list of names parses as None (clustered on something else).
    """
    tags = add.get("tags") or {}
    cube_id, columns = tags.get(TAG_CUBE_ID), tags.get(TAG_COLUMNS)
    if not isinstance(cube_id, str) or not isinstance(columns, str):
        return None
    try:
        parsed = json.loads(columns)
    except (ValueError, RecursionError):
        return cube_id, None
    ok = isinstance(parsed, list) and all(isinstance(c, str) for c in parsed)
    return cube_id, parsed if ok else None


def plan_clustering(
    snapshot: Snapshot,
    spec: ClusteringSpec,
    *,
    target_size: int | None = None,
    min_cube_size: int | None = None,
    full: bool = False,
    max_bytes_to_rewrite: int | None = None,
) -> ClusteringPlan:
    """Plan a clustering run without touching data (see the module docstring for the rules)."""
    validate_clustering(snapshot, spec)
    target, _, _ = resolve_sizes(snapshot, target_size, None, None, None)
    min_cube = min_cube_size if min_cube_size is not None else MIN_CUBE_FILES * target
    names = list(spec.names)
    actions = sorted(live_file_actions(snapshot), key=lambda a: a["path"])
    unclustered: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    cubes: dict[str, list[dict[str, Any]]] = {}
    for add in actions:
        provider = add.get("clusteringProvider")
        tagged = cube_of(add)
        if provider not in (None, CLUSTERING_PROVIDER) or (tagged is not None and tagged[1] != names):
            others.append(add)
        elif tagged is not None:
            cubes.setdefault(tagged[0], []).append(add)
        else:
            unclustered.append(add)
    all_cubes = sorted((Cube(k, tuple(v)) for k, v in cubes.items()), key=lambda c: (c.size, c.cube_id))
    # FULL reclusters every record, so nothing counts as sealed
    sealed = () if full else tuple(c for c in all_cubes if c.size >= min_cube)
    partial = all_cubes if full else [c for c in all_cubes if c.size < min_cube]
    fresh = unclustered + (others if full else [])
    taken: list[Cube] = []
    if full:
        taken = partial
    else:
        rewritten = sum(int(f["size"]) for f in fresh)
        for cube in partial:
            if cube.size > rewritten:
                break
            taken.append(cube)
            rewritten += cube.size
    if not fresh and (not taken or (len(taken) == 1 and not full)):
        taken = []  # one cube alone is already clustered (Delta's filterOutSingleZCubes); FULL asks to redo it
    packed = _pack(fresh, taken, min_cube, target)
    kept, left = within_bytes([b.size for b in packed], max_bytes_to_rewrite, snapshot.table_uri)
    bins = [packed[i] for i in kept]
    # _pack cuts whole cubes, so a cube is merged exactly when its files are in a new cube that runs
    running = {f["path"] for b in bins for f in b.files}
    taken = [c for c in taken if c.files[0]["path"] in running]
    taken_ids = {c.cube_id for c in taken}
    return ClusteringPlan(
        read_version=snapshot.version,
        columns=spec.names,
        curve="hilbert" if len(names) > 1 else "zorder",
        full=full,
        target_size=target,
        min_cube_size=min_cube,
        total_considered_files=len(actions),
        bins=tuple(bins),
        sealed=sealed,
        partial_kept=tuple(c for c in partial if c.cube_id not in taken_ids),
        unclustered=len(unclustered),
        other_files=tuple(others),
        merged_cubes=len(taken),
        deferred=tuple(packed[i] for i in left),
    )


def _pack(fresh: list[dict[str, Any]], cubes: list[Cube], min_cube: int, target: int) -> list[NewCube]:
    """The fresh files one by one, then whole cubes, cut in order into ``n = floor(bytes / (1.5 x min_cube))`` new
    cubes of even size (at least one): every cube but a lone one starts at least 1.5 x ``min_cube`` large, so it
    comes out sealed even when clustering compresses it better, and none exceeds about 3 x ``min_cube``."""
    items: list[tuple[tuple[dict[str, Any], ...], bool]] = [((f,), False) for f in fresh]
    items += [(c.files, True) for c in cubes]
    total = sum(int(f["size"]) for files, _ in items for f in files)
    count = max(1, total // (min_cube * 3 // 2))
    bins: list[NewCube] = []
    current: list[dict[str, Any]] = []
    from_cubes = size = done = 0
    for files, is_cube in items:
        current.extend(files)
        item_size = sum(int(f["size"]) for f in files)
        size += item_size
        done += item_size
        from_cubes += len(files) if is_cube else 0
        if len(bins) < count - 1 and done * count >= total * (len(bins) + 1):
            bins.append(NewCube(tuple(current), max(1, round(size / target)), from_cubes))
            current, from_cubes, size = [], 0, 0
    if current:
        bins.append(NewCube(tuple(current), max(1, round(size / target)), from_cubes))
    return bins


def refuse_where(where: str | None, table_uri: str | None) -> None:
    """Delta refuses a partition predicate on a clustered table (DELTA_CLUSTERING_WITH_PARTITION_PREDICATE).

    Raises:
        InvalidArgument: ``where`` was given.
    """
    if where:
        raise InvalidArgument(
            "optimize on a clustered table takes no where predicate: it clusters the table's new data and small "
            f"cubes, as Delta does (remove where={where!r})",
            table_uri,
        )


def cluster_table(
    table: Table,
    snapshot: Snapshot,
    spec: ClusteringSpec,
    opts: OptimizeOptions,
    executor: Executor,
    *,
    writer_options: WriterOptions | None = None,
    retry: RetryPolicy | None = None,
    progress: Callable[[OptimizeProgress], None] | None = None,
) -> OptimizeStats:
    """OPTIMIZE on a clustered table (`optimize` calls this; see the module docstring).

    Raises:
        InvalidArgument: ``where`` was given (Delta refuses partition predicates on clustered tables), the table is
            partitioned, or a column cannot be ordered.
        InvalidTableProperty: a clustering column has no statistics.
        ConcurrentModification: a concurrent commit removed one of the rewritten files.
    """
    refuse_where(opts.where, snapshot.table_uri)
    start_ms = int(time.time() * 1000)
    plan = plan_clustering(
        snapshot,
        spec,
        target_size=opts.target_size,
        min_cube_size=opts.min_cube_size,
        full=opts.full,
        max_bytes_to_rewrite=opts.max_bytes_to_rewrite,
    )
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
        num_ranges=DEFAULT_NUM_RANGES,
        noise=True,
        run_bytes=DEFAULT_RUN_BYTES,
        writer=writer,
        deletion_timestamp=deletion_timestamp,
    )
    results = cluster_tasks(tasks, executor, progress)
    for result in results:
        for add in result.adds:
            add["clusteringProvider"] = CLUSTERING_PROVIDER  # what makes Delta's next OPTIMIZE see them as clustered
    parameters = {
        "predicate": [],
        "zOrderBy": [],
        "clusterBy": list(plan.columns),
        "auto": False,
        "isFull": plan.full,
    }
    version = commit_rewrite(table, snapshot, parameters, results, retry)
    return _stats(plan, executor, start_ms, results, version)


def _stats(
    plan: ClusteringPlan,
    executor: Executor,
    start_ms: int,
    results: list[RewriteResult],
    version: int | None,
    *,
    dry_run: bool = False,
) -> OptimizeStats:
    rewritten = [f for b in plan.bins for f in b.files]
    names = list(plan.columns)
    from_cubes = [f for f in rewritten if (c := cube_of(f)) is not None and c[1] == names]
    in_cubes = {f["path"] for f in from_cubes}
    left = [f for c in (*plan.sealed, *plan.partial_kept) for f in c.files]
    if not plan.full:
        left += list(plan.other_files)
    clustering_stats = {
        "clusteringColumns": names,
        "curve": plan.curve,
        "isFull": plan.full,
        "minCubeSize": plan.min_cube_size,
        "inputZCubeFiles": size_metrics(from_cubes),
        "inputOtherFiles": size_metrics([f for f in rewritten if f["path"] not in in_cubes]),
        "inputNumZCubes": plan.merged_cubes,
        "mergedFiles": size_metrics(rewritten),
        "numOutputZCubes": len(plan.bins),
        "numSealedZCubes": len(plan.sealed),
        "numPartialZCubesKept": len(plan.partial_kept),
        "skippedFiles": size_metrics(left),
        "skippedOtherFiles": size_metrics([] if plan.full else list(plan.other_files)),
    }
    return clustering_run_stats(
        plan.bins,
        results,
        executor=executor,
        start_ms=start_ms,
        read_version=plan.read_version,
        version=version,
        total_considered_files=plan.total_considered_files,
        partitions_optimized=1 if plan.bins else 0,
        dry_run=dry_run,
        clustering_stats=clustering_stats,
        deferred=plan.deferred,
    )
