"""`VacuumOperator`: delete the files a Delta table no longer references, as a PySpark job."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_deltalite.operators.spark_job import (
    DeltaLiteSparkJobOperator,
    at_least,
    flag,
    real_number,
    whole_number,
)

if TYPE_CHECKING:
    from airflow_provider_deltalite.table import DeltaTable


class VacuumOperator(DeltaLiteSparkJobOperator):
    """VACUUM a Delta table: delete unreferenced files older than the retention; returns VacuumStats as a dict.

    See `DeltaLiteSparkJobOperator` for the table, connection and Spark arguments.

    Args:
        retention_hours: keep deleted files this long (default: the table's ``delta.deletedFileRetentionDuration``,
            168 hours unless set) (templated).
        dry_run: only list what would be deleted (``numFilesToDelete``, ``sizeOfDataToDelete``; ``filesToDelete``
            holds at most 1000 paths in XCom) (templated).
        lite: take candidates from the log since the last VACUUM instead of listing storage (templated).
        enforce_retention_duration: refuse a retention shorter than the table's (default True) (templated).
        commit_log_entries: commit VACUUM START / VACUUM END to the table's log (default True) (templated).
        min_reclaimable_bytes: first list in this process (a dry run) and do nothing, starting no JVM, unless at
            least this many bytes would be deleted; the dry run's stats are returned with ``skippedReason``
            (templated).

    Example:
        >>> VacuumOperator(task_id="vacuum", table_uri="events", deltalite_conn_id="lake", retention_hours=168,
        ...                min_reclaimable_bytes=1 << 30)  # doctest: +SKIP
    """

    command = "vacuum"
    template_fields: Sequence[str] = (
        *DeltaLiteSparkJobOperator.template_fields,
        "retention_hours",
        "dry_run",
        "lite",
        "enforce_retention_duration",
        "commit_log_entries",
        "min_reclaimable_bytes",
    )

    def __init__(
        self,
        *,
        retention_hours: float | str | None = None,
        dry_run: bool | str = False,
        lite: bool | str = False,
        enforce_retention_duration: bool | str = True,
        commit_log_entries: bool | str = True,
        min_reclaimable_bytes: int | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.retention_hours = retention_hours
        self.dry_run = dry_run
        self.lite = lite
        self.enforce_retention_duration = enforce_retention_duration
        self.commit_log_entries = commit_log_entries
        self.min_reclaimable_bytes = min_reclaimable_bytes

    def _options(self, table_uri: str | None) -> dict[str, Any]:
        return {
            "retention_hours": real_number("retention_hours", self.retention_hours, table_uri),
            "dry_run": flag("dry_run", self.dry_run, table_uri),
            "mode": "lite" if flag("lite", self.lite, table_uri) else "full",
            "enforce_retention_duration": flag(
                "enforce_retention_duration", self.enforce_retention_duration, table_uri
            ),
            "commit_log_entries": flag("commit_log_entries", self.commit_log_entries, table_uri),
        }

    def _threshold(self, table_uri: str | None) -> int | None:
        value = whole_number("min_reclaimable_bytes", self.min_reclaimable_bytes, table_uri)
        at_least("min_reclaimable_bytes", value, 0, table_uri)
        return value

    def job_arguments(self, table_uri: str) -> list[str]:
        options = self._options(table_uri)
        self._threshold(table_uri)
        args: list[str] = []
        if options["retention_hours"] is not None:
            args.append(f"--retain-hours={options['retention_hours']}")
        if options["dry_run"]:
            args.append("--dry-run")
        if options["mode"] == "lite":
            args.append("--lite")
        if not options["enforce_retention_duration"]:
            args.append("--no-retention-check")
        if not options["commit_log_entries"]:
            args.append("--no-commit-log-entries")
        return args

    def has_threshold(self) -> bool:
        return self._threshold(None) is not None

    def plan(self, table: DeltaTable) -> tuple[dict[str, Any], str | None] | None:
        threshold = self._threshold(table.uri)
        if threshold is None:
            return None  # listing storage is the job's work; only a threshold makes it worth doing here first
        options = self._options(table.uri)
        dry_run = options.pop("dry_run")
        options.pop("commit_log_entries")
        stats = table.vacuum(dry_run=True, **options).to_dict()
        if dry_run:
            return stats, None  # the dry run asked for is done
        size = stats["sizeOfDataToDelete"]
        if size < threshold:
            return stats, f"{size} bytes to delete, fewer than min_reclaimable_bytes={threshold}"
        return None
