"""Log tailing: the commits after a version, classified, for sensors, triggers and ``deltalite changes``/``watch``.

A poll reads only what is new: it never lists the whole log and never replays a snapshot, so it costs the same on a
table with 10 commits as on one with 20,000 (benchmarks/tail_poll.py). How it finds the new commits depends on the
store:

- S3 lists from a name on the server (``StartAfter``): one listing from ``since + 1`` returns exactly the new files,
  and the listing proves the versions contiguous.
- Every other store (local disk, GCS, Azure, memory) can only list a whole directory, which on a long log costs
  far more than the poll itself. There the poll reads ``since + 1``, ``since + 2``, ... by name until one is missing,
  and lists (from ``since + 1``, as S3 does) only when that finds nothing and ``since`` itself is gone too (the
  table was cleaned, recreated or deleted), or when more than `PROBE_LIMIT` commits are new (catching up).
  A hole in the versions right after the newest commit found is therefore not noticed there; writers cannot make one
  (each commit is written after the previous one exists), and every snapshot read reports it.

Defined behaviour at the edges (docs/changes.md):

- ``since=-1`` means from the beginning: version 0 on.
- A cursor older than the oldest retained commit (log cleanup deleted ``since + 1`` and a checkpoint stands in its
  place) raises `LogGap`; ``on_gap="resume"`` logs a warning and lists from the oldest retained commit, and the
  ChangeSet's ``gap_from`` says where that was. A missing version with no checkpoint there is a `CorruptLog`.
- A recreated table (its newest version is below the cursor, or a listed commit carries a ``metaData`` whose id is
  not ``table_id``) raises `TableRecreated`; ``on_recreate="resume"`` logs a warning and lists the new table from its
  beginning (``recreated`` is then True and every listed commit counts as new, whatever its version).
- Metadata changes keep the kind ``metadata``; whether they count as new data is the consumer's choice
  (``include_metadata_changes`` here, in `new_data_event`, and in the sensor).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from airflow_provider_deltalite.engine.errors import CorruptLog, InvalidArgument, LogGap, TableRecreated
from airflow_provider_deltalite.engine.log_path import LOG_DIR, LogFileKind, commit_name, commit_path
from airflow_provider_deltalite.engine.log_segment import (
    complete_checkpoints,
    first_missing,
    list_log,
    load_log_segment,
)
from airflow_provider_deltalite.engine.storage import FileInfo, Storage
from airflow_provider_deltalite.maintenance.commit_kinds import (
    DATA,
    KINDS,
    MAINTENANCE,
    METADATA,
    REARRANGE,
    CommitChange,
    parse_commit,
)
from airflow_provider_deltalite.maintenance.options import ChangesOptions

log = logging.getLogger(__name__)

__all__ = [
    "DATA",
    "KINDS",
    "MAINTENANCE",
    "METADATA",
    "PROBE_LIMIT",
    "REARRANGE",
    "ChangeSet",
    "CommitChange",
    "counting_kinds",
    "list_changes",
    "new_data_event",
    "poll_changes",
]

# Commits read by name before a poll switches to one listing: a poll that catches up on many commits pays for the
# listing once, a poll that finds none, one or a few never does.
PROBE_LIMIT = 8


def counting_kinds(include_rearrangements: bool = False, include_metadata_changes: bool = False) -> tuple[str, ...]:
    """The kinds that count as new data: ``data``, plus ``rearrange`` and ``metadata`` when asked.

    ``maintenance`` commits (VACUUM START/END and the like) never count.
    """
    kinds = [DATA]
    if include_rearrangements:
        kinds.append(REARRANGE)
    if include_metadata_changes:
        kinds.append(METADATA)
    return tuple(kinds)


@dataclass(frozen=True)
class ChangeSet:
    """The commits after a cursor, oldest first.

    Attributes:
        table_uri: the table (credentials never included).
        since: the cursor passed in (exclusive; -1 for from the beginning).
        latest: the newest version covered, the cursor for the next poll (``since`` when nothing is new; the new
            table's newest version after a resumed recreation).
        changes: every commit after ``since`` (up to ``until``), every kind, ascending and contiguous.
        gap_from: with ``on_gap="resume"``, the first version listed when the commits after ``since`` had been
            cleaned away; None otherwise.
        recreated: with ``on_recreate="resume"``, True when the table turned out to be a new one.
        table_id: the id of the newest ``metaData`` among the listed commits, else the ``table_id`` passed in.
        include_metadata_changes: whether `to_dict` (and `new_data_event`) counts metadata commits as new data.
    """

    table_uri: str
    since: int
    latest: int
    changes: tuple[CommitChange, ...]
    gap_from: int | None = None
    recreated: bool = False
    table_id: str | None = None
    include_metadata_changes: bool = False

    def of_kind(self, *kinds: str) -> list[CommitChange]:
        """The changes whose kind is one of ``kinds``.

        Example:
            >>> [c.version for c in table.changes(since=3).of_kind("data")]  # doctest: +SKIP
            [5, 7]
        """
        unknown = [k for k in kinds if k not in KINDS]
        if unknown:
            raise ValueError(f"unknown commit kind {unknown[0]!r} (kinds: {', '.join(KINDS)})")
        return [c for c in self.changes if c.kind in kinds]

    def to_dict(self, all_kinds: bool = False) -> dict[str, Any]:
        """``{"since", "latest", "versions": [...]}`` (what ``deltalite changes --json`` prints), plus ``gap_from``
        and ``recreated`` when they are set.

        ``versions`` holds the data commits (and metadata commits when ``include_metadata_changes``), or every commit
        with ``all_kinds=True``; each as `CommitChange.to_dict`.
        """
        shown = self.changes if all_kinds else self.of_kind(*counting_kinds(False, self.include_metadata_changes))
        doc: dict[str, Any] = {"since": self.since, "latest": self.latest, "versions": [c.to_dict() for c in shown]}
        if self.gap_from is not None:
            doc["gap_from"] = self.gap_from
        if self.recreated:
            doc["recreated"] = True
        return doc


@dataclass(frozen=True)
class _Commit:
    version: int
    data: bytes
    info: FileInfo | None  # known when the commit came from a listing


class _Behind(Exception):
    """Internal: the table's newest version is below the cursor."""

    def __init__(self, latest: int) -> None:
        self.latest = latest
        super().__init__(latest)


def _listed_tail(
    storage: Storage, since: int, until: int | None, on_gap: str, *, continuing: bool = False
) -> tuple[list[_Commit], int | None]:
    """The commits after ``since`` from one listing that starts at ``since + 1``; and ``gap_from``.

    ``continuing``: the caller has just read ``since`` by name, so a missing ``since + 1`` cannot be log cleanup.
    """
    uri = storage.table_uri
    files = list_log(storage, since + 1)  # TableNotFound when there is no _delta_log
    commits = {f.version: f for f in files if f.parsed.kind is LogFileKind.COMMIT}
    if not commits:
        if continuing or (since >= 0 and storage.exists(commit_path(since))):
            return [], None  # the newest commit is still `since`
        latest = load_log_segment(storage, None).version  # TableNotFound when the log holds nothing
        if latest < since:
            raise _Behind(latest)
        return [], None
    versions = sorted(v for v in commits if until is None or v <= until)
    if not versions:
        return [], None  # everything new is after `until`
    first = versions[0]
    gap_from = None
    if first > since + 1:
        checkpoints = complete_checkpoints(files)
        if continuing or not (first in checkpoints or first - 1 in checkpoints):
            raise CorruptLog(
                f"version {since + 1} is missing from the log (the commits after {since} must be contiguous; "
                f"the next one is {first})",
                uri,
            )
        if on_gap == "raise":
            raise LogGap(
                f"the commits after version {since} were removed by log cleanup; the oldest that can be listed is "
                f"{first} (start again from a newer version, or use on_gap='resume' to skip the gap)",
                uri,
                since=since,
                oldest_available=first,
            )
        log.warning(
            "%s: the commits after version %d were removed by log cleanup; resuming from version %d", uri, since, first
        )
        gap_from = first
    missing = first_missing(versions, first, versions[-1])
    if missing is not None:
        raise CorruptLog(
            f"version {missing} is missing from the log (commits {first}..{versions[-1]} must be contiguous)", uri
        )
    try:
        contents = storage.read_many([commits[v].path for v in versions])
    except FileNotFoundError:
        raise CorruptLog("a commit file disappeared while reading the log (log cleanup running?)", uri) from None
    return [_Commit(v, d, commits[v].info) for v, d in zip(versions, contents, strict=True)], gap_from


def _tail(storage: Storage, since: int, until: int | None, on_gap: str) -> tuple[list[_Commit], int | None]:
    """The commits ``since + 1 ..`` (up to ``until``), contiguous; and ``gap_from`` (see the module docstring)."""
    if storage.lists_from_name:  # the store starts the listing at the name; elsewhere the whole log is listed
        return _listed_tail(storage, since, until, on_gap)
    found: list[_Commit] = []
    version = since + 1
    while until is None or version <= until:
        if len(found) == PROBE_LIMIT:
            rest, _ = _listed_tail(storage, version - 1, until, on_gap, continuing=True)
            return found + rest, None
        try:
            data = storage.read(commit_path(version))
        except FileNotFoundError:
            break
        found.append(_Commit(version, data, None))
        version += 1
    if found:
        return found, None
    if since >= 0 and storage.exists(commit_path(since)):
        return [], None  # the newest commit is still `since`
    return _listed_tail(storage, since, until, on_gap)


def _listed_time(info: FileInfo) -> Callable[[], int | None]:
    return lambda: info.modification_time


def _file_time(storage: Storage, version: int) -> Callable[[], int | None]:
    def lookup() -> int | None:
        # Only for commits without commitInfo timestamps (very old writers), so the listing is rare.
        name = commit_name(version)
        for info in storage.list_from(LOG_DIR, name):
            if info.name == name:
                return info.modification_time
        return None

    return lookup


def list_changes(
    storage: Storage,
    since: int,
    until: int | None = None,
    *,
    on_gap: str = "raise",
    table_id: str | None = None,
    on_recreate: str = "raise",
    include_metadata_changes: bool = False,
) -> ChangeSet:
    """Every commit after ``since`` (up to ``until``, inclusive), classified; see the module docstring for the edges.

    Args:
        storage: the table's storage.
        since: the last version already seen; -1 for from the beginning.
        until: the newest version to list (a bound: versions that do not exist yet are simply not listed).
        on_gap: ``"raise"`` (`LogGap`) or ``"resume"`` when log cleanup removed the commits after ``since``.
        table_id: the table's ``metaData.id`` when the cursor was taken; a listed metaData with another id means the
            table was recreated.
        on_recreate: ``"raise"`` (`TableRecreated`) or ``"resume"`` (list the new table from its beginning).
        include_metadata_changes: recorded on the ChangeSet: `ChangeSet.to_dict` and `new_data_event` then count
            metadata commits as new data. The listing and the kinds do not change.

    Returns:
        ChangeSet.

    Raises:
        InvalidArgument: a bad ``since``, ``until`` (below ``since``), ``on_gap``, ``on_recreate`` or ``table_id``.
        TableNotFound: there is no table at the URI (a sensor keeps waiting on this).
        LogGap / TableRecreated: see above.
        CorruptLog: a missing version among the commits, or a commit that is empty or not JSON (naming the version).

    Example:
        >>> changes = list_changes(DeltaTable("/data/events").storage, since=41)  # doctest: +SKIP
        >>> [(c.version, c.kind, c.operation) for c in changes.changes]  # doctest: +SKIP
        [(42, 'rearrange', 'OPTIMIZE'), (43, 'data', 'WRITE')]
    """
    uri = storage.table_uri
    ChangesOptions.build(
        {
            "since": since,
            "until": until,
            "on_gap": on_gap,
            "table_id": table_id,
            "on_recreate": on_recreate,
            "include_metadata_changes": include_metadata_changes,
        },
        uri,
    )
    recreated = False
    try:
        commits, gap_from = _tail(storage, since, until, on_gap)
    except _Behind as behind:
        if on_recreate == "raise":
            raise TableRecreated(
                f"the newest version is {behind.latest}, below the cursor {since}: the table was recreated "
                "(start again from -1, or use on_recreate='resume')",
                uri,
                since=since,
                latest=behind.latest,
            ) from None
        log.warning(
            "%s: the newest version %d is below the cursor %d: the table was recreated; listing it from the start",
            uri,
            behind.latest,
            since,
        )
        recreated = True
        commits, gap_from = _tail(storage, -1, until, on_gap)

    changes: list[CommitChange] = []
    seen_id = table_id
    for commit in commits:
        parsed = parse_commit(
            commit.version,
            commit.data,
            uri,
            _listed_time(commit.info) if commit.info else _file_time(storage, commit.version),
        )
        if parsed.table_id is not None:
            if table_id is not None and parsed.table_id != table_id and not recreated:
                if on_recreate == "raise":
                    raise TableRecreated(
                        f"commit {commit.version} carries table id {parsed.table_id}, not {table_id}: the table was "
                        "recreated (start again from -1, or use on_recreate='resume')",
                        uri,
                        since=since,
                        latest=commits[-1].version,
                        table_id=parsed.table_id,
                    )
                log.warning(
                    "%s: commit %d carries table id %s, not %s: the table was recreated",
                    uri,
                    commit.version,
                    parsed.table_id,
                    table_id,
                )
                recreated = True
            seen_id = parsed.table_id
        changes.append(parsed.change)
    return ChangeSet(
        table_uri=uri,
        since=since,
        latest=changes[-1].version if changes else since,
        changes=tuple(changes),
        gap_from=gap_from,
        recreated=recreated,
        table_id=seen_id,
        include_metadata_changes=include_metadata_changes,
    )


def new_data_event(
    changes: ChangeSet,
    *,
    baseline_version: int,
    include_rearrangements: bool = False,
    include_metadata_changes: bool = False,
) -> dict[str, Any] | None:
    """The sensor/trigger payload for the commits after ``baseline_version`` that count, or None when none does.

    A commit counts when its kind is in `counting_kinds` (metadata also when the ChangeSet was listed with
    ``include_metadata_changes``). After a resumed recreation every listed commit is after the baseline.

    The payload describes ``(baseline_version, version]`` exactly: ``versions`` are the counting commits and
    ``skipped`` the others up to ``version``; commits after ``version`` are left for a later event.

    Returns:
        ``{table_uri, baseline_version, version, versions, skipped: [{version, kind}], operations (one per counting
        version), added_files, added_rows (None when a counting commit's adds lack stats), added_bytes, timestamp
        (of ``version``)}``: a plain JSON-safe dict.

    Example:
        >>> new_data_event(table.changes(since=5), baseline_version=5)  # doctest: +SKIP
        {'table_uri': '/data/events', 'baseline_version': 5, 'version': 7, 'versions': [7],
         'skipped': [{'version': 6, 'kind': 'rearrange'}], 'operations': ['WRITE'], 'added_files': 1, ...}
    """
    kinds = counting_kinds(include_rearrangements, include_metadata_changes or changes.include_metadata_changes)
    after = [c for c in changes.changes if changes.recreated or c.version > baseline_version]
    counted = [c for c in after if c.kind in kinds]
    if not counted:
        return None
    newest = counted[-1]
    rows = [c.added_rows for c in counted]
    return {
        "table_uri": changes.table_uri,
        "baseline_version": baseline_version,
        "version": newest.version,
        "versions": [c.version for c in counted],
        "skipped": [
            {"version": c.version, "kind": c.kind} for c in after if c.kind not in kinds and c.version < newest.version
        ],
        "operations": [c.operation for c in counted],
        "added_files": sum(c.added_files for c in counted),
        "added_rows": None if None in rows else sum(rows),
        "added_bytes": sum(c.added_bytes for c in counted),
        "timestamp": newest.timestamp,
    }


def poll_changes(
    storage: Storage,
    since: int,
    *,
    interval: float,
    on_gap: str = "raise",
    table_id: str | None = None,
    on_recreate: str = "raise",
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[ChangeSet]:
    """Poll every ``interval`` seconds forever; yield each ChangeSet that holds new commits (of any kind).

    The cursor moves to each ChangeSet's ``latest``; the table id seen is carried from poll to poll, so a recreation
    is noticed. Errors (`TableNotFound`, `LogGap`, ...) end the iteration by propagating.

    Example:
        >>> for changes in poll_changes(DeltaTable("/data/events").storage, 41, interval=5):  # doctest: +SKIP
        ...     print([c.version for c in changes.of_kind("data")])
    """
    if (
        isinstance(interval, bool)
        or not isinstance(interval, int | float)
        or not math.isfinite(interval)
        or interval <= 0
    ):
        raise InvalidArgument(f"interval must be a positive number of seconds, got {interval!r}", storage.table_uri)
    cursor = since
    while True:
        changes = list_changes(storage, cursor, on_gap=on_gap, table_id=table_id, on_recreate=on_recreate)
        if changes.changes:
            yield changes
        cursor = changes.latest
        table_id = changes.table_id
        sleep(interval)
