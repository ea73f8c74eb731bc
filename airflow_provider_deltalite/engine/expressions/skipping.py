"""Data skipping: which files' min/max/null-count statistics allow a row that satisfies an expression."""

from __future__ import annotations

import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.errors import DeltaLiteError, InvalidExpression
from airflow_provider_deltalite.engine.expressions.arrow import as_array, compare_with_literal, constant_mask
from airflow_provider_deltalite.engine.expressions.nodes import (
    And,
    Comparison,
    Expr,
    IsNull,
    Not,
    Or,
    column_path,
    to_sql,
)

_NEGATED = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


def _negation_normal_form(expr: Expr, negate: bool = False) -> Expr:
    """Push NOT down to the leaves, leaving `Not` only directly above a comparison.

    Under Kleene logic `NOT (x < v)` is true exactly when `x >= v` is, except for NaN, where both comparisons are
    false and the negation is true; keeping the `Not` lets the float check see it.
    """
    if isinstance(expr, Not):
        return _negation_normal_form(expr.child, not negate)
    if isinstance(expr, And):
        left, right = _negation_normal_form(expr.left, negate), _negation_normal_form(expr.right, negate)
        return Or(left, right) if negate else And(left, right)
    if isinstance(expr, Or):
        left, right = _negation_normal_form(expr.left, negate), _negation_normal_form(expr.right, negate)
        return And(left, right) if negate else Or(left, right)
    if isinstance(expr, IsNull):
        return IsNull(expr.column, expr.negated != negate)
    if isinstance(expr, Comparison):
        if expr.op not in _NEGATED:
            raise InvalidExpression(f"unknown operator '{expr.op}' in filter \"{to_sql(expr)}\"")
        return Not(expr) if negate else expr
    raise InvalidExpression(f"not an expression node: {type(expr).__name__}")


def _struct_child(values: pa.Array | None, name: str) -> pa.Array | None:
    """Field `name` of a struct array with the parent's nulls applied; None if absent."""
    if values is None or not pa.types.is_struct(values.type):
        return None
    idx = values.type.get_field_index(name)
    if idx < 0:
        return None
    return pc.struct_field(values, [idx])


def _stats_path(stats: pa.StructArray, section: str, path: tuple[str, ...]) -> pa.Array | None:
    values = _struct_child(stats, section)
    for seg in path:
        values = _struct_child(values, seg)
    return values


def _widen_timestamp_max(max_values: pa.Array) -> pa.Array | None:
    """Stats hold timestamps truncated to milliseconds, so the true max can be up to 999 microseconds larger."""
    unit = max_values.type.unit
    pad = {"us": 999, "ns": 999_999}.get(unit)
    if pad is None:
        return max_values  # second/millisecond columns lose nothing to the truncation
    try:
        return pc.add_checked(max_values, pa.scalar(pad, pa.duration(unit)))
    except pa.ArrowException:
        return None


def may_match_stats(expr: Expr, stats: pa.StructArray | pa.Table | None, num_files: int) -> pa.BooleanArray:
    """Decide per file whether its min/max/null-count statistics allow a row that satisfies an expression.

    The expression is first put in negation normal form (De Morgan, flipped operators), then each leaf is checked:
    `=` needs min <= v <= max, `<`/`<=` look at min, `>`/`>=` at max, `!=` fails only when min = max = v, `IS NULL`
    needs nullCount > 0 and `IS NOT NULL` needs nullCount < numRecords. A comparison also fails when every value is
    null. Missing statistics (null row, null value, column not collected) always give True, so a file is skipped
    only when it cannot match. Timestamp maxima are widened by 999 microseconds for the millisecond truncation.
    On float columns `!=` and negated comparisons never skip: NaN satisfies them and min/max do not record NaN.
    Wide bounds (`tightBounds` false) need no special case: they still bound the rows, and null counts are physical.

    Args:
        expr: a bound expression (logical column names).
        stats: the result of `parse_stats` (or a table with the same columns); None means no statistics.
        num_files: the number of files; must equal the length of `stats`.

    Returns:
        A boolean array without nulls, True where the file may hold matching rows.

    Raises:
        DeltaLiteError: `stats` does not hold `num_files` rows.
        InvalidExpression: `expr` is not an expression.
    """
    if stats is None:
        return constant_mask(True, num_files)
    if isinstance(stats, pa.RecordBatch):
        stats = pa.Table.from_batches([stats])
    if isinstance(stats, pa.Table):
        stats = as_array(stats.to_struct_array())
    elif isinstance(stats, pa.ChunkedArray):
        stats = as_array(stats)
    if not isinstance(stats, pa.StructArray):
        raise DeltaLiteError(f"file statistics must be a struct array, not {type(stats).__name__}")
    if len(stats) != num_files:
        raise DeltaLiteError(f"file statistics hold {len(stats)} rows but there are {num_files} files")
    return _stats_eval(_negation_normal_form(expr), stats, num_files)


def _stats_eval(expr: Expr, stats: pa.StructArray, n: int) -> pa.BooleanArray:
    if isinstance(expr, And):
        return pc.and_(_stats_eval(expr.left, stats, n), _stats_eval(expr.right, stats, n))
    if isinstance(expr, Or):
        return pc.or_(_stats_eval(expr.left, stats, n), _stats_eval(expr.right, stats, n))
    if isinstance(expr, IsNull):
        return _stats_is_null(expr, stats, n)
    if isinstance(expr, Comparison):
        return _stats_compare(expr, stats, n)
    if isinstance(expr, Not) and isinstance(expr.child, Comparison):
        child = expr.child
        return _stats_compare(Comparison(child.column, _NEGATED[child.op], child.value), stats, n, negated=True)
    raise InvalidExpression(f"not an expression node: {type(expr).__name__}")


def _int_counts(values: pa.Array | None) -> pa.Array | None:
    if values is None or not pa.types.is_integer(values.type):
        return None
    return values


def _stats_is_null(expr: IsNull, stats: pa.StructArray, n: int) -> pa.BooleanArray:
    null_count = _int_counts(_stats_path(stats, "nullCount", column_path(expr.column)))
    if null_count is None:
        return constant_mask(True, n)
    if not expr.negated:
        return pc.fill_null(pc.greater(null_count, 0), True)
    num_records = _int_counts(_struct_child(stats, "numRecords"))
    if num_records is None:
        return constant_mask(True, n)
    return pc.fill_null(pc.less(null_count, num_records), True)


def _stats_compare(expr: Comparison, stats: pa.StructArray, n: int, negated: bool = False) -> pa.BooleanArray:
    path = column_path(expr.column)
    mins = _stats_path(stats, "minValues", path)
    maxs = _stats_path(stats, "maxValues", path)
    floating = any(v is not None and pa.types.is_floating(v.type) for v in (mins, maxs))
    if floating and (negated or expr.op == "!="):
        # NaN makes `!=` and every negated comparison true, and min/max say nothing about NaN
        return _all_true_unless_all_null(stats, path, n)
    if maxs is not None and pa.types.is_timestamp(maxs.type):
        maxs = _widen_timestamp_max(maxs)
    op = expr.op

    def bound(values: pa.Array | None, cmp: str) -> pa.BooleanArray:
        # unknown bound or a literal that cannot be compared: the file may match
        if values is None:
            return constant_mask(True, n)
        result = compare_with_literal(values, cmp, expr.value)
        return constant_mask(True, n) if result is None else pc.fill_null(result, True)

    if op == "=":
        result = pc.and_(bound(mins, "<="), bound(maxs, ">="))
    elif op in ("<", "<="):
        result = bound(mins, op)
    elif op in (">", ">="):
        result = bound(maxs, op)
    elif op == "!=":
        if mins is None or maxs is None:
            result = constant_mask(True, n)
        else:
            eq_min, eq_max = compare_with_literal(mins, "=", expr.value), compare_with_literal(maxs, "=", expr.value)
            if eq_min is None or eq_max is None:
                result = constant_mask(True, n)
            else:
                all_equal = pc.and_(pc.fill_null(eq_min, False), pc.fill_null(eq_max, False))
                result = pc.invert(all_equal)
    else:
        raise InvalidExpression(f"unknown operator '{op}' in filter \"{to_sql(expr)}\"")

    return pc.and_(result, _all_true_unless_all_null(stats, path, n))


def _all_true_unless_all_null(stats: pa.StructArray, path: tuple[str, ...], n: int) -> pa.BooleanArray:
    """False for files whose values of `path` are all null: no comparison (negated or not) is true on null."""
    null_count = _int_counts(_stats_path(stats, "nullCount", path))
    num_records = _int_counts(_struct_child(stats, "numRecords"))
    if null_count is None or num_records is None:
        return constant_mask(True, n)
    return pc.invert(pc.fill_null(pc.equal(null_count, num_records), False))
