"""`OptimizeOperator`: bin-packing compaction of a Delta table's small files (clustering on a liquid-clustered table),
as a PySpark job."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_deltalite.maintenance.options import OptimizeOptions
from airflow_provider_deltalite.operators.base import DeltaLiteSparkJobOperator

if TYPE_CHECKING:
    from airflow_provider_deltalite.table import DeltaTable


class OptimizeOperator(DeltaLiteSparkJobOperator):
    """Compact the small files of a Delta table (OPTIMIZE); returns OptimizeStats as a dict (XCom).

    The files below ``min_file_size`` in each partition are packed into bins of at most ``target_size`` and each
    bin is rewritten as one file on Spark; the commit has ``dataChange=false``, so readers, streaming consumers and
    `NewVersionSensor` ignore it. On a liquid-clustered table it clusters instead, as Delta's OPTIMIZE does (new data
    into new cubes, small cubes merged; see docs/clustering.md). See `DeltaLiteSparkJobOperator` for the table,
    connection and Spark arguments.

    Args:
        where: a predicate on partition columns choosing the partitions, e.g. ``"date = '{{ ds }}'"`` (templated).
        target_size: the largest output file in bytes (default ``delta.targetFileSize``, else 1 GiB) (templated).
        min_file_size: files below this many bytes are compacted (default: as target_size) (templated).
        batch_size: input bytes per commit; unset means one commit (templated).
        max_deleted_rows_ratio: files whose deletion vector removes more than this share of rows are rewritten too
            (default 0.05) (templated).
        full: on a clustered table, recluster every file: sealed cubes, and files clustered on other columns or by
            another provider, included (Delta's OPTIMIZE FULL) (templated).
        min_cube_size: on a clustered table, cubes of at least this many bytes are sealed and not rewritten without full
            (default 100 x the target file size) (templated).
        max_bytes_to_rewrite: read at most this many input bytes; the bins that do not fit wait for a later run and
            the stats count them (``numBinsDeferred``, ``bytesDeferred``) (templated).
        min_row_group_size: row groups of at least this many compressed bytes are copied into the new files byte for
            byte, smaller ones re-encoded together (default 8 MiB) (templated).
        min_small_files: do nothing (and start no JVM) unless the plan compacts at least this many files; the
            returned stats are then the plan's (``dryRun: true``) with ``skippedReason`` saying why (templated).

    Example:
        >>> OptimizeOperator(task_id="compact", table_uri="s3://lake/events", deltalite_conn_id="lake",
        ...                  where="date = '{{ ds }}'", min_small_files=20)  # doctest: +SKIP
    """

    command = "optimize"
    options_class = OptimizeOptions
    threshold_field = "min_small_files"
    template_fields: Sequence[str] = (
        *DeltaLiteSparkJobOperator.template_fields,
        "where",
        "target_size",
        "min_file_size",
        "batch_size",
        "max_deleted_rows_ratio",
        "full",
        "min_cube_size",
        "max_bytes_to_rewrite",
        "min_row_group_size",
        "min_small_files",
    )

    def __init__(
        self,
        *,
        where: str | None = None,
        target_size: int | str | None = None,
        min_file_size: int | str | None = None,
        batch_size: int | str | None = None,
        max_deleted_rows_ratio: float | str | None = None,
        full: bool | str | None = None,
        min_cube_size: int | str | None = None,
        max_bytes_to_rewrite: int | str | None = None,
        min_row_group_size: int | str | None = None,
        min_small_files: int | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.where = where
        self.target_size = target_size
        self.min_file_size = min_file_size
        self.batch_size = batch_size
        self.max_deleted_rows_ratio = max_deleted_rows_ratio
        self.full = full
        self.min_cube_size = min_cube_size
        self.max_bytes_to_rewrite = max_bytes_to_rewrite
        self.min_row_group_size = min_row_group_size
        self.min_small_files = min_small_files

    def option_values(self) -> dict[str, Any]:
        return {
            "where": self.where,
            "target_size": self.target_size,
            "min_file_size": self.min_file_size,
            "batch_size": self.batch_size,
            "max_deleted_rows_ratio": self.max_deleted_rows_ratio,
            "full": self.full,
            "min_cube_size": self.min_cube_size,
            "max_bytes_to_rewrite": self.max_bytes_to_rewrite,
            "min_row_group_size": self.min_row_group_size,
        }

    def plan(self, table: DeltaTable, options: OptimizeOptions) -> tuple[dict[str, Any], str | None] | None:
        from airflow_provider_deltalite.maintenance.optimize import optimize

        stats = optimize(table, dataclasses.replace(options, dry_run=True)).to_dict()
        files = stats["numFilesRemoved"]
        minimum = self._threshold or 0
        if files == 0:
            return stats, "nothing to compact"
        if files < minimum:
            return stats, f"{files} files to compact, fewer than min_small_files={minimum}"
        return None
