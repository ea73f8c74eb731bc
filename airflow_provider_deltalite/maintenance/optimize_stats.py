"""OptimizeStats: what an OPTIMIZE run did, named as the Delta reference names its metrics."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

_CAMEL = re.compile(r"_([a-z])")


def camel_case(name: str) -> str:
    """``num_files_added`` -> ``numFilesAdded``."""
    return _CAMEL.sub(lambda m: m.group(1).upper(), name)


def stats_to_dict(stats: Any) -> dict[str, Any]:
    """A stats dataclass as a plain JSON-ready dict with the reference's camelCase keys (nested dataclasses too)."""
    out: dict[str, Any] = {}
    for f in fields(stats):
        value = getattr(stats, f.name)
        if hasattr(value, "__dataclass_fields__"):
            value = stats_to_dict(value)
        elif isinstance(value, tuple):
            value = list(value)
        out[camel_case(f.name)] = value
    return out


@dataclass(frozen=True)
class FileSizeMetrics:
    """Sizes of a set of files: ``{min, max, avg, totalFiles, totalSize}`` (min/max null and avg 0 when empty)."""

    min: int | None
    max: int | None
    avg: float
    total_files: int
    total_size: int

    @classmethod
    def of(cls, sizes: Sequence[int]) -> FileSizeMetrics:
        if not sizes:
            return cls(None, None, 0.0, 0, 0)
        total = int(sum(sizes))
        return cls(int(min(sizes)), int(max(sizes)), total / len(sizes), len(sizes), total)


@dataclass(frozen=True)
class OptimizeStats:
    """The result of `optimize` (XCom carries ``to_dict()``).

    Field names follow the reference's OptimizeMetrics; ``committed_version`` is the last version committed (None
    when nothing was committed, e.g. on an already optimized table or a dry run) and ``committed_versions`` lists
    every commit when ``batch_size`` split the work. ``num_bins_deferred`` and ``bytes_deferred`` count the bins
    (partitions for Z-order, new cubes for clustering) and their input bytes that ``max_bytes_to_rewrite`` left for a
    later run. ``num_files_copied`` counts the compacted files of which at least one row group was copied byte for
    byte (stitched), ``num_files_reencoded`` those whose rows were all decoded and encoded again, and
    ``bytes_copied`` the column-chunk bytes copied; ``bytes_uploaded`` the bytes the workers wrote to the store
    (on S3 a stitched file is composed on the store from ranges of its inputs: only its re-encoded rows, page indexes
    and footer are sent).
    """

    num_files_added: int
    num_files_removed: int
    files_added: FileSizeMetrics
    files_removed: FileSizeMetrics
    partitions_optimized: int
    num_bins: int
    num_batches: int
    total_considered_files: int
    total_files_skipped: int
    num_deletion_vectors_removed: int
    num_deletion_vector_rows_removed: int
    z_order_stats: dict[str, Any] | None
    start_time_ms: int
    end_time_ms: int
    read_version: int
    committed_version: int | None
    committed_versions: tuple[int, ...]
    executor: str
    total_cluster_parallelism: int
    dry_run: bool = False
    plan: list[dict[str, Any]] | None = field(default=None)
    # OPTIMIZE on a clustered table (Delta's ``clusteringStats``): cubes read, sealed, merged and written
    clustering_stats: dict[str, Any] | None = field(default=None)
    num_bins_deferred: int = 0
    bytes_deferred: int = 0
    num_files_copied: int = 0
    num_files_reencoded: int = 0
    bytes_copied: int = 0
    bytes_uploaded: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The stats as a JSON-ready dict with camelCase keys (``numFilesAdded``, ``filesAdded.totalSize``...)."""
        return stats_to_dict(self)


def size_metrics(files: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """``{"num", "size"}`` of some add actions, the shape of the reference's ZOrderFileStats."""
    return {"num": len(files), "size": sum(int(f["size"]) for f in files)}


def clustering_run_stats(
    bins: Sequence[Any],
    results: Sequence[Any],
    *,
    executor: Any,
    start_ms: int,
    read_version: int,
    version: int | None,
    total_considered_files: int,
    partitions_optimized: int,
    dry_run: bool,
    z_order_stats: dict[str, Any] | None = None,
    clustering_stats: dict[str, Any] | None = None,
    deferred: Sequence[Any] = (),
) -> OptimizeStats:
    """The OptimizeStats of a clustering run (Z-order or liquid): ``bins`` have ``files``, ``size``, ``num_files``
    (and ``partition_values`` for Z-order), ``results`` are the tasks' RewriteResults; a dry run counts the plan;
    ``deferred`` are the bins ``max_bytes_to_rewrite`` left for a later run."""
    rewritten = [f for b in bins for f in b.files]
    removed = (
        [int(x["size"]) for r in results for x in r.removes] if not dry_run else [int(f["size"]) for f in rewritten]
    )
    added = [int(a["size"]) for r in results for a in r.adds]
    dvs = [f["deletionVector"] for f in rewritten if f.get("deletionVector")]
    plan = None
    if dry_run:
        plan = [
            {
                **({"partitionValues": dict(b.partition_values)} if hasattr(b, "partition_values") else {}),
                "files": [f["path"] for f in b.files],
                "numFiles": len(b.files),
                "size": b.size,
                "outputFiles": b.num_files,
            }
            for b in bins
        ]
    return OptimizeStats(
        num_files_added=len(added),
        num_files_removed=len(removed),
        files_added=FileSizeMetrics.of(added),
        files_removed=FileSizeMetrics.of(removed),
        partitions_optimized=partitions_optimized,
        num_bins=len(bins),
        num_batches=1,
        total_considered_files=total_considered_files,
        total_files_skipped=total_considered_files - len(removed),
        num_deletion_vectors_removed=len(dvs),
        num_deletion_vector_rows_removed=sum(int(d.get("cardinality") or 0) for d in dvs),
        z_order_stats=z_order_stats,
        start_time_ms=start_ms,
        end_time_ms=int(time.time() * 1000),
        read_version=read_version,
        committed_version=version,
        committed_versions=(version,) if version is not None else (),
        executor=executor.name,
        total_cluster_parallelism=executor.parallelism,
        dry_run=dry_run,
        plan=plan,
        clustering_stats=clustering_stats,
        num_bins_deferred=len(deferred),
        bytes_deferred=sum(b.size for b in deferred),
        num_files_reencoded=0 if dry_run else len(removed),  # clustering sorts rows: every file is re-encoded
    )
