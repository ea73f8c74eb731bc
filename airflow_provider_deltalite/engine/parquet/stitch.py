"""Row-group stitching: a new Parquet file made of other files' row groups, their column chunks copied byte for byte.

Compaction changes no row, so a row group that is large enough need not be decoded and encoded again: its column
chunks (page headers and pages, CRCs included) are copied as they are and a new footer points at them. What the new
footer changes, per parquet-format and as arrow-rs' ``append_column`` and parquet-java's ``appendColumnChunk`` do:

- every offset into the file moves by where the chunk now starts minus where it started: the data, dictionary and
  index page offsets, ``ColumnChunk.file_offset``, and each page location inside the offset index (so the offset index
  is re-encoded, not copied);
- column indexes and bloom filters hold no offsets and are copied as bytes to new places, their offsets updated;
- row groups get new ordinals and file offsets; ``num_rows`` is the sum;
- the schema, column orders, key-value metadata (``ARROW:schema``) and ``created_by`` are the reference footer's: the
  footer our own writer gives the table's physical schema. A source is stitched only when its schema elements and
  column orders are those of the reference (`not_stitchable`), so the copied chunks mean what the footer says.

Layout of the output: magic, copied chunks in the order appended, bloom filters, column indexes, offset indexes,
footer. Everything about a source is read and checked (`SourceFile.load`) before any of its bytes are written, so a
source that turns out not to be stitchable costs nothing but a fallback to re-encoding.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from airflow_provider_deltalite.engine.parquet.footer import (
    MAGIC,
    BloomFilterHeader,
    ColumnChunk,
    FileMetaData,
    FooterError,
    RowGroup,
    SchemaElement,
    decode_footer,
    decode_struct,
    encode_footer,
    footer_length,
)
from airflow_provider_deltalite.engine.parquet.offset_index import ShiftableOffsetIndex
from airflow_provider_deltalite.engine.parquet.thrift_compact import (
    I16,
    List,
    Struct,
)

# How much of a file's end is read at first: the footer of most data files fits, so one request finds it.
TAIL_BYTES = 64 * 1024
# Index structures closer than this are read in one request.
_COALESCE_GAP = 64 * 1024
_BLOOM_HEADER_BYTES = 64

ReadRange = Callable[[int, int], bytes]

# Writers whose statistics readers trust. Stitched chunks keep their statistics and get the reference's created_by;
# parquet-java ignores binary statistics of parquet-mr before 1.10 (PARQUET-251/PARQUET-1025) by looking at created_by,
# so chunks from such a writer must not be presented as ours.
# delta-rs names itself but writes with arrow-rs (parquet-rs).
_TRUSTED_WRITERS = re.compile(
    r"^(parquet-cpp-arrow|parquet-rs|parquet-mr|parquet-java|delta-rs) version \D*(\d+)\.(\d+)"
)


class NotStitchable(Exception):
    """A source's bytes cannot be copied as they are (the reason is the message); the caller re-encodes it."""


def writer_trusted(created_by: str | None) -> bool:
    """Whether chunks written by ``created_by`` may be copied under our own created_by."""
    match = _TRUSTED_WRITERS.match(created_by or "")
    if match is None:
        return False
    app, major, minor = match.group(1), int(match.group(2)), int(match.group(3))
    if app == "parquet-mr":
        return (major, minor) >= (1, 10)
    return True


def not_stitchable(meta: FileMetaData, reference: FileMetaData) -> str | None:
    """Why a file's row groups cannot go under ``reference``'s footer, or None when they can."""
    if meta.encryption_algorithm is not None:
        return "encrypted"
    if not writer_trusted(meta.created_by):
        return f"written by {meta.created_by or 'an unnamed writer'}, whose statistics readers may not trust"
    ours, theirs = _schema_elements(reference), _schema_elements(meta)
    if len(ours) != len(theirs):
        return "another Parquet schema (a different number of columns)"
    # the root's name and repetition mean nothing to readers (pyarrow writes "schema" and REQUIRED, arrow-rs
    # "arrow_schema" and no repetition, Spark "spark_schema"); every other element must match field for field
    if not ours or _without_name(ours[0]) != _without_name(theirs[0]):
        return "another Parquet schema"
    for a, b in zip(ours[1:], theirs[1:], strict=True):
        if a.fields != b.fields:
            return f"another Parquet schema (column {SchemaElement(b).name!r})"
    if meta.column_orders != reference.column_orders:
        return "other column orders"
    return None


def _schema_elements(meta: FileMetaData) -> list[Struct]:
    entry = meta.raw.fields.get(_FILE_SCHEMA)
    return [] if entry is None else entry[1].items


def _without_name(root: Struct) -> dict[int, tuple[int, object]]:
    """A root schema element's fields but its repetition (3) and name (4)."""
    return {fid: value for fid, value in root.fields.items() if fid not in (3, 4)}


_FILE_SCHEMA = 2  # FileMetaData 2: list<SchemaElement>
_ROW_GROUP_COLUMNS = 1  # RowGroup 1: list<ColumnChunk>
_CHUNK_META_DATA = 3  # ColumnChunk 3: ColumnMetaData


@dataclass
class _ChunkIndexes:
    """A column chunk's page index and bloom filter bytes, read from its source."""

    column_index: bytes | None = None
    offset_index: ShiftableOffsetIndex | None = None
    bloom: bytes | None = None


@dataclass
class SourceFile:
    """A file whose row groups may be stitched: its footer, and its index structures read and checked."""

    name: str
    meta: FileMetaData
    footer_start: int
    read: ReadRange
    indexes: dict[tuple[int, int], _ChunkIndexes] = field(default_factory=dict)
    # the file as the store's `compose` names it, when its ranges may be copied on the store
    copy_name: str | None = None

    @classmethod
    def load(
        cls,
        name: str,
        size: int,
        read: ReadRange,
        reference: FileMetaData,
        row_groups: Callable[[FileMetaData], Sequence[int]] | None = None,
    ) -> SourceFile:
        """Read the footer (and the page indexes and bloom filters of the row groups to copy) and check them all.

        ``row_groups`` picks, from the footer, the row groups that will be copied (default: all); only theirs are read.

        Raises:
            NotStitchable: the file is not a Parquet file this code can copy from, or its schema differs from the
                reference's, or an offset in it points outside its column chunk.
        """
        tail_len = min(size, TAIL_BYTES)
        tail_start = size - tail_len
        try:
            tail = read(tail_start, tail_len)
            length = footer_length(tail)
            start = size - 8 - length
            if start < 4:
                raise NotStitchable("the footer length is larger than the file")
            raw = tail[start - tail_start : -8] if length + 8 <= tail_len else read(start, length)
            meta = decode_footer(raw)
        except FooterError as exc:
            raise NotStitchable(str(exc)) from None
        reason = not_stitchable(meta, reference)
        if reason:
            raise NotStitchable(reason)
        source = cls(name, meta, start, read)
        wanted = list(range(len(meta.row_groups))) if row_groups is None else list(row_groups(meta))

        def read_near_footer(offset: int, length: int) -> bytes:
            # page indexes and bloom filters sit just before the footer: usually inside the tail read already
            if offset >= tail_start and offset + length <= size:
                return tail[offset - tail_start : offset - tail_start + length]
            return read(offset, length)

        source._check_and_read_indexes(wanted, read_near_footer)
        return source

    def _check_and_read_indexes(self, wanted: Sequence[int], read: ReadRange) -> None:
        groups = self.meta.row_groups
        spans: list[tuple[int, int, tuple[int, int], str]] = []
        # each chunk's range, for the check of its offset index below (`RowGroup.columns` makes a view per column:
        # looking a chunk up through it again would cost a wide table's row group columns squared)
        ranges: dict[tuple[int, int], tuple[int, int]] = {}
        for g in wanted:
            for c, chunk in enumerate(groups[g].columns):
                start, length = ranges[g, c] = _chunk_range(chunk, self.footer_start)
                md = chunk.meta_data
                for name in ("column_index", "offset_index"):
                    offset = getattr(chunk, f"{name}_offset")
                    size = getattr(chunk, f"{name}_length")
                    if offset is None:
                        continue
                    if size is None or size <= 0 or offset < 4 or offset + size > self.footer_start:
                        raise NotStitchable(f"the {name.replace('_', ' ')} of a column chunk lies outside the file")
                    spans.append((offset, size, (g, c), name))
                bloom = md.bloom_filter_offset
                if bloom is not None:
                    size = md.bloom_filter_length
                    if size is None:
                        size = self._bloom_length(bloom, read)
                    if bloom < 4 or size <= 0 or bloom + size > self.footer_start:
                        raise NotStitchable("a bloom filter lies outside the file")
                    spans.append((bloom, size, (g, c), "bloom"))
                if not start <= md.data_page_offset < start + length:
                    raise NotStitchable("a data page offset lies outside its column chunk")
        for (g, c), name, data in _read_coalesced(read, spans):
            entry = self.indexes.setdefault((g, c), _ChunkIndexes())
            if name == "column_index":
                entry.column_index = data
            elif name == "bloom":
                entry.bloom = data
            else:
                try:
                    index = ShiftableOffsetIndex(data)
                except FooterError as exc:
                    raise NotStitchable(str(exc)) from None
                start, length = ranges[g, c]
                end = start + length
                for offset, size in zip(index.offsets, index.sizes, strict=True):
                    if offset is None or size is None or offset < start or offset + size > end:
                        raise NotStitchable("an offset index points outside its column chunk")
                entry.offset_index = index

    def _bloom_length(self, offset: int, read: ReadRange) -> int:
        # older writers leave bloom_filter_length unset: the header says how many bitset bytes follow it
        head = read(offset, min(_BLOOM_HEADER_BYTES, self.footer_start - offset))
        try:
            value, end = decode_struct(head, "a bloom filter header")
        except FooterError as exc:
            raise NotStitchable(str(exc)) from None
        num_bytes = BloomFilterHeader(value).num_bytes
        if not isinstance(num_bytes, int) or num_bytes <= 0:
            raise NotStitchable("a bloom filter header has no size")
        return end + num_bytes


def _chunk_range(chunk: ColumnChunk, footer_start: int) -> tuple[int, int]:
    """(start, length) of a column chunk's bytes, checked to lie between the magic and the footer."""
    if chunk.file_path is not None:
        raise NotStitchable("a column chunk lives in another file")
    if chunk.crypto_metadata is not None or chunk.encrypted_column_metadata is not None:
        raise NotStitchable("encrypted column chunk")
    md = chunk.meta_data
    if md is None:
        raise NotStitchable("a column chunk has no metadata")
    dictionary = md.dictionary_page_offset
    if dictionary is not None and not 4 <= dictionary < md.data_page_offset:
        raise NotStitchable("a dictionary page offset that does not precede the data pages")
    start = md.chunk_start
    length = md.total_compressed_size
    if not isinstance(length, int) or length <= 0 or start < 4 or start + length > footer_start:
        raise NotStitchable("a column chunk lies outside the file")
    return start, length


def _read_coalesced(
    read: ReadRange, spans: list[tuple[int, int, tuple[int, int], str]]
) -> list[tuple[tuple[int, int], str, bytes]]:
    """Read many small ranges in few requests: ranges closer than `_COALESCE_GAP` share one read."""
    out: list[tuple[tuple[int, int], str, bytes]] = []
    spans = sorted(spans)
    i = 0
    while i < len(spans):
        j = i
        lo = spans[i][0]
        hi = spans[i][0] + spans[i][1]
        while j + 1 < len(spans) and spans[j + 1][0] <= hi + _COALESCE_GAP:
            j += 1
            hi = max(hi, spans[j][0] + spans[j][1])
        data = read(lo, hi - lo)
        for offset, size, key, name in spans[i : j + 1]:
            out.append((key, name, data[offset - lo : offset - lo + size]))
        i = j + 1
    return out


@dataclass
class _Pending:
    chunk: ColumnChunk
    delta: int
    indexes: _ChunkIndexes | None


class StitchWriter:
    """Writes a Parquet file from copied row groups; ``write`` is the sink's write (the file's bytes, in order).

    With ``copy``, the column chunks of a source that has a ``copy_name`` are not read: ``copy(copy_name, start,
    length)`` records the range instead (for a store that composes objects from ranges, `Storage.compose`).
    """

    def __init__(self, write: Callable[[bytes], object], copy: Callable[[str, int, int], object] | None = None) -> None:
        self._write = write
        self._copy = copy
        # a composed file may begin with its first source's own magic, so that its first copied range starts at 0
        # (a literal first part would have to be filled to S3's 5 MiB from that range, sending its bytes)
        self._magic_written = copy is None
        if self._magic_written:
            self._write(MAGIC)
        self.position = len(MAGIC)
        self.row_groups: list[RowGroup] = []
        self._pending: list[_Pending] = []
        self.bytes_copied = 0

    def append(self, source: SourceFile, groups: Sequence[int]) -> None:
        """Copy row groups ``groups`` of ``source`` (loaded with them among its row groups) to the end of the file."""
        all_groups = source.meta.row_groups
        for g in groups:
            group = RowGroup(_copy_spine(all_groups[g].raw))
            chunks = group.columns
            ranges = [_chunk_range(chunk, source.footer_start) for chunk in chunks]
            first_new = self.position
            # the chunks of a row group are usually contiguous: copy them with one read
            for (lo, hi), members in _runs(ranges):
                if self._copy is not None and source.copy_name is not None:
                    if not self._magic_written and lo == len(MAGIC) and source.read(0, len(MAGIC)) == MAGIC:
                        self._copy(source.copy_name, 0, hi)
                        self._magic_written = True
                    else:
                        self._start()
                        self._copy(source.copy_name, lo, hi - lo)
                else:
                    self._start()
                    self._write(source.read(lo, hi - lo))
                for c in members:
                    start, _ = ranges[c]
                    self._shift(chunks[c], self.position + (start - lo) - start, source.indexes.get((g, c)))
                self.position += hi - lo
                self.bytes_copied += hi - lo
            group.file_offset = first_new
            self._ordinal(group)
            self.row_groups.append(group)

    def _shift(self, chunk: ColumnChunk, delta: int, indexes: _ChunkIndexes | None) -> None:
        md = chunk.meta_data
        md.data_page_offset = md.data_page_offset + delta
        if md.dictionary_page_offset is not None:
            md.dictionary_page_offset = md.dictionary_page_offset + delta
        if md.index_page_offset is not None:
            md.index_page_offset = md.index_page_offset + delta
        if chunk.file_offset is not None and chunk.file_offset > 0:
            chunk.file_offset = chunk.file_offset + delta
        self._pending.append(_Pending(chunk, delta, indexes))

    def _ordinal(self, group: RowGroup) -> None:
        n = len(self.row_groups)
        if n < 2**15:
            group.raw.set(7, I16, n)
        else:
            group.ordinal = None  # an i16 cannot hold it; the field is optional

    def finish(self, reference: FileMetaData) -> int:
        """Write bloom filters, page indexes and the footer (``reference``'s schema and metadata); the file's size."""
        for p in self._pending:
            if p.indexes is not None and p.indexes.bloom is not None:
                p.chunk.meta_data.bloom_filter_offset = self._emit(p.indexes.bloom)
            elif p.chunk.meta_data.bloom_filter_offset is not None:
                p.chunk.meta_data.bloom_filter_offset = None
                p.chunk.meta_data.bloom_filter_length = None
        for p in self._pending:
            if p.indexes is not None and p.indexes.column_index is not None:
                p.chunk.column_index_offset = self._emit(p.indexes.column_index)
            else:
                p.chunk.column_index_offset = p.chunk.column_index_length = None
        for p in self._pending:
            if p.indexes is not None and p.indexes.offset_index is not None:
                data = p.indexes.offset_index.moved(p.delta)
                p.chunk.offset_index_offset = self._emit(data)
                p.chunk.offset_index_length = len(data)
            else:
                p.chunk.offset_index_offset = p.chunk.offset_index_length = None
        meta = FileMetaData(reference.raw.copy())
        meta.num_rows = sum(g.num_rows for g in self.row_groups)
        meta.row_groups = self.row_groups
        raw = encode_footer(meta)
        self._start()
        self._write(raw + len(raw).to_bytes(4, "little") + MAGIC)
        self.position += len(raw) + 8
        return self.position

    def _start(self) -> None:
        if not self._magic_written:
            self._write(MAGIC)
            self._magic_written = True

    def _emit(self, data: bytes) -> int:
        self._start()
        at = self.position
        self._write(data)
        self.position += len(data)
        return at


def _shallow(value: Struct) -> Struct:
    out = Struct(dict(value.fields))
    if value.long_ids:
        out.long_ids = set(value.long_ids)
    return out


def _copy_spine(group: Struct) -> Struct:
    """A copy of a row group whose structs that stitching changes are new (the row group, its column chunks and
    their ColumnMetaData) and whose other values (statistics, encoding stats, ...) are shared with the source: they
    are never changed, and a deep copy of them was a third of the footer work."""
    out = _shallow(group)
    entry = out.fields.get(_ROW_GROUP_COLUMNS)
    if entry is not None:
        chunks = []
        for chunk in entry[1].items:
            chunk = _shallow(chunk)
            meta = chunk.fields.get(_CHUNK_META_DATA)
            if meta is not None:
                chunk.fields[_CHUNK_META_DATA] = (meta[0], _shallow(meta[1]))
            chunks.append(chunk)
        out.fields[_ROW_GROUP_COLUMNS] = (entry[0], List(entry[1].elem_type, chunks, entry[1].long_header))
    return out


def _runs(ranges: list[tuple[int, int]]) -> list[tuple[tuple[int, int], list[int]]]:
    """Group chunk ranges (in column order) into runs of back-to-back ranges: ((first byte, end), chunk indexes)."""
    runs: list[tuple[tuple[int, int], list[int]]] = []
    for c, (start, length) in enumerate(ranges):
        if runs and runs[-1][0][1] == start:
            (lo, _), members = runs[-1]
            runs[-1] = ((lo, start + length), [*members, c])
        else:
            runs.append(((start, start + length), [c]))
    return runs


def row_group_bytes(group: RowGroup) -> int:
    """A row group's compressed size: what copying it costs and what a reader fetches to scan it."""
    total = group.total_compressed_size
    if isinstance(total, int) and total > 0:
        return total
    return sum(int(c.meta_data.total_compressed_size or 0) for c in group.columns)
