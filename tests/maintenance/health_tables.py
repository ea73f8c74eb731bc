"""Log-only Delta tables written by hand for the health tests: every action, size, statistic and commit time is set
here, so the tests can compute each expected figure by hand (health reads no data file, so none is written)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

MIB = 1 << 20
HOUR = 3_600_000
DV_FEATURES = {"minReaderVersion": 3, "minWriterVersion": 7}


def field(name: str, kind: str) -> dict[str, Any]:
    return {"name": name, "type": kind, "nullable": True, "metadata": {}}


def metadata(fields: Sequence[dict[str, Any]], partition_columns: Sequence[str] = (), **configuration: str) -> dict:
    schema = {"type": "struct", "fields": list(fields)}
    return {
        "metaData": {
            "id": "00000000-0000-0000-0000-000000000020",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps(schema),
            "partitionColumns": list(partition_columns),
            "configuration": dict(configuration),
            "createdTime": 0,
        }
    }


def protocol(reader_features: Sequence[str] = (), writer_features: Sequence[str] = ()) -> dict:
    if not reader_features and not writer_features:
        return {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
    return {
        "protocol": {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": list(reader_features),
            "writerFeatures": list(writer_features),
        }
    }


def stats(rows: int, column: str | None = None, lo: Any = None, hi: Any = None) -> str:
    doc: dict[str, Any] = {"numRecords": rows}
    if column is not None:
        doc.update(minValues={column: lo}, maxValues={column: hi}, nullCount={column: 0})
    return json.dumps(doc)


def add(
    path: str,
    size: int,
    partition: Mapping[str, str | None] | None = None,
    stats_json: str | None = None,
    dv_cardinality: int | None = None,
) -> dict:
    action: dict[str, Any] = {
        "path": path,
        "partitionValues": dict(partition or {}),
        "size": size,
        "modificationTime": 0,
        "dataChange": True,
    }
    if stats_json is not None:
        action["stats"] = stats_json
    if dv_cardinality is not None:
        action["deletionVector"] = deletion_vector(dv_cardinality)
    return {"add": action}


def deletion_vector(cardinality: int, inline: str = "ab^-aqEH.-t@S}K{vb[*k^") -> dict[str, Any]:
    return {"storageType": "u", "pathOrInlineDv": inline, "offset": 1, "sizeInBytes": 36, "cardinality": cardinality}


def remove(
    path: str,
    size: int | None,
    deleted_at: int,
    partition: Mapping[str, str | None] | None = None,
    dv: dict[str, Any] | None = None,
) -> dict:
    action: dict[str, Any] = {"path": path, "deletionTimestamp": deleted_at, "dataChange": True}
    if dv is not None:
        action["deletionVector"] = dv
    if size is not None:
        action["size"] = size
    if partition is not None:
        action["partitionValues"] = dict(partition)
        action["extendedFileMetadata"] = True
    return {"remove": action}


def info(operation: str, at: int, **parameters: Any) -> dict:
    encoded = {k: v if isinstance(v, str) else json.dumps(v) for k, v in parameters.items()}
    return {"commitInfo": {"timestamp": at, "operation": operation, "operationParameters": encoded}}


def commit(table: Path, version: int, actions: Sequence[Mapping[str, Any]], at: int) -> Path:
    """Write commit ``version`` with a file time of ``at`` (ms)."""
    log = table / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    path = log / f"{version:020d}.json"
    path.write_text("".join(json.dumps(a) + "\n" for a in actions))
    os.utime(path, ns=(at * 1_000_000, at * 1_000_000))
    return path
