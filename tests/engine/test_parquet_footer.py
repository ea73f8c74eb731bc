"""The Parquet footer codec: byte-identical round-trips of footers other writers wrote, typed fields checked against
pyarrow's own reading of the same footer, unknown fields kept."""

from __future__ import annotations

import decimal
import io
from pathlib import Path

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite.engine.parquet.footer import (
    FileMetaData,
    FooterError,
    KeyValue,
    OffsetIndex,
    decode_footer,
    encode_footer,
    file_with_footer,
    footer_bytes,
    read_footer,
)
from airflow_provider_deltalite.engine.parquet.offset_index import ShiftableOffsetIndex
from airflow_provider_deltalite.engine.parquet.thrift_compact import (
    BINARY,
    I32,
    STRUCT,
    Struct,
    ThriftError,
    read_struct,
    write_struct,
)
from tests.helpers import CORPUS


def _round_trips(data: bytes) -> FileMetaData:
    raw = footer_bytes(data)
    meta = decode_footer(raw)
    assert encode_footer(meta) == raw
    return meta


def _assert_fields_match_pyarrow(data: bytes, meta: FileMetaData) -> None:
    """Every typed field we read is what pyarrow reads from the same footer."""
    theirs = pq.ParquetFile(io.BytesIO(data)).metadata
    assert (meta.num_rows, len(meta.row_groups), meta.created_by) == (
        theirs.num_rows,
        theirs.num_row_groups,
        theirs.created_by,
    )
    assert [e.name for e in meta.schema[1:] if e.num_children is None] == [
        theirs.schema.column(i).name for i in range(theirs.num_columns)
    ]
    for g, group in enumerate(meta.row_groups):
        rg = theirs.row_group(g)
        assert (group.num_rows, group.total_byte_size) == (rg.num_rows, rg.total_byte_size)
        for c, chunk in enumerate(group.columns):
            col = rg.column(c)
            md = chunk.meta_data
            assert ".".join(md.path) == col.path_in_schema
            assert (md.data_page_offset, md.total_compressed_size, md.total_uncompressed_size, md.num_values) == (
                col.data_page_offset,
                col.total_compressed_size,
                col.total_uncompressed_size,
                col.num_values,
            )
            assert (md.dictionary_page_offset is not None and md.dictionary_page_offset > 0) == col.has_dictionary_page
            if col.has_dictionary_page:
                assert md.dictionary_page_offset == col.dictionary_page_offset
            assert (md.bloom_filter_offset, md.bloom_filter_length) == (
                col.bloom_filter_offset,
                col.bloom_filter_length,
            )
            assert (chunk.offset_index_offset is not None) == col.has_offset_index
            assert (chunk.column_index_offset is not None) == col.has_column_index
            if col.is_stats_set and col.statistics.has_null_count:
                assert md.statistics.null_count == col.statistics.null_count


def _corpus_parquet_files() -> list[Path]:
    return sorted(p for p in CORPUS.rglob("*.parquet") if p.is_file() and p.stat().st_size > 0)


def test_every_parquet_footer_of_the_corpus_round_trips_byte_for_byte() -> None:
    files = _corpus_parquet_files()
    decoded = not_parquet = 0
    for path in files:
        data = path.read_bytes()
        try:
            raw = footer_bytes(data)
        except FooterError:
            not_parquet += 1  # a few corpus files are placeholders (one byte) on purpose
            continue
        meta = decode_footer(raw)
        assert encode_footer(meta) == raw, path
        decoded += 1
    assert decoded >= 2160, (decoded, not_parquet)
    assert not_parquet <= 10


def test_corpus_data_footers_read_as_pyarrow_reads_them() -> None:
    # the corpus holds files of Spark (parquet-mr), delta-rs (parquet-rs), pyarrow and kernel writers
    writers = set()
    for path in _corpus_parquet_files():
        if "_delta_log" in path.parts:
            continue
        data = path.read_bytes()
        if len(data) < 12 or data[-4:] != b"PAR1":
            continue
        meta = _round_trips(data)
        _assert_fields_match_pyarrow(data, meta)
        writers.add((meta.created_by or "").split(" version")[0])
    assert {"parquet-mr", "parquet-cpp-arrow"} <= writers


def _nested_table(n: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "tag": pa.array([f"t{i % 5}" for i in range(n)]).dictionary_encode(),
            "s": pa.array([{"a": i, "b": [str(i)] * (i % 3)} if i % 4 else None for i in range(n)]),
            "m": pa.array([[("k", i)] for i in range(n)], pa.map_(pa.string(), pa.int64())),
            "d": pa.array([i / 3 for i in range(n)], pa.float64()),
            "dec": pa.array([None if i % 9 == 0 else decimal.Decimal(i) / 100 for i in range(n)], pa.decimal128(18, 2)),
            "ts": pa.array(range(n), pa.timestamp("us", tz="UTC")),
        }
    )


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"write_page_index": True},
        {"write_page_index": True, "bloom_filter_options": {"id": {"ndv": 1000, "fpp": 0.01}, "d": {}}},
        {"use_dictionary": False, "data_page_version": "2.0", "compression": "zstd", "write_page_checksum": True},
        {"row_group_size": 700, "write_page_index": True, "sorting_columns": [pq.SortingColumn(0)]},
    ],
)
def test_pyarrow_footers_round_trip_with_page_indexes_bloom_filters_and_nested_columns(options: dict) -> None:
    buf = io.BytesIO()
    pq.write_table(_nested_table(3000), buf, **options)
    data = buf.getvalue()
    meta = _round_trips(data)
    _assert_fields_match_pyarrow(data, meta)
    if "bloom_filter_options" in options:
        blooms = [c.meta_data.bloom_filter_offset for c in meta.row_groups[0].columns]
        assert sum(b is not None for b in blooms) == 2
    if "sorting_columns" in options:
        assert [s.column_idx for s in meta.row_groups[0].sorting_columns] == [0]
    assert meta.metadata_value("ARROW:schema") is not None


def test_delta_rs_footers_round_trip(tmp_path: Path) -> None:
    deltalake.write_deltalake(str(tmp_path / "t"), _nested_table(2000).drop_columns(["tag"]), partition_by=None)
    files = list((tmp_path / "t").glob("*.parquet"))
    assert len(files) == 1
    data = files[0].read_bytes()
    meta = _round_trips(data)
    _assert_fields_match_pyarrow(data, meta)
    assert meta.created_by == "delta-rs version py-1.6.3"
    # arrow-rs writes page indexes by default
    assert all(c.offset_index_offset is not None for c in meta.row_groups[0].columns)


def test_spark_footers_round_trip(spark_local, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    spark = spark_local.spark
    out = str(tmp_path / "spark")
    spark.range(0, 5000).selectExpr(
        "id",
        "cast(id % 7 as string) as s",
        "named_struct('a', id, 'b', array(id, id + 1)) as st",
        "map('k', id) as m",
        "cast(id as decimal(20, 3)) as dec",
        "timestamp_micros(id) as ts",
    ).coalesce(1).write.parquet(out)
    files = list(Path(out).glob("*.parquet"))
    assert len(files) == 1
    data = files[0].read_bytes()
    meta = _round_trips(data)
    _assert_fields_match_pyarrow(data, meta)
    assert meta.created_by.startswith("parquet-mr version")
    assert meta.metadata_value("org.apache.spark.sql.parquet.row.metadata") is not None


def test_unknown_fields_survive_a_round_trip_and_readers_ignore_them() -> None:
    buf = io.BytesIO()
    pq.write_table(_nested_table(100), buf)
    data = buf.getvalue()
    meta = read_footer(data)
    future = Struct()
    future.set(1, I32, 7)
    future.set(2, BINARY, b"from a newer parquet-format")
    meta.raw.set(42, STRUCT, future)  # a FileMetaData field this code has no name for
    meta.row_groups[0].columns[0].meta_data.raw.set(99, BINARY, b"x" * 40)
    meta.key_value_metadata = [*meta.key_value_metadata, KeyValue()]
    meta.key_value_metadata[-1].key = "k"
    body = data[: len(data) - 8 - len(footer_bytes(data))]
    changed = file_with_footer(body, meta)
    again = read_footer(changed)
    assert again.raw.get(42) == future
    assert again.row_groups[0].columns[0].meta_data.raw.get(99) == b"x" * 40
    assert encode_footer(again) == encode_footer(meta)
    assert pq.read_table(io.BytesIO(changed)).equals(pq.read_table(io.BytesIO(data)))


def test_non_canonical_headers_round_trip() -> None:
    # field 1 in the long form (type byte, zigzag id), a list of 3 i32 in the long list form
    raw = bytes([0x05, 0x02, 0x08, 0x19, 0xF5, 0x03, 0x02, 0x04, 0x06, 0x00])
    value, end = read_struct(raw)
    assert end == len(raw)
    assert value.get(1) == 4 and list(value.get(2)) == [1, 2, 3]
    assert write_struct(value) == raw


@pytest.mark.parametrize(
    "raw, problem",
    [
        (b"\x15", "cut short"),
        (b"\x18\x10abc", "past the end"),
        (b"\x1d\x00", "unknown Thrift compact wire type 13"),
    ],
)
def test_corrupt_structs_raise_one_clear_error(raw: bytes, problem: str) -> None:
    with pytest.raises(ThriftError, match=problem):
        read_struct(raw)


@pytest.mark.parametrize(
    "tail, problem",
    [(b"PAR", "too short"), (b"\x00\x00\x00\x00PARE", "encrypted"), (b"\x00\x00\x00\x00ABCD", "no PAR1")],
)
def test_bad_file_endings_are_named(tail: bytes, problem: str) -> None:
    with pytest.raises(FooterError, match=problem):
        read_footer(tail)


def _moved_field_by_field(raw: bytes, delta: int) -> bytes:
    """The independent way to move an offset index: decode it whole, move each page location, encode it."""
    index = OffsetIndex(read_struct(raw)[0])
    for page in index.page_locations:
        page.offset = page.offset + delta
    return write_struct(index.raw)


def test_offset_indexes_move_as_decoding_them_whole_moves_them() -> None:
    # every offset index of the corpus (parquet-mr, parquet-rs, pyarrow), and pyarrow's with unencoded byte sizes
    buf = io.BytesIO()
    strings = pa.table({"s": [str(i) for i in range(20_000)], "i": list(range(20_000))})
    pq.write_table(strings, buf, write_page_index=True, data_page_size=1000)
    sources = [buf.getvalue()] + [p.read_bytes() for p in _corpus_parquet_files() if "_delta_log" not in p.parts]
    moved = 0
    for data in sources:
        try:
            meta = read_footer(data)
        except FooterError:
            continue
        for group in meta.row_groups:
            for chunk in group.columns:
                if chunk.offset_index_offset is None:
                    continue
                raw = data[chunk.offset_index_offset : chunk.offset_index_offset + chunk.offset_index_length]
                index = ShiftableOffsetIndex(raw)
                assert index.offsets == [p.offset for p in OffsetIndex(read_struct(raw)[0]).page_locations]
                for delta in (0, 3, -4, 1 << 33):
                    assert index.moved(delta) == _moved_field_by_field(raw, delta)
                moved += 1
    assert moved >= 4000
    # layouts the byte-cutting path does not take: a long list header for 1 location, a field unknown to this code
    long_header = bytes([0x19, 0xFC, 0x01, 0x16, 0x08, 0x15, 0x0A, 0x16, 0x00, 0x00, 0x00])
    unknown = bytes([0x19, 0x1C, 0x16, 0x08, 0x15, 0x0A, 0x16, 0x00, 0x00, 0x88, 0x02, 0x6F, 0x6B, 0x00])
    for raw in (long_header, unknown):
        index = ShiftableOffsetIndex(raw)
        assert index.offsets == [4]
        assert index.moved(10) == _moved_field_by_field(raw, 10) != raw
    with pytest.raises(FooterError, match="offset index"):
        ShiftableOffsetIndex(b"\x19\x1c\x16")
