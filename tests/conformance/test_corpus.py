"""Conformance: every corpus table reads exactly as its expected data and as delta-rs 1.6.3 says, or fails typed."""

from __future__ import annotations

from pathlib import Path

import deltalake
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine import DeltaLiteError
from airflow_provider_deltalite.engine.errors import StorageError
from airflow_provider_deltalite.engine.scan import scan
from tests.conformance.corpus import (
    CORPUS,
    DELTA_RS_CANNOT_OPEN,
    CorpusTable,
    corpus_tables,
    deltars_error,
    deltars_paths,
    normalise_path,
    read_expected,
    row_multiset,
    versions_with_complete_log,
)
from tests.oracles import (
    KERNEL,
    SPARK_TEST_SUITE_TABLES,
    assert_rows_agree,
    oracle_rows,
    record_no_oracle,
    spark_test_suite_copy,
)

TABLES = corpus_tables() if CORPUS.is_dir() else []  # without it, tests/conftest.py stops the run after collection
POSITIVE = [t for t in TABLES if t.role == "positive"]
NEGATIVE = [t for t in TABLES if t.role == "negative"]
SKIPPED_BY_OTHERS = [t for t in TABLES if t.role == "skip"]
# tables deltalite refuses on purpose have no live files to compare; test_positive_table_reads_as_expected checks them
READABLE = [t for t in POSITIVE + SKIPPED_BY_OTHERS if t.refusal() is None]


def _ids(tables: list[CorpusTable]) -> list[str]:
    return [t.name for t in tables]


def our_paths(table: DeltaTable, version: int | None = None) -> set[str]:
    snap = table.snapshot(version=version)
    return {normalise_path(p, table.storage.root) for p in snap.raw_files.column("path").to_pylist()}


@pytest.mark.parametrize("table", POSITIVE, ids=_ids(POSITIVE))
def test_positive_table_reads_as_expected(table: CorpusTable) -> None:
    refusal = table.refusal()
    if refusal is not None:
        error, _reason = refusal
        with pytest.raises(DeltaLiteError) as info:
            DeltaTable(str(table.path)).snapshot()
        assert type(info.value).__name__ == error
        assert "\n" not in str(info.value) and str(table.path) in str(info.value)
        return
    dt = DeltaTable(str(table.path))
    snap = dt.snapshot()
    expected = table.expected_dirs()
    for key, directory in sorted(expected.items()):
        version = None if key == "latest" else int(key[1:])
        rows, _ = scan(dt.snapshot(version=version) if version is not None else snap)
        want = read_expected(directory)
        assert {c.lower() for c in rows.column_names} == {c.lower() for c in want.column_names}, key
        columns = want.column_names
        assert rows.num_rows == want.num_rows, key
        assert row_multiset(rows, columns) == row_multiset(want, columns), key


@pytest.mark.parametrize("table", READABLE, ids=_ids(READABLE))
def test_live_files_equal_delta_rs_at_every_version(table: CorpusTable) -> None:
    if table.name in DELTA_RS_CANNOT_OPEN:
        error = deltars_error(lambda: deltalake.DeltaTable(str(table.path)))
        assert error == DELTA_RS_CANNOT_OPEN[table.name][0], f"delta-rs {table.name}: {error}, not as listed"
    if "path canonicalization" in table.entry["test_role"]:
        # The add and the remove spell one file two ways (`/x` and `file:/x`); the reference canonicalises both, so
        # the file is removed. delta-rs 1.6.3 compares raw strings and keeps it (or cannot open the table at all):
        # here delta-rs is not the oracle.
        assert our_paths(DeltaTable(str(table.path))) == set()
        record_no_oracle("file set: delta-rs keeps a removed file; the delta-kernel-rs wrapper lists no files")
        return
    if table.name in DELTA_RS_CANNOT_OPEN:  # test_latest_rows_equal_every_oracle still compares the rows
        record_no_oracle("file set: delta-rs cannot open it; the delta-kernel-rs wrapper lists no files")
        return
    latest = deltars_paths(table.path)
    assert latest is not None, "delta-rs 1.6.3 cannot open this table"
    dt = DeltaTable(str(table.path))
    assert our_paths(dt) == latest
    for version in versions_with_complete_log(table.path):
        theirs = deltars_paths(table.path, version)
        if theirs is None:
            record_no_oracle(f"file set at version {version}: delta-rs cannot open it; the kernel wrapper lists none")
            continue
        assert our_paths(dt, version) == theirs, f"version {version}"


@pytest.mark.parametrize("table", READABLE, ids=_ids(READABLE))
def test_latest_rows_equal_every_oracle(table: CorpusTable, tmp_path: Path) -> None:
    # delta-rs and delta-kernel-rs, each where it can read the table (tests/oracles.py lists where they cannot)
    if table.entry["live_files_missing_on_disk"]:  # the corpus keeps only the log: nobody has rows to compare
        with pytest.raises(StorageError, match="referenced by the log but missing"):
            scan(DeltaTable(str(table.path)).snapshot())
        found, cannot = oracle_rows(table.path, corpus_name=table.name)
        assert not found
        record_no_oracle(cannot)
        return
    if table.name in SPARK_TEST_SUITE_TABLES:  # read as Delta's test suite reads it, by us and by the oracles
        path = spark_test_suite_copy(table.name, tmp_path / "t")
        rows, _ = scan(DeltaTable(str(path)).snapshot())
        assert assert_rows_agree(path, rows) == [KERNEL]
        return
    rows, _ = scan(DeltaTable(str(table.path)).snapshot())
    assert_rows_agree(table.path, rows, corpus_name=table.name)


@pytest.mark.parametrize("table", NEGATIVE, ids=_ids(NEGATIVE))
def test_negative_table_fails_typed(table: CorpusTable) -> None:
    with pytest.raises(DeltaLiteError) as info:
        DeltaTable(str(table.path)).snapshot()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("table", SKIPPED_BY_OTHERS, ids=_ids(SKIPPED_BY_OTHERS))
def test_tables_other_readers_skip_never_crash(table: CorpusTable) -> None:
    try:
        snap = DeltaTable(str(table.path)).snapshot()
    except DeltaLiteError:
        return
    assert snap.files.num_rows == snap.num_files
