"""Reading of Delta Lake deletion vectors: descriptors, Z85, DV files and 64-bit portable RoaringBitmaps."""

from __future__ import annotations

import operator
import struct
import uuid
import zlib
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote

import numpy as np

from airflow_provider_deltalite.engine.errors import CorruptLog

__all__ = [
    "DV_MAGIC_PORTABLE",
    "decode_dv_bytes",
    "decode_roaring_portable_64",
    "dv_absolute_path",
    "dv_unique_id",
    "read_deletion_vector",
    "z85_decode",
]

DV_MAGIC_PORTABLE = 1681511377
"""Magic number opening a serialized `RoaringBitmapArray` in the portable format."""

_DV_MAGIC_NATIVE = 1681511376  # Delta's in-memory format; never valid on disk, named in the error to help debugging

_Z85_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_DECODE = np.full(256, 255, dtype=np.uint8)
_Z85_DECODE[np.frombuffer(_Z85_ALPHABET.encode("ascii"), dtype=np.uint8)] = np.arange(85, dtype=np.uint8)
_Z85_WEIGHTS = np.array([85**4, 85**3, 85**2, 85, 1], dtype=np.uint64)

_SERIAL_COOKIE_NO_RUNCONTAINER = 12346
_SERIAL_COOKIE = 12347
_NO_OFFSET_THRESHOLD = 4  # below this many containers a run-cookie bitmap carries no offset header
_ARRAY_MAX_CARDINALITY = 4096
_BITMAP_CONTAINER_BYTES = 8192
_MAX_CONTAINERS = 1 << 16

_UUID_Z85_LENGTH = 20
_DV_FILE_HEADER = struct.Struct(">I")


def dv_unique_id(storage_type: str, path_or_inline_dv: str, offset: int | None) -> str:
    """Build the identifier Delta uses to tell deletion vectors apart.

    Args:
        storage_type: the descriptor's `storageType` (`u`, `p` or `i`).
        path_or_inline_dv: the descriptor's `pathOrInlineDv`.
        offset: the descriptor's `offset`, or None when absent.

    Returns:
        `<storageType><pathOrInlineDv>`, followed by `@<offset>` when offset is not None.
    """
    suffix = "" if offset is None else f"@{offset}"
    return f"{storage_type}{path_or_inline_dv}{suffix}"


def z85_decode(text: str) -> bytes:
    """Decode ZeroMQ Z85 text (RFC 32/Z85) into bytes.

    The last 5-character group may also be in the padded form of the Rust `z85` crate (used by
    delta-kernel-rs to write inline deletion vectors): `k` leading `#` (1 to 3) followed by `5 - k`
    digits holding `4 - k` bytes. A standard group can never start with `#`, so the forms cannot clash.

    Args:
        text: Z85 characters; the length must be a multiple of 5.

    Returns:
        The decoded bytes: 4 for every 5 characters, fewer when the last group is padded.

    Raises:
        CorruptLog: the length is not a multiple of 5, a character is outside the Z85 alphabet,
            or a group encodes a value that does not fit in its bytes.
    """
    if not isinstance(text, str):
        raise CorruptLog(f"invalid Z85 text: expected a string, got {type(text).__name__}")
    if len(text) % 5:
        raise CorruptLog(f"invalid Z85 text {_clip(text)!r}: length {len(text)} is not a multiple of 5")
    try:
        raw = text.encode("ascii")
    except UnicodeEncodeError:
        raise CorruptLog(f"invalid Z85 text {_clip(text)!r}: non-ASCII character") from None
    body, tail = raw, b""
    if raw[-5:-4] == b"#":
        body, tail = raw[:-5], raw[-5:]
    digits = _Z85_DECODE[np.frombuffer(body, dtype=np.uint8)]
    bad = np.flatnonzero(digits == 255)
    if bad.size:
        raise CorruptLog(f"invalid Z85 text {_clip(text)!r}: character {text[bad[0]]!r} at position {bad[0]}")
    values = digits.reshape(-1, 5).astype(np.uint64) @ _Z85_WEIGHTS
    if values.size and int(values.max()) > 0xFFFFFFFF:
        raise CorruptLog(f"invalid Z85 text {_clip(text)!r}: a group encodes a value above 2**32 - 1")
    decoded = values.astype(">u4").tobytes()
    return decoded + _z85_padded_tail(tail, text) if tail else decoded


def _z85_padded_tail(group: bytes, text: str) -> bytes:
    pad = len(group) - len(group.lstrip(b"#"))
    if pad > 3:
        raise CorruptLog(f"invalid Z85 text {_clip(text)!r}: the last group holds {pad} padding characters")
    value = 0
    for char in group[pad:]:
        digit = int(_Z85_DECODE[char])
        if digit == 255:
            raise CorruptLog(f"invalid Z85 text {_clip(text)!r}: character {chr(char)!r} in the last group")
        value = value * 85 + digit
    n_bytes = 4 - pad
    if value >> (8 * n_bytes):
        raise CorruptLog(f"invalid Z85 text {_clip(text)!r}: the padded last group does not fit in {n_bytes} bytes")
    return value.to_bytes(n_bytes, "big")


def dv_absolute_path(table_root: str, storage_type: object, path_or_inline_dv: object) -> str:
    """Resolve where an on-disk deletion vector lives.

    Args:
        table_root: the table's root URI or path.
        storage_type: `u` (path relative to the table, derived from a UUID) or `p` (absolute URI).
        path_or_inline_dv: the descriptor's `pathOrInlineDv`.

    Returns:
        A path or URI fsspec accepts: `<table_root>/[<prefix>/]deletion_vector_<uuid>.bin` for `u`,
        the URL-decoded URI (with `file:` URIs as `file:///...`) for `p`.

    Raises:
        ValueError: storage_type is `i`; an inline deletion vector has no file.
        CorruptLog: the storage type is unknown, or a `u` value is not a prefix plus a Z85-encoded UUID.
    """
    if storage_type == "u":
        if not isinstance(path_or_inline_dv, str) or len(path_or_inline_dv) < _UUID_Z85_LENGTH:
            raise CorruptLog(
                f"malformed deletion vector: pathOrInlineDv {path_or_inline_dv!r} is shorter than the "
                f"{_UUID_Z85_LENGTH} Z85 characters of a UUID"
            )
        prefix = path_or_inline_dv[:-_UUID_Z85_LENGTH]
        try:
            dv_uuid = uuid.UUID(bytes=z85_decode(path_or_inline_dv[-_UUID_Z85_LENGTH:]))
        except CorruptLog as exc:
            raise CorruptLog(f"malformed deletion vector UUID in pathOrInlineDv: {exc.problem}") from None
        folder = f"{prefix}/" if prefix else ""
        return f"{table_root.rstrip('/')}/{folder}deletion_vector_{dv_uuid}.bin"
    if storage_type == "p":
        if not isinstance(path_or_inline_dv, str) or not path_or_inline_dv:
            raise CorruptLog(f"malformed deletion vector: empty or non-string absolute path {path_or_inline_dv!r}")
        return _normalise_file_uri(unquote(path_or_inline_dv))
    if storage_type == "i":
        raise ValueError("an inline deletion vector (storageType 'i') has no file")
    raise CorruptLog(f"malformed deletion vector: unknown storageType {storage_type!r}")


def decode_roaring_portable_64(buf: bytes | memoryview) -> np.ndarray:
    """Decode a 64-bit RoaringBitmap in the portable serialization.

    The layout is a little-endian uint64 bucket count, then per bucket a little-endian uint32 holding
    the high 32 bits followed by a standard 32-bit portable RoaringBitmap. Bytes after the last bucket
    are ignored, like the Java and Rust readers do.

    Args:
        buf: the serialized bitmap (without the deletion-vector magic).

    Returns:
        The set members as a sorted, duplicate-free uint64 array.

    Raises:
        CorruptLog: the buffer is truncated or does not hold a valid bitmap.
    """
    return _decode_portable_64(memoryview(buf).cast("B"), "")


def decode_dv_bytes(raw: bytes | memoryview, *, expected_cardinality: int | None = None, where: str = "") -> np.ndarray:
    """Decode a deletion-vector blob: the portable magic followed by a 64-bit portable RoaringBitmap.

    Args:
        raw: the blob.
        expected_cardinality: when given, the number of row indexes the blob must hold.
        where: the deletion vector's path or id, used in error messages.

    Returns:
        The deleted row indexes as a sorted, duplicate-free uint64 array.

    Raises:
        CorruptLog: the magic is wrong, the bitmap is malformed, or the cardinality differs.
    """
    view = memoryview(raw).cast("B")
    if len(view) < 4:
        raise _corrupt(where, f"blob of {len(view)} bytes is too short to hold the magic number")
    (magic,) = struct.unpack_from("<I", view, 0)
    if magic != DV_MAGIC_PORTABLE:
        hint = " (Delta's native in-memory format)" if magic == _DV_MAGIC_NATIVE else ""
        raise _corrupt(where, f"bad magic number {magic}{hint}, expected {DV_MAGIC_PORTABLE}")
    rows = _decode_portable_64(view[4:], where, expected_cardinality)
    if expected_cardinality is not None and len(rows) != expected_cardinality:
        raise _corrupt(
            where, f"holds {len(rows)} row indexes but the descriptor says cardinality {expected_cardinality}"
        )
    return rows


def read_deletion_vector(
    descriptor: Mapping[str, Any],
    table_root: str,
    read_range: Callable[[str, int, int], bytes],
    *,
    table_uri: str | None = None,
) -> np.ndarray:
    """Load the row indexes a deletion-vector descriptor marks as deleted.

    On-disk vectors are read with a single call to `read_range`. At `offset` a DV file holds a big-endian
    uint32 data size, the blob, then a big-endian CRC-32 of the blob.

    Args:
        descriptor: the `deletionVector` struct of an add or remove action (`storageType`, `pathOrInlineDv`,
            `offset`, `sizeInBytes`, `cardinality`).
        table_root: the table's root URI or path, against which `u` vectors resolve.
        read_range: reads `length` bytes of the file at a path, starting at a byte offset.
        table_uri: the table named in error messages.

    Returns:
        The deleted row indexes as a sorted, duplicate-free uint64 array.

    Raises:
        CorruptLog: the descriptor or the stored vector is malformed (unknown storage type, bad Z85,
            size or checksum mismatch, truncated data, bad magic, wrong cardinality).
        OSError: `read_range` failed, e.g. the file does not exist.
    """
    storage_type = descriptor.get("storageType")
    path_or_inline = descriptor.get("pathOrInlineDv")
    where = f"inline {_clip(str(path_or_inline))}" if storage_type == "i" else str(path_or_inline)
    try:
        cardinality = _optional_int(descriptor, "cardinality", where)
        size = _optional_int(descriptor, "sizeInBytes", where)
        if not isinstance(path_or_inline, str):
            raise _corrupt(where, f"pathOrInlineDv is {type(path_or_inline).__name__}, expected a string")
        if storage_type == "i":
            return _read_inline(path_or_inline, size, cardinality, where)
        if storage_type not in ("u", "p"):
            raise _corrupt(where, f"unknown storageType {storage_type!r}")
        where = dv_absolute_path(table_root, storage_type, path_or_inline)
        offset = _optional_int(descriptor, "offset", where)
        return _read_file(where, 0 if offset is None else offset, size, cardinality, read_range)
    except CorruptLog as exc:
        if table_uri is None or exc.table_uri is not None:
            raise
        raise CorruptLog(exc.problem, table_uri) from exc.__cause__


def _read_inline(text: str, size: int | None, cardinality: int | None, where: str) -> np.ndarray:
    try:
        raw = z85_decode(text)
    except CorruptLog as exc:
        raise _corrupt(where, f"inline data is not valid Z85 ({exc.problem})") from None
    if size is not None:
        # Z85 pads the blob to a multiple of 4 bytes, so the decoded text may be up to 3 bytes longer.
        if not size <= len(raw) < size + 4:
            raise _corrupt(where, f"inline data decodes to {len(raw)} bytes but sizeInBytes is {size}")
        raw = raw[:size]
    return decode_dv_bytes(raw, expected_cardinality=cardinality, where=where)


def _read_file(
    path: str,
    offset: int,
    size: int | None,
    cardinality: int | None,
    read_range: Callable[[str, int, int], bytes],
) -> np.ndarray:
    if size is None:
        raise _corrupt(path, "sizeInBytes is missing")
    if offset < 0 or size < 0:
        raise _corrupt(path, f"negative offset {offset} or sizeInBytes {size}")
    where = f"{path}@{offset}"
    length = _DV_FILE_HEADER.size + size + 4
    data = memoryview(read_range(path, offset, length)).cast("B")
    if len(data) < length:
        raise _corrupt(where, f"truncated: needed {length} bytes, read only {len(data)}")
    (data_size,) = _DV_FILE_HEADER.unpack_from(data, 0)
    if data_size != size:
        raise _corrupt(where, f"stored data size {data_size} differs from sizeInBytes {size}")
    blob = data[4 : 4 + size]
    (stored_crc,) = _DV_FILE_HEADER.unpack_from(data, 4 + size)
    actual_crc = zlib.crc32(blob)
    if stored_crc != actual_crc:
        raise _corrupt(where, f"CRC-32 mismatch: stored {stored_crc:#010x}, computed {actual_crc:#010x}")
    return decode_dv_bytes(blob, expected_cardinality=cardinality, where=where)


def _decode_portable_64(view: memoryview, where: str, max_cardinality: int | None = None) -> np.ndarray:
    end = len(view)
    if end < 8:
        raise _corrupt(where, f"truncated bitmap: {end} bytes cannot hold the bucket count")
    (n_buckets,) = struct.unpack_from("<Q", view, 0)
    # Every bucket needs at least a key and an 8-byte empty bitmap; checking first bounds the loop.
    if n_buckets > (end - 8) // 12:
        raise _corrupt(where, f"truncated bitmap: {n_buckets} buckets cannot fit in {end} bytes")
    pos = 8
    parts: list[np.ndarray] = []
    previous_key = -1
    total = 0
    for _ in range(n_buckets):
        if pos + 4 > end:
            raise _corrupt(where, "truncated bitmap: missing a bucket key")
        (key,) = struct.unpack_from("<I", view, pos)
        if key <= previous_key:
            raise _corrupt(where, f"bucket keys are not strictly increasing ({key} after {previous_key})")
        previous_key = key
        budget = None if max_cardinality is None else max_cardinality - total
        rows, pos = _decode_portable_32(view, pos + 4, where, budget, key << 32)
        total += rows.size
        if rows.size:
            parts.append(rows)
    if not parts:
        return np.empty(0, dtype=np.uint64)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _decode_portable_32(
    view: memoryview, pos: int, where: str, budget: int | None, high: int
) -> tuple[np.ndarray, int]:
    """Decode one 32-bit portable RoaringBitmap at `pos`.

    Returns its members, each plus `high`, as a sorted uint64 array, and the offset just past the bitmap.
    """
    keys, cards, run_flags, pos = _read_32_header(view, pos, where)
    total = int(cards.sum())
    # Run containers let a few corrupt header bytes claim billions of members; refuse before allocating.
    if budget is not None and total > budget:
        raise _corrupt(where, "holds more row indexes than the descriptor's cardinality")
    out = np.empty(total, dtype=np.uint64)
    bases = (keys.astype(np.uint64) << np.uint64(16)) | np.uint64(high)
    ends = np.cumsum(cards)
    # Array containers lie back to back, so each stretch of them decodes with one read of the buffer.
    is_array = (run_flags == 0) & (cards <= _ARRAY_MAX_CARDINALITY)
    first = 0
    for stop in [*np.flatnonzero(~is_array).tolist(), len(cards)]:
        if stop > first:
            lo, hi = int(ends[first] - cards[first]), int(ends[stop - 1])
            if pos + 2 * (hi - lo) > len(view):
                raise _corrupt(where, "truncated bitmap: array container runs past the end")
            out[lo:hi] = np.frombuffer(view, "<u2", hi - lo, pos)
            out[lo:hi] += np.repeat(bases[first:stop], cards[first:stop])
            pos += 2 * (hi - lo)
        if stop < len(cards):
            card = int(cards[stop])
            values, pos = _run_or_bitmap_container(view, pos, card, bool(run_flags[stop]), where)
            lo = int(ends[stop]) - card
            out[lo : lo + card] = values
            out[lo : lo + card] += bases[stop]
        first = stop + 1
    # One pass over the whole bitmap catches unsorted arrays and overlapping runs alike.
    if out.size > 1 and not bool(np.all(out[1:] > out[:-1])):
        raise _corrupt(where, "bitmap members are not strictly increasing")
    return out, pos


def _read_32_header(view: memoryview, pos: int, where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Parse a 32-bit bitmap's cookie and header; return keys, cardinalities, run flags and the body offset."""
    end = len(view)
    if pos + 4 > end:
        raise _corrupt(where, "truncated bitmap: missing a 32-bit bitmap cookie")
    (cookie,) = struct.unpack_from("<I", view, pos)
    pos += 4
    if cookie & 0xFFFF == _SERIAL_COOKIE:
        n = (cookie >> 16) + 1
        flag_bytes = (n + 7) // 8
        if pos + flag_bytes > end:
            raise _corrupt(where, "truncated bitmap: missing the run-container flags")
        run_flags = np.unpackbits(np.frombuffer(view, np.uint8, flag_bytes, pos), bitorder="little")[:n]
        pos += flag_bytes
        has_offsets = n >= _NO_OFFSET_THRESHOLD
    elif cookie == _SERIAL_COOKIE_NO_RUNCONTAINER:
        if pos + 4 > end:
            raise _corrupt(where, "truncated bitmap: missing the container count")
        (n,) = struct.unpack_from("<I", view, pos)
        pos += 4
        if n > _MAX_CONTAINERS:
            raise _corrupt(where, f"a 32-bit bitmap claims {n} containers, more than {_MAX_CONTAINERS}")
        run_flags = np.zeros(n, dtype=np.uint8)
        has_offsets = True
    else:
        raise _corrupt(where, f"unknown RoaringBitmap cookie {cookie & 0xFFFF}")
    if pos + 4 * n > end:
        raise _corrupt(where, "truncated bitmap: missing the container headers")
    header = np.frombuffer(view, "<u2", 2 * n, pos).reshape(n, 2).astype(np.int64)
    pos += 4 * n
    keys = header[:, 0]
    if n > 1 and not bool(np.all(keys[1:] > keys[:-1])):
        raise _corrupt(where, "container keys are not strictly increasing")
    if has_offsets and n:
        pos += 4 * n  # the offsets only serve random access; sequential decoding does not need them
    return keys, header[:, 1] + 1, run_flags, pos


def _run_or_bitmap_container(view: memoryview, pos: int, card: int, is_run: bool, where: str) -> tuple[np.ndarray, int]:
    """Decode the run or bitmap container at `pos`; return its 16-bit values and the end offset."""
    if is_run:
        return _run_container(view, pos, card, where)
    if pos + _BITMAP_CONTAINER_BYTES > len(view):
        raise _corrupt(where, "truncated bitmap: bitmap container runs past the end")
    # Little-endian 64-bit words laid end to end put bit k of the container at bit k % 8 of byte k // 8.
    bits = np.unpackbits(np.frombuffer(view, np.uint8, _BITMAP_CONTAINER_BYTES, pos), bitorder="little")
    values = np.flatnonzero(bits)
    if values.size != card:
        raise _corrupt(where, f"bitmap container holds {values.size} bits but its header says {card}")
    return values, pos + _BITMAP_CONTAINER_BYTES


def _run_container(view: memoryview, pos: int, card: int, where: str) -> tuple[np.ndarray, int]:
    end = len(view)
    if pos + 2 > end:
        raise _corrupt(where, "truncated bitmap: missing a run count")
    (n_runs,) = struct.unpack_from("<H", view, pos)
    pos += 2
    if pos + 4 * n_runs > end:
        raise _corrupt(where, "truncated bitmap: run container runs past the end")
    runs = np.frombuffer(view, "<u2", 2 * n_runs, pos).reshape(n_runs, 2).astype(np.int64)
    pos += 4 * n_runs
    starts = runs[:, 0]
    lengths = runs[:, 1] + 1
    if n_runs and int((starts + lengths).max()) > 1 << 16:
        raise _corrupt(where, "a run extends past the end of its container")
    if int(lengths.sum()) != card:
        raise _corrupt(where, f"run container holds {int(lengths.sum())} values but its header says {card}")
    # Expand runs without a Python loop: each value is its run's start plus its rank within the run.
    run_starts_in_out = np.cumsum(lengths) - lengths
    values = np.arange(card, dtype=np.int64) + np.repeat(starts - run_starts_in_out, lengths)
    return values, pos


def _optional_int(descriptor: Mapping[str, Any], key: str, where: str) -> int | None:
    value = descriptor.get(key)
    if value is None:
        return None
    if isinstance(value, bool):
        raise _corrupt(where, f"{key} is a boolean, expected an integer")
    try:
        return operator.index(value)
    except TypeError:
        raise _corrupt(where, f"{key} is {value!r}, expected an integer") from None


def _normalise_file_uri(uri: str) -> str:
    # Hadoop writes local paths as "file:/x"; fsspec only understands the "file:///x" spelling.
    if uri.startswith("file:") and not uri.startswith("file://"):
        return "file:///" + uri[len("file:") :].lstrip("/")
    if uri.startswith("file://") and not uri.startswith("file:///"):
        rest = uri[len("file://") :]
        if rest.startswith("localhost/"):
            return "file:///" + rest[len("localhost/") :]
    return uri


def _corrupt(where: str, problem: str) -> CorruptLog:
    return CorruptLog(
        f"malformed deletion vector {where}: {problem}" if where else f"malformed deletion vector: {problem}"
    )


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
