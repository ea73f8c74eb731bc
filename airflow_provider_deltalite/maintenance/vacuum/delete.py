"""Deleting a plan: batches of paths as executor tasks (one S3 DeleteObjects per batch), only confirmed deletions
counted; a path inside `_delta_log`, absolute, or with empty, `.` or `..` segments is refused at the last moment."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from airflow_provider_deltalite.engine.storage import DeleteOutcome, Storage
from airflow_provider_deltalite.maintenance.executor import Executor
from airflow_provider_deltalite.maintenance.vacuum.listing import TASKS_PER_SLOT
from airflow_provider_deltalite.maintenance.vacuum.paths import (
    in_log,
    plain_local_file,
)
from airflow_provider_deltalite.maintenance.vacuum.plan import VacuumPlan
from airflow_provider_deltalite.maintenance.vacuum.stats import VacuumProgress

MIN_DELETE_BATCH = 100


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
        if not deletable(p):
            refused.append((p, "refused: not a plain path inside the table"))
        elif local and not plain_local_file(storage.root, p, dirs):
            refused.append((p, "refused: a symbolic link, or reached through one"))
        else:
            safe.append(p)
    outcome = storage.delete_files(safe)
    return DeleteOutcome(outcome.deleted, outcome.missing, outcome.failed + tuple(refused))


def deletable(path: str) -> bool:
    if not path or path.startswith("/") or in_log(path):
        return False
    return all(part not in ("", ".", "..") for part in path.split("/"))


@dataclass
class Deleted:
    files: int = 0
    dirs: int = 0
    missing: int = 0  # already gone (a stale inventory; stores that can tell)
    failed: tuple[tuple[str, str], ...] = ()


def delete_plan(
    storage: Storage,
    plan: VacuumPlan,
    executor: Executor,
    progress: Callable[[VacuumProgress], None] | None,
) -> Deleted:
    paths = [p for p, _ in plan.files]
    result = Deleted()
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
            result.missing += len(outcome.missing)
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
