"""Curve keys on hand-computed inputs, and the curves' defining properties checked by brute force."""

from __future__ import annotations

import datetime as dt
import itertools
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_deltalite.maintenance.clustering.curves import (
    aligned_splits,
    bit_length,
    bits_for,
    compare_keys,
    curve_keys,
    hilbert_index,
    interleave_bits,
    key_order,
    range_boundaries,
    range_ids,
)


def _u64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.uint64)


def test_interleaving_of_97_and_214() -> None:
    # x = 0110_0001, y = 1101_0110; bit pairs (x, y) from bit 7 down: 01 11 10 01 00 01 01 10
    assert interleave_bits([_u64(97), _u64(214)], bits=8).tolist() == [[0b0111100100010110]]
    # the reference's 32-bit form gives the same number: the upper 24 bits of both ids are 0
    assert interleave_bits([_u64(97), _u64(214)], bits=32).tolist() == [[30998]]


def test_three_columns_and_the_first_column_is_most_significant() -> None:
    # x=1 (01), y=2 (10), z=3 (11) with 2 bits: bit 1 of (x, y, z) = 0 1 1, bit 0 = 1 0 1 -> 011101
    assert interleave_bits([_u64(1), _u64(2), _u64(3)], bits=2).tolist() == [[0b011101]]
    assert interleave_bits([_u64(1, 0), _u64(0, 1)], bits=1).tolist() == [[0b10], [0b01]]


def test_one_column_is_its_range_order() -> None:
    ids = _u64(5, 0, 999, 3)
    assert curve_keys([ids], "zorder")[:, 0].tolist() == [5, 0, 999, 3]
    assert curve_keys([ids], "hilbert")[:, 0].tolist() == [5, 0, 999, 3]


def test_keys_wider_than_64_bits_use_more_words() -> None:
    # 8 columns x 10 bits (1000 ranges) = 80 bits: two words, the key right-aligned, word 0 most significant
    ids = [_u64(1023) for _ in range(8)]
    keys = curve_keys(ids, "zorder", num_ranges=1000)
    assert keys.shape == (1, 2)
    assert keys.tolist() == [[(1 << 16) - 1, (1 << 64) - 1]]
    assert bits_for(1000) == 10 and bits_for(2) == 1 and bits_for(1024) == 10 and bits_for(1025) == 11


@pytest.mark.parametrize(("dims", "bits"), [(2, 1), (2, 3), (3, 2), (4, 2)])
def test_hilbert_visits_every_cell_once_and_steps_to_a_neighbour(dims: int, bits: int) -> None:
    cells = list(itertools.product(range(1 << bits), repeat=dims))
    ids = [np.array([c[d] for c in cells], np.uint64) for d in range(dims)]
    index = hilbert_index(ids, bits)[:, 0]
    assert sorted(index.tolist()) == list(range(len(cells)))  # a bijection onto 0 .. 2^(dims*bits) - 1
    walk = [cells[i] for i in np.argsort(index)]
    assert walk[0] == (0,) * dims
    for a, b in itertools.pairwise(walk):
        assert sum(abs(x - y) for x, y in zip(a, b, strict=True)) == 1, (a, b)


def test_range_ids_of_strings_nulls_and_long_common_prefixes() -> None:
    prefix = "https://example.com/very/long/common/prefix/"
    sample = pa.array([prefix + s for s in ["d", "a", "c", "b"]] + [None])
    boundaries = range_boundaries(sample, 4)
    # sorted non-null sample a b c d; quantile positions 1, 2, 3 -> b c d
    assert [b.decode() for b in boundaries] == [prefix + "b", prefix + "c", prefix + "d"]
    values = pa.array([prefix + "a", prefix + "b", prefix + "bb", None, prefix + "z", "a"])
    assert range_ids(values, boundaries).tolist() == [0, 1, 1, 0, 3, 0]


def test_range_ids_of_other_types() -> None:
    floats = pa.array([3.0, float("nan"), -1.0, None, 10.0])
    # sorted sample 0 5 10 NaN, positions 1 2 3 -> boundaries 5 10 NaN (NaN sorts above every number)
    assert range_ids(floats, range_boundaries(pa.array([0.0, 5.0, 10.0, float("nan")]), 4)).tolist() == [
        0,
        3,
        0,
        0,
        2,
    ]
    days = pa.array([dt.date(2024, 1, 1), dt.date(2020, 1, 1), None])
    assert range_ids(
        days, range_boundaries(pa.array([dt.date(2021, 1, 1)] * 3 + [dt.date(2023, 1, 1)]), 2)
    ).tolist() == [
        1,
        0,
        0,
    ]
    stamps = pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.UTC), None], pa.timestamp("us", tz="UTC"))
    boundaries = range_boundaries(pa.array([dt.datetime(2023, 1, 1)] * 2, pa.timestamp("us", tz="UTC")), 2)
    assert range_ids(stamps, boundaries).tolist() == [1, 0]
    decimals = pa.array([Decimal("1.50"), Decimal("-2.00")], pa.decimal128(5, 2))
    assert range_ids(decimals, range_boundaries(pa.array([Decimal("0.00")] * 2, pa.decimal128(5, 2)), 2)).tolist() == [
        1,
        0,
    ]
    assert range_ids(pa.array([True, False, None]), range_boundaries(pa.array([False, True]), 2)).tolist() == [1, 0, 0]
    assert range_ids(pa.array([b"\x00\xff", b"\x01"]), range_boundaries(pa.array([b"\x01", b"\x00"]), 2)).tolist() == [
        0,
        1,
    ]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=-(2**40), max_value=2**40), min_size=1, max_size=300), st.integers(2, 50))
def test_range_ids_are_monotonic_and_within_range(values: list[int], num_ranges: int) -> None:
    array = pa.array(values, pa.int64())
    ids = range_ids(array, range_boundaries(array, num_ranges))
    assert ids.max() < num_ranges
    by_value = sorted(zip(values, ids.tolist(), strict=True))
    assert all(a[1] <= b[1] for a, b in itertools.pairwise(by_value))  # a larger value never gets a smaller id
    assert all(a[1] == b[1] for a, b in itertools.pairwise(by_value) if a[0] == b[0])  # equal values share an id


@pytest.mark.parametrize("bits", [21, 40])  # 42-bit keys in one word (packed integers), 80-bit keys in two words
@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2**20), st.integers(0, 2**20), st.integers(0, 255)), min_size=1, max_size=60),
    st.integers(1, 5),
)
def test_ordering_and_splitting_agree_with_python_tuples(
    bits: int, rows: list[tuple[int, int, int]], splits: int
) -> None:
    a, b, noise = (np.array(c, np.uint64) for c in zip(*rows, strict=True))
    keys = interleave_bits([a, b], bits=bits)
    assert keys.shape[1] == (1 if bits == 21 else 2)
    ordered = key_order(keys, noise)
    as_tuples = [(tuple(int(w) for w in keys[i]), int(noise[i])) for i in range(len(rows))]
    assert [as_tuples[i] for i in ordered] == sorted(as_tuples)
    picks = [ordered[(j * len(rows)) // (splits + 1)] for j in range(1, splits + 1)]  # in key order
    runs = compare_keys(keys, noise, keys[picks], noise[picks])
    split_points = sorted(as_tuples[p] for p in picks)
    assert runs.tolist() == [sum(s <= t for s in split_points) for t in as_tuples]


def test_splits_snap_to_the_largest_cell_edge_near_the_even_cut() -> None:
    keys = np.arange(100, dtype=np.uint64).reshape(-1, 1)
    noise = np.zeros(100, np.uint64)
    # even cut at 50, window +-12 (a quarter of a run): 48 = 0b110000 starts the largest cell in [38, 62]
    split_keys, split_noise = aligned_splits(keys, noise, 2)
    assert split_keys.tolist() == [[48]] and split_noise.tolist() == [0]
    # cuts near 25, 50, 75 with windows of +-6: [19, 31] -> 24 (a multiple of 8), [44, 56] -> 48 and [69, 81] -> 80
    # (multiples of 16)
    split_keys, _ = aligned_splits(keys, noise, 4)
    assert split_keys.tolist() == [[24], [48], [80]]


def test_a_run_of_one_key_is_cut_by_the_noise() -> None:
    keys = np.full((10, 1), 7, np.uint64)
    noise = np.arange(10, dtype=np.uint64)
    split_keys, split_noise = aligned_splits(keys, noise, 2)
    assert split_keys.tolist() == [[7]] and split_noise.tolist() == [5]
    runs = compare_keys(keys, noise, split_keys, split_noise)
    assert runs.tolist() == [0] * 5 + [1] * 5


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=50))
def test_bit_length_is_exact_for_every_uint64(values: list[int]) -> None:
    edges = [0, 1, 2**32 - 1, 2**32, 2**50 - 1, 2**50, 2**53 + 1, 2**64 - 1]
    array = np.array(values + edges, dtype=np.uint64)
    assert bit_length(array).tolist() == [v.bit_length() for v in values + edges]


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 6).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, 64 // n))), st.data())
def test_interleaving_matches_bit_by_bit_python(shape: tuple[int, int], data: st.DataObject) -> None:
    columns, bits = shape
    values = data.draw(st.lists(st.lists(st.integers(0, 2**64 - 1), min_size=columns, max_size=columns), min_size=1))
    key = interleave_bits([np.array(col, np.uint64) for col in zip(*values, strict=True)], bits=bits)
    expected = []
    for row in values:
        k = 0
        for b in range(bits - 1, -1, -1):  # MSB first, column 0 first in every group
            for v in row:
                k = (k << 1) | ((v >> b) & 1)
        expected.append(k)
    assert key[:, 0].tolist() == expected
