"""VACUUM through Spark: directories listed and paths deleted as Spark tasks give the same plan and the same result
as the local executor; the spark-submit job runs it from the shipped zip."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.executors import LocalExecutor
from airflow_provider_deltalite.executors.spark import SparkExecutor
from airflow_provider_deltalite.jobs import driver
from airflow_provider_deltalite.maintenance.vacuum import vacuum
from tests.executors.spark_cluster import spark_submit

OLD_NS = (time.time_ns() - 30 * 24 * 3_600_000 * 1_000_000,) * 2
RETAIN_NOTHING = {"retention_hours": 0, "enforce_retention_duration": False}


def _table(path: Path) -> Path:
    """Two partition levels, three overwrites per partition, orphans at every level; all 30 days old."""
    for k in range(3):
        for a in ("x", "y z"):
            data = pa.table({"id": pa.array([k], pa.int64()), "a": [a] * 1, "b": [f"{k % 2}%"]})
            deltalake.write_deltalake(
                str(path), data, mode="overwrite", partition_by=["a", "b"], predicate=f"a = '{a}'"
            )
    for rel in ("orphan.parquet", "a=x/orphan.parquet", "a=x/b=0%25/orphan.parquet", "a=q/b=1/orphan.parquet"):
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_bytes(b"orphan")
    for dirpath, dirs, names in os.walk(path):
        for name in dirs + names:
            if "_delta_log" not in dirpath:
                os.utime(os.path.join(dirpath, name), ns=OLD_NS)
    return path


def _tree(path: Path) -> set[str]:
    return {
        str((Path(d) / n).relative_to(path)) for d, ds, fs in os.walk(path) for n in ds + fs if "_delta_log" not in d
    }


def test_spark_tasks_list_and_delete_exactly_as_the_local_executor(spark_any: SparkExecutor, tmp_path: Path) -> None:
    base = _table(tmp_path / "base")
    by_local = Path(shutil.copytree(base, tmp_path / "local"))  # copy2 and copystat keep the old times
    by_spark = Path(shutil.copytree(base, tmp_path / "spark"))
    plans = []
    for path, executor in ((by_local, LocalExecutor(2)), (by_spark, spark_any)):
        dry = vacuum(DeltaTable(str(path)), **RETAIN_NOTHING, dry_run=True, executor=executor)
        plans.append(([f["path"] for f in dry.files_to_delete], dry.dirs_to_delete, dry.dirs_present_before_delete))
    assert plans[0] == plans[1]
    files, dirs, dirs_present = plans[0]
    # 4 overwritten files and 4 orphans; the partitions the overwrites emptied, and the orphan's; 8 listed + root
    assert len(files) == 8 and dirs_present == 9
    assert dirs == ["a=q/b=1", "a=x/b=1%25", "a=y%20z/b=1%25", "a=q"]

    local = vacuum(DeltaTable(str(by_local)), **RETAIN_NOTHING, executor=LocalExecutor(2))
    spark = vacuum(DeltaTable(str(by_spark)), **RETAIN_NOTHING, executor=spark_any)
    assert (spark.executor, local.executor) == ("spark", "local")
    assert spark.objects_deleted == local.objects_deleted == 12
    assert _tree(by_spark) == _tree(by_local)
    rows = pa.table(deltalake.DeltaTable(str(by_spark)).to_pyarrow_table())
    assert sorted(rows.column("id").to_pylist()) == [2, 2]


def test_the_spark_job_runs_vacuum_in_the_running_session(spark_local: SparkExecutor, tmp_path: Path, capsys) -> None:
    path = _table(tmp_path / "t")
    result = tmp_path / "result.json"
    code = driver.main(
        [
            "vacuum",
            "--table",
            str(path),
            "--result",
            str(result),
            "--retention-hours",
            "0",
            "--no-enforce-retention-duration",
        ]
    )
    assert code == 0
    stats = json.loads(result.read_text())
    assert (stats["executor"], stats["mode"], stats["objectsDeleted"]) == ("spark", "FULL", 12)
    assert capsys.readouterr().out == f"DELTALITE_RESULT {json.dumps(stats)}\n"
    assert driver.main(["vacuum", "--table", str(path), "--retention-hours", "1"]) == 2
    assert "shorter than the table's delta.deletedFileRetentionDuration" in capsys.readouterr().err


@pytest.mark.slow
def test_spark_submit_job_vacuums_from_the_shipped_zip(tmp_path: Path) -> None:
    # local[2]: the job's tasks on a standalone cluster's executors are tests/executors/test_spark.py's
    path = _table(tmp_path / "t")
    result = tmp_path / "result.json"
    out = spark_submit(
        "local[2]",
        [
            "vacuum",
            "--table",
            str(path),
            "--result",
            str(result),
            "--retention-hours",
            "0",
            "--no-enforce-retention-duration",
        ],
        {},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    stats = json.loads(result.read_text())
    assert (stats["executor"], stats["objectsDeleted"], stats["committedVersions"]) == ("spark", 12, [6, 7])
    assert not (path / "a=q").exists() and (path / "a=x" / "b=0%25").is_dir()
