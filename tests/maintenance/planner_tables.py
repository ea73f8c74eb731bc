"""Hand-written `_delta_log`s and hand-built `TableHealth` objects for the planner's tests.

The logs reference fictitious data files (the planner reads none), so every size, row count and timestamp is chosen
here and every expected figure in the tests is computed by hand from them.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import deltalake
import pyarrow as pa

from airflow_provider_deltalite.maintenance.health.metrics import (
    ColumnClustering,
    LastRuns,
    LogHealth,
    PartitionHealth,
    TableHealth,
    Tombstones,
)

NOW = 1_780_000_000_000  # 2026-05-28T20:26:40Z, the "now" of every plan
HOUR = 3_600_000
KIB = 1024
MIB = 1024 * KIB

DATE_SCHEMA = [
    {"name": "id", "type": "long", "nullable": True, "metadata": {}},
    {"name": "name", "type": "string", "nullable": True, "metadata": {}},
    {"name": "day", "type": "date", "nullable": True, "metadata": {}},
]


def protocol(*, dvs: bool = False, clustering: bool = False) -> dict[str, Any]:
    if clustering:
        return {
            "protocol": {
                "minReaderVersion": 1,
                "minWriterVersion": 7,
                "writerFeatures": ["appendOnly", "invariants", "domainMetadata", "clustering"],
            }
        }
    if dvs:
        return {
            "protocol": {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": ["deletionVectors"],
                "writerFeatures": ["deletionVectors"],
            }
        }
    return {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}


def metadata(
    fields: Sequence[Mapping[str, Any]], partition_columns: Sequence[str] = (), configuration: Mapping[str, str] = {}
) -> dict[str, Any]:
    return {
        "metaData": {
            "id": "7b1f3a2c-0000-4000-8000-000000000001",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps({"type": "struct", "fields": list(fields)}),
            "partitionColumns": list(partition_columns),
            "configuration": dict(configuration),
            "createdTime": NOW - 1000 * HOUR,
        }
    }


def add(
    path: str,
    size: int,
    *,
    partition: Mapping[str, str | None] | None = None,
    records: int | None = 100,
    dv_rows: int | None = None,
    tags: Mapping[str, str] | None = None,
    provider: str | None = None,
) -> dict[str, Any]:
    action: dict[str, Any] = {
        "path": path,
        "partitionValues": dict(partition or {}),
        "size": size,
        "modificationTime": NOW - 500 * HOUR,
        "dataChange": True,
    }
    if records is not None:
        action["stats"] = json.dumps({"numRecords": records, "minValues": {"id": 0}, "maxValues": {"id": records}})
    if dv_rows is not None:
        action["deletionVector"] = {
            "storageType": "u",
            "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
            "offset": 1,
            "sizeInBytes": 36,
            "cardinality": dv_rows,
        }
    if tags is not None:
        action["tags"] = dict(tags)
    if provider is not None:
        action["clusteringProvider"] = provider
    return {"add": action}


def remove(path: str, size: int, deleted_at: int, partition: Mapping[str, str | None] | None = None) -> dict[str, Any]:
    return {
        "remove": {
            "path": path,
            "deletionTimestamp": deleted_at,
            "dataChange": True,
            "extendedFileMetadata": True,
            "partitionValues": dict(partition or {}),
            "size": size,
        }
    }


def commit_info(timestamp: int, operation: str = "WRITE", parameters: Mapping[str, Any] | None = None) -> dict:
    return {
        "commitInfo": {"timestamp": timestamp, "operation": operation, "operationParameters": dict(parameters or {})}
    }


def write_log(root: Path, commits: Sequence[Sequence[Mapping[str, Any]]]) -> Path:
    """Commit ``commits`` as versions 0, 1, ... of a table at ``root``."""
    log = root / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    for version, actions in enumerate(commits):
        (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    return root


def partition_health(values: Mapping[str, str | None], clustering: Sequence[ColumnClustering] = ()) -> PartitionHealth:
    return PartitionHealth(
        partition_values=dict(values),
        files=0,
        bytes=0,
        rows=0,
        small_files=0,
        small_bytes=0,
        deleted_rows=0,
        files_with_deletion_vectors=0,
        tombstone_files=0,
        tombstone_bytes=0,
        clustering=tuple(clustering),
    )


def make_health(
    uri: str,
    version: int,
    *,
    partitions: Sequence[PartitionHealth] = (),
    clustering: Sequence[ColumnClustering] = (),
    reclaimable: tuple[int, int] = (0, 0),
    retention_hours: float = 168.0,
    commits_since_checkpoint: int = 1,
    last_checkpoint_version: int | None = None,
    checkpoint_interval: int = 10,
    optimize_timestamp: int | None = None,
    vacuum_timestamp: int | None = None,
    zorder_columns: tuple[str, ...] = (),
) -> TableHealth:
    """A TableHealth whose planner-relevant fields are given and the rest zero."""

    def hours(ts: int | None) -> float | None:
        return None if ts is None else (NOW - ts) / HOUR

    return TableHealth(
        table_uri=uri,
        version=version,
        computed_at=NOW,
        partition_columns=(),
        min_file_size=1 << 30,
        files=0,
        bytes=0,
        rows=0,
        files_without_stats=0,
        size_histogram=(),
        small_files=0,
        small_bytes=0,
        small_file_share=0.0,
        deleted_rows=0,
        deleted_row_share=0.0,
        files_with_deletion_vectors=0,
        clustering_columns=tuple(c.column for c in clustering),
        clustering_source=None,
        clustering=tuple(clustering),
        tombstones=Tombstones(
            retention_hours=retention_hours,
            files=reclaimable[0],
            bytes=reclaimable[1],
            files_without_size=0,
            reclaimable_files=reclaimable[0],
            reclaimable_bytes=reclaimable[1],
            next_reclaimable_at=None,
            all_reclaimable_at=None,
            reclaimable_by_day=(),
        ),
        log=LogHealth(
            version=version,
            last_checkpoint_version=last_checkpoint_version,
            commits_since_checkpoint=commits_since_checkpoint,
            checkpoint_interval=checkpoint_interval,
            log_files=version + 1,
            log_bytes=0,
            log_retention_hours=720.0,
            oldest_version=0,
            versions_in_log_retention=version + 1,
            versions_in_file_retention=version + 1,
        ),
        last_runs=LastRuns(
            optimize_version=None if optimize_timestamp is None else version,
            optimize_timestamp=optimize_timestamp,
            hours_since_optimize=hours(optimize_timestamp),
            vacuum_version=None if vacuum_timestamp is None else version,
            vacuum_timestamp=vacuum_timestamp,
            hours_since_vacuum=hours(vacuum_timestamp),
            zorder_columns=zorder_columns,
        ),
        partitions=tuple(partitions),
    )


def delta_rs_table(path: Path) -> tuple[Path, int]:
    """Six appends to p=a, two to p=b (delta-rs), then a delete in p=b that tombstones one file, made ten days old
    (its remove's deletionTimestamp and its file's modification time): past the default 7-day retention. Returns the
    path and the tombstoned file's size."""
    for i, part in enumerate(["a"] * 6 + ["b"] * 2):
        batch = pa.table(
            {
                "id": pa.array(range(i * 10, i * 10 + 10), pa.int64()),
                "p": pa.array([part] * 10),
                "v": pa.array([f"row {j}" for j in range(i * 10, i * 10 + 10)]),
            }
        )
        deltalake.write_deltalake(str(path), batch, mode="append", partition_by=["p"])
    deltalake.DeltaTable(str(path)).delete("id = 61")
    ten_days_ago = int(time.time() * 1000) - 240 * HOUR
    commit = path / "_delta_log" / f"{8:020d}.json"
    actions = [json.loads(line) for line in commit.read_text().splitlines()]
    (removed,) = [a["remove"] for a in actions if "remove" in a]
    removed["deletionTimestamp"] = ten_days_ago
    commit.write_text("".join(json.dumps(a) + "\n" for a in actions))
    file = path / unquote(removed["path"])
    os.utime(file, (ten_days_ago / 1000, ten_days_ago / 1000))
    return path, file.stat().st_size
