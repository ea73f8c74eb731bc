"""Where maintenance work runs: threads in this process (`LocalExecutor`) or tasks on Spark (`spark.SparkExecutor`).

Both run the same engine primitive over the same picklable work items, so they produce identical actions. The
protocol and the in-process executor live with maintenance (`maintenance.executor`), which receives an executor by
injection; they are re-exported here because this is where users look for them.
"""

from __future__ import annotations

from airflow_provider_deltalite.maintenance.executor import Executor, LocalExecutor, ShuffleExecutor

__all__ = ["Executor", "LocalExecutor", "ShuffleExecutor"]
