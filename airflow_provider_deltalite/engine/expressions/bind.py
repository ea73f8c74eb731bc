"""Binding: resolving an expression's columns against a schema and typing its literals."""

from __future__ import annotations

import pyarrow as pa

from airflow_provider_deltalite.engine.errors import InvalidExpression
from airflow_provider_deltalite.engine.expressions.literals import (
    LiteralMismatch,
    coerce_literal,
    mismatch_message,
    type_name,
)
from airflow_provider_deltalite.engine.expressions.nodes import (
    COMPARISON_OPS,
    And,
    Comparison,
    Expr,
    IsNull,
    Not,
    Or,
    column_path,
    format_column,
    to_sql,
)


def _find_field(fields: list[pa.Field], name: str) -> pa.Field | str | None:
    """Return the field named `name` (exact, else the unique case-insensitive match), None, or "ambiguous"."""
    exact = [f for f in fields if f.name == name]
    if len(exact) == 1:
        return exact[0]
    if len(exact) > 1:
        return "ambiguous"
    folded = [f for f in fields if f.name.casefold() == name.casefold()]
    if len(folded) == 1:
        return folded[0]
    return "ambiguous" if folded else None


def _resolve(path: tuple[str, ...], schema: pa.Schema, expr_text: str) -> tuple[tuple[str, ...], pa.DataType]:
    fields = list(schema)
    first = _find_field(fields, path[0])
    if first is None and len(path) > 1:
        # a bare dotted name may be a top-level column whose name holds dots
        whole = _find_field(fields, ".".join(path))
        if isinstance(whole, pa.Field):
            return (whole.name,), whole.type
    if first == "ambiguous":
        raise InvalidExpression(f"ambiguous column '{path[0]}' (differs only in case) in filter \"{expr_text}\"")
    if first is None:
        raise InvalidExpression(f"unknown column '{format_column(path)}' in filter \"{expr_text}\"")
    assert isinstance(first, pa.Field)
    resolved, current = [first.name], first
    for seg in path[1:]:
        if not pa.types.is_struct(current.type):
            raise InvalidExpression(
                f"column '{format_column(resolved)}' of type {type_name(current.type)} has no field '{seg}'"
                f' in filter "{expr_text}"'
            )
        child = _find_field(list(current.type), seg)
        if child == "ambiguous":
            raise InvalidExpression(
                f"ambiguous field '{seg}' of column '{format_column(resolved)}' in filter \"{expr_text}\""
            )
        if child is None:
            raise InvalidExpression(f"unknown column '{format_column(path)}' in filter \"{expr_text}\"")
        assert isinstance(child, pa.Field)
        resolved.append(child.name)
        current = child
    return tuple(resolved), current.type


def bind(expr: Expr, schema: pa.Schema) -> Expr:
    """Check an expression against a schema and convert its literals to the column types.

    Column names match case-sensitively first, then by a unique case-insensitive match (the result uses the schema's
    spelling). Literal conversions: integers (range-checked), floats, `Decimal` (must fit precision and scale), strings,
    booleans (also `'true'`/`'false'`), dates from `'yyyy-mm-dd'`, timestamps from `'yyyy-mm-dd[ hh:mm:ss[.ffffff]]'`
    or ISO 8601 (aware in the column's zone, UTC for Delta tables; a naive literal is read as UTC), naive datetimes
    for timestamp_ntz, and bytes from strings for binary. Numeric strings are accepted for numeric columns.

    Args:
        expr: a parsed expression.
        schema: the table's logical Arrow schema (partition columns included).

    Returns:
        An equal-shaped expression with resolved column names and typed values.

    Raises:
        InvalidExpression: an unknown or ambiguous column, a literal that does not fit its column, or a comparison on a
            struct, array or map column.
    """
    if not isinstance(schema, pa.Schema):
        raise InvalidExpression(f"bind needs a pyarrow Schema, not {type(schema).__name__}")
    text = to_sql(expr)
    return _bind(expr, schema, text)


def _bind(expr: Expr, schema: pa.Schema, text: str) -> Expr:
    if isinstance(expr, And):
        return And(_bind(expr.left, schema, text), _bind(expr.right, schema, text))
    if isinstance(expr, Or):
        return Or(_bind(expr.left, schema, text), _bind(expr.right, schema, text))
    if isinstance(expr, Not):
        return Not(_bind(expr.child, schema, text))
    if isinstance(expr, IsNull):
        path, _ = _resolve(column_path(expr.column), schema, text)
        return IsNull(format_column(path), expr.negated)
    if isinstance(expr, Comparison):
        if expr.op not in COMPARISON_OPS:
            raise InvalidExpression(f"unknown operator '{expr.op}' in filter \"{text}\"")
        path, arrow_type = _resolve(column_path(expr.column), schema, text)
        try:
            value = coerce_literal(expr.value, arrow_type)
        except LiteralMismatch as exc:
            message = mismatch_message(format_column(path), arrow_type, expr.value, exc.reason)
            raise InvalidExpression(f'{message} in filter "{text}"') from None
        return Comparison(format_column(path), expr.op, value)
    raise InvalidExpression(f"not an expression node: {type(expr).__name__}")
