"""History rows of a lake run's actions that the budget held back (outcome ``deferred by budget``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_deltalite.maintenance.history.record import DEFERRED_BY_BUDGET, health_figures, timestamp
from airflow_provider_deltalite.version import __version__


def deferred_rows(plan: Any, tables: Mapping[str, Any], run_id: str | None, now_ms: int) -> list[dict[str, Any]]:
    """One row per action of ``plan`` (a `LakePlan`) that the budget did not admit, with its table's health before
    and the estimate's bytes and files as what it would have read, written and deleted."""
    rows = []
    for action in plan.actions:
        if action.chosen or not action.reason.startswith("budget"):
            continue
        table = tables.get(action.table_uri)
        health = getattr(table, "health", None)
        e = action.estimate
        rows.append(
            {
                "table_uri": action.table_uri,
                "table_id": None,
                "run_id": run_id,
                "operation": action.operation,
                "start_time": timestamp(now_ms),
                "end_time": timestamp(now_ms),
                "read_version": getattr(health, "version", None),
                "files_read": e.files_removed,
                "bytes_read": e.bytes_read,
                "files_written": e.files_added,
                "bytes_written": e.bytes_written,
                "files_deleted": e.files_deleted,
                "outcome": DEFERRED_BY_BUDGET,
                "error_message": action.reason,
                "deltalite_version": __version__,
                **health_figures(health, "before"),
            }
        )
    return rows
