"""Start work when a Delta table receives new data, and not when OPTIMIZE, Z-order or VACUUM only rearranged it.

``check_table`` reads the table's newest version when the run starts; `NewVersionSensor` then waits for the first
commit after it that adds or removes rows, and hands a summary of the new commits to the next task as XCom:
``{table_uri, baseline_version, version, versions, skipped, operations, added_files, added_rows, added_bytes,
timestamp}``. A second sensor then waits for the commit after the one just processed: its ``since`` comes from the
first sensor's XCom through a Jinja template, rendered when the task runs.

The sensors are deferrable: while they wait, the triggerer polls the log (`NewVersionTrigger`, every
``DELTALITE_EXAMPLE_POLL_SECONDS``, default 30) and no worker slot is held; the deployment needs an
``airflow triggerer`` running. A run that sees no new data within ``timeout`` ends skipped (``soft_fail``), not failed,
and before the next hourly run is due.

Unpausing it before the table exists does no harm: with no Delta table at ``table_uri`` (the placeholder default, or a
table not created yet) ``check_table`` logs one line and the run ends skipped at once, instead of waiting for the
table. Since the baseline is the version when the run starts, a run never fires on the table's history.

Set the table with the DAG param ``table_uri`` (any fsspec URI; ``deltalite_conn_id="..."`` on the sensors would take
storage credentials and a base URI from a ``deltalite`` connection). Parsing this file never opens the table.

Needs Airflow 3.0 or later (the ``airflow.sdk`` authoring interface), as the provider does.
"""

from __future__ import annotations

import datetime as dt
import os

from airflow.sdk import Param, dag, task

from airflow_provider_deltalite.operators.table_guard import skip_unless_table
from airflow_provider_deltalite.sensors.new_version import NewVersionSensor

POLL_SECONDS = float(os.environ.get("DELTALITE_EXAMPLE_POLL_SECONDS", "30"))
RETRY_ONCE = {"retries": 1, "retry_delay": dt.timedelta(seconds=5)}


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
    @task
    def check_table(table_uri: str) -> int:
        """The table's version now (the sensor's baseline); no table there: one log line and the run ends skipped."""
        return skip_unless_table(table_uri)

    baseline = check_table("{{ params.table_uri }}")
    # deferrable: the wait happens in the triggerer, which notices a commit within poke_interval and holds no worker
    # slot; soft_fail: an hour without new data ends the run skipped, before the next run is due; one retry: when a
    # trigger fires within seconds of deferring, Airflow 3.3's scheduler can mark the resumed sensor failed
    # (apache/airflow#72716); the retry's first check finds the same new commit
    wait = NewVersionSensor(
        task_id="wait_for_new_data",
        table_uri="{{ params.table_uri }}",
        since=baseline,
        deferrable=True,
        poke_interval=POLL_SECONDS,
        timeout=3300,
        soft_fail=True,
        **RETRY_ONCE,
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
        deferrable=True,
        poke_interval=POLL_SECONDS,
        timeout=3300,
        soft_fail=True,
        **RETRY_ONCE,
    )

    process(wait.output) >> wait_for_more


new_commits_trigger()
