"""The `commitInfo` action deltalite writes, encoded the way the reference implementation writes it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from airflow_provider_deltalite.version import __version__

SNAPSHOT_ISOLATION = "SnapshotIsolation"
SERIALIZABLE = "Serializable"


def engine_info() -> str:
    """`deltalite/<version>`, the engineInfo of every commit deltalite writes."""
    return f"deltalite/{__version__}"


def encode_operation_parameters(parameters: Mapping[str, Any] | None) -> dict[str, Any]:
    """Encode operationParameters as the reference does: strings stay strings, booleans and numbers stay native,
    lists and objects become JSON text (``"zOrderBy": "[\\"id\\"]"``), and None becomes null.

    Example:
        >>> encode_operation_parameters({"predicate": [], "zOrderBy": ["id"], "auto": False})
        {'predicate': '[]', 'zOrderBy': '["id"]', 'auto': False}
    """
    encoded: dict[str, Any] = {}
    for key, value in (parameters or {}).items():
        if value is None or isinstance(value, bool | int | float | str):
            encoded[str(key)] = value
        else:
            encoded[str(key)] = json.dumps(value, separators=(",", ":"), default=str)
    return encoded


def encode_operation_metrics(metrics: Mapping[str, Any] | None) -> dict[str, str]:
    """operationMetrics values are strings in the log (``"numAddedFiles": "3"``)."""
    out: dict[str, str] = {}
    for key, value in (metrics or {}).items():
        if value is None:
            continue
        out[str(key)] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


def build_commit_info(
    *,
    operation: str,
    parameters: Mapping[str, Any] | None,
    metrics: Mapping[str, Any] | None,
    read_version: int,
    isolation_level: str,
    is_blind_append: bool,
    txn_id: str,
    timestamp_ms: int,
    in_commit_timestamp_ms: int | None = None,
    tags: Mapping[str, str] | None = None,
    user_metadata: str | None = None,
) -> dict[str, Any]:
    """The commitInfo of one commit attempt. With in-commit timestamps the field comes first, as the protocol asks."""
    info: dict[str, Any] = {}
    if in_commit_timestamp_ms is not None:
        info["inCommitTimestamp"] = in_commit_timestamp_ms
    info.update(
        {
            "timestamp": timestamp_ms,
            "operation": operation,
            "operationParameters": encode_operation_parameters(parameters),
            "readVersion": read_version,
            "isolationLevel": isolation_level,
            "isBlindAppend": is_blind_append,
            "operationMetrics": encode_operation_metrics(metrics),
            "engineInfo": engine_info(),
            "txnId": txn_id,
        }
    )
    if tags:
        info["tags"] = {str(k): str(v) for k, v in tags.items()}
    if user_metadata is not None:
        info["userMetadata"] = user_metadata
    return info
