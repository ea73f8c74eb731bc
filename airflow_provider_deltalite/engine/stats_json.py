"""The `add.stats` JSON document: its top-level keys, and reading many documents at once into Arrow rows.

`read_json` joins the strings into one newline-delimited document for `pyarrow.json`. Only when that fails (a broken
row, a value of an unexpected type) are the rows of the failing chunk read one by one with Python's parser, each value
sanitised to what its column holds or to null, so that one bad row costs neither the other rows nor the speed of the
clean ones. `engine/stats_parse.py` then casts the values to the table's types.
"""

from __future__ import annotations

import json
import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, InvalidOperation, localcontext

import numpy as np
import pyarrow as pa
import pyarrow.json as pa_json

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.arrow_util import contiguous, is_blank, is_string_type
from airflow_provider_deltalite.engine.errors import CorruptLog

NUM_RECORDS = "numRecords"
TIGHT_BOUNDS = "tightBounds"
MIN_VALUES = "minValues"
MAX_VALUES = "maxValues"
NULL_COUNT = "nullCount"

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_MAX_DECIMAL_DIGITS = 76  # decimal256


def as_string_array(stats_json: object, table_uri: str | None) -> pa.Array:
    """The stats strings as one large_string array (binary decoded as UTF-8); CorruptLog when they are not text."""
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
            return pc.cast(array, pa.large_string())
        except pa.ArrowInvalid:
            # invalid UTF-8 somewhere: keep the valid rows, the careful path nulls the rest
            return pa.array(
                [None if v is None else v.decode("utf-8", errors="replace") for v in array.to_pylist()],
                pa.large_string(),
            )
    if not is_string_type(array.type):
        raise CorruptLog(f"file statistics must be strings, not {array.type}", table_uri)
    return pc.cast(array, pa.large_string())


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


def read_json(text: pa.Array, json_type: pa.StructType) -> tuple[pa.StructArray, pa.BooleanArray | None]:
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
        parsed, broken = _read_json_present(pc.filter(text, present), json_type)
        return pc.take(parsed, positions), None if broken is None else pc.fill_null(pc.take(broken, positions), False)
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
    if is_string_type(t):
        return value if isinstance(value, str) else None
    return None
