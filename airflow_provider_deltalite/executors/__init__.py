"""Where maintenance work runs: threads in this process (`local`) or tasks on a Spark cluster (`spark`).

Both run the same engine primitive over the same picklable work items, so they produce identical actions.
"""

from __future__ import annotations

from airflow_provider_deltalite.executors.base import Executor
from airflow_provider_deltalite.executors.local import LocalExecutor

__all__ = ["Executor", "LocalExecutor"]
