"""NewVersionSensor: argument checks at parse and render time, deferral, the baseline of a run, the example DAGs, and
real `dag.test()` runs in poke, reschedule and deferrable modes on a migrated Airflow home.

The `dag.test()` runs happen in one subprocess (tests/airflow/sensor_dags/sensor_dags.py) while this process commits
to the tables each time a sensor reports, through its marker file, that it has looked and is waiting.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine.errors import InvalidArgument, TableNotFound
from airflow_provider_deltalite.sensors.new_version import NewVersionSensor, version_as_of
from airflow_provider_deltalite.triggers.new_data import error_event
from airflow_provider_deltalite.triggers.new_version import NewVersionTrigger
from tests.airflow.conftest import EXAMPLE_DAGS, AirflowHome
from tests.airflow.delta_history import append, expected_payload, optimize

SENSOR_DAGS = Path(__file__).resolve().parent / "sensor_dags"
TRIGGER_PATH = "airflow_provider_deltalite.triggers.new_version.NewVersionTrigger"


def _sensor(**kwargs: Any) -> NewVersionSensor:
    return NewVersionSensor(task_id="wait", **{"table_uri": "/t", **kwargs})


# -- arguments ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "shown"),
    [(-1, "-1"), ("-2", "'-2'"), (3.5, "3.5"), ("3.5", "'3.5'"), (True, "True"), ("abc", "'abc'"), ([3], "[3]")],
)
def test_a_bad_literal_since_fails_when_the_dag_is_parsed(value: Any, shown: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        _sensor(since=value)
    assert str(err.value) == f"table /t: since must be a non-negative integer (a version of the table), got {shown}"


@pytest.mark.parametrize("value", [None, 0, 7, "7", " 12 ", "{{ ti.xcom_pull('load')['version'] }}"])
def test_good_or_templated_since_values_are_accepted_when_parsed(value: Any) -> None:
    assert _sensor(since=value).since == value


@pytest.mark.parametrize(("rendered", "shown"), [("-3", "'-3'"), ("None", "'None'"), ("4.0", "'4.0'")])
def test_a_template_that_renders_to_a_bad_version_fails_at_execute(tmp_path: Path, rendered: str, shown: str) -> None:
    table = tmp_path / "t"
    sensor = _sensor(table_uri=str(table), since="{{ bad }}")
    sensor.render_template_fields({"bad": rendered})
    assert sensor.since == rendered
    with pytest.raises(InvalidArgument) as err:
        sensor.execute({})
    assert str(err.value) == (
        f"table {table}: since must be a non-negative integer (a version of the table), got {shown}"
    )
    assert not table.exists()  # nothing was opened or written


def test_templates_render_the_table_and_a_version_from_an_upstream_xcom(tmp_path: Path) -> None:
    append(tmp_path / "t", [1])
    append(tmp_path / "t", [2, 3])
    sensor = _sensor(table_uri="{{ params.table }}", since="{{ upstream['version'] }}")
    sensor.render_template_fields({"params": {"table": str(tmp_path / "t")}, "upstream": {"version": 0}})
    assert (sensor.table_uri, sensor.since) == (str(tmp_path / "t"), "0")
    assert sensor.execute({}) == expected_payload(tmp_path / "t", 0, [1], [], rows=2)


# -- deferral -------------------------------------------------------------------------------------------------------


def test_deferrable_pokes_once_then_defers_to_the_trigger_with_the_baseline_fixed(tmp_path: Path) -> None:
    from airflow.sdk.exceptions import TaskDeferred

    table = tmp_path / "t"
    append(table, [1])
    append(table, [2])
    optimize(table)  # version 2: not new data
    sensor = _sensor(table_uri=str(table), since="1", deferrable=True, poke_interval=0.5, timeout=30)
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    assert deferred.value.trigger.serialize() == (
        TRIGGER_PATH,
        {
            "table_uri": str(table),
            "deltalite_conn_id": None,
            "since": 1,
            "poll_interval": 0.5,
            "include_rearrangements": False,
            "include_metadata_changes": False,
            "fail_if_missing": False,
        },
    )
    assert (deferred.value.method_name, deferred.value.timeout) == ("execute_complete", timedelta(seconds=30))
    # data already there: no deferral, the payload at once
    append(table, [3, 4])
    assert sensor.execute({}) == expected_payload(table, 1, [3], [{"version": 2, "kind": "rearrange"}], rows=2)


def test_a_missing_table_defers_from_before_its_first_commit(tmp_path: Path) -> None:
    from airflow.sdk.exceptions import TaskDeferred

    sensor = _sensor(table_uri=str(tmp_path / "later"), deferrable=True)
    when = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({"data_interval_end": when})  # no dag_run: the reference time falls back to the interval end
    assert deferred.value.trigger.serialize()[1]["since"] == -1


def test_execute_complete_returns_the_payload_or_raises_the_typed_error(tmp_path: Path) -> None:
    sensor = _sensor(deferrable=True)
    payload = {
        "table_uri": "/t",
        "baseline_version": 1,
        "version": 3,
        "versions": [3],
        "skipped": [],
        "operations": ["WRITE"],
        "added_files": 1,
        "added_rows": None,
        "added_bytes": 512,
        "timestamp": 1764000000000,
    }
    assert sensor.execute_complete({}, {"status": "success", **payload}) == payload
    with pytest.raises(TableNotFound, match=r"^table /t: path does not exist$"):
        sensor.execute_complete({}, error_event(TableNotFound("path does not exist", "/t")))
    from airflow.providers.common.compat.sdk import AirflowException

    with pytest.raises(AirflowException, match=r"^unexpected trigger event None$"):
        sensor.execute_complete({}, None)


def test_execute_complete_refuses_a_malformed_event_and_ignores_keys_it_does_not_know() -> None:
    from airflow.providers.common.compat.sdk import AirflowException

    sensor = _sensor(deferrable=True)
    payload = {
        "table_uri": "/t",
        "baseline_version": 1,
        "version": 3,
        "versions": [2, 3],
        "skipped": [],
        "operations": ["WRITE", "MERGE"],
        "added_files": 2,
        "added_rows": 10,
        "added_bytes": 512,
        "timestamp": None,
    }
    assert sensor.execute_complete({}, {"status": "success", **payload, "from_a_newer_trigger": 1}) == payload
    for broken, problem in [
        ({"version": None}, "version must be an integer, got None"),
        ({"versions": [2]}, "versions must end with version 3, got [2]"),
        ({"skipped": [{"version": 2}]}, "skipped must be a list of {version, kind}"),
        ({"added_files": "2"}, "added_files must be an integer, got '2'"),
    ]:
        with pytest.raises(AirflowException, match=r"^NewVersionTrigger sent a malformed event \(") as err:
            sensor.execute_complete({}, {"status": "success", **payload, **broken})
        assert problem in str(err.value)
    incomplete = {key: value for key, value in payload.items() if key != "operations"}
    with pytest.raises(AirflowException, match=r"a new-data event needs operations"):
        sensor.execute_complete({}, {"status": "success", **incomplete})


def test_after_version_is_a_deprecated_alias_of_since() -> None:
    from airflow.exceptions import AirflowProviderDeprecationWarning

    with pytest.warns(AirflowProviderDeprecationWarning, match=r"after_version is deprecated.* pass since"):
        sensor = _sensor(after_version="{{ ti.xcom_pull('load')['version'] }}")
    assert sensor.since == "{{ ti.xcom_pull('load')['version'] }}"
    assert "since" in sensor.template_fields and "after_version" not in sensor.template_fields
    with pytest.warns(AirflowProviderDeprecationWarning), pytest.raises(InvalidArgument) as bad:
        _sensor(after_version=-1)  # the alias is checked as since is
    assert str(bad.value) == "table /t: since must be a non-negative integer (a version of the table), got -1"
    with pytest.raises(InvalidArgument) as both:
        _sensor(since=3, after_version=3)
    assert str(both.value) == (
        "table /t: NewVersionSensor: pass since, not both since and the deprecated after_version"
    )


def test_fail_if_missing_raises_table_not_found_and_otherwise_the_sensor_waits(tmp_path: Path) -> None:
    table = tmp_path / "absent"
    with pytest.raises(TableNotFound) as err:
        _sensor(table_uri=str(table), since=0, fail_if_missing=True).poke({})
    assert str(err.value) == f"table {table}: path does not exist"
    assert _sensor(table_uri=str(table), since=0).poke({}) is False


# -- the baseline of a run ------------------------------------------------------------------------------------------


def test_version_as_of_a_moment_is_minus_one_before_the_first_commit(tmp_path: Path) -> None:
    table = tmp_path / "t"
    before = dt.datetime.now(dt.UTC)
    time.sleep(0.02)
    append(table, [1])
    time.sleep(0.02)
    between = dt.datetime.now(dt.UTC)
    time.sleep(0.02)
    append(table, [2])
    optimize(table)
    after = dt.datetime.now(dt.UTC)
    delta = DeltaTable(str(table))
    assert [version_as_of(delta, m) for m in (before, between, after)] == [-1, 0, 2]
    with pytest.raises(TableNotFound):
        version_as_of(DeltaTable(str(tmp_path / "absent")), after)


# -- the example DAGs -----------------------------------------------------------------------------------------------


def _parse_without_connections(path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from airflow.dag_processing.dagbag import DagBag
    from airflow.sdk.bases.hook import BaseHook

    lookups: list[str] = []

    def get_connection(conn_id: str) -> Any:  # parsing must not look connections up (Airflow's own example rule)
        lookups.append(conn_id)
        raise AssertionError(f"connection {conn_id!r} looked up while parsing")

    monkeypatch.setattr(BaseHook, "get_connection", get_connection)
    bag = DagBag(dag_folder=str(path))
    assert (bag.import_errors, lookups) == ({}, [])
    return bag


def test_new_commits_trigger_example_parses_without_touching_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DELTALITE_EXAMPLE_POLL_SECONDS", raising=False)
    bag = _parse_without_connections(EXAMPLE_DAGS / "new_commits_trigger.py", monkeypatch)
    dag = bag.dags["deltalite_new_commits_trigger"]
    assert sorted(dag.task_dict) == ["check_table", "process", "wait_for_more_data", "wait_for_new_data"]
    first, more = dag.task_dict["wait_for_new_data"], dag.task_dict["wait_for_more_data"]
    # deferrable by default (the triggerer waits, no worker slot); a quiet hour ends the run skipped, not failed
    for sensor in (first, more):
        assert (sensor.deferrable, sensor.soft_fail, sensor.timeout, sensor.poke_interval) == (True, True, 3300, 30)
    assert first.table_uri == "{{ params.table_uri }}"
    assert (first.since.operator.task_id, first.since.key) == ("check_table", "return_value")
    assert first.upstream_task_ids == {"check_table"}
    assert more.since == "{{ ti.xcom_pull(task_ids='wait_for_new_data')['version'] }}"
    assert dag.task_dict["process"].upstream_task_ids == {"wait_for_new_data"}
    assert more.upstream_task_ids == {"process"}


def test_asset_watcher_example_watches_the_table_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DELTALITE_EXAMPLE_TABLE_URI", "/data/events")
    monkeypatch.delenv("DELTALITE_EXAMPLE_POLL_SECONDS", raising=False)
    bag = _parse_without_connections(EXAMPLE_DAGS / "asset_watcher.py", monkeypatch)
    dag = bag.dags["deltalite_asset_watcher"]
    (asset,) = dag.timetable.asset_condition.objects
    (watcher,) = asset.watchers
    assert (asset.name, asset.uri, watcher.name) == (
        "deltalite_example_events",
        "/data/events",
        "deltalite_example_events_new_data",
    )
    assert isinstance(watcher.trigger, NewVersionTrigger)
    assert watcher.trigger.serialize()[1] == {
        "table_uri": "/data/events",
        "deltalite_conn_id": None,
        "since": None,
        "poll_interval": 30.0,
        "include_rearrangements": False,
        "include_metadata_changes": False,
        "fail_if_missing": False,
    }


# -- real runs: dag.test() in poke, reschedule and deferrable modes -------------------------------------------------


def _markers(markers: Path, dag_id: str) -> list[dict]:
    path = markers / f"{dag_id}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _table_until_optimize(path: Path) -> str:
    """Versions 0 and 1 (appends), the moment to use as run_after, then version 2 (OPTIMIZE); that moment."""
    append(path, [1, 2])
    append(path, [3])
    time.sleep(0.02)
    moment = dt.datetime.now(dt.UTC)
    time.sleep(0.02)
    assert optimize(path) == 2
    return moment.isoformat()


@pytest.fixture(scope="module")
def sensor_runs(airflow_home: AirflowHome, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run the sensor DAGs once; commit to each table once its sensor has looked and waits. What every run saw."""
    root = tmp_path_factory.mktemp("sensor_runs")
    markers = root / "markers"
    markers.mkdir()
    tables = {name: root / name for name in ("poke", "reschedule", "deferrable", "missing", "absent", "bad")}
    now = dt.datetime.now(dt.UTC).isoformat()
    plan = [
        {"dag_id": "sensor_poke", "run_after": _table_until_optimize(tables["poke"]), "table": "poke"},
        {
            "dag_id": "sensor_reschedule",
            "run_after": _table_until_optimize(tables["reschedule"]),
            "table": "reschedule",
        },
        {
            "dag_id": "sensor_deferrable",
            "run_after": _table_until_optimize(tables["deferrable"]),
            "table": "deferrable",
        },
        {"dag_id": "sensor_missing", "run_after": now, "table": "missing"},
        {"dag_id": "sensor_fail_if_missing", "run_after": now, "table": "absent"},
        {"dag_id": "sensor_bad_since", "run_after": now, "table": "bad", "since": "-3"},
    ]
    for run in plan:
        run["conf"] = {"table_uri": str(tables[run["table"]]), "since": run.pop("since", "0")}
    (root / "plan.json").write_text(json.dumps(plan))
    # (dag, task whose waiting poke triggers the commit, the commit)
    steps: list[tuple[str, str, Callable[[], int]]] = [
        ("sensor_poke", "wait", lambda: append(tables["poke"], [4, 5, 6])),  # version 3
        ("sensor_poke", "wait_more", lambda: append(tables["poke"], [7])),  # version 4
        ("sensor_reschedule", "wait", lambda: append(tables["reschedule"], [4, 5, 6])),
        ("sensor_deferrable", "wait", lambda: append(tables["deferrable"], [4, 5, 6])),
        ("sensor_missing", "wait", lambda: append(tables["missing"], [1, 2])),  # creates the table: version 0
    ]
    log = (root / "driver.log").open("w")
    env = {**airflow_home.env, "AIRFLOW__CORE__DAGS_FOLDER": str(SENSOR_DAGS), "DELTALITE_TEST_MARKERS": str(markers)}
    driver = subprocess.Popen(
        [sys.executable, str(SENSOR_DAGS / "sensor_dags.py"), str(root / "plan.json")],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 240
        for dag_id, task_id, commit in steps:
            while not any(
                m["task"] == task_id and m["event"] == "poke" and not m["done"] for m in _markers(markers, dag_id)
            ):
                if driver.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"{dag_id}.{task_id} never waited:\n{(root / 'driver.log').read_text()[-4000:]}")
                time.sleep(0.05)
            commit()
        driver.wait(max(1.0, deadline - time.monotonic()))
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        log.close()
    output = (root / "driver.log").read_text()
    assert driver.returncode == 0, output[-4000:]
    results = {
        r["dag_id"]: r
        for r in (
            json.loads(line.removeprefix("RESULT ")) for line in output.splitlines() if line.startswith("RESULT ")
        )
    }
    assert sorted(results) == sorted(run["dag_id"] for run in plan), output[-4000:]
    return {
        "results": results,
        "markers": {r["dag_id"]: _markers(markers, r["dag_id"]) for r in plan},
        "tables": tables,
        "output": output,
    }


def _received(runs: dict[str, Any], dag_id: str, task: str = "received") -> list[dict]:
    return [m["change"] for m in runs["markers"][dag_id] if m["task"] == task and m["event"] == "received"]


def _sensor_calls(runs: dict[str, Any], dag_id: str, task: str = "wait") -> list[tuple]:
    return [
        (m["event"], m.get("done"), m.get("baseline"))
        for m in runs["markers"][dag_id]
        if m["task"] == task and m["event"] != "received"
    ]


@pytest.mark.slow
def test_poke_mode_fires_on_the_data_commit_not_the_optimize_and_chains_a_baseline_from_xcom(
    sensor_runs: dict[str, Any],
) -> None:
    table = sensor_runs["tables"]["poke"]
    assert sensor_runs["results"]["sensor_poke"] == {
        "dag_id": "sensor_poke",
        "state": "success",
        "tasks": {"wait": "success", "received": "success", "wait_more": "success", "received_more": "success"},
    }
    # One execute, pokes in the same process: waiting (baseline 1: the version as of run_after) until version 3.
    calls = _sensor_calls(sensor_runs, "sensor_poke")
    assert calls[0] == ("execute", None, None) and calls[-1] == ("poke", True, 1)
    assert set(calls[1:-1]) == {("poke", False, 1)}
    assert _received(sensor_runs, "sensor_poke") == [
        expected_payload(table, 1, [3], [{"version": 2, "kind": "rearrange"}], rows=3)
    ]
    # The second sensor's since rendered from the first one's XCom ("3") and fired on version 4 only.
    more = _sensor_calls(sensor_runs, "sensor_poke", "wait_more")
    assert more[0] == ("execute", None, None) and more[-1] == ("poke", True, 3)
    assert _received(sensor_runs, "sensor_poke", "received_more") == [expected_payload(table, 3, [4], [], rows=1)]


@pytest.mark.slow
def test_reschedule_mode_derives_the_same_baseline_in_every_poke(sensor_runs: dict[str, Any]) -> None:
    table = sensor_runs["tables"]["reschedule"]
    assert sensor_runs["results"]["sensor_reschedule"]["state"] == "success"
    # Each poke is its own execution (rescheduled in between) on a fresh copy of the operator (Airflow's
    # prepare_for_execution, as a new worker process would parse it), so it derives the baseline again: always 1.
    calls = _sensor_calls(sensor_runs, "sensor_reschedule")
    assert len(calls) >= 4 and calls[-2:] == [("execute", None, None), ("poke", True, 1)]
    assert calls[:-2] == [("execute", None, None), ("poke", False, 1)] * (len(calls) // 2 - 1)
    assert _received(sensor_runs, "sensor_reschedule") == [
        expected_payload(table, 1, [3], [{"version": 2, "kind": "rearrange"}], rows=3)
    ]


@pytest.mark.slow
def test_deferrable_mode_waits_in_the_trigger_and_returns_the_sameexpected_payload(sensor_runs: dict[str, Any]) -> None:
    table = sensor_runs["tables"]["deferrable"]
    assert sensor_runs["results"]["sensor_deferrable"]["state"] == "success"
    # One poke in execute (version 2 is an OPTIMIZE: nothing yet), then the trigger until version 3.
    assert _sensor_calls(sensor_runs, "sensor_deferrable") == [
        ("execute", None, None),
        ("poke", False, 1),
        ("execute_complete", None, None),
    ]
    assert _received(sensor_runs, "sensor_deferrable") == [
        expected_payload(table, 1, [3], [{"version": 2, "kind": "rearrange"}], rows=3)
    ]


@pytest.mark.slow
def test_a_table_created_after_the_run_started_counts_from_version_0(sensor_runs: dict[str, Any]) -> None:
    assert sensor_runs["results"]["sensor_missing"]["state"] == "success"
    calls = _sensor_calls(sensor_runs, "sensor_missing")
    assert calls[1] == ("poke", False, None)  # no table yet: waiting
    assert calls[-1] == ("poke", True, -1)
    assert _received(sensor_runs, "sensor_missing") == [
        expected_payload(sensor_runs["tables"]["missing"], -1, [0], [], 2)
    ]


@pytest.mark.slow
def test_bad_input_fails_the_task_with_one_clear_error_and_writes_nothing(sensor_runs: dict[str, Any]) -> None:
    results, tables, output = sensor_runs["results"], sensor_runs["tables"], sensor_runs["output"]
    for dag_id in ("sensor_fail_if_missing", "sensor_bad_since"):
        assert results[dag_id] == {
            "dag_id": dag_id,
            "state": "failed",
            "tasks": {"wait": "failed", "received": "upstream_failed"},
        }
        assert _received(sensor_runs, dag_id) == []
    assert f"TableNotFound: table {tables['absent']}: path does not exist" in output
    assert (
        f"InvalidArgument: table {tables['bad']}: since must be a non-negative integer (a version of the "
        "table), got '-3'" in output
    )
    assert _sensor_calls(sensor_runs, "sensor_bad_since") == [("execute", None, None)]  # failed before a poke
    assert not tables["absent"].exists() and not tables["bad"].exists()
