"""The VACUUM operation: check the retention, plan (FULL or LITE), commit VACUUM START, delete, commit VACUUM END.

See the package docstring for the rules.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from airflow_provider_deltalite.engine.crash_points import crash_point
from airflow_provider_deltalite.engine.errors import (
    CreateOnlyNotSupported,
    DeltaLiteError,
    InvalidArgument,
    InvalidInventory,
    StorageError,
    VacuumRefused,
)
from airflow_provider_deltalite.engine.features import ensure_writable
from airflow_provider_deltalite.engine.log_path import LOG_DIR
from airflow_provider_deltalite.engine.snapshot import Snapshot
from airflow_provider_deltalite.engine.snapshot_stream import stream_snapshot
from airflow_provider_deltalite.engine.storage import Storage
from airflow_provider_deltalite.engine.table import Table
from airflow_provider_deltalite.engine.transaction import CommitResult, Transaction
from airflow_provider_deltalite.maintenance.executor import Executor, LocalExecutor
from airflow_provider_deltalite.maintenance.history.record import recorded
from airflow_provider_deltalite.maintenance.options import VacuumOptions
from airflow_provider_deltalite.maintenance.vacuum.budget import cut_oldest, oldest_first
from airflow_provider_deltalite.maintenance.vacuum.by_prefix import plan_by_prefix, spill_table
from airflow_provider_deltalite.maintenance.vacuum.delete import delete_plan
from airflow_provider_deltalite.maintenance.vacuum.inventory import read_inventory, to_listing
from airflow_provider_deltalite.maintenance.vacuum.listing import ListedDir
from airflow_provider_deltalite.maintenance.vacuum.lite import (
    latest_commit_at_or_before,
    read_last_vacuum_info,
    write_last_vacuum_info,
)
from airflow_provider_deltalite.maintenance.vacuum.paths import (
    VACUUM_FILE_FIELDS,
    HiddenRule,
    protected_files,
)
from airflow_provider_deltalite.maintenance.vacuum.plan import (
    FULL,
    VacuumPlan,
    plan_full,
    plan_lite,
    recheck,
)
from airflow_provider_deltalite.maintenance.vacuum.retention import RetentionWindow, resolve_retention
from airflow_provider_deltalite.maintenance.vacuum.stats import VacuumProgress, VacuumStats

log = logging.getLogger(__name__)


def _start_parameters(window: RetentionWindow) -> dict[str, Any]:
    parameters: dict[str, Any] = {"retentionCheckEnabled": window.check_enabled}
    if window.specified_retention_ms is not None:
        parameters["specifiedRetentionMillis"] = window.specified_retention_ms
    parameters["defaultRetentionMillis"] = window.default_retention_ms
    return parameters


def _commit(
    table: Table, snapshot: Snapshot, operation: str, parameters: dict[str, Any], metrics: dict[str, Any]
) -> CommitResult:
    try:
        return Transaction(table.storage, snapshot).commit(operation, parameters, metrics)
    except CreateOnlyNotSupported as exc:
        raise exc.extended(
            "or vacuum without the VACUUM START/END log entries (commit_log_entries=False, CLI --no-commit-log-entries)"
        ) from None


@recorded("vacuum")
def vacuum(
    table: Table,
    options: VacuumOptions | None = None,
    *,
    executor: Executor | None = None,
    max_concurrent_tasks: int | None = None,
    progress: Callable[[VacuumProgress], None] | None = None,
    snapshot: Snapshot | None = None,
    **fields: Any,
) -> VacuumStats:
    """Delete files ``table`` no longer needs (see the module docstring for the rules).

    Args:
        table: the table.
        options: `VacuumOptions` (or its fields as keyword arguments):
            ``retention_hours`` keeps deleted files this long (default: the table's
            ``delta.deletedFileRetentionDuration``, 7 days unless set); shorter than the table's is refused unless
            ``enforce_retention_duration=False``; longer is honoured (it deletes less; note that versions older than
            the table's retention may already miss files, since checkpoints drop tombstones past it).
            ``dry_run`` lists what would be deleted (``files_to_delete``, with sizes) and deletes and commits nothing.
            ``mode`` is ``"full"`` (list storage) or ``"lite"`` (read the log since the last vacuum).
            ``enforce_retention_duration`` refuses a retention below the table's, and a table whose log retention is
            shorter than its file retention. ``commit_log_entries`` commits VACUUM START and VACUUM END around the
            deletes. ``inventory`` (FULL) reads the files from an inventory instead of listing storage (see
            `inventory`); ``inventory_format`` names its format.
        executor: where listing and deleting run (default: a `LocalExecutor` of ``max_concurrent_tasks`` threads).
        max_concurrent_tasks: threads of the default local executor (default: one per CPU on a local disk, 4 per CPU
            and at least 8 on object stores).
        progress: called while listing and deleting.
        snapshot: the snapshot to plan from, when the caller has loaded it already (default: the latest).

    Returns:
        VacuumStats.

    Raises:
        InvalidArgument: negative ``retention_hours`` or an unknown ``mode``.
        RetentionTooShort: the retention checks failed (the message says how to override).
        ProtocolNotSupported: the table has a feature deltalite cannot write (the reference's unconditional writer
            protocol check, which ``vacuumProtocolCheck`` demands).
        VacuumRefused: LITE without the commits it needs, or live files missing from storage (FULL).
        InvalidInventory: the inventory cannot be read or lacks a column (nothing deleted).
        TableNotFound: the path is not a Delta table.
        StorageError: some files could not be deleted (after VACUUM END recorded FAILED); the message counts them.

    Example:
        >>> vacuum(DeltaTable("/data/events"), retention_hours=240).objects_deleted  # doctest: +SKIP
        412
    """
    start_ms = int(time.time() * 1000)
    clock = time.monotonic()
    uri = table.uri
    opts = VacuumOptions.resolve(options, fields, uri)
    kind = opts.mode.upper()
    if max_concurrent_tasks is not None and (isinstance(max_concurrent_tasks, bool) or max_concurrent_tasks < 1):
        raise InvalidArgument(f"max_concurrent_tasks must be at least 1, got {max_concurrent_tasks!r}", uri)
    storage = table.storage
    by_prefix = kind == FULL and opts.inventory is None
    state = _planning_state(table, snapshot, by_prefix)
    snapshot = state.snapshot
    ensure_writable(snapshot.protocol, uri)  # before anything else, as vacuumProtocolCheck requires
    _refuse_misnamed_log_files(storage, uri)
    window = resolve_retention(
        snapshot,
        retention_hours=opts.retention_hours,
        enforce_retention_duration=opts.enforce_retention_duration,
        now_ms=start_ms,
    )
    rule = HiddenRule.for_snapshot(snapshot)
    owned = executor is None
    # listing and deleting wait on the store: its own concurrency, not the core count, sizes the default pool
    executor = executor or LocalExecutor(max_concurrent_tasks or storage.default_concurrency)
    listing: list[ListedDir] | None = None  # FULL's files, for max_files_to_delete's oldest-first order
    try:
        if by_prefix:
            budget = opts.max_files_to_delete is not None
            spill, _ = spill_table(storage, snapshot, state.batches, window.horizon_ms, with_expired=budget)
            try:
                found = plan_by_prefix(
                    storage,
                    rule,
                    executor,
                    spill,
                    window.horizon_ms,
                    remove_dirs=storage.has_real_directories,
                    progress=progress,
                    with_ages=budget,
                )
            finally:
                spill.close()
            if found.missing:
                raise VacuumRefused(
                    f"{found.missing} files the log references as live are not in storage (e.g. "
                    f"{found.first_missing!r}): the log and the files on storage do not describe the same table (an "
                    "incomplete copy, renamed files, or paths that do not match), so files that look unreferenced "
                    "may be this table's data; nothing was deleted. Restore the missing files or remove them from "
                    "the table first",
                    uri,
                )
            plan, deferred = cut_oldest(found.plan, opts.max_files_to_delete, found.ages or {})
        else:
            protected = protected_files(snapshot, window.horizon_ms)
            if opts.inventory is not None:
                try:
                    inventory = read_inventory(storage, opts.inventory, opts.inventory_format)
                except InvalidInventory as exc:
                    raise InvalidInventory(exc.problem, uri) from None
                listing, rows = to_listing(inventory, storage, rule)
                del inventory
                log.info(
                    "VACUUM of %s from the inventory %s: %d rows, %d files under the table root",
                    uri,
                    opts.inventory,
                    rows,
                    sum(len(d.paths) for d in listing),
                )
                plan = plan_full(listing, protected, window.horizon_ms, remove_dirs=storage.has_real_directories)
            else:
                plan = plan_lite(storage, snapshot, protected, rule, window.horizon_ms)
            plan, deferred = oldest_first(plan, opts.max_files_to_delete, snapshot, listing)
        identify_ms = int((time.monotonic() - clock) * 1000)
        run = _Run(table, snapshot, window, kind, executor.name, start_ms, identify_ms, deferred)
        if opts.dry_run:
            return run.stats(plan, dry_run=True)
        return _delete_and_commit(run, plan, executor, opts.commit_log_entries, progress)
    finally:
        if owned:
            executor.close()


@dataclass(frozen=True)
class _PlanningState:
    """The snapshot VACUUM plans from, and (FULL) its live files and tombstones a batch at a time."""

    snapshot: Snapshot
    batches: Iterable[tuple[pa.Table, pa.Table]] = ()


def _planning_state(table: Table, snapshot: Snapshot | None, streamed: bool) -> _PlanningState:
    """FULL (``streamed``) reads the table as a stream, unless the caller's snapshot holds every file already; LITE
    and FULL from an inventory need every protected path at once (the snapshot, projected)."""
    if snapshot is not None:
        snapshot = table.planning_snapshot(snapshot)  # refuses another table's
        if snapshot.pruned_by is None:
            return _PlanningState(snapshot, [(snapshot.raw_files, snapshot.tombstones)] if streamed else ())
    version = snapshot.version if snapshot is not None else None
    if streamed:
        stream = stream_snapshot(table.storage, version, file_fields=VACUUM_FILE_FIELDS)
        return _PlanningState(stream.snapshot, stream.batches())
    # a snapshot without every file (partition-pruned or streamed) cannot protect the table's files: load them all
    return _PlanningState(table.snapshot(version, file_fields=VACUUM_FILE_FIELDS))


# What Spark and the Delta kernels for the JVM take as a commit or checkpoint: any number of digits, where the protocol
# (and deltalite, delta-rs) needs 20.
_JVM_LOG_NAME = re.compile(r"([0-9]+)\.(json|checkpoint(\.[0-9]+\.[0-9]+)?\.parquet)")


def _refuse_misnamed_log_files(storage: Storage, uri: str) -> None:
    """Refuse a log holding a commit or checkpoint name whose version is not 20 digits (``2.json``): other readers
    take it as a version, so the files only it references would be live to them and unreferenced to VACUUM."""
    for info in storage.list_from(LOG_DIR):
        found = _JVM_LOG_NAME.fullmatch(info.name)
        if found and len(found.group(1)) != 20:
            raise VacuumRefused(
                f"_delta_log holds {info.name!r}: Spark reads it as version {int(found.group(1))} but the protocol "
                "names versions with 20 digits, so the files it references would look unreferenced here; nothing was "
                "deleted. Rename it to its 20-digit name or remove it first",
                uri,
            )


@dataclass(frozen=True)
class _Run:
    """What one VACUUM run knows once planned: enough to commit, and to report."""

    table: Table
    snapshot: Snapshot
    window: RetentionWindow
    mode: str
    executor: str
    start_ms: int
    identify_ms: int
    deferred: int = 0  # eligible files left for a later run by max_files_to_delete

    def stats(
        self,
        plan: VacuumPlan,
        *,
        dry_run: bool = False,
        deleted: int | None = None,
        delete_ms: int = 0,
        versions: tuple[int, ...] = (),
        gone: int = 0,
    ) -> VacuumStats:
        return VacuumStats(
            is_dry_run=dry_run,
            mode=self.mode,
            specified_retention_millis=self.window.specified_retention_ms,
            default_retention_millis=self.window.default_retention_ms,
            min_retained_timestamp=self.window.horizon_ms,
            dirs_present_before_delete=plan.dirs_present,
            files_and_dirs_present_before_delete=plan.entries_present,
            num_files_to_delete=len(plan.files) + len(plan.dirs),
            size_of_data_to_delete=plan.size,
            objects_deleted=len(plan.files) + len(plan.dirs) if deleted is None else deleted,
            time_taken_to_identify_eligible_files=self.identify_ms,
            time_taken_for_delete=delete_ms,
            latest_commit_version=self.snapshot.version,
            files_to_delete=[{"path": f, "size": size} for f, size in plan.files] if dry_run else None,
            dirs_to_delete=list(plan.dirs) if dry_run else None,
            eligible_start_commit_version=plan.lite.start if plan.lite else None,
            eligible_end_commit_version=plan.lite.end if plan.lite else None,
            num_partition_columns=len(self.snapshot.partition_columns),
            committed_versions=versions,
            vacuum_start_time=self.start_ms,
            vacuum_end_time=int(time.time() * 1000),
            executor=self.executor,
            files_already_gone=gone,
            num_files_deferred=self.deferred,
        )


def _delete_and_commit(
    run: _Run,
    plan: VacuumPlan,
    executor: Executor,
    commit_log_entries: bool,
    progress: Callable[[VacuumProgress], None] | None,
) -> VacuumStats:
    """VACUUM START, the deletes, VACUUM END (FAILED if anything went wrong after START), then LITE's progress."""
    table, snapshot, window = run.table, run.snapshot, run.window
    storage = table.storage
    versions: list[int] = []
    if commit_log_entries:
        started = _commit(
            table,
            snapshot,
            "VACUUM START",
            _start_parameters(window),
            {"numFilesToDelete": len(plan.files) + len(plan.dirs), "sizeOfDataToDelete": plan.size},
        )
        moved = bool(started.winning_commits)  # someone committed between our snapshot and VACUUM START
        versions.append(started.version)
        crash_point("vacuum_after_start")
    else:
        moved = None
    try:
        if moved is None:
            moved = table.latest_version() != snapshot.version
        plan = recheck(table, snapshot, plan, window.horizon_ms, moved=moved)
        delete_clock = time.monotonic()
        deleted = delete_plan(storage, plan, executor, progress)
    except BaseException:
        if commit_log_entries:
            _end_failed(table, snapshot)
        raise
    delete_ms = int((time.monotonic() - delete_clock) * 1000)
    objects = deleted.files + deleted.dirs
    if deleted.failed:
        if commit_log_entries:
            _end_failed(table, snapshot)
        path, reason = deleted.failed[0]
        raise StorageError(
            f"VACUUM deleted {objects} of {len(plan.files) + len(plan.dirs)} files and directories; "
            f"{len(deleted.failed)} files could not be deleted (first: {path}: {reason}); "
            + ("VACUUM END recorded FAILED and " if commit_log_entries else "")
            + "the files stay for the next run",
            table.uri,
        )
    crash_point("vacuum_before_end")
    if commit_log_entries:
        ended = _commit(
            table,
            snapshot,
            "VACUUM END",
            {"status": "COMPLETED"},
            {"numDeletedFiles": objects, "numVacuumedDirectories": plan.dirs_present},
        )
        versions.append(ended.version)
    if run.mode == FULL:
        outside = latest_commit_at_or_before(storage, snapshot, window.horizon_ms)
    else:
        outside = plan.lite.latest_outside_window if plan.lite else None
    # files left by max_files_to_delete were removed in those commits: LITE must read them again next time
    if outside is not None and not run.deferred:
        recorded = read_last_vacuum_info(storage)
        if recorded is None or outside > recorded:  # progress never goes back (a longer retention this time)
            write_last_vacuum_info(storage, outside)
    return run.stats(plan, deleted=objects, delete_ms=delete_ms, versions=tuple(versions), gone=deleted.missing)


def _end_failed(table: Table, snapshot: Snapshot) -> int | None:
    """Commit VACUUM END with status FAILED; a failure here must not hide the error that got us here."""
    try:
        return _commit(table, snapshot, "VACUUM END", {"status": "FAILED"}, {}).version
    except (DeltaLiteError, OSError) as exc:
        log.warning("could not commit VACUUM END (FAILED): %s", exc)
        return None
