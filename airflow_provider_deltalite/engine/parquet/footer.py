"""A Parquet file's footer (FileMetaData) and page indexes as typed views over the schema-less Thrift codec.

A view reads and writes fields of its `Struct` by the ids of the parquet-format specification
(``src/main/thrift/parquet.thrift``); fields it has no accessor for stay in the struct untouched, so
``encode_footer(decode_footer(raw)) == raw`` for any footer, including fields added after this code was written.

Example:
    >>> meta = read_footer(open("part-0.parquet", "rb").read())  # doctest: +SKIP
    >>> meta.num_rows, meta.row_groups[0].columns[0].meta_data.data_page_offset  # doctest: +SKIP
    (1000, 4)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

from airflow_provider_deltalite.engine.parquet.thrift_compact import (
    BINARY,
    I16,
    I32,
    I64,
    LIST,
    STRUCT,
    List,
    Struct,
    ThriftError,
    read_struct,
    write_struct,
)

MAGIC = b"PAR1"
ENCRYPTED_MAGIC = b"PARE"  # a file whose footer is encrypted

V = TypeVar("V", bound="View")


class FooterError(ValueError):
    """The bytes are not a Parquet file's footer this codec can read (too short, bad magic, encrypted, corrupt)."""


class View:
    """A typed view over one Thrift struct; ``raw`` is the struct itself (changes through the view land there)."""

    __slots__ = ("raw",)

    def __init__(self, raw: Struct | None = None) -> None:
        self.raw = Struct() if raw is None else raw

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.raw == other.raw

    def encode(self) -> bytes:
        return write_struct(self.raw)


class _Field:
    """A scalar field (int or bytes) by id; None when unset; setting None removes it."""

    def __init__(self, fid: int, wire_type: int) -> None:
        self.fid = fid
        self.wire_type = wire_type

    @overload
    def __get__(self, obj: None, owner: type) -> _Field: ...
    @overload
    def __get__(self, obj: View, owner: type) -> Any: ...
    def __get__(self, obj: View | None, owner: type) -> Any:
        if obj is None:
            return self
        entry = obj.raw.fields.get(self.fid)
        return None if entry is None else entry[1]

    def __set__(self, obj: View, value: Any) -> None:
        if value is None:
            obj.raw.remove(self.fid)
        else:
            obj.raw.set(self.fid, self.wire_type, value)


class _Text(_Field):
    """A Thrift string (UTF-8 bytes on the wire) as str."""

    def __get__(self, obj: View | None, owner: type) -> Any:
        if obj is None:
            return self
        entry = obj.raw.fields.get(self.fid)
        return None if entry is None else bytes(entry[1]).decode("utf-8", "replace")

    def __set__(self, obj: View, value: Any) -> None:
        super().__set__(obj, None if value is None else value.encode("utf-8"))


class _Child(Generic[V]):
    """A struct-typed field as a view (None when unset)."""

    def __init__(self, fid: int, view: Callable[[Struct], V]) -> None:
        self.fid = fid
        self.view = view

    def __get__(self, obj: View | None, owner: type) -> Any:
        if obj is None:
            return self
        entry = obj.raw.fields.get(self.fid)
        return None if entry is None else self.view(entry[1])

    def __set__(self, obj: View, value: View | None) -> None:
        if value is None:
            obj.raw.remove(self.fid)
        else:
            obj.raw.set(self.fid, STRUCT, value.raw)


class _Children(Generic[V]):
    """A list<struct> field as a list of views (empty when unset); setting replaces the list."""

    def __init__(self, fid: int, view: Callable[[Struct], V]) -> None:
        self.fid = fid
        self.view = view

    def __get__(self, obj: View | None, owner: type) -> Any:
        if obj is None:
            return self
        entry = obj.raw.fields.get(self.fid)
        return [] if entry is None else [self.view(s) for s in entry[1].items]

    def __set__(self, obj: View, value: list[Any] | None) -> None:
        if value is None:
            obj.raw.remove(self.fid)
        else:
            obj.raw.set(self.fid, LIST, List(STRUCT, [v.raw for v in value]))


class _Values(_Field):
    """A list of scalars (i32 enums, strings as bytes) as a Python list (None when unset)."""

    def __init__(self, fid: int, elem_type: int) -> None:
        super().__init__(fid, LIST)
        self.elem_type = elem_type

    def __get__(self, obj: View | None, owner: type) -> Any:
        if obj is None:
            return self
        entry = obj.raw.fields.get(self.fid)
        return None if entry is None else list(entry[1].items)

    def __set__(self, obj: View, value: Any) -> None:
        super().__set__(obj, None if value is None else List(self.elem_type, list(value)))


class KeyValue(View):
    __slots__ = ()
    key = _Text(1, BINARY)
    value = _Text(2, BINARY)


class Statistics(View):
    __slots__ = ()
    max = _Field(1, BINARY)  # deprecated: signed order only
    min = _Field(2, BINARY)
    null_count = _Field(3, I64)
    distinct_count = _Field(4, I64)
    max_value = _Field(5, BINARY)
    min_value = _Field(6, BINARY)
    is_max_value_exact = _Field(7, 1)
    is_min_value_exact = _Field(8, 1)


class PageEncodingStats(View):
    __slots__ = ()
    page_type = _Field(1, I32)
    encoding = _Field(2, I32)
    count = _Field(3, I32)


class ColumnMetaData(View):
    __slots__ = ()
    type = _Field(1, I32)
    encodings = _Values(2, I32)
    path_in_schema = _Values(3, BINARY)
    codec = _Field(4, I32)
    num_values = _Field(5, I64)
    total_uncompressed_size = _Field(6, I64)
    total_compressed_size = _Field(7, I64)
    key_value_metadata = _Children(8, KeyValue)
    data_page_offset = _Field(9, I64)
    index_page_offset = _Field(10, I64)
    dictionary_page_offset = _Field(11, I64)
    statistics = _Child(12, Statistics)
    encoding_stats = _Children(13, PageEncodingStats)
    bloom_filter_offset = _Field(14, I64)
    bloom_filter_length = _Field(15, I32)
    size_statistics = _Field(16, STRUCT)  # kept as a raw Struct: it holds no offsets
    geospatial_statistics = _Field(17, STRUCT)

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(bytes(p).decode("utf-8", "replace") for p in self.path_in_schema or ())

    @property
    def chunk_start(self) -> int:
        """Where the chunk's first page (the dictionary page when there is one) starts."""
        dictionary = self.dictionary_page_offset
        data = self.data_page_offset
        # writers that have no dictionary page sometimes set its offset to 0; the chunk then starts at its data
        if dictionary is not None and 0 < dictionary < data:
            return int(dictionary)
        return int(data)


class ColumnChunk(View):
    __slots__ = ()
    file_path = _Text(1, BINARY)
    file_offset = _Field(2, I64)
    meta_data = _Child(3, ColumnMetaData)
    offset_index_offset = _Field(4, I64)
    offset_index_length = _Field(5, I32)
    column_index_offset = _Field(6, I64)
    column_index_length = _Field(7, I32)
    crypto_metadata = _Field(8, STRUCT)
    encrypted_column_metadata = _Field(9, BINARY)


class SortingColumn(View):
    __slots__ = ()
    column_idx = _Field(1, I32)
    descending = _Field(2, 1)
    nulls_first = _Field(3, 1)


class RowGroup(View):
    __slots__ = ()
    columns = _Children(1, ColumnChunk)
    total_byte_size = _Field(2, I64)
    num_rows = _Field(3, I64)
    sorting_columns = _Children(4, SortingColumn)
    file_offset = _Field(5, I64)
    total_compressed_size = _Field(6, I64)
    ordinal = _Field(7, I16)


class SchemaElement(View):
    __slots__ = ()
    type = _Field(1, I32)
    type_length = _Field(2, I32)
    repetition_type = _Field(3, I32)
    name = _Text(4, BINARY)
    num_children = _Field(5, I32)
    converted_type = _Field(6, I32)
    scale = _Field(7, I32)
    precision = _Field(8, I32)
    field_id = _Field(9, I32)
    logical_type = _Field(10, STRUCT)  # a union; compared and copied as a raw Struct


class FileMetaData(View):
    __slots__ = ()
    version = _Field(1, I32)
    schema = _Children(2, SchemaElement)
    num_rows = _Field(3, I64)
    row_groups = _Children(4, RowGroup)
    key_value_metadata = _Children(5, KeyValue)
    created_by = _Text(6, BINARY)
    column_orders = _Field(7, LIST)  # list<ColumnOrder union>, compared and copied raw
    encryption_algorithm = _Field(8, STRUCT)
    footer_signing_key_metadata = _Field(9, BINARY)

    def metadata_value(self, key: str) -> str | None:
        for kv in self.key_value_metadata:
            if kv.key == key:
                return kv.value
        return None


class PageLocation(View):
    __slots__ = ()
    offset = _Field(1, I64)
    compressed_page_size = _Field(2, I32)
    first_row_index = _Field(3, I64)


class OffsetIndex(View):
    __slots__ = ()
    page_locations = _Children(1, PageLocation)
    unencoded_byte_array_data_bytes = _Values(2, I64)


class ColumnIndex(View):
    __slots__ = ()
    null_pages = _Values(1, 1)
    min_values = _Values(2, BINARY)
    max_values = _Values(3, BINARY)
    boundary_order = _Field(4, I32)
    null_counts = _Values(5, I64)


class BloomFilterHeader(View):
    __slots__ = ()
    num_bytes = _Field(1, I32)


def decode_struct(raw: bytes, what: str) -> tuple[Struct, int]:
    """A struct from bytes, `FooterError` naming ``what`` when it does not decode."""
    try:
        return read_struct(raw, 0)
    except ThriftError as exc:
        raise FooterError(f"{what}: {exc}") from None


def decode_footer(raw: bytes) -> FileMetaData:
    """The FileMetaData of a footer's Thrift bytes (without the length and magic that follow it in a file)."""
    value, end = decode_struct(raw, "the Parquet footer")
    if end != len(raw):
        raise FooterError(f"the Parquet footer has {len(raw) - end} bytes after its end")
    return FileMetaData(value)


def encode_footer(meta: FileMetaData) -> bytes:
    """The Thrift bytes of a footer (without length and magic)."""
    return write_struct(meta.raw)


def footer_length(tail: bytes) -> int:
    """The footer length from a file's last 8 bytes.

    Raises:
        FooterError: the tail is not a plaintext Parquet file's ending.
    """
    if len(tail) < 8:
        raise FooterError("too short to be a Parquet file")
    magic = tail[-4:]
    if magic == ENCRYPTED_MAGIC:
        raise FooterError("the Parquet footer is encrypted")
    if magic != MAGIC:
        raise FooterError("not a Parquet file (no PAR1 at its end)")
    return int.from_bytes(tail[-8:-4], "little")


def footer_bytes(data: bytes) -> bytes:
    """The footer's Thrift bytes of a whole Parquet file held in memory."""
    length = footer_length(data[-8:])
    if length + 12 > len(data):
        raise FooterError("the Parquet footer length is larger than the file")
    return data[len(data) - 8 - length : len(data) - 8]


def read_footer(data: bytes) -> FileMetaData:
    """The FileMetaData of a whole Parquet file held in memory."""
    return decode_footer(footer_bytes(data))


def file_with_footer(body: bytes, meta: FileMetaData) -> bytes:
    """``body`` (magic and column chunks) followed by the encoded footer, its length and the magic."""
    raw = encode_footer(meta)
    return body + raw + len(raw).to_bytes(4, "little") + MAGIC
