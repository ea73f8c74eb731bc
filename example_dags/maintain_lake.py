"""Maintain every Delta table under a prefix, each as its health asks: one mapped task per table found.

``find_tables`` lists the prefix (the directories holding a ``_delta_log``, up to three levels down) with the
``deltalite`` connection's credentials; ``maintain`` is `DeltaMaintenanceOperator` mapped over the tables: each task
measures its table's health and plans in the worker, returns at once when the plan is empty (no Spark), and
otherwise runs the planned actions on Spark (``spark_default``: ``local[*]`` unless defined; a ``spark_connect``
connection runs them over Spark Connect). ``summary`` prints one line per table from the tasks' XCom.

Everything comes from DAG params: ``airflow dags test deltalite_maintain_lake -c '{"prefix": "s3://lake/warehouse",
"deltalite_conn_id": "lake", "policy": {"max_rewrite_bytes_per_run": 53687091200}}'``.

Needs Airflow 3.0 or later (the ``airflow.sdk`` authoring interface), as the provider does.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.sdk import Param, dag, task

from airflow_provider_deltalite.operators.maintenance import DeltaMaintenanceOperator


@dag(
    dag_id="deltalite_maintain_lake",
    schedule="0 3 * * *",
    start_date=dt.datetime(2026, 11, 1, tzinfo=dt.UTC),
    catchup=False,
    # the policy reaches the operator as a dict, not as its string rendering
    render_template_as_native_obj=True,
    params={
        "prefix": Param("/tmp/deltalite-example", type="string", description="path or URI holding the tables"),
        "deltalite_conn_id": Param("", type="string", description="deltalite connection; empty: none"),
        "spark_conn_id": Param("spark_default", type="string"),
        "policy": Param({}, type="object", description="MaintenancePolicy keys; {}: the defaults"),
    },
    tags=["deltalite", "example"],
)
def deltalite_maintain_lake() -> None:
    @task
    def find_tables(prefix: str, deltalite_conn_id: str) -> list[str]:
        from airflow_provider_deltalite.hooks.deltalite import DeltaLiteHook
        from airflow_provider_deltalite.maintenance.discovery import find_delta_tables

        hook = DeltaLiteHook(deltalite_conn_id or None)
        uri = hook.resolve_table_uri(prefix)
        return find_delta_tables(uri, hook.get_storage_options(uri))

    tables = find_tables("{{ params.prefix }}", "{{ params.deltalite_conn_id }}")
    maintain = DeltaMaintenanceOperator.partial(
        task_id="maintain",
        deltalite_conn_id="{{ params.deltalite_conn_id }}",
        spark_conn_id="{{ params.spark_conn_id }}",
        policy="{{ params.policy }}",
    ).expand(table_uri=tables)

    @task
    def summary(results: list[dict[str, Any]]) -> list[str]:
        lines = []
        for result in results:
            plan = result["plan"]
            before, after = result["healthBefore"], result["healthAfter"]
            actions = ", ".join(a["operation"] for a in plan["actions"]) or "nothing"
            lines.append(
                f"{plan['tableUri']}: {actions}; files {before['files']} -> {after['files']}, "
                f"small files {before['smallFiles']} -> {after['smallFiles']}"
                + (f" ({result['skippedReason']})" if result["skippedReason"] else "")
            )
        print("\n".join(lines))
        return lines

    summary(maintain.output)


deltalite_maintain_lake()
