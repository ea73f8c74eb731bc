"""The compaction planner's packing rules, on sizes alone (pure functions)."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_deltalite.maintenance.bin_packing import group_by, pack_batches, pack_greedy, pack_runs


def test_greedy_packing_closes_a_bin_when_the_next_file_does_not_fit() -> None:
    assert pack_greedy([1, 2, 3, 4, 5], lambda x: x, 6) == [[1, 2, 3], [4], [5]]
    assert pack_greedy([3, 3, 3], lambda x: x, 6) == [[3, 3], [3]]


def test_a_file_larger_than_the_bin_stands_alone_and_no_bin_is_empty() -> None:
    assert pack_greedy([10], lambda x: x, 4) == [[10]]
    assert pack_greedy([1, 10, 1], lambda x: x, 4) == [[1], [10], [1]]
    assert pack_greedy([], lambda x: x, 4) == []


@given(st.lists(st.integers(min_value=1, max_value=100), max_size=40), st.integers(min_value=1, max_value=150))
def test_greedy_packing_keeps_order_and_respects_the_limit(sizes: list[int], limit: int) -> None:
    bins = pack_greedy(sorted(sizes), lambda x: x, limit)
    assert [s for b in bins for s in b] == sorted(sizes)
    assert all(sum(b) <= limit or len(b) == 1 for b in bins)
    # greedy: the first file of every bin after the first did not fit into the bin before it
    assert all(sum(prev) + nxt[0] > limit for prev, nxt in itertools.pairwise(bins))


def test_batches_without_a_size_hold_every_bin_smallest_first() -> None:
    assert pack_batches([30, 10, 20], None) == [[1, 2, 0]]
    assert pack_batches([], None) == []


def test_batches_start_anew_when_full_or_when_the_next_bin_would_overflow() -> None:
    # sorted sizes 10, 20, 30, 40: 10+20=30 <= 35, +30 would overflow; 30 alone; 40 alone (exceeds the limit itself)
    assert pack_batches([40, 10, 30, 20], 35) == [[1, 3], [2], [0]]
    # a batch that already reached the size closes even if the next bin is small
    assert pack_batches([5, 5, 5], 5) == [[0], [1], [2]]


def test_group_by_keeps_first_seen_order() -> None:
    assert group_by([("b", 1), ("a", 2), ("b", 3)], lambda x: x[0]) == {"b": [("b", 1), ("b", 3)], "a": [("a", 2)]}


@given(st.lists(st.lists(st.integers(0, 50), max_size=12), max_size=4), st.integers(1, 80))
def test_runs_are_packed_as_pack_greedy_packs_each(runs: list[list[int]], limit: int) -> None:
    sizes = [s for run in runs for s in sorted(run)]
    ends = np.cumsum([len(r) for r in runs], dtype=np.int64)
    starts = ends - [len(r) for r in runs]
    run, first, last = pack_runs(np.array(sizes, np.int64), starts, ends, limit)
    order = np.argsort(first, kind="stable")
    got = [(int(r), list(range(a, b))) for r, a, b in zip(run[order], first[order], last[order], strict=True)]
    expected = [
        (r, b)
        for r in range(len(runs))
        for b in pack_greedy(list(range(int(starts[r]), int(ends[r]))), lambda i: sizes[i], limit)
    ]
    assert got == expected
