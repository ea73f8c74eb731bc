"""Checks of stitched OPTIMIZE outputs that do not trust our own code: copied bytes compared with the inputs', page
locations followed to real page headers, Delta statistics recomputed from the rows with pyarrow compute."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import Iterator, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_provider_deltalite.engine.parquet.footer import OffsetIndex, read_footer
from airflow_provider_deltalite.engine.parquet.thrift_compact import read_struct

DATA_PAGE, DATA_PAGE_V2 = 0, 3


@contextlib.contextmanager
def spark_conf(spark: Any, conf: Mapping[str, str]) -> Iterator[None]:
    """``conf`` set on the session for the block, the session's own values (or their absence) restored after it."""
    saved = {k: spark.conf.get(k, None) for k in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def commit_actions(path: Path, version: int, kind: str) -> list[dict[str, Any]]:
    lines = (path / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    return [json.loads(line)[kind] for line in lines if f'"{kind}"' in line[:12]]


def chunk_bytes(data: bytes) -> dict[bytes, int]:
    """Every column chunk's bytes in a file (-> how often)."""
    out: dict[bytes, int] = {}
    for group in read_footer(data).row_groups:
        for chunk in group.columns:
            md = chunk.meta_data
            start = md.chunk_start
            piece = data[start : start + md.total_compressed_size]
            out[piece] = out.get(piece, 0) + 1
    return out


def copied_chunks(output: bytes, inputs: list[bytes]) -> int:
    """How many of the output's column chunks are byte-for-byte a column chunk of an input."""
    pool: dict[bytes, int] = {}
    for data in inputs:
        for piece, n in chunk_bytes(data).items():
            pool[piece] = pool.get(piece, 0) + n
    return sum(min(n, pool.get(piece, 0)) for piece, n in chunk_bytes(output).items())


def check_page_locations(data: bytes) -> int:
    """Follow every offset index entry to its page: a data page header whose page is exactly that long; the count.

    Also checks that the first page location is the chunk's data_page_offset and that the rows add up."""
    meta = read_footer(data)
    pages = 0
    for group in meta.row_groups:
        for chunk in group.columns:
            if chunk.offset_index_offset is None:
                continue
            raw = data[chunk.offset_index_offset : chunk.offset_index_offset + chunk.offset_index_length]
            index = OffsetIndex(read_struct(raw)[0])
            locations = index.page_locations
            assert locations[0].offset == chunk.meta_data.data_page_offset
            assert locations[0].first_row_index == 0
            for loc in locations:
                header, end = read_struct(data, loc.offset)
                assert header.get(1) in (DATA_PAGE, DATA_PAGE_V2)
                assert end - loc.offset + header.get(3) == loc.compressed_page_size  # header + compressed page
                pages += 1
            assert locations[-1].first_row_index < group.num_rows
    return pages


def _leaf(table: pa.Table, path: list[str]) -> pa.Array:
    array: Any = table.column(path[0]).combine_chunks()
    for name in path[1:]:
        array = pc.struct_field(array, [array.type.get_field_index(name)])  # a null parent makes the leaf null
    return array


def _walk(section: dict, prefix: list[str]) -> list[tuple[list[str], Any]]:
    out = []
    for key, value in section.items():
        if isinstance(value, dict):
            out.extend(_walk(value, [*prefix, key]))
        else:
            out.append(([*prefix, key], value))
    return out


def _as_comparable(value: Any, t: pa.DataType) -> Any:
    if pa.types.is_timestamp(t):
        text = str(value)
        moment = dt.datetime.fromisoformat(text)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.UTC)
        return moment
    if pa.types.is_date(t):
        return dt.date.fromisoformat(str(value))
    if pa.types.is_decimal(t):
        return Decimal(str(value))
    if pa.types.is_floating(t):
        return float(value)
    return value


def _actual(scalar: pa.Scalar, t: pa.DataType, is_max: bool) -> Any:
    value = scalar.as_py()
    if pa.types.is_timestamp(t):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        if is_max:  # Spark prints milliseconds, the max cut towards the past (readers widen it by 1 ms)
            value = value.replace(microsecond=value.microsecond // 1000 * 1000)
        return value
    if isinstance(value, bytes):
        return value.decode()
    return value


def check_stats_hold(file: Path, stats_json: str) -> int:
    """Recompute a file's Delta statistics from its rows (pyarrow compute) and assert each one holds: numRecords and
    nullCount exact, every min at most and every max at least the column's values; integers, dates and decimals
    exactly the extremes. Returns the number of bounds checked."""
    stats = json.loads(stats_json, parse_float=Decimal)
    rows = pq.read_table(file)
    assert stats["numRecords"] == rows.num_rows
    checked = 0
    for path, count in _walk(stats.get("nullCount", {}), []):
        assert count == _leaf(rows, path).null_count, path
        checked += 1
    for section, is_max in (("minValues", False), ("maxValues", True)):
        for path, bound in _walk(stats.get(section, {}), []):
            values = _leaf(rows, path)
            t = values.type
            if pa.types.is_floating(t) and isinstance(bound, str):
                assert bound in ("NaN", "Infinity", "-Infinity")
                continue
            extremes = pc.min_max(values)
            actual = _actual(extremes["max" if is_max else "min"], t, is_max)
            bound_value = _as_comparable(bound, t)
            if is_max:
                assert bound_value >= actual, (path, bound, actual)
            else:
                assert bound_value <= actual, (path, bound, actual)
            if pa.types.is_integer(t) or pa.types.is_date(t) or pa.types.is_decimal(t) or pa.types.is_floating(t):
                assert bound_value == actual, (path, bound, actual)
            checked += 1
    return checked


def file_of(path: Path, add: dict[str, Any]) -> Path:
    return path / unquote(add["path"])
