"""`deltalite maintain-lake` as a subprocess (issue 31, items 1, 3, 5, 6): the lake plan within one budget, the run
of the chosen tables, the history rows, and every bad input as one line, exit 2, nothing written.

The lake (tests/lake_tables.py) is written by delta-rs; which tables the budget admits is computed from the files on
disk (files removed per byte read, greedy), and the results are read back with delta-rs.
"""

from __future__ import annotations

import json
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

from tests.helpers import cli_failure, run_cli, tree_state
from tests.lake_tables import POLICY, REWRITES, Lake, data_sizes


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return Lake(tmp_path / "lake")


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "lake-policy.json"
    path.write_text(json.dumps(POLICY))
    return path


def test_dry_run_chooses_the_most_gain_per_byte_and_writes_nothing(lake: Lake, policy: Path) -> None:
    budget = lake.interesting_budget()
    chosen = lake.chosen_within(budget)
    assert chosen == lake.ranked()[:2]  # the budget cuts after the second compaction
    before = tree_state(lake.root)
    out = run_cli("maintain-lake", lake.root, "--budget-bytes", budget, "--policy", policy, "--dry-run", "--json")
    assert out.returncode == 0, out.stderr
    assert tree_state(lake.root) == before
    plan = json.loads(out.stdout)["lakePlan"]
    statuses = {Path(t["tableUri"]).name: t["status"] for t in plan["tables"]}
    assert statuses == {
        **{name: "chosen" if name in chosen else "budget" for name in REWRITES},
        "b_few3": "nothing to do",
        "d_vacuum": "chosen",
        "f_excluded": "excluded",
    }
    rewrites = [a for a in plan["actions"] if a["operation"] == "optimize"]
    assert [Path(a["tableUri"]).name for a in rewrites] == lake.ranked()
    assert [a["estimate"]["bytesRead"] for a in rewrites] == [lake.rewrite_bytes[n] for n in lake.ranked()]
    assert [a["gain"]["filesRemoved"] for a in rewrites] == [lake.gain[n] for n in lake.ranked()]
    shares = {Path(t["tableUri"]).name: t["policy"].get("max_rewrite_bytes_per_run") for t in plan["tables"]}
    assert {n: shares[n] for n in chosen} == {n: lake.rewrite_bytes[n] for n in chosen}
    assert plan["total"]["bytesRead"] == sum(lake.rewrite_bytes[n] for n in chosen) <= budget


def test_a_run_maintains_the_chosen_tables_only_and_records_them(lake: Lake, policy: Path, tmp_path: Path) -> None:
    budget = lake.interesting_budget()
    chosen = lake.chosen_within(budget)
    history = tmp_path / "history"
    versions = lake.state()
    out = run_cli("maintain-lake", *lake.prefixes, "--budget-bytes", budget, "--policy", policy, "--history", history)
    assert out.returncode == 0, out.stderr
    after = lake.state()
    for name in REWRITES:
        files = len(deltalake.DeltaTable(lake.uri(name)).file_uris())
        if name in chosen:  # one OPTIMIZE commit, one file left
            assert (after[name], files) == (versions[name] + 1, 1), name
        else:
            assert (after[name], files) == (versions[name], REWRITES[name][0]), name
    assert after["d_vacuum"] == versions["d_vacuum"] + 2  # VACUUM START and END
    assert not lake.removed_path.exists()
    assert (after["b_few3"], after["f_excluded"]) == (versions["b_few3"], versions["f_excluded"])
    rows = deltalake.DeltaTable(str(history)).to_pyarrow_table().to_pylist()
    got = sorted((Path(r["table_uri"]).name, r["operation"], r["outcome"]) for r in rows)
    assert got == sorted(
        [(n, "optimize", "committed") for n in chosen]
        + [(n, "optimize", "deferred by budget") for n in REWRITES if n not in chosen]
        + [("d_vacuum", "vacuum", "committed")]
    )
    assert len({r["run_id"] for r in rows}) == 1
    committed = {Path(r["table_uri"]).name: r for r in rows if r["outcome"] == "committed"}
    for name in chosen:
        assert (committed[name]["files_read"], committed[name]["bytes_read"]) == (
            REWRITES[name][0],
            lake.rewrite_bytes[name],
        )
        assert committed[name]["bytes_written"] == sum(data_sizes(lake.path(name))) - lake.rewrite_bytes[name]
    lines = out.stdout.splitlines()
    assert [line.split(":")[0] for line in lines if line.startswith("ran ")] == [
        f"ran   {lake.uri(n)}" for n in ["d_vacuum", *chosen]
    ]


def test_no_budget_takes_every_table_that_needs_work(lake: Lake, policy: Path) -> None:
    out = run_cli("maintain-lake", lake.root, "--policy", policy, "--dry-run", "--json")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)["lakePlan"]
    assert sorted(Path(t["tableUri"]).name for t in plan["tables"] if t["chosen"]) == sorted([*REWRITES, "d_vacuum"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--budget-bytes", "0"], "deltalite: error: argument --budget-bytes: must be a whole number above 0, got 0"),
        (["--budget-bytes", "-5"], "deltalite: error: argument --budget-bytes: must be a whole number above 0, got -5"),
        (["--budget-files", "0"], "deltalite: error: argument --budget-files: must be a whole number above 0, got 0"),
        (["--budget-seconds", "-1"], "deltalite: error: argument --budget-seconds: must be a number above 0, got -1"),
    ],
)
def test_a_budget_of_zero_or_below_is_refused(lake: Lake, args: list[str], message: str) -> None:
    before = tree_state(lake.root)
    assert cli_failure("maintain-lake", lake.root, *args) == message
    assert tree_state(lake.root) == before


def test_an_unknown_policy_key_is_refused(lake: Lake, tmp_path: Path) -> None:
    before = tree_state(lake.root)
    policy = tmp_path / "p.toml"
    policy.write_text('[tables."*/a_small8"]\npriorty = "pin"\n')
    assert cli_failure("maintain-lake", lake.root, "--policy", policy) == (
        "deltalite: error: unknown policy key 'tables.*/a_small8.priorty' (did you mean 'tables.*/a_small8.priority'?)"
    )
    policy.write_text("min_imput_files = 3\n")
    assert cli_failure("maintain-lake", lake.root, "--policy", policy) == (
        "deltalite: error: unknown policy key 'min_imput_files' (did you mean 'min_input_files'?)"
    )
    assert tree_state(lake.root) == before


def test_a_history_that_is_not_a_history_table_is_refused(lake: Lake, tmp_path: Path) -> None:
    not_delta = tmp_path / "notes"
    not_delta.mkdir()
    (not_delta / "a.txt").write_text("x")
    other = tmp_path / "other"
    deltalake.write_deltalake(str(other), pa.table({"table_uri": ["x"], "n": [1]}))
    before = tree_state(tmp_path)
    assert cli_failure("maintain-lake", lake.root, "--history", not_delta) == (
        f"deltalite: error: table {not_delta}: the operations history location is not a Delta table (it holds files "
        "but no _delta_log)"
    )
    assert cli_failure("maintain-lake", lake.root, "--history", other) == (
        f"deltalite: error: table {other}: the operations history table's schema is not the history schema: it has "
        "no column 'table_id'"
    )
    # the same check guards the single-table commands
    assert cli_failure("optimize", lake.uri("a_small8"), "--history", other).endswith("it has no column 'table_id'")
    assert cli_failure("maintain", lake.uri("a_small8"), "--history", not_delta).endswith(
        "(it holds files but no _delta_log)"
    )
    assert tree_state(tmp_path) == before


def test_the_time_budget_uses_the_speed_the_history_observed(lake: Lake, policy: Path, tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from airflow_provider_deltalite.maintenance.history import append_history

    history = tmp_path / "history"
    start = datetime(2026, 11, 30, tzinfo=UTC)
    # c_small12 was rewritten at 10 bytes per second on the local executor: its 10 KiB now take about 17 minutes
    slow = {"table_uri": lake.uri("c_small12"), "operation": "optimize", "outcome": "committed", "executor": "local",
            "start_time": start, "end_time": start + timedelta(seconds=100), "bytes_read": 1000}  # fmt: skip
    append_history(str(history), [slow, {**slow, "executor": "spark", "bytes_read": 10**12}])
    out = run_cli(
        "maintain-lake", lake.root, "--policy", policy, "--budget-seconds", 60, "--history", history, "--dry-run",
        "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)["lakePlan"]
    [c] = [a for a in plan["actions"] if a["tableUri"] == lake.uri("c_small12")]
    assert c["seconds"] == lake.rewrite_bytes["c_small12"] / 10
    assert (c["chosen"], c["reason"]) == (
        False,
        f"budget: an estimated {c['seconds']:.0f} s does not fit the 60 s left",
    )
    chosen = sorted(Path(t["tableUri"]).name for t in plan["tables"] if t["chosen"])
    assert chosen == sorted(n for n in [*REWRITES, "d_vacuum"] if n != "c_small12")
    assert len(deltalake.DeltaTable(str(history)).to_pyarrow_table()) == 2  # a dry run adds no row


def test_lake_health_lists_the_tables_worst_first(lake: Lake, tmp_path: Path) -> None:
    page = tmp_path / "lake.html"
    before = tree_state(lake.root)
    out = run_cli("lake-health", *lake.prefixes, "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    # every table is all small files (100%) but d_vacuum: its one live file of two is small too; ties go by the
    # reclaimable bytes (only d_vacuum has some), then the URI
    uris = [e["tableUri"] for e in doc]
    assert uris[0] == lake.uri("d_vacuum")
    assert uris[1:] == sorted(lake.uri(n) for n in [*REWRITES, "b_few3", "f_excluded"])
    files = {Path(e["tableUri"]).name: e["health"]["files"] for e in doc}
    assert files == {**{n: f for n, (f, _) in REWRITES.items()}, "b_few3": 3, "d_vacuum": 1, "f_excluded": 10}
    assert doc[0]["health"]["tombstones"]["reclaimableBytes"] == lake.removed_path.stat().st_size
    assert all(e["lastMaintenance"] is None for e in doc)
    out = run_cli("lake-health", lake.root, "--html", page)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == f"page  {page}"
    assert len(out.stdout.splitlines()) == len(doc) + 1
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert tree_state(lake.root) == before


def test_health_with_history_needs_html_and_a_history_table(lake: Lake, tmp_path: Path) -> None:
    not_delta = tmp_path / "notes"
    not_delta.mkdir()
    (not_delta / "a.txt").write_text("x")
    table = lake.uri("a_small8")
    assert cli_failure("health", table, "--history", not_delta) == (
        "deltalite: error: --history draws a panel of the page: it needs --html"
    )
    assert cli_failure("health", table, "--history", not_delta, "--html", tmp_path / "p.html") == (
        f"deltalite: error: table {not_delta}: the operations history location is not a Delta table (it holds files "
        "but no _delta_log)"
    )
    assert cli_failure("lake-health", lake.root, "--history", not_delta).endswith("(it holds files but no _delta_log)")
    assert not (tmp_path / "p.html").exists()
    history = tmp_path / "history"
    assert run_cli("optimize", table, "--history", history).returncode == 0
    out = run_cli("health", table, "--history", history, "--html", tmp_path / "p.html")
    assert out.returncode == 0, out.stderr
    assert "Files and bytes over time, maintenance runs marked" in (tmp_path / "p.html").read_text()


def test_a_history_that_cannot_be_written_is_one_warning_line_and_the_run_succeeds(tmp_path: Path) -> None:
    table = tmp_path / "t"
    for i in range(6):
        deltalake.write_deltalake(str(table), pa.table({"id": [i]}), mode="append")
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    history = a_file / "history"  # passes the check (nothing there), but no table can be created under a file
    out = run_cli("optimize", table, "--history", history, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["committedVersion"] == 6
    assert deltalake.DeltaTable(str(table)).version() == 6
    assert out.stderr.splitlines() == [
        f"deltalite: warning: the operations history {history} was not written: FileNotFoundError: "
        "_delta_log/00000000000000000000.json"
    ]
