"""OPTIMIZE on variant and geospatial tables keeps every value: the bytes of each (metadata, value) of unshredded
variants, the rebuilt value of shredded ones (written back unshredded), and the WKB of geometry/geography columns.
Before and after are read from the Parquet files with pyarrow, and the result with delta-kernel-rs."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine.rewrite import RewriteTask, TableContext, rewrite_files
from airflow_provider_deltalite.engine.scan import scan
from airflow_provider_deltalite.engine.variant import to_variant_storage
from tests.conformance.corpus import DELTA_RS_CANNOT_READ, deltars_paths, row_multiset
from tests.engine.test_variant import SHREDDED, UNSHREDDED, kernel_rows, physical_cells
from tests.helpers import CORPUS, copy_table
from tests.variant_oracle import file_cells


def _optimized(path: Path) -> tuple[set[str], set[str]]:
    """Force every live file to be rewritten (OPTIMIZE with a huge minimum size; the rewrite primitive itself for a
    one-file table, which OPTIMIZE leaves alone); the live paths before and the new files' paths."""
    before = deltars_paths(path)
    assert before
    table = DeltaTable(str(path))
    if len(before) > 1:
        stats = table.optimize(min_file_size=1 << 40)
        assert stats.num_files_removed == len(before) and stats.num_files_added == 1
        after = deltars_paths(path)
        assert after is not None
        return before, after
    snap = table.snapshot()
    adds = tuple(json.loads(a) if isinstance(a, str) else a for a in snap.raw_files.to_pylist())
    result = rewrite_files(RewriteTask(TableContext.from_snapshot(snap), 0, adds, 0))
    return before, {result.adds[0]["path"]}


def _cells(path: Path, paths: set[str], *, decoded: bool) -> collections.Counter:
    schema = DeltaTable(str(path)).snapshot().schema
    return collections.Counter(c for p in sorted(paths) for c in file_cells(path / p, schema, decoded=decoded))


@pytest.mark.parametrize("name", UNSHREDDED)
def test_optimize_keeps_every_unshredded_variant_byte_for_byte(name: str, tmp_path: Path) -> None:
    path = copy_table(name, tmp_path / "t")
    rows_before = kernel_rows(path)
    raw_before = physical_cells(path, decoded=False)
    _before, new = _optimized(path)
    raw_after = _cells(path, new, decoded=False)
    assert raw_after == raw_before and sum(raw_after.values()) > 0
    rows_after = kernel_rows(path)
    assert row_multiset(rows_after, rows_after.column_names) == row_multiset(rows_before, rows_before.column_names)
    if name not in DELTA_RS_CANNOT_READ:  # delta-rs 1.6.3 reads unshredded variant tables without variantShredding
        theirs = deltalake.DeltaTable(str(path)).to_pyarrow_table()
        assert row_multiset(theirs, rows_before.column_names) == row_multiset(rows_before, rows_before.column_names)


@pytest.mark.parametrize("name", SHREDDED)
def test_optimize_rebuilds_shredded_variants_exactly_and_writes_them_unshredded(name: str, tmp_path: Path) -> None:
    path = copy_table(name, tmp_path / "t")
    decoded_before = physical_cells(path, decoded=True)
    ours_before, _ = scan(DeltaTable(str(path)).snapshot())
    _before, new = _optimized(path)
    assert _cells(path, new, decoded=True) == decoded_before
    for p in new:  # one layout, unshredded, in every new file
        raw = _cells(path, {p}, decoded=False)
        assert {typed for _m, _v, typed in raw} == {"null"}
        assert all(field.type.num_fields == 2 for field in _variant_fields(pq.read_schema(path / p)))
    # the new files are unshredded, so delta-kernel-rs reads the table now, as our scan read it before
    theirs = kernel_rows(path) if len(_before) > 1 else None
    if theirs is not None:
        assert row_multiset(theirs, theirs.column_names) == row_multiset(ours_before, theirs.column_names)


def _variant_fields(schema: pa.Schema) -> list[pa.Field]:
    out = []

    def walk(field: pa.Field) -> None:
        if pa.types.is_struct(field.type):
            names = {f.name for f in field.type}
            if "metadata" in names:
                out.append(field)
                return
            for child in field.type:
                walk(child)

    for field in schema:
        walk(field)
    return out


def test_optimize_keeps_the_unshredded_stats_of_variant_columns(tmp_path: Path) -> None:
    path = copy_table("delta-spark-resources/variant-stats-with-struct-no-checkpoint", tmp_path / "t")
    DeltaTable(str(path)).optimize(min_file_size=1 << 40)
    [add] = [a for a in DeltaTable(str(path)).snapshot().raw_files.to_pylist()]
    stats = json.loads(add["stats"])
    # variant: a null count only (min/max are for shredded files, which deltalite does not write)
    assert stats == {
        "numRecords": 10,
        "minValues": {"s": {"i": 200, "j": "str_200"}},
        "maxValues": {"s": {"i": 209, "j": "str_209"}},
        "nullCount": {"v": 0, "s": {"i": 0, "j": 0}},
    }


# ----------------------------------------------------------------------------------------------------------------------
# Geospatial: kernel-rs-data/table-with-geo (geometry(OGC:CRS84), geography(OGC:CRS84, spherical)) with data added


def _point(x: float, y: float) -> bytes:
    return b"\x01" + (1).to_bytes(4, "little") + pa.array([x, y], pa.float64()).buffers()[1].to_pybytes()


def _geo_table(tmp_path: Path) -> tuple[Path, list[tuple[bytes | None, bytes | None]]]:
    path = copy_table("kernel-rs-data/table-with-geo", tmp_path / "t")
    rows: list[tuple[bytes | None, bytes | None]] = []
    adds = []
    for k in range(3):
        geom = [_point(k, 1.5), None, _point(-k, 2.25)]
        geog = [_point(10 + k, 45.0), _point(11, -45.5), None]
        data = pa.table({"geom": pa.array(geom, pa.binary()), "geog": pa.array(geog, pa.binary())})
        name = f"part-{k:05d}.parquet"
        pq.write_table(data, path / name)
        rows += list(zip(geom, geog, strict=True))
        size = (path / name).stat().st_size
        stats = {"numRecords": 3, "nullCount": {"geom": 1, "geog": 1}}
        adds.append({"path": name, "partitionValues": {}, "size": size, "modificationTime": 0, "dataChange": True})
        adds[-1]["stats"] = json.dumps(stats)
    commit = "".join(json.dumps({"add": a}) + "\n" for a in adds)
    (path / "_delta_log" / "00000000000000000001.json").write_text(commit)
    return path, rows


def test_geospatial_table_reads_its_wkb_and_optimize_keeps_it(tmp_path: Path) -> None:
    assert not list((CORPUS / "kernel-rs-data/table-with-geo").glob("*.parquet"))  # the corpus table has no rows
    path, rows = _geo_table(tmp_path)
    got, _ = scan(DeltaTable(str(path)).snapshot())
    assert got.schema == pa.schema([pa.field("geom", pa.binary()), pa.field("geog", pa.binary())])
    assert collections.Counter(zip(got.column("geom").to_pylist(), got.column("geog").to_pylist())) == (
        collections.Counter(rows)
    )
    stats = DeltaTable(str(path)).optimize(min_file_size=1 << 40)
    assert stats.num_files_removed == 3 and stats.num_files_added == 1
    [add] = DeltaTable(str(path)).snapshot().raw_files.to_pylist()
    written = pq.read_table(path / add["path"])
    assert collections.Counter(zip(written.column("geom").to_pylist(), written.column("geog").to_pylist())) == (
        collections.Counter(rows)
    )
    # no bounds: the protocol defines none for geospatial columns; the null count is exact
    assert json.loads(add["stats"]) == {"numRecords": 9, "nullCount": {"geom": 3, "geog": 3}}


def test_optimize_merges_files_of_different_shredding_layouts_into_one_unshredded_file(tmp_path: Path) -> None:
    """Spark infers a shredding schema per file; here one file keeps `typed_value.key` (int64) and the other holds
    the same kind of values unshredded. Concatenating the two groups as they are is impossible; the rebuilt values
    of both land in one unshredded file."""
    path = copy_table("delta-spark-resources/variant-stats-with-struct-no-checkpoint", tmp_path / "t")
    first, second = sorted(path.glob("*.parquet"))
    table = pq.read_table(second)
    unshredded = to_variant_storage(table.column("v").combine_chunks(), "v", None)
    pq.write_table(table.set_column(table.column_names.index("v"), "v", unshredded), second)
    for commit in (path / "_delta_log").glob("*.json"):
        actions = [json.loads(line) for line in commit.read_text().splitlines()]
        for action in actions:
            if "add" in action and second.name in action["add"]["path"].replace("%25", "%"):
                action["add"]["size"] = second.stat().st_size
        commit.write_text("".join(json.dumps(a) + "\n" for a in actions))
    assert pq.read_schema(first).field("v").type != pq.read_schema(second).field("v").type
    decoded_before = physical_cells(path, decoded=True)
    _before, new = _optimized(path)
    assert _cells(path, new, decoded=True) == decoded_before and sum(decoded_before.values()) == 10
    [written] = new
    assert pq.read_schema(path / written).field("v").type == pa.struct(
        [pa.field("metadata", pa.binary(), False), pa.field("value", pa.binary(), False)]
    )
    rows = kernel_rows(path)
    assert rows.num_rows == 10 and sorted(rows.column("s").combine_chunks().field("i").to_pylist()) == list(
        range(200, 210)
    )
