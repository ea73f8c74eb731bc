"""SparkExecutor on local[2] and on a standalone cluster, the engine zip, and the spark-submit job's entry point.

The functions run on Spark workers are defined here and pickled by value: the workers cannot import the `tests`
package, and the engine they call must come from the zip the executor ships.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
from pyspark import cloudpickle

import airflow_provider_deltalite
from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine import ExecutorError, LogGap, TableNotFound, VersionNotFound
from airflow_provider_deltalite.executors import LocalExecutor
from airflow_provider_deltalite.executors.engine_zip import build_package_zip
from airflow_provider_deltalite.executors.spark import SparkExecutor
from airflow_provider_deltalite.executors.spark_errors import error_from_record, error_record, worker_exception
from airflow_provider_deltalite.jobs import driver
from airflow_provider_deltalite.maintenance.options import OptimizeOptions, VacuumOptions, ZOrderOptions
from tests.executors.spark_cluster import FAST_JVM_CONF, free_port, spark_submit
from tests.helpers import CORPUS, copy_table
from tests.maintenance.test_zorder import _flows, _rows

cloudpickle.register_pickle_by_value(sys.modules[__name__])

pytestmark = pytest.mark.spark  # most tests start a JVM themselves (SparkExecutor.start, the spark-submit job)

REPO = Path(__file__).resolve().parents[2]

# (version, live files, bytes) of the latest snapshot, as the corpus index lists them.
TABLES = {
    "delta-kernel-defaults/basic-with-checkpoint": (14, 30, 15084),
    "delta-golden/125-iterator-bug": (11, 12, 4286),
    "delta-rs/simple_table": (4, 5, 1811),
    "kernel-rs-data/v2-checkpoints-json-with-sidecars": (6, 101, 54541),
}
SIMPLE_TABLE = str(CORPUS / "delta-rs/simple_table")
SECRET_KEY = "AKIADELTALITE0SECRET"
SECRET_VALUE = "deltalite-secret-value-42"


# -- functions that run on Spark workers ---------------------------------------------------------------------------


def snapshot_summary(uri: str) -> tuple[str, int, int, int]:
    snap = DeltaTable(uri).snapshot()
    return uri, snap.version, snap.num_files, snap.size_in_bytes


def snapshot_at(item: tuple[str, int]) -> int:
    uri, version = item
    return DeltaTable(uri).snapshot(version=version).version


def task_of(_: object) -> int:
    from pyspark import TaskContext

    return TaskContext.get().taskAttemptId()


def echo(x: int) -> int:
    return x


def engine_location(_: int) -> str:
    import airflow_provider_deltalite

    return airflow_provider_deltalite.__file__


def fail_plainly(x: int) -> int:
    if x == 3:
        raise ValueError(f"bad item {x}\nsecond line")
    return x


def late_unless_zero(taken: str, x: int) -> int:
    """Item 0 returns at once; any other item only once the file ``taken`` exists (the caller has item 0's result),
    or after 120 s."""
    deadline = time.monotonic() + 120
    while x != 0 and not os.path.exists(taken) and time.monotonic() < deadline:
        time.sleep(0.01)
    return x


def hang_unless_zero(x: int) -> int:
    time.sleep(0 if x == 0 else 120)
    return x


def _uris() -> list[str]:
    return [str(CORPUS / rel) for rel in TABLES]


def _expected() -> list[tuple[str, int, int, int]]:
    return sorted((str(CORPUS / rel), *values) for rel, values in TABLES.items())


# -- local[2] ------------------------------------------------------------------------------------------------------


def test_results_match_the_driver_and_the_local_executor(spark_local: SparkExecutor) -> None:
    expected = _expected()
    assert sorted(snapshot_summary(uri) for uri in _uris()) == expected
    assert sorted(LocalExecutor(2).map(snapshot_summary, _uris())) == expected
    assert sorted(spark_local.map(snapshot_summary, _uris())) == expected


def test_one_task_per_item_and_parallelism(spark_local: SparkExecutor) -> None:
    assert spark_local.name == "spark"
    assert spark_local.parallelism == 2
    assert len(set(spark_local.map(task_of, list("abcde")))) == 5
    assert list(spark_local.map(task_of, [])) == []


def test_results_come_back_as_tasks_finish(spark_local: SparkExecutor, tmp_path: Path) -> None:
    # Both items run at once on local[2]; item 1 is listed first but cannot finish before the caller has taken item
    # 0's result, however late a loaded machine starts item 0's task (a fixed 1.5 s head start was not always enough).
    taken = tmp_path / "zero-taken"
    results = []
    for result in spark_local.map(functools.partial(late_unless_zero, str(taken)), [1, 0]):
        results.append(result)
        taken.touch()
    assert results == [0, 1]


def test_stopping_early_cancels_the_running_jobs(spark_local: SparkExecutor) -> None:
    started = time.monotonic()
    # Two items on two cores: both jobs run at once (jobs submitted together may start in any order).
    results = spark_local.map(hang_unless_zero, [0, 1])
    assert next(results) == 0
    results.close()
    assert time.monotonic() - started < 30  # the hanging task (120 s) was cancelled, not awaited
    assert list(spark_local.spark.sparkContext.statusTracker().getActiveJobsIds()) == []
    assert sorted(spark_local.map(echo, [0, 1])) == [0, 1]  # the executor is still usable


def test_engine_error_in_a_worker_comes_back_typed(spark_local: SparkExecutor, tmp_path: Path) -> None:
    with pytest.raises(VersionNotFound) as on_driver:
        snapshot_at((SIMPLE_TABLE, 999))
    with pytest.raises(VersionNotFound) as from_worker:
        list(spark_local.map(snapshot_at, [(SIMPLE_TABLE, 4), (SIMPLE_TABLE, 999)]))
    assert type(from_worker.value) is VersionNotFound
    assert str(from_worker.value) == str(on_driver.value)
    assert str(from_worker.value) == f"table {SIMPLE_TABLE}: version 999 does not exist (latest is 4)"
    assert (from_worker.value.latest, from_worker.value.earliest) == (4, None)
    assert from_worker.value.table_uri == SIMPLE_TABLE

    missing = str(tmp_path / "missing")
    with pytest.raises(TableNotFound) as on_driver_missing:
        snapshot_summary(missing)
    with pytest.raises(TableNotFound) as from_worker_missing:
        list(spark_local.map(snapshot_summary, [missing]))
    assert type(from_worker_missing.value) is TableNotFound
    assert str(from_worker_missing.value) == str(on_driver_missing.value)


def test_other_worker_errors_become_one_line_executor_errors(spark_local: SparkExecutor) -> None:
    with pytest.raises(ExecutorError) as info:
        list(spark_local.map(fail_plainly, [1, 2, 3]))
    assert str(info.value) == "Spark task fail_plainly failed on local[2]: ValueError: bad item 3 second line"


def test_worker_exception_text_parsing() -> None:
    text = (
        "Job aborted due to stage failure: Task 0 failed 4 times: org.apache.spark.api.python.PythonException: "
        "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n    raise KeyError('a')\n"
        "KeyError: 'a'\n\nDuring handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\n  File \"x.py\", line 3, in f\n    raise OSError('disk')\n"
        "OSError: disk\nfull\n SQLSTATE: 38000\n\tat org.apache.spark.api.python.BasePythonRunner.read(x.scala:1)\n"
    )
    assert worker_exception(text) == "OSError: disk full"
    assert worker_exception("Job aborted due to stage failure: ExecutorLostFailure (executor 1 exited)") is None


def test_error_records_carry_the_error_and_a_class_that_cannot_be_rebuilt_becomes_an_executor_error() -> None:
    original = LogGap("the commits after version 3 were removed", "/t", since=3, oldest_available=10)
    status, payload = error_record(original)
    rebuilt = error_from_record(status, json.loads(json.dumps(payload)))
    assert (type(rebuilt), str(rebuilt), vars(rebuilt)) == (LogGap, str(original), vars(original))
    foreign = {**payload, "error": "builtins.OSError", "message": "disk full"}
    unknown = error_from_record(status, foreign)
    assert (type(unknown), str(unknown)) == (ExecutorError, "Spark task failed: builtins.OSError: disk full")


def engine_already_loaded(_: int) -> bool:
    return "airflow_provider_deltalite.maintenance.clustering.runs" in sys.modules


def test_warm_up_loads_the_engine_in_the_workers(spark_local: SparkExecutor) -> None:
    assert spark_local.warmed_workers  # `start` warmed the workers (tests that kill workers may have replaced them)
    spark_local.warm_up()
    # nothing in these tasks imports the clustering module: only the warm-up can have loaded it
    assert list(spark_local.map(engine_already_loaded, [0, 1])) == [True, True]


def test_engine_zip_is_shipped_once_per_context(spark_local: SparkExecutor) -> None:
    list(spark_local.map(echo, [0]))
    list(spark_local.map(echo, [0]))
    name = Path(build_package_zip()).name
    shipped = [f for f in spark_local.spark.sparkContext.listFiles if f.endswith("/" + name)]
    assert len(shipped) == 1


def test_wrapped_session_survives_close(spark_local: SparkExecutor) -> None:
    wrapper = SparkExecutor(spark_local.spark)
    assert sorted(wrapper.map(echo, [0, 1])) == [0, 1]
    wrapper.close()
    with pytest.raises(ExecutorError, match=r"^the Spark executor for local\[2\] is closed or its context stopped$"):
        list(wrapper.map(echo, [0]))
    assert sorted(spark_local.map(echo, [0, 1])) == [0, 1]


def test_start_refuses_a_second_context(spark_local: SparkExecutor) -> None:
    with pytest.raises(ExecutorError) as info:
        SparkExecutor.start("local[1]")
    assert str(info.value) == (
        "a SparkContext (master local[2]) is already running in this process; "
        "wrap its session with SparkExecutor(spark) or stop it first"
    )


def test_unreachable_master_fails_fast() -> None:
    port = free_port()  # bound and released: nothing listens there
    master = f"spark://127.0.0.1:{port}"
    started = time.monotonic()
    with pytest.raises(ExecutorError) as info:
        SparkExecutor.start(master)
    assert time.monotonic() - started < 5
    assert str(info.value) == f"cannot reach Spark master {master} (127.0.0.1:{port}: Connection refused)"


# -- the engine zip ------------------------------------------------------------------------------------------------


def test_engine_zip_holds_the_sources_only_and_is_deterministic(tmp_path: Path) -> None:
    first = Path(build_package_zip(str(tmp_path / "a")))
    second = Path(build_package_zip(str(tmp_path / "b")))
    assert first.name == second.name
    assert first.read_bytes() == second.read_bytes()
    assert build_package_zip(str(tmp_path / "a")) == str(first)  # cached per process and directory

    package_dir = Path(airflow_provider_deltalite.__file__).parent
    sources = sorted(
        f"airflow_provider_deltalite/{p.relative_to(package_dir).as_posix()}"
        for p in package_dir.rglob("*.py")
        if "__pycache__" not in p.parts and not any(part.startswith(".") for part in p.parts)
    )
    with zipfile.ZipFile(first) as archive:
        names = archive.namelist()
        assert {info.date_time for info in archive.infolist()} == {(1980, 1, 1, 0, 0, 0)}
    assert [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".pyo"))] == []
    assert sorted(n for n in names if n.endswith(".py")) == sources


def test_engine_zip_is_importable_on_its_own(tmp_path: Path) -> None:
    zip_path = build_package_zip(str(tmp_path))
    site_packages = sysconfig.get_paths()["purelib"]
    # -I -S: no PYTHONPATH, no cwd, no .pth files (the editable install's finder lives in one), so only the zip
    # and the third-party packages can provide imports.
    code = (
        "import sys; sys.path[:0] = sys.argv[1:3];"
        "import airflow_provider_deltalite.engine as engine, airflow_provider_deltalite.executors.spark;"
        "print(engine.__file__); print([p for p in sys.path if p in ('', '.', sys.argv[3])])"
    )
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, zip_path, site_packages, str(REPO)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"{zip_path}/airflow_provider_deltalite/engine/__init__.py", "[]"]


# -- the standalone cluster ----------------------------------------------------------------------------------------


def cluster_report(master: str, uris: list[str]) -> dict[str, Any]:
    """Run in a separate driver process (one SparkContext per process; the session's local[2] one is busy)."""
    report: dict[str, Any] = {}
    started = time.monotonic()
    try:  # no worker has 2 GiB, so no executor can ever register
        SparkExecutor.start(master, conf={**FAST_JVM_CONF, "spark.executor.memory": "2g"}, executor_timeout=3)
    except ExecutorError as exc:
        report["no_executor"] = [str(exc), time.monotonic() - started]
    started = time.monotonic()
    executor = SparkExecutor.start(master, app_name="deltalite-cluster-test", conf=FAST_JVM_CONF)
    report["start_seconds"] = time.monotonic() - started
    try:
        report["parallelism"] = executor.parallelism
        started = time.monotonic()
        report["summaries"] = sorted(executor.map(snapshot_summary, uris))
        report["map_seconds"] = time.monotonic() - started
        report["engine"] = sorted(executor.map(engine_location, [0, 1, 2, 3]))
        report["zip"] = Path(build_package_zip()).name
        try:
            list(executor.map(snapshot_at, [(SIMPLE_TABLE, 999)]))
        except VersionNotFound as exc:
            report["typed"] = [type(exc).__name__, str(exc), exc.latest]
        try:
            list(executor.map(fail_plainly, [3]))
        except ExecutorError as exc:
            report["plain"] = str(exc)
    finally:
        executor.close()
    return report


@pytest.mark.slow
def test_standalone_cluster_gives_the_same_results(spark_cluster: str) -> None:
    code = (
        "import json, sys; from tests.executors.test_spark import cluster_report;"
        "print('REPORT ' + json.dumps(cluster_report(sys.argv[1], sys.argv[2:])))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, spark_cluster, *_uris()],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    reports = [line[len("REPORT ") :] for line in proc.stdout.splitlines() if line.startswith("REPORT ")]
    assert proc.returncode == 0 and len(reports) == 1, proc.stderr[-5000:]
    report = json.loads(reports[0])
    print(f"cluster driver: start {report['start_seconds']:.1f}s, first map {report['map_seconds']:.1f}s")

    message, seconds = report["no_executor"]
    assert message == (
        f"no Spark executor registered with master {spark_cluster} within 3s "
        "(are workers running with a free core and 2g of free memory?)"
    )
    assert seconds < 60  # JVM start plus the 3 s wait; without the bound, start() would wait for ever
    assert report["parallelism"] == 2
    assert [tuple(row) for row in report["summaries"]] == _expected()
    # Every task imported the engine from the shipped zip (in its executor's working directory), not the repository.
    assert {Path(p).parent.parent.name for p in report["engine"]} == {report["zip"]}
    assert all(not p.startswith(str(REPO)) for p in report["engine"])
    assert report["typed"] == [
        "VersionNotFound",
        f"table {SIMPLE_TABLE}: version 999 does not exist (latest is 4)",
        4,
    ]
    assert report["plain"] == f"Spark task fail_plainly failed on {spark_cluster}: ValueError: bad item 3 second line"


@pytest.mark.slow
def test_spark_submit_zorder_on_a_standalone_cluster(spark_cluster: str, tmp_path: Path) -> None:
    # the spark-submit job on the cluster's executors: the Z-order shuffle exchanges rows between two executor JVMs
    path = _flows(tmp_path / "t", files=6, rows=2000, partitioned=True)
    before = _rows(path)
    result = tmp_path / "result.json"
    out = spark_submit(
        spark_cluster,
        ["zorder", "--table", str(path), "--columns", "sourceIP,destIP", "--curve", "hilbert", "--result", str(result)],
        {},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    stats = json.loads(result.read_text())
    assert (stats["executor"], stats["totalClusterParallelism"]) == ("spark", 2)
    assert (stats["readVersion"], stats["committedVersion"], stats["numFilesRemoved"], stats["numFilesAdded"]) == (
        5,
        6,
        12,
        2,
    )
    assert stats["zOrderStats"]["numOutputCubes"] == 2
    assert _rows(path) == before


# -- the spark-submit job ------------------------------------------------------------------------------------------


def _missing_table_message(path: Path) -> str:
    with pytest.raises(TableNotFound) as info:
        DeltaTable(str(path)).latest_version()
    return str(info.value)


def test_job_on_a_missing_table_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing"
    result = tmp_path / "out" / "stats.json"
    code = driver.main(["optimize", "--table", str(missing), "--result", str(result)])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == f"deltalite: error: {_missing_table_message(missing)}\n"
    assert not result.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "the following arguments are required: --table"),
        (["--table", "/t", "--target-size", "big"], "argument --target-size: not a whole number of bytes: 'big'"),
        (
            ["--table", "/t", "--max-deleted-rows-ratio", "2"],
            "argument --max-deleted-rows-ratio: must be between 0 and 1: 2.0",
        ),
    ],
)
def test_job_bad_arguments_exit_2_with_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert driver.main(["optimize", *args]) == 2
    assert capsys.readouterr() == ("", f"deltalite: error: {message}\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--options", '{"target_size": 5'],
            "table {table}: optimize options are not valid JSON: Expecting ',' delimiter: line 1 column 18 (char 17)",
        ),
        (["--options", "[1]"], "table {table}: optimize options must be a JSON object"),
        (["--options", '{"retention_hours": 1}'], "table {table}: unknown optimize option 'retention_hours'"),
        (
            ["--options", '{"target_size": "5 GB"}'],
            "table {table}: target_size must be a positive number of bytes, got '5 GB'",
        ),
        (
            ["--options", '{"dry_run": true}', "--target-size", "5", "--dry-run"],
            "--options and option flags (--dry-run, --target-size) together: give the options one way",
        ),
    ],
    ids=["bad-json", "not-an-object", "unknown-option", "bad-value", "options-and-flags"],
)
def test_job_bad_options_document_exits_2_with_one_line_before_opening_the_table(
    tmp_path: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing"  # a missing table would fail later: the options are checked first
    result = tmp_path / "out" / "stats.json"
    assert driver.main(["optimize", "--table", str(missing), "--result", str(result), *args]) == 2
    assert capsys.readouterr() == ("", f"deltalite: error: {message.format(table=missing)}\n")
    assert not result.parent.exists()


def test_job_options_document_and_flags_build_the_same_options() -> None:
    def options(command: str, *arguments: str) -> Any:
        args = driver.build_parser().parse_args([command, "--table", "/t", *arguments])
        return driver.job_options(args, ["--table", "/t", *arguments])

    expected = OptimizeOptions(target_size=5, dry_run=True, where="date = '2026-11-20'")
    assert options("optimize", "--options", expected.to_json()) == expected
    assert options("optimize", "--target-size", "5", "--dry-run", "--where", "date = '2026-11-20'") == expected
    vacuum = VacuumOptions(retention_hours=0.5, mode="lite", enforce_retention_duration=False)
    assert options("vacuum", "--options", vacuum.to_json()) == vacuum
    # a flag at its default value is still a flag: the two ways are never mixed
    assert driver.given_flags("vacuum", ["--table", "/t", "--mode", "full"]) == ["mode"]
    assert driver.given_flags("vacuum", ["--table", "/t", "--options", "{}"]) == []


def test_job_runs_with_an_options_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a dry run of a missing table: the document was accepted, the table is what fails (no JVM starts)
    missing = tmp_path / "missing"
    options = ZOrderOptions(columns=("a", "b,c"), curve="hilbert", dry_run=True).to_json()
    assert driver.main(["zorder", "--table", str(missing), "--options", options]) == 2
    assert capsys.readouterr() == ("", f"deltalite: error: {_missing_table_message(missing)}\n")


def test_job_never_prints_credentials(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "missing"
    bad_json = tmp_path / "bad.json"
    bad_json.write_text(f'{{"key": "{SECRET_KEY}", "secret": {SECRET_VALUE}}}')
    assert driver.main(["optimize", "--table", str(missing), "--storage-options-file", str(bad_json)]) == 2
    first = capsys.readouterr()
    assert first == ("", f"deltalite: error: storage options file {bad_json} is not valid JSON (line 1, column 43)\n")

    monkeypatch.setenv("DELTALITE_STORAGE_OPTIONS", json.dumps([{"key": SECRET_KEY, "secret": SECRET_VALUE}]))
    assert driver.main(["optimize", "--table", str(missing)]) == 2
    second = capsys.readouterr()
    assert second == ("", "deltalite: error: $DELTALITE_STORAGE_OPTIONS must hold a JSON object, not list\n")

    # Valid options holding credentials reach the storage layer, and the table error that follows names neither.
    monkeypatch.setenv("DELTALITE_STORAGE_OPTIONS", json.dumps({"key": SECRET_KEY}))
    good = tmp_path / "options.json"
    good.write_text(json.dumps({"secret": SECRET_VALUE}))
    assert driver.main(["optimize", "--table", str(missing), "--storage-options-file", str(good)]) == 2
    third = capsys.readouterr()
    assert third == ("", f"deltalite: error: {_missing_table_message(missing)}\n")
    for captured in (first, second, third):
        assert SECRET_KEY not in captured.out + captured.err
        assert SECRET_VALUE not in captured.out + captured.err


def test_storage_options_file_wins_over_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "options.json"
    path.write_text(json.dumps({"key": "from-file", "endpoint_url": "http://127.0.0.1:1"}))
    env = {"DELTALITE_STORAGE_OPTIONS": json.dumps({"key": "from-env", "secret": "s"})}
    assert driver.load_storage_options(str(path), env) == {
        "key": "from-file",
        "secret": "s",
        "endpoint_url": "http://127.0.0.1:1",
    }
    assert driver.load_storage_options(None, {}) == {}


@pytest.mark.parametrize("how", ["file", "module"])
def test_job_runs_as_a_file_and_as_a_module(how: str, tmp_path: Path) -> None:
    # spark-submit runs the application as a file: sys.path[0] is then the jobs directory, not the package's parent.
    missing = tmp_path / "missing"
    target = [str(Path(driver.__file__))] if how == "file" else ["-m", "airflow_provider_deltalite.jobs.driver"]
    proc = subprocess.run(
        [sys.executable, *target, "optimize", "--table", str(missing)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"deltalite: error: {_missing_table_message(missing)}\n"


def test_job_optimizes_a_table_and_writes_the_result(
    spark_local: SparkExecutor, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = copy_table("delta-kernel-defaults/basic-with-checkpoint", tmp_path / "table")
    result = tmp_path / "results" / "optimize.json"
    code = driver.main(["optimize", "--table", str(table), "--result", str(result)])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("DELTALITE_RESULT ")
    printed = json.loads(lines[0][len("DELTALITE_RESULT ") :])
    assert json.loads(result.read_text()) == printed
    assert result.read_text() == lines[0][len("DELTALITE_RESULT ") :]
    assert {
        key: printed[key]
        for key in ("numFilesAdded", "numFilesRemoved", "readVersion", "committedVersion", "executor", "numBins")
    } == {
        "numFilesAdded": 1,
        "numFilesRemoved": 30,
        "readVersion": 14,
        "committedVersion": 15,
        "executor": "spark",
        "numBins": 1,
    }
    assert printed["totalClusterParallelism"] == 2
    assert printed["filesRemoved"]["totalSize"] == 15084
    snap = DeltaTable(str(table)).snapshot()
    assert (snap.version, snap.num_files) == (15, 1)
    assert spark_local.spark.sparkContext._jsc is not None  # the job reused the session and left it running
