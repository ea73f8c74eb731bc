"""VACUUM FULL one top-level prefix at a time: the protected paths of a group of top-level directories against the
listing of those directories, never the whole table's.

The table's state is read once, as a stream (`engine.snapshot_stream.stream_snapshot`), and its protected paths are
spilled by top-level prefix (`spill`). The root is listed alone; its files are compared with the paths at the root.
Then its subdirectories are taken in groups (consecutive in the root listing's order, at most `GROUP_PATHS` protected
paths and `GROUP_DIRS` directories per group, a larger directory alone): each group's paths are read back,
its directories listed level by level on the executor (`listing.list_tree`), compared (`plan.plan_full`, with the
same check that every live file was found, `plan.missing_live_files`), and dropped before the next group. What is
kept across groups is the plan itself (the files to delete) and counters.

This is the reference's own split (`recursiveListDirs` recurses each first-level directory in one task) and gives
the same plan as comparing the whole table at once: a path's top-level directory is the first segment of its
relative path, both for the protected paths (resolved as `paths.protected_files` resolves them) and for the listing,
so a file is compared with exactly the protected paths that can spell it.

Memory: the groups' protected paths and listing (at most max(`GROUP_PATHS`, one top-level directory's paths) of
them), the prefix ids, and the plan.
"""

from __future__ import annotations

import logging
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.arrow_util import contiguous
from airflow_provider_deltalite.engine.errors import CheckpointUnreadable, CorruptLog, redact_uri
from airflow_provider_deltalite.engine.snapshot import Snapshot, load_snapshot
from airflow_provider_deltalite.engine.storage import Storage
from airflow_provider_deltalite.maintenance.executor import Executor
from airflow_provider_deltalite.maintenance.vacuum.listing import (
    ListedDir,
    ListingProgress,
    list_root,
    list_tree,
    protected_by_dir,
)
from airflow_provider_deltalite.maintenance.vacuum.paths import (
    VACUUM_FILE_FIELDS,
    HiddenRule,
    ProtectedFiles,
    referenced_paths,
)
from airflow_provider_deltalite.maintenance.vacuum.plan import (
    FULL,
    PlannedFiles,
    VacuumPlan,
    missing_live_files,
    plan_full,
)
from airflow_provider_deltalite.maintenance.vacuum.spill import EXPIRED, KEPT, LIVE, PrefixPaths, PrefixSpill, groups
from airflow_provider_deltalite.maintenance.vacuum.stats import VacuumProgress

log = logging.getLogger(__name__)

# Protected paths compared in one group of top-level directories (unless one directory holds more): about 10 MB of
# Python strings and sets, plus the group's listing.
GROUP_PATHS = 50_000
# Top-level directories in one group at most, whatever they protect (a directory of orphans protects nothing; its
# listing is what costs). Groups are listing rounds: on Spark each is a job, so they are not made smaller than this.
GROUP_DIRS = 1_000

Batches = Iterable[tuple[pa.Table, pa.Table]]


def spill_protected(
    storage: Storage, batches: Batches, horizon_ms: int, spill: PrefixSpill, *, with_expired: bool = False
) -> int:
    """Spill the protected paths of the (live files, tombstones) ``batches`` (`paths.protected_files`' rules);
    with ``with_expired`` the expired tombstones' paths and deletion times too. Returns how many tombstones expired.

    Raises:
        CorruptLog: a deletion vector descriptor is malformed.
    """
    expired = 0
    horizon = pa.scalar(horizon_ms, pa.int64())
    for adds, stones in batches:
        paths, others = referenced_paths(storage, adds)
        spill.add(paths, LIVE)
        del paths
        keep = pc.fill_null(pc.greater_equal(stones.column("deletionTimestamp"), horizon), True)
        kept = pc.filter(stones, keep)
        expired += stones.num_rows - kept.num_rows
        kept_paths, kept_others = referenced_paths(storage, kept)
        spill.add(kept_paths, KEPT)
        spill.add(pa.array(others + kept_others, pa.string()), KEPT)
        if with_expired and kept.num_rows < stones.num_rows:
            gone = pc.filter(stones, pc.invert(keep))
            # a plain relative path: the log and the listing spell it alike (`budget`)
            spill.add(
                pc.cast(contiguous(gone.column("path")), pa.string()),
                EXPIRED,
                contiguous(gone.column("deletionTimestamp")),
            )
    return expired


def spill_table(
    storage: Storage,
    snapshot: Snapshot,
    batches: Batches,
    horizon_ms: int,
    *,
    with_expired: bool = False,
) -> tuple[PrefixSpill, int]:
    """A `PrefixSpill` of the table ``batches`` stream (the caller closes it) and the expired tombstones' count.

    A checkpoint found unreadable while it is read is replaced as `load_snapshot` replaces it (an older checkpoint
    or the full log): that replay is held in memory, then spilled.
    """
    spill = PrefixSpill()
    try:
        try:
            expired = spill_protected(storage, batches, horizon_ms, spill, with_expired=with_expired)
        except CheckpointUnreadable as exc:
            log.warning("VACUUM: %s; replaying the log without that checkpoint", exc)
            spill.close()
            spill = PrefixSpill()
            whole = load_snapshot(storage, snapshot.version, file_fields=VACUUM_FILE_FIELDS)
            expired = spill_protected(
                storage, [(whole.raw_files, whole.tombstones)], horizon_ms, spill, with_expired=with_expired
            )
        spill.finish()
    except CorruptLog as exc:
        spill.close()
        raise CorruptLog(exc.problem, snapshot.table_uri) from None
    except BaseException:
        spill.close()
        raise
    # the listing is Python objects, which cannot reuse the pages the Arrow pool freed while reading the log
    pa.default_memory_pool().release_unused()
    return spill, expired


@dataclass(frozen=True)
class PrefixPlan:
    """FULL's plan, made a group of top-level directories at a time.

    Attributes:
        plan: what is deleted.
        missing: how many live files the listing should have found and did not; ``first_missing`` the smallest.
        ages: per file to delete, its tombstone's deletion time or else its modification time (only when asked).
    """

    plan: VacuumPlan
    missing: int
    first_missing: str | None
    ages: dict[str, int] | None


def plan_by_prefix(
    storage: Storage,
    rule: HiddenRule,
    executor: Executor,
    spill: PrefixSpill,
    horizon_ms: int,
    *,
    remove_dirs: bool,
    progress: Callable[[VacuumProgress], None] | None = None,
    with_ages: bool = False,
    group_paths: int | None = None,
) -> PrefixPlan:
    """List the table a group of top-level directories at a time and plan FULL's deletes (see the module
    docstring); ``group_paths`` protected paths per group at most (default `GROUP_PATHS`)."""
    report = ListingProgress(progress, redact_uri(storage.table_uri) or "")
    runs: list[PlannedFiles] = []  # each group's files to delete, sorted (compact: see `PlannedFiles`)
    dirs: list[str] = []
    dirs_present = entries = missing = 0
    first_missing: str | None = None
    ages: dict[str, int] | None = {} if with_ages else None

    def compare(listing: Sequence[ListedDir], paths: PrefixPaths, subdirs: Iterable[str] = ()) -> None:
        nonlocal dirs_present, entries, missing, first_missing
        protected = ProtectedFiles(paths.protected, paths.live, 0)
        absent = missing_live_files(listing, protected, rule, subdirs=subdirs)
        if absent:
            missing += len(absent)
            first_missing = absent[0] if first_missing is None else min(first_missing, absent[0])
        part = plan_full(listing, protected, horizon_ms, remove_dirs=remove_dirs)
        if part.files:
            runs.append(PlannedFiles([p for p, _ in part.files], array("q", (size for _, size in part.files))))
        dirs.extend(part.dirs)
        dirs_present += part.dirs_present
        entries += part.entries_present
        if ages is not None and part.files:
            ages.update(_ages(listing, part, paths.expired_stamps))

    root_paths = spill.read([""])
    root = list_root(storage, rule, protected_by_dir(root_paths.protected))
    report.add(1, len(root.paths))
    compare([root], root_paths, {path for path, _ in root.subdirs})
    del root_paths
    for group in groups(root.subdirs, spill.count, group_paths or GROUP_PATHS, GROUP_DIRS):
        paths = spill.read(prefix for prefix, _ in group)
        listing = list_tree(storage, rule, executor, group, protected_by_dir(paths.protected), report)
        compare(listing, paths)
        del paths, listing
    report.finish()
    files = PlannedFiles.merged(runs)
    runs.clear()
    dirs.sort(key=lambda p: (-p.count("/"), p))
    plan = VacuumPlan(FULL, files, tuple(dirs), dirs_present, entries)
    return PrefixPlan(plan, missing, first_missing, ages)


def _ages(listing: Sequence[ListedDir], part: VacuumPlan, stamps: dict[str, int]) -> Iterator[tuple[str, int]]:
    """`budget`'s age of each file of ``part``: the tombstone's deletion time when there is one, else the mtime."""
    wanted = {path for path, _ in part.files}
    for d in listing:
        for path, mtime in zip(d.paths, d.mtimes, strict=True):
            if path in wanted:
                yield path, stamps.get(path, mtime)
