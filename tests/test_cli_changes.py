"""`deltalite changes` and `deltalite watch` as subprocesses: the JSON document, the readable lines, a watch that
prints the data commits made while it runs and exits 0 on Ctrl-C, and bad input as one line, exit 2."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

import deltalake
import pyarrow as pa
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.cli import change_line
from tests.helpers import cli_failure, run_cli, tree_state
from tests.maintenance.test_changes import KINDS, _rows, append_ours, build_history

LINE_TIMEOUT_S = 20


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_history(tmp_path_factory.mktemp("cli-history") / "t")


def test_changes_json_lists_the_data_versions(history: Path) -> None:
    out = run_cli("changes", history, "--since", 1, "--json")
    assert (out.returncode, out.stderr) == (0, "")
    doc = json.loads(out.stdout)
    assert doc == DeltaTable(str(history)).changes(since=1).to_dict()
    assert (doc["since"], doc["latest"]) == (1, 11)
    assert [(v["version"], v["kind"], v["operation"]) for v in doc["versions"]] == [
        (8, "data", "DELETE"),
        (9, "data", "WRITE"),
        (11, "data", "WRITE"),
    ]
    assert [v["added_rows"] for v in doc["versions"]] == [3500, 300, 10]
    assert set(doc["versions"][0]) == {
        "version",
        "kind",
        "operation",
        "timestamp",
        "operation_parameters",
        "added_files",
        "removed_files",
        "added_rows",
        "removed_rows",
        "added_bytes",
        "removed_bytes",
        "added_paths",
    }

    every = json.loads(run_cli("changes", history, "--since", 1, "--until", 7, "--all", "--json").stdout)
    assert [(v["version"], v["kind"]) for v in every["versions"]] == list(enumerate(KINDS))[2:8]
    assert every["latest"] == 7
    nothing = json.loads(run_cli("changes", history, "--since", 11, "--json").stdout)
    assert nothing == {"since": 11, "latest": 11, "versions": []}


def test_changes_readable_lines(history: Path) -> None:
    out = run_cli("changes", history, "--since", 7, "--all")
    assert (out.returncode, out.stderr) == (0, "")
    changes = DeltaTable(str(history)).changes(since=7).changes
    assert out.stdout.splitlines() == [
        *(change_line(c.to_dict()) for c in changes),
        "4 commits after version 7 (4 commits in all); latest version 11",
    ]
    lines = out.stdout.splitlines()
    assert lines[0].split()[:3] == ["8", "data", "DELETE"]
    assert lines[0].endswith(
        f"+1 files (3500 rows, {f'{changes[0].added_bytes / 1024:.1f}'.removesuffix('.0')} KiB)  -1 files"
    )
    assert lines[2].split()[:4] == ["10", "metadata", "ADD", "COLUMN"]
    assert "files" not in lines[2]
    data_only = run_cli("changes", history, "--since", 7).stdout.splitlines()
    assert data_only[-1] == "3 data-changing commits after version 7 (4 commits in all); latest version 11"
    assert [line.split()[0] for line in data_only[:-1]] == ["8", "9", "11"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--since", "-1"), "deltalite: error: argument --since: must not be negative: -1"),
        (("--since", "x"), "deltalite: error: argument --since: not a whole number: 'x'"),
        ((), "deltalite: error: the following arguments are required: --since"),
        (("--since", "3", "--until", "2"), "deltalite: error: table {table}: until (2) must not be below since (3)"),
    ],
)
def test_changes_bad_input(history: Path, args: tuple[str, ...], message: str) -> None:
    before = tree_state(history)
    assert cli_failure("changes", history, *args) == message.format(table=history)
    assert tree_state(history) == before


def test_changes_on_a_missing_table_or_a_corrupt_commit(history: Path, tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    assert cli_failure("changes", missing, "--since", 0) == f"deltalite: error: table {missing}: path does not exist"
    assert not missing.exists()
    copy = Path(shutil.copytree(history, tmp_path / "copy"))
    commit = copy / "_delta_log" / f"{9:020d}.json"
    commit.write_text(commit.read_text()[:-30])
    before = tree_state(copy)
    assert cli_failure("changes", copy, "--since", 5, "--json") == (
        f"deltalite: error: table {copy}: commit 9 line 2 is not valid JSON (truncated or corrupt commit file)"
    )
    assert tree_state(copy) == before


# -- watch ------------------------------------------------------------------------------------------------------


def _lines(stream: IO[str]) -> queue.Queue:
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _watch(*args: Any) -> tuple[subprocess.Popen, queue.Queue, queue.Queue]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "airflow_provider_deltalite", "watch", *(str(a) for a in args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
    )
    return proc, _lines(proc.stdout), _lines(proc.stderr)  # type: ignore[arg-type]


def _interrupt(proc: subprocess.Popen, err: queue.Queue) -> int:
    proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(timeout=LINE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        # seen once under load and not reproduced since: abort it so faulthandler prints where every thread was
        proc.send_signal(signal.SIGABRT)
        proc.wait(timeout=LINE_TIMEOUT_S)
        lines = []
        while (line := err.get(timeout=LINE_TIMEOUT_S)) is not None:
            lines.append(line)
        raise AssertionError("watch did not exit on SIGINT; its threads:\n" + "\n".join(lines)) from None


def test_watch_prints_data_commits_as_they_land_and_exits_0_on_ctrl_c(history: Path, tmp_path: Path) -> None:
    path = Path(shutil.copytree(history, tmp_path / "t"))
    proc, out, err = _watch(path, "--since", 10, "--interval", 0.2, "--json")
    try:
        assert err.get(timeout=LINE_TIMEOUT_S) == (
            f"deltalite: watching {path} after version 10 every 0.2 s (Ctrl-C stops)"
        )
        first = json.loads(out.get(timeout=LINE_TIMEOUT_S))  # version 11 was already there
        assert (first["version"], first["kind"], first["added_rows"]) == (11, "data", 10)
        assert append_ours(path, _rows(100, 7).append_column("note", pa.array(["w"] * 7))) == 12
        landed = json.loads(out.get(timeout=LINE_TIMEOUT_S))
        assert (landed["version"], landed["kind"], landed["operation"], landed["added_rows"]) == (
            12,
            "data",
            "WRITE",
            7,
        )
        assert DeltaTable(str(path)).optimize().committed_version == 13  # a rearrangement: not printed
        deltalake.write_deltalake(str(path), _rows(200, 2).append_column("note", pa.array(["v"] * 2)), mode="append")
        after = json.loads(out.get(timeout=LINE_TIMEOUT_S))
        assert (after["version"], after["kind"], after["added_rows"]) == (14, "data", 2)
        assert _interrupt(proc, err) == 0
    finally:
        proc.kill()
        proc.wait()
    assert out.get(timeout=LINE_TIMEOUT_S) is None  # nothing else was printed
    assert err.get(timeout=LINE_TIMEOUT_S) is None  # no traceback on Ctrl-C


def test_watch_from_the_latest_version_with_all_kinds(history: Path, tmp_path: Path) -> None:
    path = Path(shutil.copytree(history, tmp_path / "t"))
    proc, out, err = _watch(path, "--interval", 0.2, "--all")
    try:
        assert "after version 11 every 0.2 s" in err.get(timeout=LINE_TIMEOUT_S)
        assert DeltaTable(str(path)).optimize().committed_version == 12
        line = out.get(timeout=LINE_TIMEOUT_S)
        assert line.split()[:3] == ["12", "rearrange", "OPTIMIZE"]
        assert _interrupt(proc, err) == 0
    finally:
        proc.kill()
        proc.wait()
    assert out.get(timeout=LINE_TIMEOUT_S) is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--interval", "0"), "deltalite: error: argument --interval: must be a positive number of seconds: 0"),
        (("--interval", "soon"), "deltalite: error: argument --interval: not a number of seconds: 'soon'"),
        (("--since", "-3"), "deltalite: error: argument --since: must not be negative: -3"),
        (
            ("--since", "40"),
            "deltalite: error: table {table}: the newest version is 11, below the cursor 40: the "
            "table was recreated (start again from -1, or use on_recreate='resume')",
        ),
    ],
)
def test_watch_bad_input(history: Path, args: tuple[str, ...], message: str) -> None:
    assert cli_failure("watch", history, *args) == message.format(table=history)


def test_watch_on_a_missing_table(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    assert cli_failure("watch", missing, "--since", 2) == f"deltalite: error: table {missing}: path does not exist"
