"""Which log files make up a version: the newest usable checkpoint and the contiguous commits after it."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field

from airflow_provider_deltalite.engine.errors import CorruptLog, TableNotFound, VersionNotFound
from airflow_provider_deltalite.engine.last_checkpoint import read_last_checkpoint_hint
from airflow_provider_deltalite.engine.log_path import (
    LOG_DIR,
    LogFileKind,
    ParsedLogPath,
    parse_log_path,
    version_prefix,
)
from airflow_provider_deltalite.engine.storage import FileInfo, Storage


@dataclass(frozen=True)
class LogFile:
    """A listed log file with its parsed name."""

    parsed: ParsedLogPath
    info: FileInfo

    @property
    def version(self) -> int:
        return self.parsed.version

    @property
    def path(self) -> str:
        return f"{LOG_DIR}/{self.info.name}"


@dataclass(frozen=True)
class CheckpointRef:
    """A complete checkpoint: one file (classic or V2 UUID) or every part of a multi-part one."""

    version: int
    files: tuple[LogFile, ...]
    kind: LogFileKind


@dataclass(frozen=True)
class LogSegment:
    """The files to replay for ``version``: an optional checkpoint, then commits ``checkpoint.version+1..version``.

    Attributes:
        version: the version this segment reconstructs.
        checkpoint: the checkpoint replay starts from, or None to start at version 0.
        commits: commit files in version order, contiguous, ending at ``version``.
        older_checkpoints: complete checkpoints below ``checkpoint`` (newest first), fallbacks if it is unreadable.
        listing: every versioned file seen (for commit timestamps and fallbacks).
    """

    version: int
    checkpoint: CheckpointRef | None
    commits: tuple[LogFile, ...]
    older_checkpoints: tuple[CheckpointRef, ...] = ()
    listing: tuple[LogFile, ...] = field(default=(), repr=False)

    @property
    def commit_versions(self) -> list[int]:
        return [c.version for c in self.commits]


def list_log(storage: Storage, start_version: int = 0) -> list[LogFile]:
    """The versioned files of `_delta_log` from ``start_version`` on, sorted by version then name."""
    try:
        infos = storage.list_from(LOG_DIR, version_prefix(start_version) if start_version > 0 else "")
    except FileNotFoundError:
        if not storage.exists(""):
            raise TableNotFound("path does not exist", storage.table_uri) from None
        raise TableNotFound("not a Delta table: no _delta_log directory", storage.table_uri) from None
    files = []
    for info in infos:
        parsed = parse_log_path(info.name)
        if parsed is not None and parsed.kind is not LogFileKind.UNKNOWN and parsed.version >= start_version:
            files.append(LogFile(parsed, info))
    files.sort(key=lambda f: (f.version, f.info.name))
    return files


def complete_checkpoints(files: Sequence[LogFile]) -> dict[int, list[CheckpointRef]]:
    """Complete checkpoints by version. A multi-part checkpoint counts only with all of its parts present."""
    by_version: dict[int, list[CheckpointRef]] = {}
    multipart: dict[tuple[int, int], dict[int, LogFile]] = {}
    for f in files:
        kind = f.parsed.kind
        if kind in (LogFileKind.CHECKPOINT, LogFileKind.UUID_CHECKPOINT):
            by_version.setdefault(f.version, []).append(CheckpointRef(f.version, (f,), kind))
        elif kind is LogFileKind.MULTI_PART_CHECKPOINT:
            multipart.setdefault((f.version, f.parsed.num_parts or 0), {})[f.parsed.part or 0] = f
    for (version, num_parts), parts in multipart.items():
        if len(parts) == num_parts:
            ordered = tuple(parts[i] for i in sorted(parts))
            by_version.setdefault(version, []).append(
                CheckpointRef(version, ordered, LogFileKind.MULTI_PART_CHECKPOINT)
            )
    # Prefer V2 UUID checkpoints, then classic, then multi-part: the same state, fewer files to read first.
    rank = {LogFileKind.UUID_CHECKPOINT: 0, LogFileKind.CHECKPOINT: 1, LogFileKind.MULTI_PART_CHECKPOINT: 2}
    for refs in by_version.values():
        refs.sort(key=lambda r: rank[r.kind])
    return by_version


def build_log_segment(
    files: Sequence[LogFile], version: int | None, table_uri: str | None = None, *, listed_from: int = 0
) -> LogSegment:
    """Choose the checkpoint and commits that reconstruct ``version`` (None: the latest) from a listing.

    Pure: it only looks at names. Raises TableNotFound for an empty log, VersionNotFound for a version outside the
    log, and CorruptLog for a gap in the commits it needs.
    """
    commits = {f.version: f for f in files if f.parsed.kind is LogFileKind.COMMIT}
    checkpoints = complete_checkpoints(files)
    if not commits and not checkpoints:
        raise TableNotFound("not a Delta table: _delta_log holds no commits", table_uri)
    latest = max([*commits, *checkpoints])
    target = latest if version is None else version
    if target > latest:
        raise VersionNotFound(
            f"version {target} does not exist (latest is {latest})", table_uri, earliest=None, latest=latest
        )
    if target < 0:
        raise VersionNotFound(f"version {target} does not exist", table_uri, latest=latest)
    commit_versions = sorted(commits)
    usable = sorted((v for v in checkpoints if v <= target), reverse=True)
    chosen: CheckpointRef | None = None
    older: list[CheckpointRef] = []
    for v in usable:
        if first_missing(commit_versions, v + 1, target) is None:
            if chosen is None:
                chosen = checkpoints[v][0]
                older.extend(checkpoints[v][1:])
            else:
                older.extend(checkpoints[v])
    start = chosen.version + 1 if chosen else 0
    if chosen is None:
        if listed_from > 0:
            # The caller listed from a hint; the checkpoint it pointed at is not usable, so list everything.
            raise _NeedFullListing()
        if 0 not in commits:
            earliest = _earliest_reconstructable(commits, checkpoints)
            if version is not None and earliest is not None and target < earliest:
                raise VersionNotFound(
                    f"version {target} cannot be reconstructed: the log before version {earliest} was cleaned up",
                    table_uri,
                    earliest=earliest,
                    latest=latest,
                )
            first = min(commits) if commits else None
            note = _incomplete_note(files, target)
            raise CorruptLog(f"the log starts at version {first} and has no checkpoint to start from{note}", table_uri)
    missing = first_missing(commit_versions, start, target)
    if missing is not None:
        raise CorruptLog(
            f"version {missing} is missing from the log (commits {start}..{target} must be contiguous)", table_uri
        )
    segment_commits = tuple(commits[v] for v in range(start, target + 1))
    return LogSegment(target, chosen, segment_commits, tuple(older), tuple(files))


def _incomplete_note(files: Sequence[LogFile], target: int) -> str:
    """`` (checkpoint 2 is incomplete: 1 of its 2 parts missing)`` for the newest multi-part checkpoint at or
    below ``target`` that lacks parts; "" when there is none."""
    parts: dict[tuple[int, int], set[int]] = {}
    for f in files:
        if f.parsed.kind is LogFileKind.MULTI_PART_CHECKPOINT and f.version <= target:
            parts.setdefault((f.version, f.parsed.num_parts or 0), set()).add(f.parsed.part or 0)
    incomplete = [(v, n, len(found)) for (v, n), found in parts.items() if len(found) < n]
    if not incomplete:
        return ""
    version, num_parts, found = max(incomplete)
    return f" (checkpoint {version} is incomplete: {num_parts - found} of its {num_parts} parts missing)"


class _NeedFullListing(Exception):
    """Internal: the hint-based listing cannot reconstruct the version; retry with a full listing."""


def first_missing(versions: Sequence[int], start: int, stop: int) -> int | None:
    """The smallest version in ``start..stop`` absent from the sorted ``versions``, or None.

    Walks the listed versions, never the range: a stray file at version 10**12 must not cost 10**12 steps.
    """
    i = bisect_left(versions, start)
    expected = start
    while expected <= stop:
        if i >= len(versions) or versions[i] != expected:
            return expected
        i += 1
        expected += 1
    return None


def _earliest_reconstructable(commits: dict[int, LogFile], checkpoints: dict[int, list[CheckpointRef]]) -> int | None:
    """The oldest version from which every version up to the latest can be built (None: none can).

    A replay can start at commit 0 or at a checkpoint; a version after the start is reachable when its commit is
    there or a checkpoint stands in for it. So the answer is the oldest start above the newest hole.
    """
    present = sorted(set(commits) | set(checkpoints))
    newest_hole = -1
    expected = present[-1]
    for v in reversed(present):
        if v != expected:
            newest_hole = expected
            break
        expected -= 1
    else:
        newest_hole = expected  # -1 when the log is complete from version 0
    starts = ([0] if 0 in commits else []) + sorted(checkpoints)
    return next((s for s in starts if s > newest_hole), None)


def earliest_version(files: Sequence[LogFile]) -> int | None:
    """The oldest version a snapshot can be built for, given a full listing."""
    commits = {f.version: f for f in files if f.parsed.kind is LogFileKind.COMMIT}
    checkpoints = complete_checkpoints(files)
    if not commits and not checkpoints:
        return None
    return _earliest_reconstructable(commits, checkpoints)


def load_log_segment(storage: Storage, version: int | None = None) -> LogSegment:
    """List the log (from the `_last_checkpoint` hint when it helps) and build the segment for ``version``."""
    hint = read_last_checkpoint_hint(storage)
    start = 0
    if hint is not None and (version is None or hint["version"] <= version):
        start = hint["version"]
    if start > 0:
        files = list_log(storage, start)
        has_hinted_checkpoint = any(
            f.version == start and f.parsed.kind is not LogFileKind.COMMIT and f.parsed.kind is not LogFileKind.CRC
            for f in files
        )
        if has_hinted_checkpoint:
            try:
                return build_log_segment(files, version, storage.table_uri, listed_from=start)
            except (_NeedFullListing, VersionNotFound, CorruptLog):
                pass  # a stale, forward-pointing or partial hint: fall back to listing everything
    files = list_log(storage, 0)
    return build_log_segment(files, version, storage.table_uri)
