"""Tests of writer-side per-file statistics: hand-built batches for each rule, Spark-written corpus files as oracle."""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine.column_mapping import column_mapping_mode, physical_name
from airflow_provider_deltalite.engine.errors import DeltaLiteError, InvalidTableProperty, SchemaError
from airflow_provider_deltalite.engine.schema import parse_schema_string
from airflow_provider_deltalite.engine.stats_collect import StatsCollector
from tests.helpers import CORPUS

ASCII_MAX = "\x7f"
UTF8_MAX = "\U0010ffff"


def col(name: str, delta_type: Any, **metadata: Any) -> dict:
    return {"name": name, "type": delta_type, "nullable": True, "metadata": metadata}


def struct(*fields: dict) -> dict:
    return {"type": "struct", "fields": list(fields)}


def collect(
    schema: dict,
    *batches: pa.RecordBatch | pa.Table,
    mode: str = "none",
    partitions: tuple[str, ...] = (),
    **configuration: str,
) -> dict:
    collector = StatsCollector(
        schema,
        column_mapping_mode=mode,
        partition_columns=partitions,
        configuration={f"delta.{key}": value for key, value in configuration.items()},
    )
    for batch in batches:
        collector.update(batch)
    return collector.to_dict()


def batch(**columns: pa.Array) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(columns)


def utc(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=dt.UTC)


# ---------------------------------------------------------------------------------------------------------------------
# Types


def test_bounds_and_null_counts_of_every_type_with_bounds() -> None:
    schema = struct(
        col("b", "byte"),
        col("i", "integer"),
        col("l", "long"),
        col("f", "float"),
        col("d", "double"),
        col("dec", "decimal(5,2)"),
        col("s", "string"),
        col("day", "date"),
        col("ts", "timestamp"),
        col("ntz", "timestamp_ntz"),
    )
    rows = batch(
        b=pa.array([3, None, -7], pa.int8()),
        i=pa.array([10, 20, None], pa.int32()),
        l=pa.array([2**62, -(2**63), 0], pa.int64()),
        f=pa.array([0.1, 2.5, None], pa.float32()),
        d=pa.array([1e300, -0.5, None], pa.float64()),
        dec=pa.array([Decimal("1.50"), Decimal("-0.25"), None], pa.decimal128(5, 2)),
        s=pa.array(["b", None, "a"]),
        day=pa.array([dt.date(2021, 9, 8), dt.date(1999, 12, 31), None]),
        ts=pa.array(
            [utc(2021, 1, 1, 0, 0, 0, 123456), None, utc(1969, 12, 31, 23, 59, 59, 999999)], pa.timestamp("us", "UTC")
        ),
        ntz=pa.array([dt.datetime(2021, 11, 18, 2, 30, 0, 123999), None, None], pa.timestamp("us")),
    )
    assert collect(schema, rows) == {
        "numRecords": 3,
        "minValues": {
            "b": -7,
            "i": 10,
            "l": -(2**63),
            "f": 0.1,  # the float32 printed as Java's Float.toString does, not 0.10000000149011612
            "d": -0.5,
            "dec": Decimal("-0.25"),
            "s": "a",
            "day": "1999-12-31",
            "ts": "1969-12-31T23:59:59.999Z",
            "ntz": "2021-11-18T02:30:00.123",
        },
        "maxValues": {
            "b": 3,
            "i": 20,
            "l": 2**62,
            "f": 2.5,
            "d": 1e300,
            "dec": Decimal("1.50"),
            "s": "b",
            "day": "2021-09-08",
            "ts": "2021-01-01T00:00:00.123Z",  # the max is cut to milliseconds too, as Spark prints it
            "ntz": "2021-11-18T02:30:00.123",
        },
        "nullCount": {"b": 1, "i": 1, "l": 0, "f": 1, "d": 1, "dec": 1, "s": 1, "day": 1, "ts": 1, "ntz": 2},
    }


def test_boolean_binary_array_map_and_void_get_a_null_count_only() -> None:
    schema = struct(
        col("flag", "boolean"),
        col("raw", "binary"),
        col("arr", {"type": "array", "elementType": "integer", "containsNull": True}),
        col("m", {"type": "map", "keyType": "string", "valueType": "integer", "valueContainsNull": True}),
        col("v", "void"),
        col("n", "integer"),
    )
    rows = batch(
        flag=pa.array([True, None, False]),
        raw=pa.array([b"\x00", b"\xff", None]),
        # a null element inside a list is not a null list: only the column itself counts
        arr=pa.array([[1, None], None, []], pa.list_(pa.int32())),
        m=pa.array([[("k", 1)], None, None], pa.map_(pa.string(), pa.int32())),
        v=pa.nulls(3),
        n=pa.array([1, 2, 3], pa.int32()),
    )
    assert collect(schema, rows) == {
        "numRecords": 3,
        "minValues": {"n": 1},
        "maxValues": {"n": 3},
        "nullCount": {"flag": 1, "raw": 1, "arr": 1, "m": 2, "v": 3, "n": 0},
    }


def test_only_types_without_bounds_leave_out_min_and_max_sections() -> None:
    rows = batch(flag=pa.array([True, False]))
    assert collect(struct(col("flag", "boolean")), rows) == {"numRecords": 2, "nullCount": {"flag": 0}}


def test_all_null_columns_keep_their_null_count_and_have_no_bounds() -> None:
    schema = struct(col("a", "integer"), col("s", struct(col("x", "string"), col("y", "double"))), col("b", "long"))
    rows = batch(
        a=pa.nulls(2, pa.int32()),
        s=pa.array([None, {"x": None, "y": None}], pa.struct([("x", pa.string()), ("y", pa.float64())])),
        b=pa.array([5, 6], pa.int64()),
    )
    assert collect(schema, rows) == {
        "numRecords": 2,
        # Spark builds each level with struct(), never null: a struct whose leaves have no bound prints as {}
        "minValues": {"s": {}, "b": 5},
        "maxValues": {"s": {}, "b": 6},
        "nullCount": {"a": 2, "s": {"x": 2, "y": 2}, "b": 0},
    }


def test_an_empty_file_has_empty_sections_as_spark_writes_them() -> None:
    # a sum over no rows is null in Spark, so even the null counts are absent (corpus: dbr_8_0_non_generated_columns)
    schema = struct(col("a", "integer"), col("s", struct(col("x", "string"))))
    empty = batch(a=pa.array([], pa.int32()), s=pa.array([], pa.struct([("x", pa.string())])))
    assert collect(schema, empty) == {
        "numRecords": 0,
        "minValues": {"s": {}},
        "maxValues": {"s": {}},
        "nullCount": {"s": {}},
    }
    assert collect(schema) == collect(schema, empty)


def test_a_leaf_under_a_null_struct_is_null_and_its_hidden_value_is_no_bound() -> None:
    schema = struct(col("s", struct(col("x", "integer"), col("t", struct(col("y", "string"))))))
    inner = pa.StructArray.from_arrays([pa.array(["zzz", "b", "c"])], names=["y"])
    # row 0 is a null struct whose children still hold values (99, "zzz"): Spark reads s.x and s.t.y there as null
    outer = pa.StructArray.from_arrays(
        [pa.array([99, 1, None], pa.int32()), inner], names=["x", "t"], mask=pa.array([True, False, False])
    )
    assert collect(schema, pa.RecordBatch.from_arrays([outer], names=["s"])) == {
        "numRecords": 3,
        "minValues": {"s": {"x": 1, "t": {"y": "b"}}},
        "maxValues": {"s": {"x": 1, "t": {"y": "c"}}},
        "nullCount": {"s": {"x": 2, "t": {"y": 1}}},
    }


def test_floats_order_nan_above_every_number_and_print_non_finite_values_as_strings() -> None:
    schema = struct(col("d", "double"), col("f", "float"), col("all_nan", "double"))
    rows = batch(
        d=pa.array([1.0, float("nan"), float("-inf"), None]),
        f=pa.array([float("inf"), 1.5, None, None], pa.float32()),
        all_nan=pa.array([float("nan"), None, float("nan"), None]),
    )
    result = collect(schema, rows)
    assert result["minValues"] == {"d": "-Infinity", "f": 1.5, "all_nan": "NaN"}
    assert result["maxValues"] == {"d": "NaN", "f": "Infinity", "all_nan": "NaN"}
    assert result["nullCount"] == {"d": 1, "f": 2, "all_nan": 2}


def test_floats_without_nulls_keep_nan_and_zero_bounds() -> None:
    # columns without nulls take NumPy's min and max (`_float_extremes`) unless a NaN or a zero bound needs Arrow's
    schema = struct(col("plain", "double"), col("nan", "double"), col("zero", "double"), col("f", "float"))
    rows = batch(
        plain=pa.array([2.5, -7.25, 1e300]),
        nan=pa.array([1.0, float("nan"), -3.0]),
        zero=pa.array([-0.0, 4.0, 1.0]),
        f=pa.array([float("-inf"), 1.5, 3.0], pa.float32()),
    )
    result = collect(schema, rows)
    assert result["minValues"] == {"plain": -7.25, "nan": -3.0, "zero": -0.0, "f": "-Infinity"}
    assert result["maxValues"] == {"plain": 1e300, "nan": "NaN", "zero": 4.0, "f": 3.0}
    assert result["nullCount"] == {"plain": 0, "nan": 0, "zero": 0, "f": 0}


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.1, "0.1"), (1 / 3, "0.33333334"), (16777217.0, "16777216.0"), (1.17549435e-38, "1.1754944e-38")],
)
def test_float32_bounds_print_the_shortest_text_of_the_float32(value: float, text: str) -> None:
    collector = StatsCollector(struct(col("f", "float")), column_mapping_mode="none", partition_columns=[])
    collector.update(batch(f=pa.array([value], pa.float32())))
    assert json.loads(collector.to_json())["minValues"]["f"] == float(text)
    assert (
        collector.to_json()
        == f'{{"numRecords":1,"minValues":{{"f":{text}}},"maxValues":{{"f":{text}}},"nullCount":{{"f":0}}}}'
    )


def test_decimals_keep_every_digit_in_json() -> None:
    schema = struct(col("d", "decimal(38,18)"), col("z", "decimal(10,0)"))
    big = Decimal("12345678901234567890.123456789012345678")
    rows = batch(
        d=pa.array([big, Decimal("-0.000000000000000001")], pa.decimal128(38, 18)),
        z=pa.array([Decimal(0), Decimal(9999999999)], pa.decimal128(10, 0)),
    )
    collector = StatsCollector(schema, column_mapping_mode="none", partition_columns=[])
    collector.update(rows)
    text = collector.to_json()
    assert text == (
        '{"numRecords":2,"minValues":{"d":-0.000000000000000001,"z":0},'
        '"maxValues":{"d":12345678901234567890.123456789012345678,"z":9999999999},"nullCount":{"d":0,"z":0}}'
    )
    assert json.loads(text, parse_float=Decimal)["maxValues"]["d"] == big
    assert collector.to_dict()["maxValues"]["d"] == big


def test_timestamps_are_cut_to_milliseconds_towards_the_past_in_any_arrow_unit() -> None:
    schema = struct(col("ns", "timestamp"), col("ms", "timestamp"), col("naive_int96", "timestamp"))
    rows = batch(
        ns=pa.array([-1, 1_999_999_999], pa.timestamp("ns", "UTC")),  # 1 ns before the epoch, then 1.999999999 s
        ms=pa.array([-1, 253402300799999], pa.timestamp("ms", "UTC")),  # up to 9999-12-31T23:59:59.999
        naive_int96=pa.array([0, 1], pa.timestamp("us")),  # Spark's INT96 reads back without a zone
    )
    result = collect(schema, rows)
    assert result["minValues"] == {
        "ns": "1969-12-31T23:59:59.999Z",
        "ms": "1969-12-31T23:59:59.999Z",
        "naive_int96": "1970-01-01T00:00:00.000Z",
    }
    assert result["maxValues"] == {
        "ns": "1970-01-01T00:00:01.999Z",
        "ms": "9999-12-31T23:59:59.999Z",
        "naive_int96": "1970-01-01T00:00:00.000Z",
    }


def test_dates_and_timestamps_pad_the_year_and_drop_bounds_they_cannot_print() -> None:
    schema = struct(col("day", "date"), col("ts", "timestamp_ntz"))
    early = (dt.date(999, 1, 2) - dt.date(1970, 1, 1)).days
    rows = batch(
        day=pa.array([early, 3_000_000], pa.date32()),  # the second day is past year 9999
        ts=pa.array([dt.datetime(42, 3, 4, 5, 6, 7), None], pa.timestamp("us")),
    )
    result = collect(schema, rows)
    assert result["minValues"] == {"day": "0999-01-02", "ts": "0042-03-04T05:06:07.000"}
    assert result["maxValues"] == {"ts": "0042-03-04T05:06:07.000"}


def test_a_column_missing_from_the_batch_counts_every_row_as_null() -> None:
    schema = struct(col("a", "integer"), col("s", struct(col("x", "integer"), col("y", "integer"))))
    rows = pa.RecordBatch.from_pydict(
        {"a": pa.array([1, 2], pa.int32()), "s": pa.array([{"x": 1}, {"x": 3}], pa.struct([("x", pa.int32())]))}
    )
    assert collect(schema, rows) == {
        "numRecords": 2,
        "minValues": {"a": 1, "s": {"x": 1}},
        "maxValues": {"a": 2, "s": {"x": 3}},
        "nullCount": {"a": 0, "s": {"x": 0, "y": 2}},
    }


def test_values_of_the_wrong_type_raise_schema_error() -> None:
    with pytest.raises(SchemaError, match="'a'"):
        collect(struct(col("a", "integer")), batch(a=pa.array(["x"])))
    with pytest.raises(SchemaError, match="'s'"):
        collect(struct(col("s", struct(col("x", "integer")))), batch(s=pa.array([1])))


def test_dictionary_and_binary_strings_are_read_as_text() -> None:
    rows = batch(
        d=pa.array(["b", "a", "b"]).dictionary_encode(),
        raw=pa.array([b"x", b"y", None], pa.binary()),  # old writers store UTF-8 text as plain binary
    )
    result = collect(struct(col("d", "string"), col("raw", "string")), rows)
    assert result["minValues"] == {"d": "a", "raw": "x"}
    assert result["maxValues"] == {"d": "b", "raw": "y"}


# ---------------------------------------------------------------------------------------------------------------------
# Names


def test_column_mapping_keys_are_physical_names_at_every_level() -> None:
    schema = struct(
        col("id", "long", **{"delta.columnMapping.id": 1, "delta.columnMapping.physicalName": "col-a"}),
        col(
            "s",
            struct(col("x", "string", **{"delta.columnMapping.id": 3, "delta.columnMapping.physicalName": "col-c"})),
            **{"delta.columnMapping.id": 2, "delta.columnMapping.physicalName": "col-b"},
        ),
    )
    rows = pa.RecordBatch.from_pydict(
        {"col-a": pa.array([7, 8]), "col-b": pa.array([{"col-c": "q"}, None], pa.struct([("col-c", pa.string())]))}
    )
    expected = {
        "numRecords": 2,
        "minValues": {"col-a": 7, "col-b": {"col-c": "q"}},
        "maxValues": {"col-a": 8, "col-b": {"col-c": "q"}},
        "nullCount": {"col-a": 0, "col-b": {"col-c": 1}},
    }
    assert collect(schema, rows, mode="name") == expected
    assert collect(schema, rows, mode="id") == expected
    # without mapping the logical names are the file's names: the physical ones are then not found
    assert collect(schema, rows, mode="none")["nullCount"] == {"id": 2, "s": {"x": 2}}


# ---------------------------------------------------------------------------------------------------------------------
# Which columns

WIDE = struct(
    col("p", "string"),
    col("a", "integer"),
    col(
        "s",
        struct(col("x", "integer"), col("t", struct(col("y", "integer"), col("z", "integer"))), col("w", "integer")),
    ),
    col("arr", {"type": "array", "elementType": "integer", "containsNull": True}),
    col("m", {"type": "map", "keyType": "string", "valueType": "integer", "valueContainsNull": True}),
    col("Mixed", "integer"),
    col("e", struct()),
)
WIDE_ROWS = pa.RecordBatch.from_pydict(
    {
        "a": pa.array([1], pa.int32()),
        "s": pa.array(
            [{"x": 2, "t": {"y": 3, "z": 4}, "w": 5}],
            pa.struct(
                [
                    ("x", pa.int32()),
                    ("t", pa.struct([("y", pa.int32()), ("z", pa.int32())])),
                    ("w", pa.int32()),
                ]
            ),
        ),
        "arr": pa.array([[1]], pa.list_(pa.int32())),
        "m": pa.array([None], pa.map_(pa.string(), pa.int32())),
        "Mixed": pa.array([6], pa.int32()),
        "e": pa.array([{}], pa.struct([])),
    }
)


def null_counts(**configuration: str) -> dict | None:
    return collect(WIDE, WIDE_ROWS, partitions=("p",), **configuration).get("nullCount")


@pytest.mark.parametrize(
    ("num", "expected"),
    [
        ("0", None),
        ("1", {"a": 0}),
        # a struct counts its leaves depth first and is cut where the count runs out
        ("3", {"a": 0, "s": {"x": 0, "t": {"y": 0}}}),
        ("5", {"a": 0, "s": {"x": 0, "t": {"y": 0, "z": 0}, "w": 0}}),
        # arrays and maps are one leaf each, whatever they hold
        ("6", {"a": 0, "s": {"x": 0, "t": {"y": 0, "z": 0}, "w": 0}, "arr": 0}),
        ("7", {"a": 0, "s": {"x": 0, "t": {"y": 0, "z": 0}, "w": 0}, "arr": 0, "m": 1}),
        ("32", {"a": 0, "s": {"x": 0, "t": {"y": 0, "z": 0}, "w": 0}, "arr": 0, "m": 1, "Mixed": 0}),
        ("-1", {"a": 0, "s": {"x": 0, "t": {"y": 0, "z": 0}, "w": 0}, "arr": 0, "m": 1, "Mixed": 0}),
    ],
)
def test_num_indexed_cols_takes_the_first_leaves_without_partition_columns(num: str, expected: dict | None) -> None:
    assert null_counts(dataSkippingNumIndexedCols=num) == expected


def test_default_is_the_first_32_leaves() -> None:
    schema = struct(*(col(f"c{i}", "integer") for i in range(40)))
    rows = pa.RecordBatch.from_pydict({f"c{i}": pa.array([i], pa.int32()) for i in range(40)})
    assert list(collect(schema, rows)["nullCount"]) == [f"c{i}" for i in range(32)]


@pytest.mark.parametrize(
    ("columns", "expected"),
    [
        ("a", {"a": 0}),
        # names match case-insensitively, keep schema order and a struct name selects all of its leaves
        ("mixed, A", {"a": 0, "Mixed": 0}),
        ("s.T", {"s": {"t": {"y": 0, "z": 0}}}),
        ("s.t.z,s.x", {"s": {"x": 0, "t": {"z": 0}}}),
        ("`s`.`w`", {"s": {"w": 0}}),
        ("arr, m", {"arr": 0, "m": 1}),
        # Spark's filterSchema: when a deeper path names the same struct, only the deeper paths count
        ("s, s.x", {"s": {"x": 0}}),
        # unknown names, partition columns and paths through non-structs select nothing, as in Spark
        ("nope, p, a.b, arr.element", None),
        ("", None),
        ("  ", None),
    ],
)
def test_stats_columns_select_exactly_the_named_columns(columns: str, expected: dict | None) -> None:
    assert null_counts(dataSkippingStatsColumns=columns, dataSkippingNumIndexedCols="1") == expected


def test_stats_columns_quote_special_names_with_backquotes() -> None:
    schema = struct(
        col("a.dot", "integer"), col("a,comma", "integer"), col("back`tick", "integer"), col("a", "integer")
    )
    rows = pa.RecordBatch.from_pydict(
        {name: pa.array([1], pa.int32()) for name in ("a.dot", "a,comma", "back`tick", "a")}
    )
    result = collect(schema, rows, dataSkippingStatsColumns=" `a.dot` ,`A,comma`, `back``tick`")
    assert result["nullCount"] == {"a.dot": 0, "a,comma": 0, "back`tick": 0}


def test_stats_columns_with_column_mapping_use_logical_names_and_write_physical_ones() -> None:
    schema = struct(
        col("a", "integer", **{"delta.columnMapping.physicalName": "col-1"}),
        col("b", "integer", **{"delta.columnMapping.physicalName": "col-2"}),
    )
    rows = pa.RecordBatch.from_pydict({"col-1": pa.array([1], pa.int32()), "col-2": pa.array([2], pa.int32())})
    assert collect(schema, rows, mode="name", dataSkippingStatsColumns="b")["nullCount"] == {"col-2": 0}
    assert collect(schema, rows, mode="name", dataSkippingStatsColumns="`col-2`") == {"numRecords": 1}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("dataSkippingNumIndexedCols", "abc"),
        ("dataSkippingNumIndexedCols", "1.5"),
        ("dataSkippingNumIndexedCols", "-2"),
        ("dataSkippingStatsColumns", "a."),
        ("dataSkippingStatsColumns", "a,,b"),
        ("dataSkippingStatsColumns", "c-4"),
        ("dataSkippingStatsColumns", "c2*"),
        ("dataSkippingStatsColumns", "`unclosed"),
        ("dataSkippingStatsColumns", "123"),
        ("dataSkippingStringPrefixLength", "-1"),
        ("dataSkippingStringPrefixLength", "ten"),
    ],
)
def test_invalid_properties_raise_invalid_table_property_naming_it(key: str, value: str) -> None:
    with pytest.raises(InvalidTableProperty, match=re.escape(f"delta.{key}")):
        collect(WIDE, WIDE_ROWS, partitions=("p",), **{key: value})


def test_an_unparseable_column_count_fails_even_when_a_column_list_wins() -> None:
    # Spark parses delta.dataSkippingNumIndexedCols whenever it builds the stats spec
    with pytest.raises(InvalidTableProperty, match="dataSkippingNumIndexedCols"):
        null_counts(dataSkippingStatsColumns="a", dataSkippingNumIndexedCols="x")
    assert null_counts(dataSkippingStatsColumns="a", dataSkippingNumIndexedCols="-5") == {"a": 0}


def test_an_unknown_mapping_mode_is_refused() -> None:
    with pytest.raises(InvalidTableProperty, match="columnMapping"):
        StatsCollector(WIDE, column_mapping_mode="physical", partition_columns=[])


# ---------------------------------------------------------------------------------------------------------------------
# Strings


def string_bounds(values: list[str | None], prefix: int | None = None) -> tuple[str | None, str | None]:
    configuration = {} if prefix is None else {"dataSkippingStringPrefixLength": str(prefix)}
    result = collect(struct(col("s", "string")), batch(s=pa.array(values, pa.string())), **configuration)
    return result["minValues"].get("s"), result["maxValues"].get("s")


@pytest.mark.parametrize(
    ("value", "prefix", "expected_max"),
    [
        # the vectors of delta-spark's StatisticsCollectionSuite "Truncate max string"
        ("abcd", 0, None),
        (f"a{UTF8_MAX}d", 2, f"a{UTF8_MAX}{ASCII_MAX}"),
        ("abcd", 6, "abcd"),
        ("abcdef", 6, "abcdef"),
        ("漢字仮名한글தமி", 6, f"漢字仮名한글{UTF8_MAX}"),
        ("漢字仮名한글", 6, "漢字仮名한글"),
        ("abcdef🚀", 6, f"abcdef{UTF8_MAX}"),
        (UTF8_MAX * 4, 1, None),
        (UTF8_MAX * 4, 4, UTF8_MAX * 4),
        ("abcdefghijklm💞😉💕\n🥀🌹💐🌺🌷🌼🌻🌷🥀", 32, f"abcdefghijklm💞😉💕\n🥀🌹💐🌺🌷🌼{UTF8_MAX}"),
        # U+FFFD, as the suite's garbled characters stand for
        ("abcd\ufffdabcd", 6, f"abcd\ufffda{ASCII_MAX}"),
        ("abcdef\ufffd", 6, f"abcdef{UTF8_MAX}"),
        ("abcdef-abcdef\ufffd", 6, f"abcdef{ASCII_MAX}"),
        ("abcde\ufffdabcdef\ufffdabcdef\ufffdabcdef", 6, f"abcde\ufffd{ASCII_MAX}"),
        # U+007F itself is not below the ASCII tie-breaker
        ("abc\x7fz", 3, f"abc{UTF8_MAX}"),
        # U+10FFFF cannot be exceeded, so the cut moves past it, but not beyond 2 * prefix UTF-16 units
        (f"ab{UTF8_MAX}c", 2, f"ab{UTF8_MAX}{ASCII_MAX}"),
        (f"ab{UTF8_MAX}{UTF8_MAX}c", 2, None),
        (f"ab{UTF8_MAX}", 2, f"ab{UTF8_MAX}"),
    ],
)
def test_string_max_follows_truncate_max_string_agg(value: str, prefix: int, expected_max: str | None) -> None:
    assert string_bounds([value], prefix)[1] == expected_max


def test_default_prefix_is_32_with_an_ascii_tie_breaker() -> None:
    assert string_bounds(["a" * 40, "b" * 33 + "\u00e9"]) == ("a" * 32, "b" * 32 + ASCII_MAX)
    assert string_bounds(["z" * 32 + "\u00e9"]) == ("z" * 32, "z" * 32 + UTF8_MAX)
    assert string_bounds(["z" * 32]) == ("z" * 32, "z" * 32)


def test_min_counts_code_points_while_max_counts_java_utf16_units() -> None:
    # Spark's min is SQL substring (code points); the max cut counts UTF-16 units, where an emoji takes two
    emoji = "🚀" * 20
    assert string_bounds([emoji]) == (emoji, "🚀" * 16 + UTF8_MAX)
    # a cut inside a surrogate pair moves past the pair
    assert string_bounds(["a" + "🚀" * 3], 2) == ("a🚀", f"a🚀{UTF8_MAX}")


def test_prefix_zero_keeps_an_empty_min_and_no_max() -> None:
    assert string_bounds(["abc"], 0) == ("", None)
    assert string_bounds([""], 0) == ("", "")


def test_string_order_is_code_point_order() -> None:
    # UTF-8 byte order equals code point order; UTF-16 order would put U+FF61 above U+1F680
    assert string_bounds(["\uff61", "🚀", "a"]) == ("a", "🚀")


def test_string_min_and_max_pick_across_batches_before_truncation() -> None:
    collector = StatsCollector(
        struct(col("s", "string")),
        column_mapping_mode="none",
        partition_columns=[],
        configuration={"delta.dataSkippingStringPrefixLength": "2"},
    )
    collector.update(batch(s=pa.array(["abz", "b"])))
    collector.update(batch(s=pa.array(["aba", "bb\u00e9"])))
    assert collector.to_dict()["minValues"] == {"s": "ab"}
    assert collector.to_dict()["maxValues"] == {"s": f"bb{UTF8_MAX}"}


# ---------------------------------------------------------------------------------------------------------------------
# Streaming


def test_many_updates_equal_one_update_on_the_concatenation() -> None:
    rng = random.Random(7)
    n = 500

    def pick(make: Any) -> list:
        return [None if rng.random() < 0.1 else make() for _ in range(n)]

    schema = struct(
        col("i", "long"),
        col("d", "double"),
        col("s", "string"),
        col("dec", "decimal(12,3)"),
        col("ts", "timestamp"),
        col("st", struct(col("x", "integer"), col("b", "boolean"))),
    )
    table = pa.table(
        {
            "i": pa.array(pick(lambda: rng.randint(-(10**12), 10**12)), pa.int64()),
            "d": pa.array(pick(lambda: rng.choice([rng.uniform(-1e6, 1e6), float("nan")])), pa.float64()),
            "s": pa.array(pick(lambda: "".join(rng.choice("ab\u00e9🚀") for _ in range(rng.randint(0, 60))))),
            "dec": pa.array(pick(lambda: Decimal(rng.randint(-(10**11), 10**11)).scaleb(-3)), pa.decimal128(12, 3)),
            "ts": pa.array(pick(lambda: rng.randint(-(10**15), 10**15)), pa.timestamp("us", "UTC")),
            "st": pa.array(
                pick(lambda: {"x": rng.choice([None, rng.randint(0, 100)]), "b": rng.random() < 0.5}),
                pa.struct([("x", pa.int32()), ("b", pa.bool_())]),
            ),
        }
    )
    whole = collect(schema, table.combine_chunks().to_batches()[0])
    in_pieces = collect(schema, *table.to_batches(max_chunksize=37))
    as_chunked_table = collect(schema, pa.concat_tables([table.slice(0, 123), table.slice(123)]))
    assert whole["numRecords"] == n
    assert set(whole["minValues"]) == {"i", "d", "s", "dec", "ts", "st"}
    assert whole == in_pieces == as_chunked_table


def test_num_records_counts_every_row_and_to_json_is_compact() -> None:
    collector = StatsCollector(struct(col("a", "integer")), column_mapping_mode="none", partition_columns=[])
    assert collector.num_records == 0
    collector.update(batch(a=pa.array([1, None], pa.int32())))
    collector.update(pa.table({"a": pa.array([3], pa.int32())}))
    assert collector.num_records == 3
    assert collector.to_json() == json.dumps(collector.to_dict(), separators=(",", ":"))
    assert collector.to_json() == '{"numRecords":3,"minValues":{"a":1},"maxValues":{"a":3},"nullCount":{"a":1}}'


# ---------------------------------------------------------------------------------------------------------------------
# Spark-written corpus files as oracle


@dataclass
class Commit:
    version: int
    info: dict | None
    adds: dict[str, str | None]  # path -> stats
    metadata: dict | None


@dataclass
class Meta:
    """What a writer saw when it wrote a file: the table's metaData at that version."""

    schema: dict
    column_mapping_mode: str
    partition_columns: list[str]
    configuration: dict[str, str]

    @classmethod
    def from_action(cls, action: dict) -> Meta:
        configuration = action.get("configuration") or {}
        return cls(
            parse_schema_string(action["schemaString"]),
            column_mapping_mode(configuration),
            list(action.get("partitionColumns") or []),
            configuration,
        )

    @classmethod
    def from_snapshot(cls, snapshot: Any) -> Meta:
        configuration = snapshot.metadata.get("configuration") or {}
        return cls(snapshot.schema, snapshot.column_mapping_mode, snapshot.partition_columns, configuration)


@dataclass
class TableResult:
    matched: list[str] = field(default_factory=list)
    zone_normalised: int = 0  # files with a timestamp bound Spark printed in another zone or format
    mismatches: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def spark_family(info: dict | None) -> bool | None:
    """Whether a commitInfo comes from delta-spark or Databricks (same stats code); None when it cannot tell."""
    if not info:
        return None
    engine = info.get("engineInfo")
    if engine:
        return engine.startswith(("Apache-Spark/", "Databricks-Runtime/")) or engine == "<unknown>"
    if "clientVersion" in info or "delta-rs" in info:
        return False
    # delta-spark before 1.0 and old Databricks runtimes wrote no engineInfo, but always an operation
    return "operation" in info and "operationParameters" in info


def log_dirs() -> list[Path]:
    """Every staged table with a log, once: byte-identical copies of a table (several sources ship some) count once."""
    entries = json.loads((CORPUS / "summary.json").read_text())
    seen: set[str] = set()
    out = []
    for entry in entries:
        root = CORPUS / entry["staged_path"]
        if (root / "delta" / "_delta_log").is_dir():
            root = root / "delta"
        log = root / "_delta_log"
        if not log.is_dir():
            continue
        digest = hashlib.sha256()
        # Hadoop's hidden .crc side files differ between copies of the same table
        for item in sorted(i for i in log.iterdir() if not i.name.startswith(".")):
            digest.update(item.name.encode())
            if item.is_file():
                digest.update(item.read_bytes())
        if digest.hexdigest() not in seen:
            seen.add(digest.hexdigest())
            out.append(root)
    return out


def read_commits(root: Path) -> list[Commit]:
    commits = []
    for path in sorted((root / "_delta_log").glob("*.json")):
        if not re.fullmatch(r"\d{20}\.json", path.name):
            continue
        info, adds, metadata = None, {}, None
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            action = json.loads(line)
            if "commitInfo" in action:
                info = action["commitInfo"]
            elif "add" in action:
                adds[action["add"]["path"]] = action["add"].get("stats")
            elif "metaData" in action:
                metadata = action["metaData"]
        commits.append(Commit(int(path.name[:20]), info, adds, metadata))
    return commits


def metadata_at(table: DeltaTable, commits: list[Commit], version: int | None, latest: Any) -> Meta:
    """The metaData in force at `version` (None: the latest snapshot's).

    Taken from the commit files when all of them up to `version` are there: some test tables carry a hand-made
    checkpoint whose metaData differs from the commits it stands for. Otherwise from the snapshot at that version.
    """
    if version is None:
        return Meta.from_snapshot(latest)
    history = [c for c in commits if c.version <= version]
    if [c.version for c in history] == list(range(version + 1)):
        actions = [c.metadata for c in history if c.metadata]
        if actions:
            return Meta.from_action(actions[-1])
    return Meta.from_snapshot(table.snapshot(version=version))


def leaf_types(schema: dict, mode: str) -> dict[tuple[str, ...], Any]:
    def walk(fields: list[dict], prefix: tuple[str, ...]) -> None:
        for f in fields:
            path = (*prefix, physical_name(f, mode))
            if isinstance(f["type"], dict) and f["type"]["type"] == "struct":
                walk(f["type"]["fields"], path)
            else:
                out[path] = f["type"]

    out: dict[tuple[str, ...], Any] = {}
    walk(schema["fields"], ())
    return out


def as_utc_text(text: str) -> str:
    """The instant of a Spark timestamp bound in deltalite's form.

    Spark prints timestamps in the session zone ("-08:00"), and Databricks Runtime 10.4 printed six fraction digits
    ("22:59:32.846000Z"); deltalite always prints UTC with milliseconds.
    """
    moment = dt.datetime.fromisoformat(text)
    if moment.tzinfo is None:
        return text  # no zone to convert from: compared as written
    moment = moment.astimezone(dt.UTC)
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:{moment.minute:02d}:"
        f"{moment.second:02d}.{moment.microsecond // 1000:03d}Z"
    )


def without_variant_bounds(stats: dict, schema: dict, mode: str) -> dict:
    """Spark's stats without the min/max of variant columns: Spark writes them for shredded files only (z85-encoded
    variants), and deltalite writes unshredded files, whose variant stats are a null count alone."""
    variants = [path for path, kind in leaf_types(schema, mode).items() if kind == "variant"]
    for section in ("minValues", "maxValues"):
        removed = False
        for path in variants:
            parent = stats.get(section)
            for key in path[:-1]:
                parent = parent.get(key) if isinstance(parent, dict) else None
            if isinstance(parent, dict) and path[-1] in parent:
                del parent[path[-1]]
                removed = True
        if removed:  # a struct (or the section) left empty by that is no bound either
            for key in [k for k, v in stats[section].items() if v == {}]:
                del stats[section][key]
            if stats[section] == {}:
                del stats[section]
    return stats


def differences(mine: Any, theirs: Any, types: dict, path: tuple[str, ...] = ()) -> tuple[list[str], bool]:
    """Key-by-key differences between my stats and Spark's (parsed with Decimal floats).

    Also returns whether a timestamp bound matched only once Spark's text was rewritten in UTC milliseconds.
    """
    diffs: list[str] = []
    zoned = False
    if not isinstance(mine, dict) or not isinstance(theirs, dict):
        return [f"{'.'.join(path)}: {mine!r} != {theirs!r}"], False
    for key in sorted(set(mine) | set(theirs)):
        where = (*path, key)
        if not path and key == "tightBounds":
            continue
        if key not in mine or key not in theirs:
            diffs.append(
                f"{'.'.join(where)}: mine {mine.get(key, '<absent>')!r}, Spark {theirs.get(key, '<absent>')!r}"
            )
            continue
        a, b = mine[key], theirs[key]
        if isinstance(a, dict) or isinstance(b, dict):
            more, more_zoned = differences(a, b, types, where)
            diffs += more
            zoned |= more_zoned
            continue
        kind = types.get(where[1:]) if where[0] in ("minValues", "maxValues") else None
        if kind == "timestamp" and isinstance(b, str) and isinstance(a, str) and a != b:
            b = as_utc_text(b)
            zoned = True
        if kind in ("float", "double"):
            # the double each text stands for, compared exactly
            a = float(a) if isinstance(a, (Decimal, int)) else a
            b = float(b) if isinstance(b, (Decimal, int)) else b
        same = a == b and isinstance(a, str) == isinstance(b, str) and isinstance(a, bool) == isinstance(b, bool)
        if not same:
            diffs.append(f"{'.'.join(where)}: mine {a!r}, Spark {b!r}")
    return diffs, zoned


def whitespace_outside_strings(text: str) -> bool:
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch.isspace():
            return True
    return False


def written_schema(schema: dict, file_columns: list[str], mode: str) -> dict:
    """The table schema without the top-level columns a data file does not hold.

    Void columns stay: Spark writes them (their stats count every row as null) but Parquet stores nothing for them.
    """
    fields = [f for f in schema["fields"] if f["type"] == "void" or physical_name(f, mode) in file_columns]
    return {**schema, "fields": fields}


def absent_described_columns(theirs: dict, file_schema: pa.Schema) -> list[str]:
    """Top-level columns the stats give a bound for that the data file does not hold."""
    described = set(theirs.get("minValues") or {}) | set(theirs.get("maxValues") or {})
    return sorted(described - set(file_schema.names))


@functools.cache
def check_table(root: Path) -> TableResult:
    result = TableResult()
    commits = read_commits(root)
    infos = [c.info for c in commits if c.info]
    table = DeltaTable(str(root))
    try:
        latest = table.snapshot()
    except DeltaLiteError as exc:
        result.skipped.append(f"table: deltalite cannot load it ({type(exc).__name__})")
        return result
    first_added: dict[str, Commit] = {}
    for c in commits:
        for path in c.adds:
            first_added.setdefault(path, c)
    last_json_stats = {path: stats for c in commits for path, stats in c.adds.items()}
    metas: dict[int | None, Meta | DeltaLiteError] = {}
    for path, stats in zip(latest.raw_files.column("path").to_pylist(), latest.raw_files.column("stats").to_pylist()):
        name = path[:60]
        # Spark's own text where a commit file still holds it; a checkpoint may keep only struct stats, which the
        # engine turns back into JSON in its own style
        stats = last_json_stats.get(path) or stats
        if not stats:
            result.skipped.append(f"{name}: the add has no stats")
            continue
        data = root / path
        if not data.is_file():
            data = root / unquote(path)  # log paths are URI-encoded
        if not data.is_file():
            result.skipped.append(f"{name}: the data file is not in the corpus (log-only table)")
            continue
        origin = first_added.get(path)
        writer = spark_family(origin.info) if origin else None
        if writer is None:
            # the add sits in a checkpoint or a commit without commitInfo: trust it only in an all-Spark log
            if not infos:
                result.skipped.append(f"{name}: the log has no commitInfo, so its writer is unknown")
                continue
            if not all(spark_family(i) for i in infos):
                result.skipped.append(f"{name}: no commitInfo names its writer and the log is not all Spark")
                continue
        elif not writer:
            engine = origin.info.get("engineInfo") or origin.info.get("clientVersion")
            result.skipped.append(f"{name}: written by {engine}, which has its own stats rules")
            continue
        if whitespace_outside_strings(stats):
            result.skipped.append(f"{name}: stats text has spaces Spark's JSON writer never emits (hand-written log)")
            continue
        version = origin.version if origin else None
        if version not in metas:
            try:
                metas[version] = metadata_at(table, commits, version, latest)
            except DeltaLiteError as exc:
                metas[version] = exc
        meta = metas[version]
        if isinstance(meta, DeltaLiteError):
            result.skipped.append(f"{name}: version {version}, which added it, cannot be read ({meta.problem})")
            continue
        parquet = pq.ParquetFile(data, coerce_int96_timestamp_unit="us")  # as engine/scan.py reads INT96
        theirs = without_variant_bounds(json.loads(stats, parse_float=Decimal), meta.schema, meta.column_mapping_mode)
        absent = absent_described_columns(theirs, parquet.schema_arrow)
        if absent:
            result.skipped.append(f"{name}: stats bound columns {absent} that the data file lacks (made-up log)")
            continue
        configuration = meta.configuration
        schema = meta.schema
        if "delta.dataSkippingStatsColumns" not in configuration:
            # Spark counts the first N leaves of the data it writes; an append that left out a column wrote a file
            # without it, and its stats do not mention it (deltalite's writer always writes every column)
            schema = written_schema(schema, parquet.schema_arrow.names, meta.column_mapping_mode)
        collector = StatsCollector(
            schema,
            column_mapping_mode=meta.column_mapping_mode,
            partition_columns=meta.partition_columns,
            configuration=configuration,
            table_uri=str(root),
        )
        rows = parquet.read()
        # several batches, so that the running min/max/null counts are what is checked
        for part in rows.to_batches(max_chunksize=max(1, (rows.num_rows + 2) // 3)):
            collector.update(part)
        types = leaf_types(meta.schema, meta.column_mapping_mode)
        diffs, zoned = differences(collector.to_dict(), theirs, types)
        text_diffs, _ = differences(json.loads(collector.to_json(), parse_float=Decimal), theirs, types)
        if diffs or text_diffs:
            result.mismatches.append(f"{name}: {diffs or text_diffs}")
        else:
            result.matched.append(path)
            result.zone_normalised += zoned
    return result


def summarise(skipped: list[str]) -> str:
    """Skip reasons once each, with how many files had them."""
    reasons: dict[str, int] = {}
    for line in skipped:
        reason = line.split(": ", 1)[-1]
        reasons[reason] = reasons.get(reason, 0) + 1
    return "; ".join(f"{count} file(s): {reason}" for reason, count in sorted(reasons.items()))


# tables whose every live file must be an oracle, for the rule each one pins down
MUST_MATCH = {
    "delta-golden/data-skipping-basic-stats-all-types-columnmapping-id": "id mapping; session zone -08:00",
    "delta-golden/dv-with-columnmapping": "name mapping; deletion vectors: stats over the physical rows",
    "delta-golden/parquet-all-types": "nested structs, arrays, maps, binary, booleans, timestamp_ntz, float32",
    "delta-golden/data-skipping-change-stats-collected-across-versions": "dataSkippingNumIndexedCols 32, 1 then 0",
    "delta-golden/decimal-various-scale-precision": "decimals up to 38 digits",
    "delta-golden/kernel-timestamp-INT96": "INT96 timestamps",
    "delta-golden/kernel-timestamp-TIMESTAMP_MILLIS": "millisecond timestamps",
    "delta-spark-resources/dbr_8_0_non_generated_columns": "an empty file",
    "kernel-rs-data/parquet_row_group_skipping": "dataSkippingNumIndexedCols 0",
    "kernel-rs-data/void-column": "void columns: every row null, nothing stored",
    "kernel-rs-data/stats-writing-all-types/delta": "every type under name mapping",
}

CORPUS_TABLES = log_dirs() if CORPUS.is_dir() else []
# Tables with no file Spark's stats can be checked against, each with why (the reasons of its files; none: the table
# has no live data file). Known up front, so that a table that stops being compared fails instead of passing quietly.
NO_ORACLE: dict[str, list[str]] = json.loads(Path(__file__).with_name("stats_collect_no_oracle.json").read_text())


def reasons(skipped: list[str]) -> list[str]:
    """Why files were not compared, once each (`TableResult.skipped` without the file names)."""
    return sorted({line.split(": ", 1)[-1] for line in skipped})


@pytest.mark.parametrize("root", CORPUS_TABLES, ids=lambda p: str(p.relative_to(CORPUS)))
def test_spark_written_files_get_the_stats_spark_wrote(root: Path) -> None:
    result = check_table(root)
    assert not result.mismatches, "\n".join(result.mismatches)
    name = str(root.relative_to(CORPUS))
    if name in NO_ORACLE:
        assert not result.matched, f"{name} has files to compare now: take it off stats_collect_no_oracle.json"
        assert reasons(result.skipped) == NO_ORACLE[name]
    else:
        assert result.matched, summarise(result.skipped) or "no live data files"


def test_corpus_oracle_coverage() -> None:
    results = {root: check_table(root) for root in CORPUS_TABLES}
    tables = [root for root, r in results.items() if r.matched]
    files = sum(len(r.matched) for r in results.values())
    zoned = sum(r.zone_normalised for r in results.values())
    print(f"\nfile stats oracle: {files} files in {len(tables)} tables matched Spark; {zoned} after a zone change")
    assert not [r.mismatches for r in results.values() if r.mismatches]
    # the corpus as staged; a drop here means files stopped being compared, not that they disagree
    assert len(tables) >= 120
    assert files >= 726
    assert zoned >= 8
    matched = {str(root.relative_to(CORPUS)): r for root, r in results.items()}
    for name, rule in MUST_MATCH.items():
        result = matched[name]
        assert result.matched and not result.skipped, f"{name} ({rule}) was not fully compared: {result.skipped}"
