"""VacuumStats: what a VACUUM run found and deleted, named as the reference's ``DeltaVacuumStats``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from airflow_provider_deltalite.maintenance.optimize_stats import stats_to_dict


@dataclass(frozen=True)
class VacuumStats:
    """The result of `vacuum` (XCom carries ``to_dict()``, with camelCase keys).

    Attributes:
        is_dry_run: nothing was deleted or committed.
        mode: ``"FULL"`` (storage listed) or ``"LITE"`` (candidates read from the log).
        specified_retention_millis: the retention the caller gave, or None (the table's was used).
        default_retention_millis: the table's ``delta.deletedFileRetentionDuration``.
        min_retained_timestamp: the horizon in ms since the epoch: older unprotected files are deleted.
        dirs_present_before_delete: directories listed, plus one for the table root (as the reference counts).
        files_and_dirs_present_before_delete: files and directories listed (LITE: candidate paths read from the log).
        num_files_to_delete: files and directories found to delete (the reference counts both).
        size_of_data_to_delete: bytes of the files to delete.
        objects_deleted: files and directories whose deletion the store confirmed (dry run: that would be deleted).
        time_taken_to_identify_eligible_files: ms spent loading, listing and planning.
        time_taken_for_delete: ms spent deleting (0 for a dry run).
        latest_commit_version: the table version VACUUM planned on.
        files_to_delete: dry run only: ``{"path", "size"}`` of every file to delete, relative to the table root, as
            named on storage (decoded), sorted by path.
        dirs_to_delete: dry run only: directories that would be left empty and removed (FULL on local storage).
        eligible_start_commit_version / eligible_end_commit_version: LITE only: the commits read for candidates.
        num_partition_columns: the table's partition columns.
        committed_versions: the VACUUM START and VACUUM END versions (empty for a dry run or without log entries).
        vacuum_start_time / vacuum_end_time: ms since the epoch.
        executor: where listing and deleting ran (``local`` or ``spark``).
        files_already_gone: files planned for deletion that were gone when deleted (a stale inventory, another
            VACUUM); stores that cannot tell (S3's DeleteObjects) count them in ``objects_deleted``.
        num_files_deferred: eligible files left for a later run because of ``max_files_to_delete``.
    """

    is_dry_run: bool
    mode: str
    specified_retention_millis: int | None
    default_retention_millis: int
    min_retained_timestamp: int
    dirs_present_before_delete: int
    files_and_dirs_present_before_delete: int
    num_files_to_delete: int
    size_of_data_to_delete: int
    objects_deleted: int
    time_taken_to_identify_eligible_files: int
    time_taken_for_delete: int
    latest_commit_version: int
    files_to_delete: list[dict[str, Any]] | None = field(default=None)
    dirs_to_delete: list[str] | None = field(default=None)
    eligible_start_commit_version: int | None = None
    eligible_end_commit_version: int | None = None
    num_partition_columns: int = 0
    committed_versions: tuple[int, ...] = ()
    vacuum_start_time: int = 0
    vacuum_end_time: int = 0
    executor: str = "local"
    files_already_gone: int = 0
    num_files_deferred: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The stats as a JSON-ready dict with the reference's camelCase keys (``isDryRun``, ``objectsDeleted``...)."""
        return stats_to_dict(self)


@dataclass(frozen=True)
class VacuumProgress:
    """Reported while listing (``phase="listing"``: directories listed, files found; at most every 2 s or 10,000
    files, and once at the end) and deleting (``phase="deleting"``: files done of ``total``).

    ``elapsed_s``: seconds since the phase began; ``rate``: files listed (or done) per second."""

    phase: str
    done: int
    total: int | None
    files: int = 0
    elapsed_s: float = 0.0

    @property
    def rate(self) -> float:
        count = self.files if self.phase == "listing" else self.done
        return count / self.elapsed_s if self.elapsed_s > 0 else 0.0
