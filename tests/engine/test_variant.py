"""Variant and geospatial columns read: the corpus variant tables against delta-kernel-rs, delta-rs and an independent
rebuild of shredded values (tests/variant_oracle.py); shredding edge cases; a shredded layout that breaks the spec."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import delta_kernel_rust_sharing_wrapper as kernel
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine.errors import SchemaError
from airflow_provider_deltalite.engine.scan import scan
from airflow_provider_deltalite.engine.variant import VARIANT_STORAGE, to_variant_storage
from tests.conformance.corpus import deltars_paths, row_multiset
from tests.helpers import CORPUS, cli_failure, copy_table, tree_state
from tests.variant_oracle import MISSING, canonical, decode, file_cells, unshred, variant_cells

# Variant tables of the corpus whose data files are on disk, by layout. The two `spark-variant-stable-feature-
# checkpoint` tables reference files the corpus does not hold (delta-kernel-rs fails on them too).
UNSHREDDED = [
    "delta-golden/spark-variant-checkpoint",
    "delta-kernel-defaults/spark-shredded-variant-preview-delta",  # shredding enabled, files written unshredded
    "delta-kernel-defaults/spark-variant-checkpoint",
    "delta-rs/spark-shredded-variant-preview-delta",
    "delta-rs/spark-variant-checkpoint",
    "kernel-rs-data/unshredded-variant",
]
SHREDDED = [
    "delta-spark-resources/variant-stats-nested-no-checkpoint",
    "delta-spark-resources/variant-stats-no-checkpoint",
    "delta-spark-resources/variant-stats-state-reconstruction",
    "delta-spark-resources/variant-stats-with-struct-no-checkpoint",
]


def kernel_rows(path: Path) -> pa.Table:
    """The table's rows as delta-kernel-rs 0.3.3 (its Python wrapper) reads them."""
    url = path.resolve().as_uri() + "/"
    snapshot = kernel.Table(url).snapshot(kernel.PythonInterface(url))
    return kernel.ScanBuilder(snapshot).build().execute(kernel.PythonInterface(url)).read_all()


def schema_of(path: Path) -> dict:
    return DeltaTable(str(path)).snapshot().schema


def scanned_cells(rows: pa.Table, schema: dict) -> collections.Counter:
    """Every variant of scanned rows, decoded with the test's own decoder."""
    out: collections.Counter = collections.Counter()
    for field in schema["fields"]:
        column = rows.column(field["name"])
        for cell in column.to_pylist():
            for metadata, (group, _type) in variant_cells(field["type"], cell, column.type):
                assert set(group) == {"metadata", "value"}
                out[(metadata, canonical(decode(metadata, group["value"])))] += 1
    return out


def physical_cells(path: Path, *, decoded: bool) -> collections.Counter:
    """Every variant of the live files, read with pyarrow from the paths delta-rs lists."""
    paths = deltars_paths(path)
    assert paths, "delta-rs lists the live files"
    schema = schema_of(path)
    return collections.Counter(c for p in sorted(paths) for c in file_cells(path / p, schema, decoded=decoded))


@pytest.mark.parametrize("name", UNSHREDDED)
def test_unshredded_variant_table_reads_as_delta_kernel_reads_it(name: str) -> None:
    path = CORPUS / name
    ours, _ = scan(DeltaTable(str(path)).snapshot())
    theirs = kernel_rows(path)
    assert ours.num_rows == theirs.num_rows == 102
    assert ours.schema.field("v").type == theirs.schema.field("v").type == VARIANT_STORAGE
    assert row_multiset(ours, theirs.column_names) == row_multiset(theirs, theirs.column_names)
    # and every value's bytes are the file's own
    raw = physical_cells(path, decoded=False)
    assert collections.Counter((m, v, "null") for m, v in scanned_raw(ours, schema_of(path))) == raw


def scanned_raw(rows: pa.Table, schema: dict) -> list[tuple[bytes, bytes]]:
    out = []
    for field in schema["fields"]:
        column = rows.column(field["name"])
        for cell in column.to_pylist():
            out += [(m, g["value"]) for m, (g, _t) in variant_cells(field["type"], cell, column.type)]
    return out


@pytest.mark.parametrize("name", SHREDDED)
def test_shredded_variant_table_reads_as_the_specification_rebuilds_it(name: str) -> None:
    path = CORPUS / name
    with pytest.raises(Exception, match="does not support shredded reads"):
        kernel_rows(path)  # the oracle cannot read these: the rebuild in tests/variant_oracle.py is the reference
    rows, _ = scan(DeltaTable(str(path)).snapshot())
    expected = physical_cells(path, decoded=True)
    assert scanned_cells(rows, schema_of(path)) == expected
    cells = {"variant-stats-no-checkpoint": 20, "variant-stats-state-reconstruction": 1}  # 2 columns; 1 row
    assert sum(expected.values()) == cells.get(name.split("/")[1], 10)


def test_shredded_values_spelled_out() -> None:
    """variant-stats-no-checkpoint: `v` is `{"id": <int64>, "name": <string>}` shredded into typed_value."""
    rows, _ = scan(DeltaTable(str(CORPUS / "delta-spark-resources/variant-stats-no-checkpoint")).snapshot())
    first = {r["i"]: decode(r["v"]["metadata"], r["v"]["value"]) for r in rows.to_pylist()}
    assert first[100] == {"id": ("int64", 0), "name": ("string", "10")}
    assert sorted(first) == list(range(100, 110))


# ----------------------------------------------------------------------------------------------------------------------
# Shredding cases built with pyarrow: each rebuilt value equals the specification's rebuild


METADATA = b"\x01\x03\x00\x01\x02\x03abc"  # names a, b, c
OBJECT_C_TRUE = b"\x02\x01\x02\x00\x01\x04"  # {"c": true}
HELLO = b"\x15hello"  # short string
NULL = b"\x00"


def _group(value: list, typed: pa.Array, mask: list[bool] | None = None) -> pa.StructArray:
    metadata = pa.array([METADATA] * len(value), pa.binary())
    return pa.StructArray.from_arrays(
        [metadata, pa.array(value, pa.binary()), typed],
        names=["metadata", "value", "typed_value"],
        mask=pa.array(mask) if mask else None,
    )


def _field(value: list, typed: pa.Array) -> pa.StructArray:
    return pa.StructArray.from_arrays([pa.array(value, pa.binary()), typed], names=["value", "typed_value"])


def _check(group: pa.StructArray) -> list:
    ours = to_variant_storage(group, "v", None)
    assert ours.type == VARIANT_STORAGE
    got = []
    for cell, original in zip(ours.to_pylist(), group.to_pylist(), strict=True):
        if original is None:
            assert cell is None
            got.append(None)
            continue
        assert cell["metadata"] == METADATA
        want = unshred(METADATA, original, group.type)
        want = ("null", None) if want is MISSING else want
        assert decode(METADATA, cell["value"]) == want
        got.append(decode(METADATA, cell["value"]))
    return got


def test_partly_shredded_objects_missing_fields_and_nulls() -> None:
    a = _field([None, None, None, None, None], pa.array([5, None, None, None, 7], pa.int64()))
    b = _field([None, None, None, NULL, None], pa.array(["x", None, None, None, None], pa.string()))
    typed = pa.StructArray.from_arrays([a, b], names=["a", "b"], mask=pa.array([False, True, False, False, True]))
    group = _group([OBJECT_C_TRUE, HELLO, None, None, None], typed, mask=[False, False, True, False, False])
    assert _check(group) == [
        {"a": ("int64", 5), "b": ("string", "x"), "c": ("boolean", True)},
        ("string", "hello"),
        None,  # a null variant (the group itself is null)
        {"b": ("null", None)},  # a missing, b present and null
        ("null", None),  # both columns null at the top: a variant null
    ]


def test_shredded_arrays_and_primitives() -> None:
    element = _field([None, None, NULL], pa.array([1, 2, None], pa.int8()))
    typed = pa.ListArray.from_arrays(pa.array([0, 2, 3, 3], pa.int32()), element, mask=pa.array([False, False, True]))
    assert _check(_group([None, None, b"\x0c\x2a"], typed)) == [
        [("int8", 1), ("int8", 2)],
        [("null", None)],
        ("int8", 42),  # not an array: the value column holds it
    ]
    long_text = "y" * 70  # past the short-string limit: the long string encoding
    typed = pa.array([long_text, None], pa.string())
    assert _check(_group([None, HELLO], typed)) == [("string", long_text), ("string", "hello")]
    typed = pa.array([pa.scalar(1, pa.int64()).as_py(), 2**40], pa.int64())
    assert _check(_group([None, None], typed)) == [("int64", 1), ("int64", 2**40)]


# ----------------------------------------------------------------------------------------------------------------------
# A shredded file whose layout does not match its schema


def _unsigned(array: pa.Array) -> pa.Array:
    """The same shredded group with every int64 typed_value made uint32."""
    if not pa.types.is_struct(array.type):
        return array
    children, names = [], []
    for i, field in enumerate(array.type):
        child = array.field(i)
        if field.name == "typed_value" and pa.types.is_int64(field.type):
            child = child.cast(pa.uint32())
        children.append(_unsigned(child))
        names.append(field.name)
    return pa.StructArray.from_arrays(children, names=names, mask=array.is_null() if array.null_count else None)


def _break_layout(path: Path) -> Path:
    """Rewrite one data file of a copy of a shredded table with its int64 typed_value columns of `v` as uint32, a type
    the shredding specification does not allow; the add action's size follows the new file."""
    data = sorted(path.glob("*.parquet"))[-1]
    table = pq.read_table(data)
    index = table.column_names.index("v")
    table = table.set_column(index, "v", _unsigned(table.column("v").combine_chunks()))
    pq.write_table(table, data)
    for commit in (path / "_delta_log").glob("*.json"):
        actions = [json.loads(line) for line in commit.read_text().splitlines()]
        for action in actions:
            if "add" in action and data.name in action["add"]["path"].replace("%25", "%"):
                action["add"]["size"] = data.stat().st_size
        commit.write_text("".join(json.dumps(a) + "\n" for a in actions))
    return path


def test_shredded_file_whose_layout_breaks_the_spec_is_one_typed_line(tmp_path: Path) -> None:
    path = _break_layout(copy_table("delta-spark-resources/variant-stats-no-checkpoint", tmp_path / "t"))
    with pytest.raises(SchemaError) as info:
        scan(DeltaTable(str(path)).snapshot())
    data = sorted(path.glob("*.parquet"))[-1].name
    assert str(info.value) == (
        f"table {path}: data file {data}: column 'v': the file's variant layout does not match the variant type: "
        "$.id: typed_value of type uint32 is not a shredded variant type"
    )


def test_cli_refuses_a_shredded_file_whose_layout_breaks_the_spec_and_writes_nothing(tmp_path: Path) -> None:
    path = _break_layout(copy_table("delta-spark-resources/variant-stats-with-struct-no-checkpoint", tmp_path / "t"))
    before = tree_state(path)
    line = cli_failure("optimize", path, "--min-file-size", str(1 << 40))
    assert "the file's variant layout does not match the variant type" in line and "uint32" in line
    assert tree_state(path) == before


def test_zorder_refuses_variant_and_geospatial_columns() -> None:
    variant = CORPUS / "delta-spark-resources/variant-stats-with-struct-no-checkpoint"
    line = cli_failure("zorder", variant, "--columns", "v")
    assert line == f"deltalite: error: table {variant}: zorder column 'v' has type variant, which cannot be ordered"
    geo = CORPUS / "kernel-rs-data/table-with-geo"
    line = cli_failure("zorder", geo, "--columns", "geom")
    assert line == (
        f"deltalite: error: table {geo}: zorder column 'geom' has type geometry(OGC:CRS84), which cannot be ordered"
    )
