"""`deltalite maintain` as a subprocess: the plan with its reasons, a dry run that writes nothing, a run whose result
delta-rs confirms, one JSON document, and every bad policy as one line on stderr, exit 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import deltalake

from tests.helpers import cli_failure, run_cli, tree_state
from tests.maintenance.planner_tables import delta_rs_table

POLICY = '{"target_file_size": 1048576, "max_commits_since_checkpoint": 5}'


def _rows(path: Path) -> list[tuple]:
    table = deltalake.DeltaTable(str(path)).to_pyarrow_table()
    return sorted(zip(*(table.column(n).to_pylist() for n in ("id", "p", "v")), strict=True))


def test_dry_run_prints_the_plan_with_its_reasons_and_writes_nothing(tmp_path: Path) -> None:
    path, removed = delta_rs_table(tmp_path / "t")
    policy = tmp_path / "policy.json"
    policy.write_text(POLICY)
    before = tree_state(path)
    out = run_cli("maintain", path, "--policy", policy, "--dry-run")
    assert out.returncode == 0, out.stderr
    assert tree_state(path) == before
    a_bytes = sum(f.stat().st_size for f in (path / "p=a").iterdir())
    kib = f"{a_bytes / 1024:.1f}".removesuffix(".0") + " KiB"
    assert out.stdout.splitlines() == [
        f"plan  {path} at version 8: 3 actions",
        f"  optimize    1 partition    read {kib}, write {kib}, 6 files into 1",
        "      partition p=a: 6 fragments (files below 128 KiB, target_file_size / fragment_ratio), at least "
        "min_input_files=5",
        "  vacuum      table          delete 1 file",
        f"      1 removed file ({removed} B) past the 168-hour retention, at least vacuum_min_reclaimable_files=1; "
        "FULL also deletes files the log never referenced, so that is a lower bound",
        "  checkpoint  table",
        "      9 commits since the newest checkpoint, at least max_commits_since_checkpoint=5",
        f"  total       read {kib}, write {kib}, 6 files into 1, delete 1 file",
    ]


def test_a_run_prints_what_changed_and_json_holds_plan_run_and_health(tmp_path: Path) -> None:
    path, _ = delta_rs_table(tmp_path / "t")
    rows = _rows(path)
    policy = tmp_path / "policy.toml"
    policy.write_text("target_file_size = 1048576\nmax_commits_since_checkpoint = 5\n")
    out = run_cli("maintain", path, "--policy", policy, "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert sorted(doc) == ["healthAfter", "healthBefore", "plan", "run"]
    assert [a["operation"] for a in doc["plan"]["actions"]] == ["optimize", "vacuum", "checkpoint"]
    assert [a["operation"] for a in doc["run"]["actions"]] == ["optimize", "vacuum", "checkpoint"]
    after = deltalake.DeltaTable(str(path))
    assert _rows(path) == rows
    assert (doc["healthBefore"]["files"], doc["healthAfter"]["files"]) == (8, len(after.file_uris())) == (8, 3)
    assert doc["healthAfter"]["version"] == after.version() == 11  # OPTIMIZE, VACUUM START and END
    assert (
        doc["healthBefore"]["log"]["commitsSinceCheckpoint"],
        doc["healthAfter"]["log"]["commitsSinceCheckpoint"],
    ) == (
        9,
        0,
    )
    # now nothing is left to do (the six removed files wait for their retention)
    out = run_cli("maintain", path, "--policy", policy)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"plan  {path} at version 11: nothing to run"]


def test_a_run_in_text_prints_each_action_and_the_health_before_and_after(tmp_path: Path) -> None:
    path, removed = delta_rs_table(tmp_path / "t")
    policy = tmp_path / "policy.json"
    policy.write_text(POLICY)
    out = run_cli("maintain", path, "--policy", policy)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("ran   3 actions in ")))
    a_files = 6
    assert lines[start + 1 :] == [
        "  optimize    removed 6 files, added 1, version 9",
        f"  vacuum      deleted 1 file ({removed} B)",
        "  checkpoint  checkpoint at version 11",
        "health  version 8 -> 11",
        "  files                     8 -> 3",
        "  small files               8 -> 3",  # every file is below the policy's 1 MiB
        "  deleted rows              0 -> 0",
        f"  tombstone bytes           {removed} B -> {_kib(path, a_files)}",
        "  commits since checkpoint  9 -> 0",
    ]


def _kib(path: Path, n: int) -> str:
    """The size of the six files OPTIMIZE removed (still on disk: within the retention), as the CLI prints it."""
    log = [json.loads(line) for line in (path / "_delta_log" / f"{9:020d}.json").read_text().splitlines()]
    removed = [a["remove"]["size"] for a in log if "remove" in a]
    assert len(removed) == n
    return f"{sum(removed) / 1024:.1f}".removesuffix(".0") + " KiB"


def test_a_bad_policy_is_one_line_and_nothing_is_written(tmp_path: Path) -> None:
    path, _ = delta_rs_table(tmp_path / "t")
    before = tree_state(path)
    unknown = tmp_path / "unknown.json"
    unknown.write_text('{"max_rewrite_byte_per_run": 10}')
    assert cli_failure("maintain", path, "--policy", unknown) == (
        f"deltalite: error: table {path}: unknown policy key 'max_rewrite_byte_per_run' (did you mean "
        "'max_rewrite_bytes_per_run'?)"
    )
    negative = tmp_path / "negative.toml"
    negative.write_text("max_files_deleted_per_run = -5\n")
    assert cli_failure("maintain", path, "--policy", negative) == (
        f"deltalite: error: table {path}: policy key 'max_files_deleted_per_run' must not be negative, got -5"
    )
    assert cli_failure("maintain", path, "--policy", tmp_path / "nope.json") == (
        f"deltalite: error: table {path}: cannot read the policy file '{tmp_path / 'nope.json'}': No such file or "
        "directory"
    )
    # a Spark option without the Spark executor (--spark-checkpoint-tasks was ignored before)
    assert cli_failure("maintain", path, "--spark-checkpoint-tasks", "0") == (
        "deltalite: error: --spark-checkpoint-tasks needs --executor spark"
    )
    assert tree_state(path) == before
