"""Row tracking on the Spark executor: OPTIMIZE and the shuffled Z-order keep every row's id and commit version
(`tests/row_tracking_oracle.py` before and after, independent of the engine)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.executors.spark import SparkExecutor
from airflow_provider_deltalite.maintenance.clustering import shuffle as clustering_shuffle
from airflow_provider_deltalite.maintenance.clustering.zorder import zorder
from airflow_provider_deltalite.maintenance.optimize import optimize
from tests.maintenance.test_row_tracking_rewrites import assert_rewrite_kept_row_tracking, kernel_rows, new_adds
from tests.row_tracking_oracle import (
    BUILT_IDENTITIES,
    ROW_ID_COL,
    VERSION_COL,
    build_table,
    identities_by_id,
    row_identities,
)


def test_optimize_then_shuffled_zorder_on_spark_keep_row_ids(
    spark_local: SparkExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = build_table(tmp_path / "t", column_mapping="name")
    before = row_identities(table)
    assert identities_by_id(before) == BUILT_IDENTITIES
    rows_before = kernel_rows(table)
    by_spark = optimize(DeltaTable(str(table)), executor=spark_local)
    assert (by_spark.executor, by_spark.committed_version, by_spark.num_files_added) == ("spark", 3, 1)
    assert row_identities(table) == before
    assert_rewrite_kept_row_tracking(table, 3, first_base_row_id=35)
    # Spark's own Parquet reader (what Delta on Spark reads the hidden columns with) decodes what pyarrow does
    (add,) = new_adds(table, 3)
    hidden = [ROW_ID_COL, VERSION_COL]
    by_spark_reader = spark_local.spark.read.parquet(str(table / add["path"])).select(*[f"`{c}`" for c in hidden])
    assert sorted(tuple(r) for r in by_spark_reader.collect()) == sorted(
        zip(*pq.read_table(table / add["path"], columns=hidden).to_pydict().values(), strict=True)
    )
    # every stage of the shuffle has several tasks: one map task per file, several output files
    monkeypatch.setattr(clustering_shuffle, "GROUP_BYTES", 1)
    monkeypatch.setattr(clustering_shuffle, "SHUFFLE_ABOVE_BYTES", 0)
    shuffled = zorder(DeltaTable(str(table)), ["value", "id"], target_size=600, executor=spark_local)
    # the local executor writes the same three files (tests/maintenance/test_zorder_spark.py)
    assert (shuffled.executor, shuffled.committed_version, shuffled.num_files_removed) == ("spark", 4, 1)
    assert shuffled.num_files_added == 3
    assert row_identities(table) == before
    assert_rewrite_kept_row_tracking(table, 4, first_base_row_id=35 + 22)
    assert kernel_rows(table) == rows_before
