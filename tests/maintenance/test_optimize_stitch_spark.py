"""Stitched OPTIMIZE on the Spark executors (classic and Connect), and stitched files read by Spark's own Parquet
reader (parquet-java) with filter pushdown, column-index filtering and bloom filters on."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.executors import LocalExecutor
from airflow_provider_deltalite.executors.spark import SparkExecutor
from airflow_provider_deltalite.maintenance.optimize import optimize
from tests.maintenance.stitch_checks import commit_actions, file_of, spark_conf
from tests.maintenance.test_optimize_stitch import ROWS_PER_FILE, _columns, _delta_rs_table, _threshold
from tests.oracles import agreed_rows, assert_rows_agree


def _comparable(stats: Any) -> dict[str, Any]:
    doc = stats.to_dict()
    for key in ("startTimeMs", "endTimeMs", "executor", "totalClusterParallelism"):
        doc.pop(key)
    return doc


def test_spark_executors_stitch_as_the_local_one(spark_any: SparkExecutor, tmp_path: Path) -> None:
    local = _delta_rs_table(tmp_path / "local", files=4, partition_by=["p"], nested=True)
    remote = _delta_rs_table(tmp_path / "spark", files=4, partition_by=["p"], nested=True)
    threshold = _threshold(local)
    before = agreed_rows(remote)
    by_local = optimize(DeltaTable(str(local)), executor=LocalExecutor(2), min_row_group_size=threshold)
    by_spark = optimize(DeltaTable(str(remote)), executor=spark_any, min_row_group_size=threshold)
    assert by_spark.executor == "spark"
    # partition a's files have an 8000-row group to copy; partition b's (6666 rows a file) have none
    assert (by_spark.num_files_copied, by_spark.num_files_reencoded) == (4, 4)
    local_doc, spark_doc = _comparable(by_local), _comparable(by_spark)
    # the two tables were written separately: same rows, other bytes; what was copied and how must agree
    for key in ("numFilesCopied", "numFilesReencoded", "numFilesAdded", "numFilesRemoved", "numBins"):
        assert local_doc[key] == spark_doc[key]
    assert_rows_agree(remote, before, columns=_columns(remote))


def _spark_rows(frame: Any) -> collections.Counter:
    # through Arrow, as collect() would give them (collect() pickles a Row per row: most of this file's time)
    table = frame.toArrow()
    return collections.Counter(zip(*(column.to_pylist() for column in table.columns), strict=True))


ROW_READER_QUERIES = (None, "id between 30000 and 30100 or id = 79999")
SELECT = ["id", "name", "value", "cast(day as string) as day", "unix_micros(ts) as ts", "p", "s.x", "s.y"]


def _arrow_rows(table: Any) -> collections.Counter:
    s = table.column("s").combine_chunks()
    xs = pc.struct_field(s, [0]).to_pylist()
    ys = pc.struct_field(s, [1]).to_pylist()
    ts = table.column("ts").cast("int64").to_pylist()
    rows = zip(
        table.column("id").to_pylist(),
        table.column("name").to_pylist(),
        table.column("value").to_pylist(),
        [str(d) for d in table.column("day").to_pylist()],
        ts,
        table.column("p").to_pylist(),
        xs,
        ys,
        strict=True,
    )
    return collections.Counter(rows)


@pytest.fixture(scope="module")
def stitched_table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], dict[str, Any]]:
    """A table of 5 delta-rs files compacted by stitching; its inputs are kept (VACUUM has not run)."""
    path = _delta_rs_table(tmp_path_factory.mktemp("stitched") / "t", files=5, nested=True)
    inputs = sorted(str(f) for f in path.glob("*.parquet"))
    stats = optimize(DeltaTable(str(path)), min_row_group_size=_threshold(path))
    assert (stats.num_files_copied, stats.num_files_reencoded) == (5, 0)
    (add,) = commit_actions(path, stats.committed_version, "add")
    return path, inputs, add


@pytest.mark.parametrize(
    "where",
    [
        None,
        "id = 12345",
        "id between 30000 and 30100 or id = 79999",
        "name = 'name-5-éé'",
        "ts < timestamp_micros(1700000000000000 + 1001 * 1500)",
        "s.x > 79000",
        "name is null and id < 40000",
    ],
)
def test_spark_parquet_reader_reads_stitched_files_as_pyarrow_reads_the_inputs(
    spark_local: SparkExecutor, stitched_table: tuple[Path, list[str], dict[str, Any]], where: str | None
) -> None:
    path, inputs, add = stitched_table
    expected = _arrow_rows(pq.read_table(inputs[0]).schema.empty_table())
    spark = spark_local.spark
    conf = {
        "spark.sql.parquet.filterPushdown": "true",
        "spark.sql.parquet.enableVectorizedReader": "true",
        "parquet.filter.columnindex.enabled": "true",
        "parquet.filter.bloom.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
    }
    with spark_conf(spark, conf):
        stitched = spark.read.parquet(str(file_of(path, add)))
        originals = spark.read.parquet(*inputs)
        if where:
            stitched, originals = stitched.where(where), originals.where(where)
        got = _spark_rows(stitched.selectExpr(*SELECT))
        want = _spark_rows(originals.selectExpr(*SELECT))
        got_rows = got
        if where in ROW_READER_QUERIES:
            # vectorised off too: the row-by-row reader follows the page index on its own path
            spark.conf.set("spark.sql.parquet.enableVectorizedReader", "false")
            again = spark.read.parquet(str(file_of(path, add)))
            if where:
                again = again.where(where)
            got_rows = _spark_rows(again.selectExpr(*SELECT))
    assert got == want == got_rows
    if where is None:
        assert sum(got.values()) == 5 * ROWS_PER_FILE
        assert got == _arrow_rows(pq.read_table(inputs, schema=None)) + expected
    else:
        assert 0 < sum(got.values()) < 5 * ROWS_PER_FILE
