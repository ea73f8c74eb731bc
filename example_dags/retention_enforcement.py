"""Retention enforcement: a VACUUM dry run, then a real VACUUM only when enough would be deleted.

The dry run's VacuumStats (XCom) drive a branch: when ``numFilesToDelete`` reaches ``min_files_to_delete`` or
``sizeOfDataToDelete`` reaches ``min_bytes_to_delete``, the ``vacuum`` task deletes the expired files; otherwise
``report_retained`` says why nothing was deleted. Table and thresholds are DAG params, so ``airflow dags test
deltalite_retention_enforcement -c '{"table_uri": "..."}'`` runs it as it is. With no Delta table at ``table_uri``
(the placeholder default, or a table not created yet) ``check_table`` logs one line and the run ends skipped.

Needs Airflow 3.0 or later (the ``airflow.sdk`` authoring interface), as the provider does.
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import Param, dag, task

from airflow_provider_deltalite.operators.table_guard import skip_unless_table
from airflow_provider_deltalite.operators.vacuum import VacuumOperator

COMMON = {
    "table_uri": "{{ params.table_uri }}",
    "deltalite_conn_id": "{{ params.deltalite_conn_id }}",
    "spark_conn_id": "{{ params.spark_conn_id }}",
    "conf": "{{ params.spark_conf }}",
    "retention_hours": "{{ params.retention_hours }}",
    "enforce_retention_duration": "{{ params.enforce_retention_duration }}",
}


@dag(
    dag_id="deltalite_retention_enforcement",
    schedule="@weekly",
    start_date=dt.datetime(2026, 11, 1, tzinfo=dt.UTC),
    catchup=False,
    render_template_as_native_obj=True,
    params={
        "table_uri": Param("/tmp/deltalite-example/events", type="string", description="path or URI of the table"),
        "deltalite_conn_id": Param("", type="string", description="deltalite connection; empty: none"),
        "spark_conn_id": Param("spark_default", type="string"),
        "retention_hours": Param(168, type="number", minimum=0),
        "enforce_retention_duration": Param(True, type="boolean"),
        "min_files_to_delete": Param(100, type="integer", minimum=1),
        "min_bytes_to_delete": Param(1 << 30, type="integer", minimum=1),
        "spark_conf": Param({}, type="object", description="extra Spark configuration"),
    },
    tags=["deltalite", "example"],
)
def deltalite_retention_enforcement() -> None:
    @task
    def check_table(table_uri: str, deltalite_conn_id: str) -> int:
        """The table's version; no table there: one log line and the run ends skipped."""
        return skip_unless_table(table_uri, deltalite_conn_id)

    dry_run = VacuumOperator(task_id="vacuum_dry_run", dry_run=True, **COMMON)
    check_table("{{ params.table_uri }}", "{{ params.deltalite_conn_id }}") >> dry_run

    @task.branch
    def decide(stats: dict, params: dict | None = None) -> str:
        files, size = stats["numFilesToDelete"], stats["sizeOfDataToDelete"]
        if files and (files >= params["min_files_to_delete"] or size >= params["min_bytes_to_delete"]):
            return "vacuum"
        return "report_retained"

    @task
    def report_retained(stats: dict, params: dict | None = None) -> dict:
        reason = (
            f"{stats['numFilesToDelete']} files ({stats['sizeOfDataToDelete']} bytes) past the retention: below "
            f"min_files_to_delete={params['min_files_to_delete']} and "
            f"min_bytes_to_delete={params['min_bytes_to_delete']}, nothing deleted"
        )
        print(reason)
        return {"reason": reason, "numFilesToDelete": stats["numFilesToDelete"]}

    vacuum = VacuumOperator(task_id="vacuum", **COMMON)
    decide(dry_run.output) >> [vacuum, report_retained(dry_run.output)]


deltalite_retention_enforcement()
