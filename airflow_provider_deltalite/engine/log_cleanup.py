"""Metadata cleanup: delete log files older than ``delta.logRetentionDuration`` that no retained version needs.

This follows the reference's `MetadataCleanup`: the cutoff is ``now - delta.logRetentionDuration`` truncated to the
previous midnight UTC; the newest commit at or before the cutoff picks the newest checkpoint not newer than it, and
every commit, `.crc`, checkpoint and compaction file below that checkpoint's version is deleted. The checkpoint, its
commit (commitInfo and the in-commit timestamp live only there) and everything after it stay, so every version from
the checkpoint on still loads. Sidecar files no remaining checkpoint references are deleted once they are a day old
(a younger one may belong to a checkpoint being written right now).

On a local disk it also deletes temporary files a writer killed mid-write left in `_delta_log` (hidden names ending
in a UUID and ``.tmp``, as deltalite and Hadoop's log stores write them) once they are a day old, whether or not any
log file has expired: readers ignore them, but nothing else would ever remove them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_deltalite.engine import actions as A
from airflow_provider_deltalite.engine.commit_file import clean_commit_bytes, commit_lines
from airflow_provider_deltalite.engine.errors import CorruptLog, ProtocolNotSupported
from airflow_provider_deltalite.engine.history import in_commit_timestamps_enabled, read_commit_info
from airflow_provider_deltalite.engine.log_path import LOG_DIR, SIDECAR_DIR, LogFileKind
from airflow_provider_deltalite.engine.log_segment import (
    CheckpointRef,
    LogFile,
    complete_checkpoints,
    earliest_version,
    list_log,
)
from airflow_provider_deltalite.engine.properties import (
    ENABLE_EXPIRED_LOG_CLEANUP,
    LOG_RETENTION_DURATION,
    TableProperties,
)
from airflow_provider_deltalite.engine.snapshot import Snapshot
from airflow_provider_deltalite.engine.storage import FileInfo, Storage, is_temporary_name

__all__ = [
    "CleanupResult",
    "cleanup_cutoff",
    "cleanup_expired_logs",
    "expired_log_cleanup_enabled",
    "log_retention_ms",
]

DAY_MS = 86_400_000
# Unreferenced sidecars younger than this are kept: they may belong to a checkpoint still being written.
SIDECAR_MIN_AGE_MS = DAY_MS
# Temporary files younger than this are kept: a writer may be between writing one and linking it into place.
TEMP_MIN_AGE_MS = DAY_MS

_DELETABLE = frozenset(
    {
        LogFileKind.COMMIT,
        LogFileKind.CRC,
        LogFileKind.CHECKPOINT,
        LogFileKind.MULTI_PART_CHECKPOINT,
        LogFileKind.UUID_CHECKPOINT,
        LogFileKind.COMPACTED,
    }
)


@dataclass(frozen=True)
class CleanupResult:
    """What `cleanup_expired_logs` deleted (or, for a dry run, would delete).

    Attributes:
        cutoff_timestamp: ms since the epoch; commits at or before it are expired.
        checkpoint_version: the checkpoint kept as the new start of the log, or None when none qualified.
        files_deleted: deleted paths relative to the table root (`_delta_log/...`), oldest version first.
        is_dry_run: nothing was deleted; ``files_deleted`` lists what would be.
        enabled: ``delta.enableExpiredLogCleanup`` was true (when false nothing is considered).
    """

    cutoff_timestamp: int
    checkpoint_version: int | None
    files_deleted: tuple[str, ...]
    is_dry_run: bool
    enabled: bool

    @property
    def num_files_deleted(self) -> int:
        return len(self.files_deleted)

    def to_dict(self) -> dict[str, Any]:
        """The plain dict shown by the CLI and returned over XCom."""
        return {
            "cutoffTimestamp": self.cutoff_timestamp,
            "checkpointVersion": self.checkpoint_version,
            "filesDeleted": list(self.files_deleted),
            "numFilesDeleted": self.num_files_deleted,
            "isDryRun": self.is_dry_run,
            "enabled": self.enabled,
        }


def log_retention_ms(properties: TableProperties) -> int:
    """``delta.logRetentionDuration`` in ms (default 30 days).

    Raises:
        InvalidTableProperty: the value is not an interval.
    """
    return properties.interval_ms(LOG_RETENTION_DURATION)


def expired_log_cleanup_enabled(properties: TableProperties) -> bool:
    """``delta.enableExpiredLogCleanup`` (default true).

    Raises:
        InvalidTableProperty: the value is not a boolean.
    """
    return properties.boolean(ENABLE_EXPIRED_LOG_CLEANUP)


def cleanup_cutoff(now_ms: int, retention_ms: int) -> int:
    """``now - retention`` truncated to the previous midnight UTC, as the reference does (it keeps logs up to a day
    longer so that a table is not checkpointed just to clean up).

    Example:
        >>> cleanup_cutoff(1_700_000_000_000, 0)  # 2023-11-14T22:13:20Z
        1699920000000
    """
    return (now_ms - retention_ms) // DAY_MS * DAY_MS


def cleanup_expired_logs(snapshot: Snapshot, *, now_ms: int | None = None, dry_run: bool = False) -> CleanupResult:
    """Delete expired log files of ``snapshot``'s table (see the module docstring for the rules).

    Args:
        snapshot: a snapshot of the table; its properties decide retention and whether cleanup runs at all.
        now_ms: the current time in ms since the epoch (tests pin it).
        dry_run: only report what would be deleted.

    Returns:
        The cutoff, the checkpoint kept, and the files deleted.

    Raises:
        InvalidTableProperty: ``delta.logRetentionDuration`` or ``delta.enableExpiredLogCleanup`` does not parse;
            nothing is deleted then.
        ProtocolNotSupported: the table uses `checkpointProtection`, whose cleanup rules deltalite does not implement.
        StorageError: listing or deleting failed.
    """
    now_ms = int(time.time() * 1000) if now_ms is None else int(now_ms)
    props = snapshot.properties
    enabled = expired_log_cleanup_enabled(props)
    cutoff = cleanup_cutoff(now_ms, log_retention_ms(props))
    nothing = CleanupResult(cutoff, None, (), dry_run, enabled)
    if not enabled:
        return nothing
    if snapshot.protocol.has_feature("checkpointProtection"):
        raise ProtocolNotSupported(
            "log cleanup is not supported on tables with the 'checkpointProtection' writer feature",
            snapshot.table_uri,
            features=("checkpointProtection",),
        )
    storage = snapshot.storage
    temporary = _stale_temporary_files(storage, now_ms)
    if temporary and not dry_run:
        storage.delete(temporary)
    nothing = CleanupResult(cutoff, None, tuple(temporary), dry_run, enabled)
    files = list_log(storage, 0)
    commits = [f for f in files if f.parsed.kind is LogFileKind.COMMIT]
    cutoff_version = _newest_expired_commit(storage, commits, props, cutoff)
    if cutoff_version is None:
        return nothing
    checkpoints = complete_checkpoints(files)
    sidecars = _list_sidecars(storage)
    sidecar_names = {s.name for s in sidecars}
    chosen: CheckpointRef | None = None
    for version in sorted((v for v in checkpoints if v <= cutoff_version), reverse=True):
        # The kept checkpoint becomes the only way into its versions, so it must be whole, not just named; and every
        # checkpoint of that version must be, since a reader that finds one damaged skips the whole version.
        if all(_intact(storage, ref, sidecar_names) for ref in checkpoints[version]):
            chosen = checkpoints[version][0]
            break
    if chosen is None:
        return nothing
    keep_from = chosen.version
    doomed = [f for f in files if f.version < keep_from and f.parsed.kind in _DELETABLE]
    gone = {f.info.name for f in doomed}
    remaining = [f for f in files if f.info.name not in gone]
    after = earliest_version(remaining)
    if after is None or after > keep_from:
        # Some version from the checkpoint on would not load afterwards (a gap in the log): delete nothing more.
        return nothing
    paths = [f.path for f in doomed]
    paths += _stale_sidecars(storage, remaining, sidecars, now_ms)
    if not dry_run:
        storage.delete(paths)
    return CleanupResult(cutoff, keep_from, (*temporary, *paths), dry_run, enabled)


def _stale_temporary_files(storage: Storage, now_ms: int) -> list[str]:
    """Day-old temporary files of killed writers in `_delta_log` and its sidecar directory (local disk only: object
    stores are written in one request, without temporary files)."""
    if not storage.writes_temporary_files:
        return []
    stale: list[str] = []
    for directory in (LOG_DIR, f"{LOG_DIR}/{SIDECAR_DIR}"):
        try:
            listed = storage.list_from(directory, ".")
        except FileNotFoundError:
            continue
        stale += [
            f"{directory}/{f.name}"
            for f in listed
            if is_temporary_name(f.name) and f.modification_time < now_ms - TEMP_MIN_AGE_MS
        ]
    return stale


def _newest_expired_commit(
    storage: Storage, commits: Sequence[LogFile], props: TableProperties, cutoff: int
) -> int | None:
    """The newest commit version whose timestamp is at or before ``cutoff``.

    File times are made monotonic first (a commit older than its predecessor counts as predecessor + 1 ms, as the
    reference's deletion iterator does), so a commit is never expired before an older one. Commits with in-commit
    timestamps use those; they increase by the protocol's rule, so a binary search reads only a few commit files.
    """
    plain = [c for c in commits if not in_commit_timestamps_enabled(props, c.version)]
    stamped = [c for c in commits if in_commit_timestamps_enabled(props, c.version)]
    newest: int | None = None
    previous: int | None = None
    for c in plain:
        ts = c.info.modification_time if previous is None else max(c.info.modification_time, previous + 1)
        previous = ts
        if ts > cutoff:
            return newest  # monotonic: every later commit is newer still
        newest = c.version
    if not stamped or (plain and stamped[0].version < plain[-1].version):
        return newest

    def timestamp(c: LogFile) -> int:
        info = read_commit_info(storage, c.version) or {}
        ict = info.get("inCommitTimestamp")
        return ict if isinstance(ict, int) and not isinstance(ict, bool) else c.info.modification_time

    lo, hi = 0, len(stamped)  # find the first stamped commit newer than the cutoff
    while lo < hi:
        mid = (lo + hi) // 2
        if timestamp(stamped[mid]) <= cutoff:
            lo = mid + 1
        else:
            hi = mid
    return stamped[lo - 1].version if lo > 0 else newest


def _list_sidecars(storage: Storage) -> list[FileInfo]:
    try:
        listed = storage.list_from(f"{LOG_DIR}/{SIDECAR_DIR}")
    except FileNotFoundError:
        return []
    # Hidden names are not sidecars: temporary files of a write in progress, Hadoop's `.<name>.crc` companions.
    return [f for f in listed if not f.name.startswith((".", "_"))]


def _sidecar_refs(storage: Storage, f: LogFile) -> set[str]:
    """File names of the sidecars a checkpoint file references (V2 checkpoints, classic-named ones included).

    Reading parses the whole JSON file (with the commit parser), or the Parquet footer, so a damaged file raises
    here.
    """
    names: set[str] = set()
    paths: list[Any] = []
    if f.parsed.file_format == "json":
        for _line_no, action in commit_lines(f.version, clean_commit_bytes(storage.read(f.path)), storage.table_uri):
            if isinstance(action.get(A.SIDECAR), dict):
                paths.append(action[A.SIDECAR].get("path"))
    else:
        with storage.open_input(f.path) as fh:
            pf = pq.ParquetFile(fh)
            if A.SIDECAR in pf.schema_arrow.names:
                column = pf.read(columns=[f"{A.SIDECAR}.path"]).column(A.SIDECAR)
                paths = [(row or {}).get("path") for row in column.to_pylist()]
    for path in paths:
        if isinstance(path, str):
            # the protocol recommends a bare file name; a path is reduced to its name, as the reference does
            names.add(unquote(path.rsplit("/", 1)[-1]))
    return names


def _intact(storage: Storage, ref: CheckpointRef, sidecar_names: set[str]) -> bool:
    """Whether every file of a checkpoint is present and parses, and every sidecar it names exists."""
    try:
        return all(_sidecar_refs(storage, f) <= sidecar_names for f in ref.files)
    except (FileNotFoundError, CorruptLog, pa.ArrowException, OSError, ValueError, RecursionError):
        return False


def _stale_sidecars(
    storage: Storage, remaining: Sequence[LogFile], sidecars: Sequence[FileInfo], now_ms: int
) -> list[str]:
    """Sidecars that no remaining checkpoint names and that are old enough to delete."""
    old = [s for s in sidecars if s.modification_time < now_ms - SIDECAR_MIN_AGE_MS]
    if not old:
        return []
    referenced: set[str] = set()
    for f in remaining:
        if f.parsed.kind not in (LogFileKind.CHECKPOINT, LogFileKind.UUID_CHECKPOINT):
            continue  # multi-part (V1) checkpoints cannot reference sidecars
        try:
            referenced |= _sidecar_refs(storage, f)
        except (FileNotFoundError, CorruptLog, pa.ArrowException, OSError, ValueError, RecursionError):
            return []  # a checkpoint we cannot read might name any of them: keep them all
    return [f"{LOG_DIR}/{SIDECAR_DIR}/{s.name}" for s in old if s.name not in referenced]
