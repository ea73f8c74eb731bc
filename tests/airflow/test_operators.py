"""The operators called the way a task calls them (render, execute, on_kill), with real spark-submit runs.

Tables are made by deltalite's engine (`demo.create_small_file_table`); delta-rs 1.6.3 checks the rows. Connections come
from AIRFLOW_CONN_* variables. No metadata database is needed: the end-to-end DAG runs are in test_dags_end_to_end.
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import fields
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.demo import FAST_JVM_CONF, create_small_file_table
from airflow_provider_deltalite.engine import InvalidArgument, InvalidExpression, TableNotFound
from airflow_provider_deltalite.executors.engine_zip import build_package_zip
from airflow_provider_deltalite.hooks.deltalite import InvalidConnection
from airflow_provider_deltalite.hooks.spark_submit import bundled_spark_submit, pyspark_home
from airflow_provider_deltalite.maintenance.optimize_stats import OptimizeStats, camel_case
from airflow_provider_deltalite.maintenance.option_values import column_names
from airflow_provider_deltalite.maintenance.options import OptimizeOptions, VacuumOptions, ZOrderOptions
from airflow_provider_deltalite.maintenance.vacuum.stats import VacuumStats
from airflow_provider_deltalite.operators.base import JOB_FILE, DeltaLiteJobFailed
from airflow_provider_deltalite.operators.lineage import dataset_identity, run_facet_fields
from airflow_provider_deltalite.operators.optimize import OptimizeOperator
from airflow_provider_deltalite.operators.vacuum import VacuumOperator
from airflow_provider_deltalite.operators.zorder import ZOrderOperator
from tests.moto_server import deltars_s3_options

OPTIMIZE_KEYS = {camel_case(f.name) for f in fields(OptimizeStats)} - {"plan"} | {"skippedReason"}
VACUUM_KEYS = {camel_case(f.name) for f in fields(VacuumStats)} | {"skippedReason"}


def _table(path: Path, files: int = 12) -> str:
    create_small_file_table(str(path), files=files, rows_per_file=50)
    return str(path)


def _rows(uri: str, storage_options: dict[str, str] | None = None) -> collections.Counter:
    table = pa.table(deltalake.DeltaTable(uri, storage_options=storage_options).to_pyarrow_table())
    return collections.Counter(map(repr, table.sort_by("event_id").to_pylist()))


def _version(uri: str, storage_options: dict[str, Any] | None = None) -> int:
    return DeltaTable(uri, storage_options=storage_options).latest_version()


def _rendered(op: Any, **params: Any) -> Any:
    op.render_template_fields({"params": params, "ds": "2026-11-20"})
    return op


# -- in process, no JVM ------------------------------------------------------------------------------------------


def test_below_min_small_files_returns_the_plan_without_starting_spark(tmp_path: Path) -> None:
    uri = _table(tmp_path / "t", files=6)
    op = OptimizeOperator(task_id="o", table_uri=uri, min_small_files="{{ params.n }}")
    stats = _rendered(op, n="100").execute({})
    assert set(stats) == OPTIMIZE_KEYS
    assert stats["skippedReason"] == "6 files to compact, fewer than min_small_files=100"
    assert (stats["dryRun"], stats["numFilesRemoved"], stats["numFilesAdded"], stats["committedVersion"]) == (
        True,
        6,
        0,
        None,
    )
    assert op._hook is None  # no spark-submit was prepared
    assert _version(uri) == 6


def test_below_min_reclaimable_bytes_returns_the_listing_without_starting_spark(tmp_path: Path) -> None:
    uri = _table(tmp_path / "t", files=4)
    optimized = DeltaTable(uri).optimize()  # in process: 4 files become 2, the 4 wait for VACUUM
    removed = optimized.files_removed.total_size
    on_disk = sorted(p.name for p in Path(uri).rglob("*.parquet"))
    op = VacuumOperator(
        task_id="v", table_uri=uri, retention_hours=0, enforce_retention_duration="false", min_reclaimable_bytes=10**12
    )
    stats = op.execute({})
    assert set(stats) == VACUUM_KEYS
    assert stats["skippedReason"] == f"{removed} bytes to delete, fewer than min_reclaimable_bytes=1000000000000"
    assert (stats["isDryRun"], stats["numFilesToDelete"], stats["sizeOfDataToDelete"]) == (True, 4, removed)
    assert sorted(p.name for p in Path(uri).rglob("*.parquet")) == on_disk
    # a dry run asked for is answered in process when a threshold is set: nothing skipped, nothing deleted
    dry = VacuumOperator(
        task_id="d", table_uri=uri, retention_hours=0, enforce_retention_duration=False, dry_run=True,
        min_reclaimable_bytes=0,
    ).execute({})  # fmt: skip
    assert (dry["skippedReason"], dry["numFilesToDelete"], len(dry["filesToDelete"])) == (None, 4, 4)
    assert sorted(p.name for p in Path(uri).rglob("*.parquet")) == on_disk


@pytest.mark.parametrize(
    ("make", "params", "error", "problem"),
    [
        (
            lambda uri: OptimizeOperator(task_id="o", table_uri=uri, target_size="{{ params.size }}"),
            {"size": "-5"},
            InvalidArgument,
            "target_size must be a positive number of bytes, got -5",
        ),
        (
            lambda uri: OptimizeOperator(task_id="o", table_uri=uri, target_size="{{ params.size }}"),
            {"size": "5 GB"},
            InvalidArgument,
            "target_size must be a whole number, got '5 GB'",
        ),
        (
            lambda uri: OptimizeOperator(task_id="o", table_uri=uri, where="{{ params.where }}"),
            {"where": "amount > 3"},
            InvalidExpression,
            "where may only reference partition columns; 'amount' is not one (partition columns: date)",
        ),
        (
            lambda uri: OptimizeOperator(task_id="o", table_uri=uri, min_small_files="{{ params.n }}"),
            {"n": "-1"},
            InvalidArgument,
            "min_small_files must be at least 0, got -1",
        ),
        (
            lambda uri: ZOrderOperator(task_id="z", table_uri=uri, columns="{{ params.cols }}"),
            {"cols": "date"},
            InvalidArgument,
            "zorder column 'date' is a partition column; every file holds one value of it already",
        ),
        (
            lambda uri: VacuumOperator(task_id="v", table_uri=uri, dry_run="{{ params.dry }}"),
            {"dry": "maybe"},
            InvalidArgument,
            "dry_run must be true or false, got 'maybe'",
        ),
        (
            lambda uri: OptimizeOperator(task_id="o", table_uri=uri, max_bytes_to_rewrite="{{ params.cap }}"),
            {"cap": "0"},
            InvalidArgument,
            "max_bytes_to_rewrite must be a positive number of bytes, got 0",
        ),
        (
            lambda uri: OptimizeOperator(task_id="o", table_uri=uri, min_row_group_size="{{ params.size }}"),
            {"size": "-1"},
            InvalidArgument,
            "min_row_group_size must be a positive number of bytes, got -1",
        ),
        (
            lambda uri: VacuumOperator(task_id="v", table_uri=uri, max_files_to_delete="{{ params.n }}"),
            {"n": "-3"},
            InvalidArgument,
            "max_files_to_delete must be a positive whole number, got -3",
        ),
        (
            lambda uri: OptimizeOperator(task_id="o", table_uri=uri + "-missing"),
            {},
            TableNotFound,
            None,
        ),
    ],
    ids=[
        "negative-size",
        "size-not-a-number",
        "where-on-data-column",
        "threshold",
        "zorder",
        "flag",
        "rewrite-budget",
        "row-group-size",
        "files-budget",
        "no-table",
    ],
)
def test_a_templated_value_that_renders_invalid_fails_with_one_line_and_commits_nothing(
    tmp_path: Path, make: Any, params: dict[str, str], error: type, problem: str | None
) -> None:
    uri = _table(tmp_path / "t", files=3)
    op = _rendered(make(uri), **params)
    with pytest.raises(error) as err:
        op.execute({})
    message = str(err.value)
    assert "\n" not in message
    if problem is not None:
        assert message.startswith(f"table {uri}") and message.endswith(problem), message
    assert op._hook is None
    assert _version(uri) == 3


def test_zorder_column_lists_from_rendered_templates() -> None:
    assert column_names("columns", ["a", " b"]) == ["a", "b"]
    assert column_names("columns", "a, b") == ["a", "b"]
    assert column_names("columns", '["a", "b"]') == ["a", "b"]
    assert column_names("columns", "['a', 'b']") == ["a", "b"]
    with pytest.raises(
        InvalidArgument, match=r"^table /t: columns must be a non-empty list of column names, got \[\]$"
    ):
        ZOrderOptions.from_text({"columns": []}, "/t")


def test_missing_deltalite_connection_and_unknown_spark_connection(tmp_path: Path) -> None:
    uri = _table(tmp_path / "t", files=3)
    with pytest.raises(InvalidConnection) as err:
        OptimizeOperator(task_id="o", table_uri=uri, deltalite_conn_id="no_such_lake").execute({})
    assert str(err.value).startswith("connection 'no_such_lake': is not defined")
    op = OptimizeOperator(task_id="o", table_uri=uri, spark_conn_id="no_such_spark")
    with pytest.raises(InvalidConnection) as err:
        op.execute({})
    assert str(err.value) == (
        "Spark connection 'no_such_spark' is not defined (add it, or use 'spark_default', which is local[*] when it "
        "is not defined)"
    )
    assert _version(uri) == 3


def test_reserved_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match=r"^OptimizeOperator sets conn_id itself \(use spark_conn_id\)$"):
        OptimizeOperator(task_id="o", table_uri="/t", conn_id="spark_default")
    with pytest.raises(TypeError, match=r"^VacuumOperator sets application itself$"):
        VacuumOperator(task_id="v", table_uri="/t", application="x.py")


def test_cluster_mode_needs_a_result_uri_and_names_the_result_per_task_instance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Where cluster mode puts the credentials (a 0600 file, never the command line) is in test_secrets.py.
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps({"conn_type": "deltalite", "host": "s3://lake"}))
    monkeypatch.setenv(
        "AIRFLOW_CONN_YARN_CLUSTER",
        json.dumps({"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "cluster"}}),
    )
    common = {"task_id": "o", "table_uri": "events", "deltalite_conn_id": "lake", "spark_conn_id": "yarn_cluster"}
    op = OptimizeOperator(**common)
    op.resolve({})
    with pytest.raises(InvalidArgument, match=r"^table s3://lake/events: cluster deploy mode needs result_uri"):
        op._get_hook()
    op._cleanup()

    op = OptimizeOperator(**common, result_uri="s3://lake/_results/")
    ti = type("TI", (), {"dag_id": "d", "run_id": "manual__2026-11-20T00:00:00+00:00", "task_id": "o", "map_index": -1})
    op.resolve({"ti": ti()})
    hook = op._get_hook()
    command = hook._build_spark_submit_command(JOB_FILE)
    assert command[-6:-2] == [
        "--table",
        "s3://lake/events",
        "--result",
        "s3://lake/_results/d/manual__2026-11-20T00_00_00_00_00/o.json",
    ]
    assert command[-2:] == ["--options", OptimizeOptions().to_json()]  # the options as one JSON document
    assert command[command.index("--deploy-mode") + 1] == "cluster"
    op._cleanup()


def test_vacuum_mode_is_templated_and_lite_is_a_deprecated_spelling_of_it() -> None:
    op = _rendered(VacuumOperator(task_id="v", table_uri="/t", mode="{{ params.mode }}"), mode="LITE")
    assert op.options("/t") == VacuumOptions(mode="lite")
    assert VacuumOperator(task_id="v", table_uri="/t").options("/t") == VacuumOptions(mode="full")
    with pytest.warns(DeprecationWarning, match=r"VacuumOperator\(lite=\.\.\.\) is deprecated"):
        old = VacuumOperator(task_id="v", table_uri="/t", lite="{{ params.lite }}")
    assert _rendered(old, lite="true").options("/t").mode == "lite"
    with pytest.warns(DeprecationWarning):
        assert VacuumOperator(task_id="v", table_uri="/t", lite=False).options("/t").mode == "full"
    with pytest.warns(DeprecationWarning), pytest.raises(InvalidArgument, match=r"^table /t: lite must be true or"):
        VacuumOperator(task_id="v", table_uri="/t", lite="maybe").options("/t")
    with pytest.raises(InvalidArgument, match=r"^table /t: mode must be 'full' or 'lite', got 'half'$"):
        VacuumOperator(task_id="v", table_uri="/t", mode="half").options("/t")
    with pytest.raises(TypeError, match=r"^VacuumOperator takes mode or the deprecated lite, not both$"):
        VacuumOperator(task_id="v", table_uri="/t", mode="lite", lite=True)


def test_the_hook_gets_the_spark_submit_arguments_the_user_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    # never SparkSubmitOperator's private attributes: what the user passed (default_args included) and the rendered
    # template fields
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps({"conn_type": "deltalite", "host": "/lake"}))
    op = ZOrderOperator(
        task_id="z",
        table_uri="events",
        deltalite_conn_id="lake",
        columns="{{ params.columns }}",
        archives="env.tar.gz#environment",
        py_files="{{ params.extra }}",
        executor_memory="3g",
        num_executors=4,
        conf={"spark.x": "{{ params.x }}"},
        default_args={"driver_memory": "2g", "executor_memory": "1g", "retries": 0},
    )
    _rendered(op, columns="a,b", extra="extra.zip", x="1")
    op.resolve({})
    hook = op._get_hook()
    try:
        command = hook._build_spark_submit_command(JOB_FILE)
        flags = dict(itertools.pairwise(command))
        assert (flags["--archives"], flags["--executor-memory"], flags["--driver-memory"]) == (
            "env.tar.gz#environment",
            "3g",
            "2g",
        )
        assert (flags["--num-executors"], flags["--name"]) == ("4", "deltalite-zorder")
        assert flags["--py-files"] == f"{build_package_zip()},extra.zip"
        assert "spark.x=1" in command
        assert command[command.index(JOB_FILE) + 1 :] == [
            "zorder",
            "--table",
            "/lake/events",
            "--result",
            op._result,
            "--options",
            ZOrderOptions(columns=("a", "b")).to_json(),
        ]
    finally:
        op._cleanup()


def test_openlineage_names_and_run_facet() -> None:
    assert dataset_identity("s3://lake/warehouse/events/") == ("s3://lake", "warehouse/events")
    assert dataset_identity("s3a://lake/t") == ("s3://lake", "t")
    assert dataset_identity("/data/events") == ("file", "/data/events")
    assert dataset_identity("file:///data/events") == ("file", "/data/events")
    assert dataset_identity("abfss://c@acct.dfs.core.windows.net/lake/t") == (
        "abfss://c@acct.dfs.core.windows.net",
        "lake/t",
    )
    assert run_facet_fields("VACUUM", {"numFilesToDelete": 3, "filesToDelete": [{"path": "a"}]}) == {
        "operation": "VACUUM",
        "stats": {"numFilesToDelete": 3},
    }
    from openlineage.client.serde import Serde

    op = OptimizeOperator(task_id="o", table_uri="s3://lake/warehouse/events")
    op.stats = {"numFilesAdded": 2, "numFilesRemoved": 12, "plan": [{"bin": 1}]}
    lineage = op.get_openlineage_facets_on_complete(None)
    assert [(d.namespace, d.name) for d in lineage.inputs] == [("s3://lake", "warehouse/events")]
    assert [(d.namespace, d.name) for d in lineage.outputs] == [("s3://lake", "warehouse/events")]
    facet = Serde.to_dict(lineage.run_facets["deltalite"])
    assert {k: v for k, v in facet.items() if not k.startswith("_")} == {
        "operation": "OPTIMIZE",
        "stats": {"numFilesAdded": 2, "numFilesRemoved": 12},
    }
    assert OptimizeOperator(task_id="p").get_openlineage_facets_on_complete(None) is None  # no table, no lineage


# -- spark-submit on local Spark ----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.s3
def test_optimize_on_s3_through_a_connection_then_a_retry_finds_nothing_to_do(
    s3_endpoint: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    import s3fs

    bucket = f"lake-{uuid.uuid4().hex[:8]}"
    secret = f"secret-{uuid.uuid4().hex}"
    key_id = f"AKIA{uuid.uuid4().hex[:16].upper()}"
    s3 = {**s3_endpoint, "key": key_id, "secret": secret}  # moto takes any credentials
    s3fs.S3FileSystem(**s3).call_s3("create_bucket", Bucket=bucket)
    uri = f"s3://{bucket}/events"
    create_small_file_table(uri, files=12, rows_per_file=50, storage_options=s3)
    before = _rows(uri, deltars_s3_options(s3))
    extra = {
        "aws_access_key_id": key_id,
        "aws_secret_access_key": secret,
        "endpoint_url": s3["endpoint_url"],
        "region_name": "us-east-1",
    }
    connection = {"conn_type": "deltalite", "host": f"s3://{bucket}", "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_S3LAKE", json.dumps(connection))

    op = OptimizeOperator(task_id="optimize", table_uri="events", deltalite_conn_id="s3lake", conf=FAST_JVM_CONF)
    stats = op.execute({})

    assert set(stats) == OPTIMIZE_KEYS
    assert (stats["numFilesRemoved"], stats["numFilesAdded"], stats["readVersion"], stats["committedVersion"]) == (
        12,
        2,
        12,
        13,
    )
    assert (stats["executor"], stats["skippedReason"], stats["dryRun"]) == ("spark", None, False)
    fs = s3fs.S3FileSystem(**s3)
    commit = [json.loads(line) for line in fs.cat_file(f"{bucket}/events/_delta_log/{13:020d}.json").splitlines()]
    [info] = [a["commitInfo"] for a in commit if "commitInfo" in a]
    adds = [a["add"] for a in commit if "add" in a]
    removes = [a["remove"] for a in commit if "remove" in a]
    assert info["operation"] == "OPTIMIZE"
    assert (int(info["operationMetrics"]["numRemovedFiles"]), int(info["operationMetrics"]["numAddedFiles"])) == (
        stats["numFilesRemoved"],
        stats["numFilesAdded"],
    )
    assert (len(removes), len(adds)) == (stats["numFilesRemoved"], stats["numFilesAdded"])
    assert sum(a["size"] for a in adds) == stats["filesAdded"]["totalSize"]
    assert sum(r["size"] for r in removes) == stats["filesRemoved"]["totalSize"]
    assert _rows(uri, deltars_s3_options(s3)) == before
    assert len(deltalake.DeltaTable(uri, storage_options=deltars_s3_options(s3)).file_uris()) == 2

    log = "".join(capfd.readouterr())  # Airflow's task logging writes to the console outside a task runner
    assert "DELTALITE_RESULT" in log  # the driver's output reached the task log
    # (that no credential reaches a log, the command line or a rendered field is test_secrets.py's sweep)
    [cmd] = [line for line in log.splitlines() if "Spark-Submit cmd:" in line]
    # the installed spark-submit by absolute path, the engine zip, the job file, the result in a private temp dir
    assert f"Spark-Submit cmd: {bundled_spark_submit()} --master local[*] " in cmd
    assert f" --py-files {build_package_zip()} " in cmd
    assert f" {JOB_FILE} optimize --table {uri} --result {op._result} " in f"{cmd} "
    assert op._hook._env == {
        "SPARK_HOME": str(pyspark_home()),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "DELTALITE_STORAGE_OPTIONS": json.dumps(
            {
                "key": key_id,
                "secret": secret,
                "endpoint_url": s3["endpoint_url"],
                "client_kwargs": {"region_name": "us-east-1"},
            }
        ),
    }  # credentials in the spark-submit process environment only
    assert not Path(op._result).parent.exists()  # the private result directory is gone

    retry = OptimizeOperator(task_id="optimize", table_uri="events", deltalite_conn_id="s3lake", conf=FAST_JVM_CONF)
    again = retry.execute({})
    assert (again["skippedReason"], again["numFilesRemoved"], again["committedVersion"]) == (
        "nothing to compact",
        0,
        None,
    )
    assert retry._hook is None
    assert _version(uri, s3) == 13


@pytest.mark.slow
def test_a_spark_that_cannot_start_fails_with_spark_submits_exit_code(tmp_path: Path) -> None:
    uri = _table(tmp_path / "t", files=3)
    op = OptimizeOperator(task_id="o", table_uri=uri, driver_memory="1k", conf=FAST_JVM_CONF)
    with pytest.raises(DeltaLiteJobFailed) as err:
        op.execute({})
    message = str(err.value)
    assert message.startswith(f"table {uri}: optimize job failed: spark-submit exited with code 1; last output: ")
    assert "\n" not in message
    assert _version(uri) == 3


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _driver_started(pgid: int) -> bool:
    # the Python driver the JVM launched (spark-submit's own command line names the job file too)
    pattern = r"bin/python[0-9.]* \S*jobs/driver\.py"
    out = subprocess.run(["pgrep", "-g", str(pgid), "-f", pattern], capture_output=True, text=True, check=False)
    return bool(out.stdout.split())


@pytest.mark.slow
def test_on_kill_stops_the_whole_spark_application_and_commits_nothing(tmp_path: Path) -> None:
    uri = _table(tmp_path / "t", files=6)
    op = OptimizeOperator(task_id="o", table_uri=uri, conf=FAST_JVM_CONF)
    outcome: dict[str, BaseException] = {}

    def run() -> None:
        try:
            op.execute({})
        except BaseException as exc:  # the task's failure, as the task runner would see it
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 120
    while not (op._hook is not None and op._hook._submit_sp is not None and _driver_started(op._hook._submit_sp.pid)):
        assert time.monotonic() < deadline and thread.is_alive(), "the Python driver never started"
        time.sleep(0.1)
    pgid = op._hook._submit_sp.pid
    op.on_kill()
    thread.join(60)
    assert not thread.is_alive()
    assert isinstance(outcome["error"], DeltaLiteJobFailed)
    assert not _group_alive(pgid)  # spark-submit, the JVM and the Python driver are all gone
    assert op._scratch is None
    assert _version(uri) == 6


# -- the engine zip the operators ship -----------------------------------------------------------------------------

_BUILD = (
    "import sys; from airflow_provider_deltalite.executors.engine_zip import build_package_zip; "
    "print(build_package_zip(sys.argv[1] if len(sys.argv) > 1 else None))"
)


def test_two_tasks_building_the_engine_zip_at_once_get_one_valid_file(tmp_path: Path) -> None:
    import zipfile

    runs = [
        subprocess.Popen([sys.executable, "-c", _BUILD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    paths = {proc.communicate(timeout=120)[0].strip() for proc in runs}
    assert all(proc.returncode == 0 for proc in runs)
    [path] = paths
    assert [p.name for p in tmp_path.iterdir()] == [Path(path).name]  # no temporary leftovers
    with zipfile.ZipFile(path) as archive:
        assert archive.testzip() is None
        assert "airflow_provider_deltalite/jobs/driver.py" in archive.namelist()


def test_a_shared_default_zip_directory_someone_else_can_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / f"deltalite-{os.getuid()}"
    shared.mkdir()
    shared.chmod(0o777)
    out = subprocess.run(
        [sys.executable, "-c", _BUILD],
        env={**os.environ, "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == (
        f"PermissionError: {shared} is not a private directory of this user (owner uid {os.getuid()}, mode 777); "
        "remove it or pass another directory for the engine zip"
    )
    assert list(shared.iterdir()) == []
