"""The planner's decisions: from a table's health, its snapshot, a policy and "now" to a `MaintenancePlan`.

Pure: nothing is read but the snapshot already in memory, nothing is written, and the same inputs give the same plan.
The rules (docs/maintenance-planner.md has them with their anchors):

- **rewrites**, per partition (`candidates`): Z-order, compaction or a deletion-vector purge on a partitioned or plain
  table, clustering on a liquid-clustered one;
- **cooldowns**: no rewrite within ``optimize_cooldown_hours`` of the log's last OPTIMIZE (of any kind), no VACUUM
  within ``vacuum_cooldown_hours`` of the last VACUUM END, no checkpoint within ``checkpoint_cooldown_hours`` of the
  newest checkpoint;
- **budgets**: the rewrites are ranked by fragments removed per byte rewritten (most first, then fewer bytes, then
  partition order) and taken while they fit ``max_rewrite_bytes_per_run``, and each rewrite action carries its share
  of that budget as ``max_bytes_to_rewrite`` (`_budget_shares`), so the run stays within it even when files arrive
  after planning; VACUUM deletes at most ``max_files_deleted_per_run`` files (the oldest first);
- what the cooldowns and budgets hold back becomes a `DeferredAction` with the reason.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.clustering_domain import clustering_spec
from airflow_provider_deltalite.engine.errors import InvalidArgument
from airflow_provider_deltalite.engine.snapshot import Snapshot
from airflow_provider_deltalite.maintenance.clustering.zorder import validate_columns
from airflow_provider_deltalite.maintenance.health.metrics import TableHealth
from airflow_provider_deltalite.maintenance.planner.candidates import (
    Candidate,
    count,
    human_size,
    rewrite_candidates,
)
from airflow_provider_deltalite.maintenance.planner.plan import (
    OPERATIONS,
    DeferredAction,
    Estimate,
    MaintenancePlan,
    PlannedAction,
    Reason,
)
from airflow_provider_deltalite.maintenance.planner.policy import MaintenancePolicy
from airflow_provider_deltalite.maintenance.planner.where import (
    MAX_PARTITIONS_PER_PREDICATE,
    logical_names,
    partitions_predicate,
)
from airflow_provider_deltalite.maintenance.rewrites import resolve_sizes

HOUR_MS = 3_600_000
# Partitions one action's ``where`` names (more partitions make more actions of the same operation).
MAX_PARTITIONS_PER_ACTION = MAX_PARTITIONS_PER_PREDICATE


def resolve_policy(policy: MaintenancePolicy, health: TableHealth, snapshot: Snapshot) -> MaintenancePolicy:
    """The policy with every "the table's own" (None) key replaced by the table's value, as the plan records it.

    ``zorder_columns`` and ``max_point_query_files`` stay None when the table has no Z-order / the check is off.
    """
    target, _, _ = resolve_sizes(snapshot, policy.target_file_size, None, None, None)
    zorder_columns = policy.zorder_columns
    if zorder_columns is None and health.last_runs.zorder_columns and not _is_liquid(snapshot):
        try:  # the log's last Z-order may name a column the table no longer has: then there is none to keep up
            zorder_columns = validate_columns(snapshot, health.last_runs.zorder_columns)
        except InvalidArgument:
            zorder_columns = None
    return policy.replace(
        target_file_size=target,
        min_file_size=policy.min_file_size if policy.min_file_size is not None else target,
        zorder_columns=zorder_columns,
        max_commits_since_checkpoint=policy.max_commits_since_checkpoint or health.log.checkpoint_interval,
        retention_hours=health.tombstones.retention_hours if policy.retention_hours is None else policy.retention_hours,
    )


def _is_liquid(snapshot: Snapshot) -> bool:
    spec = clustering_spec(snapshot)
    return spec is not None and bool(spec.columns)


def decide(
    health: TableHealth,
    snapshot: Snapshot,
    policy: MaintenancePolicy,
    now: int,
    *,
    candidates_of: Callable[[MaintenancePolicy], list[Candidate]] | None = None,
    tombstones: pa.Table | None = None,
) -> MaintenancePlan:
    """The plan for ``snapshot`` (whose health is ``health``) under ``policy`` at ``now`` (epoch ms).

    A caller that planned without the table's files in memory (`streamed`, where ``snapshot`` holds none) passes
    the rewrite candidates (``candidates_of``, given the resolved policy) and the tombstones' ``deletionTimestamp``
    and ``size`` (``tombstones``); by default both come from ``snapshot``."""
    effective = resolve_policy(policy, health, snapshot)
    actions: list[PlannedAction] = []
    deferred: list[DeferredAction] = []
    candidates = candidates_of(effective) if candidates_of else rewrite_candidates(health, snapshot, effective)
    logical = logical_names(snapshot.partition_columns, snapshot.partition_physical_names)
    cooldown = _cooldown(
        "hours_since_optimize",
        health.last_runs.optimize_timestamp,
        effective.optimize_cooldown_hours,
        "optimize_cooldown_hours",
        now,
        "the last OPTIMIZE",
    )
    if candidates and cooldown is not None:
        for operation, group in _by_operation(candidates):
            deferred.append(_deferred(operation, group, (cooldown,)))
    elif candidates:
        taken, left = _within_budget(candidates, effective.max_rewrite_bytes_per_run)
        rewrites: list[PlannedAction] = []
        for operation, group in _by_operation(taken):
            for start in range(0, len(group), MAX_PARTITIONS_PER_ACTION):
                rewrites.append(_planned(operation, group[start : start + MAX_PARTITIONS_PER_ACTION], logical))
        actions.extend(_budget_shares(rewrites, effective.max_rewrite_bytes_per_run))
        for operation, group in _by_operation(left):
            deferred.append(_deferred(operation, group, tuple(_budget_reason(c, effective) for c in group)))
    stones = snapshot.tombstones if tombstones is None else tombstones
    vacuum = _vacuum(health, stones, effective, now, explicit_retention=policy.retention_hours is not None)
    actions.extend(vacuum[0])
    deferred.extend(vacuum[1])
    checkpoint = _checkpoint(health, snapshot, effective, now)
    actions.extend(checkpoint[0])
    deferred.extend(checkpoint[1])
    order = {op: i for i, op in enumerate(OPERATIONS)}
    actions.sort(key=lambda a: order[a.operation])
    deferred.sort(key=lambda d: order[d.operation])
    return MaintenancePlan(
        table_uri=snapshot.table_uri,
        version=snapshot.version,
        planned_at=now,
        policy=effective.to_dict(),
        actions=tuple(actions),
        deferred=tuple(deferred),
        total=_sum(a.estimate for a in actions),
    )


def _by_operation(candidates: Sequence[Candidate]) -> list[tuple[str, list[Candidate]]]:
    """Candidates grouped into one action per operation and options (``where`` aside), in `OPERATIONS` order."""
    groups: dict[tuple[str, str], list[Candidate]] = {}
    for c in candidates:
        options = json.dumps({k: v for k, v in c.options.items() if k != "where"}, sort_keys=True)
        groups.setdefault((c.operation, options), []).append(c)
    order = {op: i for i, op in enumerate(OPERATIONS)}
    keys = sorted(groups, key=lambda k: order[k[0]])  # stable: first appearance within an operation
    return [(k[0], groups[k]) for k in keys]


def _within_budget(candidates: list[Candidate], budget: int) -> tuple[list[Candidate], list[Candidate]]:
    """The most useful candidates that fit the budget (a candidate too large is skipped, smaller ones still fit);
    both lists keep the candidates' partition order."""
    ranked = sorted(
        range(len(candidates)), key=lambda i: (-candidates[i].usefulness, candidates[i].estimate.bytes_read, i)
    )
    used = 0
    chosen: set[int] = set()
    for i in ranked:
        cost = candidates[i].estimate.bytes_read
        if used + cost <= budget:
            chosen.add(i)
            used += cost
    return (
        [c for i, c in enumerate(candidates) if i in chosen],
        [c for i, c in enumerate(candidates) if i not in chosen],
    )


def _budget_shares(rewrites: list[PlannedAction], budget: int) -> list[PlannedAction]:
    """The rewrite actions (in run order) each with its share of ``budget`` as ``max_bytes_to_rewrite``.

    Each operation re-plans its bins on the newest snapshot when it runs, so files that arrived after planning would
    otherwise be rewritten on top of the budget. A share is the action's estimate plus an even part of what the plan
    left unused (the first actions take the odd bytes), so the shares sum to the budget: an append to a planned
    partition that grows its bins may still run, and all actions together never read more than the budget.
    """
    if not rewrites:
        return []
    spare = budget - sum(a.estimate.bytes_read for a in rewrites)  # _within_budget keeps it at or above 0
    each, odd = divmod(max(spare, 0), len(rewrites))
    shared = []
    for n, action in enumerate(rewrites):
        share = action.estimate.bytes_read + each + (1 if n < odd else 0)
        # at least one byte, which the option requires: only files of 0 bytes under a budget of 0 come to less
        options = {**action.options, "max_bytes_to_rewrite": max(share, 1)}
        shared.append(replace(action, options=options))
    return shared


def _budget_reason(candidate: Candidate, policy: MaintenancePolicy) -> Reason:
    return Reason(
        "bytes_read",
        candidate.estimate.bytes_read,
        "max_rewrite_bytes_per_run",
        policy.max_rewrite_bytes_per_run,
        f"{candidate.label}: rewriting {human_size(candidate.estimate.bytes_read)} does not fit "
        f"what is left of max_rewrite_bytes_per_run={human_size(policy.max_rewrite_bytes_per_run)} after more useful "
        f"partitions ({candidate.fragments_removed} fragments removed)",
    )


def _planned(operation: str, group: list[Candidate], logical: dict[str, str]) -> PlannedAction:
    options = dict(group[0].options)
    partitions = tuple(c.partition for c in group if c.partition)
    if "where" in options:
        options["where"] = partitions_predicate(list(partitions), logical) if partitions else None
    if not options.get("where"):
        options.pop("where", None)
    return PlannedAction(
        operation=operation,
        options=options,
        partitions=partitions,
        reasons=tuple(r for c in group for r in c.reasons),
        estimate=_sum(c.estimate for c in group),
    )


def _deferred(operation: str, group: list[Candidate], reasons: tuple[Reason, ...]) -> DeferredAction:
    return DeferredAction(
        operation=operation,
        partitions=tuple(c.partition for c in group if c.partition),
        reasons=reasons,
        estimate=_sum(c.estimate for c in group),
    )


def _cooldown(metric: str, last_ms: int | None, hours: float, key: str, now: int, what: str) -> Reason | None:
    """A cooldown reason when the last run is less than ``hours`` ago (None: no cooldown applies)."""
    if last_ms is None or hours <= 0:
        return None
    since = (now - last_ms) / HOUR_MS
    if since >= hours:
        return None
    return Reason(metric, round(since, 3), key, hours, f"{what} was {since:.1f} hours ago, within {key}={hours:g}")


def _vacuum(
    health: TableHealth, tombstones: pa.Table, policy: MaintenancePolicy, now: int, *, explicit_retention: bool
) -> tuple[list[PlannedAction], list[DeferredAction]]:
    stones = health.tombstones
    retention = float(policy.retention_hours or 0.0)
    if retention == stones.retention_hours:
        files, nbytes = stones.reclaimable_files, stones.reclaimable_bytes
    else:
        files, nbytes = _reclaimable(tombstones, now - round(retention * HOUR_MS))
    if files < policy.vacuum_min_reclaimable_files or (files == 0 and policy.vacuum_min_reclaimable_files > 0):
        return [], []
    lower = " at least" if policy.vacuum_mode == "full" else ""
    why = Reason(
        "reclaimable_tombstone_files",
        files,
        "vacuum_min_reclaimable_files",
        policy.vacuum_min_reclaimable_files,
        f"{count(files, 'removed file')} ({human_size(nbytes)}) past the {retention:g}-hour retention, at least "
        f"vacuum_min_reclaimable_files={policy.vacuum_min_reclaimable_files}"
        + ("; FULL also deletes files the log never referenced, so that is a lower bound" if lower else ""),
    )
    cooldown = _cooldown(
        "hours_since_vacuum",
        health.last_runs.vacuum_timestamp,
        policy.vacuum_cooldown_hours,
        "vacuum_cooldown_hours",
        now,
        "the last VACUUM",
    )
    if cooldown is not None:
        return [], [DeferredAction("vacuum", (), (why, cooldown), Estimate(files_deleted=files))]
    budget = policy.max_files_deleted_per_run
    planned: list[PlannedAction] = []
    left: list[DeferredAction] = []
    if budget > 0:
        options: dict[str, object] = {"mode": policy.vacuum_mode, "max_files_to_delete": budget}
        if explicit_retention:  # else VACUUM takes the table's own, as the plan assumed
            options["retention_hours"] = policy.retention_hours
        planned.append(PlannedAction("vacuum", options, (), (why,), Estimate(files_deleted=min(files, budget))))
    if files > budget:
        rest = files - budget
        over = Reason(
            "reclaimable_tombstone_files",
            files,
            "max_files_deleted_per_run",
            budget,
            f"{rest} of the {files} reclaimable files wait for a later run: max_files_deleted_per_run={budget}",
        )
        left.append(DeferredAction("vacuum", (), (over,), Estimate(files_deleted=rest)))
    return planned, left


def _reclaimable(stones: pa.Table, horizon_ms: int) -> tuple[int, int]:
    """Tombstones older than ``horizon_ms`` (files, bytes): VACUUM's reclaimable set for another retention."""
    if stones.num_rows == 0:
        return 0, 0
    old = pc.less(stones.column("deletionTimestamp"), horizon_ms)
    sizes = pc.filter(stones.column("size"), old)
    return int(pc.sum(pc.cast(old, "int64")).as_py() or 0), int(pc.sum(sizes).as_py() or 0)


def _checkpoint(
    health: TableHealth, snapshot: Snapshot, policy: MaintenancePolicy, now: int
) -> tuple[list[PlannedAction], list[DeferredAction]]:
    commits = health.log.commits_since_checkpoint
    threshold = int(policy.max_commits_since_checkpoint or health.log.checkpoint_interval)
    if commits < threshold:
        return [], []
    why = Reason(
        "commits_since_checkpoint",
        commits,
        "max_commits_since_checkpoint",
        threshold,
        f"{commits} commits since the newest checkpoint"
        + (f" (version {health.log.last_checkpoint_version})" if health.log.last_checkpoint_version is not None else "")
        + f", at least max_commits_since_checkpoint={threshold}",
    )
    cooldown = _cooldown(
        "hours_since_checkpoint",
        _checkpoint_time(snapshot),
        policy.checkpoint_cooldown_hours,
        "checkpoint_cooldown_hours",
        now,
        "the newest checkpoint",
    )
    if cooldown is not None:
        return [], [DeferredAction("checkpoint", (), (why, cooldown), Estimate())]
    return [PlannedAction("checkpoint", {}, (), (why,), Estimate())], []


def _checkpoint_time(snapshot: Snapshot) -> int | None:
    """When the newest checkpoint was written (its file's modification time; the segment listed it already)."""
    ref = snapshot.segment.checkpoint
    if ref is None:
        return None
    return max(f.info.modification_time for f in ref.files) if ref.files else None


def _sum(estimates: Iterable[Estimate]) -> Estimate:
    total = Estimate()
    for e in estimates:
        total = replace(
            total,
            bytes_read=total.bytes_read + e.bytes_read,
            bytes_written=total.bytes_written + e.bytes_written,
            files_removed=total.files_removed + e.files_removed,
            files_added=total.files_added + e.files_added,
            files_deleted=total.files_deleted + e.files_deleted,
        )
    return total
