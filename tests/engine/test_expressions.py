"""Tests of the predicate language: parsing, binding, row filtering, partition pruning and stats skipping."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_provider_deltalite.engine.errors import DeltaLiteError, InvalidExpression
from airflow_provider_deltalite.engine.expressions import (
    And,
    Comparison,
    IsNull,
    Not,
    Or,
    bind,
    column_path,
    expression_columns,
    format_column,
    may_match_partitions,
    may_match_stats,
    parse_expression,
    to_arrow_filter,
    to_sql,
)
from airflow_provider_deltalite.engine.stats_parse import parse_stats

UTC = dt.UTC


def C(column: str, op: str, value: object) -> Comparison:
    return Comparison(column, op, value)


# ---------------------------------------------------------------------------------------------------------------------
# Parsing


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a = 1", C("a", "=", 1)),
        ("a=1", C("a", "=", 1)),
        ("a <> 1", C("a", "!=", 1)),
        ("a != 1", C("a", "!=", 1)),
        ("a == 1", C("a", "=", 1)),
        ("a < -1", C("a", "<", -1)),
        ("a <= +2", C("a", "<=", 2)),
        ("a >= 1.25", C("a", ">=", Decimal("1.25"))),
        ("a > -1.5e3", C("a", ">", Decimal("-1500"))),
        ("a > .5", C("a", ">", Decimal("0.5"))),
        ("a > 2E-2", C("a", ">", Decimal("0.02"))),
        ("a = 'it''s'", C("a", "=", "it's")),
        ("a = ''", C("a", "=", "")),
        ("a = 'x AND y'", C("a", "=", "x AND y")),
        ("a = true", C("a", "=", True)),
        ("a = FALSE", C("a", "=", False)),
        ("5 < a", C("a", ">", 5)),
        ("5 <= a", C("a", ">=", 5)),
        ("'x' = a", C("a", "=", "x")),
        ("1 != a", C("a", "!=", 1)),
        ("a IS NULL", IsNull("a", False)),
        ("a is not null", IsNull("a", True)),
        ("`Company Very Short` = 'BMS'", C("Company Very Short", "=", "BMS")),
        ("`we``ird` = 1", C("`we``ird`", "=", 1)),
        ("a.b.c > 1", C("a.b.c", ">", 1)),
        ("`a.b`.c > 1", C("`a.b`.c", ">", 1)),
        ("s.`and` = 1", C("s.and", "=", 1)),
        ("`select` = 1", C("select", "=", 1)),
        ("größe = 1", C("größe", "=", 1)),
    ],
)
def test_parse_single_predicates(text: str, expected: object) -> None:
    assert parse_expression(text) == expected


def test_and_binds_tighter_than_or() -> None:
    assert parse_expression("a = 1 OR b = 2 AND c = 3") == Or(C("a", "=", 1), And(C("b", "=", 2), C("c", "=", 3)))
    assert parse_expression("a = 1 AND b = 2 OR c = 3") == Or(And(C("a", "=", 1), C("b", "=", 2)), C("c", "=", 3))


def test_parentheses_override_precedence() -> None:
    assert parse_expression("(a = 1 OR b = 2) AND c = 3") == And(Or(C("a", "=", 1), C("b", "=", 2)), C("c", "=", 3))
    assert parse_expression("((a = 1))") == C("a", "=", 1)


def test_chains_are_left_associative() -> None:
    assert parse_expression("a = 1 AND b = 2 AND c = 3") == And(And(C("a", "=", 1), C("b", "=", 2)), C("c", "=", 3))
    assert parse_expression("a = 1 or b = 2 or c = 3") == Or(Or(C("a", "=", 1), C("b", "=", 2)), C("c", "=", 3))


def test_not_binds_tighter_than_and() -> None:
    assert parse_expression("NOT a = 1 AND b = 2") == And(Not(C("a", "=", 1)), C("b", "=", 2))
    assert parse_expression("NOT (a = 1 AND b = 2)") == Not(And(C("a", "=", 1), C("b", "=", 2)))
    assert parse_expression("not not a is null") == Not(Not(IsNull("a")))


def test_keywords_are_case_insensitive() -> None:
    assert parse_expression("a Is NoT nUlL aNd NOT b iS null Or c = TrUe") == Or(
        And(IsNull("a", True), Not(IsNull("b"))), C("c", "=", True)
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty filter"),
        ("   ", "empty filter"),
        ("a", "expected a comparison operator or IS after column 'a' but found end of input in filter \"a\""),
        ("a >", 'expected a literal but found end of input in filter "a >"'),
        ("a = 1 AND", "expected a column name, a literal or '(' but found end of input in filter \"a = 1 AND\""),
        ("(a = 1", "expected ')' at end of input in filter \"(a = 1\""),
        ("a = 1)", "unexpected ')' at position 5 in filter \"a = 1)\""),
        ("a = null", 'null can only be tested with IS NULL or IS NOT NULL at position 4 in filter "a = null"'),
        ("a = 'x", 'unterminated string literal at position 4 in filter "a = \'x"'),
        ("`a = 1", 'unterminated backquoted name at position 0 in filter "`a = 1"'),
        ("a = 1 # x", "unexpected character '#' at position 6 in filter \"a = 1 # x\""),
        ("a is 5", 'expected NULL after IS at position 5 in filter "a is 5"'),
        ("a = b", "expected a literal but found 'b' at position 4 in filter \"a = b\""),
        ("1 = 2", "expected a column name after '=' but found '2' at position 4 in filter \"1 = 2\""),
        ("a = 1 b = 2", "unexpected 'b' at position 6 in filter \"a = 1 b = 2\""),
        ("and a = 1", "expected a column name, a literal or '(' but found 'AND' at position 0 in filter \"and a = 1\""),
        ("a. = 1", "expected a field name after '.' but found '=' at position 3 in filter \"a. = 1\""),
        ("a ! 1", "unexpected character '!' at position 2 in filter \"a ! 1\""),
        ("`` = 1", 'empty backquoted name at position 0 in filter "`` = 1"'),
    ],
)
def test_garbage_is_rejected_with_a_one_line_message(text: str, message: str) -> None:
    with pytest.raises(InvalidExpression) as info:
        parse_expression(text)
    assert str(info.value) == message
    assert "\n" not in str(info.value)
    assert isinstance(info.value, DeltaLiteError)


def test_non_string_input_is_rejected() -> None:
    with pytest.raises(InvalidExpression, match="filter must be a string"):
        parse_expression(5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text",
    [
        "a = 1 OR b > 2.5 AND NOT `Company Very Short` IS NULL",
        "(a = 1 OR b = 2) AND NOT (c < 'it''s' OR d IS NOT NULL)",
        "`a.b`.c >= -3 AND `we``ird` != true",
        "NOT NOT a = 1",
    ],
)
def test_to_sql_round_trips(text: str) -> None:
    expr = parse_expression(text)
    assert parse_expression(to_sql(expr)) == expr
    assert str(expr) == to_sql(expr)


def test_to_sql_adds_only_needed_parentheses() -> None:
    assert to_sql(parse_expression("(a = 1 OR b = 2) AND c = 3")) == "(a = 1 OR b = 2) AND c = 3"
    assert to_sql(parse_expression("a = 1 OR (b = 2 AND c = 3)")) == "a = 1 OR b = 2 AND c = 3"
    assert to_sql(parse_expression("`Company Very Short` = 'x'")) == "`Company Very Short` = 'x'"


def test_expression_columns_are_top_level_names() -> None:
    expr = parse_expression("a.b = 1 OR (`c d` IS NULL AND NOT e.f.g < 2) OR a.x = 3 OR `p.q`.r = 1")
    assert expression_columns(expr) == {"a", "c d", "e", "p.q"}


def test_column_path_and_format_column_are_inverse() -> None:
    for path in [("a",), ("a", "b"), ("a.b", "c"), ("we`ird",), ("Company Very Short", "x")]:
        assert column_path(format_column(path)) == path
    assert column_path("a.b") == ("a", "b")
    with pytest.raises(InvalidExpression):
        column_path("a..b")


# ---------------------------------------------------------------------------------------------------------------------
# Binding

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("b8", pa.int8()),
        ("f", pa.float32()),
        ("dbl", pa.float64()),
        ("dec", pa.decimal128(5, 2)),
        ("s", pa.string()),
        ("flag", pa.bool_()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("ntz", pa.timestamp("us")),
        ("bin", pa.binary()),
        ("Company Very Short", pa.string()),
        ("st", pa.struct([("Inner", pa.int32()), ("deep", pa.struct([("x", pa.string())]))])),
        ("arr", pa.list_(pa.int32())),
        ("m", pa.map_(pa.string(), pa.int32())),
    ]
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("id = 7", C("id", "=", 7)),
        ("id = 7.0", C("id", "=", 7)),
        ("id = '7'", C("id", "=", 7)),
        ("b8 >= -128", C("b8", ">=", -128)),
        ("f < 1", C("f", "<", 1.0)),
        ("dbl > -1.5e3", C("dbl", ">", -1500.0)),
        ("dec = 1.5", C("dec", "=", Decimal("1.50"))),
        ("dec < -999.99", C("dec", "<", Decimal("-999.99"))),
        ("dec = 3", C("dec", "=", Decimal("3.00"))),
        ("s = 'x'", C("s", "=", "x")),
        ("flag = true", C("flag", "=", True)),
        ("flag = 'false'", C("flag", "=", False)),
        ("d = '2021-09-08'", C("d", "=", dt.date(2021, 9, 8))),
        ("ts > '2021-09-08'", C("ts", ">", dt.datetime(2021, 9, 8, tzinfo=UTC))),
        ("ts > '2021-09-08 11:11:11'", C("ts", ">", dt.datetime(2021, 9, 8, 11, 11, 11, tzinfo=UTC))),
        ("ts > '2021-09-08 11:11:11.123'", C("ts", ">", dt.datetime(2021, 9, 8, 11, 11, 11, 123000, tzinfo=UTC))),
        ("ts > '2021-09-08T11:11:11.123456Z'", C("ts", ">", dt.datetime(2021, 9, 8, 11, 11, 11, 123456, tzinfo=UTC))),
        ("ts > '2021-09-08T13:11:11+02:00'", C("ts", ">", dt.datetime(2021, 9, 8, 11, 11, 11, tzinfo=UTC))),
        ("ntz <= '2021-09-08 11:11:11.5'", C("ntz", "<=", dt.datetime(2021, 9, 8, 11, 11, 11, 500000))),
        ("bin = 'ab'", C("bin", "=", b"ab")),
        ("`company very short` = 'x'", C("Company Very Short", "=", "x")),
        ("ID = 1", C("id", "=", 1)),
        ("st.inner = 1", C("st.Inner", "=", 1)),
        ("ST.deep.X = 'y'", C("st.deep.x", "=", "y")),
        ("st IS NULL", IsNull("st")),
        ("arr IS NOT NULL", IsNull("arr", True)),
    ],
)
def test_bind_resolves_columns_and_converts_literals(text: str, expected: object) -> None:
    bound = bind(parse_expression(text), SCHEMA)
    assert bound == expected
    if isinstance(expected, Comparison):
        assert isinstance(bound, Comparison)
        assert type(bound.value) is type(expected.value)


def test_bind_reads_non_finite_float_strings() -> None:
    bound = bind(parse_expression("dbl != 'NaN' AND f < 'Infinity'"), SCHEMA)
    assert isinstance(bound, And) and isinstance(bound.left, Comparison) and isinstance(bound.right, Comparison)
    assert bound.left.value != bound.left.value
    assert bound.right.value == float("inf")


def test_bind_keeps_timestamp_values_aware_in_utc() -> None:
    bound = bind(parse_expression("ts = '2021-09-08 11:11:11'"), SCHEMA)
    assert isinstance(bound, Comparison)
    assert bound.value.utcoffset() == dt.timedelta(0)
    ntz = bind(parse_expression("ntz = '2021-09-08 11:11:11'"), SCHEMA)
    assert isinstance(ntz, Comparison) and ntz.value.tzinfo is None


def test_bind_walks_and_or_not() -> None:
    bound = bind(parse_expression("NOT (ID = 1 OR s IS NULL) AND d > '2020-01-01'"), SCHEMA)
    assert bound == And(Not(Or(C("id", "=", 1), IsNull("s"))), C("d", ">", dt.date(2020, 1, 1)))


def test_bind_prefers_the_exact_case_and_rejects_ambiguity() -> None:
    schema = pa.schema([("a", pa.int32()), ("A", pa.string())])
    assert bind(parse_expression("A = 'x'"), schema) == C("A", "=", "x")
    assert bind(parse_expression("a = 1"), schema) == C("a", "=", 1)
    nested = pa.schema([("st", pa.struct([("Ab", pa.int32()), ("aB", pa.int32())]))])
    with pytest.raises(InvalidExpression, match="ambiguous field 'ab' of column 'st'"):
        bind(parse_expression("st.ab = 1"), nested)
    assert bind(parse_expression("st.aB = 1"), nested) == C("st.aB", "=", 1)
    with pytest.raises(InvalidExpression, match="ambiguous column 'ab'"):
        bind(parse_expression("ab = 1"), pa.schema([("Ab", pa.int32()), ("aB", pa.int32())]))


def test_bind_accepts_a_top_level_name_with_dots_written_bare() -> None:
    schema = pa.schema([("a.b", pa.int32())])
    assert bind(parse_expression("a.b = 1"), schema) == C("`a.b`", "=", 1)
    assert bind(parse_expression("`a.b` = 1"), schema) == C("`a.b`", "=", 1)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x > 1", "unknown column 'x' in filter \"x > 1\""),
        ("st.nope = 1", "unknown column 'st.nope' in filter \"st.nope = 1\""),
        ("id.x = 1", "column 'id' of type long has no field 'x' in filter \"id.x = 1\""),
        ("d = 'abc'", "cannot compare column 'd' of type date with 'abc' in filter \"d = 'abc'\""),
        ("d = 5", "cannot compare column 'd' of type date with 5 in filter \"d = 5\""),
        ("id = 1.5", "cannot compare column 'id' of type long with 1.5 in filter \"id = 1.5\""),
        ("id = 'x'", "cannot compare column 'id' of type long with 'x' in filter \"id = 'x'\""),
        ("id = true", "cannot compare column 'id' of type long with true in filter \"id = true\""),
        ("b8 = 128", "cannot compare column 'b8' of type byte with 128 (out of range) in filter \"b8 = 128\""),
        (
            "dec = 1.234",
            "cannot compare column 'dec' of type decimal(5,2) with 1.234 (more than 2 decimal places)"
            ' in filter "dec = 1.234"',
        ),
        (
            "dec = 1000",
            "cannot compare column 'dec' of type decimal(5,2) with 1000 (out of range) in filter \"dec = 1000\"",
        ),
        ("s = 1", "cannot compare column 's' of type string with 1 in filter \"s = 1\""),
        ("flag = 1", "cannot compare column 'flag' of type boolean with 1 in filter \"flag = 1\""),
        (
            "ts = 'yesterday'",
            "cannot compare column 'ts' of type timestamp with 'yesterday' in filter \"ts = 'yesterday'\"",
        ),
        (
            "ntz = '2021-01-01T00:00:00Z'",
            "cannot compare column 'ntz' of type timestamp_ntz with '2021-01-01T00:00:00Z' (the literal has a time "
            "zone, the column has none) in filter \"ntz = '2021-01-01T00:00:00Z'\"",
        ),
        ("st = 1", "cannot compare column 'st' of type struct with 1 in filter \"st = 1\""),
        ("arr = 1", "cannot compare column 'arr' of type array with 1 in filter \"arr = 1\""),
        ("m > 'a'", "cannot compare column 'm' of type map with 'a' in filter \"m > 'a'\""),
    ],
)
def test_bind_errors_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(InvalidExpression) as info:
        bind(parse_expression(text), SCHEMA)
    assert str(info.value) == message


def test_bind_error_in_a_compound_expression_quotes_the_whole_filter() -> None:
    with pytest.raises(InvalidExpression) as info:
        bind(parse_expression("id = 1 AND (nope IS NULL OR s = 'a')"), SCHEMA)
    assert str(info.value) == "unknown column 'nope' in filter \"id = 1 AND (nope IS NULL OR s = 'a')\""


def test_bind_rejects_a_null_literal_built_by_hand() -> None:
    with pytest.raises(InvalidExpression, match="null can only be tested with IS NULL"):
        bind(C("id", "=", None), SCHEMA)


# ---------------------------------------------------------------------------------------------------------------------
# Row filtering

ROWS = pa.table(
    {
        "x": pa.array([1, 2, None, 4], pa.int64()),
        "s": pa.array(["a", None, "c", "d"]),
        "ts": pa.array(
            [
                dt.datetime(2021, 1, 1, 0, 0, 0, 1000),
                dt.datetime(2021, 1, 1, 0, 0, 0, 1999),
                None,
                dt.datetime(2021, 1, 1, 0, 0, 0, 2000),
            ],
            pa.timestamp("us", "UTC"),
        ),
        "st": pa.array([{"a": 1}, {"a": None}, None, {"a": 4}], pa.struct([("a", pa.int32())])),
        "dec": pa.array([Decimal("1.50"), Decimal("2.00"), None, Decimal("-1.25")], pa.decimal128(5, 2)),
    }
)


@pytest.mark.parametrize(
    ("text", "expected_x"),
    [
        ("x = 2", [2]),
        ("x != 2", [1, 4]),
        ("NOT x = 2", [1, 4]),
        ("x IS NULL", [None]),
        ("x IS NOT NULL", [1, 2, 4]),
        ("x > 1 OR s = 'a'", [1, 2, 4]),
        ("NOT (x > 1 AND s = 'c')", [1, 4]),
        ("NOT (x > 1 OR s = 'z')", [1]),
        ("s < 'c'", [1]),
        ("st.a >= 1", [1, 4]),
        ("st.a IS NULL", [2, None]),
        ("ts > '2021-01-01 00:00:00.001999'", [4]),
        ("ts <= '2021-01-01T00:00:00.001999Z'", [1, 2]),
        ("dec > 1.5", [2]),
        ("dec < 0", [4]),
        ("2 < x", [4]),
    ],
)
def test_to_arrow_filter_has_sql_semantics(text: str, expected_x: list) -> None:
    expr = bind(parse_expression(text), ROWS.schema)
    assert ROWS.filter(to_arrow_filter(expr)).column("x").to_pylist() == expected_x


def test_to_arrow_filter_works_on_a_dataset(tmp_path) -> None:
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    pq.write_table(ROWS, tmp_path / "rows.parquet")
    expr = bind(parse_expression("st.a > 1 OR s = 'a'"), ROWS.schema)
    table = ds.dataset(tmp_path / "rows.parquet").to_table(filter=to_arrow_filter(expr))
    assert table.column("x").to_pylist() == [1, 4]


# ---------------------------------------------------------------------------------------------------------------------
# Partition pruning

PARTITIONS = pa.table(
    {
        "p": pa.array([1, 2, None, 3], pa.int32()),
        "q": pa.array(["a", "b", "c", None]),
        "day": pa.array([dt.date(2021, 1, 1), dt.date(2021, 1, 2), dt.date(2021, 1, 3), None]),
    }
)
PARTITION_SCHEMA = pa.schema(
    [
        ("p", pa.int32()),
        ("q", pa.string()),
        ("day", pa.date32()),
        ("x", pa.int64()),
        ("st", pa.struct([("p", pa.int32())])),
    ]
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("p = 1", [True, False, False, False]),
        ("p != 1", [False, True, False, True]),
        ("NOT p = 1", [False, True, False, True]),
        ("p IS NULL", [False, False, True, False]),
        ("NOT p IS NULL", [True, True, False, True]),
        ("p IS NOT NULL", [True, True, False, True]),
        ("p >= 2 AND q < 'c'", [False, True, False, False]),
        ("p >= 2 OR q IS NULL", [False, True, False, True]),
        ("day > '2021-01-01'", [False, True, True, False]),
        ("1 < p", [False, True, False, True]),
        # x is a data column: unknown, so it can be true or false whatever NOT does to it
        ("x > 1", [True, True, True, True]),
        ("NOT x > 1", [True, True, True, True]),
        ("NOT (x > 1)", [True, True, True, True]),
        ("p = 1 AND x > 1", [True, False, False, False]),
        ("NOT (p = 1 AND x > 1)", [True, True, True, True]),
        ("p = 1 OR x > 1", [True, True, True, True]),
        ("NOT (p = 1 OR x > 1)", [False, True, False, True]),
        ("NOT (p != 1 OR x > 1)", [True, False, False, False]),
        ("NOT NOT p = 2", [False, True, False, False]),
        # a nested path never names a partition column
        ("st.p = 1", [True, True, True, True]),
        ("NOT (q = 'a' AND (x = 1 OR p = 5))", [True, True, True, True]),
        ("NOT (q = 'a' OR (x = 1 AND p = 5))", [False, True, True, False]),
    ],
)
def test_may_match_partitions(text: str, expected: list[bool]) -> None:
    expr = bind(parse_expression(text), PARTITION_SCHEMA)
    result = may_match_partitions(expr, PARTITIONS)
    assert result.type == pa.bool_()
    assert result.null_count == 0
    assert result.to_pylist() == expected


def test_may_match_partitions_with_typed_raw_values_and_odd_inputs() -> None:
    # a literal that cannot be compared with the column is unknown, never a reason to skip
    assert may_match_partitions(C("p", "=", "abc"), PARTITIONS).to_pylist() == [True] * 4
    # a case-insensitive column match still prunes
    assert may_match_partitions(C("P", "=", 3), PARTITIONS).to_pylist() == [False, False, False, True]
    # dictionary-encoded partition columns
    dictionary = pa.table({"q": pa.array(["a", "b", "a"]).dictionary_encode()})
    assert may_match_partitions(C("q", "=", "a"), dictionary).to_pylist() == [True, False, True]
    # no partition columns, but files
    empty = pa.table({"_": [1, 2]}).drop_columns(["_"])
    assert may_match_partitions(C("p", "=", 1), empty).to_pylist() == [True, True]
    assert may_match_partitions(C("p", "=", 1), PARTITIONS.slice(0, 0)).to_pylist() == []
    with pytest.raises(InvalidExpression):
        may_match_partitions(C("p", "=", 1), {"p": [1]})  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------------------------
# Stats skipping

STATS_SCHEMA = pa.schema(
    [
        ("x", pa.int64()),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("ts", pa.timestamp("us", "UTC")),
        ("st", pa.struct([("a", pa.int32())])),
        ("part", pa.int32()),
    ]
)
STATS_DATA_SCHEMA = pa.schema([f for f in STATS_SCHEMA if f.name != "part"])
STATS_JSON = [
    # 0: x 1..10, ts within one millisecond .001, one null s
    '{"numRecords":3,"minValues":{"x":1,"f":0.5,"s":"b","ts":"2021-01-01T00:00:00.001Z","st":{"a":5}},'
    '"maxValues":{"x":10,"f":2.5,"s":"d","ts":"2021-01-01T00:00:00.005Z","st":{"a":7}},'
    '"nullCount":{"x":0,"f":0,"s":1,"ts":0,"st":{"a":0}}}',
    # 1: only x has stats
    '{"numRecords":2,"minValues":{"x":20},"maxValues":{"x":30},"nullCount":{"x":0}}',
    # 2: no stats at all
    None,
    # 3: x all null, no min/max
    '{"numRecords":2,"minValues":{},"maxValues":{},"nullCount":{"x":2,"s":0,"f":0}}',
    # 4: a constant column x = 7, s = "c"
    '{"numRecords":4,"minValues":{"x":7,"s":"c","f":1.0},"maxValues":{"x":7,"s":"c","f":1.0},'
    '"nullCount":{"x":0,"s":0,"f":0}}',
]


@pytest.fixture(scope="module")
def file_stats() -> pa.StructArray:
    return parse_stats(pa.array(STATS_JSON, pa.string()), STATS_DATA_SCHEMA)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x = 5", [True, False, True, False, False]),
        ("x = 7", [True, False, True, False, True]),
        ("x = 10", [True, False, True, False, False]),
        ("x = 11", [False, False, True, False, False]),
        ("x < 1", [False, False, True, False, False]),
        ("x <= 1", [True, False, True, False, False]),
        ("x > 10", [False, True, True, False, False]),
        ("x >= 10", [True, True, True, False, False]),
        ("x != 7", [True, True, True, False, False]),
        ("NOT x = 7", [True, True, True, False, False]),
        ("NOT x < 20", [False, True, True, False, False]),
        ("NOT x >= 20", [True, False, True, False, True]),
        ("x IS NULL", [False, False, True, True, False]),
        ("x IS NOT NULL", [True, True, True, False, True]),
        ("NOT x IS NULL", [True, True, True, False, True]),
        ("s IS NULL", [True, True, True, False, False]),
        # file 3 counts no null s but has no bounds: unknown
        ("s = 'c'", [True, True, True, True, True]),
        ("s > 'c'", [True, True, True, True, False]),
        ("s != 'c'", [True, True, True, True, False]),
        # floats never skip on != (NaN is not in min/max for some writers and NaN != v is true)
        ("f != 1.0", [True, True, True, True, True]),
        ("f > 2.5", [False, True, True, True, False]),
        # NOT (NaN > 2.5) is true and NaN is not in min/max, so negated float comparisons never skip
        ("NOT f > 2.5", [True, True, True, True, True]),
        ("NOT (f <= 2.5 OR x = 1)", [True, True, True, False, True]),
        ("st.a = 6", [True, True, True, True, True]),
        ("st.a > 7", [False, True, True, True, True]),
        # part is a partition column: not in the stats, so unknown
        ("part = 1", [True, True, True, True, True]),
        ("NOT part = 1", [True, True, True, True, True]),
        ("x > 10 OR s = 'z'", [False, True, True, True, False]),
        ("x > 10 AND s = 'z'", [False, True, True, False, False]),
        ("NOT (x <= 10 AND s >= 'c')", [True, True, True, True, False]),
        ("NOT (x <= 10 OR part = 1)", [False, True, True, False, False]),
        ("NOT (x > 5 AND x < 8)", [True, True, True, False, False]),
        ("NOT NOT x = 25", [False, True, True, False, False]),
    ],
)
def test_may_match_stats(file_stats: pa.StructArray, text: str, expected: list[bool]) -> None:
    expr = bind(parse_expression(text), STATS_SCHEMA)
    result = may_match_stats(expr, file_stats, len(STATS_JSON))
    assert result.type == pa.bool_()
    assert result.null_count == 0
    assert result.to_pylist() == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # min .001 and max .005 are truncated to milliseconds: the true max may be up to .005999
        ("ts = '2021-01-01 00:00:00.005999'", True),
        ("ts = '2021-01-01 00:00:00.006'", False),
        ("ts >= '2021-01-01 00:00:00.005999'", True),
        ("ts > '2021-01-01 00:00:00.005998'", True),
        ("ts > '2021-01-01 00:00:00.005999'", False),
        ("ts < '2021-01-01 00:00:00.001'", False),
        ("ts <= '2021-01-01 00:00:00.001'", True),
        ("ts = '2021-01-01 00:00:00.000999'", False),
        ("ts != '2021-01-01 00:00:00.001'", True),
        ("NOT ts <= '2021-01-01 00:00:00.005500'", True),
        ("NOT ts < '2021-01-01 00:00:00.006'", False),
    ],
)
def test_may_match_stats_widens_timestamp_max_by_a_millisecond(
    file_stats: pa.StructArray, text: str, expected: bool
) -> None:
    expr = bind(parse_expression(text), STATS_SCHEMA)
    assert may_match_stats(expr, file_stats, len(STATS_JSON)).to_pylist()[0] is expected


def test_may_match_stats_on_a_constant_timestamp_never_skips_not_equal() -> None:
    stats = parse_stats(
        pa.array(
            [
                '{"numRecords":2,"minValues":{"ts":"2021-01-01T00:00:00.001Z"},"maxValues":'
                '{"ts":"2021-01-01T00:00:00.001Z"},"nullCount":{"ts":0}}'
            ]
        ),
        pa.schema([("ts", pa.timestamp("us", "UTC"))]),
    )
    schema = pa.schema([("ts", pa.timestamp("us", "UTC"))])
    # the real values lie anywhere in [.001000, .001999], so a value different from .001 may be there
    assert may_match_stats(bind(parse_expression("ts != '2021-01-01 00:00:00.001'"), schema), stats, 1).to_pylist() == [
        True
    ]


def test_may_match_stats_accepts_hand_built_tables_and_missing_stats() -> None:
    stats = pa.table(
        {
            "numRecords": pa.array([5, 5, None], pa.int64()),
            "minValues": pa.array([{"x": 1}, {"x": None}, None], pa.struct([("x", pa.int64())])),
            "maxValues": pa.array([{"x": 3}, {"x": 9}, None], pa.struct([("x", pa.int64())])),
            "nullCount": pa.array([{"x": 0}, {"x": 5}, None], pa.struct([("x", pa.int64())])),
        }
    )
    expr = C("x", ">", 2)
    # file 1: min unknown but max known; every value null anyway
    assert may_match_stats(expr, stats, 3).to_pylist() == [True, False, True]
    assert may_match_stats(C("x", "<", 1), stats, 3).to_pylist() == [False, False, True]
    assert may_match_stats(C("y", "<", 1), stats, 3).to_pylist() == [True, True, True]
    assert may_match_stats(expr, None, 2).to_pylist() == [True, True]
    with pytest.raises(DeltaLiteError, match="hold 3 rows but there are 4 files"):
        may_match_stats(expr, stats, 4)


def test_may_match_stats_tolerates_a_literal_of_another_type(file_stats: pa.StructArray) -> None:
    # an unbound literal that cannot be compared with the stats type is unknown, never a reason to skip
    assert may_match_stats(C("x", "=", "abc"), file_stats, 5).to_pylist() == [True, True, True, False, True]


# ---------------------------------------------------------------------------------------------------------------------
# Randomised check: skipping never drops a file that holds a matching row

RANDOM_SCHEMA = pa.schema(
    [
        ("i", pa.int32()),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("ts", pa.timestamp("us", "UTC")),
        ("st", pa.struct([("a", pa.int64())])),
        ("p", pa.int32()),
    ]
)
RANDOM_LITERALS = {
    "i": ["-2", "0", "1", "3", "7"],
    "f": ["-1.5", "0", "0.5", "2.25"],
    "s": ["''", "'a'", "'ab'", "'b'", "'zz'"],
    "ts": ["'2021-01-01 00:00:00.001'", "'2021-01-01 00:00:00.001500'", "'2021-01-01 00:00:00.002999'"],
    "st.a": ["0", "2", "5"],
    "p": ["0", "1", "2"],
}


def _random_predicate(rng, depth: int = 0) -> str:
    roll = rng.random()
    if depth > 3 or roll < 0.45:
        column = rng.choice(list(RANDOM_LITERALS))
        if rng.random() < 0.2:
            return f"{column} IS {'NOT ' if rng.random() < 0.5 else ''}NULL"
        op = rng.choice(["=", "!=", "<", "<=", ">", ">="])
        return f"{column} {op} {rng.choice(RANDOM_LITERALS[column])}"
    if roll < 0.6:
        return f"NOT ({_random_predicate(rng, depth + 1)})"
    joiner = rng.choice(["AND", "OR"])
    return f"({_random_predicate(rng, depth + 1)} {joiner} {_random_predicate(rng, depth + 1)})"


def _random_file(rng, n: int) -> pa.Table:
    base = dt.datetime(2021, 1, 1, tzinfo=UTC)

    def maybe(value: object) -> object:
        return None if rng.random() < 0.2 else value

    return pa.table(
        {
            "i": pa.array([maybe(rng.randint(-3, 8)) for _ in range(n)], pa.int32()),
            "f": pa.array(
                [maybe(rng.choice([-1.5, 0.0, 0.5, 2.25, 3.0, float("nan")])) for _ in range(n)], pa.float64()
            ),
            "s": pa.array([maybe(rng.choice(["", "a", "ab", "b", "c"])) for _ in range(n)], pa.string()),
            "ts": pa.array(
                [maybe(base + dt.timedelta(microseconds=rng.choice([1000, 1500, 1999, 2000, 2999]))) for _ in range(n)],
                pa.timestamp("us", "UTC"),
            ),
            "st": pa.array([maybe({"a": maybe(rng.randint(0, 6))}) for _ in range(n)], pa.struct([("a", pa.int64())])),
        }
    )


def _stats_json(data: pa.Table) -> str:
    """Stats the way a Spark-like writer records them: NaN left out of min/max, timestamps cut to milliseconds."""
    mins: dict = {}
    maxs: dict = {}
    nulls: dict = {}
    for name in ("i", "f", "s", "ts"):
        values = data.column(name).combine_chunks()
        nulls[name] = values.null_count
        if pa.types.is_floating(values.type):
            values = values.filter(pc.invert(pc.is_nan(values)))
        if pa.types.is_timestamp(values.type):
            values = pc.floor_temporal(values, unit="millisecond")
        low, high = pc.min_max(values).values()
        if low.is_valid:
            as_json = (lambda v: v.isoformat(timespec="milliseconds")) if name == "ts" else (lambda v: v)
            mins[name], maxs[name] = as_json(low.as_py()), as_json(high.as_py())
    child = data.column("st").combine_chunks().flatten()[0]
    nulls["st"] = {"a": child.null_count}
    low, high = pc.min_max(child).values()
    if low.is_valid:
        mins["st"], maxs["st"] = {"a": low.as_py()}, {"a": high.as_py()}
    return json.dumps({"numRecords": data.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls})


def test_randomised_skipping_is_conservative() -> None:
    import random

    rng = random.Random(20240611)
    files = [_random_file(rng, rng.randint(0, 6)) for _ in range(40)]
    partitions = pa.table({"p": pa.array([rng.choice([0, 1, 2, None]) for _ in files], pa.int32())})
    stats = parse_stats(pa.array([_stats_json(f) for f in files]), pa.schema(list(RANDOM_SCHEMA)[:-1]))
    file_index = [k for k, data in enumerate(files) for _ in range(data.num_rows)]
    all_rows = pa.concat_tables(files)
    all_rows = all_rows.append_column("p", partitions.column("p").take(pa.array(file_index, pa.int64())))
    all_rows = all_rows.append_column("file", pa.array(file_index, pa.int64()))
    skipped = 0
    for _ in range(250):
        text = _random_predicate(rng)
        expr = bind(parse_expression(text), RANDOM_SCHEMA)
        holding = set(all_rows.filter(to_arrow_filter(expr)).column("file").to_pylist())
        by_stats = may_match_stats(expr, stats, len(files)).to_pylist()
        by_partition = may_match_partitions(expr, partitions).to_pylist()
        for k in holding:
            assert by_stats[k], f"stats skipped file {k} for {text}"
            assert by_partition[k], f"partitions skipped file {k} for {text}"
        skipped += by_stats.count(False)
    assert skipped > 2000  # the check has teeth: plenty of files are skipped
