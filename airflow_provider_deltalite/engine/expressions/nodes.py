"""Expression nodes (comparisons, IS NULL, AND/OR/NOT), column paths and the SQL printer."""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal

from airflow_provider_deltalite.engine.errors import InvalidExpression

COMPARISON_OPS = ("=", "!=", "<", "<=", ">", ">=")
KEYWORDS = frozenset({"AND", "OR", "NOT", "IS", "NULL", "TRUE", "FALSE"})
_BARE_IDENTIFIER = re.compile(r"[^\W\d]\w*\Z")


@dataclass(frozen=True)
class Comparison:
    """`column op value`; `column` is a dotted path (segments holding `.` or a backquote are backquoted)."""

    column: str
    op: str
    value: object

    def __str__(self) -> str:
        return to_sql(self)


@dataclass(frozen=True)
class IsNull:
    """`column IS NULL`, or `column IS NOT NULL` when `negated`."""

    column: str
    negated: bool = False

    def __str__(self) -> str:
        return to_sql(self)


@dataclass(frozen=True)
class And:
    """Both children hold."""

    left: Expr
    right: Expr

    def __str__(self) -> str:
        return to_sql(self)


@dataclass(frozen=True)
class Or:
    """At least one child holds."""

    left: Expr
    right: Expr

    def __str__(self) -> str:
        return to_sql(self)


@dataclass(frozen=True)
class Not:
    """The child does not hold (SQL three-valued logic: NOT of null is null)."""

    child: Expr

    def __str__(self) -> str:
        return to_sql(self)


Expr = Comparison | IsNull | And | Or | Not


def column_path(column: str) -> tuple[str, ...]:
    """Split a column reference as stored in the AST into its path segments.

    Args:
        column: `a`, `a.b`, or with backquoted segments such as `` `a.b`.c `` (a doubled backquote escapes one).

    Returns:
        The segments, e.g. `("a", "b")`.

    Raises:
        InvalidExpression: the reference is empty or has an unterminated backquote.
    """
    segments: list[str] = []
    i, n = 0, len(column)
    while True:
        if i < n and column[i] == "`":
            j, buf = i + 1, []
            while True:
                if j >= n:
                    raise InvalidExpression(f"unterminated backquote in column reference {column!r}")
                if column[j] == "`":
                    if j + 1 < n and column[j + 1] == "`":
                        buf.append("`")
                        j += 2
                        continue
                    break
                buf.append(column[j])
                j += 1
            segments.append("".join(buf))
            i = j + 1
            if i < n and column[i] != ".":
                raise InvalidExpression(f"unexpected text after backquoted name in column reference {column!r}")
        else:
            j = column.find(".", i)
            j = n if j < 0 else j
            if j == i:
                raise InvalidExpression(f"empty name in column reference {column!r}")
            segments.append(column[i:j])
            i = j
        if i >= n:
            return tuple(segments)
        i += 1  # skip the dot
        if i >= n:
            raise InvalidExpression(f"empty name in column reference {column!r}")


def format_column(path: tuple[str, ...] | list[str]) -> str:
    """Join path segments into the AST's column string, backquoting segments that hold `.` or a backquote.

    Args:
        path: the segments, outermost first.

    Returns:
        A string that `column_path` splits back into `path`.
    """
    out = []
    for seg in path:
        if seg == "" or "." in seg or "`" in seg:
            out.append("`" + seg.replace("`", "``") + "`")
        else:
            out.append(seg)
    return ".".join(out)


def expression_columns(expr: Expr) -> set[str]:
    """Top-level column names an expression references (the first segment of nested paths).

    Args:
        expr: a parsed or bound expression.

    Returns:
        The set of top-level names.
    """
    return {column_path(leaf.column)[0] for leaf in _leaves(expr)}


def _leaves(expr: Expr) -> Iterator[Comparison | IsNull]:
    stack: list[Expr] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, (Comparison, IsNull)):
            yield node
        elif isinstance(node, (And, Or)):
            stack.extend((node.right, node.left))
        elif isinstance(node, Not):
            stack.append(node.child)
        else:
            raise InvalidExpression(f"not an expression node: {type(node).__name__}")


def _sql_identifier(seg: str) -> str:
    if _BARE_IDENTIFIER.match(seg) and seg.upper() not in KEYWORDS:
        return seg
    return "`" + seg.replace("`", "``") + "`"


def sql_literal(value: object) -> str:
    """Render a literal as SQL text (also used in error messages)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        # non-finite floats have no numeric literal; bind accepts them back as strings
        return repr(value) if math.isfinite(value) else "'" + str(value) + "'"
    if isinstance(value, (int, Decimal)):
        return str(value)
    if isinstance(value, dt.datetime):
        text = value.isoformat(sep=" ")
    elif isinstance(value, dt.date):
        text = value.isoformat()
    elif isinstance(value, (bytes, bytearray)):
        text = bytes(value).decode("utf-8", errors="replace")
    else:
        text = str(value)
    return "'" + text.replace("'", "''") + "'"


def to_sql(expr: Expr) -> str:
    """Render an expression as text that `parse_expression` reads back to an equal expression.

    Args:
        expr: a parsed or bound expression.

    Returns:
        The predicate text, with parentheses only where precedence needs them.
    """
    return _to_sql(expr, 0)


def _to_sql(expr: Expr, parent_level: float) -> str:
    # levels: 1 = OR, 2 = AND, 3 = NOT / leaf; a right operand of the same level gets parentheses so that the
    # left-associative parser rebuilds the same tree
    if isinstance(expr, Comparison):
        col = ".".join(_sql_identifier(s) for s in column_path(expr.column))
        return f"{col} {expr.op} {sql_literal(expr.value)}"
    if isinstance(expr, IsNull):
        col = ".".join(_sql_identifier(s) for s in column_path(expr.column))
        return f"{col} IS {'NOT ' if expr.negated else ''}NULL"
    if isinstance(expr, Not):
        return "NOT " + _to_sql(expr.child, 3)
    if isinstance(expr, And):
        text, level = f"{_to_sql(expr.left, 2)} AND {_to_sql(expr.right, 2.5)}", 2
    elif isinstance(expr, Or):
        text, level = f"{_to_sql(expr.left, 1)} OR {_to_sql(expr.right, 1.5)}", 1
    else:
        raise InvalidExpression(f"not an expression node: {type(expr).__name__}")
    return f"({text})" if parent_level > level else text
