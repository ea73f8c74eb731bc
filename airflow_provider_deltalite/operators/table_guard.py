"""`skip_unless_table`: end a DAG run as skipped, with one log line, when its table is not there.

A DAG unpaused before its table exists (or with a DAG param still at its placeholder) should not fail every run,
and a sensor should not wait its whole timeout for a table that was never created. The example DAGs start with a
task that calls this; its skip then skips everything downstream (Airflow's default ``all_success`` rule), so the run
ends at once and nothing is written.
"""

from __future__ import annotations

from airflow.providers.common.compat.sdk import AirflowSkipException

from airflow_provider_deltalite.engine.errors import TableNotFound
from airflow_provider_deltalite.hooks.deltalite import DeltaLiteHook


def skip_unless_table(table_uri: str, deltalite_conn_id: str | None = None) -> int:
    """The newest version of the Delta table at ``table_uri``; raise `AirflowSkipException` with one line naming it
    when there is no table there (no path, no ``_delta_log``, or no commit yet).

    Other errors (a bad connection, a damaged log, storage failures) are raised as they are: those fail the run.

    Example:
        >>> @task  # doctest: +SKIP
        ... def check_table(table_uri: str) -> int:
        ...     return skip_unless_table(table_uri, "lake")
    """
    table = DeltaLiteHook(deltalite_conn_id or None).get_table(table_uri)
    try:
        return table.latest_version()
    except TableNotFound as exc:
        raise AirflowSkipException(f"{exc}; skipping this run (set the DAG param table_uri to a Delta table)") from None
