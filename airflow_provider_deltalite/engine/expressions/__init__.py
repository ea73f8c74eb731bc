"""A small predicate language (comparisons, IS NULL, AND/OR/NOT) with binding, row filtering and file skipping.

The front end is `nodes` (the tree, column paths, the SQL printer), `parser` and `bind` (with `literals` for literal
coercion); the evaluators are `arrow` (row filters), `partitions` (partition pruning) and `skipping` (file statistics).
"""

from __future__ import annotations

from airflow_provider_deltalite.engine.expressions.arrow import to_arrow_filter
from airflow_provider_deltalite.engine.expressions.bind import bind
from airflow_provider_deltalite.engine.expressions.literals import convert_literal, parse_timestamp_text
from airflow_provider_deltalite.engine.expressions.nodes import (
    And,
    Comparison,
    Expr,
    IsNull,
    Not,
    Or,
    column_path,
    expression_columns,
    format_column,
    to_sql,
)
from airflow_provider_deltalite.engine.expressions.parser import parse_expression
from airflow_provider_deltalite.engine.expressions.partitions import may_match_partitions
from airflow_provider_deltalite.engine.expressions.skipping import may_match_stats

__all__ = [
    "And",
    "Comparison",
    "Expr",
    "IsNull",
    "Not",
    "Or",
    "bind",
    "column_path",
    "convert_literal",
    "expression_columns",
    "format_column",
    "may_match_partitions",
    "may_match_stats",
    "parse_expression",
    "parse_timestamp_text",
    "to_arrow_filter",
    "to_sql",
]
