"""Small pyarrow helpers shared by the engine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc


def contiguous(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One Array for ``values``, copying only when there are several chunks.

    `ChunkedArray.combine_chunks` copies even a single chunk; on a checkpoint of 100k files that is tens of MB.
    """
    if isinstance(values, pa.ChunkedArray):
        if values.num_chunks == 1:
            return values.chunk(0)
        if values.num_chunks == 0:
            return pa.nulls(0, values.type)
        return values.combine_chunks()
    return values


def bool_array(mask: np.ndarray) -> pa.BooleanArray:
    """A NumPy boolean mask as an Arrow array, from its bits: ``pa.array`` of a NumPy array imports ``numpy.ma``,
    milliseconds of every short command that would not import it otherwise."""
    bits = np.packbits(np.asarray(mask, dtype=bool), bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(mask), [None, pa.py_buffer(bits)])


def int64_array(values: Any) -> pa.Array:
    """An int64 Array of ``values`` (a NumPy array or a sequence of ints), sharing a contiguous int64 array's memory.

    ``pa.array`` of a NumPy array first asks whether it is a masked array, which imports ``numpy.ma`` (40-120 ms, a
    tenth of a small command); an Array over the buffer asks nothing.
    """
    data = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(data), [None, pa.py_buffer(data)])


def numpy_of(values: pa.Array) -> np.ndarray:
    """A read-only NumPy view of a fixed-width Array without nulls (its data buffer); a copy otherwise.

    ``Array.to_numpy`` (and ``np.asarray`` of an Array) goes through pyarrow's pandas conversion, which imports pandas
    when it is installed (seconds and tens of MB for a small command); the view imports nothing.
    """
    width = values.type.bit_width // 8 if pa.types.is_integer(values.type) or pa.types.is_floating(values.type) else 0
    if width and values.null_count == 0:
        dtype = np.dtype(values.type.to_pandas_dtype())
        return np.frombuffer(values.buffers()[1], dtype=dtype, count=len(values), offset=values.offset * width)
    return values.to_numpy(zero_copy_only=False)


def is_blank(text: pa.Array) -> pa.BooleanArray:
    """True where a string is null, empty or whitespace only (never null)."""
    blank = pc.or_(pc.equal(pc.binary_length(text), 0), pc.utf8_is_space(text))
    return pc.fill_null(blank, True)


def is_string_type(t: pa.DataType) -> bool:
    """True for the Arrow string types: string, large_string and string_view."""
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def struct_array(children: Sequence[pa.Array], fields: Sequence[pa.Field], valid: pa.BooleanArray) -> pa.StructArray:
    """A StructArray of ``children`` that is null where ``valid`` (no nulls of its own) is false.

    ``StructArray.from_arrays(mask=...)`` inverts its mask through `pyarrow.compute`, whose import is 55-70 ms of a
    short command (`arrow_compute`); ``valid`` is the validity bitmap itself.
    """
    return pa.Array.from_buffers(pa.struct(list(fields)), len(valid), [validity_bitmap(valid)], children=list(children))


def validity_bitmap(valid: pa.BooleanArray) -> pa.Buffer | None:
    """The validity bitmap of an array that is null where ``valid`` (no nulls of its own) is false; None when every
    value is valid. The buffer of ``valid`` itself when it starts at bit 0."""
    if valid.false_count == 0:
        return None
    if valid.offset:
        valid = pa.concat_arrays([valid])  # a bitmap starts at bit 0
    return valid.buffers()[1]
