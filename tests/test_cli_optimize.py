"""`deltalite optimize` as a subprocess: JSON consistent with the commit, a readable summary, one-line errors.

(`deltalite demo`, i.e. `make demo`, runs the nightly compaction DAG: tests/airflow/test_dags_end_to_end.py.)"""

from __future__ import annotations

import json
import os
import pty
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from tests.helpers import CORPUS, cli_failure, run_cli, tree_state
from tests.oracles import agreed_rows

ICEBERG = CORPUS / "delta-golden/table-with-icebegCompatV2Enabled"  # writer feature icebergCompatV2 (not writable)
STATS_KEYS = {
    "numFilesAdded",
    "numFilesRemoved",
    "filesAdded",
    "filesRemoved",
    "partitionsOptimized",
    "numBins",
    "numBatches",
    "totalConsideredFiles",
    "totalFilesSkipped",
    "numDeletionVectorsRemoved",
    "numDeletionVectorRowsRemoved",
    "zOrderStats",
    "startTimeMs",
    "endTimeMs",
    "readVersion",
    "committedVersion",
    "committedVersions",
    "executor",
    "totalClusterParallelism",
    "dryRun",
    "plan",
    "clusteringStats",
    "numBinsDeferred",
    "bytesDeferred",
    "numFilesCopied",
    "numFilesReencoded",
    "bytesCopied",
    "bytesUploaded",
}


def _run(*args: Any) -> subprocess.CompletedProcess:
    return run_cli("optimize", *args)


def _table(path: Path, files: int = 3, partitioned: bool = True) -> Path:
    for k in range(files):
        data = pa.table({"id": pa.array([k, k + 100], pa.int64()), "p": ["x", "y"]})
        deltalake.write_deltalake(str(path), data, mode="append", partition_by=["p"] if partitioned else None)
    return path


def _failed(*args: Any) -> str:
    return cli_failure("optimize", *args)


def test_json_is_one_document_consistent_with_the_commit(tmp_path: Path) -> None:
    path = _table(tmp_path / "t")
    out = _run("--json", path)
    assert out.returncode == 0 and out.stderr == ""
    assert out.stdout.count("\n") == 1
    doc = json.loads(out.stdout)
    assert set(doc) == STATS_KEYS
    actions = [json.loads(line) for line in (path / "_delta_log/00000000000000000003.json").read_text().splitlines()]
    adds = [a["add"] for a in actions if "add" in a]
    removes = [a["remove"] for a in actions if "remove" in a]
    assert (doc["readVersion"], doc["committedVersion"], doc["committedVersions"]) == (2, 3, [3])
    assert (doc["numFilesRemoved"], doc["numFilesAdded"]) == (len(removes), len(adds)) == (6, 2)
    assert doc["filesAdded"]["totalSize"] == sum(a["size"] for a in adds)
    assert doc["filesRemoved"] == {
        "min": min(r["size"] for r in removes),
        "max": max(r["size"] for r in removes),
        "avg": sum(r["size"] for r in removes) / 6,
        "totalFiles": 6,
        "totalSize": sum(r["size"] for r in removes),
    }
    assert (doc["partitionsOptimized"], doc["numBins"], doc["numBatches"]) == (2, 2, 1)
    assert (doc["executor"], doc["zOrderStats"], doc["dryRun"], doc["plan"]) == ("local", None, False, None)
    metrics = actions[0]["commitInfo"]["operationMetrics"]
    assert metrics["numAddedFiles"] == "2" and metrics["numRemovedFiles"] == "6"


def test_human_summary_and_second_run(tmp_path: Path) -> None:
    path = _table(tmp_path / "t")
    out = _run(path)
    assert out.returncode == 0 and out.stderr == ""
    lines = out.stdout.splitlines()
    assert lines[0].startswith("optimize  rewrote 6 files (") and lines[0].endswith(") in 2 bins across 2 partitions")
    assert lines[1].startswith("  added 2 files (")
    assert lines[2] == "  considered 6 files, skipped 0; deletion vectors purged: 0"
    assert lines[3] == "  committed version 3 (read version 2), executor local"
    again = _run(path)
    assert again.returncode == 0
    assert again.stdout.splitlines()[-1] == "  nothing committed"


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    path = _table(tmp_path / "t")
    state = tree_state(path)
    out = _run("--dry-run", "--json", "--where", "p = 'x'", path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert tree_state(path) == state
    assert (doc["dryRun"], doc["committedVersion"], doc["numFilesRemoved"], doc["totalConsideredFiles"]) == (
        True,
        None,
        3,
        3,
    )
    assert [b["partitionValues"] for b in doc["plan"]] == [{"p": "x"}]


def test_progress_bar_only_on_a_terminal(tmp_path: Path) -> None:
    path = _table(tmp_path / "t")
    primary, secondary = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "airflow_provider_deltalite", "optimize", str(path)],
            stdout=subprocess.PIPE,
            stderr=secondary,
            timeout=300,
        )
        os.close(secondary)
        chunks = []
        while True:
            try:
                data = os.read(primary, 4096)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(primary)
    assert proc.returncode == 0
    tty = b"".join(chunks).decode()
    assert "] 2/2 bins, " in tty and "rewritten" in tty
    assert "bins" not in _run("--json", _table(tmp_path / "u")).stderr


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.spark  # --executor spark against a closed port starts a JVM
def test_bad_inputs_are_one_line_and_write_nothing(tmp_path: Path) -> None:
    path = _table(tmp_path / "t")
    state = tree_state(path)
    missing = tmp_path / "missing"
    assert _failed("--json", missing) == f"deltalite: error: table {missing}: path does not exist"
    plain = tmp_path / "plain"
    plain.mkdir()
    assert "_delta_log" in _failed(plain)
    assert _failed("--where", "id = 1", path) == (
        f"deltalite: error: table {path}: where may only reference partition columns; 'id' is not one "
        "(partition columns: p)"
    )
    assert _failed("--target-size", "0", path) == (
        f"deltalite: error: table {path}: target_size must be a positive number of bytes, got 0"
    )
    assert _failed("--min-file-size", "-1", path) == (
        f"deltalite: error: table {path}: min_file_size must be a positive number of bytes, got -1"
    )
    assert _failed("--batch-size", "many", path) == (
        "deltalite: error: argument --batch-size: not a whole number of bytes: 'many'"
    )
    assert _failed("--min-row-group-size", "0", path) == (
        f"deltalite: error: table {path}: min_row_group_size must be a positive number of bytes, got 0"
    )
    assert _failed("--spark-master", "local[2]", path) == "deltalite: error: --spark-master needs --executor spark"
    assert _failed("--max-concurrent-tasks", "0", path) == (
        "deltalite: error: max_concurrent_tasks must be at least 1, got 0"
    )
    port = _closed_port()
    line = _failed("--executor", "spark", "--spark-master", f"spark://127.0.0.1:{port}", path)
    assert line.startswith("deltalite: error: ") and f"spark://127.0.0.1:{port}" in line
    iceberg_state = tree_state(ICEBERG)
    line = _failed(ICEBERG)
    assert line.startswith(f"deltalite: error: table {ICEBERG}: ") and "icebergCompatV2" in line
    assert tree_state(ICEBERG) == iceberg_state
    assert tree_state(path) == state


@pytest.mark.parametrize(
    ("command", "flags", "problem"),
    [
        ("optimize", ("--target-size", "0"), "target_size must be a positive number of bytes, got 0"),
        ("zorder", ("--columns", "x", "--curve", "peano"), "curve must be one of zorder, hilbert, got 'peano'"),
        ("vacuum", ("--retention-hours", "-1"), "retention_hours must not be negative, got -1"),
    ],
)
def test_an_option_error_names_the_table_as_resolved_not_as_typed(
    tmp_path: Path, command: str, flags: tuple[str, ...], problem: str
) -> None:
    deltalake.write_deltalake(str(tmp_path / "t"), pa.table({"x": pa.array([1, 2], pa.int64())}))
    before = tree_state(tmp_path / "t")
    out = subprocess.run(
        [sys.executable, "-m", "airflow_provider_deltalite", command, "t", *flags],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == f"deltalite: error: table {tmp_path / 't'}: {problem}\n"
    assert tree_state(tmp_path / "t") == before


def test_min_row_group_size_copies_row_groups_and_the_json_says_so(tmp_path: Path) -> None:
    path = _table(tmp_path / "t", files=3, partitioned=False)
    before = agreed_rows(path)
    result = run_cli("optimize", "--json", "--min-row-group-size", "1", path)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert (doc["numFilesCopied"], doc["numFilesReencoded"], doc["numFilesRemoved"]) == (3, 0, 3)
    assert doc["bytesCopied"] > 0
    assert agreed_rows(path) == before
