"""Planning the lake under some prefixes: what `deltalite maintain-lake` and the example DAG's planning task share.

Check the history location, find the Delta tables under each prefix (`find_delta_tables`, each table once), measure
them in parallel (`measure_lake`), read the rewrite speeds the history observed, and plan (`plan_lake`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from airflow_provider_deltalite.maintenance.planner.lake import LakePlan, LakeTable, measure_lake, plan_lake
from airflow_provider_deltalite.maintenance.planner.lake_policy import LakeBudget, LakePolicy


def plan_prefixes(
    prefixes: Sequence[str],
    policy: LakePolicy,
    budget: LakeBudget,
    *,
    storage_options: Callable[[str], Mapping[str, Any]] | None = None,
    history_uri: str | None = None,
    executor: str | None = None,
    max_depth: int = 3,
    max_workers: int = 4,
    now: int | None = None,
) -> tuple[LakePlan, list[LakeTable]]:
    """The lake plan of every Delta table under ``prefixes``, and the tables as measured.

    Args:
        storage_options: the storage options of a URI (a prefix, a table, the history); default: none.
        history_uri: the operations history: checked first, and its observed rewrite speeds on ``executor`` (None:
            any executor) feed the wall-time estimates.

    Raises:
        InvalidArgument: the history location holds something that is not a history table (before any table is
            read).
        StorageError: a listing failed.
    """
    from airflow_provider_deltalite.engine.table import Table
    from airflow_provider_deltalite.maintenance.history import check_history_table
    from airflow_provider_deltalite.maintenance.history.speeds import rewrite_speeds

    def options(uri: str) -> Mapping[str, Any]:
        return storage_options(uri) if storage_options is not None else {}

    speeds = None
    if history_uri and check_history_table(history_uri, options(history_uri)) is not None:
        speeds = rewrite_speeds(history_uri, options(history_uri), executor=executor)
    uris = tables_under(prefixes, options, max_depth=max_depth)
    tables = measure_lake(
        uris, policy, max_workers=max_workers, now=now, open_table=lambda uri: Table(uri, options(uri))
    )
    return plan_lake(tables, policy, budget, now=now, bytes_per_second=speeds), tables


def tables_under(
    prefixes: Sequence[str], storage_options: Callable[[str], Mapping[str, Any]], *, max_depth: int = 3
) -> list[str]:
    """The Delta tables under each prefix (`find_delta_tables`), in the prefixes' order, each table once."""
    from airflow_provider_deltalite.maintenance.discovery import find_delta_tables

    uris: list[str] = []
    seen: set[str] = set()
    for prefix in prefixes:
        for uri in find_delta_tables(prefix, storage_options(prefix), max_depth=max_depth):
            if uri not in seen:
                seen.add(uri)
                uris.append(uri)
    return uris
