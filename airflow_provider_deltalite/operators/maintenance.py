"""`DeltaMaintenanceOperator`: let deltalite decide what a Delta table needs, then run only that, as Spark work."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_deltalite.maintenance.maintain_options import MaintainOptions
from airflow_provider_deltalite.operators.base import DeltaLiteSparkJobOperator

if TYPE_CHECKING:
    from airflow_provider_deltalite.maintenance.planner import MaintenancePlan
    from airflow_provider_deltalite.table import DeltaTable

# Partitions kept per health dict in XCom (it lives in the metadata database): the worst by small files.
XCOM_PARTITION_LIMIT = 100


def policy_values(policy: Any) -> dict[str, Any]:
    """The policy keys of the operator's ``policy`` argument (see `MaintenancePolicy.from_value`)."""
    from airflow_provider_deltalite.maintenance.planner import MaintenancePolicy

    return MaintenancePolicy.from_value(policy).to_dict()


def xcom_health(health: Mapping[str, Any], limit: int = XCOM_PARTITION_LIMIT) -> dict[str, Any]:
    """A health dict (`TableHealth.to_dict`) for XCom: every table-level figure, and at most ``limit`` partitions,
    those with the most small files (then the most files; ties keep the health's order), with
    ``partitionsTruncated``."""
    from airflow_provider_deltalite.maintenance.health.metrics import worst_partition_indexes

    partitions = list(health.get("partitions") or [])
    kept = partitions
    if len(partitions) > limit:
        small, files = [p["smallFiles"] for p in partitions], [p["files"] for p in partitions]
        kept = [partitions[i] for i in sorted(worst_partition_indexes(small, files, limit))]
    return {**health, "partitions": kept, "partitionsTruncated": len(kept) < len(partitions)}


class DeltaMaintenanceOperator(DeltaLiteSparkJobOperator):
    """Maintain a Delta table as its health asks: plan in the worker (no JVM), run only the planned actions on Spark.

    In the worker, the table's health is measured and `plan_maintenance` decides with ``policy`` which of purge,
    OPTIMIZE, clustering, Z-order, VACUUM and checkpoint to run, within the policy's budgets and cooldowns. An empty
    plan ends the task at once without Spark (``skippedReason`` says why). Otherwise the Spark job (spark-submit, or
    this process over a ``spark_connect`` connection) runs the plan's actions as planned, each operation choosing
    its files on the newest snapshot within the action's partitions; then the health is measured again.

    The XCom ``return_value`` is ``{"plan": MaintenancePlan.to_dict(), "healthBefore": ..., "healthAfter": ...,
    "run": MaintenanceRun.to_dict() or None, "skippedReason": ...}``; each health dict holds the table-level
    figures and at most 100 partitions (those with the most small files) with ``partitionsTruncated``. The
    OpenLineage run facet carries the operation ``MAINTAIN``, the run's stats and the table-level health before and
    after. See `DeltaLiteSparkJobOperator` for the table, connection and Spark arguments (``preflight`` does not
    apply: planning is this operator's work).

    Args:
        policy: the `MaintenancePolicy` keys: a dict, JSON text (``"{{ params.policy | tojson }}"``), or the path of
            a policy file (JSON, or TOML ending in ``.toml``); unset: the defaults (templated).

    Example:
        >>> DeltaMaintenanceOperator(task_id="maintain", table_uri="events", deltalite_conn_id="lake",
        ...                          policy={"max_rewrite_bytes_per_run": 50 << 30})  # doctest: +SKIP
    """

    command = "maintain"
    options_class = MaintainOptions
    template_fields: Sequence[str] = (*DeltaLiteSparkJobOperator.template_fields, "policy")

    def __init__(self, *, policy: Mapping[str, Any] | str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.policy = policy
        self.maintenance_plan: MaintenancePlan | None = None
        self._health_before: dict[str, Any] | None = None

    def option_values(self) -> dict[str, Any]:
        return {"policy": policy_values(self.policy)}

    def has_threshold(self) -> bool:
        return True  # the plan decides what the job runs: it is always made here

    def plan(self, table: DeltaTable, options: MaintainOptions) -> tuple[dict[str, Any], str | None] | None:
        from airflow_provider_deltalite.maintenance.planner import MaintenancePolicy, health_and_plan

        # health as the policy sees the table (its minimum file size, its Z-order columns), before and after
        health, plan = health_and_plan(table, MaintenancePolicy.from_mapping(options.policy, table.uri))
        self.maintenance_plan = plan
        self._health_before = health.to_dict()
        if plan.is_empty:
            waiting = f"; {len(plan.deferred)} deferred" if plan.deferred else ""
            return {}, f"nothing to do: the plan of version {plan.version} has no action{waiting}"
        self._options = MaintainOptions(
            policy=plan.policy,
            actions=tuple(plan.to_dict()["actions"]),
            version=plan.version,
            planned_at=plan.planned_at,
            history_uri=options.history_uri,
        )
        return None

    def completed(self, result: dict[str, Any]) -> dict[str, Any]:
        plan, before = self.maintenance_plan, self._health_before
        assert plan is not None and before is not None  # plan() ran
        reason = result.pop("skippedReason")
        after = before
        if reason is None:  # the job ran: measure again
            from airflow_provider_deltalite.maintenance.planner import MaintenancePolicy, policy_health
            from airflow_provider_deltalite.table import DeltaTable

            assert self.resolved_table_uri is not None
            table = DeltaTable(self.resolved_table_uri, storage_options=self._storage_options)
            after = policy_health(table, MaintenancePolicy.from_mapping(plan.policy)).to_dict()
        return {
            "plan": plan.to_dict(),
            "healthBefore": xcom_health(before),
            "healthAfter": xcom_health(after),
            "run": result if reason is None else None,
            "skippedReason": reason,
        }


__all__ = ["DeltaMaintenanceOperator", "policy_values", "xcom_health"]
