"""The `deltalite` CLI run as a subprocess on corpus tables, checked against delta-rs and the commit files.

Every invocation pays the interpreter + pyarrow start-up, so the module starts all of them at once (``_prelaunch``)
and the tests read the cached results; an invocation not in the list simply runs when a test asks for it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.helpers import CORPUS, copy_table, tree_state

DV = CORPUS / "delta-golden/dv-partitioned-with-checkpoint"  # v15, checkpoint 10, DVs, partitioned by part
MULTI = CORPUS / "dat-historical/multi_partitioned/delta"  # v2, partitioned by letter/date/data, escaped paths
BASIC = CORPUS / "delta-kernel-defaults/basic-with-checkpoint"  # v14, checkpoint 10, 30 files
ITER = CORPUS / "delta-golden/125-iterator-bug"  # v11, checkpoint 10
LETTERS = CORPUS / "dat-historical/basic_partitioned/delta"  # v1, partitioned by letter
HISTORY = CORPUS / "delta-golden/basic-with-inserts-deletes-checkpoint"  # v13 DELETE, v12 WRITE
FEATURES = CORPUS / "delta-rs/simple_table_features"  # minReaderVersion 5
BIN_LIMITS = ((1 << 20, "<1MB"), (8 << 20, "<8MB"), (64 << 20, "<64MB"), (128 << 20, "<128MB"), (1 << 30, "<1GB"))

_RESULTS: dict[tuple[str, ...], subprocess.CompletedProcess] = {}


def _run(args: tuple[str, ...]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "airflow_provider_deltalite", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def cli(*args: Any) -> subprocess.CompletedProcess:
    key = tuple(str(a) for a in args)
    if key not in _RESULTS:
        _RESULTS[key] = _run(key)
    return _RESULTS[key]


def ok_json(*args: Any) -> Any:
    """Run, expect success and exactly one JSON document on stdout."""
    out = cli(*args)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    assert out.stdout.endswith("\n") and out.stdout.count("\n") == 1, out.stdout[:500]
    return json.loads(out.stdout)


def failed(*args: Any) -> str:
    """Run, expect exit 2, empty stdout and exactly one stderr line starting `deltalite: error:`; return it."""
    out = cli(*args)
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert out.stdout == ""
    assert out.stderr.endswith("\n") and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("deltalite: error: "), out.stderr
    return out.stderr.rstrip("\n")


# -- damaged tables (built once) and the bad-input cases ------------------------------------------------------


def _build_bad_tables(root: Path) -> dict[str, Path]:
    t: dict[str, Path] = {"missing": root / "does-not-exist"}
    t["no_log"] = root / "no_log"
    t["no_log"].mkdir()
    (t["no_log"] / "data.parquet").write_bytes(b"PAR1")
    t["empty_log"] = root / "empty_log"
    (t["empty_log"] / "_delta_log").mkdir(parents=True)
    last = "_delta_log/00000000000000000002.json"
    for name, change in (
        ("truncated", lambda d: d[: len(d) // 2]),
        ("non_json", lambda d: d + b"this is not json\n"),
        ("empty_commit", lambda _d: b""),
        ("bom", lambda d: b"\xef\xbb\xbf" + d),
    ):
        t[name] = copy_table(MULTI, root / name)
        (t[name] / last).write_bytes(change((t[name] / last).read_bytes()))
    t["bad_checkpoint"] = copy_table(ITER, root / "bad_checkpoint")
    log = t["bad_checkpoint"] / "_delta_log"
    checkpoint = log / "00000000000000000010.checkpoint.parquet"
    checkpoint.write_bytes(checkpoint.read_bytes()[:4000])
    for v in range(10):
        (log / f"{v:020d}.json").unlink()
    t["old_mtimes"] = copy_table(MULTI, root / "old_mtimes")
    for v in range(3):
        os.utime(t["old_mtimes"] / f"_delta_log/{v:020d}.json", (1_600_000_000 + v, 1_600_000_000 + v))
    return t


def _bad_cases(t: dict[str, Path]) -> dict[str, tuple[tuple[str, ...], Path, str]]:
    """name -> (argv, table named in the message, fragment naming the problem)."""
    return {
        "missing": (("describe", "--json", str(t["missing"])), t["missing"], "path does not exist"),
        "missing_history": (("history", str(t["missing"])), t["missing"], "path does not exist"),
        "no_log": (("files", "--json", str(t["no_log"])), t["no_log"], "no _delta_log directory"),
        "empty_log": (("scan", "--json", str(t["empty_log"])), t["empty_log"], "_delta_log holds no commits"),
        "truncated": (("describe", str(t["truncated"])), t["truncated"], "commit 2 line 4 is not valid JSON"),
        "non_json": (("scan", "--json", str(t["non_json"])), t["non_json"], "commit 2 line 9 is not valid JSON"),
        "empty_commit": (("files", str(t["empty_commit"])), t["empty_commit"], "commit 2 is an empty file"),
        "bad_checkpoint": (
            ("describe", "--json", str(t["bad_checkpoint"])),
            t["bad_checkpoint"],
            "checkpoint 10 is unreadable",
        ),
        "version": (
            ("describe", "--json", "--version", "3", str(MULTI)),
            MULTI,
            "version 3 does not exist (latest is 2)",
        ),
        "scan_version": (("scan", "--version", "12", str(ITER)), ITER, "version 12 does not exist (latest is 11)"),
        "timestamp": (
            ("files", "--json", "--timestamp", "2019-01-01T00:00:00Z", str(t["old_mtimes"])),
            t["old_mtimes"],
            "is before the earliest available version 0",
        ),
        "protocol": (("describe", "--json", str(FEATURES)), FEATURES, "minReaderVersion 5 is not supported"),
    }


BAD_CASE_NAMES = [
    "missing",
    "missing_history",
    "no_log",
    "empty_log",
    "truncated",
    "non_json",
    "empty_commit",
    "bad_checkpoint",
    "version",
    "scan_version",
    "timestamp",
    "protocol",
]


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cli_out")


@pytest.fixture(scope="module")
def bad(tmp_path_factory: pytest.TempPathFactory, out_dir: Path) -> dict[str, Any]:
    """Build the damaged tables, then run every known invocation concurrently; records the tree before and after."""
    root = tmp_path_factory.mktemp("cli_bad")
    tables = _build_bad_tables(root)
    cases = _bad_cases(tables)
    before = tree_state(root)
    invocations = (
        [argv for argv, _t, _f in cases.values()]
        + _good_invocations(out_dir)
        + [
            ("files", "--json", str(tables["bom"])),
        ]
    )
    keys = [tuple(str(a) for a in argv) for argv in invocations]
    with ThreadPoolExecutor(max_workers=4) as pool:
        for key, result in zip(keys, pool.map(_run, keys), strict=True):
            _RESULTS[key] = result
    return {"tables": tables, "cases": cases, "root": root, "before": before}


def _good_invocations(out_dir: Path) -> list[tuple[str, ...]]:
    return [
        ("describe", "--json", str(DV)),
        ("describe", "--json", str(MULTI)),
        ("describe", "--json", str(BASIC)),
        ("describe", str(DV)),
        ("files", "--json", str(DV)),
        ("files", "--json", str(MULTI)),
        ("files", "--json", "--version", "5", str(DV)),
        ("files", "--json", "--version", "12", str(BASIC)),
        ("history", "--json", "--limit", "2", str(HISTORY)),
        ("scan", "--json", str(DV)),
        ("scan", "--json", str(MULTI)),
        ("scan", "--json", "--output", str(out_dir / "basic.parquet"), str(BASIC)),
        ("scan", "--json", "--filter", "part = 0", str(DV)),
        ("scan", "--json", "--filter", "letter = 'a'", str(LETTERS)),
        ("scan", "--filter", "no_such_column = 1", str(ITER)),
        ("describe", "--version", "-1", str(MULTI)),
        ("describe", "--storage-option", "novalue", str(MULTI)),
        ("frobnicate", str(MULTI)),
    ]


@pytest.fixture(autouse=True)
def _prelaunch(bad: dict[str, Any]) -> None:
    """Every test depends on the concurrent batch having run."""


# -- oracles -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def deltalake() -> Any:
    import deltalake

    return deltalake


def add_actions(deltalake: Any, path: Path, version: int | None = None) -> pa.Table:
    return pa.table(deltalake.DeltaTable(str(path), version=version).get_add_actions(flatten=True))


def delta_rs_count(deltalake: Any, path: Path, where: str = "") -> int:
    """Row count through delta-rs's DataFusion reader (it applies deletion vectors)."""
    reader = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(str(path)))
    result = pa.table(reader.execute(f"SELECT count(*) AS n FROM t {where}").read_all())
    return result.column("n")[0].as_py()


def commit_operation(path: Path, version: int) -> str:
    for line in (path / "_delta_log" / f"{version:020d}.json").read_text().splitlines():
        action = json.loads(line)
        if "commitInfo" in action:
            return action["commitInfo"]["operation"]
    raise AssertionError(f"no commitInfo in version {version}")


# -- describe ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("table", [DV, MULTI, BASIC], ids=lambda p: p.parent.name if p.name == "delta" else p.name)
def test_describe_json_matches_delta_rs(deltalake: Any, table: Path) -> None:
    doc = ok_json("describe", "--json", table)
    dt = deltalake.DeltaTable(str(table))
    actions = add_actions(deltalake, table)
    sizes = actions.column("size_bytes").to_pylist()
    assert doc["table"] == str(table)
    assert doc["version"] == dt.version()
    assert doc["numFiles"] == actions.num_rows
    assert doc["sizeInBytes"] == pc.sum(actions.column("size_bytes")).as_py()
    assert doc["partitionColumns"] == dt.metadata().partition_columns
    assert doc["id"] == dt.metadata().id
    assert sum(doc["fileSizeHistogram"].values()) == doc["numFiles"]
    expected_hist = {label: 0 for _limit, label in BIN_LIMITS} | {">=1GB": 0}
    for size in sizes:
        expected_hist[next((label for limit, label in BIN_LIMITS if size < limit), ">=1GB")] += 1
    assert doc["fileSizeHistogram"] == expected_hist


def test_describe_json_values_for_dv_table() -> None:
    doc = ok_json("describe", "--json", DV)
    assert (doc["version"], doc["numFiles"], doc["sizeInBytes"]) == (15, 15, 11007)  # summary.json
    assert doc["protocol"]["minReaderVersion"] == 3
    assert doc["protocol"]["readerFeatures"] == ["deletionVectors"]
    assert doc["properties"] == {"delta.enableDeletionVectors": "true"}


def test_describe_human_summary() -> None:
    out = cli("describe", DV)
    assert out.returncode == 0 and out.stderr == ""
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["table", str(DV)]
    assert lines[1].split() == ["version", "15"]
    assert lines[2].split()[:2] == ["files", "15"]
    assert lines[3].split() == ["partitions", "part"]
    assert "deletionVectors" in out.stdout
    with pytest.raises(ValueError):
        json.loads(out.stdout)


# -- files ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "version"), [(DV, None), (MULTI, None), (DV, 5), (BASIC, 12)], ids=["dv", "multi", "dv@5", "basic@12"]
)
def test_files_json_matches_delta_rs_add_actions(deltalake: Any, table: Path, version: int | None) -> None:
    args = ["files", "--json"] + (["--version", str(version)] if version is not None else []) + [table]
    doc = ok_json(*args)
    actions = add_actions(deltalake, table, version)
    expected = dict(zip(actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist(), strict=True))
    assert doc["version"] == (version if version is not None else deltalake.DeltaTable(str(table)).version())
    got = {f["path"]: f["size"] for f in doc["files"]}
    assert len(got) == len(doc["files"])
    assert got == expected
    records = dict(zip(actions.column("path").to_pylist(), actions.column("num_records").to_pylist(), strict=True))
    assert {f["path"]: f["numRecords"] for f in doc["files"]} == records


def test_files_json_keeps_escaped_paths_as_written() -> None:
    doc = ok_json("files", "--json", MULTI)
    by_letter = {f["partitionValues"]["letter"]: f["path"] for f in doc["files"]}
    assert set(by_letter) == {"/%20%f", "b"}
    assert by_letter["/%20%f"].startswith("letter=%252F%252520%2525f/date=1970-01-01/data=hello/")


def test_files_json_deletion_vector_flags_match_summary() -> None:
    doc = ok_json("files", "--json", DV)
    assert sum(f["deletionVector"] for f in doc["files"]) == 2  # summary.json live_files_with_dv


def test_files_on_table_with_bom_commit(deltalake: Any, bad: dict[str, Any]) -> None:
    doc = ok_json("files", "--json", bad["tables"]["bom"])
    assert sorted(f["path"] for f in doc["files"]) == sorted(add_actions(deltalake, MULTI).column("path").to_pylist())


# -- history -------------------------------------------------------------------------------------------------


def test_history_json_limit_two_newest_first() -> None:
    doc = ok_json("history", "--json", "--limit", "2", HISTORY)
    assert [(e["version"], e["operation"]) for e in doc] == [
        (13, commit_operation(HISTORY, 13)),
        (12, commit_operation(HISTORY, 12)),
    ]
    assert [e["operation"] for e in doc] == ["DELETE", "WRITE"]


# -- scan ----------------------------------------------------------------------------------------------------


def test_scan_row_count_with_deletion_vectors(deltalake: Any) -> None:
    doc = ok_json("scan", "--json", DV)
    expected = delta_rs_count(deltalake, DV)
    assert expected == 35
    # the deletion vectors really remove rows: numRecords of the live files add up to more
    assert pc.sum(add_actions(deltalake, DV).column("num_records")).as_py() > expected
    assert (doc["version"], doc["rows"], doc["filesRead"], doc["filesTotal"]) == (15, expected, 15, 15)
    assert (doc["filesSkippedByPartition"], doc["filesSkippedByStats"], doc["output"]) == (0, 0, None)


def test_scan_row_count_multi_partitioned(deltalake: Any) -> None:
    doc = ok_json("scan", "--json", MULTI)
    assert doc["rows"] == deltalake.DeltaTable(str(MULTI)).to_pyarrow_table().num_rows == 2


def test_scan_output_writes_the_rows(deltalake: Any, out_dir: Path) -> None:
    target = out_dir / "basic.parquet"
    doc = ok_json("scan", "--json", "--output", target, BASIC)
    expected = deltalake.DeltaTable(str(BASIC)).to_pyarrow_table()
    assert doc["rows"] == expected.num_rows == 150
    assert doc["output"] == str(target)
    written = pq.read_table(target)
    assert written.num_rows == 150
    assert written.column_names == expected.column_names
    assert sorted(written.column("id").to_pylist()) == sorted(expected.column("id").to_pylist())


def test_scan_filter_prunes_partitions_dv_table(deltalake: Any) -> None:
    doc = ok_json("scan", "--json", "--filter", "part = 0", DV)
    parts = add_actions(deltalake, DV).column("partition.part").to_pylist()
    # the log replay read only partition 0's files (of 15): the others are not counted
    assert (doc["filesTotal"], doc["prunedInReplay"]) == (sum(1 for p in parts if p == 0), True) == (1, True)
    assert doc["filesSkippedByPartition"] == 0
    assert doc["filesRead"] == 1
    assert doc["rows"] == delta_rs_count(deltalake, DV, "WHERE part = 0") == 2


def test_scan_filter_prunes_partitions_letters(deltalake: Any) -> None:
    doc = ok_json("scan", "--json", "--filter", "letter = 'a'", LETTERS)
    letters = add_actions(deltalake, LETTERS).column("partition.letter").to_pylist()
    assert (doc["filesTotal"], doc["filesSkippedByPartition"]) == (sum(1 for v in letters if v == "a"), 0) == (2, 0)
    expected = deltalake.DeltaTable(str(LETTERS)).to_pyarrow_table(filters=[("letter", "=", "a")]).num_rows
    assert doc["rows"] == expected == 2


# -- errors --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", BAD_CASE_NAMES)
def test_bad_input_is_one_error_line_naming_the_table(bad: dict[str, Any], case: str) -> None:
    argv, table, fragment = bad["cases"][case]
    line = failed(*argv)
    assert line.startswith(f"deltalite: error: table {table}: "), line
    assert fragment in line, line


def test_bad_inputs_wrote_nothing(bad: dict[str, Any]) -> None:
    assert tree_state(bad["root"]) == bad["before"]
    assert not bad["tables"]["missing"].exists()


def test_negative_version_flag() -> None:
    assert (
        failed("describe", "--version", "-1", MULTI) == "deltalite: error: argument --version: must not be negative: -1"
    )


def test_storage_option_without_value() -> None:
    line = failed("describe", "--storage-option", "novalue", MULTI)
    assert line == "deltalite: error: --storage-option needs KEY=VALUE, got 'novalue'"


def test_unknown_subcommand() -> None:
    line = failed("frobnicate", MULTI)
    assert line.startswith("deltalite: error: argument command: invalid choice: 'frobnicate'")


def test_bad_filter_error_names_the_table() -> None:
    line = failed("scan", "--filter", "no_such_column = 1", ITER)
    assert line.startswith(f"deltalite: error: table {ITER}: "), line
    assert "no_such_column" in line


# -- checkpoint ----------------------------------------------------------------------------------------------

ICEBERG = CORPUS / "delta-golden/table-with-icebegCompatV2Enabled"  # writer feature icebergCompatV2 (not writable)
OLD_MS = 1_600_000_000_000  # 2020-09-13: far beyond the default 30-day log retention


@pytest.fixture(scope="module")
def checkpoint_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Tables for the checkpoint subcommand, and its invocations run concurrently (each one is a subprocess)."""
    root = tmp_path_factory.mktemp("cli_checkpoint")
    names = ("plain", "cleanup", "human", "bad_retention", "bad_interval")
    t = {name: copy_table(BASIC, root / name) for name in names}
    for version in range(15):  # every commit of `cleanup` is older than the log retention
        ns = (OLD_MS + version) * 1_000_000
        os.utime(t["cleanup"] / f"_delta_log/{version:020d}.json", ns=(ns, ns))
    for name, key, value in (
        ("bad_retention", "delta.logRetentionDuration", "forever"),
        ("bad_interval", "delta.checkpointInterval", "often"),
    ):
        meta = json.loads((t[name] / "_delta_log/00000000000000000000.json").read_text().splitlines()[2])
        assert "metaData" in meta
        meta["metaData"]["configuration"] = {key: value}
        (t[name] / "_delta_log/00000000000000000015.json").write_text(json.dumps(meta) + "\n")
    states = {name: tree_state(t[name]) for name in ("bad_retention", "bad_interval")}
    states["iceberg"] = tree_state(ICEBERG)
    invocations = [
        ("checkpoint", "--json", str(t["plain"])),
        ("checkpoint", "--cleanup-log", "--json", str(t["cleanup"])),
        ("checkpoint", str(t["human"])),
        ("checkpoint", "--cleanup-log", "--json", str(t["bad_retention"])),
        ("checkpoint", "--json", str(t["bad_interval"])),
        ("checkpoint", "--json", str(ICEBERG)),
        ("checkpoint", "--json", str(root / "missing")),
    ]
    with ThreadPoolExecutor(max_workers=4) as pool:
        for key, result in zip(invocations, pool.map(_run, invocations), strict=True):
            _RESULTS[key] = result
    return {"tables": t, "root": root, "states": states}


def test_checkpoint_json_and_delta_rs_reads_it(checkpoint_runs: dict[str, Any], deltalake: Any) -> None:
    table = checkpoint_runs["tables"]["plain"]
    doc = ok_json("checkpoint", "--json", table)
    name = "_delta_log/00000000000000000014.checkpoint.parquet"
    rows = pq.read_metadata(table / name).num_rows
    actions = add_actions(deltalake, table)
    assert doc == {
        "checkpoint": {
            "version": 14,
            "kind": "classic",
            "paths": [name],
            "size": rows,
            "sizeInBytes": (table / name).stat().st_size,
            "numOfAddFiles": actions.num_rows,
            "lastCheckpointUpdated": True,
        },
        "cleanup": None,
    }
    assert rows == actions.num_rows + 2  # protocol, metaData, one add per live file; no tombstones in BASIC
    last = json.loads((table / "_delta_log/_last_checkpoint").read_text())
    assert (last["version"], last["size"], last["numOfAddFiles"]) == (14, rows, actions.num_rows)
    for version in range(14):  # the commits before the checkpoint are no longer needed by delta-rs
        (table / f"_delta_log/{version:020d}.json").unlink()
    assert add_actions(deltalake, table).column("path").to_pylist() == actions.column("path").to_pylist()


def test_checkpoint_cleanup_log_deletes_expired_commits(checkpoint_runs: dict[str, Any], deltalake: Any) -> None:
    table = checkpoint_runs["tables"]["cleanup"]
    doc = ok_json("checkpoint", "--cleanup-log", "--json", table)
    assert doc["checkpoint"]["version"] == 14
    cleanup = doc["cleanup"]
    assert cleanup["checkpointVersion"] == 14 and cleanup["isDryRun"] is False and cleanup["enabled"] is True
    expected = [f"_delta_log/{v:020d}.json" for v in range(10)] + ["_delta_log/00000000000000000010.checkpoint.parquet"]
    expected += [f"_delta_log/{v:020d}.json" for v in range(10, 14)]
    assert cleanup["filesDeleted"] == expected and cleanup["numFilesDeleted"] == 15
    assert cleanup["cutoffTimestamp"] % 86_400_000 == 0
    # hidden Hadoop `.<name>.crc` companions are not log files and are left alone
    assert sorted(n for n in os.listdir(table / "_delta_log") if not n.startswith(".")) == [
        "00000000000000000014.checkpoint.parquet",
        "00000000000000000014.json",
        "_last_checkpoint",
    ]
    assert add_actions(deltalake, table).num_rows == doc["checkpoint"]["numOfAddFiles"]


def test_checkpoint_human_summary(checkpoint_runs: dict[str, Any]) -> None:
    table = checkpoint_runs["tables"]["human"]
    out = cli("checkpoint", table)
    assert out.returncode == 0 and out.stderr == ""
    lines = out.stdout.splitlines()
    assert lines[0].startswith("checkpoint  version 14 (classic): ") and " actions, " in lines[0]
    assert lines[1:] == ["  _delta_log/00000000000000000014.checkpoint.parquet"]


def test_checkpoint_bad_inputs_are_one_line_and_write_nothing(checkpoint_runs: dict[str, Any]) -> None:
    t, states = checkpoint_runs["tables"], checkpoint_runs["states"]
    line = failed("checkpoint", "--cleanup-log", "--json", t["bad_retention"])
    assert line.startswith(f"deltalite: error: table {t['bad_retention']}: ") and "delta.logRetentionDuration" in line
    line = failed("checkpoint", "--json", t["bad_interval"])
    assert line.startswith(f"deltalite: error: table {t['bad_interval']}: ") and "delta.checkpointInterval" in line
    line = failed("checkpoint", "--json", ICEBERG)
    assert line.startswith(f"deltalite: error: table {ICEBERG}: ") and "icebergCompatV2" in line
    missing = checkpoint_runs["root"] / "missing"
    assert failed("checkpoint", "--json", missing) == f"deltalite: error: table {missing}: path does not exist"
    assert tree_state(t["bad_retention"]) == states["bad_retention"]
    assert tree_state(t["bad_interval"]) == states["bad_interval"]
    assert tree_state(ICEBERG) == states["iceberg"]
    assert not missing.exists()


def test_a_reader_that_closes_the_pipe_early_is_not_an_error(deltalake: Any, tmp_path: Path) -> None:
    # `deltalite scan t | head -1`: the rows outgrow the pipe buffer, the reader goes away after one line
    deltalake.write_deltalake(str(tmp_path / "t"), pa.table({"id": list(range(50_000)), "s": ["x" * 20] * 50_000}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "airflow_provider_deltalite", "scan", str(tmp_path / "t")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    stderr = proc.stderr.read()
    assert proc.wait(timeout=60) == 0
    assert first.startswith(b"version 0: 50000 rows")
    assert stderr == b""
