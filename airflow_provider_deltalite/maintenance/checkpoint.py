"""Checkpoint a table on demand, optionally followed by expired-log cleanup (what ``deltalite checkpoint`` runs).

Writers checkpoint on their own every ``delta.checkpointInterval`` commits; this is for a table that has gone long
without one, or a log that needs cleaning up now. The cleanup settings are checked before the checkpoint is written,
so a table with bad settings gets an error and no new files.

Example:
    >>> result = checkpoint(Table("/data/events"), cleanup_log=True)  # doctest: +SKIP
    >>> result.checkpoint.version, result.cleanup.num_files_deleted  # doctest: +SKIP
    (412, 37)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_provider_deltalite.engine.checkpoint_writer import CheckpointInfo, write_checkpoint
from airflow_provider_deltalite.engine.features import ensure_writable
from airflow_provider_deltalite.engine.log_cleanup import (
    CleanupResult,
    cleanup_expired_logs,
    expired_log_cleanup_enabled,
    log_retention_ms,
)
from airflow_provider_deltalite.engine.table import Table
from airflow_provider_deltalite.maintenance.history.record import recorded


@dataclass(frozen=True)
class CheckpointResult:
    """What `checkpoint` wrote, and what the log cleanup deleted (None when it was not asked for)."""

    checkpoint: CheckpointInfo
    cleanup: CleanupResult | None

    def to_dict(self) -> dict[str, Any]:
        return {"checkpoint": self.checkpoint.to_dict(), "cleanup": self.cleanup.to_dict() if self.cleanup else None}


@recorded("checkpoint")
def checkpoint(table: Table, *, cleanup_log: bool = False, history_uri: str | None = None) -> CheckpointResult:
    """Write a checkpoint of the latest version; with ``cleanup_log``, then delete expired log files.

    ``history_uri``: append one row about this run to the operations history table there (`recorded` writes it).

    Raises:
        ProtocolNotSupported: the table has a feature deltalite cannot write.
        InvalidTableProperty: ``cleanup_log`` and a cleanup property that does not parse (nothing is written).
    """
    snapshot = table.snapshot()
    ensure_writable(snapshot.protocol, snapshot.table_uri)
    if cleanup_log:
        expired_log_cleanup_enabled(snapshot.properties)
        log_retention_ms(snapshot.properties)
    info = write_checkpoint(snapshot)
    return CheckpointResult(info, cleanup_expired_logs(snapshot) if cleanup_log else None)
