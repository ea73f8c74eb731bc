"""A predicate on partition columns that log replay applies while it reads, so a snapshot holds only the files of
the partitions an operation touches.

Replay binds it once the log's latest metaData is known (the schema, the partition columns and their physical
names), then asks for a mask per batch of raw `partitionValues` (strings keyed by physical name, as the log writes
them). Pruning is an over-approximation, as `may_match_partitions` is: a file is dropped only when its partition
values cannot satisfy the predicate, so no file the predicate selects is lost.

Example:
    >>> snap = load_snapshot(storage, partition_filter=PartitionFilter("date = '2026-11-30'"))  # doctest: +SKIP
    >>> snap.pruned_by  # doctest: +SKIP
    "date = '2026-11-30'"
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.column_mapping import column_mapping_mode, physical_name
from airflow_provider_deltalite.engine.conform import delta_schema_to_arrow
from airflow_provider_deltalite.engine.errors import InvalidExpression
from airflow_provider_deltalite.engine.partition_values import parse_partition_values
from airflow_provider_deltalite.engine.schema import parse_schema_string

if TYPE_CHECKING:
    from airflow_provider_deltalite.engine.expressions.nodes import Expr

# The expression modules are imported where a predicate is parsed or evaluated: every snapshot imports this module,
# and a command without a predicate (a whole-table OPTIMIZE, describe) does without their 15-20 ms.


def bind_partition_predicate(
    predicate: str, arrow_schema: pa.Schema, partition_columns: list[str], table_uri: str | None
) -> Expr:
    """Parse and bind ``predicate``, which may reference partition columns only (OPTIMIZE's and Z-order's ``where``).

    Raises:
        InvalidExpression: it does not parse, names an unknown column, or names a non-partition column.
    """
    from airflow_provider_deltalite.engine.expressions import bind, expression_columns, parse_expression

    try:
        expr = bind(parse_expression(predicate), arrow_schema)
    except InvalidExpression as exc:
        raise InvalidExpression(exc.problem, table_uri) from None
    others = sorted(expression_columns(expr) - set(partition_columns))
    if others:
        partitions = ", ".join(partition_columns) or "none"
        raise InvalidExpression(
            f"where may only reference partition columns; '{others[0]}' is not one (partition columns: {partitions})",
            table_uri,
        )
    return expr


@dataclass(frozen=True)
class PartitionFilter:
    """What replay keeps: the files whose partition values may satisfy ``predicate``.

    ``partition_columns_only`` (OPTIMIZE, Z-order, clustering): a predicate naming any other column is an error, as
    it always was for their ``where``. Without it (scans), comparisons on data columns are unknown and keep every
    file, so the snapshot holds what the predicate's partition part selects.
    """

    predicate: str
    partition_columns_only: bool = True

    def bind(self, metadata: Mapping[str, Any], table_uri: str | None) -> BoundPartitionFilter:
        """The filter against the table's latest metaData.

        Raises:
            InvalidExpression: the predicate does not parse, names an unknown column, or (with
                ``partition_columns_only``) a non-partition column.
        """
        schema = parse_schema_string(
            metadata.get("schemaString") or '{"type":"struct","fields":[]}', table_uri=table_uri
        )
        partition_columns = list(metadata.get("partitionColumns") or [])
        arrow_schema = delta_schema_to_arrow(schema)
        if self.partition_columns_only:
            expr = bind_partition_predicate(self.predicate, arrow_schema, partition_columns, table_uri)
        else:
            from airflow_provider_deltalite.engine.expressions import bind, parse_expression

            try:
                expr = bind(parse_expression(self.predicate), arrow_schema)
            except InvalidExpression as exc:
                raise InvalidExpression(exc.problem, table_uri) from None
        mode = column_mapping_mode(metadata.get("configuration") or {})
        fields = {f["name"]: f for f in schema["fields"]}
        columns = tuple(
            (name, physical_name(fields[name], mode), fields[name]["type"])
            for name in partition_columns
            if name in fields
        )
        return BoundPartitionFilter(self.predicate, expr, columns, table_uri)


@dataclass(frozen=True)
class BoundPartitionFilter:
    """A partition filter bound to one metaData: logical name, physical name and Delta type per partition column."""

    predicate: str
    expr: Expr
    columns: tuple[tuple[str, str, Any], ...]
    table_uri: str | None

    @property
    def physical_names(self) -> list[str]:
        return [physical for _, physical, _ in self.columns]

    def mask(self, values: list[pa.Array | None], n: int, present: np.ndarray | None = None) -> np.ndarray:
        """True for each of ``n`` rows whose partition values may satisfy the predicate.

        ``values`` holds the raw strings of each partition column (in ``columns`` order; None when the rows carry no
        such key). ``present`` marks rows that carry partition values at all: a row without them (a `remove` written
        without ``partitionValues``, which the protocol allows) is kept, since its partition is unknown.
        """
        from airflow_provider_deltalite.engine.expressions import may_match_partitions

        typed = {}
        for (name, _, delta_type), raw in zip(self.columns, values, strict=True):
            typed[name] = parse_partition_values(
                pa.nulls(n, pa.string()) if raw is None else raw, delta_type, column=name, table_uri=self.table_uri
            )
        # without partition columns the table still needs its row count: the predicate is a constant over the files
        table = pa.table(typed) if typed else pa.table({"_": pa.nulls(n)}).drop_columns(["_"])
        keep = np.asarray(may_match_partitions(self.expr, table).to_numpy(zero_copy_only=False), dtype=bool)
        if present is not None:
            keep = keep | ~present
        return keep

    def mask_struct(self, partition_values: pa.Array) -> np.ndarray:
        """`mask` over a struct array of raw partition values keyed by physical name (the replay's layout)."""
        if isinstance(partition_values, pa.ChunkedArray):
            partition_values = partition_values.combine_chunks()
        names = set(partition_values.type.names) if pa.types.is_struct(partition_values.type) else set()
        values = [partition_values.field(p) if p in names else None for p in self.physical_names]
        present = np.asarray(pc.is_valid(partition_values).to_numpy(zero_copy_only=False), dtype=bool)
        return self.mask(values, len(partition_values), present)


__all__ = ["BoundPartitionFilter", "PartitionFilter", "bind_partition_predicate"]
