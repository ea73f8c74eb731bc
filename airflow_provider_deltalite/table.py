"""`DeltaTable`: the table users open, with snapshots and history from the engine and the maintenance operations.

It sits above maintenance and the executors: each method builds the operation's options object from its keyword
arguments and calls the maintenance function with an executor (`LocalExecutor` unless one is given). Everything that
takes the engine's `Table` takes a `DeltaTable` too.

Example:
    >>> from airflow_provider_deltalite import DeltaTable
    >>> table = DeltaTable("s3://lake/events", storage_options={"region_name": "eu-west-1"})  # doctest: +SKIP
    >>> table.optimize(where="date = '2026-11-01'").num_files_removed  # doctest: +SKIP
    412
    >>> table.vacuum(dry_run=True).num_files_to_delete  # doctest: +SKIP
    37
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from airflow_provider_deltalite.engine.table import Table
from airflow_provider_deltalite.engine.transaction import RetryPolicy
from airflow_provider_deltalite.maintenance.options import (
    DEFAULT_NUM_RANGES,
    DEFAULT_RUN_BYTES,
    OptimizeOptions,
    VacuumOptions,
    ZOrderOptions,
)

# The operations load in the methods that run them: `deltalite describe` and other readers never pay for them.
if TYPE_CHECKING:
    from datetime import datetime

    from airflow_provider_deltalite.engine.data_file_writer import WriterOptions
    from airflow_provider_deltalite.engine.snapshot import Snapshot
    from airflow_provider_deltalite.maintenance.changes import ChangeSet
    from airflow_provider_deltalite.maintenance.checkpoint import CheckpointResult
    from airflow_provider_deltalite.maintenance.executor import Executor
    from airflow_provider_deltalite.maintenance.health.metrics import TableHealth
    from airflow_provider_deltalite.maintenance.optimize_stats import OptimizeStats
    from airflow_provider_deltalite.maintenance.rewrites import OptimizeProgress
    from airflow_provider_deltalite.maintenance.vacuum import VacuumProgress
    from airflow_provider_deltalite.maintenance.vacuum.stats import VacuumStats


class DeltaTable(Table):
    """A Delta table at a URI (a local path, ``file://``, ``memory://``, ``s3://``, ``gs://`` or ``abfs://``), or by
    its name in the AWS Glue Data Catalog (``glue://database/table``, resolved once to its location: `uri`).

    Args:
        uri: where the table lives, or its Glue name.
        storage_options: fsspec options for the backend (credentials, endpoint); never logged. Options named
            ``deltalite_*`` configure deltalite itself (single-writer mode, storage retries).
        filesystem: a ready fsspec filesystem to use instead of building one from ``uri`` and ``storage_options``.

    Reading: `snapshot`, `latest_version`, `version_at`, `history`, `changes`, `health`. Maintenance: `optimize`,
    `zorder`, `vacuum`, `checkpoint`. Writing through the engine: `transaction`.
    """

    def optimize(
        self,
        *,
        where: str | None = None,
        target_size: int | None = None,
        min_file_size: int | None = None,
        max_deleted_rows_ratio: float | None = None,
        batch_size: int | None = None,
        dry_run: bool = False,
        full: bool = False,
        min_cube_size: int | None = None,
        max_bytes_to_rewrite: int | None = None,
        history_uri: str | None = None,
        executor: Executor | None = None,
        max_concurrent_tasks: int | None = None,
        writer_options: WriterOptions | None = None,
        retry: RetryPolicy | None = None,
        progress: Callable[[OptimizeProgress], None] | None = None,
        min_row_group_size: int | None = None,
    ) -> OptimizeStats:
        """Compact small files (bin packing), or cluster a liquid-clustered table; the options are those of
        `OptimizeOptions` (``full`` and ``min_cube_size`` apply to clustered tables only).

        Example:
            >>> DeltaTable("/data/events").optimize(where="date = '2026-11-01'").to_dict()  # doctest: +SKIP

        Returns:
            OptimizeStats; ``committed_version`` is None when nothing was committed.
        """
        options = OptimizeOptions.build(
            {
                "where": where,
                "target_size": target_size,
                "min_file_size": min_file_size,
                "max_deleted_rows_ratio": max_deleted_rows_ratio,
                "batch_size": batch_size,
                "dry_run": dry_run,
                "full": full,
                "min_cube_size": min_cube_size,
                "max_bytes_to_rewrite": max_bytes_to_rewrite,
                "history_uri": history_uri,
                "min_row_group_size": min_row_group_size,
            },
            self.uri,
        )
        from airflow_provider_deltalite.maintenance.optimize import optimize

        return optimize(
            self,
            options,
            executor=executor,
            max_concurrent_tasks=max_concurrent_tasks,
            writer_options=writer_options,
            retry=retry,
            progress=progress,
        )

    def zorder(
        self,
        columns: Sequence[str],
        *,
        curve: str = "zorder",
        where: str | None = None,
        target_size: int | None = None,
        dry_run: bool = False,
        num_ranges: int = DEFAULT_NUM_RANGES,
        noise: bool = True,
        run_bytes: int = DEFAULT_RUN_BYTES,
        max_bytes_to_rewrite: int | None = None,
        history_uri: str | None = None,
        executor: Executor | None = None,
        max_concurrent_tasks: int | None = None,
        writer_options: WriterOptions | None = None,
        retry: RetryPolicy | None = None,
        progress: Callable[[OptimizeProgress], None] | None = None,
    ) -> OptimizeStats:
        """Cluster files along a Z-order or Hilbert curve over ``columns``; the options are those of `ZOrderOptions`.

        Example:
            >>> DeltaTable("/data/flows").zorder(["sourceIP", "destIP"], curve="hilbert")  # doctest: +SKIP

        Returns:
            OptimizeStats with ``z_order_stats``.
        """
        options = ZOrderOptions.build(
            {
                "columns": columns,
                "curve": curve,
                "where": where,
                "target_size": target_size,
                "dry_run": dry_run,
                "num_ranges": num_ranges,
                "noise": noise,
                "run_bytes": run_bytes,
                "max_bytes_to_rewrite": max_bytes_to_rewrite,
                "history_uri": history_uri,
            },
            self.uri,
        )
        from airflow_provider_deltalite.maintenance.clustering.zorder import zorder

        return zorder(
            self,
            options,
            executor=executor,
            max_concurrent_tasks=max_concurrent_tasks,
            writer_options=writer_options,
            retry=retry,
            progress=progress,
        )

    def vacuum(
        self,
        *,
        retention_hours: float | None = None,
        dry_run: bool = False,
        mode: str = "full",
        enforce_retention_duration: bool = True,
        commit_log_entries: bool = True,
        inventory: str | None = None,
        inventory_format: str | None = None,
        max_files_to_delete: int | None = None,
        history_uri: str | None = None,
        executor: Executor | None = None,
        max_concurrent_tasks: int | None = None,
        progress: Callable[[VacuumProgress], None] | None = None,
    ) -> VacuumStats:
        """Delete files the table no longer references once its retention has passed; see `VacuumOptions`.

        Example:
            >>> DeltaTable("/data/events").vacuum(dry_run=True).to_dict()["filesToDelete"]  # doctest: +SKIP

        Returns:
            VacuumStats.
        """
        options = VacuumOptions.build(
            {
                "retention_hours": retention_hours,
                "dry_run": dry_run,
                "mode": mode,
                "enforce_retention_duration": enforce_retention_duration,
                "commit_log_entries": commit_log_entries,
                "inventory": inventory,
                "inventory_format": inventory_format,
                "max_files_to_delete": max_files_to_delete,
                "history_uri": history_uri,
            },
            self.uri,
        )
        from airflow_provider_deltalite.maintenance.vacuum import vacuum

        return vacuum(self, options, executor=executor, max_concurrent_tasks=max_concurrent_tasks, progress=progress)

    def changes(
        self,
        since: int,
        until: int | None = None,
        *,
        on_gap: str = "raise",
        table_id: str | None = None,
        on_recreate: str = "raise",
        include_metadata_changes: bool = False,
    ) -> ChangeSet:
        """The commits after version ``since`` (-1: from the beginning), each classified as data, rearrange,
        maintenance or metadata; see `ChangesOptions` and `maintenance.changes.list_changes`.

        Reads only the log after ``since``: no whole-log listing, no snapshot replay.

        Example:
            >>> [(c.version, c.kind) for c in DeltaTable("/data/events").changes(since=41).changes]  # doctest: +SKIP
            [(42, 'rearrange'), (43, 'data')]
        """
        from airflow_provider_deltalite.maintenance.changes import list_changes

        return list_changes(
            self.storage,
            since,
            until,
            on_gap=on_gap,
            table_id=table_id,
            on_recreate=on_recreate,
            include_metadata_changes=include_metadata_changes,
        )

    def checkpoint(self, *, cleanup_log: bool = False, history_uri: str | None = None) -> CheckpointResult:
        """Write a checkpoint of the latest version; with ``cleanup_log``, then delete expired log files; with
        ``history_uri``, append a row to the operations history table there.

        Example:
            >>> DeltaTable("/data/events").checkpoint().checkpoint.version  # doctest: +SKIP
            412
        """
        from airflow_provider_deltalite.maintenance.checkpoint import checkpoint

        return checkpoint(self, cleanup_log=cleanup_log, history_uri=history_uri)

    def health(
        self,
        *,
        columns: Sequence[str] | None = None,
        min_file_size: int | None = None,
        now: datetime | int | str | None = None,
        snapshot: Snapshot | None = None,
        executor: Executor | None = None,
    ) -> TableHealth:
        """The table's health from its log and file statistics (no data file is read): files and their size
        histogram, small files, rows deleted by deletion vectors, clustering quality, what VACUUM would reclaim and
        when, the log's checkpoint lag and size, and the last OPTIMIZE and VACUUM; per partition and in total.

        Args:
            columns: measure clustering on these columns (default: the liquid clustering columns, else those of the
                newest Z-order in the log, else none).
            min_file_size: files below it are small (default: ``delta.targetFileSize``, else 1 GiB, as OPTIMIZE).
            now: the time ages and retention are measured at (datetime, epoch ms or ISO-8601; default: now).
            snapshot: a snapshot of this table already loaded (default: the latest version).
            executor: the Spark executor: a checkpoint of at least its ``checkpoint_task_bytes`` (default 1 GiB) is
                summed by its tasks, a slice each, instead of in this process (the same figures).

        Example:
            >>> health = DeltaTable("/data/events").health(columns=["user_id"])  # doctest: +SKIP
            >>> health.small_files, health.tombstones.reclaimable_bytes  # doctest: +SKIP
            (412, 73400320)
            >>> health.to_dict()["clustering"][0]["averageDepth"]  # doctest: +SKIP
            3.5

        Returns:
            TableHealth (`maintenance.health.metrics` defines every figure).
        """
        from airflow_provider_deltalite.maintenance.health.compute import table_health

        return table_health(
            self, snapshot=snapshot, columns=columns, min_file_size=min_file_size, now=now, tasks=executor
        )
