"""Partition values: the serialized strings of `add.partitionValues` parsed into typed Arrow arrays, and the distinct
combinations of raw values in a batch of them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.arrow_util import contiguous
from airflow_provider_deltalite.engine.conform import delta_type_to_arrow
from airflow_provider_deltalite.engine.errors import SchemaError
from airflow_provider_deltalite.engine.schema import GEOSPATIAL_TYPE, VARIANT

# A trailing zone after a time of day; the time part keeps "2021-09-08" from reading as a "-08" offset.
_ZONE_SUFFIX = r"\d{2}:\d{2}(?::\d{2}(?:\.\d*)?)?(?:Z|z|[+-]\d{2}(?::?\d{2})?)$"


def parse_partition_values(
    values: pa.Array | pa.ChunkedArray,
    delta_type: str | dict,
    *,
    column: str = "",
    table_uri: str | None = None,
) -> pa.Array:
    """Parse serialized partition values (protocol section 1.2.9) into a typed Arrow array, without a per-value loop.

    Null and "" become null for every type. Timestamps without a zone are read as UTC; ISO-8601 values with "Z"
    or an offset are converted to UTC. timestamp_ntz values must carry no zone. Binary values become the string's
    UTF-8 bytes.

    Args:
        values: the raw strings (any string-like or dictionary-of-string array).
        delta_type: the partition column's Delta type.
        column: the column name, used in error messages.
        table_uri: the table, used only in error messages.

    Returns:
        An array of `delta_type_to_arrow(delta_type)`.

    Raises:
        SchemaError: the type cannot be a partition column, or a value does not parse.
    """
    # variant and geospatial columns cannot be partition columns (the protocol forbids it)
    if isinstance(delta_type, dict) or delta_type in ("void", VARIANT) or GEOSPATIAL_TYPE.match(delta_type):
        raise SchemaError(
            f"partition column '{column}': type {_type_label(delta_type)} cannot be a partition column", table_uri
        )
    try:
        target = delta_type_to_arrow(delta_type)
    except SchemaError as exc:
        raise SchemaError(f"partition column '{column}': {exc.problem.split(': ', 1)[-1]}", table_uri) from None
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    try:
        text = pc.cast(values, pa.string())
    except pa.ArrowException:
        raise SchemaError(
            f"partition column '{column}': values of type {values.type} are not strings", table_uri
        ) from None
    text = pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text)

    def convert(strings: pa.Array) -> pa.Array:
        if pa.types.is_boolean(target):
            lowered = pc.utf8_lower(strings)
            is_true = pc.equal(lowered, "true")
            invalid = pc.and_(pc.invert(is_true), pc.not_equal(lowered, "false"))
            if pc.any(invalid).as_py():
                raise ValueError("not a boolean")
            return is_true
        if pa.types.is_timestamp(target) and target.tz is not None:
            has_zone = pc.match_substring_regex(strings, _ZONE_SUFFIX)
            null = pa.scalar(None, pa.string())
            zoned = pc.cast(pc.if_else(has_zone, strings, null), target)
            local = pc.cast(pc.if_else(has_zone, null, strings), pa.timestamp("us")).view(target)
            return pc.if_else(has_zone, zoned, local)
        return pc.cast(strings, target)

    try:
        return convert(text)
    except (pa.ArrowException, ValueError):
        pass
    # Error path only: find the first offending value so the message can name it.
    for value in pc.unique(pc.drop_null(text)).to_pylist():
        try:
            convert(pa.array([value], pa.string()))
        except (pa.ArrowException, ValueError):
            raise SchemaError(
                f"partition column '{column}': cannot parse value {value!r} as {_type_label(delta_type)}", table_uri
            ) from None
    raise SchemaError(f"partition column '{column}': cannot parse values as {_type_label(delta_type)}", table_uri)


def distinct_rows(values: pa.Array, names: Sequence[str]) -> tuple[list[tuple[str | None, ...]], np.ndarray]:
    """The distinct rows of a struct of raw partition values over the columns ``names`` (a missing column, and a
    null row, read as nulls; "" and null stay apart), and each row's index in them, without a loop over the rows.

    One integer per combination of values: mixed radix over the columns' distinct values in this batch, renumbering
    what exists so far before the product would pass 2**62 (eleven columns of 64 values do).
    """
    pv = contiguous(values)
    key = np.zeros(len(pv), np.int64)
    radix = 1
    for name in names:
        encoded = pc.dictionary_encode(_field_or_nulls(pv, name), null_encoding="encode")
        size = max(len(encoded.dictionary), 1)
        if radix * size >= 2**62:
            _, key = np.unique(key, return_inverse=True)
            key = key.reshape(-1).astype(np.int64)
            radix = int(key.max()) + 1
        key = key * size + encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        radix *= size
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    rows = []
    for i in first.tolist():
        row = pv[i].as_py() or {}
        rows.append(tuple(row.get(name) for name in names))
    return rows, inverse.reshape(-1)


def _field_or_nulls(struct: pa.Array, name: str) -> pa.Array:
    if pa.types.is_struct(struct.type) and struct.type.get_field_index(name) >= 0:
        return pc.cast(contiguous(struct.field(name)), pa.string())
    return pa.nulls(len(struct), pa.string())


def _type_label(delta_type: str | dict) -> str:
    return delta_type if isinstance(delta_type, str) else str(delta_type.get("type"))
