"""Tests of per-file stats parsing against hand-written JSON, real corpus tables and their data files."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite.engine import stats_json as stats_module
from airflow_provider_deltalite.engine.errors import CorruptLog, SchemaError
from airflow_provider_deltalite.engine.expressions import bind, may_match_stats, parse_expression, to_arrow_filter
from airflow_provider_deltalite.engine.stats_parse import parse_stats, stats_type
from tests.helpers import CORPUS

UTC = dt.UTC


def parse(rows: list[str | None], schema: pa.Schema, **kwargs: Any) -> list[dict | None]:
    return parse_stats(pa.array(rows, pa.string()), schema, **kwargs).to_pylist()


# ---------------------------------------------------------------------------------------------------------------------
# Hand-written stats

BASIC = pa.schema(
    [
        ("i", pa.int32()),
        ("b8", pa.int8()),
        ("f", pa.float32()),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("dec", pa.decimal128(5, 2)),
        ("flag", pa.bool_()),
    ]
)


def test_output_type_uses_logical_types_and_names() -> None:
    result = parse_stats(pa.array(["{}"]), BASIC)
    minmax = pa.struct(list(BASIC))
    counts = pa.struct([(f.name, pa.int64()) for f in BASIC])
    assert result.type == pa.struct(
        [
            ("numRecords", pa.int64()),
            ("tightBounds", pa.bool_()),
            ("minValues", minmax),
            ("maxValues", minmax),
            ("nullCount", counts),
        ]
    )
    assert result.type == stats_type(BASIC)


def test_basic_values_nulls_and_missing_fields() -> None:
    rows = [
        '{"numRecords":3,"minValues":{"i":-5,"b8":1,"f":0.1,"s":"a","d":"2021-09-08","dec":1.5,"flag":false},'
        '"maxValues":{"i":7,"b8":2,"f":2.5,"s":"zz","d":"2021-09-09","dec":-0.25,"flag":true},'
        '"nullCount":{"i":0,"b8":1,"f":2,"s":0,"d":3,"dec":0,"flag":1},"tightBounds":false,"unknown":{"x":[1]}}',
        None,
        '{"numRecords":1}',
        '{"numRecords":2,"minValues":{"i":1,"extra":"x"},"maxValues":null,"nullCount":{"i":0}}',
    ]
    assert parse(rows, BASIC) == [
        {
            "numRecords": 3,
            "tightBounds": False,
            "minValues": {
                "i": -5,
                "b8": 1,
                "f": pytest.approx(0.1, rel=1e-7),
                "s": "a",
                "d": dt.date(2021, 9, 8),
                "dec": Decimal("1.50"),
                "flag": False,
            },
            "maxValues": {
                "i": 7,
                "b8": 2,
                "f": 2.5,
                "s": "zz",
                "d": dt.date(2021, 9, 9),
                "dec": Decimal("-0.25"),
                "flag": True,
            },
            "nullCount": {"i": 0, "b8": 1, "f": 2, "s": 0, "d": 3, "dec": 0, "flag": 1},
        },
        None,
        {"numRecords": 1, "tightBounds": True, "minValues": None, "maxValues": None, "nullCount": None},
        {
            "numRecords": 2,
            "tightBounds": True,
            "minValues": {"i": 1, "b8": None, "f": None, "s": None, "d": None, "dec": None, "flag": None},
            "maxValues": None,
            "nullCount": {"i": 0, "b8": None, "f": None, "s": None, "d": None, "dec": None, "flag": None},
        },
    ]


def test_float_stats_are_cast_to_the_column_type() -> None:
    result = parse_stats(pa.array(['{"minValues":{"f":0.1}}']), BASIC)
    assert result.field("minValues").field("f").type == pa.float32()
    assert result.field("minValues").field("f")[0].as_py() == pa.scalar(0.1, pa.float32()).as_py()


def test_blank_and_empty_strings_are_no_stats() -> None:
    assert parse(["", "   ", "{}"], BASIC) == [
        None,
        None,
        {"numRecords": None, "tightBounds": True, "minValues": None, "maxValues": None, "nullCount": None},
    ]


TIMES = pa.schema(
    [
        ("ts", pa.timestamp("us", "UTC")),
        ("ntz", pa.timestamp("us")),
        ("ns", pa.timestamp("ns", "UTC")),
    ]
)


@pytest.mark.parametrize(
    ("text", "ts", "ntz"),
    [
        (
            "2021-09-08T11:11:11.123Z",
            dt.datetime(2021, 9, 8, 11, 11, 11, 123000, tzinfo=UTC),
            dt.datetime(2021, 9, 8, 11, 11, 11, 123000),
        ),
        (
            "2000-01-01T00:00:00.000-08:00",
            dt.datetime(2000, 1, 1, 8, tzinfo=UTC),
            dt.datetime(2000, 1, 1, 8),
        ),
        ("2021-09-08 11:11:11", dt.datetime(2021, 9, 8, 11, 11, 11, tzinfo=UTC), dt.datetime(2021, 9, 8, 11, 11, 11)),
        (
            "2021-09-08T11:11:11.123456",
            dt.datetime(2021, 9, 8, 11, 11, 11, 123456, tzinfo=UTC),
            dt.datetime(2021, 9, 8, 11, 11, 11, 123456),
        ),
        (
            "2021-09-08T13:11:11+0200",
            dt.datetime(2021, 9, 8, 11, 11, 11, tzinfo=UTC),
            dt.datetime(2021, 9, 8, 11, 11, 11),
        ),
        # digits past microseconds are cut, which keeps a minimum a lower bound
        (
            "2021-09-08T11:11:11.123456789Z",
            dt.datetime(2021, 9, 8, 11, 11, 11, 123456, tzinfo=UTC),
            dt.datetime(2021, 9, 8, 11, 11, 11, 123456),
        ),
        ("not a time", None, None),
    ],
)
def test_timestamp_forms(text: str, ts: dt.datetime | None, ntz: dt.datetime | None) -> None:
    row = json.dumps({"minValues": {"ts": text, "ntz": text}})
    (parsed,) = parse([row], TIMES)
    assert parsed["minValues"]["ts"] == ts
    assert parsed["minValues"]["ntz"] == ntz
    if ntz is not None:
        assert parsed["minValues"]["ntz"].tzinfo is None


def test_timestamp_forms_mixed_in_one_batch() -> None:
    rows = [
        json.dumps({"maxValues": {"ts": "2021-09-08T11:11:11.123Z", "ns": "2021-09-08 11:11:11.5"}}),
        json.dumps({"maxValues": {"ts": "2021-09-08 11:11:11", "ns": "2000-01-01T00:00:00.000-08:00"}}),
        json.dumps({"maxValues": {"ts": "2021-09-08", "ns": None}}),
    ]
    result = parse_stats(pa.array(rows), TIMES)
    assert result.field("maxValues").field("ts").to_pylist() == [
        dt.datetime(2021, 9, 8, 11, 11, 11, 123000, tzinfo=UTC),
        dt.datetime(2021, 9, 8, 11, 11, 11, tzinfo=UTC),
        dt.datetime(2021, 9, 8, tzinfo=UTC),
    ]
    ns = result.field("maxValues").field("ns")
    assert ns.type == pa.timestamp("ns", "UTC")
    assert ns.cast(pa.int64()).to_pylist() == [1631099471_500_000_000, 946713600_000_000_000, None]


def test_non_finite_floats() -> None:
    schema = pa.schema([("f", pa.float64()), ("g", pa.float32())])
    rows = [
        '{"minValues":{"f":"NaN","g":"-Infinity"},"maxValues":{"f":"Infinity","g":"NaN"}}',
        '{"minValues":{"f":NaN,"g":-Infinity},"maxValues":{"f":Infinity,"g":1.5}}',
        '{"minValues":{"f":1.0,"g":2.0},"maxValues":{"f":3.0,"g":4.0}}',
    ]
    result = parse(rows, schema)
    # NaN bounds order nothing and become unknown; infinities are real bounds
    assert [r["minValues"] for r in result] == [
        {"f": None, "g": -math_inf()},
        {"f": None, "g": -math_inf()},
        {"f": 1.0, "g": 2.0},
    ]
    assert [r["maxValues"] for r in result] == [
        {"f": math_inf(), "g": None},
        {"f": math_inf(), "g": 1.5},
        {"f": 3.0, "g": 4.0},
    ]


def math_inf() -> float:
    return float("inf")


def test_decimal_bounds_are_exact_or_rounded_outwards() -> None:
    schema = pa.schema([("dec", pa.decimal128(5, 2)), ("big", pa.decimal128(38, 0))])
    rows = [
        '{"minValues":{"dec":1.5,"big":12345678901234567890123456789012345678},'
        '"maxValues":{"dec":"2.25","big":-12345678901234567890123456789012345678}}',
        # a bound with more digits than the scale is widened, never narrowed
        '{"minValues":{"dec":1.234},"maxValues":{"dec":1.234}}',
        '{"minValues":{"dec":-1.234},"maxValues":{"dec":-1.234}}',
        # out of range for decimal(5,2)
        '{"minValues":{"dec":123456}}',
    ]
    result = parse(rows, schema)
    assert result[0]["minValues"] == {"dec": Decimal("1.50"), "big": Decimal("12345678901234567890123456789012345678")}
    assert result[0]["maxValues"] == {"dec": Decimal("2.25"), "big": Decimal("-12345678901234567890123456789012345678")}
    assert (result[1]["minValues"]["dec"], result[1]["maxValues"]["dec"]) == (Decimal("1.23"), Decimal("1.24"))
    assert (result[2]["minValues"]["dec"], result[2]["maxValues"]["dec"]) == (Decimal("-1.24"), Decimal("-1.23"))
    assert result[3]["minValues"]["dec"] is None


def test_integers_out_of_range_or_fractional_become_unknown() -> None:
    schema = pa.schema([("b8", pa.int8()), ("i", pa.int64())])
    rows = ['{"minValues":{"b8":-128,"i":1.0},"maxValues":{"b8":300,"i":1.5}}', '{"minValues":{"b8":3,"i":4}}']
    result = parse(rows, schema)
    assert result[0]["minValues"] == {"b8": -128, "i": 1}
    assert result[0]["maxValues"] == {"b8": None, "i": None}
    assert result[1]["minValues"] == {"b8": 3, "i": 4}


NESTED = pa.schema(
    [
        ("id", pa.int64()),
        (
            "st",
            pa.struct(
                [
                    ("a", pa.int32()),
                    ("ts", pa.timestamp("us", "UTC")),
                    ("inner", pa.struct([("x", pa.string()), ("raw", pa.binary())])),
                    ("only_bin", pa.struct([("raw", pa.binary())])),
                ]
            ),
        ),
        ("bin", pa.binary()),
        ("arr", pa.list_(pa.int32())),
        ("m", pa.map_(pa.string(), pa.int32())),
    ]
)


def test_nested_structs_and_types_without_min_max() -> None:
    row = json.dumps(
        {
            "numRecords": 4,
            "minValues": {"id": 1, "st": {"a": 2, "ts": "2021-07-30T18:11:24.594Z", "inner": {"x": "p"}}, "bin": "x"},
            "maxValues": {"id": 9, "st": {"a": 3, "inner": {"x": "q"}}},
            "nullCount": {
                "id": 0,
                "st": {"a": 1, "ts": 2, "inner": {"x": 3, "raw": 4}, "only_bin": {"raw": 1}},
                "bin": 1,
                "arr": 2,
                "m": 3,
            },
        }
    )
    result = parse_stats(pa.array([row, None]), NESTED)
    minmax = result.type.field("minValues").type
    assert minmax == pa.struct(
        [
            ("id", pa.int64()),
            (
                "st",
                pa.struct(
                    [("a", pa.int32()), ("ts", pa.timestamp("us", "UTC")), ("inner", pa.struct([("x", pa.string())]))]
                ),
            ),
        ]
    )
    assert result.type.field("nullCount").type == pa.struct(
        [
            ("id", pa.int64()),
            (
                "st",
                pa.struct(
                    [
                        ("a", pa.int64()),
                        ("ts", pa.int64()),
                        ("inner", pa.struct([("x", pa.int64()), ("raw", pa.int64())])),
                        ("only_bin", pa.struct([("raw", pa.int64())])),
                    ]
                ),
            ),
            ("bin", pa.int64()),
            ("arr", pa.int64()),
            ("m", pa.int64()),
        ]
    )
    assert result.to_pylist() == [
        {
            "numRecords": 4,
            "tightBounds": True,
            "minValues": {
                "id": 1,
                "st": {"a": 2, "ts": dt.datetime(2021, 7, 30, 18, 11, 24, 594000, tzinfo=UTC), "inner": {"x": "p"}},
            },
            "maxValues": {"id": 9, "st": {"a": 3, "ts": None, "inner": {"x": "q"}}},
            "nullCount": {
                "id": 0,
                "st": {"a": 1, "ts": 2, "inner": {"x": 3, "raw": 4}, "only_bin": {"raw": 1}},
                "bin": 1,
                "arr": 2,
                "m": 3,
            },
        },
        None,
    ]
    # a null parent makes its children null, so skipping code can walk paths safely
    assert pc.struct_field(result, ["minValues", "st", "a"]).to_pylist() == [2, None]


def test_column_mapping_top_level_nested_and_metadata() -> None:
    schema = pa.schema(
        [
            pa.field("id", pa.int64()),
            pa.field(
                "st",
                pa.struct(
                    [
                        pa.field("a", pa.int32()),
                        pa.field("b", pa.int32(), metadata={b"delta.columnMapping.physicalName": b"col-b"}),
                    ]
                ),
            ),
            pa.field("Company Very Short", pa.string(), metadata={b"delta.columnMapping.physicalName": b"col-c"}),
        ]
    )
    row = json.dumps(
        {
            "numRecords": 1,
            "minValues": {"col-id": 5, "col-st": {"col-a": 1, "col-b": 2}, "col-c": "x", "id": 999},
            "nullCount": {"col-id": 0, "col-st": {"col-a": 0, "col-b": 1}, "col-c": 0},
        }
    )
    names = {"id": "col-id", "st": "col-st", ("st", "a"): "col-a"}
    (parsed,) = parse([row], schema, physical_names=names)
    assert parsed["minValues"] == {"id": 5, "st": {"a": 1, "b": 2}, "Company Very Short": "x"}
    assert parsed["nullCount"] == {"id": 0, "st": {"a": 0, "b": 1}, "Company Very Short": 0}
    # without the mapping, logical names are looked up (and nested physical names still come from metadata)
    (plain,) = parse([row], schema)
    assert plain["minValues"] == {"id": 999, "st": None, "Company Very Short": "x"}


def test_malformed_rows_become_null_and_the_rest_survives() -> None:
    good = '{"numRecords":2,"minValues":{"i":1},"maxValues":{"i":2},"nullCount":{"i":0}}'
    rows = [
        good,
        "not json",
        '{"numRecords":2,"minValues":{"i":1}',  # truncated
        "[1, 2]",
        '{"numRecords":1} {"numRecords":2}',  # two documents in one string
        '{"numRecords":3,"minValues":{"i":{"nested":1}},"maxValues":{"i":"7"}}',  # wrong shapes
        '{\n  "numRecords": 5,\n  "minValues": {"i": 3}\n}',  # pretty-printed
        good,
    ]
    result = parse(rows, BASIC)
    nothing = {"b8": None, "f": None, "s": None, "d": None, "dec": None, "flag": None}
    expected_good = {
        "numRecords": 2,
        "tightBounds": True,
        "minValues": {"i": 1, **nothing},
        "maxValues": {"i": 2, **nothing},
        "nullCount": {"i": 0, **nothing},
    }
    assert result[0] == expected_good
    assert result[1:5] == [None, None, None, None]
    assert result[5] == {
        "numRecords": 3,
        "tightBounds": True,
        "minValues": {"i": None, **nothing},
        "maxValues": {"i": 7, **nothing},
        "nullCount": None,
    }
    assert result[6] == {
        "numRecords": 5,
        "tightBounds": True,
        "minValues": {"i": 3, **nothing},
        "maxValues": None,
        "nullCount": None,
    }
    assert result[7] == expected_good


def test_clean_input_is_parsed_in_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    def row_by_row(*args: object) -> None:
        raise AssertionError("row-by-row parsing used for clean input")

    monkeypatch.setattr(stats_module, "_read_json_rows", row_by_row)
    rows = [f'{{"numRecords":{i},"minValues":{{"i":{i}}},"maxValues":{{"i":{i + 1}}}}}' for i in range(5000)]
    result = parse_stats(pa.array([*rows, None, ""]), BASIC)
    assert result.field("maxValues").field("i").to_pylist()[:3] == [1, 2, 3]
    assert result.null_count == 2
    # non-finite float strings are handled without going row by row too
    spark_nan = parse_stats(pa.array(['{"minValues":{"f":"NaN"},"maxValues":{"f":"Infinity"}}']), BASIC)
    assert spark_nan.field("maxValues").field("f").to_pylist() == [float("inf")]


def test_one_bad_row_only_sends_its_chunk_row_by_row(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    original = stats_module._read_json_rows

    def counting(text: pa.Array, json_type: pa.StructType) -> object:
        calls.append(len(text))
        return original(text, json_type)

    monkeypatch.setattr(stats_module, "_read_json_rows", counting)
    rows = [f'{{"numRecords":{i}}}' for i in range(10_000)]
    rows[7777] = "{broken"
    result = parse_stats(pa.array(rows), BASIC)
    assert len(calls) == 1 and calls[0] <= stats_module._FALLBACK_CHUNK
    num_records = result.field("numRecords").to_pylist()
    assert num_records[:3] == [0, 1, 2] and num_records[-1] == 9999
    assert result.is_null().to_pylist() == [i == 7777 for i in range(10_000)]


def test_input_shapes() -> None:
    row = '{"numRecords":7}'
    for stats_json in (
        pa.array([row]),
        pa.array([row], pa.large_string()),
        pa.array([row.encode()], pa.binary()),
        pa.chunked_array([pa.array([row])]),
        [row],
    ):
        assert parse_stats(stats_json, BASIC).field("numRecords").to_pylist() == [7]
    assert len(parse_stats(pa.array([], pa.string()), BASIC)) == 0
    assert parse_stats(pa.chunked_array([], pa.string()), BASIC).to_pylist() == []
    assert parse_stats(pa.nulls(2), BASIC).to_pylist() == [None, None]
    # a schema with no columns still gives numRecords
    assert parse_stats(pa.array([row]), pa.schema([])).to_pylist() == [
        {"numRecords": 7, "tightBounds": True, "minValues": None, "maxValues": None, "nullCount": None}
    ]


def test_bad_arguments_raise_typed_errors() -> None:
    with pytest.raises(CorruptLog, match="table s3://bucket/t: file statistics must be strings, not int64"):
        parse_stats(pa.array([1, 2]), BASIC, table_uri="s3://user:secret@bucket/t")
    with pytest.raises(SchemaError, match="stats need a pyarrow Schema"):
        parse_stats(pa.array(["{}"]), {"i": "int"})  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------------------------
# Real tables: stats against the data files


def live_adds(table: Path) -> list[dict]:
    """Replay the JSON commits of a table (no checkpoint needed for these tables): the live add actions in order."""
    live: dict[str, dict] = {}
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                live[action["add"]["path"]] = action["add"]
            elif "remove" in action:
                live.pop(action["remove"]["path"], None)
    return list(live.values())


def table_schema(table: Path) -> list[dict]:
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "metaData" in action:
                return json.loads(action["metaData"]["schemaString"])["fields"]
    raise AssertionError(f"no metaData in {table}")


def physical_names(table: Path) -> dict[str, str]:
    return {f["name"]: f["metadata"].get("delta.columnMapping.physicalName", f["name"]) for f in table_schema(table)}


ALL_TYPES = pa.schema(
    [
        ("as_int", pa.int32()),
        ("as_long", pa.int64()),
        ("as_byte", pa.int8()),
        ("as_short", pa.int16()),
        ("as_float", pa.float32()),
        ("as_double", pa.float64()),
        ("as_string", pa.string()),
        ("as_date", pa.date32()),
        ("as_timestamp", pa.timestamp("us", "UTC")),
        ("as_big_decimal", pa.decimal128(1, 0)),
    ]
)
PARSED_STATS = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("age", pa.int64()),
        ("salary", pa.int64()),
        ("ts_col", pa.timestamp("us", "UTC")),
    ]
)
ALL_TYPES_TABLES = [
    "kernel-rs-golden/data-skipping-basic-stats-all-types/delta",
    "kernel-rs-golden/data-skipping-basic-stats-all-types-columnmapping-name/delta",
    "kernel-rs-golden/data-skipping-basic-stats-all-types-checkpoint/delta",
]


def read_logical(table: Path, add: dict, schema: pa.Schema) -> pa.Table:
    """A data file's rows under logical names, timestamps as UTC microseconds (Spark writes INT96 UTC instants)."""
    names = physical_names(table)
    data = pq.read_table(table / add["path"])
    columns = {}
    for field in schema:
        physical = names.get(field.name, field.name)
        if physical not in data.column_names:
            continue
        column = data.column(physical)
        if pa.types.is_timestamp(field.type) and not column.type.tz:
            column = column.cast(pa.timestamp(column.type.unit, "UTC"))
        columns[field.name] = column.cast(field.type) if not pa.types.is_struct(field.type) else column
    return pa.table(columns)


def leaf_columns(table: pa.Table) -> dict[tuple[str, ...], pa.Array]:
    """Every leaf column by path; struct children carry their parents' nulls (as Delta null counts do)."""
    out: dict[tuple[str, ...], pa.Array] = {}

    def walk(path: tuple[str, ...], values: pa.Array) -> None:
        if pa.types.is_struct(values.type):
            for field, child in zip(values.type, values.flatten(), strict=True):
                walk((*path, field.name), child)
        else:
            out[path] = values

    for name in table.column_names:
        walk((name,), table.column(name).combine_chunks())
    return out


def has_min_max(t: pa.DataType) -> bool:
    return not (pa.types.is_binary(t) or pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t))


def expected_from_data(values: pa.Array, *, truncate_ms: bool) -> tuple[object, object, int]:
    if pa.types.is_timestamp(values.type) and truncate_ms:
        values = pc.floor_temporal(values, unit="millisecond")
    if not has_min_max(values.type):
        return None, None, values.null_count
    low, high = pc.min_max(values).values()
    return low.as_py(), high.as_py(), values.null_count


def lookup(row: dict | None, path: tuple[str, ...]) -> object:
    for segment in path:
        if row is None:
            return None
        row = row.get(segment)
    return row


def assert_stats_describe_data(table: Path, schema: pa.Schema, *, truncate_ms: bool, skip: tuple[str, ...] = ()) -> int:
    adds = live_adds(table)
    names = physical_names(table)
    stats = parse_stats(pa.array([a.get("stats") for a in adds]), schema, physical_names=names)
    checked = 0
    for add, parsed in zip(adds, stats.to_pylist(), strict=True):
        data = read_logical(table, add, schema)
        assert parsed["numRecords"] == data.num_rows
        for path, values in leaf_columns(data).items():
            if path[0] in skip:
                continue
            low, high, nulls = expected_from_data(values, truncate_ms=truncate_ms)
            assert lookup(parsed["nullCount"], path) == nulls, (add["path"], path)
            if has_min_max(values.type):
                assert lookup(parsed["minValues"], path) == low, (add["path"], path)
                assert lookup(parsed["maxValues"], path) == high, (add["path"], path)
            checked += 1
    return checked


@pytest.mark.parametrize("name", ALL_TYPES_TABLES)
def test_all_types_stats_match_the_data(name: str) -> None:
    assert assert_stats_describe_data(CORPUS / name, ALL_TYPES, truncate_ms=True) == 10


def test_all_types_stats_exact_values() -> None:
    table = CORPUS / "kernel-rs-golden/data-skipping-basic-stats-all-types-columnmapping-name/delta"
    adds = live_adds(table)
    (parsed,) = parse_stats(
        pa.array([a["stats"] for a in adds]), ALL_TYPES, physical_names=physical_names(table)
    ).to_pylist()
    expected = {
        "as_int": 0,
        "as_long": 0,
        "as_byte": 0,
        "as_short": 0,
        "as_float": 0.0,
        "as_double": 0.0,
        "as_string": "0",
        "as_date": dt.date(2000, 1, 1),
        "as_timestamp": dt.datetime(2000, 1, 1, 8, tzinfo=UTC),
        "as_big_decimal": Decimal("0"),
    }
    assert parsed == {
        "numRecords": 1,
        "tightBounds": True,
        "minValues": expected,
        "maxValues": expected,
        "nullCount": dict.fromkeys(expected, 0),
    }


def test_parsed_stats_table_matches_the_data() -> None:
    # the stats of this table describe a ts_col the data files do not hold
    assert (
        assert_stats_describe_data(
            CORPUS / "kernel-rs-data/parsed-stats", PARSED_STATS, truncate_ms=True, skip=("ts_col",)
        )
        == 6 * 4
    )


def test_nested_stats_from_a_databricks_log() -> None:
    table = CORPUS / "delta-rs/checkpoints"
    schema = pa.schema(
        [
            (
                "some_struct",
                pa.struct([("some_struct_member", pa.string()), ("some_struct_timestamp", pa.timestamp("us", "UTC"))]),
            ),
            ("value", pa.string()),
            ("ts", pa.timestamp("us", "UTC")),
        ]
    )
    adds = live_adds(table)
    first = next(a for a in adds if a["path"].startswith("date=2020-06-01/part-00000-b207ef5f"))
    (parsed,) = parse_stats(pa.array([first["stats"]]), schema).to_pylist()
    moment = dt.datetime(2021, 7, 30, 18, 11, 24, 594000, tzinfo=UTC)
    bounds = {"some_struct": {"some_struct_member": "x", "some_struct_timestamp": moment}, "value": "x", "ts": moment}
    assert parsed == {
        "numRecords": 1,
        "tightBounds": True,
        "minValues": bounds,
        "maxValues": bounds,
        "nullCount": {"some_struct": {"some_struct_member": 0, "some_struct_timestamp": 0}, "value": 0, "ts": 0},
    }
    all_stats = parse_stats(pa.array([a.get("stats") for a in adds]), schema)
    assert all_stats.null_count == sum(1 for a in adds if not a.get("stats"))


# ---------------------------------------------------------------------------------------------------------------------
# Skipping is conservative: every file with a matching row may match


def file_rows(table: Path, schema: pa.Schema) -> list[tuple[dict, pa.Table]]:
    """Live files as delta-rs lists them, each with its rows under logical names."""
    import deltalake

    uris = {Path(u).resolve() for u in deltalake.DeltaTable(str(table)).file_uris()}
    adds = live_adds(table)
    assert {(table / a["path"]).resolve() for a in adds} == uris
    return [(add, read_logical(table, add, schema)) for add in adds]


def assert_conservative(
    table: Path, schema: pa.Schema, predicates: list[tuple[str, pc.Expression]]
) -> list[list[bool]]:
    files = file_rows(table, schema)
    stats = parse_stats(pa.array([a.get("stats") for a, _ in files]), schema, physical_names=physical_names(table))
    results = []
    for text, oracle in predicates:
        expr = bind(parse_expression(text), schema)
        may = may_match_stats(expr, stats, len(files)).to_pylist()
        for (add, rows), maybe in zip(files, may, strict=True):
            matching = rows.filter(oracle).num_rows
            assert maybe or matching == 0, f"{text!r} skipped {add['path']} holding {matching} matching rows"
            assert rows.filter(to_arrow_filter(expr)).num_rows == matching, text
        results.append(may)
    return results


F = pc.field


def ts_utc(*args: int) -> pa.Scalar:
    return pa.scalar(dt.datetime(*args, tzinfo=UTC), pa.timestamp("us", "UTC"))


ALL_TYPES_PREDICATES: list[tuple[str, pc.Expression, bool]] = [
    ("as_int = 0", F("as_int") == 0, True),
    ("as_int > 0", F("as_int") > 0, False),
    ("as_long <= -1", F("as_long") <= -1, False),
    ("as_byte >= 0 AND as_short < 1", (F("as_byte") >= 0) & (F("as_short") < 1), True),
    ("as_float > 0", F("as_float") > 0, False),
    ("as_double != 0", F("as_double") != 0, True),  # floats never skip on !=
    ("as_string = '0'", F("as_string") == "0", True),
    ("as_string > '0'", F("as_string") > "0", False),
    ("as_date = '2000-01-01'", F("as_date") == pa.scalar(dt.date(2000, 1, 1)), True),
    ("as_date > '2000-01-01'", F("as_date") > pa.scalar(dt.date(2000, 1, 1)), False),
    ("as_timestamp = '2000-01-01 08:00:00'", F("as_timestamp") == ts_utc(2000, 1, 1, 8), True),
    ("as_timestamp < '2000-01-01T00:00:00-08:00'", F("as_timestamp") < ts_utc(2000, 1, 1, 8), False),
    # the max is only known to the millisecond, so a row up to .000999 later may exist
    ("as_timestamp > '2000-01-01 08:00:00'", F("as_timestamp") > ts_utc(2000, 1, 1, 8), True),
    ("as_timestamp > '2000-01-01 08:00:00.000999'", F("as_timestamp") > ts_utc(2000, 1, 1, 8, 0, 0, 999), False),
    ("as_big_decimal = 0", F("as_big_decimal") == pa.scalar(Decimal("0"), pa.decimal128(1, 0)), True),
    ("as_big_decimal > 0", F("as_big_decimal") > pa.scalar(Decimal("0"), pa.decimal128(1, 0)), False),
    ("NOT as_int = 0", ~(F("as_int") == 0), False),
    ("NOT as_int != 0", ~(F("as_int") != 0), True),
    ("as_int IS NULL", F("as_int").is_null(), False),
    ("as_string IS NOT NULL", F("as_string").is_valid(), True),
    ("NOT (as_int = 0 AND as_string = '1')", ~((F("as_int") == 0) & (F("as_string") == "1")), True),
    ("NOT (as_int = 0 OR as_string = '1')", ~((F("as_int") == 0) | (F("as_string") == "1")), False),
    ("as_byte = 1 OR as_short = 0", (F("as_byte") == 1) | (F("as_short") == 0), True),
]


@pytest.mark.parametrize("name", ALL_TYPES_TABLES[:2])
def test_all_types_skipping_is_conservative_and_tight(name: str) -> None:
    predicates = [(text, oracle) for text, oracle, _ in ALL_TYPES_PREDICATES]
    results = assert_conservative(CORPUS / name, ALL_TYPES, predicates)
    assert [r[0] for r in results] == [expected for _, _, expected in ALL_TYPES_PREDICATES]


PARSED_STATS_PREDICATES: list[tuple[str, pc.Expression, list[bool]]] = [
    ("id = 150", F("id") == 150, [False, True, False, False, False, False]),
    ("id > 500", F("id") > 500, [False, False, False, False, False, True]),
    ("id >= 500", F("id") >= 500, [False, False, False, False, True, True]),
    ("NOT id <= 100", ~(F("id") <= 100), [False, True, True, True, True, True]),
    ("id < 101 OR id > 550", (F("id") < 101) | (F("id") > 550), [True, False, False, False, False, True]),
    ("NOT (id > 100 AND id < 600)", ~((F("id") > 100) & (F("id") < 600)), [True, False, False, False, False, True]),
    # string order: 'name_250' lies between 'name_1' and 'name_99'
    ("name = 'name_250'", F("name") == "name_250", [True, False, True, False, False, False]),
    ("salary > 100000", F("salary") > 100000, [False, False, False, False, False, True]),
    ("age != 20", F("age") != 20, [True] * 6),
    ("age < 20", F("age") < 20, [False] * 6),
    ("name IS NULL", F("name").is_null(), [False] * 6),
    ("name IS NOT NULL AND id = 42", F("name").is_valid() & (F("id") == 42), [True, False, False, False, False, False]),
    ("NOT (name IS NULL OR salary < 95000)", ~(F("name").is_null() | (F("salary") < 95000)), [False] * 4 + [True] * 2),
]


def test_parsed_stats_skipping_is_conservative_and_tight() -> None:
    predicates = [(text, oracle) for text, oracle, _ in PARSED_STATS_PREDICATES]
    results = assert_conservative(CORPUS / "kernel-rs-data/parsed-stats", PARSED_STATS, predicates)
    assert results == [expected for _, _, expected in PARSED_STATS_PREDICATES]


@pytest.mark.parametrize(
    ("text", "dnf"),
    [
        ("id > 150", [("id", ">", 150)]),
        ("name = 'name_250'", [("name", "=", "name_250")]),
        ("id < 101 OR id > 550", [[("id", "<", 101)], [("id", ">", 550)]]),
        ("salary >= 95000 AND age != 20", [("salary", ">=", 95000), ("age", "!=", 20)]),
    ],
)
def test_parsed_stats_row_counts_agree_with_delta_rs(text: str, dnf: list) -> None:
    import deltalake

    table = CORPUS / "kernel-rs-data/parsed-stats"
    expected = deltalake.DeltaTable(str(table)).to_pyarrow_table(filters=dnf, columns=["id"]).num_rows
    expr = bind(parse_expression(text), PARSED_STATS)
    adds = live_adds(table)
    may = may_match_stats(expr, parse_stats(pa.array([a["stats"] for a in adds]), PARSED_STATS), len(adds)).to_pylist()
    matched = 0
    for add, maybe in zip(adds, may, strict=True):
        count = read_logical(table, add, PARSED_STATS).filter(to_arrow_filter(expr)).num_rows
        assert maybe or count == 0
        if maybe:
            matched += count
    assert matched == expected > 0


def write_delta_rs_table(path: Path) -> pa.Schema:
    import deltalake

    schema = pa.schema(
        [
            ("i", pa.int32()),
            ("f", pa.float64()),
            ("s", pa.string()),
            ("ts", pa.timestamp("us", "UTC")),
            ("ntz", pa.timestamp("us")),
            ("d", pa.date32()),
            ("dec", pa.decimal128(5, 2)),
            ("flag", pa.bool_()),
            ("bin", pa.binary()),
            ("st", pa.struct([("a", pa.int64()), ("b", pa.string())])),
            ("l", pa.list_(pa.int64())),
        ]
    )
    base = dt.datetime(2021, 1, 1, tzinfo=UTC)
    batches = [
        {
            "i": [1, None, 3],
            "f": [1.5, float("nan"), None],
            "s": ["a" * 40, None, "b"],
            "ts": [base + dt.timedelta(microseconds=1500), None, base + dt.timedelta(microseconds=999_999)],
            "ntz": [dt.datetime(2021, 1, 1, 0, 0, 0, 1500), None, dt.datetime(2021, 1, 1)],
            "d": [dt.date(2020, 1, 1), None, dt.date(2021, 1, 1)],
            "dec": [Decimal("1.25"), None, Decimal("-3.50")],
            "flag": [True, None, False],
            "bin": [b"x", None, b"y"],
            "st": [{"a": 1, "b": "x"}, None, {"a": None, "b": "y"}],
            "l": [[1], None, [2, 3]],
        },
        {
            "i": [10, 20],
            "f": [-1.0, 2.0],
            "s": ["c", "d"],
            "ts": [base + dt.timedelta(seconds=1), base + dt.timedelta(seconds=2, microseconds=1)],
            "ntz": [dt.datetime(2021, 1, 2), dt.datetime(2021, 1, 3)],
            "d": [dt.date(2021, 6, 1), dt.date(2021, 6, 2)],
            "dec": [Decimal("0.00"), Decimal("999.99")],
            "flag": [True, True],
            "bin": [b"", b"z"],
            "st": [{"a": 5, "b": None}, {"a": 6, "b": "q"}],
            "l": [[], [4]],
        },
        {
            "i": [None, None],
            "f": [None, None],
            "s": [None, None],
            "ts": [None, None],
            "ntz": [None, None],
            "d": [None, None],
            "dec": [None, None],
            "flag": [None, None],
            "bin": [None, None],
            "st": [None, None],
            "l": [None, None],
        },
    ]
    for batch in batches:
        deltalake.write_deltalake(str(path), pa.table(batch, schema=schema), mode="append")
    return schema


def test_delta_rs_written_stats_match_the_data(tmp_path: Path) -> None:
    schema = write_delta_rs_table(tmp_path)
    # delta-rs keeps microseconds in timestamp stats, so the bounds are exact
    assert assert_stats_describe_data(tmp_path, schema, truncate_ms=False, skip=("bin", "l", "f")) > 0
    adds = live_adds(tmp_path)
    stats = parse_stats(pa.array([a["stats"] for a in adds]), schema)
    assert "bin" not in stats.type.field("minValues").type.names
    assert "l" not in stats.type.field("minValues").type.names


DELTA_RS_PREDICATES: list[tuple[str, pc.Expression]] = [
    ("i > 2", F("i") > 2),
    ("i = 20", F("i") == 20),
    ("i IS NULL", F("i").is_null()),
    ("NOT i = 1", ~(F("i") == 1)),
    ("NOT (i > 1 OR s IS NULL)", ~((F("i") > 1) | F("s").is_null())),
    ("f = 1.5", F("f") == 1.5),
    # delta-rs leaves NaN out of min/max; NaN != 1.5 is true, so this must not skip the first file
    ("f != 1.5", F("f") != 1.5),
    ("f > 1.75", F("f") > 1.75),
    ("s >= 'b'", F("s") >= "b"),
    ("s = 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'", F("s") == "a" * 40),
    ("ts > '2021-01-01 00:00:00.001'", F("ts") > ts_utc(2021, 1, 1, 0, 0, 0, 1000)),
    ("ts = '2021-01-01T00:00:02.000001Z'", F("ts") == ts_utc(2021, 1, 1, 0, 0, 2, 1)),
    ("ts < '2021-01-01 00:00:00.0015'", F("ts") < ts_utc(2021, 1, 1, 0, 0, 0, 1500)),
    ("ntz <= '2021-01-01'", F("ntz") <= pa.scalar(dt.datetime(2021, 1, 1), pa.timestamp("us"))),
    ("d = '2021-06-02'", F("d") == pa.scalar(dt.date(2021, 6, 2))),
    ("dec < 0", F("dec") < pa.scalar(Decimal("0.00"), pa.decimal128(5, 2))),
    ("dec >= 999.99", F("dec") >= pa.scalar(Decimal("999.99"), pa.decimal128(5, 2))),
    ("flag = false", F("flag") == pa.scalar(False)),
    ("st.a = 1", F("st", "a") == 1),
    ("st.a > 5", F("st", "a") > 5),
    ("st.b IS NULL", F("st", "b").is_null()),
    ("NOT (st.a < 6 AND st.b IS NOT NULL)", ~((F("st", "a") < 6) & F("st", "b").is_valid())),
    ("bin IS NULL", F("bin").is_null()),
    ("l IS NOT NULL", F("l").is_valid()),
]


def test_delta_rs_table_skipping_is_conservative(tmp_path: Path) -> None:
    schema = write_delta_rs_table(tmp_path)
    results = assert_conservative(tmp_path, schema, DELTA_RS_PREDICATES)
    by_text = dict(zip([t for t, _ in DELTA_RS_PREDICATES], results, strict=True))
    # skipping does happen where the stats allow it (file order: mixed, two rows, all-null)
    assert by_text["i = 20"] == [False, True, False]
    assert by_text["i IS NULL"] == [True, False, True]
    assert by_text["f != 1.5"] == [True, True, False]
    assert by_text["ts = '2021-01-01T00:00:02.000001Z'"] == [False, True, False]
    assert by_text["st.a > 5"] == [False, True, False]
