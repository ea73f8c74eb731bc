"""Space-filling curve keys for clustering (pure and vectorised: numpy and pyarrow, no Python loop per row).

A clustering key is built the way the reference builds it, in three steps:

1. **Range ids.** Each column is mapped to an approximate rank in ``[0, num_ranges)``: boundaries are the distinct
   values at evenly spaced quantiles of a sample, and a value's id is the number of boundaries below or equal to it.
   Equal values get equal ids; nulls get id 0 (they sort first, as in the reference); NaN sorts above every number.
   Ranking instead of using raw bytes is what makes the curve work on skewed data and on long common prefixes
   (delta-rs keys raw byte prefixes, which collapse such values to one key).
2. **A curve over the ids.** ``zorder`` interleaves the id bits, most significant bit first, column 0 first in each
   bit group. ``hilbert`` maps the ids to their index on an n-dimensional Hilbert curve (Skilling's transform),
   which keeps neighbours closer than Z-order does. One column is plain range order for both curves.
3. **Keys as machine words.** Only ``bits_for(num_ranges)`` bits per column carry information (ids are below
   ``num_ranges``), so keys are packed into as few uint64 words as needed, most significant word first, and sorted
   with `numpy.lexsort`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.maintenance.options import CURVES, DEFAULT_NUM_RANGES

# Delta types a range id can be computed for (decimals and timestamps by prefix): what a clustering column may be
ORDERABLE_TYPES = ("byte", "short", "integer", "long", "float", "double", "string", "binary", "boolean", "date")


def is_orderable(delta_type: object) -> bool:
    """Whether rows can be ordered by a column of ``delta_type`` (structs, maps, variant and geospatial cannot)."""
    return isinstance(delta_type, str) and (
        delta_type in ORDERABLE_TYPES or delta_type.startswith(("decimal", "timestamp"))
    )


def bits_for(num_ranges: int) -> int:
    """Bits needed for ids in ``[0, num_ranges)`` (at least 1)."""
    return max(1, int(num_ranges - 1).bit_length())


# -- range ids ----------------------------------------------------------------------------------------------------


def sortable(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A numpy array that orders like the column (nulls are handled by the caller; their slots hold any value).

    Integers, dates, timestamps and booleans become int64; floats float64 (NaN last); decimals float64 (a monotonic
    map: ties can only merge neighbours, which is fine for ranks); strings and binary become fixed-width byte strings
    compared by their UTF-8 bytes, which is code point order.
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    t = values.type
    if pa.types.is_dictionary(t):
        values = values.dictionary_decode()
        t = values.type
    if pa.types.is_boolean(t):
        return pc.cast(pc.fill_null(values, False), pa.int8()).to_numpy(zero_copy_only=False).astype(np.int64)
    if pa.types.is_integer(t):
        return pc.fill_null(values, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    if pa.types.is_floating(t):
        return pc.fill_null(pc.cast(values, pa.float64()), 0.0).to_numpy(zero_copy_only=False)
    if pa.types.is_decimal(t):
        return pc.fill_null(pc.cast(values, pa.float64()), 0.0).to_numpy(zero_copy_only=False)
    if pa.types.is_date(t) or pa.types.is_timestamp(t) or pa.types.is_time(t) or pa.types.is_duration(t):
        width = pa.int32() if t.bit_width == 32 else pa.int64()
        return pc.fill_null(values.view(width), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        as_binary = pc.cast(values, pa.large_binary())
        filled = pc.fill_null(as_binary, b"")
        longest = int(pc.max(pc.binary_length(filled)).as_py() or 0)
        # numpy's fixed-width bytes compare bytewise, like Spark compares strings
        return np.array(filled.to_pylist(), dtype=f"S{max(longest, 1)}")
    raise TypeError(f"cannot cluster by a column of type {t}")


def range_boundaries(sample: pa.Array | pa.ChunkedArray, num_ranges: int = DEFAULT_NUM_RANGES) -> np.ndarray:
    """Up to ``num_ranges - 1`` sorted distinct boundaries from a sample of a column (nulls ignored)."""
    if num_ranges < 1:
        raise ValueError(f"num_ranges must be at least 1, got {num_ranges}")
    if isinstance(sample, pa.ChunkedArray):
        sample = sample.combine_chunks()
    present = pc.drop_null(sample)
    values = np.sort(sortable(present), kind="stable")
    if len(values) == 0 or num_ranges == 1:
        return values[:0]
    positions = (np.arange(1, num_ranges) * len(values)) // num_ranges
    return np.unique(values[positions])


def range_ids(values: pa.Array | pa.ChunkedArray, boundaries: np.ndarray) -> np.ndarray:
    """The range id (uint64) of each value: how many boundaries are <= it; nulls get 0."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    keys = sortable(values)
    if len(boundaries) and keys.dtype.kind == "S" and boundaries.dtype.kind == "S":
        width = max(keys.dtype.itemsize, boundaries.dtype.itemsize)
        keys, boundaries = keys.astype(f"S{width}"), boundaries.astype(f"S{width}")
    ids = np.searchsorted(boundaries, keys, side="right").astype(np.uint64)
    if values.null_count:
        ids[values.is_null().to_numpy(zero_copy_only=False)] = 0
    return ids


# -- curves -------------------------------------------------------------------------------------------------------


def interleave_bits(ids: Sequence[np.ndarray], bits: int = 32) -> np.ndarray:
    """Z-order: interleave the low ``bits`` bits of each column's ids, MSB first, column 0 first in every group.

    Returns a ``(rows, words)`` uint64 matrix holding the ``bits * len(ids)``-bit key big-endian: word 0 is the most
    significant, and the key is right-aligned in the last word. With ``bits=32`` this is the reference's
    `interleave_bits` (4 bytes per column).

    Example:
        >>> interleave_bits([np.array([97], np.uint64), np.array([214], np.uint64)], bits=8)
        array([[30998]], dtype=uint64)
    """
    return _interleave(ids, bits)


def hilbert_index(ids: Sequence[np.ndarray], bits: int) -> np.ndarray:
    """The position of each point on an n-dimensional Hilbert curve of ``bits`` bits per axis (Skilling 2004).

    Same packing as `interleave_bits`. One axis is plain range order.
    """
    n = len(ids)
    if n == 0:
        return np.zeros((0, 1), np.uint64)
    x = [np.asarray(a, dtype=np.uint64).copy() for a in ids]
    rows = len(x[0])
    if n > 1:
        # Skilling's "AxestoTranspose": inverse undo of the excess work, then Gray encoding.
        m = np.uint64(1) << np.uint64(bits - 1)
        q = m
        while q > np.uint64(1):
            p = q - np.uint64(1)
            for i in range(n):
                high = (x[i] & q) != 0
                # invert the low bits of axis 0 where axis i has the bit; else exchange them with axis i
                x[0] = np.where(high, x[0] ^ p, x[0])
                t = np.where(high, np.uint64(0), (x[0] ^ x[i]) & p)
                x[0] ^= t
                x[i] ^= t
            q >>= np.uint64(1)
        for i in range(1, n):
            x[i] ^= x[i - 1]
        t = np.zeros(rows, np.uint64)
        q = m
        while q > np.uint64(1):
            t = np.where((x[n - 1] & q) != 0, t ^ (q - np.uint64(1)), t)
            q >>= np.uint64(1)
        for i in range(n):
            x[i] ^= t
    # the transposed form, read bit by bit from the top, is the Hilbert index
    return _interleave(x, bits)


def curve_keys(ids: Sequence[np.ndarray], curve: str, num_ranges: int = DEFAULT_NUM_RANGES) -> np.ndarray:
    """The clustering key of every row for ``curve`` over per-column range ids (see the module docstring)."""
    if curve not in CURVES:
        raise ValueError(f"curve must be one of {', '.join(CURVES)}, got {curve!r}")
    bits = bits_for(num_ranges)
    if curve == "hilbert" and len(ids) > 1:
        return hilbert_index(ids, bits)
    return interleave_bits(ids, bits)


def key_order(keys: np.ndarray, noise: np.ndarray | None = None) -> np.ndarray:
    """Row order by key (then by noise, which splits long runs of equal keys): a stable lexicographic sort."""
    if keys.shape[1] == 1 and len(keys) and int(keys[:, 0].max()) < (1 << 56):
        # one word with room for the noise byte: a single stable argsort is several times faster than lexsort
        packed = keys[:, 0] << np.uint64(8)
        if noise is not None:
            packed = packed | np.asarray(noise, np.uint64)
        return np.argsort(packed, kind="stable")
    columns = [keys[:, w] for w in range(keys.shape[1] - 1, -1, -1)]
    if noise is not None:
        columns.insert(0, noise)
    return np.lexsort(columns) if columns else np.arange(0)


def compare_keys(keys: np.ndarray, noise: np.ndarray, split_keys: np.ndarray, split_noise: np.ndarray) -> np.ndarray:
    """For each row, the number of split points at or below its (key, noise): its run in a range partitioning."""
    if len(split_noise) == 0:
        return np.zeros(len(keys), np.int64)
    if keys.shape[1] == 1 and len(keys) and max(int(keys[:, 0].max()), int(split_keys[:, 0].max())) < (1 << 56):
        # one word with room for the noise byte: compare packed integers (as `key_order` sorts them), not bytes
        row = (keys[:, 0] << np.uint64(8)) | np.asarray(noise, np.uint64)
        splits = (split_keys[:, 0] << np.uint64(8)) | np.asarray(split_noise, np.uint64)
        return np.searchsorted(splits, row, side="right").astype(np.int64)
    # Combine words and noise into one structured array and let numpy's searchsorted compare lexicographically.
    row = _structured(keys, noise)
    splits = _structured(split_keys, split_noise)
    return np.searchsorted(splits, row, side="right").astype(np.int64)


def aligned_splits(
    keys: np.ndarray, noise: np.ndarray, num_runs: int, slack: float = 0.25
) -> tuple[np.ndarray, np.ndarray]:
    """Split points cutting sorted (``keys``, ``noise``) into ``num_runs`` runs, each snapped to a cube boundary.

    Equal-count cuts land a few rows past the edge of a curve cell, and the file that gets those rows spans two cells:
    its min/max on the dimension where the cells differ doubles, and queries on that column stop skipping it. So
    each cut moves, within ``slack`` of a run's size, to the place where neighbouring keys share the shortest bit
    prefix (the edge of the largest cell); ties go to the cut closest to the even split. Where the window holds
    only one key (heavy skew), the cut stays and the noise splits the run of equal keys.

    Returns:
        ``(split_keys, split_noise)``: a row with (key, noise) at or above split ``j`` goes to run ``j + 1`` or later.
    """
    rows = len(keys)
    if num_runs <= 1 or rows < 2:
        return keys[:0], noise[:0]
    window = max(1, int(rows * slack / num_runs))
    split_keys, split_noise = [], []
    last = 0
    for j in range(1, num_runs):
        ideal = (j * rows) // num_runs
        lo, hi = max(last + 1, ideal - window), min(rows - 1, ideal + window)
        if lo > hi:
            continue
        shared = _shared_prefix_bits(keys[lo - 1 : hi], keys[lo : hi + 1])
        best = int(np.min(shared))
        if best == keys.shape[1] * 64:  # one key across the window: cut inside it, where the noise decides
            split_keys.append(keys[ideal])
            split_noise.append(noise[ideal])
            last = ideal
            continue
        candidates = np.flatnonzero(shared == best) + lo
        cut = int(candidates[np.argmin(np.abs(candidates - ideal))])
        split_keys.append(keys[cut])
        split_noise.append(0)  # every row of the cut's key goes right: the cut falls between two keys
        last = cut
    if not split_keys:
        return keys[:0], noise[:0]
    return np.array(split_keys, np.uint64).reshape(-1, keys.shape[1]), np.array(split_noise, np.uint64)


def _shared_prefix_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Leading bits two key matrices have in common, row by row (64 per word; all of them when equal)."""
    shared = np.zeros(len(a), np.int64)
    still_equal = np.ones(len(a), bool)
    for w in range(a.shape[1]):
        diff = a[:, w] ^ b[:, w]
        shared += np.where(still_equal, 64 - bit_length(diff), 0)  # leading zeros of the first differing word
        still_equal &= diff == 0
    return shared


def bit_length(values: np.ndarray) -> np.ndarray:
    """`int.bit_length` of each uint64, vectorised and exact (0 for 0)."""
    values = np.asarray(values, np.uint64)
    high = (values >> np.uint64(32)).astype(np.float64)
    low = (values & np.uint64(0xFFFFFFFF)).astype(np.float64)
    # below 2**32, float64 holds the value exactly and log2 stays clear of the next integer, so floor() is exact
    with np.errstate(divide="ignore"):
        high_bits = np.where(high > 0, np.floor(np.log2(high)) + 33, 0)
        low_bits = np.where(low > 0, np.floor(np.log2(low)) + 1, 0)
    return np.where(high > 0, high_bits, low_bits).astype(np.int64)


def noise_bytes(rows: int, seed: int) -> np.ndarray:
    """A reproducible random byte per row (the reference's noise column): runs of equal keys split across files."""
    return np.random.default_rng(seed).integers(0, 256, size=rows, dtype=np.uint8).astype(np.uint64)


def _structured(keys: np.ndarray, noise: np.ndarray) -> np.ndarray:
    # big-endian bytes of (word0, word1, ..., noise) as one fixed-width byte string: bytewise order is key order
    words = np.concatenate([keys, np.asarray(noise, np.uint64)[:, None]], axis=1).astype(">u8")
    raw = np.ascontiguousarray(words).view(np.uint8).reshape(len(words), -1)
    return raw.view(f"S{raw.shape[1]}").ravel()


def _interleave(columns: Sequence[np.ndarray], bits: int) -> np.ndarray:
    """The low ``bits`` bits of the columns interleaved, MSB first, column 0 first in every group (see `_pack`)."""
    n = len(columns)
    rows = len(columns[0]) if n else 0
    if n == 0 or n * bits > 64:
        return _pack([_bit(col, b) for b in range(bits - 1, -1, -1) for col in columns], rows)
    # One word: spread each byte of a column through a 256-entry table instead of moving one bit at a time. Bit b of
    # column c lands at position b * n + (n - 1 - c).
    spread = _spread_table(n)
    out = np.zeros(rows, np.uint64)
    mask = np.uint64((1 << bits) - 1) if bits < 64 else np.uint64(2**64 - 1)
    for c, col in enumerate(columns):
        values = np.asarray(col, dtype=np.uint64) & mask
        for k in range(0, bits, 8):
            byte = ((values >> np.uint64(k)) & np.uint64(0xFF)).astype(np.intp)
            out |= spread[byte] << np.uint64(k * n + (n - 1 - c))
    return out.reshape(-1, 1)


@functools.cache
def _spread_table(n: int) -> np.ndarray:
    # entry v: the 8 bits of v placed n positions apart
    return np.array([sum(((v >> i) & 1) << (i * n) for i in range(8)) for v in range(256)], dtype=np.uint64)


def _bit(values: np.ndarray, position: int) -> np.ndarray:
    return (np.asarray(values, dtype=np.uint64) >> np.uint64(position)) & np.uint64(1)


def _pack(bit_columns: list[np.ndarray], rows: int) -> np.ndarray:
    """Pack bits (most significant first) into big-endian uint64 words, right-aligned in the last word."""
    total = len(bit_columns)
    words = max(1, math.ceil(total / 64))
    out = np.zeros((rows, words), np.uint64)
    for index, bit in enumerate(bit_columns):
        position = total - 1 - index  # bit position in the whole key, 0 = least significant
        out[:, words - 1 - position // 64] |= bit << np.uint64(position % 64)
    return out
