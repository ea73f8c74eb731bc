"""Start work when a Delta table receives new data, and not when OPTIMIZE, Z-order or VACUUM only rearranged it.

`NewVersionSensor` waits for the first commit after the run's baseline that adds or removes rows (by default the
table's version when the run was due: the end of its data interval, or the moment a manual run was triggered), and
hands a summary of the new commits to the next task as XCom:
``{table_uri, baseline_version, version, versions, skipped, operations, added_files, added_rows, added_bytes,
timestamp}``. A second sensor then waits for the commit after the one just processed: its ``since`` comes
from the first sensor's XCom through a Jinja template, rendered when the task runs.

Set the table with the DAG param ``table_uri`` (any fsspec URI; ``deltalite_conn_id="..."`` on the sensors would take
storage credentials and a base URI from a ``deltalite`` connection). Parsing this file never opens the table.

Needs Airflow 3.0 or later (the ``airflow.sdk`` authoring interface), as the provider does.
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import Param, dag, task

from airflow_provider_deltalite.sensors.new_version import NewVersionSensor


@dag(
    dag_id="deltalite_new_commits_trigger",
    schedule="@hourly",
    start_date=dt.datetime(2026, 11, 1, tzinfo=dt.UTC),
    catchup=False,
    max_active_runs=1,
    params={"table_uri": Param("/tmp/deltalite-example/events", type="string")},
    tags=["deltalite", "example"],
)
def new_commits_trigger() -> None:
    # reschedule: between pokes the sensor holds no worker slot; deferrable=True would wait in the triggerer instead
    wait = NewVersionSensor(
        task_id="wait_for_new_data",
        table_uri="{{ params.table_uri }}",
        mode="reschedule",
        poke_interval=60,
        timeout=3600,
    )

    @task
    def process(change: dict) -> int:
        """Work on the new data; here, report what arrived."""
        print(
            f"versions {change['versions']} of {change['table_uri']} added {change['added_files']} files, "
            f"{change['added_rows']} rows ({change['operations']}); not counted: {change['skipped']}"
        )
        return change["version"]

    wait_for_more = NewVersionSensor(
        task_id="wait_for_more_data",
        table_uri="{{ params.table_uri }}",
        since="{{ ti.xcom_pull(task_ids='wait_for_new_data')['version'] }}",
        mode="reschedule",
        poke_interval=60,
        timeout=3600,
    )

    process(wait.output) >> wait_for_more


new_commits_trigger()
