"""File-size histograms: how many files (and bytes) fall into each bucket of a set of edges.

One counting function for every histogram deltalite prints: `table_health`'s log-scale buckets
(`metrics.SIZE_BUCKET_EDGES`) and `deltalite describe`'s coarser ones (`cli/documents.size_histogram`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from airflow_provider_deltalite.maintenance.health.metrics import SIZE_BUCKET_EDGES, SizeBucket


def bucket_counts(sizes: np.ndarray, edges: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Files and bytes per bucket: bucket ``i`` holds the sizes in ``[edges[i], edges[i+1])``, the last one every size
    at or above ``edges[-1]``; a size below ``edges[0]`` counts in bucket 0. Returns two int64 arrays of
    ``len(edges)`` entries (counts, byte sums)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    index = np.searchsorted(np.asarray(edges, dtype=np.int64), sizes, side="right") - 1
    np.clip(index, 0, len(edges) - 1, out=index)
    counts = np.bincount(index, minlength=len(edges)).astype(np.int64)
    # byte sums as integers: float weights would round sums beyond 2**53
    order = np.argsort(index, kind="stable")
    sorted_index = index[order]
    cumulative = np.concatenate(([0], np.cumsum(sizes[order], dtype=np.int64)))
    buckets = np.arange(len(edges))
    starts = np.searchsorted(sorted_index, buckets, side="left")
    ends = np.searchsorted(sorted_index, buckets, side="right")
    sums = cumulative[ends] - cumulative[starts]
    return counts, sums


def size_buckets(sizes: np.ndarray, edges: Sequence[int] = SIZE_BUCKET_EDGES) -> tuple[SizeBucket, ...]:
    """The histogram of ``sizes`` as `SizeBucket`s (every bucket, empty ones included)."""
    counts, sums = bucket_counts(sizes, edges)
    return buckets_of(counts, sums, edges)


def buckets_of(
    counts: np.ndarray, sums: np.ndarray, edges: Sequence[int] = SIZE_BUCKET_EDGES
) -> tuple[SizeBucket, ...]:
    """`SizeBucket`s from files and bytes per bucket (`bucket_counts`, summed over batches)."""
    uppers: list[int | None] = [*edges[1:], None]
    return tuple(
        SizeBucket(lower=int(lo), upper=None if up is None else int(up), files=int(c), bytes=int(b))
        for lo, up, c, b in zip(edges, uppers, counts, sums, strict=True)
    )
