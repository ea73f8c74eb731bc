"""VACUUM FULL's listing: the table root, one directory level at a time, in parallel on the executor, without a
request per file; hidden names are neither listed nor descended into (`paths.HiddenRule`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from airflow_provider_deltalite.engine.errors import redact_uri
from airflow_provider_deltalite.engine.storage import Storage
from airflow_provider_deltalite.maintenance.executor import Executor
from airflow_provider_deltalite.maintenance.vacuum.paths import (
    HiddenRule,
)
from airflow_provider_deltalite.maintenance.vacuum.stats import VacuumProgress

log = logging.getLogger(__name__)

TASKS_PER_SLOT = 4  # tasks per unit of executor parallelism in one listing level or the delete phase
PROGRESS_EVERY_S = 2.0  # a long listing reports at most this often...
PROGRESS_EVERY_FILES = 10_000  # ...or after this many more files


class ListingProgress:
    """Throttled progress of a listing: to the caller's callback (a terminal) and to the log (task logs), every
    `PROGRESS_EVERY_S` seconds or `PROGRESS_EVERY_FILES` files, and once at the end."""

    def __init__(self, callback: Callable[[VacuumProgress], None] | None, what: str) -> None:
        self.callback = callback
        self.what = what
        self.start = self.last = time.monotonic()
        self.last_files = 0
        self.dirs = self.files = 0

    def add(self, dirs: int, files: int) -> None:
        """Count more listed directories and files (and report when it is time)."""
        self.dirs += dirs
        self.files += files
        self.update(self.dirs, self.files)

    def finish(self) -> None:
        """The final report."""
        self.update(self.dirs, self.files, final=True)

    def update(self, dirs: int, files: int, *, final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - self.last < PROGRESS_EVERY_S and files - self.last_files < PROGRESS_EVERY_FILES:
            return
        self.last, self.last_files = now, files
        event = VacuumProgress("listing", dirs, None, files, now - self.start)
        if self.callback is not None:
            self.callback(event)
        if final or now - self.start >= PROGRESS_EVERY_S:  # short listings stay out of the log until the summary
            log.info(
                "VACUUM %s %s: %d files in %d directories, %.1f s, %.0f files/s",
                "listed" if final else "listing",
                self.what,
                files,
                dirs,
                event.elapsed_s,
                event.rate,
            )


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

    ``protected``: per directory, the files (paths relative to the root) whose size and age do not matter (they are
    kept anyway), so a local listing need not stat them.
    """

    storage: Storage
    dirs: tuple[tuple[str, int], ...]
    rule: HiddenRule
    protected: Mapping[str, Sequence[str]] = field(default_factory=dict)


def list_directories(task: ListTask) -> list[ListedDir]:
    """List each directory of the task one level deep, dropping hidden names (runs on the executor)."""
    rule = task.rule
    out = []
    for path, mtime in task.dirs:
        prefix = f"{path}/" if path else ""
        # name -> the protected path itself, built for one directory at a time: the listing then holds the protected
        # path strings rather than copies (a million files: one string each instead of a name, a copy and a path)
        known = {p[len(prefix) :]: p for p in task.protected.get(path, ())}
        listing = task.storage.list_dir(path, known)
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
                tuple(known.get(name) or prefix + name for name in names),
                sizes,
                mtimes,
                tuple(subdirs),
                listing.others,
                hidden,
            )
        )
    return out


def spread(items: Sequence[Any], tasks: int) -> list[tuple[Any, ...]]:
    tasks = max(1, min(tasks, len(items)))
    return [tuple(items[i::tasks]) for i in range(tasks)]


def protected_by_dir(protected: Iterable[str] | None) -> dict[str, list[str]]:
    """The protected paths by directory, as references to the same strings (no per-name copies held for the
    listing)."""
    by_dir: dict[str, list[str]] = {}
    for path in protected or ():
        by_dir.setdefault(path[: max(path.rfind("/"), 0)], []).append(path)
    return by_dir


def list_tree(
    storage: Storage,
    rule: HiddenRule,
    executor: Executor,
    dirs: Sequence[tuple[str, int]],
    by_dir: Mapping[str, Sequence[str]],
    report: ListingProgress,
) -> list[ListedDir]:
    """``dirs`` (relative path, mtime) and every non-hidden directory under them with its files, listed level by
    level as parallel tasks on ``executor`` (so a deep or skewed tree still spreads over the executor)."""

    def task(batch: tuple[tuple[str, int], ...]) -> ListTask:
        return ListTask(storage, batch, rule, {d: by_dir[d] for d, _ in batch if d in by_dir})

    listed: list[ListedDir] = []
    frontier = list(dirs)
    while frontier:
        tasks = [task(batch) for batch in spread(frontier, executor.parallelism * TASKS_PER_SLOT)]
        frontier = []
        for result in executor.map(list_directories, tasks):
            for d in result:
                listed.append(d)
                report.add(1, len(d.paths))
                frontier.extend(d.subdirs)
    return listed


def list_root(storage: Storage, rule: HiddenRule, by_dir: Mapping[str, Sequence[str]]) -> ListedDir:
    """The root directory alone, one level deep (its files and its subdirectories)."""
    return list_directories(ListTask(storage, (("", 0),), rule, {"": by_dir[""]} if "" in by_dir else {}))[0]


def list_table(
    storage: Storage,
    rule: HiddenRule,
    executor: Executor,
    progress: Callable[[VacuumProgress], None] | None = None,
    protected: frozenset[str] | None = None,
) -> list[ListedDir]:
    """Every non-hidden directory under the root with its files: the root here, each deeper level as parallel tasks
    on ``executor`` (`list_tree`).

    Files in ``protected`` may come back with size and mtime -1 (see `ListTask`)."""
    by_dir = protected_by_dir(protected)
    # Planning built Arrow arrays and let them go; the listing is Python objects, which cannot reuse the Arrow
    # pool's freed pages: hand them back first (on a million-file table ~100 MB of peak memory).
    pa.default_memory_pool().release_unused()
    report = ListingProgress(progress, redact_uri(storage.table_uri) or "")
    root = list_root(storage, rule, by_dir)
    report.add(1, len(root.paths))
    listed = [root, *list_tree(storage, rule, executor, root.subdirs, by_dir, report)]
    report.finish()
    return listed
