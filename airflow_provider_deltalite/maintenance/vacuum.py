"""VACUUM: delete the files a Delta table no longer references, once its retention has passed.

Planning follows the reference (`VacuumCommand`):

- **Protected** (never deleted): every live file, every tombstone whose ``deletionTimestamp`` is not older than the
  horizon, and the deletion-vector files of both (`vacuum_paths.protected_files`). Change-data files are protected
  by their age only, as in the reference.
- **FULL** lists the table root recursively, in parallel by directory (tasks on the executor, one level of the tree
  at a time), skipping hidden names: a name starting with ``_`` or ``.`` is neither listed nor deleted, except
  partition directories ``col=value``, ``_change_data`` and ``_delta_index``. A candidate is a listed file that is
  not protected and was last modified before the horizon. Directories left empty (and themselves older than the
  horizon) are removed afterwards, never recursively.
- **LITE** takes its candidates from the ``remove`` and ``cdc`` actions of the commits since the last vacuum
  (`vacuum_lite`); it never deletes never-committed files or directories.

Never deleted, whatever the mode: anything under ``_delta_log``, anything outside the table root, hidden files,
files younger than the horizon, files referenced by absolute paths, and symbolic links and what they point to
(links are not followed; a link is not a file VACUUM owns). Before deleting, FULL checks that every live file it
could have listed is actually there: when the log references live files that storage does not have (a table copied
or renamed without its files, paths that do not match), the listing and the log describe different tables and
deleting "unreferenced" files would be a guess, so VACUUM refuses (`VacuumRefused`). It also refuses a log holding a
commit or checkpoint whose version is not written with 20 digits (``2.json``): Spark reads that file as a version, so
the files only it references are live to Spark.

A real run commits ``VACUUM START`` (parameters and the counts it is about to delete), deletes, and commits
``VACUUM END`` (``COMPLETED`` or ``FAILED``); both commits carry no file actions. They are written on every storage
scheme unless ``commit_log_entries=False``. If another writer commits between planning and deleting, the plan is
checked against the newest snapshot and any candidate that became protected is kept. A dry run deletes and commits
nothing and lists the files (with sizes) it would delete.

Example:
    >>> stats = vacuum(DeltaTable("/data/events"), dry_run=True)  # doctest: +SKIP
    >>> stats.num_files_to_delete, stats.size_of_data_to_delete  # doctest: +SKIP
    (412, 1073741824)
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from airflow_provider_deltalite.engine.crash_points import crash_point
from airflow_provider_deltalite.engine.errors import (
    CreateOnlyNotSupported,
    DeltaLiteError,
    InvalidArgument,
    StorageError,
    VacuumRefused,
)
from airflow_provider_deltalite.engine.features import ensure_writable
from airflow_provider_deltalite.engine.log_path import LOG_DIR
from airflow_provider_deltalite.engine.snapshot import Snapshot
from airflow_provider_deltalite.engine.storage import DeleteOutcome, Storage
from airflow_provider_deltalite.engine.table import Table
from airflow_provider_deltalite.engine.transaction import CommitResult, Transaction
from airflow_provider_deltalite.maintenance.executor import Executor, LocalExecutor
from airflow_provider_deltalite.maintenance.options import VacuumOptions
from airflow_provider_deltalite.maintenance.retention import RetentionWindow, resolve_retention
from airflow_provider_deltalite.maintenance.vacuum_lite import (
    LiteWindow,
    latest_commit_at_or_before,
    lite_candidates,
    lite_window,
    read_last_vacuum_info,
    write_last_vacuum_info,
)
from airflow_provider_deltalite.maintenance.vacuum_paths import (
    HiddenRule,
    ProtectedFiles,
    plain_local_file,
    protected_files,
)
from airflow_provider_deltalite.maintenance.vacuum_stats import VacuumStats

log = logging.getLogger(__name__)

FULL = "FULL"
LITE = "LITE"


def default_threads(storage: Storage) -> int:
    """Threads of the default local executor. On object stores listing and deleting wait on the network, so the
    pool is wider than the core count; on a local disk they are bound by the CPU (Python's work per entry and the
    system calls), where more threads than cores only add contention."""
    return storage.default_concurrency


MIN_DELETE_BATCH = 100
TASKS_PER_SLOT = 4  # tasks per unit of executor parallelism in one listing level or the delete phase


# -- listing -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ListedDir:
    """One listed directory (``""`` is the root), as columns.

    Attributes:
        path: relative to the root.
        modification_time: the directory's own mtime (0 where the store has no directories).
        paths / sizes / mtimes: its visible plain files, paths relative to the root.
        subdirs: ``(relative path, mtime)`` of its visible subdirectories.
        others: names of links and other entries (never followed, never deleted).
        hidden_entries: how many entries the hidden rule left out (then it is not empty, whatever VACUUM deletes).
    """

    path: str
    modification_time: int
    paths: tuple[str, ...]
    sizes: tuple[int, ...]
    mtimes: tuple[int, ...]
    subdirs: tuple[tuple[str, int], ...]
    others: tuple[str, ...]
    hidden_entries: int


@dataclass(frozen=True)
class ListTask:
    """A batch of directories to list one level deep (an executor work item).

    ``protected``: per directory, the names of files whose size and age do not matter (they are kept anyway), so a
    local listing need not stat them.
    """

    storage: Storage
    dirs: tuple[tuple[str, int], ...]
    rule: HiddenRule
    protected: Mapping[str, frozenset[str]] = field(default_factory=dict)


def list_directories(task: ListTask) -> list[ListedDir]:
    """List each directory of the task one level deep, dropping hidden names (runs on the executor)."""
    rule = task.rule
    out = []
    for path, mtime in task.dirs:
        prefix = f"{path}/" if path else ""
        listing = task.storage.list_dir(path, task.protected.get(path, frozenset()))
        names, sizes, mtimes = listing.file_names, listing.file_sizes, listing.file_mtimes
        hidden = 0
        if rule.may_hide(names):
            keep = [i for i, name in enumerate(names) if not rule.is_hidden(name)]
            hidden += len(names) - len(keep)
            names = tuple(names[i] for i in keep)
            sizes = tuple(sizes[i] for i in keep)
            mtimes = tuple(mtimes[i] for i in keep)
        subdirs = []
        for name, dir_mtime in zip(listing.dir_names, listing.dir_mtimes, strict=True):
            if rule.is_hidden(name):
                hidden += 1
            else:
                subdirs.append((prefix + name, dir_mtime))
        out.append(
            ListedDir(
                path,
                mtime,
                tuple(prefix + name for name in names),
                sizes,
                mtimes,
                tuple(subdirs),
                listing.others,
                hidden,
            )
        )
    return out


def _spread(items: Sequence[Any], tasks: int) -> list[tuple[Any, ...]]:
    tasks = max(1, min(tasks, len(items)))
    return [tuple(items[i::tasks]) for i in range(tasks)]


def list_table(
    storage: Storage,
    rule: HiddenRule,
    executor: Executor,
    progress: Callable[[VacuumProgress], None] | None = None,
    protected: frozenset[str] | None = None,
) -> list[ListedDir]:
    """Every non-hidden directory under the root with its files, listed level by level: the root here, each deeper
    level as parallel tasks on ``executor`` (so a deep or skewed tree still spreads over the executor).

    Files in ``protected`` may come back with size and mtime -1 (see `ListTask`)."""
    by_dir: dict[str, set[str]] = {}
    for path in protected or ():
        parent, _, name = path.rpartition("/")
        by_dir.setdefault(parent, set()).add(name)
    names = {parent: frozenset(found) for parent, found in by_dir.items()}

    def task(batch: tuple[tuple[str, int], ...]) -> ListTask:
        return ListTask(storage, batch, rule, {d: names[d] for d, _ in batch if d in names})

    listed = list_directories(task((("", 0),)))
    files = len(listed[0].paths)
    frontier = list(listed[0].subdirs)
    while frontier:
        tasks = [task(batch) for batch in _spread(frontier, executor.parallelism * TASKS_PER_SLOT)]
        frontier = []
        for result in executor.map(list_directories, tasks):
            for d in result:
                listed.append(d)
                files += len(d.paths)
                frontier.extend(d.subdirs)
            if progress is not None:
                progress(VacuumProgress("listing", len(listed), None, files))
    return listed


# -- planning --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VacuumPlan:
    """What a VACUUM will delete.

    Attributes:
        mode: FULL or LITE.
        files: ``(path, size)`` of the files to delete, relative to the root, sorted.
        dirs: directories to remove once their files are gone, deepest first.
        dirs_present: listed directories plus the root (the reference's ``dirsPresentBeforeDelete``).
        entries_present: listed files and directories (LITE: candidate paths read from the log).
        lite: the commits LITE read (None for FULL).
    """

    mode: str
    files: tuple[tuple[str, int], ...]
    dirs: tuple[str, ...]
    dirs_present: int
    entries_present: int
    lite: LiteWindow | None = None

    @cached_property
    def size(self) -> int:
        return sum(size for _, size in self.files)

    def without(self, keep: Iterable[str]) -> VacuumPlan:
        """The plan minus the files in ``keep`` (and the directories that would then stay non-empty)."""
        keep = set(keep)
        if not keep:
            return self
        parents = {p.rsplit("/", 1)[0] for p in keep if "/" in p}
        blocked = {d for d in self.dirs if any(p == d or p.startswith(d + "/") for p in parents)}
        return VacuumPlan(
            self.mode,
            tuple(f for f in self.files if f[0] not in keep),
            tuple(d for d in self.dirs if d not in blocked),
            self.dirs_present,
            self.entries_present,
            self.lite,
        )


def missing_live_files(listing: Sequence[ListedDir], protected: ProtectedFiles, rule: HiddenRule) -> list[str]:
    """Live files (and their DV files) that the listing should have found and did not, sorted."""
    present: set[str] = set()
    for d in listing:
        present.update(d.paths)
    absent = protected.live - present
    if not absent:
        return []
    dirs = {d.path: d for d in listing}
    missing = []
    for path in absent:
        parent, _, name = path.rpartition("/")
        listed = dirs.get(parent)
        if listed is None or rule.is_hidden(name) or name in listed.others or path in dirs:
            continue  # under a hidden directory or a link, a link itself, or a directory: not a file it could list
        missing.append(path)
    return sorted(missing)


def plan_full(
    listing: Sequence[ListedDir],
    protected: ProtectedFiles,
    horizon_ms: int,
    *,
    remove_dirs: bool = True,
) -> VacuumPlan:
    """The files and directories a FULL vacuum deletes, from a listing (pure: no I/O).

    A file goes when it is not protected and was last modified before ``horizon_ms``. A directory goes when, after
    that, nothing would be left in it (no kept file, no hidden entry, no link, no kept subdirectory) and it was
    itself last modified before the horizon: a younger empty directory may have just been created by a writer.
    """
    keep = protected.paths
    files: list[tuple[str, int]] = []
    emptied: dict[str, bool] = {}
    entries = 0
    for d in listing:
        entries += len(d.paths) + (1 if d.path else 0)
        before = len(files)
        files.extend(
            (path, size)
            for path, size, mtime in zip(d.paths, d.sizes, d.mtimes, strict=True)
            if mtime < horizon_ms and path not in keep
        )
        emptied[d.path] = len(files) - before == len(d.paths) and not d.hidden_entries and not d.others
    dirs: tuple[str, ...] = ()
    if remove_dirs:
        removable: dict[str, bool] = {}
        by_depth = sorted(listing, key=lambda d: d.path.count("/") + (1 if d.path else 0), reverse=True)
        for d in by_depth:
            removable[d.path] = (
                bool(d.path)
                and emptied[d.path]
                and d.modification_time < horizon_ms
                and all(removable.get(sub, False) for sub, _ in d.subdirs)
            )
        dirs = tuple(sorted((p for p, ok in removable.items() if ok), key=lambda p: (-p.count("/"), p)))
    files.sort()
    return VacuumPlan(FULL, tuple(files), dirs, len(listing), entries)


def plan_lite(
    storage: Storage, snapshot: Snapshot, protected: ProtectedFiles, rule: HiddenRule, horizon_ms: int
) -> VacuumPlan:
    """The files a LITE vacuum deletes: removed (or change-data) paths of the expired commits since the last vacuum
    that are not hidden, older than the horizon and not protected."""
    window = lite_window(storage, snapshot, horizon_ms)
    candidates = lite_candidates(storage, snapshot, window)
    # The log names these paths, not a listing: on a local disk one may be a link or lead through a directory link
    # out of the table, which VACUUM never deletes.
    local = storage.native_files
    dirs: dict[str, bool] = {}
    files = sorted(
        (c.path, c.size)
        for c in candidates
        if c.modification_time < horizon_ms
        and c.path not in protected.paths
        and not rule.is_hidden_path(c.path)
        and not _in_log(c.path)
        and (not local or plain_local_file(storage.root, c.path, dirs))
    )
    return VacuumPlan(LITE, tuple(files), (), 1, len(candidates), window)


def _in_log(path: str) -> bool:
    return path == LOG_DIR or path.startswith(LOG_DIR + "/")


# -- deleting --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeleteTask:
    """A batch of files to delete, relative to the root (an executor work item)."""

    storage: Storage
    paths: tuple[str, ...]


def delete_batch(task: DeleteTask) -> DeleteOutcome:
    """Delete one batch (runs on the executor). The paths are checked once more: a path that is empty, absolute, in
    the log, or has a ``.``/``..`` segment is never handed to the store, nor, on a local disk, a link or a path that
    leads through a directory link (it may have appeared since planning)."""
    storage = task.storage
    local = storage.native_files
    dirs: dict[str, bool] = {}
    safe: list[str] = []
    refused: list[tuple[str, str]] = []
    for p in task.paths:
        if not _deletable(p):
            refused.append((p, "refused: not a plain path inside the table"))
        elif local and not plain_local_file(storage.root, p, dirs):
            refused.append((p, "refused: a symbolic link, or reached through one"))
        else:
            safe.append(p)
    outcome = storage.delete_files(safe)
    return DeleteOutcome(outcome.deleted, outcome.missing, outcome.failed + tuple(refused))


def _deletable(path: str) -> bool:
    if not path or path.startswith("/") or _in_log(path):
        return False
    return all(part not in ("", ".", "..") for part in path.split("/"))


@dataclass(frozen=True)
class VacuumProgress:
    """Reported while listing (``phase="listing"``: directories listed, files found) and deleting
    (``phase="deleting"``: files done of ``total``)."""

    phase: str
    done: int
    total: int | None
    files: int = 0


@dataclass
class _Deleted:
    files: int = 0
    dirs: int = 0
    failed: tuple[tuple[str, str], ...] = ()


def _delete(
    storage: Storage,
    plan: VacuumPlan,
    executor: Executor,
    progress: Callable[[VacuumProgress], None] | None,
) -> _Deleted:
    paths = [p for p, _ in plan.files]
    result = _Deleted()
    if paths:
        if storage.native_files:
            size = max(MIN_DELETE_BATCH, math.ceil(len(paths) / (executor.parallelism * TASKS_PER_SLOT)))
            size = min(size, storage.delete_batch_size)
        else:
            size = storage.delete_batch_size  # one request per batch on object stores: fewer requests, not more tasks
        tasks = [DeleteTask(storage, tuple(paths[i : i + size])) for i in range(0, len(paths), size)]
        done = 0
        failed: list[tuple[str, str]] = []
        for outcome in executor.map(delete_batch, tasks):
            result.files += len(outcome.deleted)
            failed.extend(outcome.failed)
            done += len(outcome.deleted) + len(outcome.missing) + len(outcome.failed)
            if progress is not None:
                progress(VacuumProgress("deleting", done, len(paths)))
        result.failed = tuple(sorted(failed))
    # Deepest first, each only if empty: a directory whose file could not be deleted stays.
    for directory in plan.dirs:
        if storage.remove_empty_dir(directory):
            result.dirs += 1
    return result


# -- commits ---------------------------------------------------------------------------------------------------


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


def _recheck(table: Table, snapshot: Snapshot, plan: VacuumPlan, horizon_ms: int, *, moved: bool) -> VacuumPlan:
    """Keep any candidate that a commit made after planning protects again (a RESTORE re-adding an old file)."""
    if not moved:
        return plan
    latest = table.snapshot()
    again = protected_files(latest, horizon_ms)
    keep = [p for p, _ in plan.files if p in again.paths]
    if keep:
        log.warning(
            "VACUUM keeps %d files that commits after version %s reference again (e.g. %s)",
            len(keep),
            snapshot.version,
            keep[0],
        )
    return plan.without(keep)


# -- entry point -----------------------------------------------------------------------------------------------


def vacuum(
    table: Table,
    options: VacuumOptions | None = None,
    *,
    executor: Executor | None = None,
    max_concurrent_tasks: int | None = None,
    progress: Callable[[VacuumProgress], None] | None = None,
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
            deletes.
        executor: where listing and deleting run (default: a `LocalExecutor` of ``max_concurrent_tasks`` threads).
        max_concurrent_tasks: threads of the default local executor (default: one per CPU on a local disk, 4 per CPU
            and at least 8 on object stores).
        progress: called while listing and deleting.

    Returns:
        VacuumStats.

    Raises:
        InvalidArgument: negative ``retention_hours`` or an unknown ``mode``.
        RetentionTooShort: the retention checks failed (the message says how to override).
        ProtocolNotSupported: the table has a feature deltalite cannot write (the reference's unconditional writer
            protocol check, which ``vacuumProtocolCheck`` demands).
        VacuumRefused: LITE without the commits it needs, or live files missing from storage (FULL).
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
    snapshot = table.snapshot()
    ensure_writable(snapshot.protocol, uri)  # before anything else, as vacuumProtocolCheck requires
    _refuse_misnamed_log_files(table.storage, uri)
    window = resolve_retention(
        snapshot,
        retention_hours=opts.retention_hours,
        enforce_retention_duration=opts.enforce_retention_duration,
        now_ms=start_ms,
    )
    if max_concurrent_tasks is not None and (isinstance(max_concurrent_tasks, bool) or max_concurrent_tasks < 1):
        raise InvalidArgument(f"max_concurrent_tasks must be at least 1, got {max_concurrent_tasks!r}", uri)
    storage = table.storage
    rule = HiddenRule.for_snapshot(snapshot)
    protected = protected_files(snapshot, window.horizon_ms)
    owned = executor is None
    executor = executor or LocalExecutor(max_concurrent_tasks or default_threads(storage))
    try:
        if kind == FULL:
            listing = list_table(storage, rule, executor, progress, protected.paths)
            missing = missing_live_files(listing, protected, rule)
            if missing:
                raise VacuumRefused(
                    f"{len(missing)} files the log references as live are not in storage (e.g. {missing[0]!r}): the "
                    "log and the files on storage do not describe the same table (an incomplete copy, renamed "
                    "files, or paths that do not match), so files that look unreferenced may be this table's data; "
                    "nothing was deleted. Restore the missing files or remove them from the table first",
                    uri,
                )
            plan = plan_full(listing, protected, window.horizon_ms, remove_dirs=storage.has_real_directories)
        else:
            plan = plan_lite(storage, snapshot, protected, rule, window.horizon_ms)
        identify_ms = int((time.monotonic() - clock) * 1000)
        run = _Run(table, snapshot, window, kind, executor.name, start_ms, identify_ms)
        if opts.dry_run:
            return run.stats(plan, dry_run=True)
        return _delete_and_commit(run, plan, executor, opts.commit_log_entries, progress)
    finally:
        if owned:
            executor.close()


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

    def stats(
        self,
        plan: VacuumPlan,
        *,
        dry_run: bool = False,
        deleted: int | None = None,
        delete_ms: int = 0,
        versions: tuple[int, ...] = (),
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
        plan = _recheck(table, snapshot, plan, window.horizon_ms, moved=moved)
        delete_clock = time.monotonic()
        deleted = _delete(storage, plan, executor, progress)
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
    if outside is not None:
        recorded = read_last_vacuum_info(storage)
        if recorded is None or outside > recorded:  # progress never goes back (a longer retention this time)
            write_last_vacuum_info(storage, outside)
    return run.stats(plan, deleted=objects, delete_ms=delete_ms, versions=tuple(versions))


def _end_failed(table: Table, snapshot: Snapshot) -> int | None:
    """Commit VACUUM END with status FAILED; a failure here must not hide the error that got us here."""
    try:
        return _commit(table, snapshot, "VACUUM END", {"status": "FAILED"}, {}).version
    except (DeltaLiteError, OSError) as exc:
        log.warning("could not commit VACUUM END (FAILED): %s", exc)
        return None
