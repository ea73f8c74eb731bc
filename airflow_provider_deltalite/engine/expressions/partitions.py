"""Partition pruning: which files' partition values can satisfy an expression."""

from __future__ import annotations

import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.errors import InvalidExpression
from airflow_provider_deltalite.engine.expressions.arrow import COMPARE, as_array, compare_with_literal, constant_mask
from airflow_provider_deltalite.engine.expressions.nodes import And, Comparison, Expr, IsNull, Not, Or, column_path


def _lookup_column(names: list[str], name: str) -> int | None:
    if name in names:
        return names.index(name) if names.count(name) == 1 else None
    folded = [i for i, n in enumerate(names) if n.casefold() == name.casefold()]
    return folded[0] if len(folded) == 1 else None


def may_match_partitions(expr: Expr, partitions: pa.Table) -> pa.BooleanArray:
    """Decide per file whether its partition values can satisfy an expression.

    Comparisons on columns missing from `partitions` (data columns, nested paths) are unknown and may be true or false,
    so `NOT` of them stays possible. A null partition value makes a comparison null (never true), as in SQL.

    Args:
        expr: a bound expression.
        partitions: one row per file, one typed column per partition column.

    Returns:
        A boolean array without nulls, True where the file may hold matching rows.

    Raises:
        InvalidExpression: `expr` is not an expression.
    """
    if isinstance(partitions, pa.RecordBatch):
        partitions = pa.Table.from_batches([partitions])
    if not isinstance(partitions, pa.Table):
        raise InvalidExpression(f"partitions must be a pyarrow Table, not {type(partitions).__name__}")
    n = partitions.num_rows
    may_true, _ = _partition_eval(expr, partitions, n)
    return may_true


def _partition_eval(expr: Expr, table: pa.Table, n: int) -> tuple[pa.BooleanArray, pa.BooleanArray]:
    """Return (may be true, may be false) per file; both are over-approximations, so NOT just swaps them."""
    if isinstance(expr, Not):
        may_true, may_false = _partition_eval(expr.child, table, n)
        return may_false, may_true
    if isinstance(expr, And):
        lt, lf = _partition_eval(expr.left, table, n)
        rt, rf = _partition_eval(expr.right, table, n)
        return pc.and_(lt, rt), pc.or_(lf, rf)
    if isinstance(expr, Or):
        lt, lf = _partition_eval(expr.left, table, n)
        rt, rf = _partition_eval(expr.right, table, n)
        return pc.or_(lt, rt), pc.and_(lf, rf)
    if not isinstance(expr, (Comparison, IsNull)):
        raise InvalidExpression(f"not an expression node: {type(expr).__name__}")
    unknown = constant_mask(True, n)
    path = column_path(expr.column)
    idx = _lookup_column(table.column_names, path[0]) if len(path) == 1 else None
    if idx is None:
        return unknown, unknown
    values = as_array(table.column(idx))
    if isinstance(expr, IsNull):
        is_null = pc.is_null(values)
        if expr.negated:
            is_null = pc.invert(is_null)
        return is_null, pc.invert(is_null)
    if expr.op not in COMPARE:
        return unknown, unknown
    result = compare_with_literal(values, expr.op, expr.value)
    if result is None:
        return unknown, unknown
    # a null comparison (null partition value) is neither true nor false
    return pc.fill_null(result, False), pc.fill_null(pc.invert(result), False)
