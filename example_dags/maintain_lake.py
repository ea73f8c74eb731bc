"""Maintain every Delta table under one or more prefixes within one budget: the tables that gain most per byte first.

``plan`` runs in the worker without a JVM: it lists the prefixes (the directories holding a ``_delta_log``, up to
three levels down) with the ``deltalite`` connection's credentials, measures every table's health in parallel
threads, and plans the lake once (`plan_lake`): every table's actions ranked by gain per byte rewritten and cut at
the budget, with the lake policy's pins, exclusions and cooldowns. Its XCom is the lake plan. ``maintain`` is
`DeltaMaintenanceOperator` mapped over the chosen tables only, each with its share of the budget
(``max_rewrite_bytes_per_run`` and ``max_files_deleted_per_run`` in its policy): it plans its table again in the
worker and runs the actions on Spark (``spark_default``: ``local[*]`` unless defined; a ``spark_connect`` connection
runs them over Spark Connect). ``summary`` prints one line per table: what ran, or why the table was not chosen
(budget, cooldown, nothing to do, excluded, error).

Everything comes from DAG params: ``airflow dags test deltalite_maintain_lake -c '{"prefixes": ["s3://lake/sales",
"s3://lake/events"], "deltalite_conn_id": "lake", "budget_bytes": 536870912000, "policy": {"tables":
{"s3://lake/events": {"priority": "pin"}}}, "history_uri": "s3://lake/_deltalite_history"}'``. With a history table,
every operation appends a row to it and the plan's wall-time estimates use the rewrite speed it observed.

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
    # the policy and the budget reach the tasks as a dict and numbers, not as their string renderings
    render_template_as_native_obj=True,
    params={
        "prefixes": Param(["/tmp/deltalite-example"], type="array", description="paths or URIs holding the tables"),
        "deltalite_conn_id": Param("", type="string", description="deltalite connection; empty: none"),
        "spark_conn_id": Param("spark_default", type="string"),
        "policy": Param({}, type="object", description="lake policy; {}: the defaults"),
        "budget_bytes": Param(None, type=["null", "integer"], description="bytes all rewrites may read; null: none"),
        "budget_files": Param(None, type=["null", "integer"], description="files all VACUUMs may delete; null: none"),
        "budget_seconds": Param(None, type=["null", "number"], description="estimated wall time; null: none"),
        "history_uri": Param("", type="string", description="operations history table; empty: the connection's"),
    },
    tags=["deltalite", "example"],
)
def deltalite_maintain_lake() -> None:
    @task
    def plan(
        prefixes: list[str],
        deltalite_conn_id: str,
        policy: dict[str, Any],
        budget_bytes: int | None,
        budget_files: int | None,
        budget_seconds: float | None,
        history_uri: str,
    ) -> dict[str, Any]:
        from airflow_provider_deltalite.hooks.deltalite import DeltaLiteHook
        from airflow_provider_deltalite.maintenance.planner.lake_policy import LakeBudget, LakePolicy
        from airflow_provider_deltalite.maintenance.planner.lake_prefixes import plan_prefixes

        # bad input (a budget of zero or below, an unknown policy key, a history that is no history table) fails
        # here, before any table is read
        budget = LakeBudget(budget_bytes, budget_files, budget_seconds)
        lake_policy = LakePolicy.from_value(policy)
        hook = DeltaLiteHook(deltalite_conn_id or None)
        history = hook.resolve_table_uri(history_uri) if history_uri else hook.history_uri()
        prefixes = [prefixes] if isinstance(prefixes, str) else prefixes
        lake_plan, tables = plan_prefixes(
            [hook.resolve_table_uri(p) for p in prefixes],
            lake_policy,
            budget,
            storage_options=hook.get_storage_options,
            history_uri=history,
            executor="spark",  # the mapped tasks run their actions on Spark
        )
        if not tables:
            # unpaused on the default prefix, or a prefix that is gone: one line and a skipped run, not a failure
            from airflow.providers.common.compat.sdk import AirflowSkipException

            raise AirflowSkipException(
                f"no Delta table under {', '.join(prefixes)}; skipping this run (set the DAG param prefixes)"
            )
        return lake_plan.to_dict()

    @task
    def chosen(lake_plan: dict[str, Any]) -> list[dict[str, Any]]:
        # one mapped task per chosen table, with its policy holding its share of the budget
        return [{"table_uri": t["tableUri"], "policy": t["policy"]} for t in lake_plan["tables"] if t["chosen"]]

    lake_plan = plan(
        "{{ params.prefixes }}",
        "{{ params.deltalite_conn_id }}",
        "{{ params.policy }}",
        "{{ params.budget_bytes }}",
        "{{ params.budget_files }}",
        "{{ params.budget_seconds }}",
        "{{ params.history_uri }}",
    )
    maintain = DeltaMaintenanceOperator.partial(
        task_id="maintain",
        deltalite_conn_id="{{ params.deltalite_conn_id }}",
        spark_conn_id="{{ params.spark_conn_id }}",
        history_uri="{{ params.history_uri }}",
    ).expand_kwargs(chosen(lake_plan))

    # after the mapped maintenance, skipped or not; skipped itself when the plan was (no table under the prefixes)
    @task(trigger_rule="none_failed_min_one_success")
    def summary(lake_plan: dict[str, Any], results: list[dict[str, Any]] | None) -> list[str]:
        ran = {r["plan"]["tableUri"]: r for r in results or []}
        lines = []
        for table in lake_plan["tables"]:
            uri = table["tableUri"]
            result = ran.get(uri)
            if result is None:
                why = "not run" if table["chosen"] else table["reason"]
                lines.append(f"{uri}: {table['status']}: {why}")
                continue
            before, after = result["healthBefore"], result["healthAfter"]
            actions = ", ".join(a["operation"] for a in result["plan"]["actions"])
            if not actions:  # the table changed since the lake was planned: its own plan found nothing to do
                lines.append(f"{uri}: chosen: skipped ({result['skippedReason'] or 'nothing to do'})")
                continue
            lines.append(
                f"{uri}: chosen: {actions}; files {before['files']} -> {after['files']}"
                + (f" ({result['skippedReason']})" if result["skippedReason"] else "")
            )
        print("\n".join(lines))
        return lines

    summary(lake_plan, maintain.output)


deltalite_maintain_lake()
