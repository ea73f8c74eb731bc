"""What one commit did: its kind (data, rearrange, maintenance, metadata) and what it added and removed.

The rules (Delta Lake paper section 4.3, and the reference streaming source's ``dataChange`` handling):

- ``data``: some ``add`` or ``remove`` has ``dataChange=true``, or the commit writes change-data (``cdc``) files.
  A commit that mixes ``dataChange`` true and false is data. A file action without a ``dataChange`` field (the
  protocol requires one) counts as data: for a sensor a spurious run is cheaper than a missed one.
- ``metadata``: a ``metaData`` or ``protocol`` action and no data-changing file action (schema or property changes,
  protocol upgrades; a rewrite that also changes metadata is metadata).
- ``rearrange``: file actions, every one with ``dataChange=false`` (OPTIMIZE, Z-order, REORG, row-tracking backfill).
- ``maintenance``: none of the above (VACUUM START/END, domain metadata, application transactions only).

The commit-level ``commitInfo.dataChange`` (written by the reference since 2026) is never what decides: the kind comes
from the actions, and a ``commitInfo.dataChange`` that disagrees with them is logged as a warning.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from airflow_provider_deltalite.engine import actions as A
from airflow_provider_deltalite.engine.commit_file import clean_commit_bytes, commit_lines
from airflow_provider_deltalite.engine.errors import CorruptLog

log = logging.getLogger(__name__)

DATA = "data"
REARRANGE = "rearrange"
MAINTENANCE = "maintenance"
METADATA = "metadata"
KINDS = (DATA, REARRANGE, MAINTENANCE, METADATA)


@dataclass(frozen=True)
class CommitChange:
    """One commit of the log, classified.

    Attributes:
        version: the commit's version.
        kind: one of `KINDS`.
        operation: ``commitInfo.operation`` (``WRITE``, ``OPTIMIZE``, ``VACUUM END``...), None without a commitInfo.
        timestamp: ms since the epoch: ``commitInfo.inCommitTimestamp`` when present, else ``commitInfo.timestamp``,
            else the commit file's modification time.
        operation_parameters: ``commitInfo.operationParameters`` decoded: values written as JSON text of an array or
            object (the reference's encoding, ``"zOrderBy": "[\\"id\\"]"``) are parsed, native arrays and every other
            value are kept as written (``"mode": "Append"`` stays a string, ``"auto": false`` a boolean).
        added_files / removed_files: ``add`` / ``remove`` actions with ``dataChange=true`` (a rearrangement's files
            are not counted: they add or remove no data).
        added_rows / removed_rows: logical rows of those actions: stats ``numRecords`` minus the rows their deletion
            vector marks deleted. None when one of the actions has no ``numRecords`` (removes often carry no stats).
        added_bytes / removed_bytes: sum of their ``size`` fields (a remove without ``size`` adds 0).
        added_paths: the paths of those adds, as written in the log.
    """

    version: int
    kind: str
    operation: str | None
    timestamp: int | None
    operation_parameters: dict[str, Any]
    added_files: int
    removed_files: int
    added_rows: int | None
    removed_rows: int | None
    added_bytes: int
    removed_bytes: int
    added_paths: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict with the attribute names as keys (``added_paths`` as a list).

        Example:
            >>> change.to_dict()["kind"]  # doctest: +SKIP
            'rearrange'
        """
        out = asdict(self)
        out["added_paths"] = list(self.added_paths)
        return out


@dataclass(frozen=True)
class ParsedCommit:
    """A classified commit and what else the tailing needs from it: the table id of its ``metaData``, if any."""

    change: CommitChange
    table_id: str | None


def decode_operation_parameters(parameters: Any) -> dict[str, Any]:
    """``operationParameters`` with JSON-encoded arrays and objects parsed; everything else as written.

    Only text that starts with ``[`` or ``{`` and parses is decoded: plain strings such as ``"Append"``, ``"0"`` or
    ``"false"`` are not JSON-encoded values in any writer's encoding and are kept as strings.

    Example:
        >>> decode_operation_parameters({"predicate": '["id > 1"]', "mode": "Append", "auto": False})
        {'predicate': ['id > 1'], 'mode': 'Append', 'auto': False}
    """
    if not isinstance(parameters, Mapping):
        return {}
    out: dict[str, Any] = {}
    for key, value in parameters.items():
        if isinstance(value, str) and value.lstrip()[:1] in ("[", "{"):
            # text that merely starts with a bracket (a predicate "[a] > 1") stays as written
            with contextlib.suppress(ValueError, RecursionError):  # RecursionError: nested too deeply to parse
                value = json.loads(value)
        out[str(key)] = value
    return out


def _logical_rows(action: Mapping[str, Any]) -> int | None:
    stats = action.get("stats")
    if isinstance(stats, str):
        try:
            stats = json.loads(stats)
        except (ValueError, RecursionError):  # RecursionError: nested too deeply to parse
            return None
    if not isinstance(stats, Mapping):
        return None
    rows = stats.get("numRecords")
    if isinstance(rows, bool) or not isinstance(rows, int):
        return None
    dv = action.get("deletionVector")
    deleted = dv.get("cardinality") if isinstance(dv, Mapping) else None
    return rows - deleted if isinstance(deleted, int) and not isinstance(deleted, bool) else rows


def _size(action: Mapping[str, Any]) -> int:
    size = action.get("size")
    return size if isinstance(size, int) and not isinstance(size, bool) else 0


def parse_commit(version: int, data: bytes, table_uri: str | None, file_time: Callable[[], int | None]) -> ParsedCommit:
    """Classify the bytes of commit ``version``.

    Args:
        version: the commit's version (named in errors).
        data: the commit file's content.
        table_uri: for error messages.
        file_time: the commit file's modification time in ms; called only when the commitInfo has no timestamp.

    Raises:
        CorruptLog: the file is empty, a line is not a JSON object, or a file action has no path.
    """
    data = clean_commit_bytes(data)
    adds: list[Mapping[str, Any]] = []
    removes: list[Mapping[str, Any]] = []
    has_cdc = has_metadata = has_file_actions = False
    table_id: str | None = None
    info: Mapping[str, Any] = {}
    lines = 0
    for line_no, obj in commit_lines(version, data, table_uri):
        lines += 1
        for name, action in obj.items():
            if name in (A.ADD, A.REMOVE):
                if not isinstance(action, dict) or not isinstance(action.get("path"), str):
                    raise CorruptLog(f"commit {version} line {line_no}: {name} action without a path", table_uri)
                has_file_actions = True
                if action.get("dataChange") is not False:
                    (adds if name == A.ADD else removes).append(action)
            elif name == A.CDC:
                has_cdc = True
            elif name in (A.METADATA, A.PROTOCOL):
                has_metadata = True
                if name == A.METADATA and isinstance(action, dict) and isinstance(action.get("id"), str):
                    table_id = action["id"]
            elif name == A.COMMIT_INFO and isinstance(action, dict):
                info = action
    if not lines:
        raise CorruptLog(f"commit {version} is an empty file", table_uri)

    changes_data = bool(adds or removes or has_cdc)
    if changes_data:
        kind = DATA
    elif has_metadata:
        kind = METADATA
    elif has_file_actions:
        kind = REARRANGE
    else:
        kind = MAINTENANCE
    claimed = info.get("dataChange")
    if isinstance(claimed, bool) and claimed != changes_data:
        log.warning(
            "commit %d of %s: commitInfo.dataChange=%s disagrees with its actions; classified by the actions as %s",
            version,
            table_uri,
            str(claimed).lower(),
            kind,
        )

    timestamp = None
    for key in ("inCommitTimestamp", "timestamp"):
        value = info.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            timestamp = value
            break
    if timestamp is None:
        timestamp = file_time()
    operation = info.get("operation")
    added_rows = [_logical_rows(a) for a in adds]
    removed_rows = [_logical_rows(r) for r in removes]
    change = CommitChange(
        version=version,
        kind=kind,
        operation=operation if isinstance(operation, str) else None,
        timestamp=timestamp,
        operation_parameters=decode_operation_parameters(info.get("operationParameters")),
        added_files=len(adds),
        removed_files=len(removes),
        added_rows=None if None in added_rows else sum(added_rows),  # type: ignore[arg-type]
        removed_rows=None if None in removed_rows else sum(removed_rows),  # type: ignore[arg-type]
        added_bytes=sum(_size(a) for a in adds),
        removed_bytes=sum(_size(r) for r in removes),
        added_paths=tuple(a["path"] for a in adds),
    )
    return ParsedCommit(change, table_id)
