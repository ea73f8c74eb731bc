"""Evaluating bound expressions with Arrow: row filters and literal comparisons over arrays."""

from __future__ import annotations

import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.errors import InvalidExpression
from airflow_provider_deltalite.engine.expressions.literals import LiteralMismatch, coerce_literal
from airflow_provider_deltalite.engine.expressions.nodes import (
    And,
    Comparison,
    Expr,
    IsNull,
    Not,
    Or,
    column_path,
    sql_literal,
    to_sql,
)


def arrow_scalar(value: object) -> pa.Scalar:
    """An Arrow scalar for a bound literal; InvalidExpression when Arrow has no equivalent."""
    try:
        return pa.scalar(value)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        raise InvalidExpression(f"literal {sql_literal(value)} has no Arrow equivalent ({exc})") from None


def to_arrow_filter(expr: Expr) -> pc.Expression:
    """Turn a bound expression into a pyarrow compute expression for row filtering.

    Rows where the predicate is null (a comparison with a null value) are dropped by pyarrow filters, which gives SQL
    semantics; `NOT`, `AND` and `OR` use Kleene logic.

    Args:
        expr: an expression returned by `bind`.

    Returns:
        The expression, usable with `Table.filter` or `pyarrow.dataset` scans.

    Raises:
        InvalidExpression: a literal has no Arrow equivalent or an operator is unknown.
    """
    if isinstance(expr, And):
        return to_arrow_filter(expr.left) & to_arrow_filter(expr.right)
    if isinstance(expr, Or):
        return to_arrow_filter(expr.left) | to_arrow_filter(expr.right)
    if isinstance(expr, Not):
        return ~to_arrow_filter(expr.child)
    if isinstance(expr, IsNull):
        field = pc.field(*column_path(expr.column))
        return field.is_valid() if expr.negated else field.is_null()
    if isinstance(expr, Comparison):
        field = pc.field(*column_path(expr.column))
        value = arrow_scalar(expr.value)
        if expr.op == "=":
            return field == value
        if expr.op == "!=":
            return field != value
        if expr.op == "<":
            return field < value
        if expr.op == "<=":
            return field <= value
        if expr.op == ">":
            return field > value
        if expr.op == ">=":
            return field >= value
        raise InvalidExpression(f"unknown operator '{expr.op}' in filter \"{to_sql(expr)}\"")
    raise InvalidExpression(f"not an expression node: {type(expr).__name__}")


COMPARE = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


def compare_with_literal(values: pa.Array, op: str, literal: object) -> pa.BooleanArray | None:
    """Compare an array with a literal converted to the array's type; None when that is not possible."""
    try:
        if pa.types.is_dictionary(values.type):
            values = pc.cast(values, values.type.value_type)
        converted = coerce_literal(literal, values.type)
        return COMPARE[op](values, arrow_scalar(converted))
    except (LiteralMismatch, InvalidExpression, KeyError, pa.ArrowException, TypeError, ValueError, OverflowError):
        return None


def as_array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One contiguous array (chunked columns are combined)."""
    if isinstance(values, pa.ChunkedArray):
        if values.num_chunks == 0:
            return pa.array([], type=values.type)
        return values.combine_chunks()
    return values


def constant_mask(value: bool, n: int) -> pa.BooleanArray:
    """A boolean array of `n` copies of `value` (the per-file answer when nothing is known)."""
    return pa.repeat(pa.scalar(value, pa.bool_()), n) if n else pa.array([], pa.bool_())
