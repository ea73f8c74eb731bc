"""Writer-side Delta per-file statistics: the `stats` JSON of the add action for a data file deltalite writes.

The rules are delta-spark's `StatisticsCollection` (the aggregate Spark evaluates over the rows of each file it
writes), so a file OPTIMIZE rewrites gets the statistics Spark would have given it:

- Columns: exactly those named in `delta.dataSkippingStatsColumns` (logical names, case-insensitive, a struct naming
  all its leaves) when the property is set; otherwise the first `delta.dataSkippingNumIndexedCols` (default 32, -1 for
  all) leaf fields in schema order, partition columns excluded, every non-struct field (arrays and maps included)
  counting as one leaf.
- minValues/maxValues only for numbers, strings, dates, timestamps and timestamp_ntz (Spark's
  `SkippingEligibleDataType`); booleans, binary, arrays, maps and void get a null count only.
- Strings: the min is its first N code points (Spark SQL `substring`); the max goes through
  `truncateMaxStringAgg`, which counts Java UTF-16 code units and appends a tie-breaker (U+007F when the next unit
  is below it, else U+10FFFF), or drops the max when no cut within 2N units works. N is
  `delta.dataSkippingStringPrefixLength`, default 32.
- Timestamps print to milliseconds, the extra digits cut off (max included); floats follow Spark's ordering, where NaN
  is larger than every number.
- A leaf under a null struct counts as null. Output keys are physical names, nested like the schema.

Which columns are selected is `engine/stats_columns.py`; how values print is `engine/stats_values.py`. The reader side
is `engine/stats_parse.py`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.errors import InvalidTableProperty, SchemaError
from airflow_provider_deltalite.engine.properties import (
    COLUMN_MAPPING_MODE,
    DATA_SKIPPING_NUM_INDEXED_COLS,
    DATA_SKIPPING_STATS_COLUMNS,
    DATA_SKIPPING_STRING_PREFIX_LENGTH,
    TableProperties,
)
from airflow_provider_deltalite.engine.schema import parse_schema_string
from airflow_provider_deltalite.engine.stats_columns import (
    Leaf,
    Struct,
    field_node,
    first_leaves,
    named_fields,
    parse_stats_columns,
)
from airflow_provider_deltalite.engine.stats_json import MAX_VALUES, MIN_VALUES, NULL_COUNT, NUM_RECORDS
from airflow_provider_deltalite.engine.stats_values import (
    date_text,
    dump_json_exact,
    float_value,
    timestamp_text,
    truncate_max,
    truncate_min,
)

__all__ = ["StatsCollector"]

DEFAULT_STRING_PREFIX_LENGTH = 32

_TO_MICROS = {"s": 1_000_000, "ms": 1_000, "us": 1}


# ---------------------------------------------------------------------------------------------------------------------
# Accumulating


def _plain(array: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    if pa.types.is_dictionary(array.type):
        if isinstance(array, pa.ChunkedArray):
            return _plain(pa.chunked_array([c.dictionary_decode() for c in array.chunks], array.type.value_type))
        array = array.dictionary_decode()
    if pa.types.is_string_view(array.type) or pa.types.is_binary_view(array.type):
        array = pc.cast(array, pa.large_string())
    return array


# the kinds whose bounds `StatsCollector.bounds_from_parquet` takes from the footer, with the Arrow types that qualify
_FOOTER_KINDS = {
    "string": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
    "integer": pa.types.is_signed_integer,
}

_TYPE_CHECKS = {
    "integer": pa.types.is_integer,
    "float": pa.types.is_floating,
    "double": pa.types.is_floating,
    "decimal": pa.types.is_decimal,
    "date": pa.types.is_date,
    "timestamp": pa.types.is_timestamp,
    "timestamp_ntz": pa.types.is_timestamp,
}


def _extremes(leaf: Leaf, array: pa.Array | pa.ChunkedArray, prefix: int, table_uri: str | None) -> tuple[Any, Any]:
    """(min, max) of the non-null values of one batch, in the form the running values keep."""
    array = _plain(array)
    t = array.type
    kind = leaf.kind
    assert kind is not None  # _update_leaf skips leaves without a kind
    if kind == "string":
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            array = pc.cast(array, pa.large_string())  # old writers store UTF-8 text as plain binary
        elif not (pa.types.is_string(t) or pa.types.is_large_string(t)):
            raise _type_error(leaf, t, table_uri)
    elif not _TYPE_CHECKS[kind](t):
        raise _type_error(leaf, t, table_uri)
    if kind in ("float", "double"):
        found = _float_extremes(array)
        if found is not None:
            return found
    result = pc.min_max(array)
    low, high = result["min"], result["max"]
    if kind == "date":
        return _days(low, t), _days(high, t)
    if kind in ("timestamp", "timestamp_ntz"):
        return _micros(low, t), _micros(high, t)
    low, high = low.as_py(), high.as_py()
    if kind in ("float", "double"):
        if pc.any(pc.is_nan(array)).as_py():
            leaf.has_nan = True  # Spark orders NaN above every number; Arrow's min_max skips NaN
        if low != low:  # Arrow returns NaN only when every value is NaN
            return None, None
    elif kind == "string":
        low = truncate_min(low, prefix)  # the prefix of the smallest value is the smallest prefix
    return low, high


def _float_extremes(array: pa.Array | pa.ChunkedArray) -> tuple[float, float] | None:
    """(min, max) of a float column without nulls or NaN, by NumPy's vectorised reductions; None where Arrow's
    `min_max` must decide: nulls (NumPy would see their slots), NaN (`has_nan`), a zero bound (which of -0.0 and 0.0
    Arrow returns).

    Arrow's float `min_max` compares value by value and a NaN check is a second pass over the column: together a
    fifth of a compaction's statistics time on a table of doubles. NumPy's min propagates NaN, so one reduction also
    says whether there is any.
    """
    if array.null_count or not len(array):
        return None
    chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
    lows, highs = [], []
    for chunk in chunks:
        if not len(chunk):
            continue
        values = chunk.to_numpy(zero_copy_only=True)
        lows.append(values.min())
        highs.append(values.max())
    low, high = float(min(lows)), float(max(highs))
    if low != low or high != high or low == 0.0 or high == 0.0:
        return None
    return low, high


def _days(scalar: pa.Scalar, t: pa.DataType) -> int | None:
    if not scalar.is_valid:
        return None
    return scalar.value // 86_400_000 if pa.types.is_date64(t) else scalar.value


def _micros(scalar: pa.Scalar, t: pa.TimestampType) -> int | None:
    if not scalar.is_valid:
        return None
    return scalar.value // 1000 if t.unit == "ns" else scalar.value * _TO_MICROS[t.unit]


def _type_error(leaf: Leaf, t: pa.DataType, table_uri: str | None) -> SchemaError:
    return SchemaError(f"column '{leaf.path}': values of type {t} do not fit its {leaf.kind} statistics", table_uri)


def _update_leaf(
    leaf: Leaf, array: pa.Array | pa.ChunkedArray | None, rows: int, prefix: int, table_uri: str | None
) -> None:
    if array is None:
        leaf.null_count += rows  # a column the file does not hold reads as nulls, as Spark counts it
        return
    leaf.null_count += array.null_count
    if leaf.kind is None or array.null_count == len(array):
        return
    low, high = _extremes(leaf, array, prefix, table_uri)
    if low is not None:
        leaf.min = low if leaf.min is None else min(leaf.min, low)
    if high is not None:
        leaf.max = high if leaf.max is None else max(leaf.max, high)


def _update(
    nodes: list[Leaf | Struct],
    parent: pa.RecordBatch | pa.Table | pa.StructArray | pa.ChunkedArray | None,
    rows: int,
    prefix: int,
    table_uri: str | None,
    counted_only: Collection[str] = (),
) -> None:
    for node in nodes:
        array = None if parent is None else _child(parent, node.name)
        if node.name in counted_only and isinstance(node, Leaf) and array is not None:
            node.null_count += array.null_count  # its bounds come from elsewhere (`StatsCollector.add_bounds`)
            continue
        if isinstance(node, Struct):
            if array is not None and not pa.types.is_struct(array.type):
                raise SchemaError(f"column '{node.name}': expected a struct, got {array.type}", table_uri)
            _update(node.children, array, rows, prefix, table_uri)
        else:
            _update_leaf(node, array, rows, prefix, table_uri)


def _child(
    parent: pa.RecordBatch | pa.Table | pa.StructArray | pa.ChunkedArray, name: str
) -> pa.Array | pa.ChunkedArray | None:
    if isinstance(parent, pa.RecordBatch | pa.Table):
        index = parent.schema.get_field_index(name)
        return None if index < 0 else parent.column(index)
    index = parent.type.get_field_index(name)
    # struct_field folds the parent's nulls into the child: Spark reads a field of a null struct as null
    return None if index < 0 else pc.struct_field(parent, [index])


# ---------------------------------------------------------------------------------------------------------------------
# Output


def _bound(leaf: Leaf, prefix: int, *, is_max: bool) -> Any:
    """The min or max as Spark prints it, or None when there is none."""
    value = leaf.max if is_max else leaf.min
    kind = leaf.kind
    if kind in ("float", "double"):
        if leaf.has_nan and (is_max or value is None):
            return "NaN"
        return None if value is None else float_value(value, single=kind == "float")
    if value is None:
        return None
    if kind == "string":
        return truncate_max(value, prefix) if is_max else value
    if kind == "date":
        return date_text(value)
    if kind in ("timestamp", "timestamp_ntz"):
        return timestamp_text(value, zone=kind == "timestamp")
    return value  # integers, and decimals exactly as read


def _has_minmax(node: Leaf | Struct) -> bool:
    if isinstance(node, Struct):
        return any(_has_minmax(child) for child in node.children)
    return node.kind is not None


def _has_leaf(node: Leaf | Struct) -> bool:
    return any(_has_leaf(child) for child in node.children) if isinstance(node, Struct) else True


def _section(nodes: list[Leaf | Struct], value: Callable[[Leaf], Any], keep: Callable[[Leaf | Struct], bool]) -> dict:
    # Spark builds every level with struct(), which is never null, so a struct whose leaves all lack a value prints
    # as {}; a struct with no leaf that can have the statistic is left out
    out: dict = {}
    for node in nodes:
        if not keep(node):
            continue
        if isinstance(node, Struct):
            out[node.name] = _section(node.children, value, keep)
        else:
            result = value(node)
            if result is not None:
                out[node.name] = result
    return out


def _invalid(key: str, explicit: Mapping[str, str], why: str, table_uri: str | None) -> InvalidTableProperty:
    return InvalidTableProperty(f"property {key}={explicit.get(key)!r} is invalid: {why}", table_uri)


class StatsCollector:
    """Accumulates Delta stats over the batches written to one data file.

    Feed it every batch exactly as it goes into the Parquet file (physical names, data columns only, the table's
    physical Arrow types), then read `to_json()` for the add action. Only the running min, max and null count of each
    selected column are kept, never the rows.

    Example:
        >>> collector = StatsCollector(schema, column_mapping_mode="none", partition_columns=[])  # doctest: +SKIP
        >>> collector.update(batch)  # doctest: +SKIP
        >>> collector.to_json()  # doctest: +SKIP
        '{"numRecords":3,"minValues":{"id":1},"maxValues":{"id":3},"nullCount":{"id":0}}'
    """

    def __init__(
        self,
        schema: dict,
        *,
        column_mapping_mode: str,
        partition_columns: Sequence[str],
        configuration: Mapping[str, str] | None = None,
        table_uri: str | None = None,
    ) -> None:
        """Select the columns to keep statistics on.

        Args:
            schema: the table's Delta schema (`Snapshot.schema`, a `{"type": "struct", "fields": [...]}` dict).
            column_mapping_mode: "none", "name" or "id"; under mapping, output keys are physical names.
            partition_columns: logical names of the partition columns; they are not in data files and get no stats.
            configuration: the table's `metaData.configuration`, read for `delta.dataSkippingStatsColumns`,
                `delta.dataSkippingNumIndexedCols` and `delta.dataSkippingStringPrefixLength`.
            table_uri: named in error messages.

        Raises:
            InvalidTableProperty: one of those properties does not parse or is out of range, or the mapping mode is
                unknown.
            SchemaError: the schema is not a valid Delta schema.
        """
        self._table_uri = table_uri
        if column_mapping_mode not in ("none", "name", "id"):
            raise InvalidTableProperty(
                f"{COLUMN_MAPPING_MODE} must be none, name or id, got {column_mapping_mode!r}", table_uri
            )
        parsed = parse_schema_string(json.dumps(schema), table_uri=table_uri)
        excluded = set(partition_columns)
        fields = [f for f in parsed["fields"] if f["name"] not in excluded]
        properties = TableProperties(configuration, table_uri)
        explicit = properties.explicit
        self._prefix = DEFAULT_STRING_PREFIX_LENGTH
        if DATA_SKIPPING_STRING_PREFIX_LENGTH in explicit:
            self._prefix = properties.integer(DATA_SKIPPING_STRING_PREFIX_LENGTH)
            if self._prefix < 0:
                raise _invalid(DATA_SKIPPING_STRING_PREFIX_LENGTH, explicit, "must be at least 0", table_uri)
        # Spark parses the column count whenever it builds the stats spec, even when a column list takes precedence
        num_indexed = properties.integer(DATA_SKIPPING_NUM_INDEXED_COLS)
        if DATA_SKIPPING_STATS_COLUMNS in explicit:
            paths = parse_stats_columns(explicit[DATA_SKIPPING_STATS_COLUMNS])
            if paths is None:
                raise _invalid(
                    DATA_SKIPPING_STATS_COLUMNS,
                    explicit,
                    "not a comma-separated list of column names (quote special names in backquotes)",
                    table_uri,
                )
            self._nodes = named_fields(fields, paths, column_mapping_mode, "")
        elif num_indexed < -1:
            raise _invalid(
                DATA_SKIPPING_NUM_INDEXED_COLS, explicit, "must be at least -1 (-1 means every column)", table_uri
            )
        elif num_indexed == -1:
            self._nodes = [field_node(f, column_mapping_mode, "") for f in fields]
        else:
            self._nodes = first_leaves(fields, num_indexed, column_mapping_mode, "")[0]
        self._num_records = 0

    @property
    def column_paths(self) -> list[str]:
        """Logical dotted paths of the leaf columns that get statistics (Z-order may only use these)."""
        out: list[str] = []
        stack: list[Leaf | Struct] = list(reversed(self._nodes))
        while stack:
            node = stack.pop()
            if isinstance(node, Leaf):
                out.append(node.path)
            else:
                stack.extend(reversed(node.children))
        return out

    def update(self, batch: pa.RecordBatch | pa.Table, *, counted_only: Collection[str] = ()) -> None:
        """Add the rows of one batch (or table) written to the file.

        ``counted_only``: top-level columns (of `bounds_from_parquet`) whose nulls are counted here and whose min and
        max the caller adds with `add_bounds`.

        Raises:
            SchemaError: a selected column holds values of a type that does not fit its Delta type.
        """
        # a table's columns are taken whole (one kernel call per column, however many chunks it has)
        self._num_records += batch.num_rows
        if batch.num_rows:
            _update(self._nodes, batch, batch.num_rows, self._prefix, self._table_uri, counted_only)

    def bounds_from_parquet(self, schema: pa.Schema) -> list[str]:
        """The top-level string and integer columns of a file of ``schema`` whose min and max can be taken from the
        statistics the Parquet writer keeps of each row group (`add_bounds`) instead of being computed again here.

        Strings: the costly comparison (two thirds of the collector's time on a table of text and numbers), and Parquet
        orders UTF-8 as Arrow does, byte by byte. Integers: Delta's are all signed, as Parquet compares them, and their
        bounds are exact; on a compaction of small files their min/max kernel was the collector's remaining cost.
        Floats are left here: Parquet writes a zero bound as -0.0 or +0.0 and leaves NaN out, where Spark orders NaN
        above every number. Dates and timestamps too: their footer values come as Python dates, in the file's unit. A
        name with a dot is left here too: its column's Parquet path could be a nested one's.
        """
        out = []
        for node in self._nodes:
            if isinstance(node, Leaf) and node.kind in _FOOTER_KINDS and "." not in node.name:
                index = schema.get_field_index(node.name)
                if index >= 0 and _FOOTER_KINDS[node.kind](schema.field(index).type):
                    out.append(node.name)
        return out

    def add_bounds(self, name: str, values: pa.Array | pa.ChunkedArray | tuple[Any, Any]) -> None:
        """The min and max of a top-level column (one of `bounds_from_parquet`) over more of the rows given to `update`
        with ``counted_only``: its values, or the (min, max) of its non-null values (str for a string column, int for
        an integer one)."""
        leaf = next(n for n in self._nodes if isinstance(n, Leaf) and n.name == name)
        if isinstance(values, tuple):
            low, high = values
            if leaf.kind == "string":
                low = truncate_min(low, self._prefix)
        elif values.null_count == len(values):
            return
        else:
            low, high = _extremes(leaf, values, self._prefix, self._table_uri)
        leaf.min = low if leaf.min is None else min(leaf.min, low)
        leaf.max = high if leaf.max is None else max(leaf.max, high)

    @property
    def nodes(self) -> list[Leaf | Struct]:
        """The selected columns as a tree (physical names), for code that merges statistics of this shape."""
        return self._nodes

    @property
    def prefix(self) -> int:
        """The string prefix length bounds are cut to."""
        return self._prefix

    @staticmethod
    def struct_has_minmax(node: Leaf | Struct) -> bool:
        """Whether minValues/maxValues hold an entry for ``node`` (a struct needs a leaf that can have a bound)."""
        return _has_minmax(node)

    @staticmethod
    def struct_has_leaf(node: Leaf | Struct) -> bool:
        """Whether nullCount holds an entry for ``node``."""
        return _has_leaf(node)

    @property
    def num_records(self) -> int:
        """Rows seen so far."""
        return self._num_records

    def to_dict(self) -> dict:
        """The statistics as Python values: `{"numRecords", "minValues", "maxValues", "nullCount"}`.

        As in Spark, minValues/maxValues are left out when no selected column can have a bound, and nullCount when
        no column is selected; a leaf without a bound (all nulls, a string max with no safe cut) is left out of
        minValues/maxValues. Decimal bounds are `decimal.Decimal`, so that no digit is lost (use `to_json` for the
        text); non-finite float bounds are the strings Spark writes ("NaN", "Infinity", "-Infinity").
        """
        out: dict[str, Any] = {NUM_RECORDS: self._num_records}
        prefix = self._prefix
        if any(_has_minmax(node) for node in self._nodes):
            out[MIN_VALUES] = _section(self._nodes, lambda leaf: _bound(leaf, prefix, is_max=False), _has_minmax)
            out[MAX_VALUES] = _section(self._nodes, lambda leaf: _bound(leaf, prefix, is_max=True), _has_minmax)
        if any(_has_leaf(node) for node in self._nodes):
            # Spark sums null flags, and a sum over no rows is null: an empty file has no null counts
            empty = self._num_records == 0
            out[NULL_COUNT] = _section(self._nodes, lambda leaf: None if empty else leaf.null_count, _has_leaf)
        return out

    def to_json(self) -> str:
        """`to_dict()` as compact JSON (`separators=(",", ":")`), decimals written exactly in plain notation."""
        return dump_json_exact(self.to_dict())
