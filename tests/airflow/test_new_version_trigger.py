"""NewVersionTrigger: serialisation, the one-event run a deferred sensor gets, the watching run, and end to end as an
AssetWatcher in a real triggerer (with dag-processor and scheduler) on a throw-away Airflow home.

Tables are local: appends by delta-rs, OPTIMIZE by deltalite (a commit whose file actions all have dataChange=false).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_deltalite.engine.errors import InvalidArgument, LogGap, TableNotFound
from airflow_provider_deltalite.triggers import new_version as new_version_module
from airflow_provider_deltalite.triggers.new_data import error_event, raise_from_event
from airflow_provider_deltalite.triggers.new_version import NewVersionTrigger
from tests.airflow.airflow_stack import AirflowStack
from tests.airflow.conftest import EXAMPLE_DAGS, migrated_home
from tests.airflow.delta_history import append, commit_facts, expected_payload, optimize

CLASSPATH = "airflow_provider_deltalite.triggers.new_version.NewVersionTrigger"


def _first_event(trigger: NewVersionTrigger, during: Callable[[], None] | None = None, timeout: float = 20) -> Any:
    """Run the trigger until its first event (calling ``during`` in a thread meanwhile); then check it returns."""

    async def main() -> tuple[Any, bool]:
        events = trigger.run()
        pending = asyncio.ensure_future(events.__anext__())
        if during is not None:
            await asyncio.to_thread(during)
        event = await asyncio.wait_for(pending, timeout)
        try:
            await asyncio.wait_for(events.__anext__(), timeout)
        except StopAsyncIteration:
            return event, True
        return event, False

    event, returned = asyncio.run(main())
    assert returned, "a trigger serving a task must return after its one event"
    return event


def _expected(path: Path, baseline: int, versions: list[int], skipped: list[dict], rows: int) -> dict[str, Any]:
    return {"status": "success", **expected_payload(path, baseline, versions, skipped, rows)}


# -- serialisation ----------------------------------------------------------------------------------------------------


def test_serialize_round_trips_exactly_through_the_triggerers_encoding() -> None:
    from airflow.models.trigger import Trigger
    from airflow.sdk._shared.module_loading import import_string
    from airflow.serialization.decoders import smart_decode_trigger_kwargs
    from airflow.serialization.encoders import encode_trigger
    from airflow.triggers.base import BaseEventTrigger

    trigger = NewVersionTrigger(
        table_uri="events/clicks",
        deltalite_conn_id="lake",
        since=41,
        poll_interval=2.5,
        include_rearrangements=True,
        include_metadata_changes=True,
        fail_if_missing=True,
    )
    kwargs = {
        "table_uri": "events/clicks",
        "deltalite_conn_id": "lake",
        "since": 41,
        "poll_interval": 2.5,
        "include_rearrangements": True,
        "include_metadata_changes": True,
        "fail_if_missing": True,
    }
    assert trigger.serialize() == (CLASSPATH, kwargs)
    # What the trigger table stores (encrypted) and what the triggerer rebuilds the trigger from.
    encoded = encode_trigger(trigger)
    stored = Trigger.encrypt_kwargs(encoded["kwargs"])
    decoded = {k: smart_decode_trigger_kwargs(v) for k, v in Trigger._decrypt_kwargs(stored).items()}
    rebuilt = import_string(encoded["classpath"])(**decoded)
    assert type(rebuilt) is NewVersionTrigger
    assert rebuilt.serialize() == (CLASSPATH, kwargs)
    assert BaseEventTrigger.hash(*rebuilt.serialize()) == BaseEventTrigger.hash(CLASSPATH, kwargs)
    # defaults are serialised too, so a watcher's hash does not change when a default does
    assert NewVersionTrigger("/t").serialize() == (
        CLASSPATH,
        {
            "table_uri": "/t",
            "deltalite_conn_id": None,
            "since": None,
            "poll_interval": 60.0,
            "include_rearrangements": False,
            "include_metadata_changes": False,
            "fail_if_missing": False,
        },
    )


def test_after_version_is_a_deprecated_alias_and_a_trigger_serialized_by_0_1_still_deserializes() -> None:
    from airflow.exceptions import AirflowProviderDeprecationWarning
    from airflow.sdk._shared.module_loading import import_string

    # What the trigger table of a 0.1 deployment holds for a deferred sensor.
    kwargs_0_1 = {
        "table_uri": "/t",
        "deltalite_conn_id": None,
        "after_version": 7,
        "poll_interval": 60.0,
        "include_rearrangements": False,
        "include_metadata_changes": False,
        "fail_if_missing": False,
    }
    with pytest.warns(AirflowProviderDeprecationWarning, match=r"after_version is deprecated.* pass since"):
        rebuilt = import_string(CLASSPATH)(**kwargs_0_1)
    assert rebuilt.since == 7
    assert rebuilt.serialize()[1] == {**{k: v for k, v in kwargs_0_1.items() if k != "after_version"}, "since": 7}
    # a 0.1 row with the default (None) rebuilds without a warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert import_string(CLASSPATH)(**{**kwargs_0_1, "after_version": None}).since is None
    with pytest.raises(InvalidArgument) as both:
        NewVersionTrigger("/t", since=1, after_version=1)
    assert str(both.value) == "table /t: NewVersionTrigger: pass since, not both since and the deprecated after_version"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"table_uri": ""}, "table_uri must be a non-empty string, got ''"),
        (
            {"table_uri": "/t", "since": -2},
            "table /t: since must be a version, or -1 for from the beginning, got -2",
        ),
        (
            {"table_uri": "/t", "since": "3"},
            "table /t: since must be a version, or -1 for from the beginning, got '3'",
        ),
        (
            {"table_uri": "/t", "since": True},
            "table /t: since must be a version, or -1 for from the beginning, got True",
        ),
        (
            {"table_uri": "/t", "poll_interval": 0},
            "table /t: poll_interval must be a positive number of seconds, got 0",
        ),
        (
            {"table_uri": "/t", "poll_interval": float("nan")},
            "table /t: poll_interval must be a positive number of seconds, got nan",
        ),
        (
            {"table_uri": "/t", "deltalite_conn_id": ""},
            "table /t: deltalite_conn_id must be a connection id or None, got ''",
        ),
        ({"table_uri": "/t", "fail_if_missing": "yes"}, "table /t: fail_if_missing must be True or False, got 'yes'"),
    ],
)
def test_bad_arguments_are_one_clear_error(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        NewVersionTrigger(**kwargs)
    assert str(err.value) == message


# -- serving a task: one event ------------------------------------------------------------------------------------


def test_fires_once_on_data_after_the_baseline_and_skips_the_optimize(tmp_path: Path) -> None:
    table = tmp_path / "t"
    assert [append(table, [1, 2, 3, 4, 5]), append(table, [6, 7])] == [0, 1]
    assert optimize(table) == 2
    assert append(table, [8, 9, 10]) == 3
    event = _first_event(NewVersionTrigger(str(table), since=1, poll_interval=0.05))
    assert event.payload == _expected(table, 1, [3], [{"version": 2, "kind": "rearrange"}], rows=3)
    assert event.payload["added_files"] == 1 and event.payload["operations"] == ["WRITE"]


def test_waits_through_an_optimize_and_fires_on_the_next_append(tmp_path: Path) -> None:
    table = tmp_path / "t"
    append(table, [1])
    append(table, [2])
    trigger = NewVersionTrigger(str(table), since=1, poll_interval=0.05)

    def commits() -> None:
        time.sleep(0.3)
        optimize(table)  # polled for 0.5 s below without an event (the test would see version 2 otherwise)
        time.sleep(0.5)
        append(table, [3, 4])

    event = _first_event(trigger, during=commits)
    assert event.payload == _expected(table, 1, [3], [{"version": 2, "kind": "rearrange"}], rows=2)


def test_counts_rearrangements_when_asked(tmp_path: Path) -> None:
    table = tmp_path / "t"
    append(table, [1])
    append(table, [2])
    optimize(table)
    event = _first_event(NewVersionTrigger(str(table), since=1, poll_interval=0.05, include_rearrangements=True))
    facts = commit_facts(table, 2)
    assert event.payload == {
        "status": "success",
        "table_uri": str(table),
        "baseline_version": 1,
        "version": 2,
        "versions": [2],
        "skipped": [],
        "operations": ["OPTIMIZE"],
        "added_files": 0,  # a rearrangement adds no data files
        "added_rows": 0,
        "added_bytes": 0,
        "timestamp": facts["timestamp"],
    }


def test_a_missing_table_is_waited_for_and_counts_from_version_0(tmp_path: Path) -> None:
    table = tmp_path / "later"
    trigger = NewVersionTrigger(str(table), since=-1, poll_interval=0.05)

    def create() -> None:
        time.sleep(0.3)
        append(table, [1, 2])

    event = _first_event(trigger, during=create)
    assert event.payload == _expected(table, -1, [0], [], rows=2)


def test_fail_if_missing_sends_an_error_event_that_the_worker_raises_as_table_not_found(tmp_path: Path) -> None:
    table = tmp_path / "absent"
    event = _first_event(NewVersionTrigger(str(table), since=0, poll_interval=0.05, fail_if_missing=True))
    assert event.payload == {
        "status": "error",
        "error": "airflow_provider_deltalite.engine.errors.TableNotFound",
        "message": f"table {table}: path does not exist",
        "problem": "path does not exist",
        "table_uri": str(table),
        "details": {},
    }
    with pytest.raises(TableNotFound) as err:
        raise_from_event(event.payload)
    assert str(err.value) == f"table {table}: path does not exist"


def test_error_events_keep_the_error_class_and_its_attributes() -> None:
    original = LogGap("the commits after version 3 were removed", "s3://b/t", since=3, oldest_available=10)
    event = json.loads(json.dumps(error_event(original)))  # what travels through the trigger table
    with pytest.raises(LogGap) as err:
        raise_from_event(event)
    assert (str(err.value), err.value.since, err.value.oldest_available, err.value.table_uri) == (
        "table s3://b/t: the commits after version 3 were removed",
        3,
        10,
        "s3://b/t",
    )
    from airflow.providers.common.compat.sdk import AirflowException

    with pytest.raises(AirflowException, match=r"^something else broke$"):
        raise_from_event({"status": "error", "error": "builtins.OSError", "message": "something else broke"})


def test_a_relative_table_uri_is_opened_through_the_deltalite_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    append(tmp_path / "events", [1])
    append(tmp_path / "events", [2, 3])
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_FOR_TRIGGER", json.dumps({"conn_type": "deltalite", "host": str(tmp_path)}))
    event = _first_event(NewVersionTrigger("events", deltalite_conn_id="lake_for_trigger", since=0, poll_interval=0.05))
    assert event.payload == _expected(tmp_path / "events", 0, [1], [], rows=2)


# -- watching (as the triggerer runs an AssetWatcher), cursor in memory -------------------------------------------


class _Polls:
    """The newest version each of the trigger's polls saw, recorded from its worker thread as the poll returns; the
    test waits on these instead of sleeping, so each commit lands between the polls it is meant to fall between
    however late a loaded machine runs the trigger."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: list[int] = []
        self.changed = threading.Condition()
        original = new_version_module.check_new_data

        def observed(*args: Any, **kwargs: Any) -> Any:
            event, changes = original(*args, **kwargs)
            with self.changed:
                self.seen.append(changes.latest)
                self.changed.notify_all()
            return event, changes

        monkeypatch.setattr(new_version_module, "check_new_data", observed)

    def wait(self, what: str, done: Callable[[list[int]], bool]) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: done(self.seen), timeout=60), f"no poll {what}: {self.seen}"


def test_watching_yields_one_event_per_new_data_and_none_for_optimize_or_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "t"
    append(table, [1])
    append(table, [2])
    trigger = NewVersionTrigger(str(table), poll_interval=0.05)
    trigger.trigger_id = 1  # what the triggerer sets; no task instance: an AssetWatcher
    polls = _Polls(monkeypatch)

    def saw(version: int, then: int = 0) -> Callable[[list[int]], bool]:
        """A poll saw ``version``, and ``then`` more polls followed it."""
        return lambda seen: version in seen and len(seen) > seen.index(version) + then

    async def main() -> list[dict]:
        events: list[dict] = []

        async def collect() -> None:
            async for event in trigger.run():
                events.append(event.payload)

        task = asyncio.ensure_future(collect())
        # starts at the newest version (1): history does not fire
        await asyncio.to_thread(polls.wait, "at version 1", saw(1))
        await asyncio.to_thread(optimize, table)  # 2
        await asyncio.to_thread(polls.wait, "past the OPTIMIZE", saw(2))
        await asyncio.to_thread(append, table, [3])  # 3
        await asyncio.to_thread(polls.wait, "past version 3", saw(3))
        await asyncio.to_thread(append, table, [4, 5])  # 4
        # two polls after the one that saw version 4: its event was taken, and a repeated one would be too
        await asyncio.to_thread(polls.wait, "twice after version 4", saw(4, then=2))
        task.cancel()
        return events

    events = asyncio.run(main())
    assert events == [_expected(table, 2, [3], [], rows=1), _expected(table, 3, [4], [], rows=2)]


# -- end to end: an AssetWatcher in a real triggerer ----------------------------------------------------------------


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[AirflowStack, Path]]:
    """A stack on its own freshly migrated home: `dag.test()` runs elsewhere in the session leave their deferred
    tasks' trigger rows behind (pointing at finished task instances), and a real triggerer would pick those up."""
    airflow_home = migrated_home(tmp_path / "home")
    dags = tmp_path / "dags"
    dags.mkdir()
    shutil.copy(EXAMPLE_DAGS / "asset_watcher.py", dags / "asset_watcher.py")
    table = tmp_path / "events"
    env = {
        **airflow_home.env,
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        # Assets are activated by the scheduler and a watcher registered on the next parse: make both quick (every
        # 3 s, not every second: each parse is a process and CPU the rest of the suite shares, for the whole test).
        "AIRFLOW__SCHEDULER__PARSING_CLEANUP_INTERVAL": "1",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "3",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "3",
        # No API server runs: the asset-triggered run's task fails fast on a port nothing listens on.
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": "http://127.0.0.1:9/execution/",
        "DELTALITE_EXAMPLE_TABLE_URI": str(table),
        "DELTALITE_EXAMPLE_POLL_SECONDS": "0.3",
    }
    logs = tmp_path / "logs"
    logs.mkdir()
    running = AirflowStack(airflow_home, env, logs)
    try:
        yield running, table
    finally:
        running.stop_all()


@pytest.mark.slow
def test_asset_watcher_in_a_real_triggerer_one_event_per_data_commit_none_for_optimize_none_repeated_on_restart(
    stack: tuple[AirflowStack, Path],
) -> None:
    airflow, table = stack
    append(table, [1])
    append(table, [2])  # history up to version 1: must not fire
    cursor_sql = "SELECT key, value FROM asset_state_store"
    key = f"deltalite.new_version.cursor:{table}"
    events_sql = "SELECT extra FROM asset_event ORDER BY id"

    def cursors(rows: list[tuple]) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in rows}

    def payloads(rows: list[tuple]) -> list[dict]:
        extras = [json.loads(extra) for (extra,) in rows]
        assert all(e["from_trigger"] is True and set(e) == {"from_trigger", "payload"} for e in extras), extras
        return [e["payload"] for e in extras]

    for name in ("dag-processor", "scheduler", "triggerer"):
        airflow.start(name)

    # No cursor stored: the watcher starts at the newest version and stores it at once.
    airflow.wait_for("the watcher's first cursor", cursor_sql, {key: {"version": 1, "table_id": None}}, cursors)
    assert optimize(table) == 2
    airflow.wait_for("the cursor past the OPTIMIZE", cursor_sql, {key: {"version": 2, "table_id": None}}, cursors)
    assert payloads(airflow.query(events_sql)) == []

    assert append(table, [3, 4]) == 3
    airflow.wait_for("the cursor past the append", cursor_sql, {key: {"version": 3, "table_id": None}}, cursors)
    first = _expected(table, 2, [3], [], rows=2)
    airflow.wait_for("one asset event", events_sql, [first], payloads)
    airflow.wait_for(
        "the asset-triggered run",
        "SELECT dag_id, run_type FROM dag_run",
        [("deltalite_asset_watcher", "asset_triggered")],
    )

    # Restart the triggerer with a commit made while it is down: the stored cursor (3) is where it goes on from, so
    # version 3 is not reported again and version 4 is not missed (a cursor re-chosen at start would skip it).
    airflow.stop("triggerer")
    assert append(table, [5, 6, 7]) == 4
    airflow.start("triggerer")
    second = _expected(table, 3, [4], [], rows=3)
    airflow.wait_for("the second asset event", events_sql, [first, second], payloads)
    airflow.wait_for("the cursor past version 4", cursor_sql, {key: {"version": 4, "table_id": None}}, cursors)
    time.sleep(1.5)  # five more polls: still exactly two events
    assert payloads(airflow.query(events_sql)) == [first, second]
    assert airflow.query("SELECT count(*) FROM asset_event") == [(2,)]
