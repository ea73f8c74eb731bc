"""The Thrift compact protocol, schema-less: every field is kept with its wire type, known to this code or not.

Parquet footers, page headers and page indexes are Thrift structs in the compact protocol. Decoding them without a
schema into `Struct` (field id -> (wire type, value)) and writing them back in the order read is what makes a
round-trip byte-identical, including fields a newer parquet-format added that this code has never heard of: nothing
is dropped because nothing is interpreted. Typed views (`engine/parquet/footer.py`) read and change the fields by id.

The encoder writes the canonical form (short field headers where the id delta fits 1..15, short list headers under 15
elements, minimal varints). Two non-canonical forms seen in the wild are remembered so they round-trip: a long field
header where a short one would do (`Struct.long_ids`) and a long list header for a short list (`List.long_header`).

Example:
    >>> s, end = read_struct(bytes([0x15, 0x04, 0x00]), 0)
    >>> s.get(1), end, write_struct(s)
    (2, 3, b'\\x15\\x04\\x00')
"""

from __future__ import annotations

import struct as _struct
from collections.abc import Iterator
from typing import Any

__all__ = [
    "BINARY",
    "BOOL",
    "BYTE",
    "DOUBLE",
    "I16",
    "I32",
    "I64",
    "LIST",
    "MAP",
    "SET",
    "STRUCT",
    "List",
    "Map",
    "Struct",
    "ThriftError",
    "read_struct",
    "read_varint",
    "write_struct",
    "zigzag_varint",
]

# compact protocol wire types (a bool field carries its value in the type: 1 true, 2 false)
BOOL = 1
BOOL_FALSE = 2
BYTE = 3
I16 = 4
I32 = 5
I64 = 6
DOUBLE = 7
BINARY = 8
LIST = 9
SET = 10
MAP = 11
STRUCT = 12

_DOUBLE = _struct.Struct("<d")
_INTS = frozenset((I16, I32, I64))
_LISTS = frozenset((LIST, SET))
_BOOLS = frozenset((BOOL, BOOL_FALSE))
_MAX_DEPTH = 64  # parquet nests structs a few levels deep; a deeper input is corrupt or hostile


class ThriftError(ValueError):
    """The bytes are not a well-formed compact-protocol struct."""


class Struct:
    """A decoded struct: ``fields`` maps field id -> (wire type, value) in the order the fields were read."""

    __slots__ = ("fields", "long_ids")

    def __init__(self, fields: dict[int, tuple[int, Any]] | None = None) -> None:
        self.fields: dict[int, tuple[int, Any]] = {} if fields is None else fields
        self.long_ids: set[int] | None = None

    def get(self, fid: int, default: Any = None) -> Any:
        entry = self.fields.get(fid)
        return default if entry is None else entry[1]

    def set(self, fid: int, wire_type: int, value: Any) -> None:
        """Set a field; a new one goes where its id sorts, so the encoding stays in id order as writers emit it."""
        fields = self.fields
        if fid in fields or not fields or fid > next(reversed(fields)):
            fields[fid] = (wire_type, value)
            return
        items = list(fields.items())
        items.append((fid, (wire_type, value)))
        items.sort(key=lambda kv: kv[0])
        self.fields = dict(items)

    def remove(self, fid: int) -> None:
        self.fields.pop(fid, None)

    def copy(self) -> Struct:
        """A deep copy (structs, lists and maps are copied; bytes and numbers are immutable)."""
        out = Struct({fid: (t, _copy(v)) for fid, (t, v) in self.fields.items()})
        if self.long_ids:
            out.long_ids = set(self.long_ids)
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Struct) and self.fields == other.fields

    def __repr__(self) -> str:
        return f"Struct({self.fields!r})"


class List:
    """A decoded list or set: its element wire type and the elements."""

    __slots__ = ("elem_type", "items", "long_header")

    def __init__(self, elem_type: int, items: list[Any], long_header: bool = False) -> None:
        self.elem_type = elem_type
        self.items = items
        self.long_header = long_header

    def __iter__(self) -> Iterator[Any]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, List) and self.elem_type == other.elem_type and self.items == other.items

    def __repr__(self) -> str:
        return f"List({self.elem_type}, {self.items!r})"


class Map:
    """A decoded map: key and value wire types and the pairs in order."""

    __slots__ = ("key_type", "pairs", "value_type")

    def __init__(self, key_type: int, value_type: int, pairs: list[tuple[Any, Any]]) -> None:
        self.key_type = key_type
        self.value_type = value_type
        self.pairs = pairs

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Map) and (self.key_type, self.value_type, self.pairs) == (
            other.key_type,
            other.value_type,
            other.pairs,
        )


def _copy(value: Any) -> Any:
    if isinstance(value, Struct):
        return value.copy()
    if isinstance(value, List):
        return List(value.elem_type, [_copy(v) for v in value.items], value.long_header)
    if isinstance(value, Map):
        return Map(value.key_type, value.value_type, [(_copy(k), _copy(v)) for k, v in value.pairs])
    return value


# -- decoding --------------------------------------------------------------------------------------------------------


def read_struct(buf: bytes, pos: int = 0) -> tuple[Struct, int]:
    """Decode one struct starting at ``pos``; the struct and the position after its stop byte.

    Raises:
        ThriftError: the bytes end early or hold an unknown wire type.
    """
    try:
        return _read_struct(buf, pos, 0)
    except IndexError:
        raise ThriftError("the Thrift struct is cut short") from None
    except _struct.error:
        raise ThriftError("the Thrift struct is cut short") from None


def _read_struct(buf: bytes, pos: int, depth: int) -> tuple[Struct, int]:
    if depth > _MAX_DEPTH:
        raise ThriftError("Thrift structs nested too deeply")
    fields: dict[int, tuple[int, Any]] = {}
    out = Struct(fields)
    last = 0
    while True:
        header = buf[pos]
        pos += 1
        if header == 0:
            return out, pos
        t = header & 0x0F
        delta = header >> 4
        if delta:
            fid = last + delta
        else:
            # long form: a zigzag i16 field id follows
            n = buf[pos]
            pos += 1
            if n >= 0x80:
                n, pos = _varint_rest(buf, pos, n)
            fid = (n >> 1) ^ -(n & 1)
            if 0 < fid - last <= 15:
                if out.long_ids is None:
                    out.long_ids = set()
                out.long_ids.add(fid)
        # the common types inline: this loop is what a footer of thousands of columns costs
        if t in _INTS:
            n = buf[pos]
            pos += 1
            if n >= 0x80:
                n, pos = _varint_rest(buf, pos, n)
            fields[fid] = (t, (n >> 1) ^ -(n & 1))
        elif t == BINARY:
            n = buf[pos]
            pos += 1
            if n >= 0x80:
                n, pos = _varint_rest(buf, pos, n)
            end = pos + n
            if end > len(buf):
                raise ThriftError("a Thrift binary field runs past the end of the data")
            fields[fid] = (BINARY, buf[pos:end])
            pos = end
        elif t == STRUCT:
            value, pos = _read_struct(buf, pos, depth + 1)
            fields[fid] = (STRUCT, value)
        elif t in _LISTS:
            items, pos = _read_list(buf, pos, depth + 1)
            fields[fid] = (t, items)
        elif t == BOOL:
            fields[fid] = (BOOL, True)
        elif t == BOOL_FALSE:
            fields[fid] = (BOOL, False)
        else:
            value, pos = _read_value(buf, pos, t, depth + 1)
            fields[fid] = (t, value)
        last = fid


def _varint_rest(buf: bytes, pos: int, first: int) -> tuple[int, int]:
    result = first & 0x7F
    shift = 7
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 70:
            raise ThriftError("a Thrift varint is longer than 10 bytes")


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint at ``pos`` (a zigzag i16/i32/i64 still to be unzigzagged); the value and the position after.

    Raises:
        IndexError: the bytes end inside the varint.
        ThriftError: the varint is longer than 10 bytes.
    """
    n = buf[pos]
    if n < 0x80:
        return n, pos + 1
    return _varint_rest(buf, pos + 1, n)


def zigzag_varint(n: int) -> bytes:
    """The compact protocol's encoding of an i16/i32/i64 value (zigzag, then a minimal varint), as `write_struct`'s."""
    out = bytearray()
    _put_int(out, n)
    return bytes(out)


def _read_list(buf: bytes, pos: int, depth: int) -> tuple[List, int]:
    header = buf[pos]
    pos += 1
    elem_type = header & 0x0F
    size = header >> 4
    long_header = size == 15
    if long_header:
        size = buf[pos]
        pos += 1
        if size >= 0x80:
            size, pos = _varint_rest(buf, pos, size)
    if size > len(buf) - pos and elem_type not in _BOOLS:
        raise ThriftError("a Thrift list claims more elements than there are bytes")
    items: list[Any] = []
    append = items.append
    if elem_type == STRUCT:
        for _ in range(size):
            value, pos = _read_struct(buf, pos, depth)
            append(value)
    elif elem_type in _INTS:
        for _ in range(size):
            n = buf[pos]
            pos += 1
            if n >= 0x80:
                n, pos = _varint_rest(buf, pos, n)
            append((n >> 1) ^ -(n & 1))
    elif elem_type == BINARY:
        for _ in range(size):
            n = buf[pos]
            pos += 1
            if n >= 0x80:
                n, pos = _varint_rest(buf, pos, n)
            append(buf[pos : pos + n])
            pos += n
    else:
        for _ in range(size):
            value, pos = _read_value(buf, pos, elem_type, depth)
            append(value)
    return List(elem_type, items, long_header and size < 15), pos


def _read_value(buf: bytes, pos: int, t: int, depth: int) -> tuple[Any, int]:
    if t in _INTS:
        n = buf[pos]
        pos += 1
        if n >= 0x80:
            n, pos = _varint_rest(buf, pos, n)
        return (n >> 1) ^ -(n & 1), pos
    if t == BINARY:
        n = buf[pos]
        pos += 1
        if n >= 0x80:
            n, pos = _varint_rest(buf, pos, n)
        return buf[pos : pos + n], pos + n
    if t == STRUCT:
        return _read_struct(buf, pos, depth + 1)
    if t in _LISTS:
        return _read_list(buf, pos, depth + 1)
    if t == BYTE:
        b = buf[pos]
        return (b - 256 if b >= 128 else b), pos + 1
    if t in _BOOLS:
        # a bool outside a field header (a list element) is one byte; keep the byte as written
        return buf[pos], pos + 1
    if t == DOUBLE:
        return _DOUBLE.unpack_from(buf, pos)[0], pos + 8
    if t == MAP:
        size = buf[pos]
        pos += 1
        if size >= 0x80:
            size, pos = _varint_rest(buf, pos, size)
        if size == 0:
            return Map(0, 0, []), pos
        types = buf[pos]
        pos += 1
        key_type, value_type = types >> 4, types & 0x0F
        pairs = []
        for _ in range(size):
            key, pos = _read_value(buf, pos, key_type, depth + 1)
            value, pos = _read_value(buf, pos, value_type, depth + 1)
            pairs.append((key, value))
        return Map(key_type, value_type, pairs), pos
    raise ThriftError(f"unknown Thrift compact wire type {t}")


# -- encoding --------------------------------------------------------------------------------------------------------


def write_struct(value: Struct) -> bytes:
    """Encode a struct (its fields in stored order)."""
    out = bytearray()
    _write_struct(out, value)
    return bytes(out)


def _put_varint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _put_int(out: bytearray, n: int) -> None:
    z = (n << 1) ^ (n >> 63) if n < 0 else n << 1
    if z < 0x80:
        out.append(z)
    else:
        _put_varint(out, z)


def _write_struct(out: bytearray, value: Struct) -> None:
    last = 0
    long_ids = value.long_ids
    for fid, (t, v) in value.fields.items():
        wire = (BOOL if v else BOOL_FALSE) if t == BOOL else t
        delta = fid - last
        if 0 < delta <= 15 and (long_ids is None or fid not in long_ids):
            out.append((delta << 4) | wire)
        else:
            out.append(wire)
            _put_int(out, fid)
        last = fid
        if t == BOOL:
            continue
        if t in _INTS:
            _put_int(out, v)
        elif t == BINARY:
            _put_varint(out, len(v))
            out += v
        elif t == STRUCT:
            _write_struct(out, v)
        else:
            _write_value(out, t, v)
    out.append(0)


def _write_list(out: bytearray, value: List) -> None:
    items = value.items
    size = len(items)
    elem_type = value.elem_type
    if size < 15 and not value.long_header:
        out.append((size << 4) | elem_type)
    else:
        out.append(0xF0 | elem_type)
        _put_varint(out, size)
    if elem_type == STRUCT:
        for item in items:
            _write_struct(out, item)
    elif elem_type in _INTS:
        for item in items:
            _put_int(out, item)
    else:
        for item in items:
            _write_value(out, elem_type, item)


def _write_value(out: bytearray, t: int, v: Any) -> None:
    if t in _INTS:
        _put_int(out, v)
    elif t == BINARY:
        _put_varint(out, len(v))
        out += v
    elif t == STRUCT:
        _write_struct(out, v)
    elif t in _LISTS:
        _write_list(out, v)
    elif t == BYTE:
        out.append(v & 0xFF)
    elif t in _BOOLS:
        out.append(v)
    elif t == DOUBLE:
        out += _DOUBLE.pack(v)
    elif t == MAP:
        _put_varint(out, len(v.pairs))
        if v.pairs:
            out.append((v.key_type << 4) | v.value_type)
            for key, item in v.pairs:
                _write_value(out, v.key_type, key)
                _write_value(out, v.value_type, item)
    else:
        raise ThriftError(f"unknown Thrift compact wire type {t}")
