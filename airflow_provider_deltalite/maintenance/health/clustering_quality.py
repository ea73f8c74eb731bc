"""Clustering quality of one column from the files' min/max statistics: point-query files and overlap depth.

Everything is counted per group (a partition) in O(n log n) without a loop per file: the bounds are replaced by their
dense ranks (any orderable Arrow type, strings included), shifted by ``group * (ranks + 1)`` so that the groups occupy
disjoint key ranges, and sorted once; every count is then a difference of two ``searchsorted`` positions. Counting
"files whose min is at most k" minus "files whose max is below k" over all groups at once only counts files of the
key's own group: a file of an earlier group is in both counts, one of a later group in neither.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc


@dataclass(frozen=True)
class GroupClustering:
    """Per-group sums for one column (arrays indexed by group), from which the figures of `ColumnClustering` follow:
    ``point_query_files = point_query_sum / files_with_stats``, ``average_depth = depth_sum / intervals``."""

    files_with_stats: np.ndarray
    point_query_sum: np.ndarray
    depth_sum: np.ndarray
    intervals: np.ndarray
    max_depth: np.ndarray


def group_clustering(mins: pa.Array, maxs: pa.Array, groups: np.ndarray, n_groups: int) -> GroupClustering:
    """The clustering sums per group of the files whose ``mins[i]`` and ``maxs[i]`` are both set.

    Args:
        mins / maxs: the column's min and max per file (same type, nulls where the file has no statistic).
        groups: the group (partition) index of each file, ``0 <= groups[i] < n_groups``.
    """
    zeros = np.zeros(n_groups, np.int64)
    valid = pc.and_(pc.is_valid(mins), pc.is_valid(maxs)).to_numpy(zero_copy_only=False)
    if not valid.any():
        return GroupClustering(zeros, zeros.astype(np.float64), zeros.copy(), zeros.copy(), zeros.copy())
    keep = pa.array(valid)
    lo_values, hi_values = pc.filter(mins, keep), pc.filter(maxs, keep)
    g = np.asarray(groups, np.int64)[valid]
    n = len(lo_values)
    ranks_np, stride = _ordered_keys(pa.concat_arrays([lo_values, pc.cast(hi_values, lo_values.type)]), n_groups)
    lo = g * stride + ranks_np[:n]
    hi = g * stride + ranks_np[n:]
    # a max below its min (a writer's bug) would count negatively: treat the file as the point of its min
    hi = np.maximum(hi, lo)
    lo_sorted = np.sort(lo)
    hi_sorted = np.sort(hi)

    def covering(keys: np.ndarray) -> np.ndarray:  # files with lo <= k <= hi; sorted keys keep the searches local
        return np.searchsorted(lo_sorted, keys, side="right") - np.searchsorted(hi_sorted, keys, side="left")

    files_with_stats = np.bincount(g, minlength=n_groups).astype(np.int64)
    # a key's group is key // stride: the sorted mins stand for the files, in another order
    point_query_sum = np.bincount(lo_sorted // stride, weights=covering(lo_sorted), minlength=n_groups)

    # elementary intervals [u_j, u_j+1] between consecutive distinct bounds: files with lo <= u_j < hi cover it
    bounds = _distinct_sorted(np.concatenate((lo_sorted, hi_sorted)))
    starts = bounds[:-1]
    open_depth = np.searchsorted(lo_sorted, starts, side="right") - np.searchsorted(hi_sorted, starts, side="right")
    covered = open_depth > 0
    interval_depth = open_depth[covered]
    interval_group = starts[covered] // stride
    # a file whose min equals its max covers one point, an interval of its own, as deep as the files holding it
    points = _distinct_sorted(lo[lo == hi])
    point_depth = covering(points)
    depth = np.concatenate((interval_depth, point_depth)).astype(np.int64)
    depth_group = np.concatenate((interval_group, points // stride)).astype(np.int64)
    depth_sum = np.bincount(depth_group, weights=depth, minlength=n_groups).astype(np.int64)
    intervals = np.bincount(depth_group, minlength=n_groups).astype(np.int64)
    max_depth = np.zeros(n_groups, np.int64)
    np.maximum.at(max_depth, depth_group, depth)
    return GroupClustering(files_with_stats, point_query_sum, depth_sum, intervals, max_depth)


_INT_TYPES = (pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.date32())
_KEY_LIMIT = 1 << 62  # group * stride + key must stay inside int64


def _ordered_keys(values: pa.Array, n_groups: int) -> tuple[np.ndarray, int]:
    """Non-negative int64 keys in the order of ``values`` (no nulls), and a stride above every key such that
    ``n_groups * stride`` fits in int64. Whole numbers and dates are their own keys (shifted to 0) when their span
    allows; strings are ranked through their dictionary (one hash pass, then a sort of the distinct values only);
    anything else is ranked directly."""
    kind = values.type
    if kind in _INT_TYPES or pa.types.is_timestamp(kind):
        whole = pc.cast(values, pa.int32()) if kind == pa.date32() else values  # no direct date32 -> int64 cast
        ints = pc.cast(whole, pa.int64()).to_numpy(zero_copy_only=False)
        low = int(ints.min())
        span = int(ints.max()) - low + 1
        if (span + 1) * n_groups < _KEY_LIMIT:
            return ints - low, span + 1
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind):
        encoded = pc.dictionary_encode(values)
        dictionary_ranks = pc.rank(encoded.dictionary, tiebreaker="dense").to_numpy(zero_copy_only=False)
        keys = dictionary_ranks.astype(np.int64)[encoded.indices.to_numpy(zero_copy_only=False)]
    else:
        keys = pc.rank(values, tiebreaker="dense").to_numpy(zero_copy_only=False).astype(np.int64)
    return keys, int(keys.max()) + 1


def _distinct_sorted(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted (a stable sort merges the two sorted runs it is given in linear time)."""
    ordered = np.sort(values, kind="stable")
    if not len(ordered):
        return ordered
    keep = np.empty(len(ordered), bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]
