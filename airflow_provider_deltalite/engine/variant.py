"""Variant columns: the Arrow shape deltalite reads them as, and rebuilding shredded ones into that shape.

A `variant` column is read as ``struct<metadata: binary, value: binary>`` (the Parquet storage group, as
delta-kernel-rs returns it). Unshredded files hold exactly that group and pass through byte for byte. Shredded files
(`variantShredding`) also hold ``typed_value`` columns; they are rebuilt into the unshredded encoding following the
Parquet VariantShredding specification ("Reconstructing a Shredded Variant"): the same values, with the file's own
`metadata` bytes, so files whose shredding layouts differ come out in one shape and OPTIMIZE never mixes layouts.
"""

from __future__ import annotations

import decimal
import struct
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.errors import SchemaError

VARIANT_STORAGE = pa.struct([pa.field("metadata", pa.binary(), nullable=False), pa.field("value", pa.binary(), False)])
VARIANT_NULL = b"\x00"

_PRIMITIVE, _SHORT_STRING, _OBJECT, _ARRAY = 0, 1, 2, 3


def is_variant_storage(data_type: pa.DataType) -> bool:
    """Whether an Arrow type is the shape deltalite reads a variant column as."""
    return data_type == VARIANT_STORAGE


class _LayoutError(Exception):
    """A shredded group (or a value in it) that the shredding specification does not allow."""


def to_variant_storage(array: pa.Array, path: str, table_uri: str | None) -> pa.Array:
    """Read one variant column of a data file as `VARIANT_STORAGE`.

    Raises:
        SchemaError: the file's group is not a variant group (no `metadata`, unknown children, a `typed_value` of a
            type the shredding specification does not allow) or its shredded values break the specification.
    """
    try:
        return _to_storage(array)
    except _LayoutError as exc:
        raise SchemaError(
            f"column '{path}': the file's variant layout does not match the variant type: {exc}", table_uri
        ) from None


def _to_storage(array: pa.Array) -> pa.Array:
    if not pa.types.is_struct(array.type):
        raise _LayoutError(f"expected a group of metadata, value and typed_value, got {array.type}")
    names = [array.type.field(i).name for i in range(array.type.num_fields)]
    unknown = sorted(set(names) - {"metadata", "value", "typed_value"})
    if unknown or "metadata" not in names or not ({"value", "typed_value"} & set(names)):
        raise _LayoutError(f"the group has fields {names} (expected metadata, value and/or typed_value)")
    valid = pc.is_valid(array)
    metadata = _binary(array.field(names.index("metadata")), "metadata")
    if metadata.null_count and pc.any(pc.and_(valid, metadata.is_null())).as_py():
        raise _LayoutError("a row has no metadata")
    mask = array.is_null() if array.null_count else None
    if "typed_value" not in names:
        value = _binary(array.field(names.index("value")), "value")
        if not value.null_count:  # the common case: unshredded, copied through without touching a byte
            return pa.StructArray.from_arrays([metadata, value], fields=list(VARIANT_STORAGE), mask=mask)
    metadata_rows = metadata.to_pylist()
    rebuilt = _Group(array, "$", top=True).values(metadata_rows)
    out = [
        None if not ok else (VARIANT_NULL if v is None else v) for ok, v in zip(valid.to_pylist(), rebuilt, strict=True)
    ]
    meta_out = [m if ok else b"" for m, ok in zip(metadata_rows, valid.to_pylist(), strict=True)]
    values = pa.array([b"" if v is None else v for v in out], pa.binary())
    return pa.StructArray.from_arrays(
        [pa.array(meta_out, pa.binary()), values], fields=list(VARIANT_STORAGE), mask=mask
    )


def _binary(array: pa.Array, name: str) -> pa.Array:
    if pa.types.is_binary(array.type):
        return array
    if pa.types.is_large_binary(array.type) or pa.types.is_binary_view(array.type):
        return pc.cast(array, pa.binary())
    raise _LayoutError(f"{name} is {array.type}, not binary")


class _Group:
    """One shredded group (`value` and/or `typed_value`), rebuilt row by row into encoded variant values."""

    def __init__(self, array: pa.Array, where: str, *, top: bool = False) -> None:
        # `where` is the path inside the variant, as a JSON path: $, $.name, $.list[*]
        if not pa.types.is_struct(array.type):
            raise _LayoutError(f"{where} is {array.type}, not a group of value and typed_value")
        names = [array.type.field(i).name for i in range(array.type.num_fields)]
        if top:  # the column's own group also holds the metadata, checked by the caller
            names = [n if n != "metadata" else "" for n in names]
        if set(names) - {"value", "typed_value", ""} or not {"value", "typed_value"} & set(names):
            raise _LayoutError(f"{where} has fields {names} (expected value and/or typed_value)")
        self.where = where
        self.value = _binary(array.field(names.index("value")), f"{where}.value") if "value" in names else None
        self.typed = array.field(names.index("typed_value")) if "typed_value" in names else None
        if self.typed is not None and isinstance(self.typed, pa.ExtensionArray):
            self.typed = self.typed.storage

    def values(self, metadata: list[bytes]) -> list[bytes | None]:
        """Each row's encoded value; None where the value is missing (both columns null)."""
        n = len(metadata)
        residual: list[bytes | None] = self.value.to_pylist() if self.value is not None else [None] * n
        typed = self.typed
        if typed is None:
            return residual
        valid = pc.is_valid(typed).to_pylist()
        if pa.types.is_struct(typed.type):
            return self._objects(typed, valid, residual, metadata)
        if pa.types.is_list(typed.type) or pa.types.is_large_list(typed.type):
            shredded = self._arrays(typed, valid, metadata)
        else:
            encode = _primitive_encoder(typed.type, self.where)
            shredded = [encode(v) if ok else None for v, ok in zip(_plain(typed).to_pylist(), valid, strict=True)]
        out: list[bytes | None] = []
        for ok, typed_value, value in zip(valid, shredded, residual, strict=True):
            if ok and value is not None:
                raise _LayoutError(f"{self.where} has both value and a non-object typed_value in one row")
            out.append(typed_value if ok else value)
        return out

    def _objects(
        self, typed: pa.Array, valid: list[bool], residual: list[bytes | None], metadata: list[bytes]
    ) -> list[bytes | None]:
        names = [typed.type.field(i).name for i in range(typed.type.num_fields)]
        fields = [_Group(typed.field(i), f"{self.where}.{name}").values(metadata) for i, name in enumerate(names)]
        out: list[bytes | None] = []
        for row, ok in enumerate(valid):
            if not ok:
                out.append(residual[row])
                continue
            names_by_id, keys = _dictionary(metadata[row])
            members: dict[str, bytes] = {}
            for name, column in zip(names, fields, strict=True):
                member = column[row]
                if member is not None:
                    members[name] = member
            rest = residual[row]
            if rest is not None:
                for key, encoded in _object_fields(rest, names_by_id, self.where):
                    if key in members:
                        raise _LayoutError(f"{self.where}: field {key!r} is both shredded and in value")
                    members[key] = encoded
            out.append(_encode_object(members, keys, self.where))
        return out

    def _arrays(self, typed: pa.Array, valid: list[bool], metadata: list[bytes]) -> list[bytes | None]:
        offsets = typed.offsets.to_pylist()
        parents = [row for row in range(len(typed)) for _ in range(offsets[row + 1] - offsets[row])]
        start, end = offsets[0], offsets[-1]
        element_meta = [metadata[row] for row in parents]
        elements = _Group(typed.values.slice(start, end - start), f"{self.where}[*]").values(element_meta)
        out: list[bytes | None] = []
        for row, ok in enumerate(valid):
            if not ok:
                out.append(None)
                continue
            items = elements[offsets[row] - start : offsets[row + 1] - start]
            if any(item is None for item in items):
                raise _LayoutError(f"{self.where}: an array element is missing")
            out.append(_encode_container(_ARRAY, [item for item in items if item is not None], None))
        return out


def _plain(array: pa.Array) -> pa.Array:
    """Temporal values as their stored integers, so encoding copies them exactly."""
    t = array.type
    if pa.types.is_timestamp(t) or pa.types.is_time64(t):
        return pc.cast(array, pa.int64())
    if pa.types.is_date32(t):
        return pc.cast(array, pa.int32())
    return array


def _header(type_id: int) -> bytes:
    return bytes([type_id << 2 | _PRIMITIVE])


def _primitive_encoder(t: pa.DataType, where: str) -> Callable[[Any], bytes]:
    types = pa.types
    if types.is_boolean(t):
        return lambda v: _header(1 if v else 2)
    for check, type_id, fmt in (
        (types.is_int8, 3, "<b"),
        (types.is_int16, 4, "<h"),
        (types.is_int32, 5, "<i"),
        (types.is_int64, 6, "<q"),
        (types.is_float64, 7, "<d"),
        (types.is_date32, 11, "<i"),
        (types.is_float32, 14, "<f"),
    ):
        if check(t):
            return _packer(type_id, fmt)
    if types.is_timestamp(t) and t.unit in ("us", "ns"):
        type_id = {("us", True): 12, ("us", False): 13, ("ns", True): 18, ("ns", False): 19}[(t.unit, t.tz is not None)]
        return lambda v: _header(type_id) + struct.pack("<q", v)
    if types.is_time64(t) and t.unit == "us":
        return lambda v: _header(17) + struct.pack("<q", v)
    if types.is_decimal(t) and t.precision <= 38:
        type_id, width = (8, 4) if t.precision <= 9 else (9, 8) if t.precision <= 18 else (10, 16)
        return lambda v: (
            _header(type_id) + bytes([t.scale]) + _unscaled(v, t.scale).to_bytes(width, "little", signed=True)
        )
    if types.is_string(t) or types.is_large_string(t):
        return _encode_string
    if types.is_binary(t) or types.is_large_binary(t):
        return lambda v: _header(15) + struct.pack("<I", len(v)) + v
    if types.is_fixed_size_binary(t) and t.byte_width == 16:  # UUID, stored big-endian as the variant keeps it
        return lambda v: _header(20) + v
    raise _LayoutError(f"{where}: typed_value of type {t} is not a shredded variant type")


def _packer(type_id: int, fmt: str) -> Callable[[Any], bytes]:
    prefix = _header(type_id)
    return lambda v: prefix + struct.pack(fmt, v)


def _unscaled(value: decimal.Decimal, scale: int) -> int:
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    unscaled = int("".join(map(str, digits)) or "0") * 10 ** (exponent + scale)
    return -unscaled if sign else unscaled


def _encode_string(text: str) -> bytes:
    data = text.encode("utf-8")
    if len(data) < 64:
        return bytes([len(data) << 2 | _SHORT_STRING]) + data
    return _header(16) + struct.pack("<I", len(data)) + data


def _size(n: int) -> int:
    return 1 if n <= 0xFF else 2 if n <= 0xFFFF else 3 if n <= 0xFFFFFF else 4


def _encode_container(basic_type: int, items: list[bytes], ids: list[int] | None) -> bytes:
    n = len(items)
    data = b"".join(items)
    offsets, position = [], 0
    for item in items:
        offsets.append(position)
        position += len(item)
    offsets.append(position)
    offset_size = _size(position)
    is_large = n > 0xFF
    head = [(n).to_bytes(4 if is_large else 1, "little")]
    if ids is not None:
        id_size = _size(max(ids, default=0))
        header = (int(is_large) << 4 | (id_size - 1) << 2 | (offset_size - 1)) << 2 | basic_type
        head += [i.to_bytes(id_size, "little") for i in ids]
    else:
        header = (int(is_large) << 2 | (offset_size - 1)) << 2 | basic_type
    head += [o.to_bytes(offset_size, "little") for o in offsets]
    return bytes([header]) + b"".join(head) + data


def _encode_object(members: dict[str, bytes], keys: dict[str, int], where: str) -> bytes:
    # field ids in the order of the names' UTF-8 bytes, as the encoding requires; values in the same order
    ordered = sorted(members, key=lambda k: k.encode("utf-8"))
    missing = [k for k in ordered if k not in keys]
    if missing:
        raise _LayoutError(f"{where}: field {missing[0]!r} is not in the metadata dictionary")
    return _encode_container(_OBJECT, [members[k] for k in ordered], [keys[k] for k in ordered])


_DICTIONARIES: dict[bytes, tuple[list[str], dict[str, int]]] = {}


def _dictionary(metadata: bytes) -> tuple[list[str], dict[str, int]]:
    """The names of a metadata dictionary by id, and name -> (first) id."""
    cached = _DICTIONARIES.get(metadata)
    if cached is not None:
        return cached
    if not metadata or metadata[0] & 0x0F != 1:
        raise _LayoutError("metadata is not variant metadata version 1")
    size = (metadata[0] >> 6) + 1
    count = int.from_bytes(metadata[1 : 1 + size], "little")
    offsets = [int.from_bytes(metadata[1 + size * (i + 1) : 1 + size * (i + 2)], "little") for i in range(count + 1)]
    base = 1 + size * (count + 2)
    try:
        names = [metadata[base + offsets[i] : base + offsets[i + 1]].decode("utf-8") for i in range(count)]
    except UnicodeDecodeError:
        raise _LayoutError("metadata holds a name that is not UTF-8") from None
    ids: dict[str, int] = {}
    for i, name in enumerate(names):
        ids.setdefault(name, i)
    if len(_DICTIONARIES) < 4096:
        _DICTIONARIES[metadata] = (names, ids)
    return names, ids


def _object_fields(value: bytes, names: list[str], where: str) -> list[tuple[str, bytes]]:
    """The (name, encoded value) pairs of an encoded variant object (the residual of a partly shredded object)."""
    if not value or value[0] & 0x03 != _OBJECT:
        raise _LayoutError(f"{where}: value is not an object although typed_value is")
    header = value[0] >> 2
    offset_size, id_size, is_large = (header & 3) + 1, ((header >> 2) & 3) + 1, (header >> 4) & 1
    count_size = 4 if is_large else 1
    n = int.from_bytes(value[1 : 1 + count_size], "little")
    pos = 1 + count_size
    ids = [int.from_bytes(value[pos + i * id_size : pos + (i + 1) * id_size], "little") for i in range(n)]
    pos += n * id_size
    offsets = [
        int.from_bytes(value[pos + i * offset_size : pos + (i + 1) * offset_size], "little") for i in range(n + 1)
    ]
    data = pos + (n + 1) * offset_size
    if any(i >= len(names) for i in ids) or len(value) < data + offsets[n]:
        raise _LayoutError(f"{where}: value is not a valid variant object for its metadata")
    # values need not follow the id order; each one ends where the next one in the data begins
    ends = sorted(set(offsets))
    out = []
    for field_id, start in zip(ids, offsets[:n], strict=True):
        end = next((e for e in ends if e > start), start)
        out.append((names[field_id], value[data + start : data + end]))
    return out
