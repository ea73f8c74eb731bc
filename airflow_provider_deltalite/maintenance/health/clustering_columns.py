"""Which columns clustering quality is measured on: the caller's, else the table's liquid clustering columns, else the
newest Z-order's, else none; and each one's min/max statistics as Arrow arrays."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.clustering_domain import clustering_spec
from airflow_provider_deltalite.engine.errors import InvalidArgument, InvalidExpression
from airflow_provider_deltalite.engine.expressions import column_path, format_column
from airflow_provider_deltalite.engine.schema import find_field
from airflow_provider_deltalite.engine.snapshot import Snapshot

GIVEN = "given"
LIQUID = "liquid"
ZORDER = "zorder"


@dataclass(frozen=True)
class MeasuredColumn:
    """A column to measure: its name as reported, and its logical path in the data schema."""

    name: str
    path: tuple[str, ...]


def resolve_path(snapshot: Snapshot, name: str) -> tuple[str, ...] | None:
    """The logical path of a data column named ``a``, ``s.b`` or ```a.b```; None when the table has none."""
    if name in snapshot.data_schema.names:  # a top-level name holding dots
        return (name,)
    try:
        segments = column_path(name)
    except InvalidExpression:
        return None
    field, names = find_field(snapshot.schema["fields"], segments)
    return tuple(names) if field is not None else None


def given_columns(snapshot: Snapshot, names: Sequence[str]) -> tuple[MeasuredColumn, ...]:
    """The caller's columns, checked against the table.

    Raises:
        InvalidArgument: a name is empty, a partition column, or not a column of the table (the message names it).
    """
    out = []
    partition = {c.lower() for c in snapshot.partition_columns}
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise InvalidArgument(
                f"clustering column names must be non-empty strings, got {name!r}", snapshot.table_uri
            )
        if name.lower() in partition:
            raise InvalidArgument(
                f"column '{name}' is a partition column: its files hold one value each, there is no clustering to "
                "measure",
                snapshot.table_uri,
            )
        path = resolve_path(snapshot, name.strip())
        if path is None:
            raise InvalidArgument(f"column '{name}' is not in the table schema", snapshot.table_uri)
        kind = _nested_kind(snapshot, path)
        if kind is not None:
            raise InvalidArgument(
                f"column '{name}' is a {kind}: files keep min/max statistics of its leaf fields, name one of them",
                snapshot.table_uri,
            )
        out.append(MeasuredColumn(format_column(path), path))
    return tuple(out)


def _nested_kind(snapshot: Snapshot, path: tuple[str, ...]) -> str | None:
    """'struct', 'list' or 'map' when the column at ``path`` is one (no min/max to measure), else None."""
    data_type: pa.DataType = snapshot.data_schema.field(path[0]).type
    for segment in path[1:]:
        if not pa.types.is_struct(data_type) or data_type.get_field_index(segment) < 0:
            return None
        data_type = data_type.field(segment).type
    if pa.types.is_struct(data_type):
        return "struct"
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type) or pa.types.is_fixed_size_list(data_type):
        return "list"
    return "map" if pa.types.is_map(data_type) else None


def choose_columns(
    snapshot: Snapshot, columns: Sequence[str] | None, zorder_columns: Sequence[str]
) -> tuple[tuple[MeasuredColumn, ...], str | None]:
    """The columns to measure and their source (`GIVEN`, `LIQUID`, `ZORDER` or None)."""
    if columns:
        return given_columns(snapshot, columns), GIVEN
    spec = clustering_spec(snapshot)
    if spec is not None and spec.columns:
        return tuple(MeasuredColumn(c.name, c.logical) for c in spec.columns), LIQUID
    # a Z-order of columns since dropped or renamed measures the ones still there
    found = [(name, resolve_path(snapshot, name)) for name in zorder_columns]
    measured = tuple(MeasuredColumn(format_column(p), p) for _, p in found if p is not None)
    if measured:
        return measured, ZORDER
    return (), None


def needs_zorder(snapshot: Snapshot, columns: Sequence[str] | None) -> bool:
    """Whether the columns may come from the newest Z-order (neither given nor the table's liquid columns)."""
    if columns:
        return False
    spec = clustering_spec(snapshot)
    return spec is None or not spec.columns


def stats_schema(snapshot: Snapshot, columns: Sequence[MeasuredColumn]) -> pa.Schema:
    """The part of the data schema the statistics must be parsed for: the top-level fields of ``columns``."""
    tops = list(dict.fromkeys(c.path[0] for c in columns))
    return pa.schema([snapshot.data_schema.field(name) for name in tops])


def bounds(stats: pa.StructArray, column: MeasuredColumn) -> tuple[pa.Array, pa.Array] | None:
    """The column's (min, max) per file from parsed statistics; None when its type keeps no min/max."""
    out = []
    for section in ("minValues", "maxValues"):
        array: pa.Array = stats.field(section)
        for segment in column.path:
            struct_type = array.type
            if not pa.types.is_struct(struct_type) or struct_type.get_field_index(segment) < 0:
                return None
            array = _field(array, segment)
        out.append(array)
    return out[0], out[1]


def _field(array: pa.Array, name: str) -> pa.Array:
    # StructArray.field ignores the parent's nulls: a null struct must make its fields null
    child = array.field(name)
    if array.null_count:
        child = pc.if_else(pc.is_valid(array), child, pa.nulls(len(child), child.type))
    return child
