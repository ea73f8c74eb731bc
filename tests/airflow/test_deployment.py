"""The example DAGs in a real deployment: api-server, scheduler, dag-processor and triggerer (LocalExecutor) on a
throw-away Airflow home, all on 127.0.0.1, each started here and stopped by its PID.

Nothing runs in-process: the scheduler hands tasks to the LocalExecutor's workers, which run them under the Task SDK
supervisor and talk to the metadata database only through the api-server's execution API; deferred sensors wait in
the triggerer. DAG runs are started with the CLI; task states, XComs and trigger rows are read from the database,
tables with delta-rs.

- Unpaused with their placeholder tables, the nightly, retention and sensor examples each get a scheduled run that
  ends at once, every task skipped, with one log line naming the missing table.
- The nightly DAG compacts 24 small files into 2 (spark-submit on local Spark), Z-orders and vacuums them; every
  XCom agrees with the log and delta-rs reads the same rows.
- The retention DAG takes its vacuum branch (two spark-submits on local Spark) and deletes exactly the 8 expired files.
- A nightly run whose optimize gets a ``where`` on a data column fails in the worker, before any JVM, with the
  engine's one line in the task log; the later tasks are upstream_failed and nothing is committed.
- The sensor DAG defers to the triggerer, stays deferred through an OPTIMIZE and a VACUUM, and fires within seconds
  of an append; its XCom is the exact payload. (Whether the trigger blocks the triggerer's event loop is measured in
  `test_trigger_event_loop.py`: here the triggerer's own database work on sqlite, on a loaded machine, already
  makes it log "async thread was blocked" with no trigger running at all.)
"""

from __future__ import annotations

import collections
import json
import shutil
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import deltalake
import pyarrow as pa
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.demo import FAST_JVM_CONF, create_small_file_table
from tests.airflow.airflow_stack import AirflowStack
from tests.airflow.conftest import EXAMPLE_DAGS, AirflowHome, migrated_home
from tests.airflow.delta_history import append, expected_payload, optimize
from tests.executors.spark_cluster import free_port

pytestmark = pytest.mark.slow

NIGHTLY, SENSOR, LAKE = "deltalite_nightly_compaction", "deltalite_new_commits_trigger", "deltalite_maintain_lake"
RETENTION = "deltalite_retention_enforcement"
PLACEHOLDER = "/tmp/deltalite-example/events"
LAKE_PLACEHOLDER = "/tmp/deltalite-example"
POLL_SECONDS = 1
NIGHTLY_CONF = {
    "min_small_files": 2,
    "retention_hours": 0,
    "enforce_retention_duration": False,
    "spark_conf": FAST_JVM_CONF,
}
RETENTION_CONF = {
    "retention_hours": 0,
    "enforce_retention_duration": False,
    "min_files_to_delete": 1,
    "spark_conf": FAST_JVM_CONF,
}


def _data_files(table: Path) -> set[str]:
    return {str(p.relative_to(table)) for p in table.rglob("*.parquet") if "_delta_log" not in p.parts}


def _live_files(table: Path) -> set[str]:
    """delta-rs' live files, relative to the table."""
    uris = deltalake.DeltaTable(str(table)).file_uris()
    return {str(Path(unquote(u.removeprefix("file://"))).relative_to(table)) for u in uris}


def _rows(path: Path) -> collections.Counter:
    return collections.Counter(map(repr, pa.table(deltalake.DeltaTable(str(path)).to_pyarrow_table()).to_pylist()))


class Deployment:
    """The running components, the CLI, and what the metadata database and the task logs say."""

    def __init__(self, stack: AirflowStack, home: AirflowHome, missing: Path, root: Path) -> None:
        self.stack, self.home, self.missing = stack, home, missing
        self.nightly, self.lake = root / "nightly" / "events", root / "lake"
        self.retention, self.failing = root / "retention" / "events", root / "failing" / "events"
        self.nightly_rows = _rows(self.nightly)
        self.lake_rows = {name: _rows(self.lake / name) for name in ("orders", "visits")}
        self.expired = _data_files(self.retention) - _live_files(self.retention)  # the 8 files OPTIMIZE replaced

    def cli(self, *args: str) -> str:
        out = self.home.run(*args, timeout=120)
        assert out.returncode == 0, f"airflow {' '.join(args)}:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
        return out.stdout

    def trigger(self, dag_id: str, run_id: str, conf: dict[str, Any]) -> None:
        self.cli("dags", "trigger", dag_id, "--run-id", run_id, "--conf", json.dumps(conf))

    def states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        rows = self.stack.query(
            f"SELECT task_id, state FROM task_instance WHERE dag_id = '{dag_id}' AND run_id = '{run_id}'"
        )
        return dict(rows)

    def run_state(self, dag_id: str, run_id: str) -> str | None:
        rows = self.stack.query(f"SELECT state FROM dag_run WHERE dag_id = '{dag_id}' AND run_id = '{run_id}'")
        return rows[0][0] if rows else None

    def wait_run(self, dag_id: str, run_id: str, timeout: float = 600, *, may_fail: bool = False) -> str:
        deadline = time.monotonic() + timeout
        while (state := self.run_state(dag_id, run_id)) not in ("success", "failed"):
            self.stack.check_running()
            if time.monotonic() > deadline:
                pytest.fail(f"{dag_id} {run_id} still {state} after {timeout} s: {self.states(dag_id, run_id)}")
            time.sleep(0.5)
        if state == "failed" and not may_fail:  # say which task failed, and how
            states = self.states(dag_id, run_id)
            failed = [t for t, st in states.items() if st == "failed"]
            logs = {t: self.task_logs(dag_id, run_id, t)[-3000:] for t in failed}
            pytest.fail(f"{dag_id} {run_id} failed: {states}\n{logs}")
        return state

    def wait_task(self, dag_id: str, run_id: str, task_id: str, state: str, timeout: float = 600) -> float:
        """Poll until the task is in ``state``; the monotonic time it was first seen so.

        The timeout is for a hang only: the deployment's four executor slots can all be held for minutes by the
        spark-submits of the runs the fixture triggered, and a task waits in the queue meanwhile."""
        deadline = time.monotonic() + timeout
        while (got := self.states(dag_id, run_id).get(task_id)) != state:
            self.stack.check_running()
            if got in ("failed", "upstream_failed") or time.monotonic() > deadline:
                pytest.fail(f"{dag_id} {run_id}: {task_id} is {got}, waited for {state}: {self.states(dag_id, run_id)}")
            time.sleep(0.2)
        return time.monotonic()

    def wait_deferred(self, dag_id: str, run_id: str, task_id: str, timeout: float = 600) -> None:
        """Poll until the task is deferred, its trigger runs in the triggerer, and the scheduler has taken in the
        executor's event for the task process that deferred.

        Until that event is taken in, a trigger that fires at once meets an Airflow race (apache/airflow#72716, open
        in 3.3): the resumed task is running when the stale event arrives, and the scheduler marks it failed. The
        example's sensors retry once for users; the test waits, so that it checks the sensor, not that race."""
        self.wait_task(dag_id, run_id, task_id, "deferred", timeout)
        deadline = time.monotonic() + timeout
        sql = (
            "SELECT count(*) FROM trigger JOIN task_instance ON task_instance.trigger_id = trigger.id WHERE "
            f"dag_id = '{dag_id}' AND run_id = '{run_id}' AND task_id = '{task_id}' AND triggerer_id IS NOT NULL"
        )
        event = f"Received executor event with state success for task instance TaskInstanceKey(dag_id='{dag_id}', "
        event += f"task_id='{task_id}', run_id='{run_id}'"
        while self.stack.query(sql) != [(1,)] or event not in self.stack.log("scheduler"):
            self.stack.check_running()
            assert time.monotonic() < deadline, (self.stack.query("SELECT * FROM trigger"), self.states(dag_id, run_id))
            time.sleep(0.2)

    def xcoms(self, dag_id: str, run_id: str) -> dict[str, Any]:
        rows = self.stack.query(
            "SELECT task_id, value FROM xcom WHERE key = 'return_value' "
            f"AND dag_id = '{dag_id}' AND run_id = '{run_id}'"
        )
        # a JSON column: sqlite hands numbers back as numbers, everything else as text
        return {task_id: json.loads(value) if isinstance(value, str | bytes) else value for task_id, value in rows}

    def task_logs(self, dag_id: str, run_id: str, task_id: str) -> str:
        """Every attempt's log of a task, one after the other."""
        folder = self.home.path / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"
        return "\n".join(path.read_text() for path in sorted(folder.glob("*")))

    def task_log(self, dag_id: str, run_id: str, task_id: str) -> str:
        (path,) = (self.home.path / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}").glob("*")
        return path.read_text()


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("deployment")
    home = migrated_home(root / "home")
    # The examples as they are, but for their placeholder table, which is this test's own missing path: the machine's
    # /tmp/deltalite-example/events may hold somebody's table, and the unpaused examples would maintain it.
    dags = root / "dags"
    dags.mkdir()
    missing = root / "deltalite-example" / "events"
    for name in ("nightly_compaction.py", "new_commits_trigger.py", "retention_enforcement.py"):
        text = (EXAMPLE_DAGS / name).read_text()
        assert text.count(PLACEHOLDER) == 1, name
        (dags / name).write_text(text.replace(PLACEHOLDER, str(missing)))
    text = (EXAMPLE_DAGS / "maintain_lake.py").read_text()
    assert text.count(LAKE_PLACEHOLDER) == 1
    (dags / "maintain_lake.py").write_text(text.replace(LAKE_PLACEHOLDER, str(missing.parent)))
    create_small_file_table(str(root / "nightly" / "events"), files=24, rows_per_file=50)
    # 8 files waiting for VACUUM: an in-process OPTIMIZE replaced them by 2
    create_small_file_table(str(root / "retention" / "events"), files=8, rows_per_file=50)
    assert DeltaTable(str(root / "retention" / "events")).optimize().num_files_added == 2
    create_small_file_table(str(root / "failing" / "events"), files=4, rows_per_file=20)
    for name in ("orders", "visits"):
        create_small_file_table(str(root / "lake" / name), files=12, rows_per_file=20)
    port = free_port()
    env = {
        **home.env,
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        # one secret for the api-server that checks the workers' tokens and the scheduler that issues them
        "AIRFLOW__API_AUTH__JWT_SECRET": "deltalite-deployment-test-secret",
        # the DAG files are parsed once, when the dag-processor starts: they do not change during the test, and each
        # parse of four DAG files costs a process and seconds of CPU that the rest of the suite wants
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "3600",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "3600",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
        "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1",
        # a task process waits this long for each execution-API answer (default 5 s): on two cores shared with the
        # rest of the suite, the api-server can take longer while a dozen task processes start at once, and the
        # supervisor then kills the task before it ran ("httpx.ReadTimeout" in the scheduler's log)
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
        "DELTALITE_EXAMPLE_POLL_SECONDS": str(POLL_SECONDS),
    }
    home = AirflowHome(home.path, env)
    (root / "logs").mkdir()
    stack = AirflowStack(home, env, root / "logs")
    try:
        # two workers: with one, a task's terminal-state call answered late under load lets the scheduler mark the
        # task failed although it succeeded (the executor's event arrives first: "finished with state success, but
        # the task instance's state attribute is running")
        stack.start("api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "2")
        for name in ("dag-processor", "scheduler", "triggerer"):
            stack.start(name)
        deadline = time.monotonic() + 120
        while True:  # the api-server answers, and the dag-processor has serialised both DAGs
            stack.check_running()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/monitor/health", timeout=2) as r:
                    healthy = r.status == 200
            except OSError:
                healthy = False
            parsed = {d for (d,) in stack.query("SELECT dag_id FROM serialized_dag")} if healthy else set()
            if {NIGHTLY, SENSOR, LAKE, RETENTION} <= parsed:
                break
            if time.monotonic() > deadline:
                pytest.fail(f"the deployment did not come up: api-server healthy {healthy}, DAGs parsed {parsed}")
            time.sleep(0.5)
        deployment = Deployment(stack, home, missing, root)
        # Unpaused as a user would, with the placeholder tables: each gets a scheduled run (the first test checks
        # them). The other runs start now, so that their spark-submits overlap the sensor test.
        # one CLI process for the four (each `airflow` process costs seconds of CPU importing Airflow)
        example_ids = "|".join((NIGHTLY, SENSOR, LAKE, RETENTION))
        unpaused = deployment.cli(
            "dags", "unpause", "--treat-dag-id-as-regex", "--yes", "-o", "plain", f"^({example_ids})$"
        )
        assert {NIGHTLY, SENSOR, LAKE, RETENTION} <= set(unpaused.split()), unpaused
        deployment.trigger(NIGHTLY, "nightly-1", NIGHTLY_CONF | {"table_uri": str(deployment.nightly)})
        deployment.trigger(LAKE, "lake-1", {"prefixes": [str(deployment.lake)]})
        deployment.trigger(RETENTION, "retention-1", RETENTION_CONF | {"table_uri": str(deployment.retention)})
        bad_where = {"table_uri": str(deployment.failing), "where": "amount > 3"}
        deployment.trigger(NIGHTLY, "nightly-bad-where", NIGHTLY_CONF | bad_where)
        yield deployment
    finally:
        stack.stop_all()
    shutil.rmtree(root / "home" / "logs", ignore_errors=True)


def _scheduled_runs(deployment: Deployment, dag_id: str) -> list[str]:
    """The DAG's scheduled runs, oldest first, once there is one. An hourly DAG unpaused a few minutes before the hour
    gets a second run at the hour while the deployment's other tests run: each run must skip the same way."""
    sql = f"SELECT run_id FROM dag_run WHERE dag_id = '{dag_id}' AND run_type = 'scheduled' ORDER BY logical_date"
    deadline = time.monotonic() + 120
    while not (runs := deployment.stack.query(sql)):
        deployment.stack.check_running()
        assert time.monotonic() < deadline, f"no scheduled run of {dag_id}"
        time.sleep(0.5)
    return [run_id for (run_id,) in runs]


def test_unpaused_examples_without_their_table_skip_their_scheduled_run_with_one_line(deployment: Deployment) -> None:
    missing = deployment.missing
    line = f"table {missing}: path does not exist; skipping this run (set the DAG param table_uri to a Delta table)"
    for dag_id in (NIGHTLY, SENSOR, RETENTION):
        for run_id in _scheduled_runs(deployment, dag_id):
            assert run_id.startswith("scheduled__")
            assert deployment.wait_run(dag_id, run_id) == "success"
            states = deployment.states(dag_id, run_id)
            assert set(states.values()) == {"skipped"}, states
            assert deployment.task_log(dag_id, run_id, "check_table").count(line) == 1
    # the lake DAG on its placeholder prefix: the plan finds no table and says so once; nothing else runs
    lake_line = f"no Delta table under {missing.parent}; skipping this run (set the DAG param prefixes)"
    for run_id in _scheduled_runs(deployment, LAKE):
        assert deployment.wait_run(LAKE, run_id) == "success"
        states = deployment.states(LAKE, run_id)
        assert set(states.values()) == {"skipped"}, states
        assert deployment.task_log(LAKE, run_id, "plan").count(lake_line) == 1
    assert not missing.exists()
    # no sensor waited for the missing table
    assert deployment.stack.query(
        f"SELECT count(*) FROM task_instance WHERE dag_id = '{SENSOR}' AND state = 'deferred'"
    ) == [(0,)]


def test_the_sensor_dag_waits_in_the_triggerer_and_fires_on_an_append_only(
    deployment: Deployment, tmp_path: Path
) -> None:
    table = tmp_path / "events"
    append(table, [1, 2])
    append(table, [3])  # version 1: the baseline check_table reads
    deployment.trigger(SENSOR, "sensor-1", {"table_uri": str(table)})
    # the triggerer runs it (its trigger row is assigned to the triggerer's job)
    deployment.wait_deferred(SENSOR, "sensor-1", "wait_for_new_data")

    assert optimize(table) == 2
    vacuum = DeltaTable(str(table)).vacuum(retention_hours=0, enforce_retention_duration=False)
    assert list(vacuum.committed_versions) == [3, 4]
    time.sleep(4 * POLL_SECONDS)  # four polls of the table: still waiting
    assert deployment.states(SENSOR, "sensor-1")["wait_for_new_data"] == "deferred"

    assert append(table, [4, 5, 6]) == 5
    appended = time.monotonic()
    fired = deployment.wait_task(SENSOR, "sensor-1", "wait_for_new_data", "success")
    print(f"the deferred sensor succeeded {fired - appended:.1f} s after the append (poll interval {POLL_SECONDS} s)")
    skipped = [
        {"version": 2, "kind": "rearrange"},
        {"version": 3, "kind": "maintenance"},
        {"version": 4, "kind": "maintenance"},
    ]
    deployment.wait_deferred(SENSOR, "sensor-1", "wait_for_more_data")
    xcoms = deployment.xcoms(SENSOR, "sensor-1")
    assert xcoms["check_table"] == 1
    assert xcoms["wait_for_new_data"] == expected_payload(table, 1, [5], skipped, 3)
    assert xcoms["process"] == 5

    assert append(table, [7]) == 6
    assert deployment.wait_run(SENSOR, "sensor-1") == "success"
    assert deployment.xcoms(SENSOR, "sensor-1")["wait_for_more_data"] == expected_payload(table, 5, [6], [], 1)


def test_the_nightly_dag_compacts_zorders_and_vacuums(deployment: Deployment) -> None:
    # triggered when the deployment came up (the fixture), with 24 small files
    table, before = deployment.nightly, deployment.nightly_rows
    assert deployment.wait_run(NIGHTLY, "nightly-1") == "success"
    assert deployment.states(NIGHTLY, "nightly-1") == dict.fromkeys(
        ("check_table", "optimize", "zorder", "vacuum", "summary"), "success"
    )
    xcoms = deployment.xcoms(NIGHTLY, "nightly-1")
    optimized, zordered, vacuumed = xcoms["optimize"], xcoms["zorder"], xcoms["vacuum"]
    assert xcoms["check_table"] == 24
    assert (optimized["numFilesRemoved"], optimized["numFilesAdded"], optimized["committedVersion"]) == (24, 2, 25)
    assert (optimized["executor"], optimized["skippedReason"]) == ("spark", None)
    assert (zordered["committedVersion"], zordered["zOrderStats"]["columns"]) == (26, ["user_id", "amount"])
    assert (vacuumed["committedVersions"], vacuumed["objectsDeleted"]) == ([27, 28], 26)
    assert xcoms["summary"] == (
        f"OPTIMIZE 24 -> 2 files (version 25); VACUUM deleted 26 files, {vacuumed['sizeOfDataToDelete']} bytes"
    )
    # delta-rs: the same rows, 2 live files, and nothing else left on storage
    assert _rows(table) == before
    live = deltalake.DeltaTable(str(table)).file_uris()
    on_disk = [p for p in table.rglob("*.parquet") if "_delta_log" not in p.parts]
    assert (len(live), len(on_disk)) == (2, 2)
    assert DeltaTable(str(table)).latest_version() == 28


def test_the_lake_dag_plans_once_and_maintains_each_chosen_table(deployment: Deployment) -> None:
    """Triggered through the CLI on a prefix of two tables of 12 small files in two partitions: the plan (in the
    worker, no JVM) chooses both, one mapped DeltaMaintenanceOperator per table compacts it on Spark, and delta-rs
    reads the same rows from one file per partition."""
    assert deployment.wait_run(LAKE, "lake-1", timeout=600) == "success"
    assert deployment.states(LAKE, "lake-1") == {
        "plan": "success",
        "chosen": "success",
        "maintain": "success",
        "summary": "success",
    }
    xcoms = deployment.xcoms(LAKE, "lake-1")
    uris = [str(deployment.lake / name) for name in ("orders", "visits")]
    assert sorted((t["tableUri"], t["chosen"]) for t in xcoms["plan"]["tables"]) == [(u, True) for u in uris]
    for name, uri in zip(("orders", "visits"), uris, strict=True):
        table = deltalake.DeltaTable(uri)
        assert _rows(deployment.lake / name) == deployment.lake_rows[name]
        assert len(table.file_uris()) == 2  # one file per partition (two dates)
        assert table.history(1)[0]["operation"] == "OPTIMIZE"
    assert sorted(xcoms["summary"]) == [f"{u}: chosen: optimize; files 12 -> 2" for u in uris]


def test_the_retention_dag_takes_its_vacuum_branch_and_deletes_exactly_the_expired_files(
    deployment: Deployment,
) -> None:
    table = deployment.retention
    assert deployment.wait_run(RETENTION, "retention-1") == "success"
    assert deployment.states(RETENTION, "retention-1") == {
        "check_table": "success",
        "vacuum_dry_run": "success",
        "decide": "success",
        "report_retained": "skipped",
        "vacuum": "success",
    }
    xcoms = deployment.xcoms(RETENTION, "retention-1")
    dry_run, vacuum = xcoms["vacuum_dry_run"], xcoms["vacuum"]
    # the dry run names exactly the files the OPTIMIZE replaced ("objectsDeleted": those that would be deleted)
    assert (dry_run["isDryRun"], dry_run["numFilesToDelete"], dry_run["objectsDeleted"]) == (True, 8, 8)
    assert {f["path"] for f in dry_run["filesToDelete"]} == deployment.expired
    assert len(deployment.expired) == 8
    assert (vacuum["isDryRun"], vacuum["numFilesToDelete"], vacuum["objectsDeleted"]) == (False, 8, 8)
    assert (vacuum["executor"], vacuum["skippedReason"], vacuum["committedVersions"]) == ("spark", None, [10, 11])
    # delta-rs: everything expired is gone, everything live is there
    assert _data_files(table) == _live_files(table)
    assert len(_live_files(table)) == 2


def test_a_failing_optimize_fails_the_run_with_the_engines_line_in_the_task_log(deployment: Deployment) -> None:
    table = deployment.failing
    assert deployment.wait_run(NIGHTLY, "nightly-bad-where", may_fail=True) == "failed"
    states = deployment.states(NIGHTLY, "nightly-bad-where")
    assert (states["check_table"], states["optimize"]) == ("success", "failed")
    assert {states[t] for t in ("zorder", "vacuum", "summary")} == {"upstream_failed"}
    line = f"table {table}: where may only reference partition columns; 'amount' is not one (partition columns: date)"
    assert line in deployment.task_logs(NIGHTLY, "nightly-bad-where", "optimize")
    assert DeltaTable(str(table)).latest_version() == 4  # nothing committed
    assert len(_data_files(table)) == 4  # nothing written
