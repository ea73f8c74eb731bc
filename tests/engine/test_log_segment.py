"""Tests of log file naming, log segment selection and `_last_checkpoint` handling.

Pure tests build synthetic listings from LogFile/FileInfo objects; the rest read the shared corpus in place, or a
copy in ``tmp_path`` when a table must be damaged, and compare with delta-rs (the independent oracle) or with the
corpus ``summary.json`` numbers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine.errors import (
    CorruptLog,
    ProtocolNotSupported,
    TableNotFound,
    VersionNotFound,
)
from airflow_provider_deltalite.engine.last_checkpoint import read_last_checkpoint_hint
from airflow_provider_deltalite.engine.log_path import LogFileKind, ParsedLogPath, parse_log_path
from airflow_provider_deltalite.engine.log_segment import (
    LogFile,
    build_log_segment,
    earliest_version,
    list_log,
    load_log_segment,
)
from airflow_provider_deltalite.engine.storage import FileInfo, Storage
from tests.helpers import CORPUS, copy_table

URI = "/data/tbl"
UUID = "80a083e8-7026-4e79-81be-64bd76c43a11"
CHECKPOINT_TABLES = ["delta-golden/125-iterator-bug", "delta-kernel-defaults/basic-with-checkpoint"]


# -- helpers -------------------------------------------------------------------------------------------------


def commit(v: int) -> str:
    return f"{v:020d}.json"


def classic(v: int) -> str:
    return f"{v:020d}.checkpoint.parquet"


def part(v: int, i: int, n: int) -> str:
    return f"{v:020d}.checkpoint.{i:010d}.{n:010d}.parquet"


def uuid_checkpoint(v: int, fmt: str = "parquet", uuid: str = UUID) -> str:
    return f"{v:020d}.checkpoint.{uuid}.{fmt}"


def lf(name: str) -> LogFile:
    parsed = parse_log_path(name)
    assert parsed is not None, name
    return LogFile(parsed, FileInfo(name, 100, 1_700_000_000_000))


def listing(*names: str) -> list[LogFile]:
    return [lf(n) for n in names]


def commits(versions) -> list[str]:
    return [commit(v) for v in versions]


def live_paths(uri: Path | str, version: int | None = None) -> list[str]:
    snap = DeltaTable(str(uri)).snapshot(version)
    return sorted(snap.raw_files.column("path").to_pylist())


@pytest.fixture(scope="module")
def deltalake() -> Any:
    import deltalake

    return deltalake


def oracle_paths(deltalake: Any, uri: Path | str, version: int | None = None) -> list[str]:
    """delta-rs's live add-action paths (as written in the log) of the table at ``version``."""
    dt = deltalake.DeltaTable(str(uri), version=version)
    return sorted(pa.table(dt.get_add_actions(flatten=True)).column("path").to_pylist())


def summary() -> dict[str, dict[str, Any]]:
    return {t["staged_path"]: t for t in json.loads((CORPUS / "summary.json").read_text())}


# -- parse_log_path ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (commit(0), dict(version=0, kind=LogFileKind.COMMIT, file_format="json")),
        (commit(123), dict(version=123, kind=LogFileKind.COMMIT, file_format="json")),
        ("99999999999999999999.json", dict(version=99999999999999999999, kind=LogFileKind.COMMIT, file_format="json")),
        (classic(10), dict(version=10, kind=LogFileKind.CHECKPOINT, file_format="parquet")),
        (
            part(10, 2, 3),
            dict(version=10, kind=LogFileKind.MULTI_PART_CHECKPOINT, part=2, num_parts=3, file_format="parquet"),
        ),
        (
            part(7, 1, 1),
            dict(version=7, kind=LogFileKind.MULTI_PART_CHECKPOINT, part=1, num_parts=1, file_format="parquet"),
        ),
        (
            uuid_checkpoint(2, "json"),
            dict(version=2, kind=LogFileKind.UUID_CHECKPOINT, uuid=UUID, file_format="json"),
        ),
        (
            uuid_checkpoint(4, "parquet", UUID.upper()),
            dict(version=4, kind=LogFileKind.UUID_CHECKPOINT, uuid=UUID.upper(), file_format="parquet"),
        ),
        (
            "00000000000000000005.00000000000000000010.compacted.json",
            dict(version=5, kind=LogFileKind.COMPACTED, end_version=10, file_format="json"),
        ),
        ("00000000000000000007.crc", dict(version=7, kind=LogFileKind.CRC, file_format=None)),
    ],
)
def test_parse_log_path_kinds(name: str, expected: dict[str, Any]) -> None:
    assert parse_log_path(name) == ParsedLogPath(name, **expected)


@pytest.mark.parametrize(
    "name",
    [
        part(10, 3, 2),  # part number above the part count
        part(10, 0, 2),  # parts are numbered from 1
        part(10, 0, 0),
    ],
)
def test_parse_log_path_impossible_multipart_is_unknown(name: str) -> None:
    assert parse_log_path(name) == ParsedLogPath(name, 10, LogFileKind.UNKNOWN)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "_last_checkpoint",
        "_sidecars",
        "_staged_commits",
        ".00000000000000000001.json.crc",
        ".00000000000000000010.checkpoint.parquet.crc",
        "00000000000000000001.json.tmp",
        "00000000000000000001.json.0",
        "00000000000000000001.JSON",
        "00000000000000000001",
        "00000000000000000001.",
        "1.json",
        "0000000000000000001.json",  # 19 digits
        "000000000000000000001.json",  # 21 digits
        "abcdefghijklmnopqrst.json",
        "-0000000000000000001.json",
        "0000000000000000000x.json",
        "00000000000000000001.checkpoint.parquet.crc",
        "00000000000000000001.checkpoint.parquet.tmp",
        "00000000000000000001.checkpoint.json",
        "00000000000000000001.checkpoint.1.2.parquet",  # part fields must have 10 digits
        "00000000000000000001.checkpoint.0000000001.0000000002.json",
        "00000000000000000001.checkpoint.short-uuid.json",
        f"00000000000000000001.checkpoint.{UUID}.avro",
        f"00000000000000000001.checkpoint.{UUID}x.json",
        "00000000000000000001.compacted.json",
        "00000000000000000001.00000000000000000002.compacted.parquet",
        "00000000000000000001.0000000000000000002.compacted.json",
        "00000000000000000001.crc.tmp",
        "part-00000-c9b90f86-73e6-46c8-93ba-ff6bfaf892a1-c000.snappy.parquet",
        " 00000000000000000001.json",
        "00000000000000000001.json ",
    ],
)
def test_parse_log_path_junk_is_none(name: str) -> None:
    assert parse_log_path(name) is None


def test_parse_log_path_rejects_trailing_newline() -> None:
    assert parse_log_path("00000000000000000001.json\n") is None


def test_parse_log_path_rejects_non_ascii_digits() -> None:
    assert parse_log_path("\u0661" * 20 + ".json") is None


def test_parse_log_path_agrees_with_corpus_summary_on_every_real_log() -> None:
    """Classify every name in every corpus `_delta_log` and compare with summary.json's independent inventory."""
    checked = 0
    for rel, t in summary().items():
        log = CORPUS / rel / "_delta_log"
        if not t.get("has_delta_log") or not log.is_dir():
            continue
        parsed = [p for p in map(parse_log_path, os.listdir(log)) if p is not None]
        commit_versions = sorted(p.version for p in parsed if p.kind is LogFileKind.COMMIT)
        multipart: dict[int, set[tuple[int, int]]] = defaultdict(set)
        for p in parsed:
            if p.kind is LogFileKind.MULTI_PART_CHECKPOINT:
                multipart[p.version].add((p.part, p.num_parts))
        got = {
            "n_commits": len(commit_versions),
            "min_version": commit_versions[0] if commit_versions else t["min_version"],
            "checkpoints_classic": sorted(p.version for p in parsed if p.kind is LogFileKind.CHECKPOINT),
            "checkpoints_multipart": {str(v): f"{len(s)}/{next(iter(s))[1]}" for v, s in multipart.items()},
            "checkpoints_v2": sorted(
                f"{p.version}:{p.file_format}" for p in parsed if p.kind is LogFileKind.UUID_CHECKPOINT
            ),
            "compacted_logs": sorted(f"{p.version}-{p.end_version}" for p in parsed if p.kind is LogFileKind.COMPACTED),
            "n_crc_files": sum(1 for p in parsed if p.kind is LogFileKind.CRC),
        }
        expected = {k: sorted(t[k]) if isinstance(t[k], list) else t[k] for k in got}
        assert got == expected, rel
        checked += 1
    assert checked == 351


# -- build_log_segment on synthetic listings -----------------------------------------------------------------


def test_no_checkpoint_replays_every_commit() -> None:
    seg = build_log_segment(listing(*commits(range(4))), None, URI)
    assert seg.version == 3
    assert seg.checkpoint is None
    assert seg.commit_versions == [0, 1, 2, 3]
    assert seg.older_checkpoints == ()


def test_newest_complete_checkpoint_wins() -> None:
    files = listing(*commits(range(13)), classic(5), classic(10))
    seg = build_log_segment(files, None, URI)
    assert seg.version == 12
    assert seg.checkpoint is not None
    assert (seg.checkpoint.version, seg.checkpoint.kind) == (10, LogFileKind.CHECKPOINT)
    assert [f.info.name for f in seg.checkpoint.files] == [classic(10)]
    assert seg.commit_versions == [11, 12]
    assert [c.version for c in seg.older_checkpoints] == [5]
    assert seg.commits[0].path == "_delta_log/" + commit(11)


def test_time_travel_uses_newest_checkpoint_at_or_below_version() -> None:
    files = listing(*commits(range(13)), classic(5), classic(10))
    seg = build_log_segment(files, 7, URI)
    assert (seg.version, seg.checkpoint.version, seg.commit_versions) == (7, 5, [6, 7])
    seg = build_log_segment(files, 4, URI)
    assert (seg.version, seg.checkpoint, seg.commit_versions) == (4, None, [0, 1, 2, 3, 4])


def test_version_at_checkpoint_needs_no_commits() -> None:
    seg = build_log_segment(listing(*commits(range(13)), classic(10)), 10, URI)
    assert (seg.version, seg.checkpoint.version, seg.commit_versions) == (10, 10, [])


def test_checkpoint_without_its_commit_file_is_the_latest_version() -> None:
    seg = build_log_segment(listing(*commits(range(10)), classic(10)), None, URI)
    assert (seg.version, seg.checkpoint.version, seg.commit_versions) == (10, 10, [])


def test_incomplete_multipart_checkpoint_is_ignored() -> None:
    files = listing(*commits(range(13)), classic(5), part(10, 1, 3), part(10, 3, 3))
    seg = build_log_segment(files, None, URI)
    assert seg.checkpoint.version == 5
    assert seg.commit_versions == list(range(6, 13))
    assert seg.older_checkpoints == ()


def test_incomplete_multipart_without_fallback_replays_from_zero() -> None:
    seg = build_log_segment(listing(*commits(range(13)), part(10, 1, 2)), None, URI)
    assert seg.checkpoint is None
    assert seg.commit_versions == list(range(13))


def test_complete_multipart_checkpoint_parts_in_order() -> None:
    files = listing(*commits(range(13)), part(10, 3, 3), part(10, 1, 3), part(10, 2, 3))
    seg = build_log_segment(files, None, URI)
    assert seg.checkpoint.kind is LogFileKind.MULTI_PART_CHECKPOINT
    assert [f.info.name for f in seg.checkpoint.files] == [part(10, 1, 3), part(10, 2, 3), part(10, 3, 3)]
    assert seg.commit_versions == [11, 12]


def test_complete_multipart_wins_over_incomplete_one_at_same_version() -> None:
    files = listing(*commits(range(12)), part(10, 1, 3), part(10, 1, 2), part(10, 2, 2))
    seg = build_log_segment(files, None, URI)
    assert [f.info.name for f in seg.checkpoint.files] == [part(10, 1, 2), part(10, 2, 2)]


def test_uuid_checkpoint_preferred_at_same_version_and_classic_kept_as_fallback() -> None:
    files = listing(*commits(range(12)), classic(10), uuid_checkpoint(10, "json"))
    seg = build_log_segment(files, None, URI)
    assert seg.checkpoint.kind is LogFileKind.UUID_CHECKPOINT
    assert [f.info.name for f in seg.checkpoint.files] == [uuid_checkpoint(10, "json")]
    assert [(c.version, c.kind) for c in seg.older_checkpoints] == [(10, LogFileKind.CHECKPOINT)]


def test_crc_and_compacted_files_do_not_change_the_segment() -> None:
    files = listing(
        *commits(range(6)), "00000000000000000005.crc", "00000000000000000000.00000000000000000005.compacted.json"
    )
    seg = build_log_segment(files, None, URI)
    assert (seg.version, seg.checkpoint, seg.commit_versions) == (5, None, [0, 1, 2, 3, 4, 5])


def test_gap_after_checkpoint_is_corrupt() -> None:
    files = listing(*commits([*range(12), 13]), classic(10))
    with pytest.raises(CorruptLog) as info:
        build_log_segment(files, None, URI)
    assert str(info.value) == f"table {URI}: version 12 is missing from the log (commits 0..13 must be contiguous)"


def test_gap_before_checkpoint_is_fine() -> None:
    files = listing(*commits([*range(7), *range(8, 14)]), classic(10))
    seg = build_log_segment(files, None, URI)
    assert (seg.version, seg.checkpoint.version, seg.commit_versions) == (13, 10, [11, 12, 13])
    # ...but a version whose replay needs the missing commit cannot be built.
    with pytest.raises(CorruptLog, match="version 7 is missing"):
        build_log_segment(files, 8, URI)


def test_version_above_latest_is_version_not_found_with_latest() -> None:
    files = listing(*commits(range(14)))
    with pytest.raises(VersionNotFound) as info:
        build_log_segment(files, 14, URI)
    assert info.value.latest == 13
    assert str(info.value) == f"table {URI}: version 14 does not exist (latest is 13)"


def test_latest_counts_a_checkpoint_beyond_the_last_commit() -> None:
    with pytest.raises(VersionNotFound) as info:
        build_log_segment(listing(*commits(range(10)), classic(12)), 13, URI)
    assert info.value.latest == 12


def test_negative_version_is_version_not_found() -> None:
    with pytest.raises(VersionNotFound) as info:
        build_log_segment(listing(*commits(range(3))), -1, URI)
    assert info.value.latest == 2
    assert "version -1 does not exist" in str(info.value)


@pytest.mark.parametrize("version", [None, 3, 5, 7])
def test_log_starting_after_zero_without_checkpoint_is_corrupt(version: int | None) -> None:
    with pytest.raises(CorruptLog) as info:
        build_log_segment(listing(*commits(range(3, 8))), version, URI)
    assert str(info.value) == f"table {URI}: the log starts at version 3 and has no checkpoint to start from"


@pytest.mark.parametrize("version", [0, 3, 4])
def test_time_travel_below_earliest_reconstructable_version(version: int) -> None:
    files = listing(*commits(range(5, 13)), classic(5), classic(10))
    with pytest.raises(VersionNotFound) as info:
        build_log_segment(files, version, URI)
    assert (info.value.earliest, info.value.latest) == (5, 12)
    assert "before version 5 was cleaned up" in str(info.value)


def test_time_travel_to_cleaned_commits_without_checkpoint_below() -> None:
    files = listing(*commits(range(8, 13)), classic(10))
    with pytest.raises(VersionNotFound) as info:
        build_log_segment(files, 9, URI)
    assert (info.value.earliest, info.value.latest) == (10, 12)
    seg = build_log_segment(files, None, URI)
    assert (seg.checkpoint.version, seg.commit_versions) == (10, [11, 12])


def test_time_travel_at_and_above_earliest_checkpoint() -> None:
    files = listing(*commits(range(5, 13)), classic(5), classic(10))
    assert build_log_segment(files, 5, URI).commit_versions == []
    seg = build_log_segment(files, 7, URI)
    assert (seg.checkpoint.version, seg.commit_versions) == (5, [6, 7])


@pytest.mark.parametrize("names", [[], ["00000000000000000000.crc"], [part(3, 1, 2)]])
def test_listing_without_commits_or_checkpoints_is_table_not_found(names: list[str]) -> None:
    with pytest.raises(TableNotFound, match="holds no commits"):
        build_log_segment(listing(*names), None, URI)


def test_earliest_version_after_cleanup() -> None:
    assert earliest_version(listing(*commits(range(5, 13)), classic(5), classic(10))) == 5
    assert earliest_version(listing(*commits(range(8, 13)), classic(10))) == 10
    assert earliest_version(listing(*commits(range(3, 8)))) is None
    assert earliest_version(listing(*commits(range(4)))) == 0


def test_earliest_version_is_zero_when_the_whole_log_exists() -> None:
    assert earliest_version(listing(*commits(range(12)), classic(10))) == 0


def test_huge_gap_is_reported_without_exhausting_memory() -> None:
    script = textwrap.dedent(
        """
        import resource
        from airflow_provider_deltalite.engine.errors import CorruptLog
        from airflow_provider_deltalite.engine.log_path import parse_log_path
        from airflow_provider_deltalite.engine.log_segment import LogFile, build_log_segment
        from airflow_provider_deltalite.engine.storage import FileInfo
        # Allow 256 MB more than the interpreter already maps: plenty for a gap check, far too little for a list
        # of 10**12 versions.
        status = open("/proc/self/status").read()
        vm_kb = int(status.split("VmSize:")[1].split()[0])
        limit = vm_kb * 1024 + (256 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        names = [f"{v:020d}.json" for v in (0, 1, 2, 10**12)]
        files = [LogFile(parse_log_path(n), FileInfo(n, 1, 0)) for n in names]
        try:
            build_log_segment(files, None, "/t")
        except CorruptLog as exc:
            print(exc)
        except MemoryError:
            print("MemoryError")
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == (
        f"table /t: version 3 is missing from the log (commits 0..{10**12} must be contiguous)"
    ), out.stdout + out.stderr


# -- real listings: list_log and the _last_checkpoint hint ----------------------------------------------------


def test_list_log_of_real_table() -> None:
    files = list_log(Storage(str(CORPUS / "delta-golden/125-iterator-bug")))
    assert [f.info.name for f in files] == [*commits(range(10)), classic(10), commit(10), commit(11)]
    assert files[10].info.size == 10814


def test_list_log_from_version_skips_older_files() -> None:
    files = list_log(Storage(str(CORPUS / "delta-golden/125-iterator-bug")), 10)
    assert [f.info.name for f in files] == [classic(10), commit(10), commit(11)]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b'{"version":10,"size":13}', {"version": 10, "size": 13}),
        (b"", None),
        (b"\x00garbage{", None),
        (b"\xff\xfe not utf-8", None),
        (b"[10]", None),
        (b'{"version":"10"}', None),
        (b'{"version":-1}', None),
        (b'{"version":10.0}', None),
        (b'{"size":3}', None),
    ],
)
def test_read_last_checkpoint_hint(tmp_path: Path, content: bytes, expected: dict | None) -> None:
    (tmp_path / "_delta_log").mkdir()
    (tmp_path / "_delta_log" / "_last_checkpoint").write_bytes(content)
    assert read_last_checkpoint_hint(Storage(str(tmp_path))) == expected


def test_missing_last_checkpoint_hint_is_none(tmp_path: Path) -> None:
    (tmp_path / "_delta_log").mkdir()
    assert read_last_checkpoint_hint(Storage(str(tmp_path))) is None


def _set_hint(log: Path, text: str) -> None:
    (log / "_last_checkpoint").write_text(text)


def _truncate_checkpoint(log: Path) -> None:
    cp = log / classic(10)
    data = cp.read_bytes()
    cp.write_bytes(data[: len(data) // 2])


HINT_DAMAGE = {
    "deleted": lambda log: (log / "_last_checkpoint").unlink(),
    "garbage": lambda log: (log / "_last_checkpoint").write_bytes(b"\x00not json{"),
    "empty": lambda log: (log / "_last_checkpoint").write_bytes(b""),
    "forward_to_commit_without_checkpoint": lambda log: _set_hint(log, '{"version":11,"size":3}'),
    "forward_beyond_log": lambda log: _set_hint(log, '{"version":99,"size":3}'),
    "older_version_without_checkpoint": lambda log: _set_hint(log, '{"version":5,"size":3}'),
    "version_zero": lambda log: _set_hint(log, '{"version":0,"size":3}'),
    "checkpoint_file_deleted": lambda log: (log / classic(10)).unlink(),
    "checkpoint_truncated": _truncate_checkpoint,
}


@pytest.mark.parametrize("damage", sorted(HINT_DAMAGE))
@pytest.mark.parametrize("table", CHECKPOINT_TABLES)
def test_damaged_hint_or_checkpoint_still_gives_delta_rs_file_set(
    deltalake: Any, tmp_path: Path, table: str, damage: str
) -> None:
    expected = oracle_paths(deltalake, CORPUS / table)  # the unmodified table
    copy = copy_table(table, tmp_path / "t")
    HINT_DAMAGE[damage](copy / "_delta_log")
    snap = DeltaTable(str(copy)).snapshot()
    assert snap.version == summary()[table]["max_version"]
    assert sorted(snap.raw_files.column("path").to_pylist()) == expected
    assert snap.num_files == summary()[table]["live_files"]


@pytest.mark.parametrize("table", CHECKPOINT_TABLES)
def test_segment_uses_checkpoint_even_without_hint(tmp_path: Path, table: str) -> None:
    copy = copy_table(table, tmp_path / "t")
    (copy / "_delta_log" / "_last_checkpoint").unlink()
    seg = load_log_segment(Storage(str(copy)))
    assert seg.checkpoint is not None and seg.checkpoint.version == 10
    assert seg.commit_versions == list(range(11, summary()[table]["max_version"] + 1))


@pytest.mark.parametrize("table", CHECKPOINT_TABLES)
def test_deleted_checkpoint_falls_back_to_full_replay(tmp_path: Path, table: str) -> None:
    copy = copy_table(table, tmp_path / "t")
    (copy / "_delta_log" / classic(10)).unlink()
    seg = load_log_segment(Storage(str(copy)))
    assert seg.checkpoint is None
    assert seg.commit_versions == list(range(summary()[table]["max_version"] + 1))


@pytest.mark.parametrize("table", CHECKPOINT_TABLES)
def test_time_travel_with_truncated_checkpoint(deltalake: Any, tmp_path: Path, table: str) -> None:
    copy = copy_table(table, tmp_path / "t")
    _truncate_checkpoint(copy / "_delta_log")
    for version in (5, 10, 11):
        assert live_paths(copy, version) == oracle_paths(deltalake, CORPUS / table, version)


@pytest.mark.parametrize("table", CHECKPOINT_TABLES)
def test_truncated_checkpoint_without_older_commits_is_corrupt(tmp_path: Path, table: str) -> None:
    copy = copy_table(table, tmp_path / "t")
    log = copy / "_delta_log"
    _truncate_checkpoint(log)
    for v in range(10):
        (log / commit(v)).unlink()
    with pytest.raises(CorruptLog) as info:
        DeltaTable(str(copy)).snapshot()
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"table {copy}: checkpoint 10 is unreadable")


def test_multipart_checkpoint_with_missing_or_truncated_part(deltalake: Any, tmp_path: Path) -> None:
    table = "kernel-rs-data/v1-multi-part-struct-stats-only"
    expected = oracle_paths(deltalake, CORPUS / table)
    assert len(expected) == summary()[table]["live_files"] == 5
    for mode in ("missing", "truncated"):
        copy = copy_table(table, tmp_path / mode)
        second = copy / "_delta_log" / part(5, 2, 3)
        if mode == "missing":
            second.unlink()
        else:
            second.write_bytes(second.read_bytes()[:100])
        assert live_paths(copy) == expected, mode


# -- corpus tables with broken logs (delta-rs-err-logs) -------------------------------------------------------


@pytest.mark.parametrize("table", ["table_a", "table_b"])
def test_err_logs_tables_that_open(deltalake: Any, table: str) -> None:
    path = CORPUS / "delta-rs-err-logs" / table
    snap = DeltaTable(str(path)).snapshot()
    assert snap.version == 13
    assert snap.num_files == summary()[f"delta-rs-err-logs/{table}"]["live_files"] == 130
    assert sorted(snap.raw_files.column("path").to_pylist()) == oracle_paths(deltalake, path)


def test_err_logs_table_c_gap_after_checkpoint() -> None:
    path = CORPUS / "delta-rs-err-logs/table_c"
    with pytest.raises(CorruptLog) as info:
        DeltaTable(str(path)).snapshot()
    assert str(info.value) == f"table {path}: version 12 is missing from the log (commits 0..13 must be contiguous)"
    # versions up to the gap are still readable from the checkpoint
    assert DeltaTable(str(path)).snapshot(11).num_files == 110


@pytest.mark.parametrize("table", ["table_d", "table_e", "table_f", "table_h", "table_i"])
def test_err_logs_catalog_owned_tables(table: str) -> None:
    path = CORPUS / "delta-rs-err-logs" / table
    with pytest.raises(ProtocolNotSupported) as info:
        DeltaTable(str(path)).snapshot()
    assert info.value.features == ("catalogOwned",)
    assert str(info.value).startswith(f"table {path}: ")
    assert "catalogOwned" in str(info.value)


def test_err_logs_table_g_opens_at_stray_checkpoint(deltalake: Any) -> None:
    path = CORPUS / "delta-rs-err-logs/table_g"
    snap = DeltaTable(str(path)).snapshot()
    assert snap.version == 9999 == deltalake.DeltaTable(str(path)).version()
    assert snap.num_files == summary()["delta-rs-err-logs/table_g"]["live_files"] == 100
    assert sorted(snap.raw_files.column("path").to_pylist()) == oracle_paths(deltalake, path)
    seg = load_log_segment(Storage(str(path)))
    assert (seg.checkpoint.version, seg.commit_versions) == (9999, [])
    # below the stray checkpoint the table reads normally, and the hole 14..9998 is a corrupt log
    assert DeltaTable(str(path)).snapshot(13).num_files == 130
    with pytest.raises(CorruptLog, match="version 14 is missing"):
        DeltaTable(str(path)).snapshot(5000)


# -- timestamp time travel on a checkpointed table ------------------------------------------------------------

_BASE_S = 1_600_000_000  # commit v gets mtime _BASE_S + 1000 * v


def _spaced_copy(tmp_path: Path) -> Path:
    copy = copy_table("delta-golden/125-iterator-bug", tmp_path / "t")
    for f in (copy / "_delta_log").iterdir():
        if f.name[:20].isdigit():
            t = _BASE_S + 1000 * int(f.name[:20])
            os.utime(f, (t, t))
    return copy


def _delta_rs_version_at(deltalake: Any, uri: Path, when: datetime) -> int:
    dt = deltalake.DeltaTable(str(uri))
    dt.load_as_version(when)
    return dt.version()


@pytest.mark.parametrize("version", [10, 11])
def test_version_at_after_checkpoint_matches_delta_rs(deltalake: Any, tmp_path: Path, version: int) -> None:
    copy = _spaced_copy(tmp_path)
    when = datetime.fromtimestamp(_BASE_S + 1000 * version + 500, UTC)
    assert DeltaTable(str(copy)).version_at(when) == _delta_rs_version_at(deltalake, copy, when) == version


@pytest.mark.parametrize("version", [0, 5])
def test_version_at_before_checkpoint_matches_delta_rs(deltalake: Any, tmp_path: Path, version: int) -> None:
    copy = _spaced_copy(tmp_path)
    when = datetime.fromtimestamp(_BASE_S + 1000 * version + 500, UTC)
    assert _delta_rs_version_at(deltalake, copy, when) == version
    assert DeltaTable(str(copy)).version_at(when) == version
