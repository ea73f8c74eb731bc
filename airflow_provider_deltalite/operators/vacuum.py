"""`VacuumOperator`: delete the files a Delta table no longer references, as a PySpark job."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_deltalite.maintenance.option_values import flag
from airflow_provider_deltalite.maintenance.options import VacuumOptions
from airflow_provider_deltalite.operators.base import DeltaLiteSparkJobOperator

try:
    from airflow.exceptions import AirflowProviderDeprecationWarning as _Deprecation
except ImportError:  # an Airflow without it
    _Deprecation = DeprecationWarning  # type: ignore[assignment,misc]

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
        mode: ``"full"`` (list storage, the default) or ``"lite"`` (take candidates from the log since the last
            VACUUM) (templated).
        lite: deprecated, use ``mode="lite"``; true means ``mode="lite"``, false ``mode="full"`` (templated).
        enforce_retention_duration: refuse a retention shorter than the table's (default True) (templated).
        commit_log_entries: commit VACUUM START / VACUUM END to the table's log (default True) (templated).
        inventory: read the table's files from this inventory (a path or URI: CSV or Parquet with ``path``,
            ``length``, ``isDir``, ``modificationTime``, or an S3 Inventory ``manifest.json``) instead of listing
            storage; FULL only (templated).
        inventory_format: ``"csv"``, ``"parquet"`` or ``"s3-inventory"`` (default: from the name) (templated).
        max_files_to_delete: delete at most this many files, the oldest first; the stats count the rest
            (``numFilesDeferred``) (templated).
        min_reclaimable_bytes: first list in this process (a dry run) and do nothing, starting no JVM, unless at
            least this many bytes would be deleted; the dry run's stats are returned with ``skippedReason``
            (templated).

    Example:
        >>> VacuumOperator(task_id="vacuum", table_uri="events", deltalite_conn_id="lake", retention_hours=168,
        ...                min_reclaimable_bytes=1 << 30)  # doctest: +SKIP
    """

    command = "vacuum"
    options_class = VacuumOptions
    threshold_field = "min_reclaimable_bytes"
    template_fields: Sequence[str] = (
        *DeltaLiteSparkJobOperator.template_fields,
        "retention_hours",
        "dry_run",
        "mode",
        "lite",
        "enforce_retention_duration",
        "commit_log_entries",
        "inventory",
        "inventory_format",
        "max_files_to_delete",
        "min_reclaimable_bytes",
    )

    def __init__(
        self,
        *,
        retention_hours: float | str | None = None,
        dry_run: bool | str = False,
        mode: str | None = None,
        lite: bool | str | None = None,
        enforce_retention_duration: bool | str = True,
        commit_log_entries: bool | str = True,
        inventory: str | None = None,
        inventory_format: str | None = None,
        max_files_to_delete: int | str | None = None,
        min_reclaimable_bytes: int | str | None = None,
        **kwargs: Any,
    ) -> None:
        if lite is not None:
            if mode is not None:
                raise TypeError(f"{type(self).__name__} takes mode or the deprecated lite, not both")
            warnings.warn(
                f"{type(self).__name__}(lite=...) is deprecated and will be removed; use mode='lite' or mode='full'",
                _Deprecation,
                stacklevel=2,
            )
        super().__init__(**kwargs)
        self.retention_hours = retention_hours
        # the templated argument shadows BaseOperator.dry_run(), a debugging helper that never runs these tasks
        self.dry_run = dry_run  # type: ignore[assignment,method-assign]
        self.mode = mode
        self.lite = lite
        self.enforce_retention_duration = enforce_retention_duration
        self.commit_log_entries = commit_log_entries
        self.inventory = inventory
        self.inventory_format = inventory_format
        self.max_files_to_delete = max_files_to_delete
        self.min_reclaimable_bytes = min_reclaimable_bytes

    def option_values(self) -> dict[str, Any]:
        mode = self.mode
        if self.lite is not None:  # the deprecated spelling: rendered now, so a template decides it
            mode = "lite" if flag("lite", self.lite) else "full"
        return {
            "retention_hours": self.retention_hours,
            "dry_run": self.dry_run,
            "mode": mode,
            "enforce_retention_duration": self.enforce_retention_duration,
            "commit_log_entries": self.commit_log_entries,
            "inventory": self.inventory,
            "inventory_format": self.inventory_format,
            "max_files_to_delete": self.max_files_to_delete,
        }

    def plan(self, table: DeltaTable, options: VacuumOptions) -> tuple[dict[str, Any], str | None] | None:
        minimum = self._threshold
        if minimum is None:
            return None  # listing storage is the job's work; only a threshold makes it worth doing here first
        from airflow_provider_deltalite.maintenance.vacuum import vacuum

        stats = vacuum(table, dataclasses.replace(options, dry_run=True)).to_dict()
        if options.dry_run:
            return stats, None  # the dry run asked for is done
        size = stats["sizeOfDataToDelete"]
        if size < minimum:
            return stats, f"{size} bytes to delete, fewer than min_reclaimable_bytes={minimum}"
        return None
