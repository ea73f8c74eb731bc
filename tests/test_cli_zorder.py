"""`deltalite zorder` as a subprocess: JSON consistent with the commit, a readable summary, one-line errors."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa

from tests.helpers import cli_failure, run_cli, tree_state


def _run(*args: Any) -> subprocess.CompletedProcess:
    return run_cli("zorder", *args)


def _table(path: Path) -> Path:
    for k in range(3):
        data = pa.table(
            {
                "x": pa.array(range(k * 10, k * 10 + 10), pa.int64()),
                "y": pa.array(range(100 - k * 10, 90 - k * 10, -1), pa.int64()),
                "p": ["a", "b"] * 5,
            }
        )
        deltalake.write_deltalake(str(path), data, mode="append", partition_by=["p"])
    return path


def _failed(*args: Any) -> str:
    return cli_failure("zorder", *args)


def test_json_and_summary(tmp_path: Path) -> None:
    path = _table(tmp_path / "t")
    out = _run("--columns", "x,y", "--curve", "hilbert", "--json", path)
    assert out.returncode == 0 and out.stderr == "" and out.stdout.count("\n") == 1, out.stderr
    doc = json.loads(out.stdout)
    assert (doc["committedVersion"], doc["numFilesRemoved"], doc["numFilesAdded"]) == (3, 6, 2)
    assert doc["zOrderStats"]["columns"] == ["x", "y"] and doc["zOrderStats"]["curve"] == "hilbert"
    info = json.loads((path / "_delta_log/00000000000000000003.json").read_text().splitlines()[0])["commitInfo"]
    assert info["operationParameters"]["zOrderBy"] == '["x","y"]'
    again = _run("--columns", "x,y", "--curve", "hilbert", path)
    assert again.returncode == 0, again.stderr
    lines = again.stdout.splitlines()
    assert lines[0] == "zorder    clustered 0 files (0 B) in 0 bins across 0 partitions"
    assert lines[-2:] == [
        "  nothing committed",
        "  curve hilbert over x, y: 0 partitions clustered, 2 already clustered and skipped",
    ]


def test_bad_inputs_are_one_line_and_write_nothing(tmp_path: Path) -> None:
    path = _table(tmp_path / "t")
    state = tree_state(path)
    prefix = f"deltalite: error: table {path}: "
    assert _failed("--columns", "nope", path) == prefix + "zorder column 'nope' does not exist in the table"
    assert _failed("--columns", "p", path) == (
        prefix + "zorder column 'p' is a partition column; every file holds one value of it already"
    )
    assert _failed("--columns", "x", "--curve", "peano", path) == (
        prefix + "curve must be one of zorder, hilbert, got 'peano'"
    )
    assert _failed("--columns", "x,", path) == (
        "deltalite: error: argument --columns: not a comma-separated list of column names: 'x,'"
    )
    assert _failed(path) == "deltalite: error: the following arguments are required: --columns"
    assert _failed("--columns", ",".join(["x"] * 33), path) == prefix + "zorder takes at most 32 columns, got 33"
    missing = tmp_path / "missing"
    assert _failed("--columns", "x", missing) == f"deltalite: error: table {missing}: path does not exist"
    assert tree_state(path) == state
