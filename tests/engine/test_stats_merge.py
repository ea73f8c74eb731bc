"""Delta statistics merged from the inputs' statistics equal those collected over all the rows at once, and refuse
what cannot be merged exactly."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import pyarrow as pa

from airflow_provider_deltalite.engine.stats_collect import StatsCollector
from airflow_provider_deltalite.engine.stats_merge import load_stats, merge_stats
from airflow_provider_deltalite.engine.stats_values import dump_json_exact

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "i", "type": "long", "nullable": True, "metadata": {}},
        {"name": "f", "type": "double", "nullable": True, "metadata": {}},
        {"name": "s", "type": "string", "nullable": True, "metadata": {}},
        {"name": "d", "type": "date", "nullable": True, "metadata": {}},
        {"name": "t", "type": "timestamp", "nullable": True, "metadata": {}},
        {"name": "dec", "type": "decimal(20,4)", "nullable": True, "metadata": {}},
        {"name": "b", "type": "boolean", "nullable": True, "metadata": {}},
        {
            "name": "st",
            "type": {"type": "struct", "fields": [{"name": "x", "type": "integer", "nullable": True, "metadata": {}}]},
            "nullable": True,
            "metadata": {},
        },
        {"name": "empty", "type": "long", "nullable": True, "metadata": {}},
    ],
}
ARROW = pa.schema(
    [
        ("i", pa.int64()),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("t", pa.timestamp("us", tz="UTC")),
        ("dec", pa.decimal128(20, 4)),
        ("b", pa.bool_()),
        ("st", pa.struct([("x", pa.int32())])),
        ("empty", pa.int64()),
    ]
)


def _collector(prefix: int = 5) -> StatsCollector:
    config = {"delta.dataSkippingStringPrefixLength": str(prefix)}
    return StatsCollector(SCHEMA, column_mapping_mode="none", partition_columns=[], configuration=config)


def _rows(k: int, n: int) -> pa.Table:
    ids = range(k * n, (k + 1) * n)
    return pa.table(
        {
            "i": [None if j % 5 == 0 else j * (-1) ** j for j in ids],
            "f": [math.nan if j == 7 else j / 3 for j in ids],
            "s": [f"{'zé' * (j % 4)}long-string-{j}" if j % 3 else None for j in ids],
            "d": [j * 50 for j in ids],
            "t": [1_600_000_000_000_000 + j * 1_234 for j in ids],
            "dec": [Decimal(j * 37) / 100 if j % 2 else None for j in ids],
            "b": [j % 2 == 0 for j in ids],
            "st": [None if j % 4 == 0 else {"x": j if j % 3 else None} for j in ids],
            "empty": [None] * n,
        },
        schema=ARROW,
    )


def _stats_of(tables: list[pa.Table], prefix: int = 5) -> dict[str, Any]:
    collector = _collector(prefix)
    for t in tables:
        collector.update(t)
    return load_stats(collector.to_json()) or {}


def test_merged_statistics_equal_those_of_all_rows_together() -> None:
    parts = [_rows(k, 40) for k in range(4)]
    inputs = [_stats_of([p]) for p in parts]
    merged = merge_stats(_collector(), inputs)
    assert merged is not None
    assert dump_json_exact(merged) == dump_json_exact(_stats_of(parts))
    assert merged["numRecords"] == 160
    assert merged["nullCount"]["empty"] == 160 and "empty" not in merged["minValues"]
    assert merged["maxValues"]["f"] == "NaN"  # NaN in one input: Spark orders it above every number
    assert len(merged["minValues"]["s"]) == 5  # a truncated string min


def test_merging_keeps_truncated_string_bounds_valid() -> None:
    parts = [pa.table({"s": [f"{c * 40}{k}" for k in range(3)]}) for c in ("b", "a", "c")]
    schema = {"type": "struct", "fields": [{"name": "s", "type": "string", "nullable": True, "metadata": {}}]}
    config = {"delta.dataSkippingStringPrefixLength": "4"}

    def stats(tables: list[pa.Table]) -> dict[str, Any]:
        c = StatsCollector(schema, column_mapping_mode="none", partition_columns=[], configuration=config)
        for t in tables:
            c.update(t)
        return json.loads(c.to_json())

    shape = StatsCollector(schema, column_mapping_mode="none", partition_columns=[], configuration=config)
    merged = merge_stats(shape, [stats([p]) for p in parts])
    assert merged is not None
    values = [v for p in parts for v in p.column("s").to_pylist()]
    assert merged["minValues"]["s"] <= min(values) and merged["maxValues"]["s"] >= max(values)
    assert merged == stats(parts)


def test_what_cannot_be_merged_exactly_is_refused() -> None:
    good = _stats_of([_rows(0, 10)])
    no_counts = {k: v for k, v in good.items() if k != "nullCount"}
    wide = {**good, "tightBounds": False}
    no_records = {k: v for k, v in good.items() if k != "numRecords"}
    missing_min = json.loads(json.dumps({**good, "minValues": {**good["minValues"]}}, default=str))
    missing_min["minValues"].pop("i")
    for bad in (no_counts, wide, no_records, missing_min):
        assert merge_stats(_collector(), [good, bad]) is None
    assert merge_stats(_collector(), []) is None
