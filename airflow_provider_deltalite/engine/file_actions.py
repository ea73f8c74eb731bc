"""Add and remove actions of data files as log dicts: a live file's add, the remove that retires it, the logical file
key `(path, deletion vector)`, and the writer features that forbid adding files at all.

`Transaction` stages these dicts; the maintenance operations build them from a snapshot with the helpers here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.features import ensure_writable
from airflow_provider_deltalite.engine.row_tracking import ensure_row_tracking_consistent
from airflow_provider_deltalite.engine.snapshot import Snapshot


def remove_from_add(add: Mapping[str, Any], deletion_timestamp: int, data_change: bool) -> dict[str, Any]:
    """The remove action for a live file, as the reference builds it: path, partition values, size, stats, tags,
    deletion vector and row-tracking fields copied, ``extendedFileMetadata`` true.

    The deletion vector must be the live one: a remove with another DV removes nothing.
    """
    remove: dict[str, Any] = {
        "path": add["path"],
        "deletionTimestamp": int(deletion_timestamp),
        "dataChange": bool(data_change),
        "extendedFileMetadata": True,
        "partitionValues": dict(add.get("partitionValues") or {}),
        "size": int(add["size"]),
    }
    for key in ("stats", "tags", "deletionVector", "baseRowId", "defaultRowCommitVersion"):
        if add.get(key) is not None:
            remove[key] = add[key]
    return remove


def live_file_actions(snapshot: Snapshot, paths: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Live add actions of a snapshot as log dicts (partitionValues back to a map); only ``paths`` when given."""
    raw = snapshot.raw_files
    if paths is not None:
        wanted = set(paths)
        raw = pc.filter(raw, pa.array([p in wanted for p in raw.column("path").to_pylist()], pa.bool_()))
    rows = raw.to_pylist()
    out = []
    for row in rows:
        row = {k: v for k, v in row.items() if v is not None}
        pv = row.get("partitionValues") or {}
        row["partitionValues"] = {k: v for k, v in pv.items()}
        if isinstance(row.get("tags"), list):
            row["tags"] = dict(row["tags"])
        dv = row.get("deletionVector")
        if isinstance(dv, dict):
            row["deletionVector"] = {k: v for k, v in dv.items() if v is not None}
        out.append(row)
    return out


def dv_key(action: Mapping[str, Any]) -> str:
    """The deletion vector half of a logical file's key `(path, dv.uniqueId)`; "" without a deletion vector."""
    dv = action.get("deletionVector")
    if not isinstance(dv, Mapping):
        return ""
    offset = dv.get("offset")
    return f"{dv.get('storageType', '')}{dv.get('pathOrInlineDv', '')}" + (f"@{offset}" if offset is not None else "")


def ensure_can_add_files(snapshot: Snapshot) -> None:
    """Refuse commits that add files where deltalite cannot write them correctly (checked before any work).

    Row tracking: the table's row-tracking state must let new files get fresh row ids and rewrites keep the old ones
    (`ensure_row_tracking_consistent`).
    """
    ensure_writable(snapshot.protocol, snapshot.table_uri)
    ensure_row_tracking_consistent(snapshot)
