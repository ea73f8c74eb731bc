"""Health figures summed over batches of live files and tombstones: what lets `table_health` read a table of
millions of files as a stream (`engine.snapshot_stream.stream_snapshot`) instead of holding it.

Per partition the accumulator keeps counts and sums (files, bytes, rows, small files, deleted rows, files with a
deletion vector) and the size histogram's buckets; per file only what clustering quality needs (the partition and a
min and a max per measured column). Tombstones are kept whole (fewer than the live files in any table VACUUM runs
on), since which of them are dead depends on every live path: the live paths equal to some removed path are
collected on the way (`ReplayStream.removed_paths`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.arrow_util import contiguous
from airflow_provider_deltalite.engine.partition_values import distinct_rows, parse_partition_values
from airflow_provider_deltalite.engine.snapshot import Snapshot
from airflow_provider_deltalite.engine.stats_parse import record_counts
from airflow_provider_deltalite.maintenance.health.clustering_columns import MeasuredColumn, bounds, stats_schema
from airflow_provider_deltalite.maintenance.health.histogram import bucket_counts
from airflow_provider_deltalite.maintenance.health.metrics import SIZE_BUCKET_EDGES

_SUMS = ("files", "bytes", "rows", "small", "small_bytes", "deleted", "dv_files", "dead", "dead_bytes")


class PartitionRegistry:
    """Partitions by their raw values (strings as written, None for null), numbered in the order first seen."""

    def __init__(self, snap: Snapshot) -> None:
        self._snap = snap
        self._ids: dict[tuple[str | None, ...], int] = {}
        self.values: list[tuple[str | None, ...]] = []

    def __len__(self) -> int:
        return len(self.values)

    def ids(self, partition_values: pa.Array) -> np.ndarray:
        """The partition id of each row of a struct of raw partition values; -1 for a row without any (a remove
        written without partitionValues belongs to no partition)."""
        n = len(partition_values)
        physical = self._snap.partition_physical_names
        if not physical:
            if n and not self.values:
                self._ids[()] = 0
                self.values.append(())
            return np.zeros(n, np.int64)
        pv = contiguous(partition_values)
        rows, inverse = distinct_rows(pv, physical)
        mapping = np.fromiter((self.register(values) for values in rows), np.int64, len(rows))
        ids = mapping[inverse]
        if pv.null_count:
            ids = np.where(pc.is_valid(pv).to_numpy(zero_copy_only=False), ids, -1)
        return ids

    def register(self, values: tuple[str | None, ...]) -> int:
        """The id of a partition by its raw values, numbering it next when it is new."""
        found = self._ids.get(values)
        if found is None:
            found = self._ids[values] = len(self.values)
            self.values.append(values)
        return found

    def order(self, used: np.ndarray) -> list[int]:
        """The used partitions sorted by typed value, null first (1 < 2 < 10 for integers, not "1" < "10" < "2")."""
        snap = self._snap
        fields = {f["name"]: f for f in snap.schema["fields"]}
        typed = []
        for j, logical in enumerate(snap.partition_columns):
            raw = pa.array([v[j] for v in self.values], pa.string())
            typed.append(
                parse_partition_values(
                    raw, fields[logical]["type"], column=logical, table_uri=snap.table_uri
                ).to_pylist()
            )
        keys = [tuple((0, "") if t[g] is None else (1, t[g]) for t in typed) for g in range(len(self.values))]
        return sorted((g for g in range(len(self.values)) if used[g]), key=lambda g: keys[g])

    def as_dict(self, group: int) -> dict[str, Any]:
        return dict(zip(self._snap.partition_columns, self.values[group], strict=True))


# what health reads of a tombstone (`tombstones`, `HealthAccumulator.add_dead`): the rest is not kept
TOMBSTONE_COLUMNS = ("path", "partitionValues", "size", "deletionTimestamp")


@dataclass
class HealthPart:
    """A `HealthAccumulator`'s sums over some batches with its partitions numbered on their own (``values``, in the
    order first seen): what a task returns for its slice of a checkpoint, merged with `HealthAccumulator.merge`."""

    values: list[tuple[str | None, ...]]
    sums: dict[str, np.ndarray]
    files: int
    with_records: int
    histogram: tuple[np.ndarray, np.ndarray]
    bounds: list[list[tuple[np.ndarray, pa.Array, pa.Array]]]
    unboundable: list[bool]
    tombstones: list[pa.Table]
    relive: list[pa.Array]


class HealthAccumulator:
    """Sums of one table's health over batches (`add`), or over other accumulators' parts (`part`, `merge`: each
    partition's sums added, its files' clustering bounds renumbered); read out by `compute`.

    Merging the parts of consecutive runs of batches, in order, gives the sums one accumulator of all the batches
    gives, with the partitions numbered alike: a part numbers its partitions in the order it first saw them, and the
    merge registers them in that order.
    """

    def __init__(self, snap: Snapshot, measured: Sequence[MeasuredColumn], min_file_size: int) -> None:
        self.snap = snap
        self.measured = tuple(measured)
        self.min_file_size = min_file_size
        self.partitions = PartitionRegistry(snap)
        self.sums = {k: np.zeros(0, np.int64) for k in _SUMS}
        self.files = 0
        self.with_records = 0
        self.histogram = (np.zeros(len(SIZE_BUCKET_EDGES), np.int64), np.zeros(len(SIZE_BUCKET_EDGES), np.int64))
        self.bounds: list[list[tuple[np.ndarray, pa.Array, pa.Array]]] = [[] for _ in self.measured]
        self.unboundable = [False for _ in self.measured]
        self.tombstones: list[pa.Table] = []
        self.relive: list[pa.Array] = []
        self._schema = stats_schema(snap, self.measured) if self.measured else None

    def add(self, live: pa.Table, tombstones: pa.Table, removed_paths: pa.Array) -> None:
        """One batch of live files (`Snapshot.raw_files` layout) and of tombstones."""
        if tombstones.num_rows:
            self.tombstones.append(tombstones.select([c for c in TOMBSTONE_COLUMNS if c in tombstones.column_names]))
        if not live.num_rows:
            return
        paths = contiguous(live.column("path"))
        if len(removed_paths):
            self.relive.append(pc.filter(paths, pc.fill_null(pc.is_in(paths, value_set=removed_paths), False)))
        groups = self.partitions.ids(live.column("partitionValues"))
        sizes = pc.fill_null(contiguous(live.column("size")), 0).to_numpy(zero_copy_only=False).astype(np.int64)
        raw_stats = contiguous(live.column("stats"))
        if self._schema is not None:
            stats = self.snap.parse_file_stats(raw_stats, self._schema)
            records = contiguous(stats.field("numRecords"))
            for k, column in enumerate(self.measured):
                found = bounds(stats, column)
                if found is None:
                    self.unboundable[k] = True
                else:
                    self.bounds[k].append((groups, found[0], found[1]))
        else:
            records = record_counts(raw_stats, self.snap.table_uri)
        self.files += len(sizes)
        self.with_records += int(pc.is_valid(records).to_numpy(zero_copy_only=False).sum())
        rows = pc.fill_null(records, 0).to_numpy(zero_copy_only=False).astype(np.int64)
        dv = contiguous(live.column("deletionVector"))
        has_dv = pc.is_valid(dv).to_numpy(zero_copy_only=False)
        deleted = np.where(has_dv, pc.fill_null(dv.field("cardinality"), 0).to_numpy(zero_copy_only=False), 0)
        small = sizes < self.min_file_size
        counts, sums = bucket_counts(sizes, SIZE_BUCKET_EDGES)
        self.histogram = (self.histogram[0] + counts, self.histogram[1] + sums)
        for name, values in (
            ("files", np.ones(len(sizes), np.int64)),
            ("bytes", sizes),
            ("rows", rows),
            ("small", small.astype(np.int64)),
            ("small_bytes", np.where(small, sizes, 0)),
            ("deleted", deleted.astype(np.int64)),
            ("dv_files", has_dv.astype(np.int64)),
        ):
            self._add_per_group(name, groups, values)

    def part(self) -> HealthPart:
        """The sums so far, for another accumulator's `merge` (a task's result: no snapshot in it)."""
        return HealthPart(
            values=list(self.partitions.values),
            sums={name: self.per_group(name) for name in _SUMS},
            files=self.files,
            with_records=self.with_records,
            histogram=self.histogram,
            bounds=self.bounds,
            unboundable=self.unboundable,
            tombstones=self.tombstones,
            relive=self.relive,
        )

    def merge(self, part: HealthPart) -> None:
        """Add the sums of ``part`` (of the same table and measured columns), as if its batches were added here."""
        mapping = np.array([self.partitions.register(v) for v in part.values], np.int64)
        for name, values in part.sums.items():
            current = self.per_group(name)
            # the mapping never sends two of the part's partitions to one: a plain indexed add is exact
            current[mapping[: len(values)]] += values
            self.sums[name] = current
        self.files += part.files
        self.with_records += part.with_records
        self.histogram = (self.histogram[0] + part.histogram[0], self.histogram[1] + part.histogram[1])
        for k, pieces in enumerate(part.bounds):
            self.bounds[k].extend((_renumbered(groups, mapping), mins, maxs) for groups, mins, maxs in pieces)
            self.unboundable[k] = self.unboundable[k] or part.unboundable[k]
        self.tombstones.extend(part.tombstones)
        self.relive.extend(part.relive)

    def add_dead(self, dead: pa.Table) -> np.ndarray:
        """Count the dead tombstones per partition; returns their partition ids (-1: none)."""
        groups = self.partitions.ids(dead.column("partitionValues")) if dead.num_rows else np.zeros(0, np.int64)
        attributed = groups >= 0
        sizes = pc.fill_null(contiguous(dead.column("size")), 0).to_numpy(zero_copy_only=False).astype(np.int64)
        self._add_per_group("dead", groups[attributed], np.ones(int(attributed.sum()), np.int64))
        self._add_per_group("dead_bytes", groups[attributed], sizes[attributed])
        return groups

    def _add_per_group(self, name: str, groups: np.ndarray, values: np.ndarray) -> None:
        n = len(self.partitions)
        current = self.per_group(name)
        # a batch's sums stay far below 2**53, where float weights would start to round
        current += np.bincount(groups, weights=values, minlength=n).astype(np.int64)
        self.sums[name] = current

    def per_group(self, name: str) -> np.ndarray:
        n = len(self.partitions)
        current = self.sums[name]
        return np.concatenate([current, np.zeros(n - len(current), np.int64)]) if len(current) < n else current

    def all_tombstones(self) -> pa.Table:
        if not self.tombstones:
            return self.snap.tombstones  # empty, in the right layout
        return pa.concat_tables(self.tombstones, promote_options="permissive")

    def relive_paths(self) -> pa.Array:
        return pa.concat_arrays(self.relive) if self.relive else pa.array([], pa.string())

    def column_bounds(self, k: int) -> tuple[np.ndarray, pa.Array, pa.Array] | None:
        """One measured column's (partition ids, mins, maxs) over every file; None when its type keeps no bounds."""
        if self.unboundable[k]:
            return None
        pieces = self.bounds[k]
        if not pieces:
            column = self._schema.field(self.measured[k].path[0]).type if self._schema is not None else pa.null()
            return np.zeros(0, np.int64), pa.array([], column), pa.array([], column)
        groups = np.concatenate([p[0] for p in pieces])
        return groups, pa.concat_arrays([p[1] for p in pieces]), pa.concat_arrays([p[2] for p in pieces])


def _renumbered(groups: np.ndarray, mapping: np.ndarray) -> np.ndarray:
    """Partition ids of a part as ids of the merged registry (-1, no partition, stays)."""
    if not len(mapping):
        return groups
    return np.where(groups >= 0, mapping[np.maximum(groups, 0)], -1)
