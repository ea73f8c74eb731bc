"""Liquid-clustered tables written by hand, the way Delta lays them out (no Delta jar here; delta-rs cannot write them).

Each commit is written as JSON by this module; data files by pyarrow; the per-file statistics are computed here from
the rows (numRecords, min, max, null count per column), independently of deltalite's stats collector.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

_TYPES = {pa.int64(): "long", pa.int32(): "integer", pa.string(): "string", pa.float64(): "double"}


def _delta_type(t: pa.DataType) -> Any:
    if pa.types.is_struct(t):
        return {"type": "struct", "fields": [_field(t.field(i)) for i in range(t.num_fields)]}
    return _TYPES[t]


def _field(f: pa.Field, physical: Mapping[str, str] | None = None, ids: Mapping[str, int] | None = None) -> dict:
    metadata: dict[str, Any] = {}
    if physical is not None and ids is not None:
        metadata = {"delta.columnMapping.id": ids[f.name], "delta.columnMapping.physicalName": physical[f.name]}
    return {"name": f.name, "type": _delta_type(f.type), "nullable": True, "metadata": metadata}


def _log(path: Path) -> Path:
    log = path / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    return log


def next_version(path: Path) -> int:
    return len(list(_log(path).glob("*.json")))


def commit(path: Path, actions: Sequence[Mapping[str, Any]]) -> int:
    version = next_version(path)
    lines = [json.dumps(a) for a in actions]
    (_log(path) / f"{version:020d}.json").write_text("\n".join(lines) + "\n")
    return version


def create(
    path: Path,
    schema: pa.Schema,
    clustering: Any,
    *,
    domain: str = "delta.clustering",
    feature: str = "clustering",
    configuration: Mapping[str, str] | None = None,
    physical: Mapping[str, str] | None = None,
) -> None:
    """Version 0: protocol with ``feature`` + domainMetadata, metaData, and the clustering domain.

    ``clustering`` is the domain's ``clusteringColumns`` value as written (any shape). ``physical`` maps top-level
    column names to physical names and turns on column mapping (mode name).
    """
    config = dict(configuration or {})
    features = ["appendOnly", "invariants", "domainMetadata", feature]
    protocol: dict[str, Any] = {"minReaderVersion": 1, "minWriterVersion": 7}
    ids = None
    if physical is not None:
        features.append("columnMapping")
        protocol = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["columnMapping"]}
        ids = {name: i + 1 for i, name in enumerate(schema.names)}
        config["delta.columnMapping.mode"] = "name"
        config["delta.columnMapping.maxColumnId"] = str(len(schema.names))
    fields = [_field(f, physical, ids) for f in schema]
    commit(
        path,
        [
            {"commitInfo": {"timestamp": 1, "operation": "CREATE TABLE", "operationParameters": {}}},
            {"protocol": {**protocol, "writerFeatures": features}},
            {
                "metaData": {
                    "id": str(uuid.uuid4()),
                    "format": {"provider": "parquet", "options": {}},
                    "schemaString": json.dumps({"type": "struct", "fields": fields}),
                    "partitionColumns": [],
                    "configuration": config,
                    "createdTime": 1,
                }
            },
            {
                "domainMetadata": {
                    "domain": domain,
                    "configuration": json.dumps({"clusteringColumns": clustering}),
                    "removed": False,
                }
            },
        ],
    )


def _stats(rows: pa.Table) -> str:
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    for name in rows.column_names:
        col = rows.column(name)
        if pa.types.is_struct(col.type):
            continue
        nulls[name] = col.null_count
        if col.null_count < len(col):
            mm = pc.min_max(col)
            mins[name], maxs[name] = mm["min"].as_py(), mm["max"].as_py()
    return json.dumps({"numRecords": rows.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls})


def append(
    path: Path,
    rows: pa.Table,
    *,
    tags: Mapping[str, str] | None = None,
    provider: str | None = None,
    physical: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Write ``rows`` as one new file and commit its add (a blind append); the add action."""
    name = f"part-{uuid.uuid4()}.snappy.parquet"
    stored = rows.rename_columns([physical[n] for n in rows.column_names]) if physical else rows
    pq.write_table(stored, path / name)
    add: dict[str, Any] = {
        "path": name,
        "partitionValues": {},
        "size": (path / name).stat().st_size,
        "modificationTime": 1,
        "dataChange": True,
        "stats": _stats(stored),
    }
    if tags:
        add["tags"] = dict(tags)
    if provider:
        add["clusteringProvider"] = provider
    commit(path, [{"commitInfo": {"timestamp": 2, "operation": "WRITE", "operationParameters": {}}}, {"add": add}])
    return add


def points(seed: int, rows: int) -> pa.Table:
    """Rows of (x, y, payload): x and y uniform in [0, 10**6)."""
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "x": pa.array(rng.integers(0, 10**6, rows), pa.int64()),
            "y": pa.array(rng.integers(0, 10**6, rows), pa.int64()),
            "payload": pa.array([f"p{v}" for v in rng.integers(0, 1000, rows)]),
        }
    )


SCHEMA = pa.schema([("x", pa.int64()), ("y", pa.int64()), ("payload", pa.string())])


def clustered_points(path: Path, files: int, rows: int = 2000, *, seed: int = 1, **create_args: Any) -> Path:
    """A table clustered on (x, y) with ``files`` unclustered appends."""
    create(path, SCHEMA, create_args.pop("clustering", [["x"], ["y"]]), **create_args)
    for i in range(files):
        append(path, points(seed * 1000 + i, rows))
    return path
