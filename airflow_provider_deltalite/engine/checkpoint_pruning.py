"""Which row groups and rows of a checkpoint file a partition filter keeps (`checkpoint_stream`'s first pass).

A row group is skipped when the statistics of its ``add.partitionValues_parsed`` columns prove that no add in it is
selected and it holds no remove (`row_group_may_match`). In the row groups that are read, the partition values of
each add and remove are evaluated against the filter once per distinct combination of values, not once per row
(`selected_rows`): a checkpoint's million rows hold a few thousand partitions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_deltalite.engine import actions as A
from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.arrow_util import contiguous
from airflow_provider_deltalite.engine.checkpoint_reader import map_lookup_many
from airflow_provider_deltalite.engine.conform import delta_type_to_arrow
from airflow_provider_deltalite.engine.partition_filter import BoundPartitionFilter

# Bounds of this length may be truncated by their writer (the Parquet spec lets writers shorten string statistics;
# parquet-mr and arrow-rs cut at 64 bytes where they do): a row group is never skipped on them.
_TRUNCATION = 64
_BOUNDED_TYPES = frozenset({"string", "byte", "short", "integer", "long", "date", "boolean"})


def row_group_may_match(pf: pq.ParquetFile, rg: int, keep: BoundPartitionFilter, leaves: dict[str, int]) -> bool:
    """False only when the row group's statistics prove that none of its rows is kept: no remove in it (removes
    carry no parsed partition values), and the adds' ``partitionValues_parsed`` bounds exclude the predicate.

    Spark, deltalite and older delta-rs write ``add.partitionValues_parsed`` in checkpoints; its column chunk
    statistics let a planner of one partition skip the row groups of the others without decoding them.
    """
    from airflow_provider_deltalite.engine.expressions import may_match_stats  # with a predicate only

    meta = pf.metadata.row_group(rg)
    n = meta.num_rows

    def stats(path: str) -> Any:
        index = leaves.get(path)
        if index is None:
            return None
        found = meta.column(index).statistics
        return found if found is not None and found.has_null_count else None

    if f"{A.REMOVE}.path" in leaves:
        removes = stats(f"{A.REMOVE}.path")
        if removes is None or removes.null_count != n:
            return True
    adds = stats(f"{A.ADD}.path")
    if adds is None or not keep.columns:
        return True
    n_adds = n - adds.null_count
    if n_adds == 0:
        return False  # neither an add nor a remove in it
    minimum: dict[str, Any] = {}
    maximum: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    types = []
    for logical, physical, delta_type in keep.columns:
        if delta_type not in _BOUNDED_TYPES:
            return True  # timestamps, decimals, binary: bounds whose conversion is not worth a wrong skip
        column = stats(f"{A.ADD}.partitionValues_parsed.{physical}")
        if column is None:
            return True
        nulls[logical] = column.null_count - (n - n_adds)  # rows that are no add are null there too
        if nulls[logical]:
            # a null partition value and an add whose parsed values a writer left out look alike here
            return True
        if column.has_min_max:
            low, high = column.min, column.max
            if any(isinstance(v, (str, bytes)) and len(v) >= _TRUNCATION for v in (low, high)):
                return True
            minimum[logical], maximum[logical] = low, high
        types.append(pa.field(logical, delta_type_to_arrow(delta_type)))
    try:
        values = pa.struct(types)
        row = {"numRecords": n_adds, "minValues": minimum, "maxValues": maximum, "nullCount": nulls}
        struct = pa.array(
            [row],
            pa.struct(
                [
                    ("numRecords", pa.int64()),
                    ("minValues", values),
                    ("maxValues", values),
                    ("nullCount", pa.struct([(f.name, pa.int64()) for f in types])),
                ]
            ),
        )
        return bool(may_match_stats(keep.expr, struct, 1)[0].as_py())
    except (pa.ArrowException, ValueError, TypeError, OverflowError):
        return True  # bounds of an unexpected type: read the row group


def selected_rows(
    pf: pq.ParquetFile,
    rg: int,
    kinds: list[str],
    keep: BoundPartitionFilter,
    read: dict[str, pa.Array] | None = None,
) -> np.ndarray:
    """Rows of row group ``rg`` that are an add or a remove whose partition the filter may select (the columns
    decoded for it go into ``read``, by name, as a struct of the one field, so the second pass need not decode them
    again)."""
    n = pf.metadata.row_group(rg).num_rows
    selected = np.zeros(n, dtype=bool)
    columns = []
    for kind in kinds:
        has_values = "partitionValues" in pf.schema_arrow.field(kind).type.names
        columns.append(f"{kind}.partitionValues" if has_values else f"{kind}.path")
    table = pf.read_row_group(rg, columns=columns, use_threads=False)
    for kind, name in zip(kinds, columns, strict=True):
        column = contiguous(table.column(kind))
        if read is not None:
            read[name] = column
        valid = np.asarray(pc.is_valid(column).to_numpy(zero_copy_only=False), dtype=bool)
        if "partitionValues" in column.type.names:
            selected |= valid & _partition_mask(column.field("partitionValues"), keep, n)
        else:  # no partition values at all: the partition is unknown, so the row stays
            selected |= valid
    return selected


def _partition_mask(values: pa.Array, keep: BoundPartitionFilter, n: int) -> np.ndarray:
    present = np.asarray(pc.is_valid(values).to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_map(values.type):
        if pa.types.is_dictionary(values.type.key_type):
            values = pc.cast(values, pa.map_(pa.string(), values.type.item_type))
        raw: list[pa.Array | None] = [
            v if pa.types.is_dictionary(v.type) else pc.cast(v, pa.string())
            for v in map_lookup_many(values, keep.physical_names)
        ]
        return _mask_of_distinct(keep, raw, n, present)
    return keep.mask_struct(values)


# Above this many possible combinations of partition values (the product of each column's distinct values, plus
# null) the codes would not fit an int64: the predicate is evaluated row by row.
_DISTINCT_LIMIT = 1 << 62


def _mask_of_distinct(
    keep: BoundPartitionFilter, raw: list[pa.Array | None], n: int, present: np.ndarray
) -> np.ndarray:
    """`BoundPartitionFilter.mask`, evaluated once per distinct combination of partition values rather than per row:
    a checkpoint's million rows hold a few thousand partitions, and parsing and comparing every row's values cost
    as much as decoding them."""
    codes = np.zeros(n, dtype=np.int64)
    radix = 1
    dictionaries: list[tuple[pa.Array | None, int]] = []
    for values in raw:
        if values is None:
            dictionaries.append((None, 1))
            continue
        encoded = values if pa.types.is_dictionary(values.type) else pc.dictionary_encode(values)
        size = len(encoded.dictionary) + 1  # the last code stands for null
        if radix * size >= _DISTINCT_LIMIT:
            plain = [None if r is None else pc.cast(r, pa.string()) for r in raw]
            return keep.mask(plain, n, present)
        index = pc.fill_null(encoded.indices, size - 1).to_numpy(zero_copy_only=False).astype(np.int64)
        codes += index * radix
        radix *= size
        dictionaries.append((encoded.dictionary, size))
    if len(raw) == 1:
        distinct, inverse = np.arange(radix, dtype=np.int64), codes
    else:
        distinct, inverse = np.unique(codes, return_inverse=True)
    columns: list[pa.Array | None] = []
    rest = distinct
    for dictionary, size in dictionaries:
        digit, rest = rest % size, rest // size
        if dictionary is None:
            columns.append(None)
            continue
        columns.append(pc.take(pc.cast(dictionary, pa.string()), pa.array(digit, mask=digit == size - 1)))
    return keep.mask(columns, len(distinct))[inverse] | ~present
