"""Reading small data files: in one call, with the size from the log (`data_files`), gathered into the writer's row
groups on the reading thread (`data_file_writer.row_group_tables`)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite.engine.data_file_writer import row_group_tables
from airflow_provider_deltalite.engine.data_files import iter_file_rows
from airflow_provider_deltalite.engine.storage import Storage

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "s", "type": "string", "nullable": True, "metadata": {}},
    ],
}


def _file(tmp_path: Path, rows: int, row_group_size: int) -> tuple[Storage, str, int]:
    table = pa.table({"id": pa.array(range(rows), pa.int64()), "s": [f"v{i % 7}" for i in range(rows)]})
    pq.write_table(table, tmp_path / "part-0.parquet", row_group_size=row_group_size)
    return Storage(str(tmp_path)), "part-0.parquet", (tmp_path / "part-0.parquet").stat().st_size


def _read(storage: Storage, path: str, size: int | None, batch_rows: int = 131_072) -> list[pa.Table]:
    return list(
        iter_file_rows(storage, path, None, SCHEMA, mode="none", partition_columns=(), size=size, batch_rows=batch_rows)
    )


@pytest.mark.parametrize("log_size_delta", [0, -100, 100, None])
def test_a_small_file_reads_whole_whatever_size_the_log_gives(tmp_path: Path, log_size_delta: int | None) -> None:
    # the log's size is a hint: a file whose size differs from it (a log written by a careless tool) reads as before
    storage, path, size = _file(tmp_path, 1_000, 1_000)
    tables = _read(storage, path, None if log_size_delta is None else size + log_size_delta)
    assert len(tables) == 1
    assert tables[0].column("id").to_pylist() == list(range(1_000))
    assert tables[0].column("s").to_pylist()[:8] == ["v0", "v1", "v2", "v3", "v4", "v5", "v6", "v0"]
    assert tables[0].schema == pa.schema([("id", pa.int64()), ("s", pa.string())])


def test_a_file_of_several_row_groups_streams_in_batches(tmp_path: Path) -> None:
    storage, path, size = _file(tmp_path, 1_000, 300)
    tables = _read(storage, path, size, batch_rows=400)
    assert [t.num_rows for t in tables] == [400, 400, 200]
    assert [v for t in tables for v in t.column("id").to_pylist()] == list(range(1_000))


def test_row_group_tables_gathers_as_the_writer_would() -> None:
    # 8 bytes a row (one int64 column): a row group is cut as soon as it holds 100 bytes, the rest comes last
    spans = ((0, 5), (5, 9), (14, 0), (14, 20), (34, 3))
    chunks = [pa.table({"x": pa.array(range(start, start + n), pa.int64())}) for start, n in spans]
    groups = list(row_group_tables(chunks, row_group_bytes=100))
    assert [g.num_rows for g in groups] == [14, 20, 3]
    assert [v for g in groups for v in g.column("x").to_pylist()] == list(range(37))
    assert [g.column("x").num_chunks for g in groups] == [2, 1, 1]  # the chunks' arrays, not copies
    assert list(row_group_tables([], row_group_bytes=100)) == []
