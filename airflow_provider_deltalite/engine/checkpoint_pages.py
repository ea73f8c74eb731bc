"""Decoding only the pages of a checkpoint column chunk that hold chosen rows.

pyarrow decodes a column chunk from its first page: to plan one partition of a checkpoint whose row group holds a
million files, every path and every JSON statistic before that partition's rows is decompressed and decoded, then
dropped (a second of the plan's time on a delta-rs checkpoint). A column that is not repeated (``add.path``,
``add.stats``, ``add.size``) has one value per row in each data page, so its page headers say which rows each page
holds. Here the headers are walked, and the dictionary page with the data pages that hold a chosen row are copied
into a small Parquet file of that one column, which pyarrow reads as it reads any file: decompression, definition
levels and encodings stay pyarrow's. The pages are copied byte for byte, so the values are those of the checkpoint.

Anything unexpected (a header that does not decode, a repeated column, a page that holds no row count) gives None,
and the caller decodes the column whole as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.parquet.footer import (
    ColumnChunk,
    FileMetaData,
    FooterError,
    RowGroup,
    SchemaElement,
    decode_footer,
    file_with_footer,
)
from airflow_provider_deltalite.engine.parquet.thrift_compact import ThriftError, read_struct

# Page header bytes read at once; a header with statistics can be longer, and is then read again whole.
_HEADER_PROBE = 256
_DATA_PAGE, _DICTIONARY_PAGE, _DATA_PAGE_V2 = 0, 2, 3
_REPEATED = 2
MAGIC = b"PAR1"


@dataclass(frozen=True)
class _Page:
    offset: int  # of its header, in the file
    length: int  # header and compressed body
    uncompressed: int  # header and uncompressed body
    first_row: int
    rows: int


class PagedColumns:
    """One checkpoint file's footer, to read chosen rows of its non-repeated top-level columns page by page."""

    def __init__(self, source: Any, meta: FileMetaData) -> None:
        self.source = source
        self.meta = meta
        self._elements = _schema_paths(meta.schema)

    @classmethod
    def open(cls, source: Any) -> PagedColumns | None:
        """The footer of the Parquet file ``source`` (seekable, positioned anywhere), or None when it cannot be read."""
        try:
            source.seek(0, 2)
            size = source.tell()
            source.seek(size - 8)
            tail = source.read(8)
            if len(tail) != 8 or tail[4:] != MAGIC:
                return None
            length = int.from_bytes(tail[:4], "little")
            source.seek(size - 8 - length)
            return cls(source, decode_footer(source.read(length)))
        except (FooterError, ThriftError, OSError, ValueError):
            return None

    def rows(self, rg: int, path: str, chosen: np.ndarray) -> pa.Array | None:
        """The values of leaf ``path`` (``"add.stats"``) at the rows ``chosen`` (a mask over row group ``rg``) as the
        top-level struct column holding only that field (its validity is the action's), or None when this column
        cannot be read by pages."""
        parts = tuple(path.split("."))
        if len(parts) != 2 or parts not in self._elements or parts[:1] not in self._elements:
            return None
        leaf, parent = self._elements[parts], self._elements[parts[:1]]
        if _REPEATED in (leaf.repetition_type, parent.repetition_type) or leaf.num_children:
            return None
        group = self.meta.row_groups[rg]
        chunk = next((c for c in group.columns if c.meta_data is not None and c.meta_data.path == parts), None)
        if chunk is None or chunk.file_path is not None:
            return None
        try:
            pages = self._pages(chunk)
        except (ThriftError, OSError, ValueError, KeyError):
            return None
        if pages is None:
            return None
        dictionary, data = pages
        if sum(p.rows for p in data) != group.num_rows:
            return None
        wanted = [p for p in data if chosen[p.first_row : p.first_row + p.rows].any()]
        if not wanted:
            return pa.array([], pa.struct([]))  # never asked: the caller reads rows only where one is chosen
        body = self._file(chunk, dictionary, wanted, parent, leaf)
        try:
            table = pq.ParquetFile(pa.BufferReader(body)).read(use_threads=False)
        except (pa.ArrowException, OSError, ValueError):
            return None
        column = table.column(0).combine_chunks()
        held = np.concatenate([np.arange(p.first_row, p.first_row + p.rows) for p in wanted])
        if len(column) != len(held):
            return None
        return pc.take(column, pa.array(np.flatnonzero(chosen[held])))

    def _pages(self, chunk: ColumnChunk) -> tuple[_Page | None, list[_Page]] | None:
        meta = chunk.meta_data
        position, end = meta.chunk_start, meta.chunk_start + int(meta.total_compressed_size)
        dictionary = None
        data: list[_Page] = []
        row = 0
        while position < end:
            header, length = self._header(position, end)
            kind = header.get(1)
            body, unpacked = int(header.get(3)), int(header.get(2))
            page_rows = None
            if kind == _DATA_PAGE:
                page_rows = header.get(5).get(1)  # num_values: one per row in a column that is not repeated
            elif kind == _DATA_PAGE_V2:
                page_rows = header.get(8).get(3)
            elif kind == _DICTIONARY_PAGE and not data and dictionary is None:
                dictionary = _Page(position, length + body, length + unpacked, 0, 0)
            else:
                return None  # an index page, or a dictionary page after data: not a layout to copy pages of
            if page_rows is not None:
                data.append(_Page(position, length + body, length + unpacked, row, int(page_rows)))
                row += int(page_rows)
            position += length + body
        return dictionary, data

    def _header(self, position: int, end: int) -> tuple[Any, int]:
        probe = _HEADER_PROBE
        while True:
            self.source.seek(position)
            raw = self.source.read(min(probe, end - position))
            try:
                return read_struct(raw, 0)
            except ThriftError:
                if probe >= end - position:
                    raise
                probe *= 8

    def _read(self, page: _Page) -> bytes:
        self.source.seek(page.offset)
        raw = self.source.read(page.length)
        if len(raw) != page.length:
            raise ValueError("the checkpoint ends inside a page")
        return bytes(raw)

    def _file(
        self,
        chunk: ColumnChunk,
        dictionary: _Page | None,
        pages: list[_Page],
        parent: SchemaElement,
        leaf: SchemaElement,
    ) -> bytes:
        """A Parquet file of one column: the parent group, the leaf, and the chosen pages (dictionary first)."""
        copied = ([dictionary] if dictionary is not None else []) + pages
        body = MAGIC + b"".join(self._read(p) for p in copied)
        meta = chunk.meta_data.raw.copy()
        column = ColumnChunk(None)
        column.file_offset = len(MAGIC)
        column_meta = type(chunk.meta_data)(meta)
        column_meta.num_values = sum(p.rows for p in pages)
        column_meta.total_compressed_size = sum(p.length for p in copied)
        column_meta.total_uncompressed_size = sum(p.uncompressed for p in copied)
        column_meta.dictionary_page_offset = len(MAGIC) if dictionary is not None else None
        column_meta.data_page_offset = len(MAGIC) + (dictionary.length if dictionary is not None else 0)
        column_meta.statistics = None  # of the whole chunk: not these pages'
        column_meta.encoding_stats = None
        column_meta.index_page_offset = None
        column_meta.bloom_filter_offset = None
        column_meta.bloom_filter_length = None
        column_meta.size_statistics = None
        column.meta_data = column_meta
        group = RowGroup(None)
        group.columns = [column]
        group.num_rows = column_meta.num_values
        group.total_byte_size = column_meta.total_uncompressed_size
        root = SchemaElement(None)
        root.name = "schema"
        root.num_children = 1
        out = FileMetaData(None)
        out.version = self.meta.version or 1
        out.schema = [root, SchemaElement(parent.raw.copy()), SchemaElement(leaf.raw.copy())]
        out.schema[1].num_children = 1
        out.num_rows = group.num_rows
        out.row_groups = [group]
        out.created_by = self.meta.created_by  # readers work around known writer bugs by it
        return file_with_footer(body, out)


def _schema_paths(schema: list[SchemaElement]) -> dict[tuple[str, ...], SchemaElement]:
    """Each schema element by its path below the root (the footer lists them depth first with child counts)."""
    out: dict[tuple[str, ...], SchemaElement] = {}
    stack: list[tuple[tuple[str, ...], int]] = []  # (path of a group, children left)
    for element in schema[1:] if schema else []:
        while stack and stack[-1][1] == 0:
            stack.pop()
        prefix = stack[-1][0] if stack else ()
        if stack:
            stack[-1] = (prefix, stack[-1][1] - 1)
        path = (*prefix, element.name)
        out[path] = element
        if element.num_children:
            stack.append((path, int(element.num_children)))
    return out


__all__ = ["PagedColumns"]
