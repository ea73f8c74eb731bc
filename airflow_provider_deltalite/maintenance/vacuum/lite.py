"""VACUUM LITE: deletion candidates read from the log instead of a storage listing, and the progress file both modes
keep for it.

LITE reads the ``remove`` and ``cdc`` actions of the commits from the one after the last vacuum's
(``_delta_log/_last_vacuum_info``, ``{"latestCommitVersionOutsideOfRetentionWindow": N}``) up to the newest commit at
or before the retention horizon. It never sees files that were written but never committed, so it cannot delete
them (FULL can). When the log no longer holds a commit it needs (metadata cleanup removed it), LITE cannot know
what was removed there and refuses, asking for FULL. Unlike the reference (delta#4162), a FULL run records the same
progress, so LITE works again after one FULL run on a table whose early log was cleaned up.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from airflow_provider_deltalite.engine import actions as A
from airflow_provider_deltalite.engine.commit_file import (
    clean_commit_bytes,
    find_non_file_actions,
    parse_commit_file_actions,
)
from airflow_provider_deltalite.engine.errors import CorruptLog, VacuumRefused
from airflow_provider_deltalite.engine.history import commit_info_of, in_commit_timestamps_enabled
from airflow_provider_deltalite.engine.log_path import LOG_DIR, LogFileKind, commit_path
from airflow_provider_deltalite.engine.log_segment import LogFile, list_log
from airflow_provider_deltalite.engine.snapshot import Snapshot
from airflow_provider_deltalite.engine.storage import Storage
from airflow_provider_deltalite.maintenance.vacuum.paths import dv_relative, log_path_relative

LAST_VACUUM_INFO = "_last_vacuum_info"
LAST_VACUUM_INFO_PATH = f"{LOG_DIR}/{LAST_VACUUM_INFO}"
_KEY = "latestCommitVersionOutsideOfRetentionWindow"
_COMMITS_PER_READ = 500  # commits read and parsed together (bounds memory on long logs)


def read_last_vacuum_info(storage: Storage) -> int | None:
    """``latestCommitVersionOutsideOfRetentionWindow`` of the last vacuum, or None (no file, null, or unreadable: an
    unreadable progress file only makes LITE start earlier or refuse, never skip commits)."""
    try:
        doc = json.loads(storage.read(LAST_VACUUM_INFO_PATH))
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested too deeply to parse
        return None
    value = doc.get(_KEY) if isinstance(doc, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def write_last_vacuum_info(storage: Storage, version: int) -> None:
    """Record the newest commit whose removed files this vacuum has dealt with, byte for byte as the reference does."""
    storage.write(LAST_VACUUM_INFO_PATH, (json.dumps({_KEY: int(version)}, separators=(",", ":")) + "\n").encode())


def _commit_files(storage: Storage, up_to: int) -> list[LogFile]:
    return [f for f in list_log(storage, 0) if f.parsed.kind is LogFileKind.COMMIT and f.version <= up_to]


def latest_commit_at_or_before(storage: Storage, snapshot: Snapshot, timestamp_ms: int) -> int | None:
    """The newest commit (up to the snapshot's version) whose timestamp is at or before ``timestamp_ms``, or None when
    every commit still in the log is newer (the reference's ``getActiveCommitAtTime``, not required to be
    recreatable).

    Commit times are the in-commit timestamps where the table has them, else the commit files' modification times,
    made increasing the way the reference does (a time that goes backwards becomes the previous one plus 1 ms).
    """
    files = _commit_files(storage, snapshot.version)
    if not files:
        return None
    properties = snapshot.properties
    chosen: int | None = None
    previous: int | None = None
    ict_start = len(files)
    for i, f in enumerate(files):
        if in_commit_timestamps_enabled(properties, f.version):
            ict_start = i
            break
        ts = f.info.modification_time
        if previous is not None and ts <= previous:
            ts = previous + 1
        previous = ts
        if ts > timestamp_ms:
            return chosen
        chosen = f.version
    # In-commit timestamps increase strictly by protocol: binary search, reading one commitInfo per step.
    lo, hi = ict_start, len(files) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        info = commit_info_of(storage, files[mid].version, storage.read(files[mid].path)) or {}
        ict = info.get("inCommitTimestamp")
        ts = ict if isinstance(ict, int) else files[mid].info.modification_time
        if ts <= timestamp_ms:
            chosen = files[mid].version
            lo = mid + 1
        else:
            hi = mid - 1
    return chosen


@dataclass(frozen=True)
class LogCandidate:
    """A path some expired commit removed (or wrote as change data), relative to the root."""

    path: str
    size: int
    modification_time: int  # the remove's deletionTimestamp; 0 for change-data files, as the reference


@dataclass(frozen=True)
class LiteWindow:
    """The commits LITE reads: ``start..end`` inclusive (None when there is nothing to read)."""

    start: int | None
    end: int | None
    latest_outside_window: int | None


def lite_window(storage: Storage, snapshot: Snapshot, horizon_ms: int) -> LiteWindow:
    """Which commits hold the removes that expired since the last vacuum.

    Raises:
        VacuumRefused: the log no longer holds a commit in that range (cleaned up): LITE cannot see what it removed.
    """
    end = latest_commit_at_or_before(storage, snapshot, horizon_ms)
    if end is None:
        return LiteWindow(None, None, None)
    files = _commit_files(storage, snapshot.version)
    earliest = files[0].version
    last = read_last_vacuum_info(storage)
    if last is None and earliest != 0:
        raise VacuumRefused(
            f"VACUUM LITE needs every commit since version 0 or since the last vacuum, but the log starts at version "
            f"{earliest} (older commits were cleaned up) and there is no {LAST_VACUUM_INFO}; run a FULL vacuum once "
            "(it lists storage and records where LITE can start next time)",
            snapshot.table_uri,
        )
    start = earliest if last is None else last + 1
    if start < earliest:
        raise VacuumRefused(
            f"VACUUM LITE must read the commits after version {last} (the last vacuum), but the log now starts at "
            f"version {earliest}: the commits in between were cleaned up; run a FULL vacuum (it lists storage and "
            "records where LITE can start next time)",
            snapshot.table_uri,
        )
    if start > end:
        return LiteWindow(None, None, end)
    present = {f.version for f in files}
    missing = next((v for v in range(start, end + 1) if v not in present), None)
    if missing is not None:
        raise VacuumRefused(
            f"VACUUM LITE must read commits {start}..{end}, but commit {missing} is missing from the log; run a FULL "
            "vacuum",
            snapshot.table_uri,
        )
    return LiteWindow(start, end, end)


def _candidates_of(storage: Storage, contents: Sequence[tuple[int, bytes]], snapshot: Snapshot) -> list[LogCandidate]:
    uri = snapshot.table_uri
    out: list[LogCandidate] = []
    _, removes = parse_commit_file_actions(contents, snapshot.partition_physical_names, uri)
    paths = removes.column("path").to_pylist()
    stamps = removes.column("deletionTimestamp").to_pylist()
    sizes = removes.column("size").to_pylist()
    dvs = removes.column("deletionVector").to_pylist()
    for path, stamp, size, dv in zip(paths, stamps, sizes, dvs, strict=True):
        when = int(stamp or 0)
        rel = log_path_relative(storage, path)
        if rel is not None:
            out.append(LogCandidate(rel, int(size or 0), when))
        try:
            dv_rel = dv_relative(storage, dv)
        except CorruptLog as exc:
            raise CorruptLog(exc.problem, uri) from None
        if dv_rel is not None:
            # the DV's own bytes; the file may hold other DVs too, and listing it to learn its size is what LITE avoids
            out.append(LogCandidate(dv_rel, int(dv.get("sizeInBytes") or 0), when))
    for action in find_non_file_actions(contents, uri):
        if action.name != A.CDC or not isinstance(action.value.get("path"), str):
            continue
        rel = log_path_relative(storage, action.value["path"])
        if rel is not None:
            out.append(LogCandidate(rel, int(action.value.get("size") or 0), 0))
    return out


def lite_candidates(storage: Storage, snapshot: Snapshot, window: LiteWindow) -> list[LogCandidate]:
    """Paths removed (with their deletion-vector files) or written as change data by the commits of ``window``;
    one entry per path, with the newest time."""
    if window.start is None or window.end is None:
        return []
    by_path: dict[str, LogCandidate] = {}
    for first in range(window.start, window.end + 1, _COMMITS_PER_READ):
        versions = list(range(first, min(first + _COMMITS_PER_READ, window.end + 1)))
        try:
            raw = storage.read_many([commit_path(v) for v in versions])
        except FileNotFoundError:
            raise VacuumRefused(
                f"a commit between versions {versions[0]} and {versions[-1]} disappeared while VACUUM LITE read it "
                "(log cleanup running?); run VACUUM again",
                snapshot.table_uri,
            ) from None
        contents = [(v, clean_commit_bytes(d)) for v, d in zip(versions, raw, strict=True)]
        for candidate in _candidates_of(storage, contents, snapshot):
            seen = by_path.get(candidate.path)
            if seen is None or candidate.modification_time > seen.modification_time:
                by_path[candidate.path] = candidate
    return list(by_path.values())
