"""`engine.column_encodings`: which columns of a new file get a delta encoding, and that readers read them."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_deltalite.engine.column_encodings import column_encodings, delta_encodings, dictionary_columns

N = 200_000
RNG = np.random.default_rng(29)


def _table() -> pa.Table:
    start = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    return pa.table(
        {
            "id": pa.array(np.arange(N), pa.int64()),  # neighbours differ by 1
            "amount": pa.array(RNG.integers(0, 10**9, N), pa.int64()),  # 30 bits of 64
            "hash": pa.array(RNG.integers(-(2**63), 2**63 - 1, N), pa.int64()),  # every bit
            "small": pa.array(RNG.integers(-100, 100, N), pa.int8()),  # stored as INT32
            "code": pa.array(RNG.integers(-(2**31), 2**31 - 1, N), pa.int32()),  # every bit of INT32
            "day": pa.array([dt.date(2026, 1, 1) + dt.timedelta(days=int(d)) for d in RNG.integers(0, 365, N)]),
            "at": pa.array([start + dt.timedelta(milliseconds=i * 37) for i in range(N)], pa.timestamp("us", "UTC")),
            "name": pa.array([f"user-{i % 5000}-{i}" for i in range(N)]),  # about 14 bytes
            "note": pa.array([f"{'lorem ipsum dolor sit amet ' * 3}{i}" for i in range(N)]),  # about 86 bytes
            "price": pa.array(RNG.standard_normal(N)),
            "flag": pa.array(RNG.integers(0, 2, N).astype(bool)),
            "nothing": pa.nulls(N, pa.int64()),
        }
    )


# `_table`'s columns whose values a delta encoding packs into fewer bits than plain values take
PAYING_DELTA = {
    "id": "DELTA_BINARY_PACKED",
    "amount": "DELTA_BINARY_PACKED",
    "small": "DELTA_BINARY_PACKED",
    "day": "DELTA_BINARY_PACKED",
    "at": "DELTA_BINARY_PACKED",
    "name": "DELTA_LENGTH_BYTE_ARRAY",
}


def test_delta_encodings_where_they_pay_and_plain_elsewhere() -> None:
    assert delta_encodings(_table()) == PAYING_DELTA


def test_dictionary_columns_are_left_to_their_dictionary() -> None:
    table = _table()
    dictionary = dictionary_columns(table)
    # 200 and 365 distinct values; 200,000 distinct 4-byte codes (800 KB: one dictionary page); no values at all
    assert dictionary == ["small", "code", "day", "nothing"]
    assert delta_encodings(table, exclude=dictionary) == {
        "id": "DELTA_BINARY_PACKED",
        "amount": "DELTA_BINARY_PACKED",
        "at": "DELTA_BINARY_PACKED",
        "name": "DELTA_LENGTH_BYTE_ARRAY",
    }


def test_nulls_do_not_widen_the_estimate() -> None:
    ids = pa.array([i if i % 3 else None for i in range(N)], pa.int64())
    assert delta_encodings(pa.table({"id": ids})) == {"id": "DELTA_BINARY_PACKED"}


def test_chunked_columns_are_judged_as_one() -> None:
    chunks = pa.chunked_array([np.arange(0, 50_000), np.arange(50_000, N)], pa.int64())
    assert delta_encodings(pa.table({"id": chunks})) == {"id": "DELTA_BINARY_PACKED"}


def test_files_with_the_chosen_encodings_read_back_identically(tmp_path) -> None:
    table = _table()
    encodings = delta_encodings(table)
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, use_dictionary=False, column_encoding=encodings, compression="snappy")
    meta = pq.ParquetFile(path).metadata.row_group(0)
    written = {meta.column(i).path_in_schema: set(meta.column(i).encodings) for i in range(meta.num_columns)}
    for column, encoding in encodings.items():
        assert encoding in written[column]
    assert "PLAIN" in written["price"] and "PLAIN" in written["hash"]
    assert pq.read_table(path).equals(table)


def test_integers_about_as_narrow_as_their_dictionary_indexes_are_delta_encoded() -> None:
    table = _table()
    # small: 200 values (8-bit indexes), differences up to 9 bits; day: 365 values (9 bits), differences up to 10:
    # delta-encoded. code: 200,000 values (18-bit indexes) over all of INT32 (32-bit differences): its dictionary
    # stays. days: 8 event days in microseconds (3-bit indexes, 40-bit differences): its dictionary stays.
    table = table.append_column(
        "days", pa.array(RNG.integers(0, 8, N) * 86_400_000_000 + 1_790_000_000_000_000, pa.int64())
    )
    dictionary, encodings = column_encodings(table, dictionary=True, delta=True)
    assert dictionary == ["code", "nothing", "days"]
    assert encodings == PAYING_DELTA
    # without delta encodings (readers before Spark 3.3) every column that fits a dictionary keeps it
    assert column_encodings(table, dictionary=True, delta=False) == (["small", "code", "day", "nothing", "days"], None)
