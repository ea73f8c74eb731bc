"""`deltalite health`: the text and JSON forms, what the process imports, and bad input (one line, exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_provider_deltalite.cli import main
from airflow_provider_deltalite.cli.startup import pandas_kept_out
from tests.helpers import cli_failure, tree_state
from tests.maintenance.health_tables import MIB
from tests.maintenance.test_health import partitioned_table
from tests.test_process_cost import run_command


def test_text_shows_the_figures_and_the_worst_partitions(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    t = partitioned_table(tmp_path)
    assert main(["health", str(t), "--min-file-size", str(6 * MIB)]) == 0
    lines = capsys.readouterr().out.splitlines()
    # the time-dependent lines (tombstones, log windows, last runs) are checked on `table_health` with a fixed now
    assert [line for line in lines if not line.startswith(("tombstones", "log", "optimize", "vacuum"))] == [
        f"table       {t} (version 8)",
        "files       7 (571.0 MiB), 3,620 rows, 1 file without statistics",
        "small       3 files below 6.0 MiB (42.9% of files, 11.0 MiB)",
        "deleted     10 rows by deletion vectors (0.3% of rows) in 1 file",
        "clustering  id (zorder): 1.50 files per point query, overlap depth 1.46 average / 2 max, "
        "1 file without statistics",
        "partitions with the most small files (2 of 4)",
        "  date=null: 2 of 2 files small (10.0 MiB), 0 rows deleted, 0 B in tombstones",
        "  date=2024-01-02: 1 of 2 files small (1.0 MiB), 0 rows deleted, 30.0 MiB in tombstones",
    ]
    assert [line.split()[0] for line in lines if line.startswith(("tombstones", "log", "optimize", "vacuum"))] == [
        "tombstones",
        "log",
        "optimize",
        "vacuum",
    ]
    assert "optimize    version 7, " in lines[6] and "vacuum      version 4, " in lines[7]


def test_json_runs_without_pandas_or_maintenance_operations(tmp_path: Path) -> None:
    t = partitioned_table(tmp_path)
    before = tree_state(t)
    doc, report = run_command("health", "--json", "--columns", "id", str(t))
    assert (report["code"], report["heavy"], report["pandas_after"]) == (0, [], "pandas")
    health = ["clustering_columns", "clustering_quality", "compute", "histogram", "log_health", "metrics", "tombstones"]
    assert report["maintenance"] == sorted(
        [
            "airflow_provider_deltalite.maintenance.commit_kinds",
            "airflow_provider_deltalite.maintenance.health",
            *(f"airflow_provider_deltalite.maintenance.health.{m}" for m in health),
            "airflow_provider_deltalite.maintenance.optimize_stats",
            "airflow_provider_deltalite.maintenance.options",
        ]
    )
    assert (doc["version"], doc["files"], doc["bytes"], doc["smallFiles"], doc["deletedRows"]) == (
        8,
        7,
        571 * MIB,
        5,
        10,
    )
    assert (doc["clusteringSource"], doc["clustering"][0]["pointQueryFiles"]) == ("given", 1.5)
    assert [p["partitionValues"] for p in doc["partitions"]] == [
        {"date": None},
        {"date": "2023-12-31"},
        {"date": "2024-01-01"},
        {"date": "2024-01-02"},
    ]
    assert json.loads(json.dumps(doc)) == doc
    assert tree_state(t) == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--columns", "nope"], "column 'nope' is not in the table schema"),
        (["--columns", "id,"], "--columns: a column name is empty in 'id,'"),
        (["--min-file-size", "-5"], "argument --min-file-size: must be a positive number of bytes: -5"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    t = partitioned_table(tmp_path)
    before = tree_state(t)
    line = cli_failure("health", str(t), *args, "--html", tmp_path / "page.html")
    assert line.startswith("deltalite: error: ") and message in line, line
    assert tree_state(t) == before
    assert not (tmp_path / "page.html").exists()


def test_not_a_table(tmp_path: Path) -> None:
    line = cli_failure("health", tmp_path)
    assert "not a Delta table" in line and str(tmp_path) in line


def test_pandas_is_kept_out_unless_the_command_draws() -> None:
    import sys

    # the block only applies to a process that has not imported pandas yet: hide it while the blocks are entered
    saved = sys.modules.pop("pandas", None)
    try:
        with pandas_kept_out("health", None) as blocked:
            assert blocked
        with pandas_kept_out("health", None, draws=True) as blocked:
            assert not blocked
    finally:
        if saved is not None:
            sys.modules["pandas"] = saved
