"""What VACUUM deletes: FULL from the listing, LITE from the log since the last vacuum; the plan re-checked against a
newer snapshot when another writer committed meanwhile. FULL plans from the listing alone; LITE reads the commits it
needs, and the re-check reads the newer snapshot."""

from __future__ import annotations

import heapq
import logging
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import overload

import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.errors import CheckpointUnreadable, CorruptLog
from airflow_provider_deltalite.engine.snapshot import Snapshot
from airflow_provider_deltalite.engine.snapshot_stream import stream_snapshot
from airflow_provider_deltalite.engine.storage import Storage
from airflow_provider_deltalite.engine.table import Table
from airflow_provider_deltalite.maintenance.vacuum.listing import ListedDir
from airflow_provider_deltalite.maintenance.vacuum.lite import (
    LiteWindow,
    lite_candidates,
    lite_window,
)
from airflow_provider_deltalite.maintenance.vacuum.paths import (
    VACUUM_FILE_FIELDS,
    HiddenRule,
    ProtectedFiles,
    in_log,
    plain_local_file,
    referenced_paths,
)

log = logging.getLogger(__name__)

FULL = "FULL"


LITE = "LITE"


class PlannedFiles(Sequence[tuple[str, int]]):
    """``(path, size)`` pairs held as two columns, a list of paths and an array of sizes: a plan of a million files
    costs their path strings and 16 bytes each, not a tuple each (~64 MB). Iterating yields the pairs; it compares
    equal to any sequence of the same pairs."""

    __slots__ = ("paths", "sizes")

    def __init__(self, paths: list[str], sizes: array[int]) -> None:
        self.paths = paths
        self.sizes = sizes

    @classmethod
    def merged(cls, runs: Iterable[Sequence[tuple[str, int]]]) -> PlannedFiles:
        """The pairs of ``runs``, each sorted, merged into one sorted sequence."""
        out = cls([], array("q"))
        for path, size in heapq.merge(*runs):
            out.paths.append(path)
            out.sizes.append(size)
        return out

    def __len__(self) -> int:
        return len(self.paths)

    @overload
    def __getitem__(self, index: int) -> tuple[str, int]: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[tuple[str, int], ...]: ...

    def __getitem__(self, index: int | slice) -> tuple[str, int] | tuple[tuple[str, int], ...]:
        if isinstance(index, slice):
            return tuple(zip(self.paths[index], self.sizes[index], strict=True))
        return self.paths[index], self.sizes[index]

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return zip(self.paths, self.sizes, strict=True)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == tuple(b) for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PlannedFiles({len(self)} files)"


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
    files: Sequence[tuple[str, int]]
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
        # every directory above a kept file stays (a set of ancestors: linear in the kept paths, not dirs x files)
        blocked: set[str] = set()
        for path in keep:
            parts = path.split("/")[:-1]
            for depth in range(1, len(parts) + 1):
                blocked.add("/".join(parts[:depth]))
        return VacuumPlan(
            self.mode,
            tuple(f for f in self.files if f[0] not in keep),
            tuple(d for d in self.dirs if d not in blocked),
            self.dirs_present,
            self.entries_present,
            self.lite,
        )


def missing_live_files(
    listing: Sequence[ListedDir], protected: ProtectedFiles, rule: HiddenRule, *, subdirs: Iterable[str] = ()
) -> list[str]:
    """Live files (and their DV files) that the listing should have found and did not, sorted.

    ``subdirs``: directories listed elsewhere (a live path naming one is a directory, not a missing file)."""
    # what is left of the live files once each directory's files are taken out (a set of the live files only:
    # a set of every listed path would cost more than the listing at a million files)
    absent = set(protected.live)
    for d in listing:
        absent.difference_update(d.paths)
        if not absent:
            return []
    if not absent:
        return []
    dirs = {d.path: d for d in listing}
    others = frozenset(subdirs)
    missing = []
    for path in absent:
        parent, _, name = path.rpartition("/")
        listed = dirs.get(parent)
        if listed is None or rule.is_hidden(name) or name in listed.others or path in dirs or path in others:
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
        and not in_log(c.path)
        and (not local or plain_local_file(storage.root, c.path, dirs))
    )
    return VacuumPlan(LITE, tuple(files), (), 1, len(candidates), window)


def recheck(table: Table, snapshot: Snapshot, plan: VacuumPlan, horizon_ms: int, *, moved: bool) -> VacuumPlan:
    """Keep any candidate that a commit made after planning protects again (a RESTORE re-adding an old file).

    The newest snapshot is read as a stream and only the plan's paths are looked up in it (memory: the plan and a
    batch, not the table)."""
    if not moved or not plan.files:
        return plan
    wanted = {path for path, _ in plan.files}
    try:
        stream = stream_snapshot(table.storage, file_fields=VACUUM_FILE_FIELDS)
        try:
            found = _protected_among(table.storage, stream.batches(), horizon_ms, wanted)
        except CheckpointUnreadable:
            latest = table.snapshot(file_fields=VACUUM_FILE_FIELDS)  # falls back to an older checkpoint
            found = _protected_among(table.storage, [(latest.raw_files, latest.tombstones)], horizon_ms, wanted)
    except CorruptLog as exc:
        raise CorruptLog(exc.problem, table.uri) from None
    keep = sorted(found)
    if keep:
        log.warning(
            "VACUUM keeps %d files that commits after version %s reference again (e.g. %s)",
            len(keep),
            snapshot.version,
            keep[0],
        )
    return plan.without(keep)


def _protected_among(
    storage: Storage, batches: Iterable[tuple[pa.Table, pa.Table]], horizon_ms: int, wanted: set[str]
) -> set[str]:
    """The paths of ``wanted`` that the (live files, tombstones) ``batches`` protect (`protected_files`' rules)."""
    found: set[str] = set()
    horizon = pa.scalar(horizon_ms, pa.int64())
    for adds, stones in batches:
        kept = pc.filter(stones, pc.fill_null(pc.greater_equal(stones.column("deletionTimestamp"), horizon), True))
        for rows in (adds, kept):
            paths, others = referenced_paths(storage, rows)
            found.update(p for p in paths.to_pylist() if p in wanted)
            found.update(p for p in others if p in wanted)
    return found
