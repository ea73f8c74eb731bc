"""Event-driven scheduling: a DAG run for every batch of new data in a Delta table, none for OPTIMIZE or VACUUM.

`NewVersionTrigger` runs in the triggerer as an `AssetWatcher`: it tails the table's log and turns each poll that
finds new data into an asset event; rearrangements (OPTIMIZE, Z-order), VACUUM and metadata-only commits produce
none. The DAG below is scheduled on that asset and reads what arrived from the event's ``extra["payload"]``
(``{table_uri, baseline_version, version, versions, skipped, operations, added_files, added_rows, added_bytes,
timestamp}``). On Airflow 3.3+ the watcher keeps its cursor in the asset state store, so a restarted triggerer does
not repeat events; with no cursor stored it starts at the table's newest version, so history does not fire.

The table is fixed when the file is parsed, not a DAG param: Airflow identifies a watcher by its trigger's arguments,
and a DAG param is only known to a run. Here it comes from the environment variable ``DELTALITE_EXAMPLE_TABLE_URI``
(same value for every parse; ``DELTALITE_EXAMPLE_POLL_SECONDS`` sets the poll interval); parsing never opens the
table.

Needs Airflow 3.0 or later (the ``airflow.sdk`` authoring interface), as the provider does.
"""

from __future__ import annotations

import datetime as dt
import os

from airflow.sdk import Asset, AssetWatcher, dag, task

from airflow_provider_deltalite.triggers.new_version import NewVersionTrigger

TABLE_URI = os.environ.get("DELTALITE_EXAMPLE_TABLE_URI", "/tmp/deltalite-example/events")
POLL_SECONDS = float(os.environ.get("DELTALITE_EXAMPLE_POLL_SECONDS", "30"))

new_data = Asset(
    name="deltalite_example_events",
    uri=TABLE_URI,
    watchers=[
        AssetWatcher(
            name="deltalite_example_events_new_data",
            trigger=NewVersionTrigger(table_uri=TABLE_URI, poll_interval=POLL_SECONDS),
        )
    ],
)


@dag(
    dag_id="deltalite_asset_watcher",
    schedule=[new_data],
    start_date=dt.datetime(2026, 11, 1, tzinfo=dt.UTC),
    catchup=False,
    tags=["deltalite", "example"],
)
def asset_watcher() -> None:
    @task
    def process(triggering_asset_events: dict | None = None) -> list[int]:
        """Work on the new data; here, report which versions arrived."""
        versions: list[int] = []
        for events in (triggering_asset_events or {}).values():
            for event in events:
                change = event.extra["payload"]
                print(f"versions {change['versions']} of {change['table_uri']} added {change['added_rows']} rows")
                versions.extend(change["versions"])
        return versions

    process()


asset_watcher()
