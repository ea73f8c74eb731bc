"""Delta types to Arrow, and conforming Parquet data to a table's logical (or physical) schema."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.column_mapping import column_mapping_id, physical_name
from airflow_provider_deltalite.engine.errors import SchemaError
from airflow_provider_deltalite.engine.properties import COLUMN_MAPPING_NESTED_IDS
from airflow_provider_deltalite.engine.schema import (
    GEOSPATIAL_TYPE,
    PRIMITIVES,
    VARIANT,
    decimal_params,
    validate_type,
    validated_schema,
)
from airflow_provider_deltalite.engine.variant import VARIANT_STORAGE, to_variant_storage

PARQUET_FIELD_ID = b"PARQUET:field_id"


def delta_type_to_arrow(delta_type: str | dict) -> pa.DataType:
    """Convert one Delta type (a type string or a struct/array/map object) to its Arrow type, with logical names.

    Args:
        delta_type: the type as it appears in a parsed schema.

    Returns:
        The Arrow type. List items are named "element"; map entries use Arrow's "key"/"value".

    Raises:
        SchemaError: the type is unknown.
    """
    return _arrow_type(validate_type(delta_type, "", None), physical=False, mode="none", path="")


def delta_schema_to_arrow(
    schema: dict, *, physical: bool = False, mode: str = "none", exclude: Iterable[str] = ()
) -> pa.Schema:
    """Convert a parsed Delta schema to an Arrow schema.

    Args:
        schema: a parsed schema (see `parse_schema_string`).
        physical: use physical names at every nesting level and, in id mode, attach Parquet field ids.
        mode: the column mapping mode; only used when `physical` is true.
        exclude: logical names of top-level fields to leave out (partition columns).

    Returns:
        The Arrow schema, fields in schema order, nullability as in the schema.

    Raises:
        SchemaError: a type is unknown or not supported.
    """
    schema = validated_schema(schema)
    excluded = set(exclude)
    fields = [f for f in schema["fields"] if f["name"] not in excluded]
    return pa.schema([_arrow_field(f, physical=physical, mode=mode, path="") for f in fields])


def _arrow_field(field: dict, *, physical: bool, mode: str, path: str) -> pa.Field:
    name = physical_name(field, mode) if physical else field["name"]
    child_path = f"{path}.{field['name']}" if path else field["name"]
    metadata = None
    nested_ids: Mapping[str, Any] = {}
    if physical and mode == "id":
        field_id = column_mapping_id(field)
        if field_id is not None:
            metadata = {PARQUET_FIELD_ID: str(field_id).encode()}
        # Ids of list elements and map keys/values live on the enclosing field (icebergCompat writers need them).
        nested_ids = (field.get("metadata") or {}).get(COLUMN_MAPPING_NESTED_IDS) or {}
        if not isinstance(nested_ids, Mapping):
            nested_ids = {}
    arrow_type = _arrow_type(field["type"], physical=physical, mode=mode, path=child_path, ids=(nested_ids, name))
    return pa.field(name, arrow_type, nullable=field["nullable"], metadata=metadata)


def _arrow_type(
    delta_type: Any, *, physical: bool, mode: str, path: str, ids: tuple[Mapping[str, Any], str] = ({}, "")
) -> pa.DataType:
    if isinstance(delta_type, str):
        if delta_type in PRIMITIVES:
            return PRIMITIVES[delta_type]
        if delta_type == VARIANT:
            return VARIANT_STORAGE
        if GEOSPATIAL_TYPE.match(delta_type):
            return pa.binary()  # WKB, as the file stores it
        return pa.decimal128(*decimal_params(delta_type, path, None))
    if delta_type["type"] == "struct":
        return pa.struct([_arrow_field(f, physical=physical, mode=mode, path=path) for f in delta_type["fields"]])
    nested_ids, id_path = ids

    def child(role: str, child_type: Any, nullable: bool) -> pa.Field:
        child_ids = (nested_ids, f"{id_path}.{role}")
        arrow_type = _arrow_type(child_type, physical=physical, mode=mode, path=f"{path}.{role}", ids=child_ids)
        field_id = nested_ids.get(child_ids[1])
        metadata = {PARQUET_FIELD_ID: str(field_id).encode()} if isinstance(field_id, int) else None
        return pa.field(role, arrow_type, nullable=nullable, metadata=metadata)

    if delta_type["type"] == "array":
        return pa.list_(child("element", delta_type["elementType"], delta_type["containsNull"]))
    return pa.map_(
        child("key", delta_type["keyType"], False),
        child("value", delta_type["valueType"], delta_type["valueContainsNull"]),
    )


# `_arrow_schema_of`'s memory: (schema dict, its validated form, the Arrow schema) by the dict's identity
_ARROW_SCHEMAS: dict[tuple[int, bool, str, frozenset[str]], tuple[dict, dict, pa.Schema]] = {}
_ARROW_SCHEMAS_KEPT = 64


def _arrow_schema_of(
    schema: dict, *, physical: bool, mode: str, exclude: frozenset[str], table_uri: str | None
) -> tuple[dict, pa.Schema]:
    """``schema`` validated and as Arrow (`delta_schema_to_arrow`), computed once per schema object.

    A compaction conforms every batch of every input to one schema, and validating and converting the schema took
    longer than conforming a small file's rows. Keyed by the dict's identity, which holding it here keeps from being
    reused: a table's schema dict is never changed once parsed (a new schema is a new dict).
    """
    key = (id(schema), physical, mode, exclude)
    hit = _ARROW_SCHEMAS.get(key)
    if hit is not None and hit[0] is schema:
        return hit[1], hit[2]
    validated = validated_schema(schema, table_uri)
    target = delta_schema_to_arrow(validated, physical=physical, mode=mode, exclude=exclude)
    if len(_ARROW_SCHEMAS) >= _ARROW_SCHEMAS_KEPT:
        _ARROW_SCHEMAS.clear()
    _ARROW_SCHEMAS[key] = (schema, validated, target)
    return validated, target


def to_logical(
    table: pa.Table,
    schema: dict,
    *,
    mode: str = "none",
    exclude: Iterable[str] = (),
    table_uri: str | None = None,
) -> pa.Table:
    """Make a table read from one Parquet data file match the Delta table's logical schema.

    Columns are matched by Parquet field id and then physical name (id mode), by physical name (name mode) or by
    name (no mapping), at every nesting level; a case-insensitive match is the last resort, as in Spark. Missing
    columns become nulls, extra columns are dropped, narrower types are widened, timestamps become microseconds with
    the table's zone, and list/map layouts and nullability flags are rebuilt with the target types.

    Read INT96 files with `coerce_int96_timestamp_unit="us"`: pyarrow's default nanosecond read silently wraps
    years outside 1677-2262 (Spark writes 9999-12-31 happily), and no later conversion can undo that.

    Args:
        table: the data as pyarrow.parquet read it.
        schema: the parsed Delta schema.
        mode: the column mapping mode.
        exclude: logical names of top-level fields to leave out (partition columns).
        table_uri: the table, used only in error messages.

    Returns:
        A table whose schema equals `delta_schema_to_arrow(schema, exclude=exclude)`.

    Raises:
        SchemaError: a file column cannot be converted to the table's type.
    """
    excluded = frozenset(exclude)
    schema, target = _arrow_schema_of(schema, physical=False, mode="none", exclude=excluded, table_uri=table_uri)
    if mode == "none" and table.schema.names == target.names and table.schema.types == target.types:
        # the file holds the table's columns as they are (what a compaction reads, file after file)
        return _with_schema(table, target)
    fields = [f for f in schema["fields"] if f["name"] not in excluded]
    lookup = _FieldLookup(table.schema)
    columns = []
    for field, target_field in zip(fields, target, strict=True):
        index = lookup.find(field, mode)
        if index is None:
            columns.append(pa.nulls(table.num_rows, target_field.type))
            continue
        chunks = [
            _conform(chunk, field["type"], target_field.type, mode, field["name"], table_uri)
            for chunk in table.column(index).chunks
        ]
        columns.append(pa.chunked_array(chunks, type=target_field.type))
    return pa.Table.from_arrays(columns, schema=target)


def to_physical(
    table: pa.Table, schema: dict, *, mode: str = "none", exclude: Iterable[str] = (), table_uri: str | None = None
) -> pa.Table:
    """Turn rows in the table's logical schema (as `to_logical` returns them) into what a data file stores.

    Names become physical names at every nesting level and, in id mode, fields carry their Parquet field ids, so
    Spark and delta-rs find the columns by id or physical name exactly as in files they wrote themselves.

    Args:
        table: rows whose schema equals `delta_schema_to_arrow(schema, exclude=exclude)`.
        schema: the parsed Delta schema.
        mode: the column mapping mode.
        exclude: logical names of top-level fields left out of data files (partition columns).
        table_uri: the table, used only in error messages.

    Returns:
        A table whose schema equals `delta_schema_to_arrow(schema, physical=True, mode=mode, exclude=exclude)`.
    """
    _, target = _arrow_schema_of(schema, physical=True, mode=mode, exclude=frozenset(exclude), table_uri=table_uri)
    if table.num_columns != len(target):
        raise SchemaError(f"expected {len(target)} data columns, got {table.num_columns}", table_uri)
    if mode == "none":
        return _with_schema(table, target)
    columns = [
        pa.chunked_array([_retype(chunk, field.type) for chunk in column.chunks], type=field.type)
        for column, field in zip(table.columns, target, strict=True)
    ]
    return pa.Table.from_arrays(columns, schema=target)


def _with_schema(table: pa.Table, target: pa.Schema) -> pa.Table:
    """``table`` (the names and types of ``target``) under ``target``'s nullability and metadata: itself when it has
    them already, without a call into pyarrow (each hands the GIL over, to another task's thread in a compaction)."""
    if table.schema.equals(target, check_metadata=True):
        return table
    return pa.Table.from_arrays(table.columns, schema=target)


def _retype(array: pa.Array, target: pa.DataType) -> pa.Array:
    # The logical and physical trees have the same shape and differ only in names, so children map by position;
    # Arrow's own cast matches struct fields by name and would turn every renamed field into nulls.
    mask = pc.is_null(array) if array.null_count else None
    if pa.types.is_struct(target):
        children = [_retype(array.field(i), target.field(i).type) for i in range(target.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_map(target) or pa.types.is_list(target):
        # rebase the offsets of a sliced array: Arrow rebuilds lists with a null mask only from unsliced offsets
        offsets, start, length = _zero_based(array)
        if pa.types.is_map(target):
            keys = _retype(array.keys.slice(start, length), target.key_type)
            items = _retype(array.items.slice(start, length), target.item_type)
            return pa.MapArray.from_arrays(offsets, keys, items, type=target, mask=mask)
        values = _retype(array.values.slice(start, length), target.value_type)
        return pa.ListArray.from_arrays(offsets, values, type=target, mask=mask)
    return array


def file_columns(file_schema: pa.Schema, schema: dict, mode: str) -> list[str]:
    """Names of the columns of a data file that hold the fields of ``schema`` (found as `to_logical` finds them)."""
    lookup = _FieldLookup(file_schema)
    found = (lookup.find(field, mode) for field in validated_schema(schema)["fields"])
    return [file_schema.field(i).name for i in found if i is not None]


class _FieldLookup:
    """Finds the file field that holds a Delta field, using the rules of the column mapping mode."""

    def __init__(self, fields: Iterable[pa.Field]) -> None:
        self.by_id: dict[int, int] = {}
        self.by_name: dict[str, int] = {}
        self.by_lower: dict[str, int | None] = {}
        for index, field in enumerate(fields):
            raw_id = (field.metadata or {}).get(PARQUET_FIELD_ID)
            if raw_id is not None and raw_id.strip().lstrip(b"-").isdigit():
                self.by_id.setdefault(int(raw_id), index)
            self.by_name.setdefault(field.name, index)
            lower = field.name.lower()
            # An ambiguous case-insensitive name must not silently pick one of two columns.
            self.by_lower[lower] = None if lower in self.by_lower else index

    def find(self, field: dict, mode: str) -> int | None:
        if mode == "id":
            field_id = column_mapping_id(field)
            if field_id is not None and field_id in self.by_id:
                return self.by_id[field_id]
        name = physical_name(field, mode)
        if name in self.by_name:
            return self.by_name[name]
        return self.by_lower.get(name.lower())


def _conform(
    array: pa.Array, delta_type: Any, target: pa.DataType, mode: str, path: str, table_uri: str | None
) -> pa.Array:
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if isinstance(array, pa.ExtensionArray):  # e.g. geoarrow.wkb from a GEOMETRY-annotated column
        array = array.storage
    if pa.types.is_null(array.type):
        return pa.nulls(len(array), target)
    if delta_type == VARIANT:
        return to_variant_storage(array, path, table_uri)
    try:
        if isinstance(delta_type, dict):
            kind = delta_type["type"]
            if kind == "struct":
                return _conform_struct(array, delta_type, target, mode, path, table_uri)
            if kind == "array":
                return _conform_list(array, delta_type, target, mode, path, table_uri)
            return _conform_map(array, delta_type, target, mode, path, table_uri)
        return _cast_leaf(array, target, path, table_uri)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        raise SchemaError(
            f"column '{path}': cannot convert file type {array.type} to {target}: {exc}", table_uri
        ) from None


def _mismatch(array: pa.Array, target: pa.DataType, path: str, table_uri: str | None) -> SchemaError:
    return SchemaError(f"column '{path}': file type {array.type} cannot be read as {target}", table_uri)


def _conform_struct(
    array: pa.Array, delta_type: dict, target: pa.StructType, mode: str, path: str, table_uri: str | None
) -> pa.Array:
    if not pa.types.is_struct(array.type):
        raise _mismatch(array, target, path, table_uri)
    lookup = _FieldLookup(array.type)
    children = []
    for field, target_field in zip(delta_type["fields"], target, strict=True):
        index = lookup.find(field, mode)
        if index is None:
            children.append(pa.nulls(len(array), target_field.type))
        else:
            child_path = f"{path}.{field['name']}"
            children.append(_conform(array.field(index), field["type"], target_field.type, mode, child_path, table_uri))
    if not children:
        # from_arrays cannot infer a length without children; reuse the validity bitmap directly.
        return pa.StructArray.from_buffers(target, len(array), [array.buffers()[0]], offset=array.offset)
    mask = pc.is_null(array) if array.null_count else None
    return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)


def _zero_based(array: pa.Array) -> tuple[pa.Array, int, int]:
    """Return int32 offsets starting at 0 plus the child range they cover, so sliced inputs rebuild correctly."""
    offsets = array.offsets
    if len(offsets) == 0:
        return pa.array([0], pa.int32()), 0, 0
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    if start:
        offsets = pc.subtract(offsets, pa.scalar(start, offsets.type))
    return pc.cast(offsets, pa.int32()), start, end - start


def _is_list(data_type: pa.DataType) -> bool:
    return pa.types.is_list(data_type) or pa.types.is_large_list(data_type)


def _conform_list(
    array: pa.Array, delta_type: dict, target: pa.ListType, mode: str, path: str, table_uri: str | None
) -> pa.Array:
    if not _is_list(array.type):
        raise _mismatch(array, target, path, table_uri)
    offsets, start, length = _zero_based(array)
    values = _conform(
        array.values.slice(start, length), delta_type["elementType"], target.value_type, mode, path, table_uri
    )
    mask = pc.is_null(array) if array.null_count else None
    return pa.ListArray.from_arrays(offsets, values, type=target, mask=mask)


def _conform_map(
    array: pa.Array, delta_type: dict, target: pa.MapType, mode: str, path: str, table_uri: str | None
) -> pa.Array:
    if pa.types.is_map(array.type):
        offsets, start, length = _zero_based(array)
        keys, items = array.keys.slice(start, length), array.items.slice(start, length)
    elif _is_list(array.type) and pa.types.is_struct(array.type.value_type) and array.type.value_type.num_fields == 2:
        # A legacy map written without the MAP annotation reads back as a list of key/value structs.
        offsets, start, length = _zero_based(array)
        entries = array.values.slice(start, length)
        keys, items = entries.field(0), entries.field(1)
    else:
        raise _mismatch(array, target, path, table_uri)
    keys = _conform(keys, delta_type["keyType"], target.key_type, mode, f"{path}.key", table_uri)
    items = _conform(items, delta_type["valueType"], target.item_type, mode, f"{path}.value", table_uri)
    mask = pc.is_null(array) if array.null_count else None
    return pa.MapArray.from_arrays(offsets, keys, items, type=target, mask=mask)


_STRINGLIKE = (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view)
_BINARYLIKE = (pa.types.is_binary, pa.types.is_large_binary, pa.types.is_binary_view, pa.types.is_fixed_size_binary)


def _cast_leaf(array: pa.Array, target: pa.DataType, path: str, table_uri: str | None) -> pa.Array:
    source = array.type
    if source == target:
        return array
    types = pa.types
    if types.is_timestamp(target):
        if types.is_timestamp(source):
            # Parquet INT96 reads as ns; Delta keeps microseconds, so sub-microsecond digits are dropped as Spark does.
            naive = array.view(pa.timestamp(source.unit))
            micros = pc.cast(naive, pa.timestamp("us"), safe=source.unit != "ns")
            # Parquet stores epoch-based values either way (UTC instants, or wall-clock time for timestamp_ntz), so
            # only the zone label changes here.
            return micros.view(target)
        if types.is_date(source) and target.tz is None:
            return pc.cast(array, target)
    elif types.is_integer(target):
        if types.is_integer(source):
            return pc.cast(array, target)
    elif types.is_floating(target):
        if types.is_floating(source) and source.bit_width <= target.bit_width:
            return pc.cast(array, target)
        if types.is_integer(source):
            return pc.cast(array, target)  # a safe cast fails on the rare int64 value a double cannot hold exactly
    elif types.is_decimal(target):
        if types.is_decimal(source) or types.is_integer(source):
            return pc.cast(array, target)  # a safe cast, so a value that needs more digits fails instead of wrapping
    elif types.is_string(target):
        if any(check(source) for check in _STRINGLIKE + _BINARYLIKE):
            return pc.cast(array, target)  # old writers store UTF-8 as plain binary; the cast validates it
    elif types.is_binary(target):
        if any(check(source) for check in _STRINGLIKE + _BINARYLIKE):
            return pc.cast(array, target)
    elif types.is_date(target):
        if types.is_date(source):
            return pc.cast(array, target)
    elif types.is_null(target):
        return pa.nulls(len(array), target)
    raise _mismatch(array, target, path, table_uri)
