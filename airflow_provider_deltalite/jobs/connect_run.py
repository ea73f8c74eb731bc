"""One maintenance operation run in this process, its data work on a Spark Connect server: the job without spark-submit.

The operators use it for a ``spark_connect`` connection: planning, the commit and the stats stay in the calling
process (no JVM there, only the Spark Connect client), and only the work items (`SparkExecutor.map`,
`SparkExecutor.map_reduce`) run on the server. The operation is the spark-submit job's own (`driver.COMMANDS`), so
both routes run the same maintenance call with the same options object and return the same stats.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from airflow_provider_deltalite.engine.errors import ExecutorError
from airflow_provider_deltalite.jobs.driver import COMMANDS

if TYPE_CHECKING:
    from airflow_provider_deltalite.executors.spark import SparkExecutor
    from airflow_provider_deltalite.maintenance.options import MaintenanceOptions
    from airflow_provider_deltalite.table import DeltaTable


class ConnectRun:
    """Run one operation over a Spark Connect session of its own; `kill` (from another thread or a signal handler)
    interrupts its queries and stops the session.

    Args:
        url: the server's ``sc://`` address (it may carry ``;token=...``; messages never show it).
        app_name: the session's application name.
        conf: runtime settings for the session (``spark.sql.*``...); a static setting is refused by the server.
    """

    def __init__(self, url: str, app_name: str, conf: Mapping[str, Any] | None = None) -> None:
        self._url = url
        self._app_name = app_name
        self._conf = {str(k): str(v) for k, v in (conf or {}).items()}
        self._lock = threading.Lock()
        self._executor: SparkExecutor | None = None
        self._killed = False

    def run(self, command: str, table: DeltaTable, options: MaintenanceOptions) -> dict[str, Any]:
        """Run ``command`` (``optimize``, ``zorder``, ``vacuum``, ``maintain``) on ``table``; its stats as the job
        reports them (plain JSON values).

        Raises:
            DeltaLiteError: the operation's own error, or an `ExecutorError` (the server cannot be reached, a task
                failed, the run was killed).
        """
        from airflow_provider_deltalite.executors.spark import SparkExecutor

        executor = SparkExecutor.start(self._url, app_name=self._app_name, conf=self._conf)
        with self._lock:
            killed, self._executor = self._killed, executor
        try:
            if killed:  # killed while the session started: nothing ran yet
                raise ExecutorError(f"the {command} run on {executor.master} was stopped before it started")
            stats = COMMANDS[command].run(table, options, executor)
        except Exception:
            if not self._killed:
                raise
            # whatever the interrupted queries or the closed channel raised, the reason is the kill
            raise ExecutorError(f"the {command} run on {executor.master} was stopped") from None
        finally:
            with self._lock:
                self._executor = None
            executor.close()
        # the same values the job's JSON result carries (tuples as lists, ...)
        result: dict[str, Any] = json.loads(json.dumps(stats.to_dict()))
        return result

    def kill(self) -> None:
        """Interrupt every query of the run's session and stop the session; a run not started yet will not start."""
        with self._lock:
            self._killed = True
            executor = self._executor
        if executor is None:
            return
        with suppress(Exception):  # a session stopped meanwhile has nothing left to interrupt
            executor.spark.interruptAll()
        executor.close()
