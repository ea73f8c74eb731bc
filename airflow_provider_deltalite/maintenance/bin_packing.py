"""Bin packing for compaction, as the reference does it (pure: sizes in, groups out).

Per partition, candidate files are sorted by size and packed greedily: a file joins the open bin while the bin stays
within the target size, otherwise it starts the next bin. Bins are then packed into batches (one commit each) by
total size. Both steps are deterministic: ties are broken by path.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TypeVar

import numpy as np

from airflow_provider_deltalite.maintenance.option_values import positive_bytes

T = TypeVar("T")


def pack_greedy(
    items: Iterable[T], size: Callable[[T], int], max_bin_size: int, max_items: int | None = None
) -> list[list[T]]:
    """Pack ``items``, in the order given (compaction passes them in ascending size), into consecutive bins of at
    most ``max_bin_size`` total and, with ``max_items``, at most that many items each.

    An item larger than ``max_bin_size`` gets a bin of its own (the reference closes an empty bin first and then
    drops it; the result is the same). Empty bins are never returned.
    """
    bins: list[list[T]] = []
    current: list[T] = []
    total = 0
    for item in items:
        n = size(item)
        if current and (total + n > max_bin_size or (max_items is not None and len(current) >= max_items)):
            bins.append(current)
            current, total = [], 0
        current.append(item)
        total += n
    if current:
        bins.append(current)
    return bins


def pack_runs(
    sizes: np.ndarray, starts: np.ndarray, ends: np.ndarray, max_bin_size: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`pack_greedy` of each run ``sizes[starts[r]:ends[r]]`` (ascending, none negative) at once, for a planner of
    millions of files: every bin as (run, start, end) arrays, runs' bins in order, bins of different runs mixed.

    Each round cuts every run's next bin by a search in the running total of all sizes (it never decreases)."""
    total = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])  # total[i]: the sizes before item i
    runs, firsts, lasts = [], [], []
    at = np.asarray(starts, np.int64).copy()
    ends = np.asarray(ends, np.int64)
    active = np.flatnonzero(at < ends)
    while len(active):
        begin = at[active]
        # the first item past the bin's room closes it (sizes ascend, so every later one would too); the bin
        # always takes its first item, however large
        end = np.searchsorted(total, total[begin] + max_bin_size, side="right") - 1
        end = np.minimum(np.maximum(end, begin + 1), ends[active])
        runs.append(active)
        firsts.append(begin)
        lasts.append(end)
        at[active] = end
        active = active[end < ends[active]]
    if not runs:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    return np.concatenate(runs), np.concatenate(firsts), np.concatenate(lasts)


def group_by(items: Iterable[T], key: Callable[[T], Hashable]) -> dict[Hashable, list[T]]:
    """Group ``items`` by ``key`` keeping first-seen order of the groups and of the items inside each."""
    groups: dict[Hashable, list[T]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return groups


def pack_batches(bin_sizes: Sequence[int], batch_size: int | None) -> list[list[int]]:
    """Group bins (given by their total sizes) into batches of at most ``batch_size`` bytes; indexes out.

    Without a batch size every bin is in one batch. Otherwise bins are taken smallest first, and a new batch starts
    when the current one already reached ``batch_size`` or the next bin would push it over (``binPackBySize``).
    """
    order = sorted(range(len(bin_sizes)), key=lambda i: (bin_sizes[i], i))
    if batch_size is None:
        return [order] if order else []
    batches: list[list[int]] = []
    current: list[int] = []
    total = 0
    for i in order:
        if current and (total >= batch_size or total + bin_sizes[i] > batch_size):
            batches.append(current)
            current, total = [], 0
        current.append(i)
        total += bin_sizes[i]
    if current:
        batches.append(current)
    return batches


def within_bytes(sizes: Sequence[int], limit: int | None, table_uri: str | None = None) -> tuple[list[int], list[int]]:
    """The bins (given by their input bytes, in the order they were planned) a run of at most ``limit`` input bytes
    rewrites, and the ones it defers: indexes out, both in planned order (None: no limit, everything is taken).

    Bins are taken in order while the running total stays within ``limit``; a bin that does not fit what is left is
    deferred and later, smaller bins may still fit (as the planner's budget ranks partitions, and as Iceberg and Amoro
    skip a file group too large for a run). A bin larger than the whole limit is therefore never rewritten under it:
    the limit is a promise about what one run reads, so it is never exceeded; the stats count the bin as deferred.

    Raises:
        InvalidArgument: ``limit`` is not a positive whole number (it is ``max_bytes_to_rewrite``; the planners that
            take it directly, not through their options, are checked here).
    """
    positive_bytes("max_bytes_to_rewrite", limit, table_uri)
    if limit is None:
        return list(range(len(sizes))), []
    taken: list[int] = []
    deferred: list[int] = []
    used = 0
    for i, size in enumerate(sizes):
        if used + size <= limit:
            taken.append(i)
            used += size
        else:
            deferred.append(i)
    return taken, deferred
