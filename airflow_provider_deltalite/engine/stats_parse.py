"""Parse Delta per-file statistics JSON (`add.stats`) into typed Arrow columns in one vectorised pass."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, InvalidOperation, localcontext

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from airflow_provider_deltalite.engine.arrow_util import contiguous, is_blank
from airflow_provider_deltalite.engine.errors import CorruptLog, SchemaError
from airflow_provider_deltalite.engine.expressions import parse_timestamp_text
from airflow_provider_deltalite.engine.properties import COLUMN_MAPPING_PHYSICAL_NAME

__all__ = ["PHYSICAL_NAME_KEY", "parse_stats", "stats_type"]

PHYSICAL_NAME_KEY = COLUMN_MAPPING_PHYSICAL_NAME.encode()
NUM_RECORDS = "numRecords"
TIGHT_BOUNDS = "tightBounds"
MIN_VALUES = "minValues"
MAX_VALUES = "maxValues"
NULL_COUNT = "nullCount"

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_MAX_DECIMAL_DIGITS = 76  # decimal256
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
        if pa.types.is_struct(field.type):
            children = tuple(_columns(list(field.type), path, physical_names))
        out.append(_Column(field.name, physical or field.name, field.type, children))
    return out


def _is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


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
    if _is_string(t) or pa.types.is_date(t) or pa.types.is_timestamp(t):
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
# Reading the JSON


def _as_string_array(stats_json: object, table_uri: str | None) -> pa.Array:
    array: pa.Array
    if isinstance(stats_json, pa.ChunkedArray):
        array = contiguous(stats_json)
    elif isinstance(stats_json, pa.Array):
        array = stats_json
    else:
        try:
            array = pa.array(stats_json, type=pa.string())
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise CorruptLog(f"file statistics must be strings ({exc})", table_uri) from None
    if pa.types.is_null(array.type):
        return pa.nulls(len(array), pa.large_string())
    if pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type):
        try:
            return array.cast(pa.large_string())
        except pa.ArrowInvalid:
            # invalid UTF-8 somewhere: keep the valid rows, the careful path nulls the rest
            return pa.array(
                [None if v is None else v.decode("utf-8", errors="replace") for v in array.to_pylist()],
                pa.large_string(),
            )
    if not _is_string(array.type):
        raise CorruptLog(f"file statistics must be strings, not {array.type}", table_uri)
    return array.cast(pa.large_string())


def _read_json_batch(lines: pa.Array, json_type: pa.StructType) -> pa.StructArray:
    """Parse all rows at once; raises pyarrow errors (or ValueError on a row-count mismatch) when any row is off.

    A raw newline inside a row either breaks the parse or changes the row count, so it cannot go unnoticed.
    """
    n = len(lines)
    if n == 0:
        return pa.array([], type=json_type)
    longest = pc.max(pc.binary_length(lines)).as_py() or 0
    joined = pc.binary_join(
        pa.LargeListArray.from_arrays(pa.array([0, n], pa.int64()), lines), pa.scalar("\n", pa.large_string())
    )[0]
    table = pa_json.read_json(
        pa.BufferReader(joined.as_buffer()),
        read_options=pa_json.ReadOptions(block_size=max(1 << 20, 2 * longest + 1024)),
        parse_options=pa_json.ParseOptions(
            explicit_schema=pa.schema(list(json_type)), unexpected_field_behavior="ignore"
        ),
    )
    if table.num_rows != n:
        raise ValueError(f"{table.num_rows} JSON rows for {n} stats strings")
    result = table.to_struct_array()
    return result.combine_chunks() if result.num_chunks else pa.array([], type=json_type)


_FALLBACK_CHUNK = 2048


def _read_json(text: pa.Array, json_type: pa.StructType) -> tuple[pa.StructArray, pa.BooleanArray | None]:
    """Parse the stats rows; returns the parsed rows and a mask of unreadable rows (None when all were readable)."""
    # Files without stats are common (whole logs have none); building every nested null field for them dominated
    # load time, so parse only the rows that have text and scatter the results back.
    present = pc.invert(is_blank(text))
    n_present = int(pc.sum(present).as_py() or 0)
    if n_present < len(text):
        if n_present == 0:
            return pa.nulls(len(text), json_type), None
        mask = present.to_numpy(zero_copy_only=False)
        positions = pa.array(np.cumsum(mask) - 1, pa.int64(), mask=~mask)
        parsed, broken = _read_json_present(text.filter(present), json_type)
        return parsed.take(positions), None if broken is None else pc.fill_null(broken.take(positions), False)
    return _read_json_present(text, json_type)


def _read_json_present(text: pa.Array, json_type: pa.StructType) -> tuple[pa.StructArray, pa.BooleanArray | None]:
    # every row has text here: a blank row would be skipped by the reader and shift the rows
    lines = text
    try:
        return _read_json_batch(lines, json_type), None
    except (pa.ArrowException, ValueError):
        pass
    # Spark writes non-finite float bounds as strings; the reader takes them as bare tokens. Anywhere else the bare
    # token is a type error, which still ends in the careful path below, so this rewrite cannot change a value.
    special = r'"(NaN|Infinity|-Infinity)"(\s*[,}])'
    if pc.any(pc.match_substring_regex(lines, special)).as_py():
        try:
            return _read_json_batch(pc.replace_substring_regex(lines, special, r"\1\2"), json_type), None
        except (pa.ArrowException, ValueError):
            pass
    # find the bad rows chunk by chunk so that one broken row does not send every row through Python
    parts, broken = [], []
    for start in range(0, len(lines), _FALLBACK_CHUNK):
        chunk = text.slice(start, _FALLBACK_CHUNK)
        try:
            parts.append(_read_json_batch(chunk, json_type))
            broken.append(pa.repeat(pa.scalar(False), len(chunk)))
        except (pa.ArrowException, ValueError):
            rows, bad = _read_json_rows(chunk, json_type)
            parts.append(rows)
            broken.append(bad)
    if not parts:
        return pa.array([], type=json_type), None
    return pa.concat_arrays(parts), pa.concat_arrays(broken)


def _read_json_rows(text: pa.Array, json_type: pa.StructType) -> tuple[pa.StructArray, pa.BooleanArray]:
    """Parse row by row, keeping every readable value; returns the rows and a mask of rows that did not parse."""
    rows: list[dict | None] = []
    broken: list[bool] = []
    for raw in text.to_pylist():
        if raw is None:
            rows.append(None)
            broken.append(False)
            continue
        try:
            # Decimal keeps decimal bounds exact; floats are converted later
            doc = json.loads(raw, parse_float=Decimal) if raw.strip() else {}
        except (ValueError, RecursionError):  # RecursionError: nested too deeply for Python's parser
            doc = None
        if not isinstance(doc, dict):
            rows.append(None)
            broken.append(True)
            continue
        rows.append(
            {field.name: _sanitize(doc.get(field.name), field.type, _ROUNDING.get(field.name)) for field in json_type}
        )
        broken.append(False)
    return pa.array(rows, type=json_type), pa.array(broken, pa.bool_())


# a decimal bound with too many digits is rounded outwards so that it stays a bound
_ROUNDING = {MIN_VALUES: ROUND_FLOOR, MAX_VALUES: ROUND_CEILING}


def _sanitize_struct(value: object, t: pa.StructType, rounding: str | None) -> dict | None:
    if not isinstance(value, dict):
        return None
    return {field.name: _sanitize(value.get(field.name), field.type, rounding) for field in t}


def _sanitize(value: object, t: pa.DataType, rounding: str | None) -> object:
    """Coerce one JSON value to what `t` holds, or None when it cannot be trusted."""
    if value is None:
        return None
    if pa.types.is_struct(t):
        return _sanitize_struct(value, t, rounding)
    if isinstance(value, bool):
        return value if pa.types.is_boolean(t) else None
    if pa.types.is_boolean(t):
        return None
    if pa.types.is_integer(t):
        if isinstance(value, (float, Decimal)) and math.isfinite(value) and value == int(value):
            value = int(value)
        elif isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                return None
        return value if isinstance(value, int) and _INT64_MIN <= value <= _INT64_MAX else None
    if pa.types.is_floating(t):
        if isinstance(value, str):
            try:
                value = float(value.strip())  # accepts NaN, Infinity, -Infinity as Spark writes them
            except ValueError:
                return None
        if not isinstance(value, (int, float, Decimal)):
            return None
        try:
            converted = float(value)
        except (OverflowError, ValueError):
            return None
        if math.isinf(converted) and not (isinstance(value, float) and math.isinf(value)):
            return None  # a finite bound too large for a double says nothing reliable
        value = converted
        # NaN bounds carry no order information for skipping
        return None if math.isnan(value) else value
    if pa.types.is_decimal(t):
        if isinstance(value, float):
            value = repr(value)
        if not isinstance(value, (int, str, Decimal)):
            return None
        try:
            dec = Decimal(value.strip() if isinstance(value, str) else value)
            if not dec.is_finite():
                return None
            with localcontext() as ctx:
                ctx.prec = 2 * _MAX_DECIMAL_DIGITS  # the default 28 digits is less than decimal(38) needs
                quantum = Decimal(1).scaleb(-t.scale)
                exact = dec.quantize(quantum)
                if exact != dec:
                    if rounding is None:
                        return None
                    exact = dec.quantize(quantum, rounding=rounding)
        except InvalidOperation:
            return None
        return exact if len(exact.as_tuple().digits) <= t.precision else None
    if _is_string(t):
        return value if isinstance(value, str) else None
    return None


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
        with_zone = pc.if_else(zoned, text, null_text).cast(pa.timestamp(t.unit, "UTC"))
        without_zone = pc.if_else(zoned, null_text, text).cast(pa.timestamp(t.unit)).cast(pa.timestamp(t.unit, "UTC"))
        return pc.coalesce(with_zone, without_zone).cast(t)
    except pa.ArrowException:
        return _per_element(text, t, _timestamp_value(t))


def _to_date(text: pa.Array, t: pa.DataType) -> pa.Array:
    try:
        return text.cast(pa.date32()).cast(t)
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
        return values.cast(t)
    except pa.ArrowException:
        return _per_element(values, t, lambda v: v)


def _child(values: pa.StructArray, name: str) -> pa.Array | None:
    idx = values.type.get_field_index(name)
    return None if idx < 0 else pc.struct_field(values, [idx])


def _struct(children: list[pa.Array], fields: list[pa.Field], parent: pa.Array | None, n: int) -> pa.StructArray:
    mask = (
        pc.is_null(parent) if parent is not None else pa.repeat(pa.scalar(True), n) if n else pa.array([], pa.bool_())
    )
    return pa.StructArray.from_arrays(children, fields=fields, mask=mask)


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
    text = _as_string_array(stats_json, table_uri)
    n = len(text)
    columns = _columns(list(data_schema), (), physical_names)
    json_type = _stats_struct(*_section_types(columns, physical=True))

    parsed, broken = _read_json(text, json_type)

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
    return pa.StructArray.from_arrays(
        [num_records, tight_bounds, min_values, max_values, null_count], fields=list(out_type), mask=mask
    )
