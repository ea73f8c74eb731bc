"""An independent reading of variant data for tests: decoding the binary encoding to Python values, rebuilding
shredded values from the Parquet columns as the VariantShredding specification describes, and collecting every
variant cell of a data file read directly with pyarrow (never through deltalite's engine)."""

from __future__ import annotations

import decimal
import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

MISSING = object()
_FIXED = {3: ("int8", "<b"), 4: ("int16", "<h"), 5: ("int32", "<i"), 6: ("int64", "<q"), 7: ("double", "<d")}
_FIXED |= {11: ("date", "<i"), 12: ("timestamp", "<q"), 13: ("timestamp_ntz", "<q"), 14: ("float", "<f")}
_FIXED |= {17: ("time", "<q"), 18: ("timestamp_nanos", "<q"), 19: ("timestamp_ntz_nanos", "<q")}


def metadata_names(metadata: bytes) -> list[str]:
    assert metadata[0] & 0x0F == 1, "variant metadata version 1"
    size = (metadata[0] >> 6) + 1
    count = int.from_bytes(metadata[1 : 1 + size], "little")
    offsets = [int.from_bytes(metadata[1 + size * (i + 1) : 1 + size * (i + 2)], "little") for i in range(count + 1)]
    base = 1 + size * (count + 2)
    return [metadata[base + offsets[i] : base + offsets[i + 1]].decode() for i in range(count)]


def decode(metadata: bytes, value: bytes) -> Any:
    """A variant as Python: objects as dicts, arrays as lists, primitives as (type, value) pairs."""
    return _decode(metadata_names(metadata), value, 0)


def _decode(names: list[str], v: bytes, pos: int) -> Any:
    basic, header = v[pos] & 3, v[pos] >> 2
    if basic == 1:
        return ("string", v[pos + 1 : pos + 1 + header].decode())
    if basic == 0:
        if header == 0:
            return ("null", None)
        if header in (1, 2):
            return ("boolean", header == 1)
        if header in _FIXED:
            name, fmt = _FIXED[header]
            return (name, struct.unpack_from(fmt, v, pos + 1)[0])
        if header in (8, 9, 10):
            width = {8: 4, 9: 8, 10: 16}[header]
            unscaled = int.from_bytes(v[pos + 2 : pos + 2 + width], "little", signed=True)
            return ("decimal", decimal.Decimal(unscaled).scaleb(-v[pos + 1]))
        if header in (15, 16):
            length = struct.unpack_from("<I", v, pos + 1)[0]
            data = v[pos + 5 : pos + 5 + length]
            return ("binary", data) if header == 15 else ("string", data.decode())
        if header == 20:
            return ("uuid", v[pos + 1 : pos + 17])
        raise AssertionError(f"unknown primitive {header}")
    large = header >> (4 if basic == 2 else 2) & 1
    offset_size = (header & 3) + 1
    id_size = ((header >> 2) & 3) + 1 if basic == 2 else 0
    count_size = 4 if large else 1
    n = int.from_bytes(v[pos + 1 : pos + 1 + count_size], "little")
    at = pos + 1 + count_size
    ids = [int.from_bytes(v[at + i * id_size : at + (i + 1) * id_size], "little") for i in range(n)]
    at += n * id_size
    offsets = [int.from_bytes(v[at + i * offset_size : at + (i + 1) * offset_size], "little") for i in range(n + 1)]
    data = at + (n + 1) * offset_size
    if basic == 3:
        return [_decode(names, v, data + offsets[i]) for i in range(n)]
    keys = [names[i] for i in ids]
    assert keys == sorted(keys, key=lambda k: k.encode()), "object fields in name order"
    return {keys[i]: _decode(names, v, data + offsets[i]) for i in range(n)}


def _typed(value: Any, arrow_type: pa.DataType) -> Any:
    names = {pa.int8(): "int8", pa.int16(): "int16", pa.int32(): "int32", pa.int64(): "int64", pa.string(): "string"}
    names |= {pa.float64(): "double", pa.float32(): "float", pa.bool_(): "boolean", pa.binary(): "binary"}
    if arrow_type in names:
        return (names[arrow_type], value)
    if pa.types.is_decimal(arrow_type):
        return ("decimal", value)
    raise AssertionError(f"typed_value type {arrow_type} is not covered by this oracle")


def unshred(metadata: bytes, group: dict, group_type: pa.StructType) -> Any:
    """The value of a (possibly shredded) variant group as `decode` returns it; MISSING when both columns are null."""
    value = group.get("value")
    typed = group.get("typed_value")
    index = group_type.get_field_index("typed_value")
    if typed is None:
        return MISSING if value is None else decode(metadata, value)
    typed_type = group_type.field(index).type
    if pa.types.is_struct(typed_type):
        out = {}
        for field in typed_type:
            member = unshred(metadata, typed[field.name], field.type)
            if member is not MISSING:
                out[field.name] = member
        if value is not None:
            rest = decode(metadata, value)
            assert isinstance(rest, dict) and not set(rest) & set(out)
            out |= rest
        return out
    assert value is None
    if pa.types.is_list(typed_type):
        return [unshred(metadata, e, typed_type.value_type) for e in typed]
    return _typed(typed, typed_type)


def canonical(value: Any) -> str:
    """A hashable, order-independent spelling of a decoded value."""
    return json.dumps(value, sort_keys=True, default=repr)


def variant_cells(delta_type: Any, value: Any, arrow_type: pa.DataType) -> Iterator[tuple[bytes, Any]]:
    """Every variant inside one cell of a column: (metadata bytes, the group as a dict with its Arrow type)."""
    if value is None:
        return
    if delta_type == "variant":
        yield value["metadata"], (value, arrow_type)
    elif isinstance(delta_type, dict) and delta_type["type"] == "struct":
        for field in delta_type["fields"]:
            child = arrow_type.field(arrow_type.get_field_index(field["name"])).type
            yield from variant_cells(field["type"], value.get(field["name"]), child)
    elif isinstance(delta_type, dict) and delta_type["type"] == "array":
        for element in value:
            yield from variant_cells(delta_type["elementType"], element, arrow_type.value_type)
    elif isinstance(delta_type, dict) and delta_type["type"] == "map":
        for _key, item in value:
            yield from variant_cells(delta_type["valueType"], item, arrow_type.item_type)


def file_cells(path: Path, schema: dict, *, decoded: bool) -> list[Any]:
    """Every variant in one data file, read with pyarrow: raw (metadata, value, typed_value) bytes, or decoded."""
    table = pq.read_table(path)
    out: list[Any] = []
    for field in schema["fields"]:
        if field["name"] not in table.column_names:
            continue
        column = table.column(field["name"])
        for cell in column.to_pylist():
            for metadata, (group, group_type) in variant_cells(field["type"], cell, column.type):
                if decoded:
                    rebuilt = unshred(metadata, group, group_type)
                    # a variant whose value and typed_value are both null reads as a variant null
                    out.append((metadata, canonical(("null", None) if rebuilt is MISSING else rebuilt)))
                else:
                    out.append((metadata, group.get("value"), canonical(group.get("typed_value"))))
    return out


def live_data_files(table_path: Path, paths: set[str]) -> list[Path]:
    return [table_path / unquote(p) for p in sorted(paths)]
