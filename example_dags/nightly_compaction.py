"""Nightly maintenance of one Delta table: compact small files, Z-order, then VACUUM.

Each step is a spark-submit of deltalite's job (``spark_default``: ``local[*]`` unless you define that connection).
Everything comes from DAG params, so ``airflow dags test deltalite_nightly_compaction -c '{"table_uri": "..."}'``
runs it as it is. ``check_table`` comes first: with no Delta table at ``table_uri`` (the placeholder default, or a
table not created yet) it logs one line and the run ends skipped, nothing started, nothing written. The optimize step
plans in the worker first and returns without starting Spark when fewer than ``min_small_files`` files need
compacting; its XCom (OptimizeStats) feeds the log line of the last task, which says "skipped" (and why) when
OPTIMIZE rewrote nothing.

Needs Airflow 3.0 or later (the ``airflow.sdk`` authoring interface), as the provider does.
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import Param, dag, task

from airflow_provider_deltalite.operators.optimize import OptimizeOperator
from airflow_provider_deltalite.operators.table_guard import skip_unless_table
from airflow_provider_deltalite.operators.vacuum import VacuumOperator
from airflow_provider_deltalite.operators.zorder import ZOrderOperator

# One place for the arguments every step shares; rendered per run from the params.
COMMON = {
    "table_uri": "{{ params.table_uri }}",
    "deltalite_conn_id": "{{ params.deltalite_conn_id }}",
    "spark_conn_id": "{{ params.spark_conn_id }}",
    "conf": "{{ params.spark_conf }}",
}


@dag(
    dag_id="deltalite_nightly_compaction",
    schedule="0 2 * * *",
    start_date=dt.datetime(2026, 11, 1, tzinfo=dt.UTC),
    catchup=False,
    # lists, numbers and booleans reach the operators as such, not as their string renderings
    render_template_as_native_obj=True,
    params={
        "table_uri": Param("/tmp/deltalite-example/events", type="string", description="path or URI of the table"),
        "deltalite_conn_id": Param("", type="string", description="deltalite connection; empty: none"),
        "spark_conn_id": Param("spark_default", type="string"),
        "where": Param(None, type=["null", "string"], description="partition predicate, e.g. date >= '2026-11-01'"),
        "min_small_files": Param(10, type="integer", minimum=0),
        "zorder_columns": Param(["user_id", "amount"], type="array", description="Z-order columns"),
        "retention_hours": Param(168, type="number", minimum=0),
        "enforce_retention_duration": Param(True, type="boolean"),
        "spark_conf": Param({}, type="object", description="extra Spark configuration"),
    },
    tags=["deltalite", "example"],
)
def deltalite_nightly_compaction() -> None:
    @task
    def check_table(table_uri: str, deltalite_conn_id: str) -> int:
        """The table's version; no table there: one log line and the run ends skipped."""
        return skip_unless_table(table_uri, deltalite_conn_id)

    optimize = OptimizeOperator(
        task_id="optimize", where="{{ params.where }}", min_small_files="{{ params.min_small_files }}", **COMMON
    )
    zorder = ZOrderOperator(
        task_id="zorder", columns="{{ params.zorder_columns }}", where="{{ params.where }}", **COMMON
    )
    vacuum = VacuumOperator(
        task_id="vacuum",
        retention_hours="{{ params.retention_hours }}",
        enforce_retention_duration="{{ params.enforce_retention_duration }}",
        **COMMON,
    )

    @task
    def summary(optimized: dict, vacuumed: dict) -> str:
        if optimized["committedVersion"] is None:  # nothing rewritten: the plan's counts are not a change
            done = f"OPTIMIZE skipped ({optimized['skippedReason'] or 'nothing to compact'})"
        else:
            done = (
                f"OPTIMIZE {optimized['numFilesRemoved']} -> {optimized['numFilesAdded']} files "
                f"(version {optimized['committedVersion']})"
            )
        line = f"{done}; VACUUM deleted {vacuumed['numFilesToDelete']} files, {vacuumed['sizeOfDataToDelete']} bytes"
        print(line)
        return line

    check_table("{{ params.table_uri }}", "{{ params.deltalite_conn_id }}") >> optimize >> zorder >> vacuum
    summary(optimize.output, vacuum.output)


deltalite_nightly_compaction()
