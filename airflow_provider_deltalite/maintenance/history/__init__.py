"""The operations history: one row per maintenance operation in a Delta table the user names (``history_uri``).

`table` holds the schema and the writer (create, check, append, read); `record` the rows of an operation and the
`recorded` wrapper every maintenance operation goes through. See docs/maintenance-planner.md, "The operations
history".
"""

from __future__ import annotations

from airflow_provider_deltalite.maintenance.history.record import (
    COMMITTED,
    CONFLICT,
    DEFERRED_BY_BUDGET,
    ERROR,
    NOTHING_TO_DO,
    recorded,
    run_context,
    write_rows,
)
from airflow_provider_deltalite.maintenance.history.table import (
    ARROW_SCHEMA,
    COLUMNS,
    append_history,
    check_history_table,
    read_history,
)

__all__ = [
    "ARROW_SCHEMA",
    "COLUMNS",
    "COMMITTED",
    "CONFLICT",
    "DEFERRED_BY_BUDGET",
    "ERROR",
    "NOTHING_TO_DO",
    "append_history",
    "check_history_table",
    "read_history",
    "recorded",
    "run_context",
    "write_rows",
]
