"""The maintenance planner: decide from a table's health which maintenance to run, within budgets, and run it.

`plan_maintenance` measures a table's health (`maintenance.health`) and decides (`decide`) under a
`MaintenancePolicy`: from one streamed pass over the log and pruned replays of the partitions that need work
(`streamed`), or from the snapshot the caller passes. `run_plan` runs the plan's actions in order through the
maintenance operations. `plan_lake` ranks many tables' plans within one budget (`lake`). Planning reads the log only
(no data file, no JVM), so the Airflow operator plans in its worker and hands the plan to Spark.

Example:
    >>> plan = plan_maintenance(DeltaTable("/data/events"), MaintenancePolicy(max_rewrite_bytes_per_run=10 << 30))
    ... # doctest: +SKIP
    >>> [a.operation for a in plan.actions]  # doctest: +SKIP
    ['optimize', 'vacuum']
    >>> run_plan(DeltaTable("/data/events"), plan).to_dict()  # doctest: +SKIP
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from airflow_provider_deltalite.maintenance.health.compute import table_health
from airflow_provider_deltalite.maintenance.planner.decide import decide
from airflow_provider_deltalite.maintenance.planner.lake import LakePlan, chosen_plan, measure_lake, plan_lake
from airflow_provider_deltalite.maintenance.planner.lake_policy import LakeBudget, LakePolicy
from airflow_provider_deltalite.maintenance.planner.plan import (
    OPERATIONS,
    DeferredAction,
    Estimate,
    MaintenancePlan,
    PlannedAction,
    Reason,
)
from airflow_provider_deltalite.maintenance.planner.policy import MaintenancePolicy
from airflow_provider_deltalite.maintenance.planner.run import ActionRun, MaintenanceRun, run_plan
from airflow_provider_deltalite.maintenance.planner.streamed import plan_streamed

if TYPE_CHECKING:
    from airflow_provider_deltalite.engine.snapshot import Snapshot
    from airflow_provider_deltalite.engine.table import Table
    from airflow_provider_deltalite.maintenance.health.metrics import TableHealth

__all__ = [
    "OPERATIONS",
    "ActionRun",
    "DeferredAction",
    "Estimate",
    "LakeBudget",
    "LakePlan",
    "LakePolicy",
    "MaintenancePlan",
    "MaintenancePolicy",
    "MaintenanceRun",
    "PlannedAction",
    "Reason",
    "chosen_plan",
    "decide",
    "health_and_plan",
    "measure_lake",
    "plan_lake",
    "plan_maintenance",
    "policy_health",
    "run_plan",
]


def plan_maintenance(
    table: Table,
    policy: MaintenancePolicy | None = None,
    *,
    snapshot: Snapshot | None = None,
    now: int | None = None,
    health: TableHealth | None = None,
    tasks: Any = None,
) -> MaintenancePlan:
    """Which maintenance ``table`` needs now, why, and what it should cost (nothing is written).

    Args:
        table: the table.
        policy: thresholds, budgets and cooldowns (default: `MaintenancePolicy()`, the anchors' defaults).
        snapshot: the snapshot to plan on, when the caller has loaded it (default: the latest, streamed: the table's
            files are never held at once, see `streamed`).
        now: epoch milliseconds of "now" for cooldowns and retention (default: the clock).
        health: the snapshot's health when the caller has measured it already (default: measured here, at ``now``).
        tasks: the Spark executor (a `checkpoint_tasks.CheckpointTaskRunner`): without ``snapshot``, a checkpoint of
            at least its ``checkpoint_task_bytes`` is read by its tasks (`streamed.plan_streamed`); the same plan.

    Returns:
        MaintenancePlan; ``plan.is_empty`` when the table needs nothing.

    Raises:
        InvalidArgument: the policy's ``zorder_columns`` name a column the table cannot be Z-ordered on.
        TableNotFound, CorruptLog, ...: the table cannot be read.
    """
    now = int(time.time() * 1000) if now is None else now
    policy = policy or MaintenancePolicy()
    if snapshot is None and health is None:
        return plan_streamed(table, policy, now, *_health_settings(policy), tasks=tasks)[1]
    snapshot = table.planning_snapshot(snapshot)
    if health is None:
        health = policy_health(table, policy, snapshot=snapshot, now=now)
    return decide(health, snapshot, policy, now)


def health_and_plan(
    table: Table,
    policy: MaintenancePolicy | None = None,
    *,
    snapshot: Snapshot | None = None,
    now: int | None = None,
    tasks: Any = None,
) -> tuple[TableHealth, MaintenancePlan]:
    """The table's health as ``policy`` sees it (`policy_health`) and the plan made from it, on one snapshot at one
    "now": what the CLI prints and the operator returns as the health before a run (``tasks``: as
    `plan_maintenance`'s)."""
    now = int(time.time() * 1000) if now is None else now
    policy = policy or MaintenancePolicy()
    if snapshot is None:
        return plan_streamed(table, policy, now, *_health_settings(policy), tasks=tasks)
    snapshot = table.planning_snapshot(snapshot)
    health = policy_health(table, policy, snapshot=snapshot, now=now)
    return health, plan_maintenance(table, policy, snapshot=snapshot, now=now, health=health)


def policy_health(
    table: Table,
    policy: MaintenancePolicy | None = None,
    *,
    snapshot: Snapshot | None = None,
    now: int | None = None,
    tasks: Any = None,
) -> TableHealth:
    """`table_health` measured as ``policy`` sees the table: small files below its ``min_file_size`` (else its
    ``target_file_size``, else OPTIMIZE's default), clustering on its ``zorder_columns`` (else the table's own)."""
    columns, minimum = _health_settings(policy or MaintenancePolicy())
    return table_health(table, snapshot=snapshot, now=now, columns=columns, min_file_size=minimum, tasks=tasks)


def _health_settings(policy: MaintenancePolicy) -> tuple[list[str] | None, int | None]:
    columns = list(policy.zorder_columns) if policy.zorder_columns else None
    minimum = policy.min_file_size if policy.min_file_size is not None else policy.target_file_size
    return columns, minimum
