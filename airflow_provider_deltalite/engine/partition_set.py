"""A set of partitions, named by their raw values, as a filter that log replay applies while it reads.

`PartitionFilter` keeps the files whose partition values may satisfy a predicate; a planner that already knows which
partitions it needs (from a streamed pass over the log, as the maintenance planner does) names them here instead:
a predicate OR-ing thousands of partitions would be parsed, bound and evaluated term by term, and the expression code
walks it recursively. Membership is one hash lookup per row over the raw strings the log holds.

The values are matched as written: two spellings of one typed value (``1`` and ``01`` of an integer column) are two
partitions here, where a predicate would select both. A caller that needs the typed meaning checks its partitions for
such spellings first.

Example:
    >>> keep = PartitionSetFilter.of([{"date": "2026-11-30"}, {"date": None}])  # doctest: +SKIP
    >>> snap = load_snapshot(storage, partition_filter=keep)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.column_mapping import column_mapping_mode, physical_name
from airflow_provider_deltalite.engine.errors import InvalidArgument
from airflow_provider_deltalite.engine.expressions.nodes import IsNull, Or
from airflow_provider_deltalite.engine.partition_filter import BoundPartitionFilter, PartitionFilter
from airflow_provider_deltalite.engine.schema import parse_schema_string
from airflow_provider_deltalite.engine.snapshot import Snapshot

_NULL, _VALUE, _SEP = "\x00", "\x01", "\x02"


def _encode(value: str | None) -> str:
    # "" and null are one partition value: the protocol writes a null partition value as an empty string. The length
    # prefix keeps values that hold the separator from running into the next column's.
    return _NULL if value is None or value == "" else f"{_VALUE}:{len(value)}:{value}"


@dataclass(frozen=True)
class PartitionSetFilter(PartitionFilter):
    """Keep the files of exactly these partitions: each a tuple of raw values (None for null), one per entry of
    ``physical_names``, the table's partition columns by physical name."""

    physical_names: tuple[str, ...] = ()
    partitions: frozenset[tuple[str | None, ...]] = frozenset()

    @classmethod
    def of(cls, partitions: Iterable[Mapping[str, str | None]]) -> PartitionSetFilter:
        """The filter of ``partitions``, each a mapping physical name -> raw value (as a `Snapshot.raw_files`
        row's ``partitionValues``); all must name the same columns."""
        rows = [dict(p) for p in partitions]
        names = tuple(sorted(rows[0])) if rows else ()
        values = frozenset(tuple(None if p.get(n) in (None, "") else p.get(n) for n in names) for p in rows)
        return cls(predicate=f"<{len(values)} partitions>", physical_names=names, partitions=values)

    def bind(self, metadata: Mapping[str, Any], table_uri: str | None) -> BoundPartitionFilter:
        """The filter against the table's latest metaData (its partition columns' physical names must be those the
        partitions name; a table without partition columns keeps every file)."""
        schema = parse_schema_string(
            metadata.get("schemaString") or '{"type":"struct","fields":[]}', table_uri=table_uri
        )
        mode = column_mapping_mode(metadata.get("configuration") or {})
        fields = {f["name"]: f for f in schema["fields"]}
        current = sorted(physical_name(fields[n], mode) for n in metadata.get("partitionColumns") or [] if n in fields)
        if tuple(current) != self.physical_names:
            raise InvalidArgument(
                f"the partitions name the columns {list(self.physical_names)}, the table's are {current}", table_uri
            )
        keys = frozenset(_SEP.join(_encode(v) for v in p) for p in self.partitions)
        # ``expr`` is a tautology that nothing evaluates: with ``columns`` empty, readers go by `mask` alone
        always = Or(IsNull("_"), IsNull("_", True))
        return BoundPartitionSet(self.predicate, always, (), table_uri, self.physical_names, keys)


@dataclass(frozen=True)
class BoundPartitionSet(BoundPartitionFilter):
    """`PartitionSetFilter` bound: membership of each row's raw values, encoded as one string, in ``keys``.

    ``columns`` is empty, so a checkpoint's row-group statistics never skip a row group for it; rows are selected by
    `mask` alone."""

    names: tuple[str, ...] = ()
    keys: frozenset[str] = frozenset()

    @property
    def physical_names(self) -> list[str]:
        return list(self.names)

    def mask(self, values: list[pa.Array | None], n: int, present: np.ndarray | None = None) -> np.ndarray:
        if not self.names:
            keep = np.ones(n, dtype=bool)
        else:
            encoded = []
            for raw in values:
                column = pa.nulls(n, pa.string()) if raw is None else pc.cast(raw, pa.string())
                empty = pc.fill_null(pc.equal(column, ""), True)
                length = pc.cast(pc.utf8_length(column), pa.string())
                encoded.append(pc.if_else(empty, _NULL, pc.binary_join_element_wise(_VALUE, length, column, ":")))
            joined = encoded[0] if len(encoded) == 1 else pc.binary_join_element_wise(*encoded, _SEP)
            chosen = pc.is_in(joined, value_set=pa.array(sorted(self.keys), pa.string()))
            keep = np.asarray(pc.fill_null(chosen, False).to_numpy(zero_copy_only=False), dtype=bool)
        if present is not None:
            keep = keep | ~present
        return keep


def snapshot_of_partitions(snapshot: Snapshot, partitions: PartitionSetFilter) -> Snapshot:
    """``snapshot`` cut to the live files and tombstones of ``partitions``, without reading the log again: what a
    planner that replayed a group of partitions at once hands to code that plans a few of them at a time (code that
    reads every file of the snapshot it is given)."""
    state = snapshot._state
    keep = partitions.bind(snapshot.metadata, snapshot.table_uri)

    def cut(rows: pa.Table) -> pa.Table:
        if not rows.num_rows:
            return rows
        mask = keep.mask_struct(rows.column("partitionValues"))
        return rows if mask.all() else pc.filter(rows, pa.array(mask))

    pruned = replace(state, live=cut(state.live), tombstones=cut(state.tombstones), pruned_by=partitions.predicate)
    return Snapshot(snapshot.storage, pruned)


__all__ = ["BoundPartitionSet", "PartitionSetFilter", "snapshot_of_partitions"]
