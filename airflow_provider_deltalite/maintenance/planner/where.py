"""Partition values as a predicate the expression parser reads back: the ``where`` of a planned partition action.

Values are written as the log holds them (strings, keyed by physical name under column mapping); the predicate names
the logical columns and quotes each value as a string literal, which binding converts to the column's type (numbers,
dates, timestamps, booleans, decimals). A null (or empty) value becomes ``IS NULL``, as the protocol serialises null
partition values.

Example:
    >>> partitions_predicate([{"date": "2026-11-01", "kind": None}], {})
    "date = '2026-11-01' AND kind IS NULL"
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from airflow_provider_deltalite.engine.expressions import And, Comparison, Expr, IsNull, Or, format_column, to_sql

# Partitions one predicate names at most: it is an OR per partition, and the expression code walks it recursively,
# so a few thousand partitions would exhaust Python's stack.
MAX_PARTITIONS_PER_PREDICATE = 100


def logical_names(partition_columns: Sequence[str], physical_names: Sequence[str]) -> dict[str, str]:
    """Physical partition column name -> logical name (identical without column mapping)."""
    return dict(zip(physical_names, partition_columns, strict=True))


def partition_expression(values: Mapping[str, str | None], logical: Mapping[str, str]) -> Expr | None:
    """``col = 'value' AND ...`` for one partition (None for the one partition of an unpartitioned table)."""
    expr: Expr | None = None
    for physical in sorted(values, key=lambda k: logical.get(k, k)):
        column = format_column((logical.get(physical, physical),))
        value = values[physical]
        term: Expr = IsNull(column, False) if value is None or value == "" else Comparison(column, "=", value)
        expr = term if expr is None else And(expr, term)
    return expr


def partitions_predicate(partitions: Sequence[Mapping[str, str | None]], logical: Mapping[str, str]) -> str | None:
    """The predicate selecting exactly ``partitions`` (their expressions OR-ed), or None for an unpartitioned table."""
    expr: Expr | None = None
    for values in partitions:
        term = partition_expression(values, logical)
        if term is None:
            return None
        expr = term if expr is None else Or(expr, term)
    return to_sql(expr) if expr is not None else None
