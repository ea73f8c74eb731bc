"""OPTIMIZE end to end on real tables: rows checked against delta-rs 1.6.3 and the corpus's expected data."""

from __future__ import annotations

import collections
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import deltalake
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine import (
    ConcurrentDeleteRead,
    InvalidArgument,
    InvalidExpression,
)
from airflow_provider_deltalite.engine.data_file_writer import WriterOptions
from airflow_provider_deltalite.engine.scan import scan
from airflow_provider_deltalite.maintenance.optimize import optimize, plan_optimize
from tests.conformance.corpus import read_expected, row_multiset
from tests.helpers import CORPUS, copy_table, tree_state
from tests.oracles import KERNEL, agreed_rows, assert_rows_agree


def _rows(path: Path | str) -> collections.Counter:
    """The rows delta-rs and delta-kernel-rs read alike (each where it can read the table), as a multiset."""
    return agreed_rows(path)


def _our_rows(path: Path | str) -> collections.Counter:
    rows, _ = scan(DeltaTable(str(path)).snapshot())
    return row_multiset(rows, rows.column_names)


def _commit(path: Path, version: int) -> list[dict[str, Any]]:
    lines = (path / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _appends(path: Path, batches: list[pa.Table], partition_by: list[str] | None = None) -> None:
    for batch in batches:
        deltalake.write_deltalake(str(path), batch, mode="append", partition_by=partition_by)


def _small_table(path: Path, n_files: int = 10, rows: int = 50) -> Path:
    batches = [
        pa.table(
            {
                "id": pa.array(range(i * rows, (i + 1) * rows), pa.int64()),
                "value": pa.array([float(j) / 3 for j in range(rows)], pa.float64()),
                "name": pa.array([f"name-{i}-{j}" if j % 7 else None for j in range(rows)], pa.string()),
            }
        )
        for i in range(n_files)
    ]
    _appends(path, batches)
    return path


# -- unpartitioned ----------------------------------------------------------------------------------------------


def test_unpartitioned_compaction_keeps_every_row_and_commits_as_the_reference(tmp_path: Path) -> None:
    path = _small_table(tmp_path / "t")
    before = _rows(path)
    stats = optimize(DeltaTable(str(path)))

    assert (stats.read_version, stats.committed_version, stats.committed_versions) == (9, 10, (10,))
    assert (stats.num_files_removed, stats.num_files_added, stats.num_bins, stats.num_batches) == (10, 1, 1, 1)
    assert (stats.total_considered_files, stats.total_files_skipped, stats.partitions_optimized) == (10, 0, 1)
    assert _rows(path) == before
    assert len(deltalake.DeltaTable(str(path)).file_uris()) == 1

    actions = _commit(path, 10)
    info = actions[0]["commitInfo"]
    assert info["operation"] == "OPTIMIZE"
    assert info["operationParameters"] == {"predicate": "[]", "zOrderBy": "[]", "auto": False}
    assert info["isolationLevel"] == "SnapshotIsolation"
    assert info["isBlindAppend"] is False
    adds = [a["add"] for a in actions if "add" in a]
    removes = [a["remove"] for a in actions if "remove" in a]
    assert len(adds) == 1 and len(removes) == 10
    assert all(a["dataChange"] is False for a in adds + removes)
    assert all(r["extendedFileMetadata"] is True for r in removes)
    assert len({r["deletionTimestamp"] for r in removes}) == 1
    added_size = adds[0]["size"]
    assert info["operationMetrics"] == {
        "numAddedFiles": "1",
        "numRemovedFiles": "10",
        "numAddedBytes": str(added_size),
        "numRemovedBytes": str(sum(r["size"] for r in removes)),
        "minFileSize": str(added_size),
        "p25FileSize": str(added_size),
        "p50FileSize": str(added_size),
        "p75FileSize": str(added_size),
        "maxFileSize": str(added_size),
        "numDeletionVectorsRemoved": "0",
    }
    assert stats.files_added.total_size == added_size == os.path.getsize(path / adds[0]["path"])
    assert stats.files_removed.total_size == sum(r["size"] for r in removes)
    assert adds[0]["path"].startswith("part-") and adds[0]["path"].endswith(".snappy.parquet")


def test_new_file_stats_equal_a_recomputation_from_the_file(tmp_path: Path) -> None:
    path = _small_table(tmp_path / "t")
    optimize(DeltaTable(str(path)))
    (add,) = [a["add"] for a in _commit(path, 10) if "add" in a]
    data = pq.read_table(path / add["path"])
    stats = json.loads(add["stats"])
    assert stats["numRecords"] == data.num_rows == 500
    for name in ("id", "value", "name"):
        column = data.column(name)
        assert stats["nullCount"][name] == column.null_count
        lo_hi = pc.min_max(column).as_py()
        assert (stats["minValues"][name], stats["maxValues"][name]) == (lo_hi["min"], lo_hi["max"])
    assert stats["nullCount"]["name"] == 80  # j % 7 == 0 in each 50-row file: 8 per file


def test_string_bounds_taken_from_the_footer_equal_those_of_the_rows(tmp_path: Path) -> None:
    # string bounds come from the writer's row-group statistics (`_bounds_from_footer`): prefixes past 32 characters,
    # multi-byte text, nulls, several row groups, and one group whose longest value (5,000 characters) is more than the
    # writer keeps statistics of, so its bounds are read back from the file
    path = tmp_path / "t"
    long_max = "\U0001f600" * 40  # the largest value: its max bound is cut with a tie-breaker
    texts = [
        ["b" * 70, None, "é" * 40, "c"],
        ["a" * 5_000, "ab", None],  # the smallest value, in the group without statistics
        [long_max, "ab" + "c" * 40, "m"],
    ]
    for values in texts:
        deltalake.write_deltalake(str(path), pa.table({"s": pa.array(values, pa.string())}), mode="append")
    optimize(DeltaTable(str(path)), writer_options=WriterOptions(row_group_bytes=1))  # a row group per input file
    (add,) = [a["add"] for a in _commit(path, 3) if "add" in a]
    assert pq.ParquetFile(path / add["path"]).metadata.num_row_groups == 3
    stats = json.loads(add["stats"])
    assert stats["minValues"]["s"] == "a" * 32
    assert stats["maxValues"]["s"] == "\U0001f600" * 16 + "\U0010ffff"
    assert stats["nullCount"]["s"] == 2 and stats["numRecords"] == 10


def test_integer_bounds_taken_from_the_footer_equal_those_of_the_rows(tmp_path: Path) -> None:
    # integer bounds come from the writer's row-group statistics too: every Delta integer width, negative values, the
    # ends of int64, nulls, and a row group (an input file) whose column holds only nulls
    path = tmp_path / "t"
    inputs = [
        {"b": [3, None, -7], "h": [300, -300, None], "i": [None, 5, 6], "l": [2**63 - 1, 0, None]},
        {"b": [None, None, None], "h": [1, 2, 3], "i": [-(2**31), None, 0], "l": [None, None, None]},
        {"b": [127, -128, 0], "h": [None, 32767, -32768], "i": [2**31 - 1, 1, None], "l": [-(2**63), 5, -5]},
    ]
    types = {"b": pa.int8(), "h": pa.int16(), "i": pa.int32(), "l": pa.int64()}
    for values in inputs:
        columns = {name: pa.array(values[name], kind) for name, kind in types.items()}
        deltalake.write_deltalake(str(path), pa.table(columns), mode="append")
    optimize(DeltaTable(str(path)), writer_options=WriterOptions(row_group_bytes=1))  # a row group per input file
    (add,) = [a["add"] for a in _commit(path, 3) if "add" in a]
    assert pq.ParquetFile(path / add["path"]).metadata.num_row_groups == 3
    stats = json.loads(add["stats"])
    assert stats["minValues"] == {"b": -128, "h": -32768, "i": -(2**31), "l": -(2**63)}
    assert stats["maxValues"] == {"b": 127, "h": 32767, "i": 2**31 - 1, "l": 2**63 - 1}
    assert stats["nullCount"] == {"b": 4, "h": 2, "i": 3, "l": 4}
    data = pq.read_table(path / add["path"])
    for name in types:  # the same, recomputed from the rows of the file written
        lo_hi = pc.min_max(data.column(name)).as_py()
        assert (stats["minValues"][name], stats["maxValues"][name]) == (lo_hi["min"], lo_hi["max"])


def test_only_columns_whose_dictionary_fits_a_page_are_dictionary_encoded(tmp_path: Path) -> None:
    path = tmp_path / "t"
    for k in range(3):
        ids = pa.array(range(k * 100_000, (k + 1) * 100_000), pa.int64())  # 300,000 distinct: 2.4 MB of dictionary
        data = pa.table({"id": ids, "day": pc.cast(pc.divide(ids, 50_000), pa.string()), "flag": pc.equal(ids, 7)})
        deltalake.write_deltalake(str(path), data, mode="append")
    before = _rows(path)
    optimize(DeltaTable(str(path)))
    (add,) = [a["add"] for a in _commit(path, 3) if "add" in a]
    meta = pq.ParquetFile(path / add["path"]).metadata
    encodings = {meta.schema.column(i).name: meta.row_group(0).column(i).encodings for i in range(3)}
    assert "RLE_DICTIONARY" in encodings["day"]
    assert "RLE_DICTIONARY" not in encodings["id"] and "RLE_DICTIONARY" not in encodings["flag"]
    assert _rows(path) == before


def test_second_run_commits_nothing(tmp_path: Path) -> None:
    path = _small_table(tmp_path / "t")
    optimize(DeltaTable(str(path)))
    state = tree_state(path)
    again = optimize(DeltaTable(str(path)))
    assert again.committed_version is None and again.committed_versions == ()
    assert (again.num_files_removed, again.num_files_added, again.num_bins, again.num_batches) == (0, 0, 0, 1)
    assert (again.total_considered_files, again.total_files_skipped) == (1, 1)
    assert tree_state(path) == state


def test_dry_run_plans_and_writes_nothing(tmp_path: Path) -> None:
    path = _small_table(tmp_path / "t", n_files=4)
    state = tree_state(path)
    stats = optimize(DeltaTable(str(path)), dry_run=True)
    assert tree_state(path) == state
    assert stats.dry_run is True and stats.committed_version is None
    assert (stats.num_files_removed, stats.num_files_added, stats.num_bins) == (4, 0, 1)
    (planned,) = stats.plan or []
    live = DeltaTable(str(path)).snapshot().files
    assert sorted(planned["files"]) == sorted(live.column("path").to_pylist())
    assert planned["size"] == sum(live.column("size").to_pylist())
    assert stats.to_dict()["plan"][0]["numFiles"] == 4


def test_target_size_packs_bins_and_batch_size_splits_commits(tmp_path: Path) -> None:
    path = _small_table(tmp_path / "t", n_files=8)
    sizes = sorted(DeltaTable(str(path)).snapshot().files.column("size").to_pylist())
    before = _rows(path)
    # bins of at most three files' worth (sizes differ by a few bytes), one commit per two bins at most
    stats = optimize(DeltaTable(str(path)), target_size=sum(sizes[-3:]), batch_size=sum(sizes[-3:]) + 1)
    assert stats.num_bins == 3  # 3 + 3 + 2 files
    assert stats.num_batches == 3 and len(stats.committed_versions) == 3
    assert stats.committed_versions == (8, 9, 10)
    assert (stats.num_files_removed, stats.num_files_added) == (8, 3)
    assert _rows(path) == before


# -- partitions ---------------------------------------------------------------------------------------------------

SPECIAL = ["a/b", "c=d", "x y", "100%", "ü😈", "q?#", "", None]  # "" and None are both null in the log


def test_partitioned_with_special_and_null_values(tmp_path: Path) -> None:
    path = tmp_path / "t"
    batches = [
        pa.table(
            {
                "id": pa.array(range(k * 100, k * 100 + len(SPECIAL)), pa.int64()),
                "part": pa.array(SPECIAL, pa.string()),
            }
        )
        for k in range(3)
    ]
    _appends(path, batches, partition_by=["part"])
    before = _rows(path)
    before_parts = collections.Counter(
        pa.table(deltalake.DeltaTable(str(path)).to_pyarrow_table()).column("part").to_pylist()
    )
    stats = optimize(DeltaTable(str(path)))
    # 8 spellings x 3 appends = 24 files; "" and None are the same (null) partition, so 7 partitions and 7 new files
    assert (stats.num_files_removed, stats.num_files_added, stats.partitions_optimized) == (24, 7, 7)
    assert _rows(path) == before
    after = pa.table(deltalake.DeltaTable(str(path)).to_pyarrow_table())
    assert collections.Counter(after.column("part").to_pylist()) == before_parts
    adds = {a["add"]["partitionValues"]["part"]: a["add"]["path"] for a in _commit(path, 3) if "add" in a}
    # Hive-style directories escaped as Spark escapes them, and the log path URI-encoded once more
    assert adds["c=d"].startswith("part=c%253Dd/")
    assert adds["a/b"].startswith("part=a%252Fb/")
    assert adds["100%"].startswith("part=100%2525/")
    (null_key,) = {None, ""} & set(adds)  # the new file keeps the first input's spelling of null, as the reference
    assert adds[null_key].startswith("part=__HIVE_DEFAULT_PARTITION__/")
    assert (path / "part=c%3Dd").is_dir() and (path / "part=__HIVE_DEFAULT_PARTITION__").is_dir()


def test_where_limits_compaction_to_matching_partitions(tmp_path: Path) -> None:
    path = tmp_path / "t"
    batches = [pa.table({"id": pa.array([k, k + 10], pa.int64()), "p": ["x", "y"]}) for k in range(3)]
    _appends(path, batches, partition_by=["p"])
    before = _rows(path)
    stats = optimize(DeltaTable(str(path)), where="p = 'x'")
    assert (stats.total_considered_files, stats.num_files_removed, stats.num_files_added) == (3, 3, 1)
    assert _rows(path) == before
    info = _commit(path, 3)[0]["commitInfo"]
    assert info["operationParameters"]["predicate"] == json.dumps(["p = 'x'"], separators=(",", ":"))
    files = DeltaTable(str(path)).snapshot().files
    per_partition = collections.Counter(files.column("partitionValues").combine_chunks().field("p").to_pylist())
    assert per_partition == {"x": 1, "y": 3}


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("id = 1", "where may only reference partition columns; 'id' is not one (partition columns: p)"),
        ("nope = 1", "nope"),
        ("p = ", "p = "),
    ],
)
def test_bad_where_writes_nothing(tmp_path: Path, where: str, message: str) -> None:
    path = tmp_path / "t"
    _appends(path, [pa.table({"id": pa.array([k], pa.int64()), "p": ["x"]}) for k in range(3)], partition_by=["p"])
    state = tree_state(path)
    with pytest.raises(InvalidExpression) as info:
        optimize(DeltaTable(str(path)), where=where)
    assert message in str(info.value) and str(path) in str(info.value)
    assert tree_state(path) == state


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"target_size": 0}, "target_size must be a positive number of bytes, got 0"),
        ({"min_file_size": -5}, "min_file_size must be a positive number of bytes, got -5"),
        ({"batch_size": 0}, "batch_size must be a positive number of bytes, got 0"),
        ({"max_deleted_rows_ratio": 1.5}, "max_deleted_rows_ratio must be between 0 and 1, got 1.5"),
    ],
)
def test_bad_sizes_write_nothing(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    path = _small_table(tmp_path / "t", n_files=2)
    state = tree_state(path)
    with pytest.raises(InvalidArgument, match=message):
        optimize(DeltaTable(str(path)), **kwargs)
    assert tree_state(path) == state


def test_target_file_size_property_is_the_default(tmp_path: Path) -> None:
    path = _small_table(tmp_path / "t", n_files=6)
    dt = deltalake.DeltaTable(str(path))
    sizes = sorted(DeltaTable(str(path)).snapshot().files.column("size").to_pylist())
    assert 3 * sizes[0] > 2 * sizes[-1]  # any two files fit into twice the largest, no three do
    dt.alter.set_table_properties({"delta.targetFileSize": str(2 * sizes[-1])})
    plan = plan_optimize(DeltaTable(str(path)).snapshot())
    assert plan.target_size == plan.min_file_size == 2 * sizes[-1]
    assert [len(b.files) for b in plan.bins] == [2, 2, 2]


def test_planning_parses_no_statistics_without_deletion_vectors(tmp_path: Path) -> None:
    # the row counts matter only for a file's deleted share: a table without deletion vectors plans from the raw log
    path = _small_table(tmp_path / "t", n_files=4)
    snapshot = DeltaTable(str(path)).snapshot()
    plan = plan_optimize(snapshot)
    assert [len(b.files) for b in plan.bins] == [4]
    assert "stats" not in snapshot.__dict__ and "files" not in snapshot.__dict__


@pytest.mark.parametrize(("ratio", "bins"), [(0.3, 2), (0.34, 0)])
def test_the_deleted_share_counts_the_rows_of_each_file(ratio: float, bins: int) -> None:
    # two files of three rows, one deleted in each (a share of 1/3); no file is small
    snapshot = DeltaTable(str(CORPUS / "kernel-rs-golden/dv-partitioned-with-checkpoint/delta")).snapshot()
    plan = plan_optimize(snapshot, min_file_size=1, max_deleted_rows_ratio=ratio)
    assert [(len(b.files), b.files[0]["deletionVector"]["cardinality"]) for b in plan.bins] == [(1, 1)] * bins


# -- corpus tables -----------------------------------------------------------------------------------------------

# (table, files removed, files added): every partition with two or more files becomes one file, and a lone file
# with a deletion vector is rewritten to purge it; partitions holding a single plain file are left alone.
CORPUS_TABLES = [
    ("kernel-rs-golden/basic-with-inserts-deletes-checkpoint/delta", 7, 1),
    ("kernel-rs-golden/multi-part-checkpoint/delta", 10, 1),
    ("kernel-rs-golden/data-reader-escaped-chars/delta", 0, 0),  # one file per partition
    ("dat-historical/multi_partitioned/delta", 0, 0),  # one file per partition
    ("dat-historical/basic_partitioned/delta", 2, 1),
    ("kernel-rs-golden/data-reader-timestamp_ntz/delta", 2, 1),
    ("kernel-rs-golden/data-reader-timestamp_ntz-id-mode/delta", 2, 1),
    ("kernel-rs-golden/data-reader-timestamp_ntz-name-mode/delta", 2, 1),
    ("kernel-rs-golden/kernel-timestamp-int96/delta", 2, 1),
    ("kernel-rs-golden/dv-partitioned-with-checkpoint/delta", 12, 7),  # 5 two-file partitions + 2 lone DV files
    ("kernel-rs-golden/dv-with-columnmapping/delta", 12, 7),
    ("kernel-rs-golden/data-reader-nested-struct/delta", 2, 1),
    ("kernel-rs-golden/data-reader-array-complex-objects/delta", 2, 1),
    ("kernel-rs-golden/data-reader-map/delta", 2, 1),
    ("kernel-rs-golden/data-reader-primitives/delta", 2, 1),
    ("kernel-rs-golden/basic-decimal-table/delta", 0, 0),  # one file per partition
    ("kernel-rs-golden/v2-checkpoint-parquet/delta", 4, 1),
    ("kernel-rs-golden/table-with-columnmapping-mode-id/delta", 2, 1),
    ("kernel-rs-golden/table-with-columnmapping-mode-name/delta", 2, 1),
]


def _expected(name: str) -> collections.Counter:
    root = (CORPUS / name).parent / "expected"
    latest = root / "latest" if (root / "latest").is_dir() else root
    table = read_expected(latest / "table_content" if (latest / "table_content").is_dir() else latest)
    return row_multiset(table, table.column_names)


@pytest.mark.parametrize(("name", "removed", "added"), CORPUS_TABLES, ids=[t[0] for t in CORPUS_TABLES])
def test_corpus_table_rows_survive_optimize(name: str, removed: int, added: int, tmp_path: Path) -> None:
    path = copy_table(name, tmp_path / "t")
    snapshot = DeltaTable(str(path)).snapshot()
    columns = snapshot.arrow_schema.names
    expected = _expected(name)
    assert _our_rows(path) == expected  # the oracle holds before we touch anything
    # delta-rs and delta-kernel-rs, each where it can read the table (tests/oracles.py), read the same rows
    assert_rows_agree(path, expected, columns=columns, corpus_name=name)
    stats = optimize(DeltaTable(str(path)))
    assert (stats.num_files_removed, stats.num_files_added) == (removed, added)
    assert stats.committed_version == (snapshot.version + 1 if removed else None)
    after = DeltaTable(str(path)).snapshot()
    assert after.num_files == snapshot.num_files - removed + added
    rows, _ = scan(after)
    assert row_multiset(rows, columns) == expected
    if removed:
        actions = _commit(path, stats.committed_version)
        assert all(a[k]["dataChange"] is False for a in actions for k in ("add", "remove") if k in a)
    assert_rows_agree(path, expected, columns=columns, corpus_name=None if removed else name)


def _spec_named_dv_copy(name: str, dest: Path) -> Path:
    """A copy whose DV files carry the spec's name: the Spark test suite wrote them with a test-only prefix."""
    path = copy_table(name, dest)
    for f in path.glob("test%dv%prefix-deletion_vector_*.bin"):
        f.rename(path / f.name.removeprefix("test%dv%prefix-"))
    return path


@pytest.mark.parametrize(
    "name", ["delta-spark-resources/table-with-dv-large", "delta-spark-resources/partitioned-table-with-dv-large"]
)
def test_deletion_vectors_are_purged(name: str, tmp_path: Path) -> None:
    path = _spec_named_dv_copy(name, tmp_path / "t")
    snapshot = DeltaTable(str(path)).snapshot()
    files = snapshot.files
    dvs = [d for d in files.column("deletionVector").to_pylist() if d]
    live_rows = sum(files.column("numRecords").to_pylist()) - sum(d["cardinality"] for d in dvs)
    before = _our_rows(path)
    assert sum(before.values()) == live_rows
    assert assert_rows_agree(path, before, columns=snapshot.arrow_schema.names) == [KERNEL]

    stats = optimize(DeltaTable(str(path)))
    assert stats.num_deletion_vectors_removed == len(dvs)
    assert stats.num_deletion_vector_rows_removed == sum(d["cardinality"] for d in dvs)
    after = DeltaTable(str(path)).snapshot()
    assert after.files.column("deletionVector").null_count == after.num_files  # no DV left
    assert sum(after.files.column("numRecords").to_pylist()) == live_rows
    assert _our_rows(path) == before
    # the protocol keeps the deletionVectors feature, which delta-rs refuses even with no DV left
    assert assert_rows_agree(path, before, columns=snapshot.arrow_schema.names) == [KERNEL]
    removes = [a["remove"] for a in _commit(path, stats.committed_version) if "remove" in a]
    assert sorted(
        json.dumps(r.get("deletionVector"), sort_keys=True) for r in removes if r.get("deletionVector")
    ) == sorted(json.dumps(d, sort_keys=True) for d in dvs)


# -- concurrency ------------------------------------------------------------------------------------------------


def test_append_committed_during_optimize_keeps_its_rows(tmp_path: Path) -> None:
    path = _small_table(tmp_path / "t", n_files=4)
    extra = pa.table(
        {"id": pa.array([9999], pa.int64()), "value": pa.array([1.5]), "name": pa.array(["late"], pa.string())}
    )
    expected = _rows(path) + row_multiset(extra, extra.column_names)
    fired = []

    def append_once(_event: Any) -> None:
        if not fired:
            fired.append(True)
            deltalake.write_deltalake(str(path), extra, mode="append")  # version 4 wins the race

    stats = optimize(DeltaTable(str(path)), progress=append_once, max_concurrent_tasks=1)
    assert stats.read_version == 3 and stats.committed_version == 5
    assert _rows(path) == expected
    assert len(DeltaTable(str(path)).snapshot().files) == 2  # the compacted file and the late append


def test_delete_of_a_compacted_file_during_optimize_aborts_it(tmp_path: Path) -> None:
    path = _small_table(tmp_path / "t", n_files=4)
    fired = []

    def delete_once(_event: Any) -> None:
        if not fired:
            fired.append(True)
            deltalake.DeltaTable(str(path)).delete("id = 3")  # version 4 rewrites one of the compacted files

    expected = _rows(path)
    expected = collections.Counter({k: v for k, v in expected.items() if k[0] != 3})
    with pytest.raises(ConcurrentDeleteRead) as info:
        optimize(DeltaTable(str(path)), progress=delete_once, max_concurrent_tasks=1)
    message = str(info.value)
    assert "conflicting commit: version 4 (DELETE)" in message
    assert (
        "the commit failed: 1 new files (" in message
        and "bytes) are not in the table and are left for VACUUM" in message
    )
    assert info.value.orphaned_bytes > 0
    assert _rows(path) == expected  # the deleted row stays deleted
    assert DeltaTable(str(path)).snapshot().version == 4


# -- writer features ---------------------------------------------------------------------------------------------


def test_a_table_that_just_gained_row_tracking_gets_row_ids_from_zero(tmp_path: Path) -> None:
    # the feature was added without a backfill: no file has a baseRowId and there is no high-water mark yet, so the
    # new files' ids start at 0 (row tracking is only supported: nothing is materialised)
    path = _small_table(tmp_path / "t", n_files=3)
    log = path / "_delta_log"
    protocol = {
        "protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["rowTracking", "domainMetadata"]}
    }
    (log / "00000000000000000003.json").write_text(json.dumps(protocol) + "\n")
    expected = _rows(path)
    result = optimize(DeltaTable(str(path)))
    assert (result.committed_version, result.num_files_removed, result.num_files_added) == (4, 3, 1)
    actions = _commit(path, 4)
    (add,) = [a["add"] for a in actions if "add" in a]
    assert (add["baseRowId"], add["defaultRowCommitVersion"]) == (0, 4)
    assert [a["domainMetadata"] for a in actions if "domainMetadata" in a] == [
        {"domain": "delta.rowTracking", "configuration": '{"rowIdHighWaterMark":149}', "removed": False}
    ]
    assert _rows(path) == expected


# -- object store ------------------------------------------------------------------------------------------------


@pytest.mark.s3
def test_optimize_on_s3_matches_delta_rs(s3_endpoint: dict[str, Any]) -> None:
    import uuid

    import s3fs

    bucket = f"optimize-{uuid.uuid4().hex[:12]}"
    s3fs.S3FileSystem(**s3_endpoint).call_s3("create_bucket", Bucket=bucket)
    uri = f"s3://{bucket}/events"
    deltars_options = {
        "AWS_ENDPOINT_URL": s3_endpoint["endpoint_url"],
        "AWS_ACCESS_KEY_ID": s3_endpoint["key"],
        "AWS_SECRET_ACCESS_KEY": s3_endpoint["secret"],
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
        "conditional_put": "etag",
    }
    for k in range(4):
        data = pa.table({"id": pa.array(range(k * 10, k * 10 + 10), pa.int64()), "p": ["a", "b/c"] * 5})
        deltalake.write_deltalake(uri, data, mode="append", partition_by=["p"], storage_options=deltars_options)

    def theirs() -> collections.Counter:
        rows = pa.table(deltalake.DeltaTable(uri, storage_options=deltars_options).to_pyarrow_table())
        return row_multiset(rows, rows.column_names)

    before = theirs()
    stats = optimize(DeltaTable(uri, storage_options=s3_endpoint))
    assert (stats.num_files_removed, stats.num_files_added, stats.committed_version) == (8, 2, 4)
    assert theirs() == before
    fs = s3fs.S3FileSystem(**s3_endpoint)
    added = DeltaTable(uri, storage_options=s3_endpoint).snapshot().files.to_pylist()
    assert sorted(unquote(a["path"]).split("/part-")[0] for a in added) == ["p=a", "p=b%2Fc"]
    for add in added:  # the object under the decoded path is the file the log describes
        assert fs.size(f"{bucket}/events/{unquote(add['path'])}") == add["size"]
