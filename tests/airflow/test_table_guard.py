"""`skip_unless_table`: the example DAGs' first task (a run without its table ends skipped, with one line)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_provider_deltalite.hooks.deltalite import InvalidConnection
from airflow_provider_deltalite.operators.table_guard import skip_unless_table
from tests.airflow.delta_history import append

pytestmark = pytest.mark.airflow


def test_a_table_gives_its_version(tmp_path: Path) -> None:
    append(tmp_path / "t", [1])
    append(tmp_path / "t", [2])
    assert skip_unless_table(str(tmp_path / "t")) == 1
    assert skip_unless_table(str(tmp_path / "t"), "") == 1  # an empty DAG param: no connection


@pytest.mark.parametrize(
    ("layout", "problem"),
    [
        ("missing", "path does not exist"),
        ("empty directory", "not a Delta table: no _delta_log directory"),
        ("empty log", "not a Delta table: _delta_log holds no commits"),
    ],
)
def test_no_table_skips_with_one_line_naming_it(tmp_path: Path, layout: str, problem: str) -> None:
    from airflow.providers.common.compat.sdk import AirflowSkipException

    path = tmp_path / "events"
    if layout != "missing":
        path.mkdir()
    if layout == "empty log":
        (path / "_delta_log").mkdir()
    with pytest.raises(AirflowSkipException) as raised:
        skip_unless_table(str(path))
    assert str(raised.value) == (
        f"table {path}: {problem}; skipping this run (set the DAG param table_uri to a Delta table)"
    )
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted(
        {"missing": [], "empty directory": ["events"], "empty log": ["events", "_delta_log"]}[layout]
    )


def test_a_bad_connection_fails_instead_of_skipping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # only a missing table skips: a connection that cannot work fails the run
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps({"conn_type": "deltalite", "extra": {"no_such_field": "x"}}))
    with pytest.raises(InvalidConnection):
        skip_unless_table(str(tmp_path / "events"), "lake")
