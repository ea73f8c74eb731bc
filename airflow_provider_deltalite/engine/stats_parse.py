"""Parse Delta per-file statistics JSON (`add.stats`) into typed Arrow columns in one vectorised pass.

This module derives the Arrow types from the table schema and casts the values (timestamps, dates, NaN bounds);
reading the JSON text itself, with its row-by-row fallback for broken rows, is `engine/stats_json.py`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.arrow_util import contiguous, is_blank, is_string_type, struct_array
from airflow_provider_deltalite.engine.errors import SchemaError
from airflow_provider_deltalite.engine.properties import COLUMN_MAPPING_PHYSICAL_NAME
from airflow_provider_deltalite.engine.stats_json import (
    MAX_VALUES,
    MIN_VALUES,
    NULL_COUNT,
    NUM_RECORDS,
    TIGHT_BOUNDS,
    as_string_array,
    read_json,
)
from airflow_provider_deltalite.engine.variant import is_variant_storage

__all__ = ["PHYSICAL_NAME_KEY", "parse_stats", "stats_type"]

PHYSICAL_NAME_KEY = COLUMN_MAPPING_PHYSICAL_NAME.encode()
# a zone suffix only counts after a time of day, so the "-08" of a bare date is not taken for an offset
_ZONE_SUFFIX = r"\d:\d{2}(:\d{2}(\.\d*)?)?\s*(Z|z|UTC|[+-]\d{2}(:?\d{2})?)$"

PhysicalNames = Mapping[str | tuple[str, ...], str]


@dataclass(frozen=True)
class _Column:
    """One schema field as the stats see it: logical name and type, the JSON key, and struct children."""

    name: str
    physical: str
    type: pa.DataType
    children: tuple[_Column, ...] | None


def _columns(fields: list[pa.Field], prefix: tuple[str, ...], physical_names: PhysicalNames | None) -> list[_Column]:
    out = []
    for field in fields:
        path = (*prefix, field.name)
        physical = None
        if physical_names:
            physical = physical_names.get(path)
            if physical is None and len(path) == 1:
                physical = physical_names.get(field.name)
        if physical is None and field.metadata and PHYSICAL_NAME_KEY in field.metadata:
            physical = field.metadata[PHYSICAL_NAME_KEY].decode("utf-8")
        children = None
        # a variant reads as a struct but its stats are those of one column: a null count (and z85 bounds, not used)
        if pa.types.is_struct(field.type) and not is_variant_storage(field.type):
            children = tuple(_columns(list(field.type), path, physical_names))
        out.append(_Column(field.name, physical or field.name, field.type, children))
    return out


def _minmax_json_type(column: _Column) -> pa.DataType | None:
    """The type to read a min/max value as from JSON, or None when Delta keeps no min/max for the type."""
    t = column.type
    if column.children is not None:
        fields = [
            pa.field(child.physical, child_type)
            for child in column.children
            if (child_type := _minmax_json_type(child)) is not None
        ]
        return pa.struct(fields) if fields else None
    if pa.types.is_integer(t):
        return pa.int64()
    if pa.types.is_floating(t):
        return pa.float64()
    if pa.types.is_decimal(t):
        return t  # read exactly; a JSON number of a higher scale sends the batch to the careful path
    if is_string_type(t) or pa.types.is_date(t) or pa.types.is_timestamp(t):
        return pa.string()
    if pa.types.is_boolean(t):
        return pa.bool_()
    return None


def _minmax_out_type(column: _Column) -> pa.DataType | None:
    if column.children is not None:
        fields = [
            pa.field(child.name, child_type)
            for child in column.children
            if (child_type := _minmax_out_type(child)) is not None
        ]
        return pa.struct(fields) if fields else None
    return column.type if _minmax_json_type(column) is not None else None


def _null_count_type(column: _Column, physical: bool) -> pa.DataType | None:
    if column.children is not None:
        fields = [
            pa.field(child.physical if physical else child.name, child_type)
            for child in column.children
            if (child_type := _null_count_type(child, physical)) is not None
        ]
        return pa.struct(fields) if fields else None
    return pa.int64()


def _section_types(columns: list[_Column], physical: bool) -> tuple[pa.StructType, pa.StructType]:
    """(min/max struct type, nullCount struct type) keyed by physical (JSON) or logical (output) names."""
    minmax, counts = [], []
    for column in columns:
        name = column.physical if physical else column.name
        t = _minmax_json_type(column) if physical else _minmax_out_type(column)
        if t is not None:
            minmax.append(pa.field(name, t))
        t = _null_count_type(column, physical)
        if t is not None:
            counts.append(pa.field(name, t))
    return pa.struct(minmax), pa.struct(counts)


def _stats_struct(minmax: pa.StructType, counts: pa.StructType) -> pa.StructType:
    return pa.struct(
        [
            pa.field(NUM_RECORDS, pa.int64()),
            pa.field(TIGHT_BOUNDS, pa.bool_()),
            pa.field(MIN_VALUES, minmax),
            pa.field(MAX_VALUES, minmax),
            pa.field(NULL_COUNT, counts),
        ]
    )


def stats_type(data_schema: pa.Schema) -> pa.StructType:
    """The Arrow type `parse_stats` returns for a schema.

    Args:
        data_schema: the table's logical schema without partition columns.

    Returns:
        struct<numRecords, tightBounds, minValues, maxValues, nullCount> with logical names.
    """
    columns = _columns(list(data_schema), (), None)
    return _stats_struct(*_section_types(columns, physical=False))


# ---------------------------------------------------------------------------------------------------------------------
# Typing the values


def _per_element(values: pa.Array, t: pa.DataType, convert: Callable[[object], object]) -> pa.Array:
    out: list[object] = []
    for value in values.to_pylist():
        if value is None:
            out.append(None)
            continue
        try:
            converted = convert(value)
            pa.scalar(converted, type=t)
        except (ValueError, TypeError, OverflowError, pa.ArrowException):
            converted = None
        out.append(converted)
    return pa.array(out, type=t)


def _timestamp_value(t: pa.TimestampType) -> Callable[[object], object]:
    # only timestamp bounds the JSON reader could not take need the literal parser (and its time zone database)
    from airflow_provider_deltalite.engine.expressions import parse_timestamp_text

    def convert(text: object) -> object:
        parsed = parse_timestamp_text(str(text))
        if t.tz:
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
        return parsed.replace(tzinfo=None) if parsed.tzinfo is None else parsed.astimezone(dt.UTC).replace(tzinfo=None)

    return convert


def _to_timestamp(text: pa.Array, t: pa.TimestampType) -> pa.Array:
    """Parse stats timestamps: with an offset they are instants; without one they are read as UTC wall time."""
    try:
        zoned = pc.match_substring_regex(text, _ZONE_SUFFIX)
        null_text = pa.scalar(None, text.type)
        with_zone = pc.cast(pc.if_else(zoned, text, null_text), pa.timestamp(t.unit, "UTC"))
        without_zone = pc.cast(
            pc.cast(pc.if_else(zoned, null_text, text), pa.timestamp(t.unit)), pa.timestamp(t.unit, "UTC")
        )
        return pc.cast(pc.coalesce(with_zone, without_zone), t)
    except pa.ArrowException:
        return _per_element(text, t, _timestamp_value(t))


def _to_date(text: pa.Array, t: pa.DataType) -> pa.Array:
    try:
        return pc.cast(pc.cast(text, pa.date32()), t)
    except pa.ArrowException:
        return _per_element(text, t, lambda v: dt.date.fromisoformat(str(v).strip()[:10]))


def _cast_leaf(values: pa.Array, t: pa.DataType) -> pa.Array:
    if pa.types.is_timestamp(t):
        return _to_timestamp(values, t)
    if pa.types.is_date(t):
        return _to_date(values, t)
    if pa.types.is_floating(values.type):
        # NaN can arrive as a bare JSON token; it bounds nothing
        values = pc.if_else(pc.is_nan(values), pa.scalar(None, values.type), values)
    if values.type == t:
        return values
    try:
        return pc.cast(values, t)
    except pa.ArrowException:
        return _per_element(values, t, lambda v: v)


def _child(values: pa.StructArray, name: str) -> pa.Array | None:
    idx = values.type.get_field_index(name)
    return None if idx < 0 else pc.struct_field(values, [idx])


def _struct(children: list[pa.Array], fields: list[pa.Field], parent: pa.Array | None, n: int) -> pa.StructArray:
    valid = pc.is_valid(parent) if parent is not None else pa.repeat(pa.scalar(False), n)
    return struct_array(children, fields, valid)


def _minmax_section(parsed: pa.Array | None, columns: tuple[_Column, ...] | list[_Column], n: int) -> pa.StructArray:
    children, fields = [], []
    for column in columns:
        out_type = _minmax_out_type(column)
        if out_type is None:
            continue
        raw = _child(parsed, column.physical) if parsed is not None else None
        if column.children is not None:
            values = _minmax_section(raw, column.children, n)
        elif raw is None:
            values = pa.nulls(n, out_type)
        else:
            values = _cast_leaf(raw, out_type)
        children.append(values)
        fields.append(pa.field(column.name, out_type))
    return _struct(children, fields, parsed, n)


def _null_count_section(parsed: pa.Array | None, columns: tuple[_Column, ...] | list[_Column], n: int) -> pa.Array:
    children, fields = [], []
    for column in columns:
        out_type = _null_count_type(column, physical=False)
        if out_type is None:
            continue
        raw = _child(parsed, column.physical) if parsed is not None else None
        if column.children is not None:
            values = _null_count_section(raw, column.children, n)
        elif raw is None:
            values = pa.nulls(n, pa.int64())
        else:
            values = raw
        children.append(values)
        fields.append(pa.field(column.name, out_type))
    return _struct(children, fields, parsed, n)


def parse_stats(
    stats_json: pa.Array,
    data_schema: pa.Schema,
    *,
    physical_names: PhysicalNames | None = None,
    table_uri: str | None = None,
) -> pa.StructArray:
    """Parse the `stats` strings of many add actions at once.

    All strings are joined into one newline-delimited document and read by `pyarrow.json` with an explicit schema,
    then each min/max column is cast to its Arrow type (timestamps from ISO text with or without an offset, naive text
    read as UTC; dates from `yyyy-mm-dd`; floats given as `"NaN"` become null). Binary, array and map columns get a
    null count but no min/max. If some string is not valid JSON or has an unexpected shape, the strings are parsed
    one by one instead: unreadable rows become null and values of the wrong type become null.

    Args:
        stats_json: one JSON string per file; nulls allowed.
        data_schema: the table's logical Arrow schema without partition columns; structs are followed.
        physical_names: under column mapping, the JSON key of each column: logical top-level name -> physical name,
            and for nested fields a tuple path of logical names -> physical name, e.g. `{("a", "b"): "col-2"}`.
            Fields missing here use their `delta.columnMapping.physicalName` field metadata, else their own name.
        table_uri: named in error messages.

    Returns:
        struct<numRecords: int64, tightBounds: bool (absent means true), minValues: struct, maxValues: struct,
        nullCount: struct of int64> with logical names, one row per input string, null where the input is null, blank
        or unreadable.

    Raises:
        CorruptLog: `stats_json` does not hold strings.
        SchemaError: `data_schema` is not a schema.
    """
    if isinstance(data_schema, pa.StructType):
        data_schema = pa.schema(list(data_schema))
    if not isinstance(data_schema, pa.Schema):
        raise SchemaError(f"stats need a pyarrow Schema, not {type(data_schema).__name__}", table_uri)
    text = as_string_array(stats_json, table_uri)
    n = len(text)
    columns = _columns(list(data_schema), (), physical_names)
    json_type = _stats_struct(*_section_types(columns, physical=True))

    parsed, broken = read_json(text, json_type)

    num_records = _child(parsed, NUM_RECORDS)
    tight_bounds = pc.fill_null(_child(parsed, TIGHT_BOUNDS), True)
    min_values = _minmax_section(_child(parsed, MIN_VALUES), columns, n)
    max_values = _minmax_section(_child(parsed, MAX_VALUES), columns, n)
    null_count = _null_count_section(_child(parsed, NULL_COUNT), columns, n)

    # no statistics at all (null or blank) is a null row, not a row of nulls
    mask = is_blank(text)
    if broken is not None:
        mask = pc.or_(mask, broken)
    out_type = _stats_struct(min_values.type, null_count.type)
    return struct_array(
        [num_records, tight_bounds, min_values, max_values, null_count], list(out_type), pc.invert(mask)
    )


# Every writer puts numRecords first; a string that starts with it gives the count without a JSON parse (8x faster)
_NUM_RECORDS_FIRST = r'^\{\s*"numRecords"\s*:\s*(?P<n>\d+)\s*[,}]'


def record_counts(raw: pa.Array, table_uri: str | None = None) -> pa.Array:
    """numRecords of each stats string (null without statistics): read from the start of the string where it stands
    first, the other strings parsed as JSON."""
    if not len(raw):
        return pa.array([], pa.int64())
    text = raw if pa.types.is_string(raw.type) or pa.types.is_large_string(raw.type) else pc.cast(raw, pa.string())
    found = pc.cast(pc.struct_field(pc.extract_regex(text, _NUM_RECORDS_FIRST), "n"), pa.int64())
    rest = pc.and_(pc.is_valid(text), pc.is_null(found))
    if not pc.any(rest).as_py():
        return found
    parsed = parse_stats(pc.filter(text, rest), pa.schema([]), table_uri=table_uri).field("numRecords")
    return pc.replace_with_mask(found, rest, pc.cast(contiguous(parsed), pa.int64()))
