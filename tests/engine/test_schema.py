"""Tests for engine.schema: schema JSON, Arrow conversion, column mapping, conforming file data, partition values."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import re
import urllib.parse
from collections import Counter
from pathlib import Path

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine.column_mapping import (
    column_mapping_mode,
    physical_name,
    physical_to_logical_names,
)
from airflow_provider_deltalite.engine.conform import delta_schema_to_arrow, delta_type_to_arrow, to_logical
from airflow_provider_deltalite.engine.errors import InvalidTableProperty, SchemaError
from airflow_provider_deltalite.engine.partition_values import parse_partition_values
from airflow_provider_deltalite.engine.schema import parse_schema_string
from tests.conformance.corpus import DELTA_RS_CANNOT_OPEN, deltars_error, normalise_path
from tests.helpers import CORPUS
from tests.oracles import KERNEL, oracle_rows, record_no_oracle

UTC = dt.UTC


# ----------------------------------------------------------------------------------------------------------------------
# Helpers (independent of the module under test)
# ----------------------------------------------------------------------------------------------------------------------


def _summary() -> list[dict]:
    if not (CORPUS / "summary.json").exists():
        return []
    return json.loads((CORPUS / "summary.json").read_text())


POSITIVE = [
    row["staged_path"]
    for row in _summary()
    if row["test_role"].startswith("positive") and (CORPUS / row["staged_path"] / "_delta_log").is_dir()
]
POSITIVE_NO_DV = [
    row["staged_path"] for row in _summary() if row["staged_path"] in POSITIVE and not row["live_files_with_dv"]
]
POSITIVE_PARTITIONED = [
    row["staged_path"] for row in _summary() if row["staged_path"] in POSITIVE and row["partition_columns"]
]
# partitioned tables whose live files are all added by a checkpoint: no JSON partitionValues to compare
PARTITION_VALUES_ONLY_IN_CHECKPOINTS = {
    "kernel-rs-data/partition_cm/id",
    "kernel-rs-data/partition_cm/name",
    "kernel-rs-data/partition_cm/none",
}


def _metadata_in_commit(commit: Path) -> dict | None:
    for line in commit.read_text().splitlines():
        if line.strip():
            action = json.loads(line)
            if "metaData" in action:
                return action["metaData"]
    return None


def _metadata_in_checkpoint(parts: list[Path]) -> dict | None:
    for part in parts:
        if "metaData" not in pq.read_schema(part).names:
            continue
        for row in pq.ParquetFile(part).read(columns=["metaData"]).column("metaData").to_pylist():
            if row is not None:
                # pyarrow reads Parquet maps as lists of pairs.
                return {**row, "configuration": dict(row.get("configuration") or [])}
    return None


def latest_metadata(table: Path) -> dict | None:
    """The newest metaData: JSON commits after the newest parquet checkpoint (newest first), then that checkpoint.

    A checkpoint can hold a metaData that no remaining JSON commit has (kernel-rs-data/parquet_row_group_skipping),
    so JSON commits older than the checkpoint are only a fallback.
    """
    log = table / "_delta_log"
    commits = sorted((p for p in log.iterdir() if re.fullmatch(r"\d{20}\.json", p.name)), reverse=True)
    checkpoints: dict[int, list[Path]] = {}
    for p in log.iterdir():
        if re.fullmatch(r"\d{20}\.checkpoint(\..+)?\.parquet", p.name):
            checkpoints.setdefault(int(p.name[:20]), []).append(p)
    newest_checkpoint = max(checkpoints, default=-1)
    for commit in commits:
        if int(commit.name[:20]) > newest_checkpoint and (found := _metadata_in_commit(commit)):
            return found
    for version in sorted(checkpoints, reverse=True):
        if found := _metadata_in_checkpoint(sorted(checkpoints[version])):
            return found
    for commit in commits:
        if found := _metadata_in_commit(commit):
            return found
    return None


def raw_partition_values(table: Path) -> dict[str, dict]:
    """Decoded add path -> partitionValues from the JSON commits (the last add of a path wins)."""
    out: dict[str, dict] = {}
    for commit in sorted(p for p in (table / "_delta_log").iterdir() if re.fullmatch(r"\d{20}\.json", p.name)):
        for line in commit.read_text().splitlines():
            if line.strip():
                action = json.loads(line)
                if "add" in action:
                    out[urllib.parse.unquote(action["add"]["path"])] = action["add"]["partitionValues"]
    return out


def normalise_type(t: pa.DataType) -> pa.DataType:
    """Map Arrow layout variants to one spelling and drop list item names, so only the logical type is compared."""
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return pa.list_(pa.field("item", normalise_type(t.value_type), t.value_field.nullable))
    if pa.types.is_map(t):
        return pa.map_(
            pa.field("key", normalise_type(t.key_type), False),
            pa.field("value", normalise_type(t.item_type), t.item_field.nullable),
        )
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, normalise_type(f.type), f.nullable) for f in t])
    return t


def canon(value):
    """A hashable, order-insensitive-for-dicts form of a row for multiset comparison."""
    if isinstance(value, dict):
        return tuple(sorted((k, canon(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(canon(v) for v in value)
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value


def rows(table: pa.Table) -> Counter:
    return Counter(canon(r) for r in table.to_pylist())


def contains_type(delta_type, names: set[str]) -> bool:
    if isinstance(delta_type, str):
        return delta_type.split("(")[0] in names
    if delta_type["type"] == "struct":
        return any(contains_type(f["type"], names) for f in delta_type["fields"])
    if delta_type["type"] == "array":
        return contains_type(delta_type["elementType"], names)
    return contains_type(delta_type["keyType"], names) or contains_type(delta_type["valueType"], names)


def schema_json(*fields: dict) -> str:
    return json.dumps({"type": "struct", "fields": list(fields)})


def fld(name: str, type_, nullable: bool = True, metadata: dict | None = None) -> dict:
    return {"name": name, "type": type_, "nullable": nullable, "metadata": metadata or {}}


# ----------------------------------------------------------------------------------------------------------------------
# parse_schema_string
# ----------------------------------------------------------------------------------------------------------------------


def test_parse_schema_string_normalises_missing_optional_keys():
    text = json.dumps(
        {
            "type": "struct",
            "fields": [
                {"name": "a", "type": "long"},
                {"name": "b", "type": {"type": "array", "elementType": "string"}, "nullable": False},
                {"name": "c", "type": {"type": "map", "keyType": "string", "valueType": "integer"}, "metadata": None},
            ],
        }
    )
    assert parse_schema_string(text) == {
        "type": "struct",
        "fields": [
            {"name": "a", "type": "long", "nullable": True, "metadata": {}},
            {
                "name": "b",
                "type": {"type": "array", "elementType": "string", "containsNull": True},
                "nullable": False,
                "metadata": {},
            },
            {
                "name": "c",
                "type": {"type": "map", "keyType": "string", "valueType": "integer", "valueContainsNull": True},
                "nullable": True,
                "metadata": {},
            },
        ],
    }


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "type 'struct'"),
        ('{"type": "array", "elementType": "long"}', "type 'struct'"),
        ('{"type": "struct"}', "'fields' list"),
        ('{"type": "struct", "fields": [{"type": "long"}]}', "'name'"),
        ('{"type": "struct", "fields": [{"name": "a"}]}', "'type'"),
        (schema_json(fld("a", "int")), "column 'a': unknown type 'int'"),
        (schema_json(fld("a", "decimal(39,2)")), "column 'a': invalid decimal"),
        (schema_json(fld("a", "decimal(5,6)")), "column 'a': invalid decimal"),
        (schema_json(fld("s", {"type": "struct", "fields": [fld("x", "uuid")]})), "column 's.x': unknown type"),
        (schema_json(fld("a", {"type": "array"})), "column 'a': array type needs 'elementType'"),
        (schema_json(fld("a", {"type": "map", "keyType": "string"})), "needs 'keyType' and 'valueType'"),
        (schema_json(fld("a", {"type": "udt"})), "column 'a': unknown type 'udt'"),
        (schema_json(fld("a", "long"), fld("a", "string")), "duplicate field name 'a'"),
        (schema_json(fld("a", 5)), "column 'a': type must be a string or an object"),
        (schema_json({"name": "a", "type": "long", "nullable": "yes"}), "'nullable' must be a boolean"),
    ],
)
def test_parse_schema_string_rejects_bad_input(text, fragment):
    with pytest.raises(SchemaError) as info:
        parse_schema_string(text, table_uri="s3://user:secret@bucket/t")
    message = str(info.value)
    assert fragment in message
    assert "\n" not in message and "secret" not in message
    assert message.startswith("table s3://bucket/t: ")


def test_parse_schema_string_accepts_types_it_cannot_convert():
    parsed = parse_schema_string(schema_json(fld("v", "variant"), fld("g", "geometry(OGC:CRS84)"), fld("n", "void")))
    assert [f["type"] for f in parsed["fields"]] == ["variant", "geometry(OGC:CRS84)", "void"]


# ----------------------------------------------------------------------------------------------------------------------
# Type conversion
# ----------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("delta_type", "arrow_type"),
    [
        ("string", pa.string()),
        ("long", pa.int64()),
        ("integer", pa.int32()),
        ("short", pa.int16()),
        ("byte", pa.int8()),
        ("float", pa.float32()),
        ("double", pa.float64()),
        ("boolean", pa.bool_()),
        ("binary", pa.binary()),
        ("date", pa.date32()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestamp_ntz", pa.timestamp("us")),
        ("decimal(10,2)", pa.decimal128(10, 2)),
        ("decimal(38, 18)", pa.decimal128(38, 18)),
        ("decimal", pa.decimal128(10, 0)),
        ("void", pa.null()),
        (
            {"type": "array", "elementType": "integer", "containsNull": False},
            pa.list_(pa.field("element", pa.int32(), nullable=False)),
        ),
        (
            {"type": "map", "keyType": "string", "valueType": "double", "valueContainsNull": True},
            pa.map_(pa.field("key", pa.string(), nullable=False), pa.field("value", pa.float64())),
        ),
        (
            {"type": "struct", "fields": [fld("x", "long", False), fld("y", "string")]},
            pa.struct([pa.field("x", pa.int64(), nullable=False), pa.field("y", pa.string())]),
        ),
    ],
)
def test_delta_type_to_arrow(delta_type, arrow_type):
    assert delta_type_to_arrow(delta_type) == arrow_type


@pytest.mark.parametrize("delta_type", ["interval", "int", "geometry(", "geographyx", {"x": 1}])
def test_delta_type_to_arrow_refuses_unknown(delta_type):
    with pytest.raises(SchemaError):
        delta_type_to_arrow(delta_type)


@pytest.mark.parametrize("delta_type", ["geometry", "geometry(OGC:CRS84)", "geography(OGC:CRS84, spherical)"])
def test_geospatial_types_read_as_wkb_binary(delta_type):
    assert delta_type_to_arrow(delta_type) == pa.binary()


def test_variant_reads_as_its_storage_group_at_any_depth():
    storage = pa.struct([pa.field("metadata", pa.binary(), False), pa.field("value", pa.binary(), False)])
    schema = parse_schema_string(schema_json(fld("s", {"type": "struct", "fields": [fld("v", "variant")]})))
    assert delta_schema_to_arrow(schema) == pa.schema([pa.field("s", pa.struct([pa.field("v", storage)]))])


def test_delta_schema_to_arrow_logical_physical_and_exclude():
    meta = lambda i, p: {"delta.columnMapping.id": i, "delta.columnMapping.physicalName": p}  # noqa: E731
    inner = {"type": "struct", "fields": [fld("x", "integer", False, meta(3, "col-x"))]}
    schema = parse_schema_string(
        schema_json(
            fld("a", "long", False, meta(1, "col-a")),
            fld("s", inner, True, meta(2, "col-s")),
            fld("p", "string", True, meta(4, "col-p")),
        )
    )
    logical = delta_schema_to_arrow(schema, exclude=["p"])
    assert logical == pa.schema(
        [pa.field("a", pa.int64(), nullable=False), pa.field("s", pa.struct([pa.field("x", pa.int32(), False)]))]
    )
    assert all(f.metadata is None for f in logical)

    by_id = delta_schema_to_arrow(schema, physical=True, mode="id")
    assert by_id.names == ["col-a", "col-s", "col-p"]
    assert [f.metadata[b"PARQUET:field_id"] for f in by_id] == [b"1", b"2", b"4"]
    nested = by_id.field("col-s").type.field(0)
    assert (nested.name, nested.metadata[b"PARQUET:field_id"]) == ("col-x", b"3")

    by_name = delta_schema_to_arrow(schema, physical=True, mode="name")
    assert by_name.names == ["col-a", "col-s", "col-p"] and by_name.field("col-a").metadata is None
    assert delta_schema_to_arrow(schema, physical=True, mode="none").names == ["a", "s", "p"]


def test_nested_ids_go_to_list_elements_and_map_entries():
    schema = parse_schema_string(
        schema_json(
            fld(
                "m",
                {"type": "map", "keyType": "string", "valueType": {"type": "array", "elementType": "long"}},
                metadata={
                    "delta.columnMapping.id": 1,
                    "delta.columnMapping.physicalName": "col-m",
                    "delta.columnMapping.nested.ids": {"col-m.key": 2, "col-m.value": 3, "col-m.value.element": 4},
                },
            )
        )
    )
    arrow = delta_schema_to_arrow(schema, physical=True, mode="id").field("col-m").type
    assert arrow.key_field.metadata == {b"PARQUET:field_id": b"2"}
    assert arrow.item_field.metadata == {b"PARQUET:field_id": b"3"}
    assert arrow.item_type.value_field.metadata == {b"PARQUET:field_id": b"4"}


def test_delta_schema_to_arrow_wraps_malformed_dicts():
    with pytest.raises(SchemaError):
        delta_schema_to_arrow({"type": "struct", "fields": [{"name": "a"}]})
    with pytest.raises(SchemaError):
        delta_schema_to_arrow({"fields": []})


# ----------------------------------------------------------------------------------------------------------------------
# Column mapping helpers
# ----------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("configuration", "mode"),
    [({}, "none"), ({"delta.columnMapping.mode": "name"}, "name"), ({"delta.columnMapping.mode": "ID"}, "id")],
)
def test_column_mapping_mode(configuration, mode):
    assert column_mapping_mode(configuration) == mode


def test_column_mapping_mode_rejects_unknown_value():
    with pytest.raises(InvalidTableProperty, match=r"delta\.columnMapping\.mode"):
        column_mapping_mode({"delta.columnMapping.mode": "position"})


def test_physical_name_and_mapping():
    mapped = fld("Company Name", "string", metadata={"delta.columnMapping.physicalName": "col-1"})
    plain = fld("plain", "long")
    assert physical_name(mapped, "name") == "col-1"
    assert physical_name(mapped, "id") == "col-1"
    assert physical_name(mapped, "none") == "Company Name"
    assert physical_name(plain, "name") == "plain"
    schema = {"type": "struct", "fields": [mapped, plain]}
    assert physical_to_logical_names(schema, "name") == {"col-1": "Company Name", "plain": "plain"}
    assert physical_to_logical_names(schema, "none") == {"Company Name": "Company Name", "plain": "plain"}


# ----------------------------------------------------------------------------------------------------------------------
# parse_partition_values
# ----------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("delta_type", "values", "expected"),
    [
        ("string", ["a b", "", None, "null"], ["a b", None, None, "null"]),
        ("long", ["9223372036854775807", "-1", "", None], [9223372036854775807, -1, None, None]),
        ("integer", ["2147483647", "0"], [2147483647, 0]),
        ("short", ["-32768"], [-32768]),
        ("byte", ["127", ""], [127, None]),
        ("float", ["1.5", "NaN"], [1.5, "NaN"]),
        ("double", ["-0.25", "Infinity", "-Infinity", "1e3"], [-0.25, math.inf, -math.inf, 1000.0]),
        ("boolean", ["true", "false", "", None], [True, False, None, None]),
        ("date", ["2021-09-08", "0001-01-01", ""], [dt.date(2021, 9, 8), dt.date(1, 1, 1), None]),
        (
            "decimal(12,5)",
            ["-2342342.23423", "0.00004", "234.00000", "1.5", ""],
            [
                decimal.Decimal("-2342342.23423"),
                decimal.Decimal("0.00004"),
                decimal.Decimal("234.00000"),
                decimal.Decimal("1.50000"),
                None,
            ],
        ),
        ("decimal(38,0)", ["99999999999999999999999999999999999999"], [decimal.Decimal("9" * 38)]),
        ("binary", ["ab\u00e9", ""], [b"ab\xc3\xa9", None]),
    ],
)
def test_parse_partition_values_exact(delta_type, values, expected):
    got = parse_partition_values(pa.array(values, pa.string()), delta_type, column="c")
    assert got.type == delta_type_to_arrow(delta_type)
    assert [canon(v) for v in got.to_pylist()] == expected


def test_parse_partition_values_timestamps():
    got = parse_partition_values(
        pa.array(
            [
                "2021-09-08 11:11:11",
                "2021-09-08T11:11:11.123456Z",
                "2020-01-01 08:09:10.001",
                "2021-09-08T11:11:11+02:00",
                "1969-01-01 00:00:00",
                "",
                None,
            ]
        ),
        "timestamp",
    )
    assert got.type == pa.timestamp("us", tz="UTC")
    assert got.to_pylist() == [
        dt.datetime(2021, 9, 8, 11, 11, 11, tzinfo=UTC),
        dt.datetime(2021, 9, 8, 11, 11, 11, 123456, tzinfo=UTC),
        dt.datetime(2020, 1, 1, 8, 9, 10, 1000, tzinfo=UTC),
        dt.datetime(2021, 9, 8, 9, 11, 11, tzinfo=UTC),
        dt.datetime(1969, 1, 1, tzinfo=UTC),
        None,
        None,
    ]
    # Epoch microseconds, so no Python timezone handling can hide an offset error.
    assert got.cast(pa.int64())[0].as_py() == 1631099471_000000

    ntz = parse_partition_values(pa.array(["2021-09-08 11:11:11.5", "2021-09-08T11:11:11", ""]), "timestamp_ntz")
    assert ntz.type == pa.timestamp("us")
    assert ntz.to_pylist() == [dt.datetime(2021, 9, 8, 11, 11, 11, 500000), dt.datetime(2021, 9, 8, 11, 11, 11), None]


def test_parse_partition_values_accepts_chunked_large_and_dictionary_input():
    chunked = pa.chunked_array([pa.array(["1"], pa.large_string()), pa.array(["", "3"], pa.large_string())])
    assert parse_partition_values(chunked, "integer").to_pylist() == [1, None, 3]
    dictionary = pa.array(["x", "", "x"]).dictionary_encode()
    assert parse_partition_values(dictionary, "string").to_pylist() == ["x", None, "x"]
    assert parse_partition_values(pa.nulls(2), "date").to_pylist() == [None, None]


@pytest.mark.parametrize(
    ("delta_type", "bad"),
    [
        ("integer", "1.5"),
        ("byte", "128"),
        ("long", "abc"),
        ("double", "one"),
        ("boolean", "yes"),
        ("date", "2021-13-01"),
        ("timestamp", "yesterday"),
        ("timestamp_ntz", "2021-09-08T11:11:11Z"),
        ("decimal(5,2)", "1.234"),
        ("decimal(5,2)", "123456"),
    ],
)
def test_parse_partition_values_bad_value_names_column_and_value(delta_type, bad):
    with pytest.raises(SchemaError) as info:
        parse_partition_values(pa.array(["", bad, None]), delta_type, column="part", table_uri="/t")
    assert str(info.value) == f"table /t: partition column 'part': cannot parse value {bad!r} as {delta_type}"


def test_parse_partition_values_refuses_nested_and_unsupported_types():
    with pytest.raises(SchemaError, match="cannot be a partition column"):
        parse_partition_values(pa.array(["x"]), {"type": "array", "elementType": "long", "containsNull": True})
    with pytest.raises(SchemaError, match=r"^partition column 'v': type variant cannot be a partition column$"):
        parse_partition_values(pa.array(["x"]), "variant", column="v")
    with pytest.raises(SchemaError, match=r"^partition column 'g': type geometry\(OGC:CRS84\) cannot be a partition"):
        parse_partition_values(pa.array(["x"]), "geometry(OGC:CRS84)", column="g")
    with pytest.raises(SchemaError, match=r"^partition column 'u': unknown type 'uuid'$"):
        parse_partition_values(pa.array(["x"]), "uuid", column="u")


# ----------------------------------------------------------------------------------------------------------------------
# to_logical on constructed files
# ----------------------------------------------------------------------------------------------------------------------


def _roundtrip(tmp_path: Path, table: pa.Table, **kwargs) -> pa.Table:
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, **kwargs)
    return pq.read_table(path)


def test_to_logical_type_widening(tmp_path):
    file = _roundtrip(
        tmp_path,
        pa.table(
            {
                "s": pa.array([1, -32768, None], pa.int16()),
                "f": pa.array([1.5, 0.1, None], pa.float32()),
                "b": pa.array([-128, 5, 127], pa.int8()),
                "i": pa.array([2147483647, 1, None], pa.int32()),
                "d": pa.array([dt.date(2021, 9, 8), None, dt.date(1969, 12, 31)], pa.date32()),
                "dec": pa.array([decimal.Decimal("1.25"), None, decimal.Decimal("-3.10")], pa.decimal128(5, 2)),
                "l": pa.array([9223372036854775807, 0, None], pa.int64()),
            }
        ),
    )
    schema = parse_schema_string(
        schema_json(
            fld("s", "long"),
            fld("f", "double"),
            fld("b", "integer"),
            fld("i", "double"),
            fld("d", "timestamp_ntz"),
            fld("dec", "decimal(10,4)"),
            fld("l", "decimal(20,1)"),
        )
    )
    out = to_logical(file, schema)
    assert out.schema == delta_schema_to_arrow(schema)
    assert out.column("s").to_pylist() == [1, -32768, None]
    # float32 0.1 widens to the double nearest to it, not to 0.1.
    assert out.column("f").to_pylist() == [1.5, 0.10000000149011612, None]
    assert out.column("b").to_pylist() == [-128, 5, 127]
    assert out.column("i").to_pylist() == [2147483647.0, 1.0, None]
    assert out.column("d").to_pylist() == [dt.datetime(2021, 9, 8), None, dt.datetime(1969, 12, 31)]
    assert out.column("dec").to_pylist() == [decimal.Decimal("1.2500"), None, decimal.Decimal("-3.1000")]
    assert out.column("l").to_pylist() == [decimal.Decimal("9223372036854775807.0"), decimal.Decimal("0.0"), None]


def test_to_logical_missing_extra_and_reordered_columns(tmp_path):
    file = _roundtrip(tmp_path, pa.table({"extra": [1, 2], "b": ["x", None], "a": [10, 20]}))
    schema = parse_schema_string(
        schema_json(
            fld("a", "long"),
            fld("new_col", "string"),
            fld("b", "string"),
            fld("new_struct", {"type": "struct", "fields": [fld("z", "date")]}, False),
            fld("part", "integer"),
        )
    )
    out = to_logical(file, schema, exclude=["part"])
    assert out.schema == pa.schema(
        [
            pa.field("a", pa.int64()),
            pa.field("new_col", pa.string()),
            pa.field("b", pa.string()),
            pa.field("new_struct", pa.struct([pa.field("z", pa.date32())]), nullable=False),
        ]
    )
    assert out.to_pylist() == [
        {"a": 10, "new_col": None, "b": "x", "new_struct": None},
        {"a": 20, "new_col": None, "b": None, "new_struct": None},
    ]


def test_to_logical_nested_missing_fields_and_nullability(tmp_path):
    struct_type = pa.struct([pa.field("x", pa.int32(), nullable=False)])
    file = _roundtrip(
        tmp_path,
        pa.Table.from_arrays(
            [
                pa.array([{"x": 1}, None, {"x": 3}], struct_type),
                pa.array([1, 2, 3], pa.int64()),
                pa.array([[1, None], None, []], pa.list_(pa.int16())),
            ],
            schema=pa.schema(
                [
                    pa.field("s", struct_type),
                    pa.field("req", pa.int64(), nullable=False),
                    pa.field("l", pa.list_(pa.int16())),
                ]
            ),
        ),
    )
    schema = parse_schema_string(
        schema_json(
            fld("s", {"type": "struct", "fields": [fld("x", "long"), fld("added", "string")]}, False),
            fld("req", "long", True),
            fld("l", {"type": "array", "elementType": "integer", "containsNull": False}),
        )
    )
    out = to_logical(file, schema)
    assert out.schema == delta_schema_to_arrow(schema)
    assert out.to_pylist() == [
        {"s": {"x": 1, "added": None}, "req": 1, "l": [1, None]},
        {"s": None, "req": 2, "l": None},
        {"s": {"x": 3, "added": None}, "req": 3, "l": []},
    ]


def test_to_logical_nested_lists_and_maps_sliced_and_chunked():
    map_type = pa.map_(pa.string(), pa.list_(pa.int32()))
    values = pa.array(
        [[("a", [1, 2])], None, [("b", None), ("c", [])], [], [("d", [None, 4])]],
        map_type,
    )
    table = pa.Table.from_batches(
        [pa.record_batch([values.slice(0, 2)], names=["m"]), pa.record_batch([values.slice(2)], names=["m"])]
    )
    schema = parse_schema_string(
        schema_json(
            fld("m", {"type": "map", "keyType": "string", "valueType": {"type": "array", "elementType": "long"}})
        )
    )
    out = to_logical(table, schema)
    assert out.schema == delta_schema_to_arrow(schema)
    assert out.column("m").num_chunks == 2
    assert out.column("m").to_pylist() == [
        [("a", [1, 2])],
        None,
        [("b", None), ("c", [])],
        [],
        [("d", [None, 4])],
    ]


def test_to_logical_sliced_struct_chunks_keep_parent_nulls():
    values = pa.array([{"x": 1, "y": [1]}, None, {"x": 3, "y": None}, {"x": 4, "y": [2, 3]}])
    table = pa.Table.from_batches(
        [pa.record_batch([values.slice(1, 2)], names=["s"]), pa.record_batch([values.slice(3)], names=["s"])]
    )
    inner = {"type": "struct", "fields": [fld("y", {"type": "array", "elementType": "long"}), fld("x", "long")]}
    out = to_logical(table, parse_schema_string(schema_json(fld("s", inner))))
    assert out.column("s").to_pylist() == [None, {"y": None, "x": 3}, {"y": [2, 3], "x": 4}]


@pytest.mark.parametrize(
    ("arrow_type", "raw", "delta_type", "expected_micros"),
    [
        (pa.timestamp("ns"), [1_000_001_999, -1_000], "timestamp", [1_000_001, -1]),
        (pa.timestamp("ms", tz="UTC"), [1_500, None], "timestamp", [1_500_000, None]),
        (pa.timestamp("us", tz="America/New_York"), [7], "timestamp", [7]),
        (pa.timestamp("ms"), [2], "timestamp_ntz", [2_000]),
        (pa.timestamp("us", tz="UTC"), [3], "timestamp_ntz", [3]),
    ],
)
def test_to_logical_timestamp_units_and_zones(arrow_type, raw, delta_type, expected_micros):
    table = pa.table({"t": pa.array(raw, pa.int64()).view(arrow_type)})
    out = to_logical(table, parse_schema_string(schema_json(fld("t", delta_type))))
    assert out.schema.field("t").type == delta_type_to_arrow(delta_type)
    assert out.column("t").cast(pa.int64()).to_pylist() == expected_micros


def test_to_logical_string_encodings_and_dictionaries():
    table = pa.table(
        {
            "a": pa.array(["x", None], pa.large_string()),
            "b": pa.array(["y", "z"]).dictionary_encode(),
            "c": pa.array([b"caf\xc3\xa9", None], pa.binary()),
            "d": pa.array(["w", None], pa.string_view()),
        }
    )
    schema = parse_schema_string(
        schema_json(fld("a", "string"), fld("b", "string"), fld("c", "string"), fld("d", "binary"))
    )
    out = to_logical(table, schema)
    assert out.to_pydict() == {"a": ["x", None], "b": ["y", "z"], "c": ["caf\u00e9", None], "d": [b"w", None]}


def test_to_logical_column_mapping_by_id_then_name_then_case_insensitive():
    def with_id(name, arr, field_id=None):
        return pa.field(name, arr.type, metadata={b"PARQUET:field_id": str(field_id).encode()} if field_id else None)

    arrays = [pa.array([1]), pa.array(["two"]), pa.array([3.0]), pa.array([True])]
    file_schema = pa.schema(
        [
            with_id("old-physical-name", arrays[0], 7),  # renamed physically, id still 7
            with_id("col-b", arrays[1]),  # no id: found by physical name
            with_id("COL-C", arrays[2]),  # different case
            with_id("col-d", arrays[3], 99),  # id does not match any field: ignored, physical name used
        ]
    )
    table = pa.Table.from_arrays(arrays, schema=file_schema)
    meta = lambda i, p: {"delta.columnMapping.id": i, "delta.columnMapping.physicalName": p}  # noqa: E731
    schema = parse_schema_string(
        schema_json(
            fld("A", "long", metadata=meta(7, "col-a")),
            fld("B", "string", metadata=meta(8, "col-b")),
            fld("C", "double", metadata=meta(9, "col-c")),
            fld("D", "boolean", metadata=meta(10, "col-d")),
        )
    )
    assert to_logical(table, schema, mode="id").to_pylist() == [{"A": 1, "B": "two", "C": 3.0, "D": True}]
    # Name mode ignores ids, so the physically renamed column is missing.
    assert to_logical(table, schema, mode="name").to_pylist() == [{"A": None, "B": "two", "C": 3.0, "D": True}]
    # No mapping: logical names are looked up, and only the case-insensitive fallback can match nothing here.
    assert to_logical(table, schema, mode="none").to_pylist() == [{"A": None, "B": None, "C": None, "D": None}]


@pytest.mark.parametrize(
    ("arrow_array", "delta_type"),
    [
        (pa.array(["1"]), "long"),
        (pa.array([1.5]), "float"),
        (pa.array([1.5]), "long"),
        (pa.array([1]), "boolean"),
        (pa.array([[1]]), "long"),
        (pa.array([1]), {"type": "struct", "fields": [fld("x", "long")]}),
        (pa.array([300], pa.int32()), "byte"),
        (pa.array([decimal.Decimal("123.45")]), "decimal(4,2)"),
        (pa.array([dt.datetime(2020, 1, 1)], pa.timestamp("us")), "date"),
    ],
)
def test_to_logical_incompatible_types_raise_schema_error(arrow_array, delta_type):
    with pytest.raises(SchemaError, match=r"column 'c'"):
        to_logical(pa.table({"c": arrow_array}), parse_schema_string(schema_json(fld("c", delta_type))), table_uri="/t")


# ----------------------------------------------------------------------------------------------------------------------
# Corpus: schemas, partition values and data against deltalake and Spark-written expected dumps
# ----------------------------------------------------------------------------------------------------------------------


def _open_deltalake(staged_path: str):
    """delta-rs' view of the table, or None for a table it cannot open (`DELTA_RS_CANNOT_OPEN`: checked to fail)."""
    path = CORPUS / staged_path
    if staged_path in DELTA_RS_CANNOT_OPEN:
        assert deltars_error(lambda: deltalake.DeltaTable(str(path))) == DELTA_RS_CANNOT_OPEN[staged_path][0]
        return None
    return deltalake.DeltaTable(str(path))


@pytest.mark.parametrize("staged_path", POSITIVE)
def test_corpus_schema_matches_deltalake(staged_path):
    path = CORPUS / staged_path
    table = _open_deltalake(staged_path)
    if table is None:  # the schema of the rows delta-kernel-rs reads, where it can read them
        found, cannot = oracle_rows(path, corpus_name=staged_path)
        if KERNEL not in found:
            record_no_oracle(cannot)
            return
    metadata = latest_metadata(path)
    assert metadata is not None, "no metaData in JSON commits or checkpoints"
    schema = parse_schema_string(metadata["schemaString"])
    expected = pa.schema(table.schema().to_arrow()) if table is not None else found[KERNEL].schema
    got = delta_schema_to_arrow(schema)
    assert got.names == expected.names
    assert [normalise_type(f.type) for f in got] == [normalise_type(f.type) for f in expected]
    assert [f.nullable for f in got] == [f.nullable for f in expected]


@pytest.mark.parametrize("staged_path", POSITIVE_PARTITIONED)
def test_corpus_partition_values_match_deltalake(staged_path):
    path = CORPUS / staged_path
    table = _open_deltalake(staged_path)
    if table is None:  # the delta-kernel-rs wrapper gives rows, no per-file partition values
        found, cannot = oracle_rows(path, corpus_name=staged_path)
        record_no_oracle(
            "; ".join([*cannot.values(), *(f"{oracle}: no per-file partition values" for oracle in found)])
        )
        return
    metadata = latest_metadata(path)
    schema = parse_schema_string(metadata["schemaString"])
    mode = column_mapping_mode(metadata["configuration"])
    actions = pa.table(table.get_add_actions(flatten=True))
    raw = raw_partition_values(path)
    paths = [urllib.parse.unquote(p) for p in actions.column("path").to_pylist()]
    index = [i for i, p in enumerate(paths) if p in raw]
    if staged_path in PARTITION_VALUES_ONLY_IN_CHECKPOINTS:
        assert not index, "a JSON commit adds a live file now: take the table off PARTITION_VALUES_ONLY_IN_CHECKPOINTS"
        return
    assert index, "live files are only in a checkpoint"
    fields = {f["name"]: f for f in schema["fields"]}
    for column in metadata["partitionColumns"]:
        field = fields[column]
        strings = pa.array([raw[paths[i]].get(physical_name(field, mode)) for i in index], pa.string())
        expected = actions.column(f"partition.{column}").take(index).to_pylist()
        assert parse_partition_values(strings, field["type"], column=column).to_pylist() == expected, column


def _compare_tables(got: pa.Table, expected: pa.Table) -> None:
    expected = expected.select(got.column_names)
    assert got.num_rows == expected.num_rows
    nested = any(pa.types.is_nested(f.type) for f in got.schema)
    if got.num_rows > 20_000 and not nested:
        # Python row objects for a million rows take minutes; sorting in Arrow compares the same multiset.
        keys = [(name, "ascending") for name in got.column_names]
        assert got.sort_by(keys).equals(expected.cast(got.schema).sort_by(keys))
    else:
        assert rows(got) == rows(expected)


def _live_files(path: Path) -> list[str]:
    """The live data files by our replay (conformance checks it against delta-rs; the rows below check it too)."""
    snap = DeltaTable(str(path)).snapshot()
    relative = [normalise_path(p, path) for p in snap.raw_files.column("path").to_pylist()]
    return [str(path / p) for p in relative]


@pytest.mark.parametrize("staged_path", POSITIVE_NO_DV)
def test_corpus_to_logical_matches_deltalake(staged_path):
    path = CORPUS / staged_path
    table = _open_deltalake(staged_path)
    # every oracle that can read the table (tests/oracles.py lists the ones that cannot, checked to fail)
    found, cannot = oracle_rows(path, corpus_name=staged_path)
    if not found:
        record_no_oracle(cannot)
        return
    metadata = latest_metadata(path)
    schema = parse_schema_string(metadata["schemaString"])
    mode = column_mapping_mode(metadata["configuration"])
    parts = metadata["partitionColumns"]
    files = table.file_uris() if table is not None else _live_files(path)
    pieces = [to_logical(pq.read_table(f), schema, mode=mode, exclude=parts) for f in files]
    got = pa.concat_tables(pieces) if pieces else delta_schema_to_arrow(schema, exclude=parts).empty_table()
    assert got.schema == delta_schema_to_arrow(schema, exclude=parts)
    for expected in found.values():
        _compare_tables(got, expected)


def _expected_dump(name: str) -> pa.Table:
    files = sorted((CORPUS / "kernel-rs-golden" / name / "expected").glob("*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files])


@pytest.mark.parametrize("mode", ["name", "id"])
def test_corpus_column_mapping_tables(mode):
    path = CORPUS / f"kernel-rs-golden/table-with-columnmapping-mode-{mode}/delta"
    metadata = latest_metadata(path)
    assert column_mapping_mode(metadata["configuration"]) == mode
    schema = parse_schema_string(metadata["schemaString"])
    files = sorted(path.glob("*.parquet"))
    raw = pq.read_table(files[0])
    assert set(raw.column_names).isdisjoint(f["name"] for f in schema["fields"])  # only physical names in the file
    one = to_logical(raw, schema, mode=mode)
    assert one.schema == delta_schema_to_arrow(schema)
    found, _cannot = oracle_rows(path, corpus_name=f"kernel-rs-golden/table-with-columnmapping-mode-{mode}/delta")
    assert list(found) == [KERNEL]  # delta-rs 1.6.3 refuses reader version 2 (column mapping)
    everything = pa.concat_tables([to_logical(pq.read_table(f), schema, mode=mode) for f in files])
    for expected in (found[KERNEL], _expected_dump(f"table-with-columnmapping-mode-{mode}")):
        one_rows, all_rows = rows(one), rows(expected.select(one.column_names))
        assert one.num_rows > 0 and not one_rows - all_rows  # one file's rows are a sub-multiset of the table
        assert rows(everything) == all_rows


def test_corpus_physical_schema_matches_spark_written_file_ids():
    path = CORPUS / "kernel-rs-golden/table-with-columnmapping-mode-id/delta"
    schema = parse_schema_string(latest_metadata(path)["schemaString"])
    ours = delta_schema_to_arrow(schema, physical=True, mode="id")
    theirs = pq.read_schema(sorted(path.glob("*.parquet"))[0])

    def ids(fields, prefix=""):
        out = {}
        for f in fields:
            out[prefix + f.name] = (f.metadata or {}).get(b"PARQUET:field_id")
            if pa.types.is_struct(f.type):
                out.update(ids(f.type, prefix + f.name + "."))
        return out

    assert ids(ours) == ids(theirs)


def test_corpus_legacy_list_layout():
    name = "parquet-all-types-legacy-format"
    path = CORPUS / "kernel-rs-golden" / name / "delta"
    schema = parse_schema_string(latest_metadata(path)["schemaString"])
    raw = pq.read_table(sorted(path.glob("*.parquet"))[0])
    assert raw.schema.field("array_of_prims").type.value_field.name == "array"  # the 2-level "bag"/"array" layout
    got = to_logical(raw, schema)
    assert got.schema == delta_schema_to_arrow(schema)
    assert rows(got) == rows(_expected_dump(name).select(got.column_names))
    assert rows(got) == rows(deltalake.DeltaTable(str(path)).to_pyarrow_table().select(got.column_names))


def test_corpus_int96_timestamps_with_partition_values():
    path = CORPUS / "kernel-rs-golden/kernel-timestamp-int96/delta"
    metadata = latest_metadata(path)
    schema = parse_schema_string(metadata["schemaString"])
    assert metadata["partitionColumns"] == ["part"]
    raw_parts = raw_partition_values(path)
    pieces = []
    for relative, values in raw_parts.items():
        raw = pq.read_table(path / relative)
        assert raw.schema.field("time").type == pa.timestamp("ns")  # INT96 as pyarrow reads it by default
        data = to_logical(raw, schema, exclude=["part"])
        part = parse_partition_values(pa.array([values["part"]] * data.num_rows, pa.string()), "timestamp")
        pieces.append(data.append_column(pa.field("part", part.type), part))
    got = pa.concat_tables(pieces)
    assert got.schema.field("time").type == pa.timestamp("us", tz="UTC")
    assert rows(got) == rows(_expected_dump("kernel-timestamp-int96").select(got.column_names))
    from_deltalake = deltalake.DeltaTable(str(path)).to_pyarrow_table()
    assert rows(got) == rows(from_deltalake.select(got.column_names))
    assert dt.datetime(1999, 1, 1, 9, tzinfo=UTC) in got.column("time").to_pylist()


def test_corpus_int96_beyond_nanosecond_range_needs_coerced_read():
    # pyarrow's default INT96 read wraps 9999-12-31 to 1816; readers must pass coerce_int96_timestamp_unit="us".
    path = CORPUS / "delta-rs/table_with_edge_timestamps"
    metadata = latest_metadata(path)
    schema = parse_schema_string(metadata["schemaString"])
    stats = {}
    for line in (path / "_delta_log/00000000000000000000.json").read_text().splitlines():
        action = json.loads(line)
        if "add" in action:
            stats[action["add"]["path"]] = json.loads(action["add"]["stats"])["minValues"]
    for relative, minimum in stats.items():
        got = to_logical(pq.read_table(path / relative, coerce_int96_timestamp_unit="us"), schema).to_pylist()[0]
        for column in ("BIG_DATE", "NORMAL_DATE"):
            assert got[column] == dt.datetime.fromisoformat(minimum[column].replace("Z", "+00:00")), column


@pytest.mark.parametrize(
    "staged_path", ["delta-golden/type-widening", "kernel-rs-data/type-widening", "delta-golden/type-widening-nested"]
)
def test_corpus_type_widening_tables(staged_path):
    # deltalake 1.6.3 refuses typeWidening, so compare with the narrow values as Python numbers.
    path = CORPUS / staged_path
    schema = parse_schema_string(latest_metadata(path)["schemaString"])
    target = delta_schema_to_arrow(schema)
    narrow_seen = False
    for file in sorted(path.glob("*.parquet")):
        raw = pq.read_table(file)
        narrow_seen |= raw.schema != target.remove_metadata()
        got = to_logical(raw, schema)
        assert got.schema == target
        for name in target.names:
            before, after = raw.column(name).to_pylist(), got.column(name).to_pylist()
            if isinstance(before[0], dt.date) and not isinstance(before[0], dt.datetime):
                before = [dt.datetime.combine(v, dt.time()) for v in before]
            assert canon(after) == canon(before), name
    assert narrow_seen
