"""The log's health (checkpoint lag, size, versions per retention window) and the newest maintenance runs.

One listing of `_delta_log` gives sizes and file times. The history part reads commitInfo newest-first, in parallel
batches, and stops as soon as it has the newest OPTIMIZE and the newest VACUUM END (and, when the caller needs it,
the newest Z-order): its cost follows how long ago those ran, not the length of the log. Commits the snapshot's
replay already read are not read again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_deltalite.engine.history import commit_info_of, in_commit_timestamps_enabled
from airflow_provider_deltalite.engine.log_path import LOG_DIR, LogFileKind, commit_path, parse_log_path
from airflow_provider_deltalite.engine.log_segment import LogFile, earliest_version
from airflow_provider_deltalite.engine.properties import (
    ENABLE_IN_COMMIT_TIMESTAMPS,
    IN_COMMIT_TIMESTAMP_ENABLEMENT_VERSION,
    LOG_RETENTION_DURATION,
    checkpoint_interval,
)
from airflow_provider_deltalite.engine.snapshot import Snapshot
from airflow_provider_deltalite.engine.storage.base import FileInfo
from airflow_provider_deltalite.maintenance.commit_kinds import decode_operation_parameters
from airflow_provider_deltalite.maintenance.health.metrics import LastRuns, LogHealth

HOUR_MS = 3_600_000
HISTORY_BATCH = 32  # commit files read at once while looking back for the last runs
_CHECKPOINT_KINDS = (LogFileKind.CHECKPOINT, LogFileKind.MULTI_PART_CHECKPOINT, LogFileKind.UUID_CHECKPOINT)
OPTIMIZE = "OPTIMIZE"
VACUUM_END = "VACUUM END"


@dataclass
class LogView:
    """What health needs of the log: every file listed, commit file times by version, and the commitInfos read so far
    (shared by the history search and the in-commit timestamps)."""

    snapshot: Snapshot
    files: list[FileInfo]
    commit_times: dict[int, int]  # version -> file modification time (ms), versions <= the snapshot's
    checkpoints: set[int]
    infos: dict[int, dict[str, Any] | None]

    @classmethod
    def read(cls, snapshot: Snapshot) -> LogView:
        files = snapshot.storage.list_from(LOG_DIR, "")
        commit_times: dict[int, int] = {}
        checkpoints: set[int] = set()
        for info in files:
            parsed = parse_log_path(info.name)
            if parsed is None or parsed.version > snapshot.version:
                continue
            if parsed.kind is LogFileKind.COMMIT:
                commit_times[parsed.version] = info.modification_time
            elif parsed.kind in _CHECKPOINT_KINDS:
                checkpoints.add(parsed.version)
        return cls(snapshot, files, commit_times, checkpoints, dict(snapshot.commit_infos))

    def commit_info(self, version: int) -> dict[str, Any] | None:
        if version not in self.infos:
            self.read_infos([version])
        return self.infos.get(version)

    def read_infos(self, versions: list[int]) -> None:
        missing = [v for v in versions if v not in self.infos]
        if not missing:
            return
        storage = self.snapshot.storage
        try:
            contents = storage.read_many([commit_path(v) for v in missing])
        except FileNotFoundError:  # cleaned up meanwhile: read one by one, the gone ones have no info
            contents = []
            for v in missing:
                try:
                    contents.append(storage.read(commit_path(v)))
                except FileNotFoundError:
                    contents.append(b"")
        for v, data in zip(missing, contents, strict=True):
            self.infos[v] = commit_info_of(storage, v, data) if data else None

    def timestamp(self, version: int) -> int:
        """The commit time of ``version``: its in-commit timestamp where the table enables them, else the file time."""
        if in_commit_timestamps_enabled(self.snapshot.properties, version):
            info = self.commit_info(version)
            if info and isinstance(info.get("inCommitTimestamp"), int):
                return int(info["inCommitTimestamp"])
        return self.commit_times.get(version, 0)


def log_health(view: LogView, now_ms: int, file_retention_ms: int) -> LogHealth:
    """`LogHealth` of the snapshot's log at ``now_ms``."""
    snap = view.snapshot
    checkpoint = snap.segment.checkpoint
    last_checkpoint = checkpoint.version if checkpoint is not None else None
    log_retention_ms = snap.properties.interval_ms(LOG_RETENTION_DURATION)
    return LogHealth(
        version=snap.version,
        last_checkpoint_version=last_checkpoint,
        commits_since_checkpoint=snap.version - last_checkpoint if last_checkpoint is not None else snap.version + 1,
        checkpoint_interval=checkpoint_interval(snap.properties),
        log_files=len(view.files),
        log_bytes=sum(f.size for f in view.files),
        log_retention_hours=log_retention_ms / HOUR_MS,
        oldest_version=oldest_version(view),
        versions_in_log_retention=versions_since(view, now_ms - log_retention_ms),
        versions_in_file_retention=versions_since(view, now_ms - file_retention_ms),
    )


def oldest_version(view: LogView) -> int:
    """The oldest version the log can still reconstruct, as time travel finds it (`log_segment.earliest_version`)."""
    version = view.snapshot.version
    files = []
    for info in view.files:
        parsed = parse_log_path(info.name)
        if parsed is not None and parsed.kind is not LogFileKind.UNKNOWN and parsed.version <= version:
            files.append(LogFile(parsed, info))
    earliest = earliest_version(files)
    return version if earliest is None else earliest


def versions_since(view: LogView, cutoff_ms: int) -> int:
    """How many versions still in the log were committed at or after ``cutoff_ms``.

    File times are compared one by one; in-commit timestamps only grow with the version, so the versions that carry
    them are binary-searched (a few commit files read, not all of them)."""
    versions = sorted(view.commit_times)
    props = view.snapshot.properties
    ict_from: int | None = None
    if props.boolean(ENABLE_IN_COMMIT_TIMESTAMPS):
        since = props.get(IN_COMMIT_TIMESTAMP_ENABLEMENT_VERSION)
        ict_from = 0 if since is None else int(since)
    file_timed = [v for v in versions if ict_from is None or v < ict_from]
    count = sum(1 for v in file_timed if view.commit_times[v] >= cutoff_ms)
    ict = [v for v in versions if ict_from is not None and v >= ict_from]
    lo, hi = 0, len(ict)
    while lo < hi:  # first in-commit-timestamped version at or after the cutoff
        mid = (lo + hi) // 2
        if view.timestamp(ict[mid]) >= cutoff_ms:
            hi = mid
        else:
            lo = mid + 1
    return count + len(ict) - lo


def last_runs(view: LogView, now_ms: int, want_zorder: bool) -> LastRuns:
    """The newest OPTIMIZE and VACUUM END of the log (and the newest Z-order's columns when ``want_zorder``, or when
    the newest OPTIMIZE is a Z-order), read newest-first in batches until found."""
    found: dict[str, int] = {}
    zorder: tuple[str, ...] = ()
    versions = sorted(view.commit_times, reverse=True)

    def done() -> bool:
        return OPTIMIZE in found and VACUUM_END in found and (bool(zorder) or not want_zorder)

    for start in range(0, len(versions), HISTORY_BATCH):
        batch = versions[start : start + HISTORY_BATCH]
        view.read_infos(batch)
        for v in batch:
            info = view.infos.get(v) or {}
            operation = info.get("operation")
            if operation == OPTIMIZE:
                found.setdefault(OPTIMIZE, v)
                columns = _zorder_by(info)
                if columns and not zorder and (want_zorder or found[OPTIMIZE] == v):
                    zorder = columns
            elif operation == VACUUM_END:
                found.setdefault(VACUUM_END, v)
            if done():
                break
        if done():
            break

    def when(version: int | None) -> tuple[int | None, float | None]:
        if version is None:
            return None, None
        ts = view.timestamp(version)
        return ts, (now_ms - ts) / HOUR_MS

    opt_ts, opt_hours = when(found.get(OPTIMIZE))
    vac_ts, vac_hours = when(found.get(VACUUM_END))
    return LastRuns(
        optimize_version=found.get(OPTIMIZE),
        optimize_timestamp=opt_ts,
        hours_since_optimize=opt_hours,
        vacuum_version=found.get(VACUUM_END),
        vacuum_timestamp=vac_ts,
        hours_since_vacuum=vac_hours,
        zorder_columns=zorder,
    )


def _zorder_by(info: Mapping[str, Any]) -> tuple[str, ...]:
    params = decode_operation_parameters(info.get("operationParameters"))
    columns = params.get("zOrderBy")
    if isinstance(columns, list) and all(isinstance(c, str) for c in columns):
        return tuple(columns)
    return ()
