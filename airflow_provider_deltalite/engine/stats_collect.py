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

The reader side is `engine/stats_parse.py`.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import struct
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_deltalite.engine.column_mapping import physical_name
from airflow_provider_deltalite.engine.errors import InvalidTableProperty, SchemaError
from airflow_provider_deltalite.engine.properties import (
    DATA_SKIPPING_NUM_INDEXED_COLS,
    DATA_SKIPPING_STATS_COLUMNS,
    DATA_SKIPPING_STRING_PREFIX_LENGTH,
    TableProperties,
)
from airflow_provider_deltalite.engine.schema import parse_schema_string
from airflow_provider_deltalite.engine.stats_parse import MAX_VALUES, MIN_VALUES, NULL_COUNT, NUM_RECORDS

__all__ = ["StatsCollector"]

DEFAULT_STRING_PREFIX_LENGTH = 32

_ASCII_MAX = "\x7f"
_UTF8_MAX = "\U0010ffff"
_UTF8_MAX_UNITS = (0xDBFF, 0xDFFF)  # U+10FFFF as Java stores it: a surrogate pair

_INTEGER_TYPES = frozenset({"byte", "short", "integer", "long"})
_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)
_BARE_NAME = re.compile(r"[A-Za-z0-9_]+")
_TO_MICROS = {"s": 1_000_000, "ms": 1_000, "us": 1}


# ---------------------------------------------------------------------------------------------------------------------
# Which columns


def _parse_stats_columns(text: str) -> list[tuple[str, ...]] | None:
    """Spark's `multipartIdentifierList`: comma-separated, dot-separated parts, backquotes around special names.

    Returns the lower-cased name paths (Spark matches them case-insensitively), or None when the text does not parse.
    """
    if not text.strip():
        return []  # Spark: an empty list selects no column
    paths: list[tuple[str, ...]] = []
    parts: list[str] = []
    pos, n = 0, len(text)
    while True:
        while pos < n and text[pos].isspace():
            pos += 1
        if pos < n and text[pos] == "`":
            end = pos + 1
            chars = []
            while True:
                close = text.find("`", end)
                if close < 0:
                    return None
                chars.append(text[end:close])
                if close + 1 < n and text[close + 1] == "`":  # a doubled backquote stands for one
                    chars.append("`")
                    end = close + 2
                    continue
                break
            parts.append("".join(chars))
            pos = close + 1
        else:
            match = _BARE_NAME.match(text, pos)
            # a bare number lexes as a numeric literal in Spark's grammar, not as an identifier
            if match is None or match.group().isdigit():
                return None
            parts.append(match.group())
            pos = match.end()
        while pos < n and text[pos].isspace():
            pos += 1
        if pos == n or text[pos] == ",":
            paths.append(tuple(p.lower() for p in parts))
            parts = []
            if pos == n:
                return paths
            pos += 1
        elif text[pos] == ".":
            pos += 1
        else:
            return None


class _Leaf:
    """Running statistics of one non-struct column."""

    __slots__ = ("has_nan", "kind", "max", "min", "name", "null_count", "path")

    def __init__(self, name: str, path: str, delta_type: Any) -> None:
        self.name = name
        self.path = path  # logical dotted path, for error messages
        self.kind = _leaf_kind(delta_type)
        self.null_count = 0
        self.min: Any = None
        self.max: Any = None
        self.has_nan = False


class _Struct:
    """A struct column: its selected children."""

    __slots__ = ("children", "name")

    def __init__(self, name: str, children: list[_Leaf | _Struct]) -> None:
        self.name = name
        self.children = children


def _leaf_kind(delta_type: Any) -> str | None:
    """The kind of min/max kept for a Delta type; None means a null count only."""
    if not isinstance(delta_type, str):
        return None  # array and map: Spark counts nulls of the column itself, nothing inside
    if delta_type in _INTEGER_TYPES:
        return "integer"
    if delta_type in ("float", "double", "string", "date", "timestamp", "timestamp_ntz"):
        return delta_type
    if delta_type.startswith("decimal"):  # the schema parser has checked the precision and scale
        return "decimal"
    return None  # boolean, binary, void: not SkippingEligibleDataType


def _node(field: dict, mode: str, path: str) -> _Leaf | _Struct:
    """The whole field: a struct with all its leaves, or a leaf."""
    name = physical_name(field, mode)
    child_path = f"{path}.{field['name']}" if path else field["name"]
    field_type = field["type"]
    if isinstance(field_type, dict) and field_type["type"] == "struct":
        return _Struct(name, [_node(child, mode, child_path) for child in field_type["fields"]])
    return _Leaf(name, child_path, field_type)


def _first_leaves(fields: list[dict], budget: int, mode: str, path: str) -> tuple[list[_Leaf | _Struct], int]:
    """`truncateSchema`: the first `budget` leaves depth-first; a struct is cut where the count runs out."""
    out: list[_Leaf | _Struct] = []
    used = 0
    for field in fields:
        if used >= budget:
            break
        field_type = field["type"]
        child_path = f"{path}.{field['name']}" if path else field["name"]
        if isinstance(field_type, dict) and field_type["type"] == "struct":
            children, count = _first_leaves(field_type["fields"], budget - used, mode, child_path)
            used += count
            out.append(_Struct(physical_name(field, mode), children))
        else:
            used += 1
            out.append(_Leaf(physical_name(field, mode), child_path, field_type))
    return out, used


def _named(fields: list[dict], paths: list[tuple[str, ...]], mode: str, path: str) -> list[_Leaf | _Struct]:
    """`filterSchema`: fields named by `paths` in schema order; names that match nothing are ignored, as in Spark."""
    wanted: dict[str, list[tuple[str, ...]]] = {}
    for p in paths:
        wanted.setdefault(p[0], []).append(p[1:])
    out: list[_Leaf | _Struct] = []
    for field in fields:
        rests = wanted.get(field["name"].lower())
        if rests is None:
            continue
        child_path = f"{path}.{field['name']}" if path else field["name"]
        field_type = field["type"]
        if all(not rest for rest in rests):
            out.append(_node(field, mode, path))
        elif isinstance(field_type, dict) and field_type["type"] == "struct":
            # Spark drops a whole-struct entry when a deeper path names the same struct: only the deeper paths count
            deeper = [rest for rest in rests if rest]
            out.append(_Struct(physical_name(field, mode), _named(field_type["fields"], deeper, mode, child_path)))
        # a path through a non-struct field selects nothing
    return out


# ---------------------------------------------------------------------------------------------------------------------
# Values as Spark prints them


def _utf16_units(text: str) -> memoryview:
    return memoryview(text.encode("utf-16-le")).cast("H")


def _from_units(units: memoryview) -> str:
    return units.tobytes().decode("utf-16-le")


def _truncate_min(text: str, prefix: int) -> str:
    # Spark SQL substring(min, 0, n) counts code points, as Python does
    return text[:prefix]


def _truncate_max(text: str, prefix: int) -> str | None:
    """`StatisticsCollection.truncateMaxStringAgg`, counting Java UTF-16 code units; None when no safe max exists."""
    units = _utf16_units(text)
    length = len(units)
    if length <= prefix:
        return text
    if prefix <= 0:
        return None
    # `truncateMinStringAgg`: never end the start prefix inside a surrogate pair
    current = prefix
    if 0xD800 <= units[prefix - 1] <= 0xDBFF and 0xDC00 <= units[prefix] <= 0xDFFF:
        current += 1
    limit = 2 * prefix
    while current <= limit:
        if current >= length:
            return text
        if current + 1 < length and (units[current], units[current + 1]) == _UTF8_MAX_UNITS:
            current += 2  # U+10FFFF cannot be exceeded, so it has to stay in the prefix
        elif units[current] < 0x7F:
            return _from_units(units[:current]) + _ASCII_MAX
        else:
            return _from_units(units[:current]) + _UTF8_MAX
    return None


def _float32_text_value(value: float) -> float:
    """The double whose shortest text is the shortest text of the float32 `value`, as Java's Float.toString prints."""
    for digits in range(1, 10):
        candidate = float(f"{value:.{digits}g}")
        if struct.unpack("<f", struct.pack("<f", candidate))[0] == value:
            return candidate
    return value


def _date_text(days: int) -> str | None:
    try:
        day = _EPOCH_DATE + dt.timedelta(days=days)
    except OverflowError:
        return None  # outside years 1-9999 Spark's text differs; no bound is always safe
    return f"{day.year:04d}-{day.month:02d}-{day.day:02d}"


def _timestamp_text(micros: int, zone: bool) -> str | None:
    millis = micros // 1000  # Spark's ".SSS" pattern cuts the sub-millisecond digits, towards the past
    try:
        moment = _EPOCH + dt.timedelta(milliseconds=millis)
    except OverflowError:
        return None
    text = (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T"
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}.{millis % 1000:03d}"
    )
    return text + "Z" if zone else text


def _float_value(value: float, single: bool) -> float | str:
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"  # Jackson quotes non-finite numbers
    return _float32_text_value(value) if single else value


# ---------------------------------------------------------------------------------------------------------------------
# Accumulating


def _plain(array: pa.Array) -> pa.Array:
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if pa.types.is_string_view(array.type) or pa.types.is_binary_view(array.type):
        array = array.cast(pa.large_string())
    return array


_TYPE_CHECKS = {
    "integer": pa.types.is_integer,
    "float": pa.types.is_floating,
    "double": pa.types.is_floating,
    "decimal": pa.types.is_decimal,
    "date": pa.types.is_date,
    "timestamp": pa.types.is_timestamp,
    "timestamp_ntz": pa.types.is_timestamp,
}


def _extremes(leaf: _Leaf, array: pa.Array, prefix: int, table_uri: str | None) -> tuple[Any, Any]:
    """(min, max) of the non-null values of one batch, in the form the running values keep."""
    array = _plain(array)
    t = array.type
    kind = leaf.kind
    assert kind is not None  # _update_leaf skips leaves without a kind
    if kind == "string":
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            array = array.cast(pa.large_string())  # old writers store UTF-8 text as plain binary
        elif not (pa.types.is_string(t) or pa.types.is_large_string(t)):
            raise _type_error(leaf, t, table_uri)
    elif not _TYPE_CHECKS[kind](t):
        raise _type_error(leaf, t, table_uri)
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
        low = _truncate_min(low, prefix)  # the prefix of the smallest value is the smallest prefix
    return low, high


def _days(scalar: pa.Scalar, t: pa.DataType) -> int | None:
    if not scalar.is_valid:
        return None
    return scalar.value // 86_400_000 if pa.types.is_date64(t) else scalar.value


def _micros(scalar: pa.Scalar, t: pa.TimestampType) -> int | None:
    if not scalar.is_valid:
        return None
    return scalar.value // 1000 if t.unit == "ns" else scalar.value * _TO_MICROS[t.unit]


def _type_error(leaf: _Leaf, t: pa.DataType, table_uri: str | None) -> SchemaError:
    return SchemaError(f"column '{leaf.path}': values of type {t} do not fit its {leaf.kind} statistics", table_uri)


def _update_leaf(leaf: _Leaf, array: pa.Array | None, rows: int, prefix: int, table_uri: str | None) -> None:
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
    nodes: list[_Leaf | _Struct],
    parent: pa.RecordBatch | pa.StructArray | None,
    rows: int,
    prefix: int,
    table_uri: str | None,
) -> None:
    for node in nodes:
        array = None if parent is None else _child(parent, node.name)
        if isinstance(node, _Struct):
            if array is not None and not pa.types.is_struct(array.type):
                raise SchemaError(f"column '{node.name}': expected a struct, got {array.type}", table_uri)
            _update(node.children, array, rows, prefix, table_uri)
        else:
            _update_leaf(node, array, rows, prefix, table_uri)


def _child(parent: pa.RecordBatch | pa.StructArray, name: str) -> pa.Array | None:
    if isinstance(parent, pa.RecordBatch):
        index = parent.schema.get_field_index(name)
        return None if index < 0 else parent.column(index)
    index = parent.type.get_field_index(name)
    # struct_field folds the parent's nulls into the child: Spark reads a field of a null struct as null
    return None if index < 0 else pc.struct_field(parent, [index])


# ---------------------------------------------------------------------------------------------------------------------
# Output


def _bound(leaf: _Leaf, prefix: int, *, is_max: bool) -> Any:
    """The min or max as Spark prints it, or None when there is none."""
    value = leaf.max if is_max else leaf.min
    kind = leaf.kind
    if kind in ("float", "double"):
        if leaf.has_nan and (is_max or value is None):
            return "NaN"
        return None if value is None else _float_value(value, single=kind == "float")
    if value is None:
        return None
    if kind == "string":
        return _truncate_max(value, prefix) if is_max else value
    if kind == "date":
        return _date_text(value)
    if kind in ("timestamp", "timestamp_ntz"):
        return _timestamp_text(value, zone=kind == "timestamp")
    return value  # integers, and decimals exactly as read


def _has_minmax(node: _Leaf | _Struct) -> bool:
    if isinstance(node, _Struct):
        return any(_has_minmax(child) for child in node.children)
    return node.kind is not None


def _has_leaf(node: _Leaf | _Struct) -> bool:
    return any(_has_leaf(child) for child in node.children) if isinstance(node, _Struct) else True


def _section(
    nodes: list[_Leaf | _Struct], value: Callable[[_Leaf], Any], keep: Callable[[_Leaf | _Struct], bool]
) -> dict:
    # Spark builds every level with struct(), which is never null, so a struct whose leaves all lack a value prints
    # as {}; a struct with no leaf that can have the statistic is left out
    out: dict = {}
    for node in nodes:
        if not keep(node):
            continue
        if isinstance(node, _Struct):
            out[node.name] = _section(node.children, value, keep)
        else:
            result = value(node)
            if result is not None:
                out[node.name] = result
    return out


def dump_json_exact(value: Any) -> str:
    """Compact JSON in which `Decimal` values are written as exact numbers (``json.dumps`` would round them)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(key)}:{dump_json_exact(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(dump_json_exact(item) for item in value) + "]"
    if isinstance(value, Decimal):
        return format(value, "f")  # exact and in plain notation
    return json.dumps(value)


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
                f"delta.columnMapping.mode must be none, name or id, got {column_mapping_mode!r}", table_uri
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
            paths = _parse_stats_columns(explicit[DATA_SKIPPING_STATS_COLUMNS])
            if paths is None:
                raise _invalid(
                    DATA_SKIPPING_STATS_COLUMNS,
                    explicit,
                    "not a comma-separated list of column names (quote special names in backquotes)",
                    table_uri,
                )
            self._nodes = _named(fields, paths, column_mapping_mode, "")
        elif num_indexed < -1:
            raise _invalid(
                DATA_SKIPPING_NUM_INDEXED_COLS, explicit, "must be at least -1 (-1 means every column)", table_uri
            )
        elif num_indexed == -1:
            self._nodes = [_node(f, column_mapping_mode, "") for f in fields]
        else:
            self._nodes = _first_leaves(fields, num_indexed, column_mapping_mode, "")[0]
        self._num_records = 0

    @property
    def column_paths(self) -> list[str]:
        """Logical dotted paths of the leaf columns that get statistics (Z-order may only use these)."""
        out: list[str] = []
        stack: list[_Leaf | _Struct] = list(reversed(self._nodes))
        while stack:
            node = stack.pop()
            if isinstance(node, _Leaf):
                out.append(node.path)
            else:
                stack.extend(reversed(node.children))
        return out

    def update(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Add the rows of one batch (or table) written to the file.

        Raises:
            SchemaError: a selected column holds values of a type that does not fit its Delta type.
        """
        if isinstance(batch, pa.Table):
            for part in batch.to_batches():
                self.update(part)
            return
        self._num_records += batch.num_rows
        if batch.num_rows:
            _update(self._nodes, batch, batch.num_rows, self._prefix, self._table_uri)

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
