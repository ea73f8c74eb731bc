"""OptimizeStats: what an OPTIMIZE run did, named as the Delta reference names its metrics."""

from __future__ import annotations

import re
from collections.abc import Sequence
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
    every commit when ``batch_size`` split the work.
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

    def to_dict(self) -> dict[str, Any]:
        """The stats as a JSON-ready dict with camelCase keys (``numFilesAdded``, ``filesAdded.totalSize``...)."""
        return stats_to_dict(self)
