"""Running a `MaintenancePlan`: each action in order through the maintenance operation it names, with its options.

``purge``, ``optimize`` and ``cluster`` run `optimize` (a liquid-clustered table clusters there), ``zorder`` runs
`zorder`, ``vacuum`` runs `vacuum`, ``checkpoint`` runs `checkpoint`. Each action's options go through the operation's
options object (`OptimizeOptions.from_json` and the others), so a plan that crossed a process boundary as JSON is
validated exactly as the CLI's options are. The run stops at the first action that fails: the error keeps its type
and says which action failed and which ones completed before it.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from airflow_provider_deltalite.engine.errors import DeltaLiteError
from airflow_provider_deltalite.engine.table import Table
from airflow_provider_deltalite.maintenance.executor import Executor
from airflow_provider_deltalite.maintenance.health.metrics import plain
from airflow_provider_deltalite.maintenance.history.record import run_context
from airflow_provider_deltalite.maintenance.options import OptimizeOptions, VacuumOptions, ZOrderOptions
from airflow_provider_deltalite.maintenance.planner.plan import MaintenancePlan, PlannedAction


@dataclass(frozen=True)
class ActionRun:
    """One action of the plan as it ran: its operation, the options it ran with, and the operation's stats dict."""

    operation: str
    options: dict[str, Any]
    stats: dict[str, Any]
    start_time_ms: int
    end_time_ms: int


@dataclass(frozen=True)
class MaintenanceRun:
    """What `run_plan` did: every action of the plan, in order, with its stats."""

    table_uri: str
    plan_version: int
    actions: tuple[ActionRun, ...]
    start_time_ms: int
    end_time_ms: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form (camelCase keys; each action's ``stats`` as its operation's ``to_dict``)."""
        return plain(self)


def run_plan(
    table: Table,
    plan: MaintenancePlan,
    *,
    executor: Executor | None = None,
    max_concurrent_tasks: int | None = None,
    on_action: Callable[[PlannedAction], None] | None = None,
    history_uri: str | None = None,
    run_id: str | None = None,
) -> MaintenanceRun:
    """Run ``plan``'s actions on ``table`` in order (see the module docstring).

    Args:
        table: the table the plan was made for.
        plan: from `plan_maintenance` (or `MaintenancePlan.from_dict`).
        executor: where the rewrites, VACUUM's listing and its deletes run (default: each operation's own local
            executor); the caller keeps it open and closes it.
        max_concurrent_tasks: threads of the default local executors.
        on_action: called before each action starts (progress reporting).
        history_uri: the operations history table each action appends its row to (`maintenance.history`).
        run_id: the id the rows of this run share (default: a new UUID when there is a history).

    Returns:
        MaintenanceRun.

    Raises:
        DeltaLiteError: the first action that failed, with its own type; the message ends with which action it was
            and which completed before it, and the error carries ``action`` (the operation) and ``completed`` (the
            operations that ran).
    """
    start = int(time.time() * 1000)
    if history_uri and run_id is None:
        run_id = str(uuid.uuid4())
    done: list[ActionRun] = []
    for index, action in enumerate(plan.actions):
        if on_action is not None:
            on_action(action)
        began = int(time.time() * 1000)
        if history_uri:
            action = replace(action, options={**action.options, "history_uri": history_uri})
        try:
            with run_context(run_id, action.operation):
                stats = _run_action(table, action, executor, max_concurrent_tasks)
        except DeltaLiteError as exc:
            before = ", ".join(a.operation for a in done) or "none"
            again = exc.extended(
                f"maintenance action {index + 1} of {len(plan.actions)} ({action.operation}) failed; "
                f"completed before it: {before}"
            )
            again.action = action.operation  # type: ignore[attr-defined]
            again.completed = tuple(a.operation for a in done)  # type: ignore[attr-defined]
            raise again from exc
        done.append(ActionRun(action.operation, dict(action.options), stats, began, int(time.time() * 1000)))
    return MaintenanceRun(plan.table_uri, plan.version, tuple(done), start, int(time.time() * 1000))


def _run_action(
    table: Table, action: PlannedAction, executor: Executor | None, max_concurrent_tasks: int | None
) -> dict[str, Any]:
    # the maintenance operations load here: planning alone (the Airflow worker's part) never needs them
    text = json.dumps(action.options)
    uri = table.uri
    operation = action.operation
    if operation in ("purge", "optimize", "cluster"):
        from airflow_provider_deltalite.maintenance.optimize import optimize

        options = OptimizeOptions.from_json(text, uri)
        return optimize(table, options, executor=executor, max_concurrent_tasks=max_concurrent_tasks).to_dict()
    if operation == "zorder":
        from airflow_provider_deltalite.maintenance.clustering.zorder import zorder

        zopts = ZOrderOptions.from_json(text, uri)
        return zorder(table, zopts, executor=executor, max_concurrent_tasks=max_concurrent_tasks).to_dict()
    if operation == "vacuum":
        from airflow_provider_deltalite.maintenance.vacuum import vacuum

        vopts = VacuumOptions.from_json(text, uri)
        return vacuum(table, vopts, executor=executor, max_concurrent_tasks=max_concurrent_tasks).to_dict()
    if operation == "checkpoint":
        from airflow_provider_deltalite.maintenance.checkpoint import checkpoint

        return checkpoint(table, history_uri=action.options.get("history_uri")).to_dict()
    raise AssertionError(f"unknown operation {operation!r}")  # MaintenancePlan.from_dict refuses it earlier
