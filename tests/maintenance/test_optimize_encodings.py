"""OPTIMIZE's re-encoded files: delta encodings where they pay (`engine.column_encodings`), read identically by
delta-rs, delta-kernel-rs and Spark's own Parquet reader (vectorised and row by row)."""

from __future__ import annotations

import collections
import shutil
from pathlib import Path
from typing import Any

import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine.data_file_writer import WriterOptions
from airflow_provider_deltalite.executors.spark import SparkExecutor
from airflow_provider_deltalite.maintenance.optimize import optimize
from tests.maintenance.stitch_checks import commit_actions, file_of, spark_conf
from tests.oracles import delta_rs_rows, kernel_rows

FILES = 6
ROWS = 40_000
COLUMNS = ["id", "amount", "at", "name", "note", "price", "flag"]
START_US = 1_796_083_200_000_000  # 2026-12-01


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six delta-rs files of 40,000 rows (a compacted row group of 240,000: past a dictionary page for ids)."""
    return _table(tmp_path_factory.mktemp("encodings") / "t")


def _copy(pristine: Path, dest: Path) -> Path:
    shutil.copytree(pristine, dest)
    return dest


def _sorted_inputs(path: Path) -> pa.Table:
    return pa.concat_tables(pq.read_table(f) for f in sorted(path.glob("*.parquet"))).sort_by("id")


def _assert_oracles_read(path: Path, expected: pa.Table) -> None:
    for read in (delta_rs_rows, kernel_rows):
        got = read(path).select(COLUMNS).sort_by("id")
        assert got.equals(expected.select(COLUMNS).cast(got.schema)), read.__name__


def _table(path: Path) -> Path:
    rng = np.random.default_rng(2029)
    for f in range(FILES):
        ids = np.arange(f * ROWS, (f + 1) * ROWS)
        batch = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "amount": pa.array(rng.integers(0, 10**9, ROWS), pa.int64()),
                "at": pa.array(START_US + ids * 13_000, pa.timestamp("us", "UTC")),
                "name": pa.array([f"n{i % 9973}-{i}" if i % 11 else None for i in ids]),
                "note": pa.array([f"{'a long and repetitive note ' * 3}{i}" for i in ids]),
                "price": pa.array(rng.standard_normal(ROWS)),
                "flag": pa.array(ids % 3 == 0),
            }
        )
        deltalake.write_deltalake(str(path), batch, mode="append")
    return path


def _data_page_encodings(path: Path) -> dict[str, set[str]]:
    meta = pq.ParquetFile(path).metadata
    out: dict[str, set[str]] = collections.defaultdict(set)
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for i in range(group.num_columns):
            chunk = group.column(i)
            out[chunk.path_in_schema] |= set(chunk.encodings) - {"RLE"}  # RLE: the levels
    return dict(out)


def test_compacted_files_use_delta_encodings_where_they_pay(pristine: Path, tmp_path: Path) -> None:
    path = _copy(pristine, tmp_path / "t")
    before = _sorted_inputs(path)
    stats = optimize(DeltaTable(str(path)))
    assert (stats.num_files_removed, stats.num_files_added) == (FILES, 1)
    (add,) = commit_actions(path, stats.committed_version, "add")
    assert _data_page_encodings(file_of(path, add)) == {
        "id": {"DELTA_BINARY_PACKED"},  # neighbours differ by 1
        "amount": {"DELTA_BINARY_PACKED"},  # 30 bits of 64
        "at": {"DELTA_BINARY_PACKED"},  # 13 ms apart
        "name": {"DELTA_LENGTH_BYTE_ARRAY"},  # about 10 bytes
        "note": {"PLAIN"},  # about 86 bytes
        "price": {"PLAIN"},
        "flag": {"PLAIN"},
    }
    _assert_oracles_read(path, before)


def test_delta_encodings_off_writes_plain_values(pristine: Path, tmp_path: Path) -> None:
    path = _copy(pristine, tmp_path / "t")
    before = _sorted_inputs(path)
    stats = optimize(DeltaTable(str(path)), writer_options=WriterOptions(delta_encodings=False))
    (add,) = commit_actions(path, stats.committed_version, "add")
    encodings = _data_page_encodings(file_of(path, add))
    assert set().union(*encodings.values()) == {"PLAIN"}
    _assert_oracles_read(path, before)


SPARK_SELECT = ["id", "amount", "unix_micros(at) as at", "name", "note", "price", "flag"]


def _spark_rows(frame: Any) -> collections.Counter:
    table = frame.selectExpr(*SPARK_SELECT).toArrow()
    return collections.Counter(zip(*(column.to_pylist() for column in table.columns), strict=True))


@pytest.mark.parametrize(
    ("where", "vectorised"),
    [(None, "true"), (None, "false"), ("id between 100000 and 100200", "true"), ("name = 'n17-17'", "false")],
)
def test_spark_parquet_reader_reads_delta_encoded_files_as_the_inputs(
    spark_local: SparkExecutor,
    pristine: Path,
    tmp_path_factory: pytest.TempPathFactory,
    vectorised: str,
    where: str | None,
) -> None:
    path = _compacted(pristine, tmp_path_factory)
    inputs, output = _inputs_and_output(path)
    spark = spark_local.spark
    conf = {
        "spark.sql.parquet.filterPushdown": "true",
        "spark.sql.parquet.enableVectorizedReader": vectorised,
        "spark.sql.session.timeZone": "UTC",
    }
    with spark_conf(spark, conf):
        compacted, originals = spark.read.parquet(str(output)), spark.read.parquet(*map(str, inputs))
        if where:
            compacted, originals = compacted.where(where), originals.where(where)
        got, want = _spark_rows(compacted), _spark_rows(originals)
    assert got == want
    assert 0 < sum(got.values()) <= FILES * ROWS
    if where is None:
        assert sum(got.values()) == FILES * ROWS


_COMPACTED: dict[str, Path] = {}


def _compacted(pristine: Path, factory: pytest.TempPathFactory) -> Path:
    """One table compacted once for the Spark reads (its inputs stay: VACUUM has not run)."""
    if "path" not in _COMPACTED:
        path = _copy(pristine, factory.mktemp("encoded") / "t")
        optimize(DeltaTable(str(path)))
        _COMPACTED["path"] = path
    return _COMPACTED["path"]


def _inputs_and_output(path: Path) -> tuple[list[Path], Path]:
    (add,) = commit_actions(path, FILES, "add")
    output = file_of(path, add)
    assert "DELTA_BINARY_PACKED" in _data_page_encodings(output)["id"]
    return sorted(f for f in path.glob("*.parquet") if f != output), output
