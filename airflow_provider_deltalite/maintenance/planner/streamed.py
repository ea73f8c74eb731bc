"""Planning a table without holding its files' actions: one streamed pass over the log, then the partitions that
need work planned from what the pass kept, or from pruned replays of them, a group at a time.

The pass (`engine.snapshot_stream.stream_snapshot`) sums the health (`health.compute.stream_health`) and, per partition,
what decides whether `candidates` would look at it at all (`PartitionTriggers`): its files, its fragments, its files
over the deleted-rows ratio, and its files per Z-order tag; and, per file, its partition's number and its size
(`streamed_compaction.PartitionSizes`). A partition where a trigger fires and no file has a deletion vector needs at
most a compaction (without Z-order columns in the policy): it is planned from those sizes
(`streamed_compaction.compaction_candidates`), without a replay. The other partitions where a trigger fires are
replayed, in the candidates' partition order, in groups of at most `PLAN_GROUP_FILES` files (a partition larger than
that is a group of its own), each group from the log with a `PartitionSetFilter`; `candidates.rewrite_candidates` runs
on each group's snapshot as it runs on the whole table's. The plan is the one the whole snapshot gives (tests compare
them): a partition's candidate depends on its own files only, and the triggers are the candidates' own first conditions.

Memory: the stream's (a batch, the tombstones, the health's per-partition sums), a few counters per partition, 12
bytes per live file (its partition's number and its size; about twice that while they are sorted), and one group's
files. An unpartitioned table is one partition, so one group. Two cases replay the whole table instead: a
liquid-clustered table (clustering plans from all of its files), and a table where two spellings of one typed
partition value (``1`` and ``01`` of an integer column) are live at once, since a group names partitions by their raw
values while an action's ``where`` selects by typed value.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.arrow_util import contiguous
from airflow_provider_deltalite.engine.clustering_domain import clustering_spec
from airflow_provider_deltalite.engine.partition_filter import bind_partition_predicate
from airflow_provider_deltalite.engine.partition_set import PartitionSetFilter, snapshot_of_partitions
from airflow_provider_deltalite.engine.partition_values import parse_partition_values
from airflow_provider_deltalite.engine.snapshot import Snapshot, load_snapshot
from airflow_provider_deltalite.engine.stats_parse import record_counts
from airflow_provider_deltalite.engine.table import Table
from airflow_provider_deltalite.maintenance.clustering.runs import TAG_COLUMNS
from airflow_provider_deltalite.maintenance.health.compute import HEALTH_FILE_FIELDS, open_stream, stream_health
from airflow_provider_deltalite.maintenance.health.metrics import TableHealth
from airflow_provider_deltalite.maintenance.planner.candidates import (
    Candidate,
    partition_label,
    point_query_reasons,
    rewrite_candidates,
)
from airflow_provider_deltalite.maintenance.planner.decide import decide
from airflow_provider_deltalite.maintenance.planner.plan import MaintenancePlan
from airflow_provider_deltalite.maintenance.planner.policy import MaintenancePolicy
from airflow_provider_deltalite.maintenance.planner.streamed_compaction import PartitionSizes, compaction_candidates
from airflow_provider_deltalite.maintenance.planner.where import (
    MAX_PARTITIONS_PER_PREDICATE,
    logical_names,
    partitions_predicate,
)
from airflow_provider_deltalite.maintenance.rewrites import resolve_sizes

# Live files one pruned replay of the planner holds at most (unless one partition alone has more). A planned file
# costs about 1.3 KB at the planner's peak (its row, its parsed statistics, its action as a dict in a bin), so a
# group stays near 650 MB; fewer, larger groups read the checkpoint fewer times.
PLAN_GROUP_FILES = 500_000
# What the stream reads of the file actions: health's fields, and the tags that say which files are Z-ordered.
PLAN_FILE_FIELDS = HEALTH_FILE_FIELDS | {"tags"}

PartitionKey = tuple[tuple[str, str | None], ...]


class PartitionTriggers:
    """Per partition, keyed as `candidates` keys partitions (sorted (physical name, raw value) pairs, ``""`` as
    None): files, fragments (below ``target_file_size / fragment_ratio``), files whose deletion vector removes more
    than ``max_deleted_rows_ratio`` of their rows, and files per ``ZCUBE_ZORDER_BY`` tag value; and the tombstones'
    deletion times and sizes (what VACUUM's reclaimable count needs for another retention)."""

    def __init__(self, snap: Snapshot, policy: MaintenancePolicy) -> None:
        target, _, _ = resolve_sizes(snap, policy.target_file_size, None, None, None)
        self.fragment_size = int(target or 1) / policy.fragment_ratio
        self.ratio = policy.max_deleted_rows_ratio
        self.uri = snap.table_uri
        self.sizes = PartitionSizes()
        # per partition number (`PartitionSizes`): files, fragments, files over the ratio; files per tag value
        self._counts = np.zeros((3, 0), np.int64)
        self._tagged: dict[int, dict[str, int]] = {}
        self._stones: list[pa.Table] = []

    def empty_like(self) -> PartitionTriggers:
        """A fresh one with the same settings (what each task of a `TaskStream` sums into)."""
        fresh = object.__new__(PartitionTriggers)
        fresh.fragment_size, fresh.ratio, fresh.uri = self.fragment_size, self.ratio, self.uri
        fresh.sizes = PartitionSizes()
        fresh._counts = np.zeros((3, 0), np.int64)
        fresh._tagged, fresh._stones = {}, []
        return fresh

    def merge(self, other: PartitionTriggers) -> None:
        """Add another's counts and files (a task's, of its slice of the checkpoint), as if its batches came here."""
        mapping = self.sizes.merge(other.sizes)
        m = len(self.sizes.values)
        if self._counts.shape[1] < m:
            self._counts = np.pad(self._counts, ((0, 0), (0, m - self._counts.shape[1])))
        theirs = other._counts.shape[1]
        # the mapping never sends two of its partitions to one: a plain indexed add is exact
        self._counts[:, mapping[:theirs]] += other._counts
        for number, counts in other._tagged.items():
            tagged = self._tagged.setdefault(int(mapping[number]), {})
            for tag, n in counts.items():
                tagged[tag] = tagged.get(tag, 0) + n
        self._stones.extend(other._stones)

    def add(self, live: pa.Table, stones: pa.Table) -> None:
        """One batch of the stream (`ReplayStream.batches`)."""
        if stones.num_rows:
            self._stones.append(stones.select(["deletionTimestamp", "size"]))
        n = live.num_rows
        if not n:
            return
        pv = contiguous(live.column("partitionValues"))
        sizes = pc.fill_null(contiguous(live.column("size")), 0).to_numpy(zero_copy_only=False).astype(np.int64)
        has_dv = pc.is_valid(contiguous(live.column("deletionVector"))).to_numpy(zero_copy_only=False)
        ids = self.sizes.add(pv, sizes, np.asarray(has_dv, dtype=bool))
        m = len(self.sizes.values)
        if self._counts.shape[1] < m:
            self._counts = np.pad(self._counts, ((0, 0), (0, m - self._counts.shape[1])))
        self._counts[0] += np.bincount(ids, minlength=m)
        self._counts[1] += np.bincount(ids[sizes < self.fragment_size], minlength=m)
        over = self._over(live)
        if over.any():
            self._counts[2] += np.bincount(ids[over], minlength=m)
        tags = _tag_values(live)
        if tags.null_count < n:
            encoded = pc.dictionary_encode(tags)
            values = encoded.dictionary.to_pylist()
            code = pc.fill_null(encoded.indices, len(values)).to_numpy(zero_copy_only=False).astype(np.int64)
            pairs, counts = np.unique(ids.astype(np.int64) * (len(values) + 1) + code, return_counts=True)
            for pair, count in zip(pairs.tolist(), counts.tolist(), strict=True):
                number, c = divmod(pair, len(values) + 1)
                if c < len(values):
                    tagged = self._tagged.setdefault(number, {})
                    tagged[values[c]] = tagged.get(values[c], 0) + count

    @property
    def files(self) -> dict[PartitionKey, int]:
        return self._per_partition(0)

    @property
    def fragments(self) -> dict[PartitionKey, int]:
        return self._per_partition(1)

    @property
    def over(self) -> dict[PartitionKey, int]:
        return self._per_partition(2)

    def tagged(self, key: PartitionKey, tag: str) -> int:
        """The partition's files whose ``ZCUBE_ZORDER_BY`` tag is ``tag``."""
        return self._tagged.get(self.sizes.number[key], {}).get(tag, 0)

    def _per_partition(self, row: int) -> dict[PartitionKey, int]:
        counts = self._counts[row].tolist()
        return {key: counts[number] for key, number in self.sizes.number.items()}

    def _over(self, live: pa.Table) -> np.ndarray:
        """Whether each file's deletion vector removes more than the ratio of its rows (`candidates._deleted_share`:
        all of them when the file has no row count)."""
        dv = contiguous(live.column("deletionVector"))
        has = np.asarray(pc.is_valid(dv).to_numpy(zero_copy_only=False), dtype=bool)
        over = np.zeros(len(has), dtype=bool)
        if not has.any():
            return over
        where = np.flatnonzero(has)
        chosen = pa.array(where)
        records = record_counts(pc.take(contiguous(live.column("stats")), chosen), self.uri)
        rows = pc.fill_null(records, 0).to_numpy(zero_copy_only=False).astype(np.float64)
        cardinality = pc.fill_null(pc.take(dv.field("cardinality"), chosen), 0).to_numpy(zero_copy_only=False)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(rows > 0, np.minimum(1.0, cardinality.astype(np.float64) / rows), 1.0)
        over[where] = share > self.ratio
        return over

    def tombstones(self) -> pa.Table:
        """``deletionTimestamp`` and ``size`` of every tombstone the stream held."""
        if not self._stones:
            return pa.table({"deletionTimestamp": pa.array([], pa.int64()), "size": pa.array([], pa.int64())})
        return pa.concat_tables(self._stones, promote_options="permissive")


def _tag_values(live: pa.Table) -> pa.Array:
    """Each file's ``ZCUBE_ZORDER_BY`` tag (null when it has none)."""
    n = live.num_rows
    if "tags" not in live.column_names:
        return pa.nulls(n, pa.string())
    tags = contiguous(live.column("tags"))
    if pa.types.is_map(tags.type):
        return pc.cast(contiguous(pc.map_lookup(tags, pa.scalar(TAG_COLUMNS), "first")), pa.string())
    if pa.types.is_null(tags.type):
        return pa.nulls(n, pa.string())
    values = [dict(t).get(TAG_COLUMNS) if t else None for t in tags.to_pylist()]
    return pa.array(values, pa.string())


def plan_streamed(
    table: Table,
    policy: MaintenancePolicy,
    now: int,
    columns: list[str] | None,
    min_file_size: int | None,
    tasks: Any = None,
) -> tuple[TableHealth, MaintenancePlan]:
    """The table's health as ``policy`` sees it (``columns``, ``min_file_size``: `policy_health`'s) and the plan,
    at the latest version, without holding the table's files (see the module docstring). With ``tasks`` (the Spark
    executor) a checkpoint of at least its ``checkpoint_task_bytes`` is read by its tasks: the first pass summed a
    slice per task (`health.task_sums`; each task returns its files' partition numbers and sizes as well). The
    partitions replayed are replayed here, as without tasks: a group holds up to `PLAN_GROUP_FILES` files, which
    tasks would return through Spark's driver (its JVM heap)."""
    stream = open_stream(table, PLAN_FILE_FIELDS, tasks)
    snap = stream.snapshot
    spec = clustering_spec(snap)
    if spec is not None and spec.columns:
        # the table is one partition, which clustering plans from all of its files
        health = stream_health(table, stream, columns=columns, min_file_size=min_file_size, now_ms=now)
        return health, decide(health, load_snapshot(table.storage, snap.version), policy, now)
    triggers = PartitionTriggers(snap, policy)
    health = stream_health(table, stream, columns=columns, min_file_size=min_file_size, now_ms=now, observer=triggers)

    def candidates_of(effective: MaintenancePolicy) -> list[Candidate]:
        needed = needing_work(triggers, health, effective, snap)
        if needed and _spellings_collide(snap, list(triggers.sizes.number)):
            return rewrite_candidates(health, load_snapshot(table.storage, snap.version), effective)
        planned = _planned_from_sizes(triggers.sizes, needed, effective, snap)
        replayed = [k for k in needed if k not in planned]
        for group in _groups(replayed, triggers.files):
            keep = PartitionSetFilter.of(_physical_values(snap, key) for key in group)
            part = load_snapshot(table.storage, snap.version, partition_filter=keep)
            # the operations' planners read every file of the snapshot they are given, once per chunk of
            # partitions: given the group's, planning would cost its files times its chunks
            for first in range(0, len(group), MAX_PARTITIONS_PER_PREDICATE):
                keep = PartitionSetFilter.of(
                    _physical_values(snap, key) for key in group[first : first + MAX_PARTITIONS_PER_PREDICATE]
                )
                for c in rewrite_candidates(health, snapshot_of_partitions(part, keep), effective):
                    planned[_health_key(c.partition)] = c
        return [c for c in (planned.get(k) for k in needed) if c is not None]

    return health, decide(health, snap, policy, now, candidates_of=candidates_of, tombstones=triggers.tombstones())


def _planned_from_sizes(
    sizes: PartitionSizes, needed: list[PartitionKey], policy: MaintenancePolicy, snap: Snapshot
) -> dict[PartitionKey, Candidate | None]:
    """The candidates of the partitions without deletion vectors (when ``policy`` has no Z-order columns), which
    need at most a compaction: from the stream's sizes (`streamed_compaction`), with no replay."""
    if policy.zorder_columns:
        return {}
    logical = logical_names(snap.partition_columns, snap.partition_physical_names)
    direct = [k for k in needed if k != () and not sizes.has_dv(k)]
    for first in range(0, len(direct), MAX_PARTITIONS_PER_PREDICATE):
        # the predicate the compaction planner would bind for these partitions, refused as it would refuse it
        chunk = [sizes.values[sizes.number[k]] for k in direct[first : first + MAX_PARTITIONS_PER_PREDICATE]]
        where = partitions_predicate(chunk, logical)
        if where is not None:
            bind_partition_predicate(where, snap.arrow_schema, snap.partition_columns, snap.table_uri)
    return dict(compaction_candidates(sizes, direct, policy, logical))


def needing_work(
    triggers: PartitionTriggers, health: TableHealth, policy: MaintenancePolicy, snap: Snapshot
) -> list[PartitionKey]:
    """The partitions where a condition of `candidates._partition_candidates` holds (``policy`` resolved), in the
    candidates' order: unclustered files or point queries over the limit (with Z-order columns), at least
    ``min_input_files`` fragments, a file over the deleted-rows ratio."""
    minimum = policy.min_input_files
    columns_tag = None
    if policy.zorder_columns:
        columns_tag = json.dumps(list(policy.zorder_columns), separators=(",", ":"))
    logical = logical_names(snap.partition_columns, snap.partition_physical_names)
    by_values = {_health_key(p.partition_values): p for p in health.partitions}
    needed = []
    fragments, over = triggers.fragments, triggers.over
    for key, files in triggers.files.items():
        need = fragments[key] >= minimum or over[key] > 0
        if not need and columns_tag is not None:
            fresh = files - triggers.tagged(key, columns_tag)
            part = by_values.get(key)
            label = partition_label(dict(key), logical)
            points = point_query_reasons(policy, label, part.clustering if part is not None else ())
            need = fresh >= minimum or bool(points)
        if need:
            needed.append(key)
    return sorted(needed, key=lambda k: [("" if v is None else "\x01" + v) for _, v in k])


def _health_key(values: dict[str, Any]) -> PartitionKey:
    return tuple(sorted((k, None if v == "" else v) for k, v in values.items()))


def _groups(keys: list[PartitionKey], files: dict[PartitionKey, int]) -> Iterator[list[PartitionKey]]:
    group: list[PartitionKey] = []
    held = 0
    for key in keys:
        if group and held + files[key] > PLAN_GROUP_FILES:
            yield group
            group, held = [], 0
        group.append(key)
        held += files[key]
    if group:
        yield group


def _physical_values(snap: Snapshot, key: PartitionKey) -> dict[str, str | None]:
    values = dict(key)
    return {name: values.get(name) for name in snap.partition_physical_names}


def _spellings_collide(snap: Snapshot, keys: list[PartitionKey]) -> bool:
    """Whether two of the partitions are one partition by typed value (or by the current partition columns)."""
    fields = {f["name"]: f for f in snap.schema["fields"]}
    typed = []
    for logical, physical in zip(snap.partition_columns, snap.partition_physical_names, strict=True):
        raw = pa.array([dict(k).get(physical) for k in keys], pa.string())
        typed.append(
            parse_partition_values(raw, fields[logical]["type"], column=logical, table_uri=snap.table_uri).to_pylist()
        )
    seen = {tuple(column[i] for column in typed) for i in range(len(keys))}
    return len(seen) < len(keys)


__all__ = ["PLAN_FILE_FIELDS", "PLAN_GROUP_FILES", "PartitionTriggers", "needing_work", "plan_streamed"]
