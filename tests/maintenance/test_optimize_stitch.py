"""OPTIMIZE by row-group stitching: large row groups copied byte for byte, small ones re-encoded together, files that
cannot be copied re-encoded whole; every output read by readers nobody here wrote (pyarrow, delta-rs,
delta-kernel-rs, Spark's own Parquet reader) and its statistics recomputed from its rows."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine.errors import StorageError
from airflow_provider_deltalite.engine.parquet.footer import read_footer
from airflow_provider_deltalite.maintenance.optimize import optimize
from tests.conformance.corpus import row_multiset
from tests.helpers import copy_table
from tests.maintenance.stitch_checks import (
    check_page_locations,
    check_stats_hold,
    commit_actions,
    copied_chunks,
    file_of,
)
from tests.oracles import agreed_rows, assert_rows_agree, oracle_rows

ROWS_PER_FILE = 20_000
GROUP_ROWS = 8_000  # row groups of 8000, 8000 and 4000 rows per file


def _batch(i: int, n: int = ROWS_PER_FILE, nested: bool = False, lists: bool = False) -> pa.Table:
    ids = range(i * n, (i + 1) * n)
    columns: dict[str, Any] = {
        "id": pa.array(ids, pa.int64()),
        "name": pa.array([f"name-{k % 977}-{'é' * (k % 3)}" if k % 11 else None for k in ids]),
        "value": pa.array([k / 7 for k in ids], pa.float64()),
        "day": pa.array([k % 400 for k in ids], pa.int32()).cast(pa.date32()),
        "ts": pa.array([1_700_000_000_000_000 + k * 1_001 for k in ids], pa.timestamp("us", tz="UTC")),
        "p": pa.array(["a" if k % 3 else "b" for k in ids]),
    }
    if nested:
        columns["s"] = pa.array([{"x": k, "y": f"y{k % 13}"} if k % 5 else None for k in ids])
    if lists:
        columns["l"] = pa.array([[k, k + 1] if k % 4 else [] for k in ids], pa.list_(pa.int64()))
    return pa.table(columns)


def _writer(bloom: bool = True) -> deltalake.WriterProperties:
    column = deltalake.ColumnProperties(
        bloom_filter_properties=deltalake.BloomFilterProperties(True, 0.01, ROWS_PER_FILE) if bloom else None
    )
    return deltalake.WriterProperties(
        max_row_group_size=GROUP_ROWS, column_properties={"id": column, "name": column}, compression="SNAPPY"
    )


def _delta_rs_table(
    path: Path, files: int = 5, *, partition_by: list[str] | None = None, nested: bool = False, lists: bool = False
) -> Path:
    for i in range(files):
        deltalake.write_deltalake(
            str(path),
            _batch(i, nested=nested, lists=lists),
            mode="append",
            partition_by=partition_by,
            writer_properties=_writer(),
        )
    return path


def _threshold(path: Path) -> int:
    """A min_row_group_size between the sizes of the 4000-row and the 8000-row groups of the table's files."""
    small, large = [], []
    for f in path.rglob("*.parquet"):
        for group in read_footer(f.read_bytes()).row_groups:
            (large if group.num_rows == GROUP_ROWS else small).append(group.total_compressed_size)
    assert max(small) < min(large)
    return (max(small) + min(large)) // 2


def _inputs(path: Path) -> list[bytes]:
    return [f.read_bytes() for f in path.rglob("*.parquet")]


def _columns(path: Path) -> list[str]:
    return deltalake.DeltaTable(str(path)).schema().to_arrow().names


def test_large_row_groups_are_copied_and_small_ones_re_encoded_together(tmp_path: Path) -> None:
    path = _delta_rs_table(tmp_path / "t")
    threshold = _threshold(path)
    inputs = _inputs(path)
    before = agreed_rows(path)
    stats = optimize(DeltaTable(str(path)), min_row_group_size=threshold)

    assert (stats.num_files_removed, stats.num_files_added) == (5, 1)
    assert (stats.num_files_copied, stats.num_files_reencoded) == (5, 0)
    assert_rows_agree(path, before, columns=_columns(path))
    (add,) = commit_actions(path, stats.committed_version, "add")
    out = file_of(path, add)
    data = out.read_bytes()
    meta = read_footer(data)
    # 10 row groups of 8000 rows copied, the five 4000-row tails re-encoded into one row group
    assert [g.num_rows for g in meta.row_groups] == [GROUP_ROWS] * 10 + [5 * 4000]
    assert [g.ordinal for g in meta.row_groups] == list(range(11))
    columns = len(meta.row_groups[0].columns)
    assert copied_chunks(data, inputs) == 10 * columns
    copied = sum(g.total_compressed_size for g in meta.row_groups[:10])
    assert stats.bytes_copied == copied
    assert stats.to_dict()["bytesCopied"] == copied and stats.to_dict()["numFilesCopied"] == 5
    # page indexes carried for the copied chunks (the re-encoded row group has none: our writer writes none)
    assert check_page_locations(data) >= 10 * columns
    for group in meta.row_groups[:10]:
        assert all(c.offset_index_offset is not None and c.column_index_offset is not None for c in group.columns)
    # bloom filters carried as bytes: the same filter bytes as some input's, at the new offsets
    blooms = _bloom_filters(data)
    assert blooms.total() == 10 * 2
    assert blooms <= sum((_bloom_filters(d) for d in inputs), collections.Counter())
    assert check_stats_hold(out, add["stats"]) == 3 * 6  # a null count, a min and a max for each of 6 columns
    assert pq.read_table(out).num_rows == 5 * ROWS_PER_FILE


def _bloom_filters(data: bytes) -> collections.Counter[bytes]:
    out: collections.Counter[bytes] = collections.Counter()
    for group in read_footer(data).row_groups:
        for chunk in group.columns:
            md = chunk.meta_data
            if md.bloom_filter_offset is not None:
                out[data[md.bloom_filter_offset : md.bloom_filter_offset + md.bloom_filter_length]] += 1
    return out


def test_default_threshold_re_encodes_small_row_groups_as_before(tmp_path: Path) -> None:
    path = _delta_rs_table(tmp_path / "t", files=3)
    before = agreed_rows(path)
    stats = optimize(DeltaTable(str(path)))  # every row group is far below the default 8 MiB
    assert (stats.num_files_copied, stats.num_files_reencoded, stats.bytes_copied) == (0, 3, 0)
    assert_rows_agree(path, before, columns=_columns(path))


def test_partitioned_and_nested_tables_stitch_per_partition(tmp_path: Path) -> None:
    path = _delta_rs_table(tmp_path / "t", files=4, partition_by=["p"], nested=True)
    before = agreed_rows(path)
    stats = optimize(DeltaTable(str(path)), min_row_group_size=1)
    assert (stats.num_files_removed, stats.num_files_added) == (8, 2)
    assert (stats.num_files_copied, stats.num_files_reencoded) == (8, 0)
    assert_rows_agree(path, before, columns=_columns(path))
    _check_outputs(path, stats.committed_version)


def test_list_columns_of_another_writer_re_encode(tmp_path: Path) -> None:
    # arrow-rs names a list's element "item", pyarrow "element": not the same Parquet schema, so not copied
    path = _delta_rs_table(tmp_path / "t", files=2, lists=True)
    before = agreed_rows(path)
    stats = optimize(DeltaTable(str(path)), min_row_group_size=1)
    assert (stats.num_files_copied, stats.num_files_reencoded) == (0, 2)
    assert_rows_agree(path, before, columns=_columns(path))


def _check_outputs(path: Path, version: int) -> None:
    for add in commit_actions(path, version, "add"):
        f = file_of(path, add)
        assert check_stats_hold(f, add["stats"]) > 0
        check_page_locations(f.read_bytes())
        assert add["partitionValues"]["p"] in ("a", "b")
        assert set(pq.read_table(f).column("id").to_pylist()) == {
            k for k in range(4 * ROWS_PER_FILE) if ("a" if k % 3 else "b") == add["partitionValues"]["p"]
        }


def test_schema_drift_re_encodes_the_older_files_into_the_same_output(tmp_path: Path) -> None:
    path = tmp_path / "t"
    for i in range(2):
        deltalake.write_deltalake(str(path), _batch(i).drop_columns(["ts"]), mode="append", writer_properties=_writer())
    for i in range(2, 4):
        deltalake.write_deltalake(str(path), _batch(i), mode="append", schema_mode="merge", writer_properties=_writer())
    before = agreed_rows(path)
    stats = optimize(DeltaTable(str(path)), min_row_group_size=1)
    assert (stats.num_files_copied, stats.num_files_reencoded, stats.num_files_added) == (2, 2, 1)
    assert_rows_agree(path, before, columns=_columns(path))
    (add,) = commit_actions(path, stats.committed_version, "add")
    f = file_of(path, add)
    assert check_stats_hold(f, add["stats"]) > 0
    assert pq.read_table(f).column("ts").null_count == 2 * ROWS_PER_FILE


def test_deletion_vectors_are_applied_by_re_encoding_those_files(tmp_path: Path) -> None:
    path = _delta_rs_table(tmp_path / "t", files=3)
    dt_ = deltalake.DeltaTable(str(path))
    dt_.alter.set_table_properties({"delta.enableDeletionVectors": "true"})
    # delta-rs 1.6 rewrites files on delete; a DV table of the corpus covers DVs in the other test
    before = agreed_rows(path)
    stats = optimize(DeltaTable(str(path)), min_row_group_size=1)
    assert stats.num_files_copied == 3
    assert_rows_agree(path, before, columns=_columns(path))


CORPUS_TABLES = {
    # name: (files copied, files re-encoded) with min_row_group_size=1. Spark's files of a plain table match our
    # writer's Parquet schema and are copied (those with a deletion vector are re-encoded); under column mapping and
    # with variant columns Spark's Parquet schema differs from ours (field ids, annotations), so they are re-encoded.
    "kernel-rs-golden/dv-partitioned-with-checkpoint/delta": (10, 2),
    "delta-golden/table-with-columnmapping-mode-name": (0, 2),
    "delta-golden/table-with-columnmapping-mode-id": (0, 2),
    "delta-kernel-defaults/spark-variant-checkpoint": (0, 4),
    "delta-golden/dv-with-columnmapping": (0, 12),
}


@pytest.mark.parametrize("name", sorted(CORPUS_TABLES))
def test_corpus_tables_compact_to_the_same_rows(name: str, tmp_path: Path) -> None:
    path = copy_table(name, tmp_path / "t")
    before = agreed_rows(path)
    columns = list(agreed_columns(path))
    stats = optimize(DeltaTable(str(path)), min_row_group_size=1)
    assert stats.committed_version is not None
    assert (stats.num_files_copied, stats.num_files_reencoded) == CORPUS_TABLES[name], stats.to_dict()
    assert stats.num_files_copied + stats.num_files_reencoded == stats.num_files_removed
    assert_rows_agree(path, before, columns=columns)
    for add in commit_actions(path, stats.committed_version, "add"):
        check_stats_hold(file_of(path, add), add["stats"])


def agreed_columns(path: Path) -> list[str]:
    rows, _ = oracle_rows(path)
    return next(iter(rows.values())).column_names


def test_stitching_on_s3_reads_ranges_and_writes_one_object(s3_endpoint: dict[str, Any], tmp_path: Path) -> None:
    import s3fs

    from tests.moto_server import deltars_s3_options

    fs = s3fs.S3FileSystem(**s3_endpoint)
    bucket = f"stitch-{tmp_path.name.lower().replace('_', '-')[:40]}"
    fs.call_s3("create_bucket", Bucket=bucket)
    uri = f"s3://{bucket}/t"
    options = deltars_s3_options(s3_endpoint)
    for i in range(3):
        deltalake.write_deltalake(uri, _batch(i), mode="append", writer_properties=_writer(), storage_options=options)
    before = row_counts = deltalake.DeltaTable(uri, storage_options=options).to_pyarrow_table()
    stats = optimize(DeltaTable(uri, s3_endpoint), min_row_group_size=1)
    assert (stats.num_files_copied, stats.num_files_reencoded, stats.num_files_added) == (3, 0, 1)
    after = deltalake.DeltaTable(uri, storage_options=options).to_pyarrow_table()
    columns = before.column_names
    assert row_multiset(after, columns) == row_multiset(row_counts, columns)
    (uri_file,) = deltalake.DeltaTable(uri, storage_options=options).file_uris()
    data = fs.cat(uri_file.removeprefix("s3://"))
    assert [g.num_rows for g in read_footer(data).row_groups] == [GROUP_ROWS, GROUP_ROWS, 4000] * 3
    check_page_locations(data)


def test_liquid_clustering_clusters_and_copies_nothing(tmp_path: Path) -> None:
    path = copy_table("delta-rs/table_with_liquid_clustering", tmp_path / "t")
    before = agreed_rows(path)
    stats = optimize(DeltaTable(str(path)), min_row_group_size=1)
    assert stats.num_files_copied == 0 and stats.num_files_reencoded == stats.num_files_removed
    assert_rows_agree(path, before, columns=agreed_columns(path))


def _encodings(data: bytes, column: str) -> tuple[bool, set[int]]:
    """(has a dictionary page, encodings of its data pages) of ``column`` over a file's row groups."""
    dictionary, encodings = False, set()
    for group in read_footer(data).row_groups:
        for chunk in group.columns:
            md = chunk.meta_data
            if md.path == (column,):
                dictionary |= md.dictionary_page_offset is not None
                encodings |= {s.encoding for s in md.encoding_stats if s.page_type in (0, 3)}
    return dictionary, encodings


def test_a_column_whose_input_dictionary_overflowed_is_written_plain(tmp_path: Path) -> None:
    # `k` starts with 10 distinct values (what a first-rows sample sees), then every value is new: delta-rs's writer
    # tried a dictionary and fell back to plain pages in each input; `low` stays low-cardinality throughout
    path = tmp_path / "t"
    n = 120_000
    for f in range(2):
        k = [f"v{j % 10}" if j < 80_000 else f"{f}-{j:012d}-unique-padding-{j:020d}" for j in range(n)]
        data = pa.table({"k": k, "low": [f"low-{j % 7}" for j in range(n)], "id": pa.array(range(n), pa.int64())})
        deltalake.write_deltalake(str(path), data, mode="append")
    for f in path.glob("*.parquet"):
        assert _encodings(f.read_bytes(), "k") == (True, {0, 8})  # PLAIN and RLE_DICTIONARY data pages: a fallback
    before = agreed_rows(path)
    stats = optimize(DeltaTable(str(path)))
    assert (stats.num_files_copied, stats.num_files_reencoded) == (0, 2)
    assert_rows_agree(path, before, columns=_columns(path))
    (add,) = commit_actions(path, stats.committed_version, "add")
    data = file_of(path, add).read_bytes()
    # no dictionary built only to be dropped: one encoding of values throughout (18 bytes a value on average:
    # DELTA_LENGTH_BYTE_ARRAY, `engine.column_encodings`)
    assert _encodings(data, "k") == (False, {6})
    assert _encodings(data, "low")[0] is True


def test_on_s3_large_row_groups_are_copied_by_the_store_not_sent(s3_endpoint: dict[str, Any], tmp_path: Path) -> None:
    import numpy as np
    import s3fs

    from tests.moto_server import deltars_s3_options

    fs = s3fs.S3FileSystem(**s3_endpoint)
    bucket = f"compose-{tmp_path.name.lower().replace('_', '-')[:40]}"
    fs.call_s3("create_bucket", Bucket=bucket)
    uri = f"s3://{bucket}/t"
    options = deltars_s3_options(s3_endpoint)
    rng = np.random.default_rng(7)
    n = 800_000  # random int64s: about 6.1 MiB a row group, over S3's 5 MiB minimum part
    props = deltalake.WriterProperties(max_row_group_size=n, compression="SNAPPY")
    for i in range(3):
        data = pa.table({"id": pa.array(range(i * n, (i + 1) * n), pa.int64()), "r": rng.integers(0, 2**62, n)})
        deltalake.write_deltalake(uri, data, mode="append", writer_properties=props, storage_options=options)
    before = deltalake.DeltaTable(uri, storage_options=options).to_pyarrow_table()
    stats = optimize(DeltaTable(uri, s3_endpoint), min_row_group_size=5 * 1024 * 1024)
    assert (stats.num_files_copied, stats.num_files_reencoded, stats.num_files_added) == (3, 0, 1)
    compacted = stats.files_removed.total_size
    assert stats.bytes_copied > 0.99 * compacted
    assert stats.bytes_uploaded < 0.05 * compacted  # page indexes and the footer only
    after = deltalake.DeltaTable(uri, storage_options=options).to_pyarrow_table()
    assert row_multiset(after, before.column_names) == row_multiset(before, before.column_names)
    (uri_file,) = deltalake.DeltaTable(uri, storage_options=options).file_uris()
    data = fs.cat(uri_file.removeprefix("s3://"))
    assert len(data) == stats.files_added.total_size
    assert [g.num_rows for g in read_footer(data).row_groups] == [n] * 3
    check_page_locations(data)
    assert fs.call_s3("list_multipart_uploads", Bucket=bucket).get("Uploads", []) == []


def test_an_int96_file_next_to_int64_files_is_re_encoded(tmp_path: Path) -> None:
    # one file rewritten in place with INT96 timestamps (as old Spark writes them), its size fixed in the log
    path = _delta_rs_table(tmp_path / "t", files=3)
    victim = sorted(path.glob("*.parquet"))[0]
    rows = pq.read_table(victim)
    pq.write_table(rows, victim, use_deprecated_int96_timestamps=True)
    size = victim.stat().st_size
    for commit in (path / "_delta_log").glob("*.json"):
        lines = []
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action and action["add"]["path"] == victim.name:
                action["add"]["size"] = size
            lines.append(json.dumps(action))
        commit.write_text("\n".join(lines) + "\n")
    assert read_footer(victim.read_bytes()).schema[5].type == 3  # INT96
    before = agreed_rows(path)
    stats = optimize(DeltaTable(str(path)), min_row_group_size=1)
    assert (stats.num_files_copied, stats.num_files_reencoded) == (2, 1)
    assert_rows_agree(path, before, columns=_columns(path))
    (add,) = commit_actions(path, stats.committed_version, "add")
    out = file_of(path, add)
    assert read_footer(out.read_bytes()).schema[5].type == 2  # ts back to INT64 microseconds, as the table's
    assert check_stats_hold(out, add["stats"]) > 0


def test_a_failure_while_the_local_file_is_composed_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # on the local disk the output is composed while the bin is planned: a failure after the first input has gone to
    # the composing thread stops it, removes the partial file and commits nothing
    from airflow_provider_deltalite.engine import rewrite_stitch

    path = _delta_rs_table(tmp_path / "t", files=3)
    threshold = _threshold(path)
    files_before = sorted(p.name for p in path.rglob("*") if p.is_file())
    plan_source = rewrite_stitch._plan_source
    calls = []

    def failing_second(*args: Any) -> Any:
        calls.append(args)
        if len(calls) == 2:
            raise StorageError("injected", str(path))
        return plan_source(*args)

    monkeypatch.setattr(rewrite_stitch, "_plan_source", failing_second)
    with pytest.raises(StorageError, match="injected"):
        optimize(DeltaTable(str(path)), min_row_group_size=threshold)
    assert sorted(p.name for p in path.rglob("*") if p.is_file()) == files_before
    assert deltalake.DeltaTable(str(path)).version() == 2  # nothing committed
