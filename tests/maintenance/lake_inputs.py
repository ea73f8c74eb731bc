"""Hand-built health and plans for the lake planner's pure tests: every figure is written here, none measured."""

from __future__ import annotations

from airflow_provider_deltalite.maintenance.health.metrics import (
    ColumnClustering,
    LastRuns,
    LogHealth,
    PartitionHealth,
    TableHealth,
    Tombstones,
)
from airflow_provider_deltalite.maintenance.planner.lake import LakeTable
from airflow_provider_deltalite.maintenance.planner.plan import Estimate, MaintenancePlan, PlannedAction

NOW = 1_800_000_000_000
HOUR_MS = 3_600_000


def health(
    uri: str,
    *,
    files: int = 10,
    small_files: int = 0,
    deleted_rows: int = 0,
    dv_files: int = 0,
    reclaimable_files: int = 0,
    reclaimable_bytes: int = 0,
    commits_since_checkpoint: int = 0,
    point_query_files: float | None = None,
    last_optimize: int | None = None,
    partitions: tuple[PartitionHealth, ...] = (),
) -> TableHealth:
    clustering = (
        (ColumnClustering("id", files, 0, point_query_files, point_query_files, None),)
        if point_query_files is not None
        else ()
    )
    return TableHealth(
        table_uri=uri,
        version=7,
        computed_at=NOW,
        partition_columns=("p",) if partitions else (),
        min_file_size=1 << 30,
        files=files,
        bytes=files * 1000,
        rows=files * 10,
        files_without_stats=0,
        size_histogram=(),
        small_files=small_files,
        small_bytes=small_files * 1000,
        small_file_share=small_files / files if files else 0.0,
        deleted_rows=deleted_rows,
        deleted_row_share=0.0,
        files_with_deletion_vectors=dv_files,
        clustering_columns=("id",) if clustering else (),
        clustering_source="given" if clustering else None,
        clustering=clustering,
        tombstones=Tombstones(
            168.0, reclaimable_files, reclaimable_bytes, 0, reclaimable_files, reclaimable_bytes, None, None, ()
        ),
        log=LogHealth(7, None, commits_since_checkpoint, 10, 8, 8000, 720.0, 0, 8, 8),
        last_runs=LastRuns(
            3 if last_optimize else None,
            last_optimize,
            (NOW - last_optimize) / HOUR_MS if last_optimize else None,
            None,
            None,
            None,
            (),
        ),
        partitions=partitions,
    )


def action(
    operation: str,
    *,
    read: int = 0,
    written: int | None = None,
    removed: int = 0,
    added: int = 0,
    deleted: int = 0,
    partitions: tuple[dict[str, str | None], ...] = (),
) -> PlannedAction:
    estimate = Estimate(read, read if written is None else written, removed, added, deleted)
    return PlannedAction(operation, {}, partitions, (), estimate)


def table(uri: str, actions: tuple[PlannedAction, ...] = (), **figures: object) -> LakeTable:
    plan = MaintenancePlan(uri, 7, NOW, {"min_input_files": 5, "max_rewrite_bytes_per_run": 1 << 40}, actions)
    return LakeTable(uri, health(uri, **figures), plan)  # type: ignore[arg-type]
