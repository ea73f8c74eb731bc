"""Bad inputs raise the right typed error, with a one-line message naming the table and the problem, and write
nothing. Tables that must be damaged are copied to ``tmp_path`` first; the corpus is read in place otherwise."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine.errors import (
    CorruptLog,
    DeltaLiteError,
    ProtocolNotSupported,
    TableNotFound,
    VersionNotFound,
)
from tests.helpers import CORPUS, copy_table, tree_state

SMALL = "dat-historical/multi_partitioned/delta"  # commits 0..2, no checkpoint, 2 live files
CHECKPOINTED = "delta-golden/125-iterator-bug"  # commits 0..11, checkpoint at 10
LAST = "00000000000000000002.json"


# -- helpers -------------------------------------------------------------------------------------------------


def expect_error(
    table: Path,
    error: type[DeltaLiteError],
    *fragments: str,
    watch: Path | None = None,
    call: Callable[[DeltaTable], Any] | None = None,
) -> DeltaLiteError:
    """Open ``table`` (snapshot by default), expect ``error``; check the message and that nothing was written."""
    if watch is None:  # a damaged copy: watch all of tmp_path; a corpus table: watch the table itself
        watch = table if CORPUS in table.parents else table.parent
    before = tree_state(watch)
    with pytest.raises(error) as info:
        dt = DeltaTable(str(table))
        (call or (lambda t: t.snapshot()))(dt)
    message = str(info.value)
    assert "\n" not in message and "\r" not in message, message
    assert message.startswith(f"table {table}: "), message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert tree_state(watch) == before
    return info.value


def paths(snap) -> list[str]:
    return sorted(snap.raw_files.column("path").to_pylist())


@pytest.fixture(scope="module")
def deltalake() -> Any:
    import deltalake

    return deltalake


def oracle_paths(deltalake: Any, uri: Path) -> list[str]:
    return sorted(pa.table(deltalake.DeltaTable(str(uri)).get_add_actions(flatten=True)).column("path").to_pylist())


# -- not a table ---------------------------------------------------------------------------------------------


def test_path_that_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "table"
    expect_error(missing, TableNotFound, "path does not exist", watch=tmp_path)
    assert not (tmp_path / "no").exists()


def test_directory_without_delta_log(tmp_path: Path) -> None:
    table = tmp_path / "t"
    table.mkdir()
    (table / "part-00000.parquet").write_bytes(b"PAR1")
    expect_error(table, TableNotFound, "no _delta_log directory")


def test_empty_delta_log(tmp_path: Path) -> None:
    table = tmp_path / "t"
    (table / "_delta_log").mkdir(parents=True)
    expect_error(table, TableNotFound, "_delta_log holds no commits")


def test_delta_log_with_only_non_log_files(tmp_path: Path) -> None:
    table = tmp_path / "t"
    (table / "_delta_log").mkdir(parents=True)
    (table / "_delta_log" / "_last_checkpoint").write_text('{"version":3,"size":4}')
    (table / "_delta_log" / "00000000000000000003.json.tmp").write_text("{}")
    expect_error(table, TableNotFound, "_delta_log holds no commits")


def test_history_of_missing_path_is_table_not_found(tmp_path: Path) -> None:
    expect_error(tmp_path / "nope", TableNotFound, "path does not exist", watch=tmp_path, call=lambda t: t.history(2))


def test_regular_file_as_table_path(tmp_path: Path) -> None:
    table = tmp_path / "table.parquet"
    table.write_bytes(b"PAR1 not a table")
    expect_error(table, TableNotFound)


def test_delta_log_that_is_a_file(tmp_path: Path) -> None:
    table = tmp_path / "t"
    table.mkdir()
    (table / "_delta_log").write_text("not a directory")
    expect_error(table, TableNotFound)


# -- damaged commits -----------------------------------------------------------------------------------------


def _damage_last_commit(tmp_path: Path, change: Callable[[bytes], bytes]) -> Path:
    table = copy_table(SMALL, tmp_path / "t")
    commit = table / "_delta_log" / LAST
    commit.write_bytes(change(commit.read_bytes()))
    return table


def test_truncated_last_line_of_commit(tmp_path: Path) -> None:
    # Cuts into the final commitInfo line.
    table = _damage_last_commit(tmp_path, lambda data: data[:-40])
    expect_error(table, CorruptLog, "commit 2 ", "not valid JSON")


def test_commit_truncated_in_the_middle_of_a_line(tmp_path: Path) -> None:
    original = (CORPUS / SMALL / "_delta_log" / LAST).read_bytes()
    cut = len(original) // 2
    line_no = original[:cut].count(b"\n") + 1  # the line the cut falls into
    assert original[cut - 1 : cut + 1] != b"}\n"
    table = _damage_last_commit(tmp_path, lambda data: data[:cut])
    expect_error(table, CorruptLog, f"commit 2 line {line_no} is not valid JSON")


def test_non_json_line_in_commit(tmp_path: Path) -> None:
    original = (CORPUS / SMALL / "_delta_log" / LAST).read_bytes()
    bad_line = original.count(b"\n") + 1
    assert bad_line == 9
    table = _damage_last_commit(tmp_path, lambda data: data + b"this is not json\n")
    expect_error(table, CorruptLog, f"commit 2 line {bad_line} is not valid JSON")


def test_non_json_first_line_of_commit(tmp_path: Path) -> None:
    table = _damage_last_commit(tmp_path, lambda data: b"<html>oops</html>\n" + data)
    expect_error(table, CorruptLog, "commit 2 line 1 is not valid JSON")


def test_json_line_that_is_not_an_object(tmp_path: Path) -> None:
    table = _damage_last_commit(tmp_path, lambda data: data + b"[1, 2]\n")
    expect_error(table, CorruptLog, "commit 2 line 9 is not a JSON object")


@pytest.mark.parametrize("content", [b"", b"\n", b"  \n\n"])
def test_empty_commit_file(tmp_path: Path, content: bytes) -> None:
    table = _damage_last_commit(tmp_path, lambda _data: content)
    expect_error(table, CorruptLog, "commit 2 is an empty file")


def test_empty_first_commit(tmp_path: Path) -> None:
    table = copy_table(SMALL, tmp_path / "t")
    (table / "_delta_log" / "00000000000000000000.json").write_bytes(b"")
    expect_error(table, CorruptLog, "commit 0 is an empty file")


@pytest.mark.parametrize("commit", ["00000000000000000000.json", LAST])
def test_commit_with_utf8_bom_reads_like_the_original(deltalake: Any, tmp_path: Path, commit: str) -> None:
    table = copy_table(SMALL, tmp_path / "t")
    path = table / "_delta_log" / commit
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    before = tree_state(tmp_path)
    snap = DeltaTable(str(table)).snapshot()
    assert snap.version == 2
    assert paths(snap) == oracle_paths(deltalake, CORPUS / SMALL)
    assert snap.partition_columns == ["letter", "date", "data"]
    history = DeltaTable(str(table)).history()
    assert [(h["version"], h["operation"]) for h in history] == [(2, "WRITE"), (1, "WRITE"), (0, "WRITE")]
    assert tree_state(tmp_path) == before


def test_protocol_with_non_integer_reader_version(tmp_path: Path) -> None:
    table = copy_table(SMALL, tmp_path / "t")
    commit0 = table / "_delta_log" / "00000000000000000000.json"
    lines = commit0.read_text().splitlines()
    assert lines[0].startswith('{"protocol"')
    lines[0] = json.dumps({"protocol": {"minReaderVersion": "x", "minWriterVersion": 2}})
    commit0.write_text("\n".join(lines) + "\n")
    expect_error(table, CorruptLog, "protocol")


def test_protocol_with_string_reader_features(tmp_path: Path) -> None:
    table = copy_table(SMALL, tmp_path / "t")
    commit0 = table / "_delta_log" / "00000000000000000000.json"
    lines = commit0.read_text().splitlines()
    lines[0] = json.dumps(
        {
            "protocol": {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": "deletionVectors",
                "writerFeatures": ["deletionVectors"],
            }
        }
    )
    commit0.write_text("\n".join(lines) + "\n")
    expect_error(table, CorruptLog, "protocol")


# -- damaged checkpoints -------------------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["truncated", "zero_bytes", "garbage"])
def test_unreadable_checkpoint_without_fallback(tmp_path: Path, damage: str) -> None:
    table = copy_table(CHECKPOINTED, tmp_path / "t")
    log = table / "_delta_log"
    checkpoint = log / "00000000000000000010.checkpoint.parquet"
    data = checkpoint.read_bytes()
    checkpoint.write_bytes(
        {"truncated": data[: len(data) // 2], "zero_bytes": b"", "garbage": b"PAR1" + b"\x00" * 64}[damage]
    )
    for v in range(10):
        (log / f"{v:020d}.json").unlink()
    expect_error(table, CorruptLog, "checkpoint 10 is unreadable")


def test_unreadable_checkpoint_with_json_fallback_reads(deltalake: Any, tmp_path: Path) -> None:
    table = copy_table(CHECKPOINTED, tmp_path / "t")
    checkpoint = table / "_delta_log" / "00000000000000000010.checkpoint.parquet"
    checkpoint.write_bytes(checkpoint.read_bytes()[:1000])
    before = tree_state(tmp_path)
    snap = DeltaTable(str(table)).snapshot()
    assert (snap.version, snap.num_files) == (11, 12)
    assert paths(snap) == oracle_paths(deltalake, CORPUS / CHECKPOINTED)
    assert tree_state(tmp_path) == before


# -- versions and timestamps ---------------------------------------------------------------------------------


def test_version_that_does_not_exist() -> None:
    table = CORPUS / SMALL
    err = expect_error(table, VersionNotFound, "version 3 does not exist", "latest is 2", call=lambda t: t.snapshot(3))
    assert err.latest == 2


def test_version_far_beyond_latest_on_checkpointed_table() -> None:
    table = CORPUS / CHECKPOINTED
    err = expect_error(
        table, VersionNotFound, "version 12 does not exist", "latest is 11", call=lambda t: t.snapshot(12)
    )
    assert err.latest == 11


@pytest.mark.parametrize(
    ("version", "fragment"),
    [
        (-1, "version -1 does not exist"),
        ("1", "version must be a non-negative integer, not '1'"),
        (1.5, "version must be a non-negative integer, not 1.5"),
        (True, "version must be a non-negative integer, not True"),
    ],
)
def test_bad_version_argument(version: Any, fragment: str) -> None:
    expect_error(CORPUS / SMALL, VersionNotFound, fragment, call=lambda t: t.snapshot(version))


def test_timestamp_before_first_commit(tmp_path: Path) -> None:
    table = copy_table(SMALL, tmp_path / "t")
    first = 1_600_000_000
    for v in range(3):
        os.utime(table / "_delta_log" / f"{v:020d}.json", (first + 60 * v, first + 60 * v))
    err = expect_error(
        table,
        VersionNotFound,
        "timestamp 2020-09-13T12:25:00+00:00 is before the earliest available version 0",
        call=lambda t: t.snapshot(timestamp="2020-09-13T12:25:00Z"),
    )
    assert (err.earliest, err.latest) == (0, 2)
    # one second after commit 1, the table is at version 1
    assert DeltaTable(str(table)).snapshot(timestamp=(first + 61) * 1000).version == 1


def test_unparseable_timestamp() -> None:
    expect_error(
        CORPUS / SMALL,
        VersionNotFound,
        "not a timestamp: 'yesterday'",
        call=lambda t: t.snapshot(timestamp="yesterday"),
    )


# -- unsupported protocol ------------------------------------------------------------------------------------


def test_unsupported_protocol() -> None:
    table = CORPUS / "delta-rs/simple_table_features"
    err = expect_error(table, ProtocolNotSupported, "minReaderVersion 5")
    assert err.features == ("minReaderVersion=5",)


def test_unsupported_reader_feature() -> None:
    table = CORPUS / "delta-rs-err-logs/table_e"
    err = expect_error(table, ProtocolNotSupported, "unsupported reader feature 'catalogOwned'")
    assert err.features == ("catalogOwned",)
