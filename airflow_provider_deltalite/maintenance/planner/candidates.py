"""The rewrites a table could use, partition by partition, before cooldowns and budgets: what `decide` ranks.

Each candidate is one operation on one partition (or on the whole table: liquid clustering, an unpartitioned table)
with its options, its reasons and an estimate from the operation's own planner (`plan_optimize`, `plan_zorder`,
`plan_clustering`), so no data file is read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_deltalite.engine.clustering_domain import CLUSTERING_PROVIDER, clustering_spec
from airflow_provider_deltalite.engine.row_tracking import num_records
from airflow_provider_deltalite.engine.snapshot import Snapshot
from airflow_provider_deltalite.maintenance.clustering.liquid import cube_of, plan_clustering
from airflow_provider_deltalite.maintenance.clustering.runs import TAG_COLUMNS, TAG_CURVE
from airflow_provider_deltalite.maintenance.clustering.zorder import plan_zorder
from airflow_provider_deltalite.maintenance.health.metrics import ColumnClustering, TableHealth
from airflow_provider_deltalite.maintenance.optimize import plan_optimize
from airflow_provider_deltalite.maintenance.planner.plan import Estimate, Reason
from airflow_provider_deltalite.maintenance.planner.policy import MaintenancePolicy
from airflow_provider_deltalite.maintenance.planner.where import (
    MAX_PARTITIONS_PER_PREDICATE,
    logical_names,
    partitions_predicate,
)
from airflow_provider_deltalite.maintenance.wording import count, human_size


def partition_label(values: Mapping[str, str | None], logical: Mapping[str, str] | None = None) -> str:
    """``partition date=2026-11-01/kind=null`` (``the table`` when unpartitioned), with the logical column names
    (``logical``: physical name -> logical name, under column mapping)."""
    if not values:
        return "the table"
    names = logical or {}
    return "partition " + "/".join(f"{names.get(k, k)}={'null' if v is None else v}" for k, v in values.items())


@dataclass(frozen=True)
class Candidate:
    """One operation on one partition (``{}``: the whole table), as `decide` ranks it against the budget."""

    operation: str
    partition: dict[str, str | None]
    options: dict[str, Any]
    reasons: tuple[Reason, ...]
    estimate: Estimate
    fragments_removed: int  # fragments among the files the rewrite removes: the benefit the budget ranks by
    label: str = "the table"  # `partition_label` of the partition, for the budget's reason

    @property
    def usefulness(self) -> float:
        """Fragments removed per byte rewritten."""
        return self.fragments_removed / max(self.estimate.bytes_read, 1)


@dataclass(frozen=True)
class _Partition:
    values: dict[str, str | None]
    files: list[int]


def rewrite_candidates(health: TableHealth, snapshot: Snapshot, policy: MaintenancePolicy) -> list[Candidate]:
    """Every rewrite the thresholds call for (see docs/maintenance-planner.md): clustering on a liquid table; else
    per partition Z-order (when there are Z-order columns), or compaction, or a DV purge (in that order of precedence:
    a Z-order rewrites every file of its partition, a compaction every file a purge would). ``policy`` is resolved
    (`decide.resolve_policy`): its sizes are the table's where it left them unset."""
    files = snapshot.files
    sizes = [int(s) for s in files.column("size").to_pylist()]
    records = files.column("numRecords").to_pylist()
    dvs = files.column("deletionVector").to_pylist()
    raw_pv = files.column("partitionValues").to_pylist()
    fragment_size = int(policy.target_file_size or 1) / policy.fragment_ratio
    spec = clustering_spec(snapshot)
    if spec is not None and spec.columns:
        return _cluster_candidates(health, snapshot, policy, fragment_size)
    logical = logical_names(snapshot.partition_columns, snapshot.partition_physical_names)
    partitions: dict[tuple, _Partition] = {}
    for i, pv in enumerate(raw_pv):
        values = _pv_dict(pv)
        partitions.setdefault(tuple(sorted(values.items(), key=lambda kv: kv[0])), _Partition(values, [])).files.append(
            i
        )
    by_values = {_key(p.partition_values): p for p in health.partitions}
    zorder_columns = policy.zorder_columns
    tags = files.column("tags").to_pylist() if zorder_columns else []
    columns_tag = json.dumps(list(zorder_columns or ()), separators=(",", ":"))
    ordered = sorted(partitions, key=lambda k: [("" if v is None else "\x01" + v) for _, v in k])
    out: list[Candidate | None] = []
    for first in range(0, len(ordered), MAX_PARTITIONS_PER_PREDICATE):
        chunk = ordered[first : first + MAX_PARTITIONS_PER_PREDICATE]
        # the operations' planners run once per chunk of partitions, and only when one of them needs it: memory
        # holds one chunk's files, and a table that needs nothing costs no plan
        plans = _ChunkPlans(snapshot, partitions_predicate([partitions[k].values for k in chunk], logical), policy)
        out.extend(
            _partition_candidates(
                plans, policy, partitions[k], k, logical, tags, columns_tag, by_values.get(k), sizes, records, dvs
            )
            for k in chunk
        )
    return [c for c in out if c is not None]


def _partition_candidates(
    plans: _ChunkPlans,
    policy: MaintenancePolicy,
    part: _Partition,
    key: tuple,
    logical: Mapping[str, str],
    tags: list[Any],
    columns_tag: str,
    health: Any,
    sizes: list[int],
    records: list[Any],
    dvs: list[Any],
) -> Candidate | None:
    """The one rewrite a partition needs, in precedence order (see `rewrite_candidates`), or None."""
    target = int(policy.target_file_size or 1)  # resolved by decide
    ratio = policy.max_deleted_rows_ratio
    fragment_size = target / policy.fragment_ratio
    where = partitions_predicate([part.values], logical)
    label = partition_label(part.values, logical)
    if policy.zorder_columns:
        candidate = _zorder_candidate(plans, policy, part, key, where, label, tags, columns_tag, health, fragment_size)
        if candidate is not None:
            return candidate
    fragments = sum(1 for i in part.files if sizes[i] < fragment_size)
    bins = plans.bins("optimize", key) if fragments >= policy.min_input_files else []
    if bins:
        estimate, removed = _estimate(bins, len(bins), fragment_size)
        return compaction_candidate(policy, part.values, logical, fragments, estimate, removed)
    over = [i for i in part.files if dvs[i] is not None and _deleted_share(dvs[i], records[i]) > ratio]
    bins = plans.bins("purge", key) if over else []
    if bins:
        options = {"where": where, "target_size": target, "min_file_size": 1, "max_deleted_rows_ratio": ratio}
        worst = max(_deleted_share(dvs[i], records[i]) for i in over)
        reason = Reason(
            "files_over_deleted_rows_ratio",
            len(over),
            "max_deleted_rows_ratio",
            ratio,
            f"{label}: {count(len(over), 'file')} whose deletion vectors remove more than "
            f"max_deleted_rows_ratio={ratio:g} of their rows (up to {worst:.1%})",
        )
        return _rewrite("purge", part.values, options, (reason,), bins, len(bins), fragment_size, label)
    return None


def compaction_candidate(
    policy: MaintenancePolicy,
    values: dict[str, str | None],
    logical: Mapping[str, str],
    fragments: int,
    estimate: Estimate,
    fragments_removed: int,
) -> Candidate:
    """The compaction of a partition of ``fragments`` fragments whose bins the estimate sums (``policy`` resolved)."""
    target = int(policy.target_file_size or 1)
    minimum = int(policy.min_file_size or target)
    fragment_size = target / policy.fragment_ratio
    where = partitions_predicate([values], logical)
    label = partition_label(values, logical)
    ratio = policy.max_deleted_rows_ratio
    options = {"where": where, "target_size": target, "min_file_size": minimum, "max_deleted_rows_ratio": ratio}
    reason = Reason(
        "fragments",
        fragments,
        "min_input_files",
        policy.min_input_files,
        f"{label}: {fragments} fragments (files below {human_size(fragment_size)}, "
        f"target_file_size / fragment_ratio), at least min_input_files={policy.min_input_files}",
    )
    return Candidate("optimize", values, options, (reason,), estimate, fragments_removed, label)


class _ChunkPlans:
    """The OPTIMIZE and Z-order planners' bins for one chunk of partitions (``where`` selects them), each computed
    on first use, per partition."""

    def __init__(self, snapshot: Snapshot, where: str | None, policy: MaintenancePolicy) -> None:
        self.snapshot, self.where, self.policy = snapshot, where, policy
        self._plans: dict[str, dict[tuple, list[list[dict[str, Any]]]]] = {}

    def bins(self, kind: str, key: tuple) -> list[list[dict[str, Any]]]:
        """``kind``: ``optimize`` (compaction), ``purge`` (``min_file_size=1``) or ``zorder:<curve>``."""
        if kind not in self._plans:
            policy = self.policy
            bins: Sequence[Any]
            target = int(policy.target_file_size or 1)
            if kind.startswith("zorder:"):
                columns = list(policy.zorder_columns or ())
                curve = kind.partition(":")[2]
                bins = plan_zorder(self.snapshot, columns, curve=curve, where=self.where, target_size=target).bins
            else:
                smallest = int(policy.min_file_size or target) if kind == "optimize" else 1
                bins = plan_optimize(
                    self.snapshot,
                    where=self.where,
                    target_size=target,
                    min_file_size=smallest,
                    max_deleted_rows_ratio=policy.max_deleted_rows_ratio,
                ).bins
            self._plans[kind] = _bins_by_partition(bins)
        return self._plans[kind].get(key, [])


def _bins_by_partition(bins: Sequence[Any]) -> dict[tuple, list[list[dict[str, Any]]]]:
    out: dict[tuple, list[list[dict[str, Any]]]] = {}
    for b in bins:
        out.setdefault(_key(b.partition_values), []).append(list(b.files))
    return out


def _zorder_candidate(
    plans: _ChunkPlans,
    policy: MaintenancePolicy,
    part: _Partition,
    key: tuple,
    where: str | None,
    label: str,
    tags: list[Any],
    columns_tag: str,
    health: Any,
    fragment_size: float,
) -> Candidate | None:
    columns = list(policy.zorder_columns or ())
    clustered = [i for i in part.files if _tag(tags[i], TAG_COLUMNS) == columns_tag]
    fresh = len(part.files) - len(clustered)
    curves = sorted({_tag(tags[i], TAG_CURVE) or "zorder" for i in clustered})
    curve = curves[0] if len(curves) == 1 else "zorder"  # the curve the partition is clustered on already
    reasons = _unclustered_reasons(policy, f"{label}: {fresh} files not yet Z-ordered on {', '.join(columns)}", fresh)
    reasons.extend(point_query_reasons(policy, label, health.clustering if health is not None else ()))
    if not reasons:
        return None
    bins = plans.bins(f"zorder:{curve}", key)
    if not bins:
        return None  # every file is in one cube already: Z-order would skip the partition
    target = policy.target_file_size or 1  # resolved by decide: the table's when the policy leaves it unset
    options = {"columns": columns, "curve": curve, "where": where, "target_size": target}
    files_added = sum(max(1, round(sum(int(f["size"]) for f in b) / target)) for b in bins)
    return _rewrite("zorder", part.values, options, tuple(reasons), bins, files_added, fragment_size, label)


def _unclustered_reasons(policy: MaintenancePolicy, what: str, fresh: int) -> list[Reason]:
    """The reason to cluster when ``fresh`` files are in no cube on the current columns (none below the minimum)."""
    if fresh < policy.min_input_files:
        return []
    text = f"{what}, at least min_input_files={policy.min_input_files}"
    return [Reason("unclustered_files", fresh, "min_input_files", policy.min_input_files, text)]


def _cluster_candidates(
    health: TableHealth, snapshot: Snapshot, policy: MaintenancePolicy, fragment_size: float
) -> list[Candidate]:
    spec = clustering_spec(snapshot)
    assert spec is not None
    plan = plan_clustering(snapshot, spec, target_size=policy.target_file_size)
    names = list(spec.names)
    providers = snapshot.files.column("clusteringProvider").to_pylist()
    actions_tags = snapshot.files.column("tags").to_pylist()
    fresh = 0
    for provider, tags in zip(providers, actions_tags, strict=True):
        tagged = cube_of({"tags": dict(tags) if isinstance(tags, list) else tags or {}})
        if provider in (None, CLUSTERING_PROVIDER) and tagged is None:
            fresh += 1
    reasons = _unclustered_reasons(policy, f"the table: {fresh} files not yet clustered on {', '.join(names)}", fresh)
    reasons.extend(point_query_reasons(policy, "the table", health.clustering))
    bins = [list(b.files) for b in plan.bins]
    if not reasons or not bins:
        return []
    options = {"target_size": policy.target_file_size}
    return [_rewrite("cluster", {}, options, tuple(reasons), bins, sum(b.num_files for b in plan.bins), fragment_size)]


def point_query_reasons(policy: MaintenancePolicy, label: str, clustering: Sequence[ColumnClustering]) -> list[Reason]:
    """A reason to maintain ``label`` (a table or partition) for each clustered column on which a point query reads
    more files on average than the policy's ``max_point_query_files`` allows."""
    limit = policy.max_point_query_files
    if limit is None:
        return []
    return [
        Reason(
            "point_query_files",
            c.point_query_files,
            "max_point_query_files",
            limit,
            f"{label}: a point query on {c.column} reads {c.point_query_files:.1f} files on average, "
            f"more than max_point_query_files={limit:g}",
        )
        for c in clustering
        if c.point_query_files is not None and c.point_query_files > limit
    ]


def _rewrite(
    operation: str,
    partition: dict[str, str | None],
    options: dict[str, Any],
    reasons: tuple[Reason, ...],
    bins: list[list[dict[str, Any]]],
    files_added: int,
    fragment_size: float,
    label: str = "the table",
) -> Candidate:
    estimate, fragments = _estimate(bins, files_added, fragment_size)
    return Candidate(operation, partition, options, reasons, estimate, fragments, label)


def _estimate(bins: list[list[dict[str, Any]]], files_added: int, fragment_size: float) -> tuple[Estimate, int]:
    """What rewriting ``bins`` reads, writes, removes and adds, and how many fragments it removes."""
    rewritten = [f for b in bins for f in b]
    read = sum(int(f["size"]) for f in rewritten)
    # rows a deletion vector removes are not written again: take their share of each file's bytes off
    deleted = 0.0
    for f in rewritten:
        if f.get("deletionVector"):
            records = num_records(f)  # without a row count the share is unknown: assume none
            if records:
                deleted += int(f["size"]) * _deleted_share(f["deletionVector"], records)
    estimate = Estimate(
        bytes_read=read,
        bytes_written=read - round(deleted),
        files_removed=len(rewritten),
        files_added=files_added,
    )
    fragments = sum(1 for f in rewritten if int(f["size"]) < fragment_size)
    return estimate, fragments


def _deleted_share(dv: Mapping[str, Any] | None, records: int | None) -> float:
    """The share of a file's rows its deletion vector removes (1.0 without a row count: unknown, rewrite it)."""
    if not dv:
        return 0.0
    if not records:
        return 1.0
    return min(1.0, (dv.get("cardinality") or 0) / records)


def _tag(tags: Any, name: str) -> str | None:
    if isinstance(tags, list):
        tags = dict(tags)
    return (tags or {}).get(name)


def _pv_dict(pv: Any) -> dict[str, str | None]:
    if isinstance(pv, list):
        return {k: (None if v == "" else v) for k, v in pv}
    return {k: (None if v == "" else v) for k, v in (pv or {}).items()}


def _key(values: Mapping[str, str | None]) -> tuple:
    return tuple(sorted(((k, None if v == "" else v) for k, v in values.items()), key=lambda kv: kv[0]))
