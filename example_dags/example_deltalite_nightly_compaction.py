"""Nightly compaction of one Delta table with deltalite's engine, run inside an Airflow task.

Until the provider's operators arrive (they submit the same work as a PySpark job), a TaskFlow task can call the
engine directly: it compacts yesterday's partition in this worker process and returns OptimizeStats as XCom.
Set the table with the DAG param ``table_uri`` (any fsspec URI; credentials come from the worker's environment).
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import Param, dag, task


@dag(
    dag_id="example_deltalite_nightly_compaction",
    schedule="0 2 * * *",
    start_date=dt.datetime(2026, 11, 1, tzinfo=dt.UTC),
    catchup=False,
    params={"table_uri": Param("/tmp/deltalite-example/events", type="string")},
    tags=["deltalite", "example"],
)
def nightly_compaction() -> None:
    @task
    def compact_yesterday(table_uri: str, ds: str | None = None) -> dict:
        # imported in the task, so parsing the DAG file never touches the table or the engine
        from airflow_provider_deltalite.engine import DeltaTable

        table = DeltaTable(table_uri)
        partitioned = "date" in table.snapshot().partition_columns
        where = f"date = '{ds}'" if partitioned and ds else None
        return table.optimize(where=where, max_concurrent_tasks=2).to_dict()

    compact_yesterday(table_uri="{{ params.table_uri }}")


nightly_compaction()
