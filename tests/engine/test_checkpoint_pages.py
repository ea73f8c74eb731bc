"""`checkpoint_pages.PagedColumns`: the chosen rows of a checkpoint column read from the pages that hold them are the
rows pyarrow decodes from the whole column chunk, and a pruned replay that reads its large columns by pages holds
what the full replay does (and delta-rs)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite.engine import checkpoint_stream
from airflow_provider_deltalite.engine.checkpoint_pages import PagedColumns
from airflow_provider_deltalite.engine.partition_filter import PartitionFilter
from airflow_provider_deltalite.engine.snapshot import load_snapshot
from airflow_provider_deltalite.engine.storage.table_storage import Storage
from tests.conformance.corpus import normalise_path
from tests.engine.test_pruned_replay import _check, _random_history

ROWS = 3_000


def _checkpoint_like(path: Path, compression: str, page_version: str, dictionary: bool) -> pa.Table:
    """Adds and removes in a checkpoint's shape (an action null where the row is of the other kind), in pages of a
    few dozen rows."""
    rng = np.random.default_rng(7)
    is_add = rng.random(ROWS) < 0.8
    stats = [
        None if rng.random() < 0.05 else json.dumps({"numRecords": int(i), "pad": "x" * (i % 50)}) for i in range(ROWS)
    ]
    smap = pa.map_(pa.string(), pa.string())
    add = pa.StructArray.from_arrays(
        [
            pa.array([f"p={i % 7}/f-{i:05d}.parquet" for i in range(ROWS)]),
            pa.array([[("p", str(i % 7))] for i in range(ROWS)], smap),
            pa.array(rng.integers(0, 1 << 40, ROWS)),
            pa.array(stats, pa.string()),
        ],
        names=["path", "partitionValues", "size", "stats"],
        mask=pa.array(~is_add),
    )
    remove = pa.StructArray.from_arrays(
        [pa.array([f"gone-{i}" for i in range(ROWS)]), pa.array(rng.integers(0, 9, ROWS))],
        names=["path", "deletionTimestamp"],
        mask=pa.array(is_add),
    )
    table = pa.table({"add": add, "remove": remove})
    pq.write_table(
        table,
        path,
        compression=compression,
        data_page_version=page_version,
        use_dictionary=dictionary,
        data_page_size=512,
        write_batch_size=40,
        dictionary_pagesize_limit=2048,  # the dictionary fills up: later pages fall back to plain
    )
    return table


@pytest.mark.parametrize(
    ("compression", "page_version", "dictionary"),
    [("snappy", "1.0", True), ("zstd", "2.0", True), ("none", "1.0", False), ("gzip", "2.0", False)],
)
def test_chosen_rows_read_by_pages_are_the_rows_pyarrow_decodes(
    tmp_path: Path, compression: str, page_version: str, dictionary: bool
) -> None:
    path = tmp_path / "checkpoint.parquet"
    _checkpoint_like(path, compression, page_version, dictionary)
    whole = pq.read_table(path)
    rng = random.Random(compression)
    masks = [np.zeros(ROWS, bool) for _ in range(4)]
    masks[0][ROWS - 5 :] = True  # the last rows
    masks[1][:3] = True  # the first rows
    masks[2][np.array(rng.sample(range(ROWS), 40))] = True  # scattered
    masks[3][:] = True
    with pa.OSFile(str(path), "rb") as source:
        paged = PagedColumns.open(source)
        assert paged is not None
        chunk = next(c for c in paged.meta.row_groups[0].columns if c.meta_data.path == ("add", "stats"))
        assert len(paged._pages(chunk)[1]) > 20  # many pages: most are skipped for a few rows
        for mask in masks:
            for column in ("add.path", "add.stats", "add.size", "remove.path", "remove.deletionTimestamp"):
                kind, name = column.split(".")
                got = paged.rows(0, column, mask)
                assert got is not None, column
                expected = whole.column(kind).combine_chunks().filter(pa.array(mask))
                assert got.is_valid().to_pylist() == expected.is_valid().to_pylist(), column
                assert got.field(0).to_pylist() == expected.field(name).to_pylist(), column
        # a map's leaves repeat: not read by pages
        assert paged.rows(0, "add.partitionValues", masks[0]) is None
        assert paged.rows(0, "add.nothing", masks[0]) is None


def test_a_file_that_is_not_parquet_gives_no_pages(tmp_path: Path) -> None:
    path = tmp_path / "x.parquet"
    path.write_bytes(b"not a parquet file at all")
    with pa.OSFile(str(path), "rb") as source:
        assert PagedColumns.open(source) is None


def test_pruned_replay_reading_columns_by_pages_equals_the_full_replay_and_delta_rs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A random history whose last checkpoint (delta-rs's) is rewritten in pages of a few rows; every column of it
    is read by pages (the size threshold set to 0), and the result is the full replay's and delta-rs's."""
    root = tmp_path / "t"
    assert _random_history(root, 3) == [7, 15, 20]
    checkpoint = root / "_delta_log" / f"{20:020d}.checkpoint.parquet"
    pq.write_table(pq.read_table(checkpoint), checkpoint, data_page_size=64, write_batch_size=4)
    storage = Storage(str(root))
    full = load_snapshot(storage)
    monkeypatch.setattr(checkpoint_stream, "PAGED_COLUMN_BYTES", 0)
    read: list[str] = []
    real = PagedColumns.rows

    def counting(self: PagedColumns, rg: int, path: str, chosen: np.ndarray) -> pa.Array | None:
        out = real(self, rg, path, chosen)
        if out is not None:
            read.append(path)
        return out

    monkeypatch.setattr(PagedColumns, "rows", counting)
    for predicate in ("p = 'a'", "p IS NULL", "p = 'b' OR p = 'd'", "NOT (p = 'c')", "p = 'zz'"):
        assert _check(storage, full, predicate, None)
    assert {"add.path", "add.stats", "add.size", "remove.path"} <= set(read)
    dt = deltalake.DeltaTable(str(root))
    for part in ("a", "c"):
        pruned = load_snapshot(storage, partition_filter=PartitionFilter(f"p = '{part}'"))
        theirs = {normalise_path(p, root) for p in dt.file_uris([("p", "=", part)])}
        assert set(pruned.raw_files.column("path").to_pylist()) == theirs, part


def test_a_row_group_with_many_kept_rows_is_streamed_and_equals_the_full_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above `PAGED_MAX_ROWS` kept rows a row group is decoded in batches cut to the kept rows (few pages to skip);
    with the limit at 0 every row group takes that path, and the result is the full replay's."""
    root = tmp_path / "t"
    assert _random_history(root, 4) == [7, 15, 20]
    storage = Storage(str(root))
    full = load_snapshot(storage)
    monkeypatch.setattr(checkpoint_stream, "PAGED_MAX_ROWS", 0)
    monkeypatch.setattr(PagedColumns, "rows", lambda *args: pytest.fail("read by pages"))
    for predicate in ("p = 'a'", "p IS NULL", "NOT (p = 'c')", "p = 'zz'"):
        assert _check(storage, full, predicate, None)


def test_two_partition_columns_with_nulls_evaluated_per_distinct_combination_equal_the_full_replay(
    tmp_path: Path,
) -> None:
    """The first pass reads the partitionValues maps as dictionaries and evaluates the predicate once per distinct
    (a, b); on a delta-rs checkpoint with a null partition and a commit after it, the pruned replay is the full
    one's."""
    root = tmp_path / "t"

    def rows(i: int, a: str | None, b: int) -> pa.Table:
        return pa.table({"id": pa.array([i], pa.int64()), "a": pa.array([a], pa.string()), "b": pa.array([b])})

    for i in range(12):
        part = f"x{i % 3}" if i % 5 else None
        deltalake.write_deltalake(str(root), rows(i, part, i % 4), partition_by=["a", "b"], mode="append")
    deltalake.DeltaTable(str(root)).create_checkpoint()
    deltalake.write_deltalake(str(root), rows(99, "x1", 2), partition_by=["a", "b"], mode="append")
    storage = Storage(str(root))
    full = load_snapshot(storage)
    assert full.raw_files.num_rows == 13
    for predicate in (
        "a = 'x1'",
        "b = 2",
        "a = 'x1' AND b = 2",
        "a IS NULL",
        "a = 'x2' OR b = 0",
        "NOT (a = 'x0')",
        "b > 1 AND a IS NOT NULL",
        "a = 'nope'",
    ):
        assert _check(storage, full, predicate, None), predicate
