"""A column chunk's offset index, moved to a new place in a file (`ShiftableOffsetIndex`) by re-encoding only the page
offsets inside it: what row-group stitching (`stitch`) writes for each copied chunk.
"""

from __future__ import annotations

from airflow_provider_deltalite.engine.parquet.footer import FooterError, OffsetIndex, decode_struct
from airflow_provider_deltalite.engine.parquet.thrift_compact import (
    I64,
    LIST,
    STRUCT,
    ThriftError,
    read_varint,
    write_struct,
    zigzag_varint,
)


class ShiftableOffsetIndex:
    """A column chunk's offset index, ready to be written with every page location's offset moved by some delta.

    The usual offset index (a list of page locations of three fields each, optionally the unencoded byte-array sizes)
    is kept as its own bytes cut around each page offset, so that moving it re-encodes the offsets alone: a footer's
    offset indexes hold most of its Thrift structs, and decoding them into structs to move one field each was most of
    the Python time of a stitch. Any other layout is decoded and moved field by field (`OffsetIndex`). Both give what
    `write_struct` gives for the moved struct when the input is canonically encoded (as every writer encodes it).
    """

    __slots__ = ("_index", "_pieces", "offsets", "sizes")

    def __init__(self, data: bytes) -> None:
        """Cut (or decode) ``data``, an offset index's Thrift bytes.

        Raises:
            FooterError: the bytes are not an offset index.
        """
        self._pieces: list[bytes] | None = None
        self._index: OffsetIndex | None = None
        split = _split_offset_index(data)
        if split is not None:
            self._pieces, self.offsets, self.sizes = split
            return
        value, end = decode_struct(data, "an offset index")
        if end != len(data):
            raise FooterError("an offset index has bytes after its end")
        self._index = OffsetIndex(value)
        locations = self._index.page_locations
        self.offsets = [p.offset for p in locations]
        self.sizes = [p.compressed_page_size for p in locations]

    def moved(self, delta: int) -> bytes:
        """The offset index's bytes with every page offset moved by ``delta``."""
        if self._pieces is not None:
            pieces = self._pieces
            out = [pieces[0]]
            for offset, piece in zip(self.offsets, pieces[1:], strict=True):
                out.append(zigzag_varint(offset + delta))
                out.append(piece)
            return b"".join(out)
        assert self._index is not None
        index = OffsetIndex(self._index.raw.copy())
        for page in index.page_locations:
            page.offset = page.offset + delta
        return write_struct(index.raw)


# The field headers of the usual offset index (compact protocol: id delta << 4 | wire type)
_PAGE_LOCATIONS = 0x10 | LIST  # OffsetIndex 1: list<PageLocation>
_UNENCODED_SIZES = 0x10 | LIST  # OffsetIndex 2 (after 1): list<i64>
_OFFSET = 0x10 | I64  # PageLocation 1: offset
_SIZE = 0x10 | 5  # PageLocation 2: compressed_page_size (i32)
_FIRST_ROW = 0x10 | I64  # PageLocation 3: first_row_index


def _split_offset_index(data: bytes) -> tuple[list[bytes], list[int], list[int]] | None:
    """(the bytes between the page offsets, the offsets, the page sizes) of an offset index of the usual layout;
    None for any other (the caller decodes it in full, which also names what is wrong with it)."""
    try:
        if data[0] != _PAGE_LOCATIONS:
            return None
        header = data[1]
        if header & 0x0F != STRUCT:
            return None
        count, pos = header >> 4, 2
        if count == 15:
            count, pos = read_varint(data, pos)
            if count < 15:
                return None  # a long header for a short list: the generic codec keeps it as written
        pieces: list[bytes] = []
        offsets: list[int] = []
        sizes: list[int] = []
        start = 0
        for _ in range(count):
            if data[pos] != _OFFSET:
                return None
            pos += 1
            pieces.append(data[start:pos])
            z, pos = read_varint(data, pos)
            offsets.append((z >> 1) ^ -(z & 1))
            start = pos
            if data[pos] != _SIZE:
                return None
            z, pos = read_varint(data, pos + 1)
            sizes.append((z >> 1) ^ -(z & 1))
            if data[pos] != _FIRST_ROW:
                return None
            _, pos = read_varint(data, pos + 1)
            if data[pos] != 0:
                return None
            pos += 1
        if data[pos] == _UNENCODED_SIZES:
            header = data[pos + 1]
            if header & 0x0F != I64:
                return None
            count, pos = header >> 4, pos + 2
            if count == 15:
                count, pos = read_varint(data, pos)
                if count < 15:
                    return None
            for _ in range(count):
                _, pos = read_varint(data, pos)
        if pos != len(data) - 1 or data[pos] != 0:
            return None
    except (IndexError, ThriftError):
        return None
    pieces.append(data[start:])
    return pieces, offsets, sizes
