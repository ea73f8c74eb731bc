"""Table history: commit timestamps (file times or in-commit timestamps) and the commitInfo of each version."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_deltalite.engine import actions as A
from airflow_provider_deltalite.engine.commit_file import clean_commit_bytes, find_non_file_actions
from airflow_provider_deltalite.engine.log_path import LogFileKind, commit_path
from airflow_provider_deltalite.engine.log_segment import LogSegment, list_log
from airflow_provider_deltalite.engine.properties import (
    ENABLE_IN_COMMIT_TIMESTAMPS,
    IN_COMMIT_TIMESTAMP_ENABLEMENT_VERSION,
    TableProperties,
)
from airflow_provider_deltalite.engine.storage import Storage


def in_commit_timestamps_enabled(properties: TableProperties, version: int) -> bool:
    """Whether ``version`` carries an in-commit timestamp that defines its time."""
    if not properties.boolean(ENABLE_IN_COMMIT_TIMESTAMPS):
        return False
    since = properties.get(IN_COMMIT_TIMESTAMP_ENABLEMENT_VERSION)
    return since is None or version >= int(since)


def commit_timestamp(
    storage: Storage,
    segment: LogSegment,
    version: int,
    properties: TableProperties,
    commit_infos: Mapping[int, dict[str, Any]] | None = None,
) -> int:
    """The timestamp of ``version``, per the protocol's rules.

    ``commit_infos`` are the commitInfo actions already read (by version); others are read from the commit file.
    """
    if in_commit_timestamps_enabled(properties, version):
        info = commit_infos.get(version) if commit_infos else None
        if info is None:
            info = read_commit_info(storage, version)
        if info and isinstance(info.get("inCommitTimestamp"), int):
            return info["inCommitTimestamp"]
    for f in reversed(segment.listing):
        if f.version == version and f.parsed.kind is LogFileKind.COMMIT:
            return f.info.modification_time
    for f in reversed(segment.listing):
        if f.version == version:
            return f.info.modification_time
    return 0


def read_commit_info(storage: Storage, version: int) -> dict[str, Any] | None:
    """The commitInfo action of one commit file, or None when the file or the action is missing."""
    try:
        data = storage.read(commit_path(version))
    except FileNotFoundError:
        return None
    return commit_info_of(storage, version, data)


def commit_info_of(storage: Storage, version: int, data: bytes) -> dict[str, Any] | None:
    """The commitInfo action in the bytes of commit ``version``, or None."""
    for action in find_non_file_actions([(version, clean_commit_bytes(data))], storage.table_uri):
        if action.name == A.COMMIT_INFO:
            return action.value
    return None


def history_entries(storage: Storage, limit: int | None = None) -> list[dict[str, Any]]:
    """commitInfo of each commit still in the log, newest first, with ``version`` filled in."""
    files = [f for f in list_log(storage, 0) if f.parsed.kind is LogFileKind.COMMIT]
    files.sort(key=lambda f: f.version, reverse=True)
    if limit is not None:
        files = files[:limit]
    raw = storage.read_many([f.path for f in files])
    out = []
    for f, data in zip(files, raw, strict=True):
        info = dict(commit_info_of(storage, f.version, data) or {})
        info["version"] = f.version
        info.setdefault("timestamp", f.info.modification_time)
        out.append(info)
    return out
