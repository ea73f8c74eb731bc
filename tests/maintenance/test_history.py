"""The operations history (issue 31, item 3): rows written by deltalite's own writer, read back with delta-rs.

Expected figures come from the data files on disk and delta-rs' view of the maintained tables, not from deltalite.
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

from airflow_provider_deltalite.engine.errors import InvalidArgument
from airflow_provider_deltalite.engine.table import Table
from airflow_provider_deltalite.maintenance.checkpoint import checkpoint
from airflow_provider_deltalite.maintenance.history import COLUMNS, append_history, check_history_table
from airflow_provider_deltalite.maintenance.optimize import optimize
from airflow_provider_deltalite.maintenance.options import OptimizeOptions
from airflow_provider_deltalite.maintenance.planner import plan_maintenance, run_plan
from airflow_provider_deltalite.maintenance.planner.policy import MaintenancePolicy
from airflow_provider_deltalite.maintenance.vacuum import vacuum
from tests.helpers import tree_state

FILES = 6


def small_table(path: Path, files: int = FILES) -> Path:
    for i in range(files):
        data = pa.table({"id": list(range(10 * i, 10 * i + 10)), "name": [f"n{j}" for j in range(10)]})
        deltalake.write_deltalake(str(path), data, mode="append")
    return path


def history_rows(path: Path) -> list[dict]:
    rows = deltalake.DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    return sorted(rows, key=lambda r: (r["start_time"], r["operation"]))


def test_optimize_vacuum_and_checkpoint_each_append_one_row(tmp_path: Path) -> None:
    path = small_table(tmp_path / "t")
    history = tmp_path / "history"
    sizes = sorted(p.stat().st_size for p in path.glob("*.parquet"))
    stats = optimize(Table(str(path)), OptimizeOptions(history_uri=str(history)))
    dt = deltalake.DeltaTable(str(path))
    [live] = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    vacuum(Table(str(path)), history_uri=str(history), retention_hours=0, enforce_retention_duration=False)
    checkpoint(Table(str(path)), history_uri=str(history))
    rows = history_rows(history)
    assert [r["operation"] for r in rows] == ["optimize", "vacuum", "checkpoint"]
    opt, vac, cp = rows
    assert (opt["table_uri"], opt["table_id"]) == (str(path), dt.metadata().id)
    assert (opt["read_version"], opt["version"], opt["outcome"], opt["executor"]) == (
        FILES - 1,
        FILES,
        "committed",
        "local",
    )
    assert (opt["files_read"], opt["bytes_read"]) == (FILES, sum(sizes))
    assert (opt["files_written"], opt["bytes_written"]) == (1, live["size_bytes"])
    assert (opt["files_before"], opt["small_files_before"], opt["files_after"], opt["small_files_after"]) == (
        FILES,
        FILES,
        1,
        1,
    )
    assert (opt["bytes_before"], opt["bytes_after"]) == (sum(sizes), live["size_bytes"])
    assert opt["start_time"] <= opt["end_time"] <= vac["start_time"]
    assert stats.committed_version == FILES
    # VACUUM (retention 0) deletes the six compacted files: START and END are versions 7 and 8
    assert (vac["files_deleted"], vac["bytes_deleted"], vac["version"], vac["outcome"]) == (
        FILES,
        sum(sizes),
        FILES + 2,
        "committed",
    )
    # the health reads only the log: the remove actions stay there after VACUUM deleted their files
    assert (vac["tombstone_bytes_before"], vac["tombstone_bytes_after"]) == (sum(sizes), sum(sizes))
    assert sorted(p.name for p in path.glob("*.parquet")) == [Path(live["path"]).name]
    assert (cp["version"], cp["outcome"], cp["commits_since_checkpoint_after"]) == (FILES + 2, "committed", 0)
    assert all(r["error_class"] is None and r["run_id"] is None for r in rows)
    assert deltalake.DeltaTable(str(history)).schema().to_arrow().names == [c for c, _, _ in COLUMNS]


def test_a_maintain_run_writes_one_row_per_action_with_one_run_id(tmp_path: Path) -> None:
    path = small_table(tmp_path / "t")
    history = tmp_path / "history"
    table = Table(str(path))
    plan = plan_maintenance(table, MaintenancePolicy(max_commits_since_checkpoint=3))
    assert [a.operation for a in plan.actions] == ["optimize", "checkpoint"]
    run_plan(table, plan, history_uri=str(history), run_id="run-1")
    rows = history_rows(history)
    assert [(r["operation"], r["run_id"], r["outcome"]) for r in rows] == [
        ("optimize", "run-1", "committed"),
        ("checkpoint", "run-1", "committed"),
    ]


def test_nothing_to_do_and_a_dry_run(tmp_path: Path) -> None:
    path = small_table(tmp_path / "t", files=1)
    history = tmp_path / "history"
    optimize(Table(str(path)), history_uri=str(history), dry_run=True)  # a dry run is not an operation
    assert not history.exists()
    optimize(Table(str(path)), history_uri=str(history))  # one file: nothing to compact
    [row] = history_rows(history)
    assert (row["outcome"], row["version"], row["files_read"], row["files_written"]) == ("nothing to do", None, 0, 0)


def test_an_error_is_recorded_and_still_raised(tmp_path: Path) -> None:
    path = small_table(tmp_path / "t", files=2)
    history = tmp_path / "history"
    with pytest.raises(Exception) as info:
        optimize(Table(str(path)), history_uri=str(history), where="no_such_column = 1")
    [row] = history_rows(history)
    assert (row["outcome"], row["error_class"]) == ("error", type(info.value).__name__)
    assert row["error_message"] == str(info.value)


def _append_many(uri: str, writer: int, count: int) -> None:
    for n in range(count):
        append_history(uri, [_row(writer, n)])


def _row(writer: int, n: int) -> dict:
    from datetime import UTC, datetime

    when = datetime(2026, 12, 1, tzinfo=UTC)
    return {"table_uri": f"/t/{writer}", "operation": "optimize", "start_time": when, "end_time": when,
            "outcome": "committed", "version": n}  # fmt: skip


def test_concurrent_processes_lose_no_row(tmp_path: Path) -> None:
    uri = str(tmp_path / "history")  # created by whichever process commits first
    writers, each = 4, 6
    context = multiprocessing.get_context("spawn")
    procs = [context.Process(target=_append_many, args=(uri, w, each)) for w in range(writers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * writers
    rows = deltalake.DeltaTable(uri).to_pyarrow_table().to_pylist()
    assert sorted((r["table_uri"], r["version"]) for r in rows) == sorted(
        (f"/t/{w}", n) for w in range(writers) for n in range(each)
    )
    assert deltalake.DeltaTable(uri).version() == writers * each  # version 0 creates it, one commit per append


def test_concurrent_threads_lose_no_row(tmp_path: Path) -> None:
    uri = str(tmp_path / "history")
    errors: list[BaseException] = []

    def append(writer: int) -> None:
        try:
            _append_many(uri, writer, 5)
        except BaseException as error:  # a thread's exception is otherwise only a warning
            errors.append(error)

    threads = [threading.Thread(target=append, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    rows = deltalake.DeltaTable(uri).to_pyarrow_table().to_pylist()
    assert len(rows) == 30
    assert sorted((r["table_uri"], r["version"]) for r in rows) == sorted(
        (f"/t/{w}", n) for w in range(6) for n in range(5)
    )


def test_a_location_of_empty_directories_is_created_like_an_empty_one(tmp_path: Path) -> None:
    # what another writer's `os.makedirs` of `history/_delta_log` leaves for a moment: the parent, empty
    history = tmp_path / "history"
    (history / "a" / "b").mkdir(parents=True)
    assert check_history_table(str(history)) is None
    assert not Table(str(history)).storage.has_files_under("")
    (history / "a" / "b" / "note.txt").write_text("x")
    assert Table(str(history)).storage.has_files_under("")
    (history / "a" / "b" / "note.txt").unlink()
    assert append_history(str(history), [_row(0, 0)]) == 1
    assert [
        (r["table_uri"], r["version"]) for r in deltalake.DeltaTable(str(history)).to_pyarrow_table().to_pylist()
    ] == [("/t/0", 0)]


def test_a_failing_history_never_fails_the_maintenance(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = small_table(tmp_path / "t")
    history = tmp_path / "not-a-table"
    history.mkdir()
    (history / "notes.txt").write_text("hello")
    before = tree_state(history)
    with caplog.at_level(logging.WARNING, logger="airflow_provider_deltalite.history"):
        stats = optimize(Table(str(path)), history_uri=str(history))
    assert stats.committed_version == FILES  # the OPTIMIZE committed
    assert deltalake.DeltaTable(str(path)).version() == FILES
    assert [r.getMessage() for r in caplog.records] == [
        f"deltalite: warning: the operations history {history} was not written: InvalidArgument: the operations "
        "history location is not a Delta table (it holds files but no _delta_log)"
    ]
    assert tree_state(history) == before


def test_a_table_with_another_schema_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other"
    deltalake.write_deltalake(str(other), pa.table({"id": [1]}))
    with pytest.raises(InvalidArgument) as info:
        check_history_table(str(other))
    assert str(info.value) == (
        f"table {other}: the operations history table's schema is not the history schema: it has no column 'table_uri'"
    )
    assert check_history_table(str(tmp_path / "absent")) is None


def test_rewrite_speeds_are_bytes_over_seconds_per_table_and_executor(tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from airflow_provider_deltalite.maintenance.history.speeds import rewrite_speeds

    start = datetime(2026, 12, 1, tzinfo=UTC)

    def row(uri: str, operation: str, nbytes: int, seconds: float, executor: str, outcome: str = "committed") -> dict:
        return {"table_uri": uri, "operation": operation, "start_time": start,
                "end_time": start + timedelta(seconds=seconds), "bytes_read": nbytes, "executor": executor,
                "outcome": outcome}  # fmt: skip

    uri = str(tmp_path / "history")
    append_history(
        uri,
        [
            row("/a", "optimize", 100, 2.0, "local"),
            row("/a", "zorder", 500, 3.0, "local"),  # /a: 600 bytes in 5 s
            row("/a", "optimize", 9999, 1.0, "spark"),  # another executor
            row("/a", "optimize", 9999, 1.0, "local", "error"),  # failed runs say nothing about speed
            row("/a", "vacuum", 9999, 1.0, "local"),  # not a rewrite
            row("/b", "cluster", 300, 0.5, "local"),
        ],
    )
    assert rewrite_speeds(uri, executor="local") == {"/a": 120.0, "/b": 600.0}
    assert rewrite_speeds(uri, executor="spark") == {"/a": 9999.0}
    assert rewrite_speeds(str(tmp_path / "none")) == {}


def test_outcomes_of_errors_name_conflicts_and_keep_foreign_messages_out() -> None:
    from airflow_provider_deltalite.engine.errors import ConcurrentDeleteRead
    from airflow_provider_deltalite.maintenance.history.record import error_row

    lost = ConcurrentDeleteRead(
        "a file this OPTIMIZE read was removed", "/t", winning_version=9, winning_operation="DELETE"
    )
    assert error_row(lost) == {
        "outcome": "conflict",
        "error_class": "ConcurrentDeleteRead",
        "error_message": "table /t: a file this OPTIMIZE read was removed; conflicting commit: version 9 (DELETE)",
    }
    # another library's message may hold anything (a signed URL, a key): only its class is kept
    assert error_row(OSError("https://bucket.s3/key?X-Amz-Signature=abc")) == {
        "outcome": "error",
        "error_class": "OSError",
        "error_message": None,
    }
