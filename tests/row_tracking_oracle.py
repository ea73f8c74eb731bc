"""Row-tracking tables built by hand and an oracle for row identities that does not use the engine.

The oracle reads the log's JSON commits and the Parquet files with pyarrow, decodes deletion vectors with pyroaring,
and computes each live row's (row id, row commit version) as the protocol defines them: the materialised value when
the file has one, else ``baseRowId + physical row index`` (deleted rows count) and ``defaultRowCommitVersion``.
"""

from __future__ import annotations

import json
import struct
import time
import uuid
import zlib
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pyroaring

Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
DV_MAGIC = 1681511377
ROW_ID_PROP = "delta.rowTracking.materializedRowIdColumnName"
VERSION_PROP = "delta.rowTracking.materializedRowCommitVersionColumnName"
ROW_ID_COL = "_row-id-col-0b0e6a4c-7f1d-4a8e-9c3e-2f5d6b7a8c91"
VERSION_COL = "_row-commit-version-col-5e4d3c2b-1a09-4f8e-b7d6-c5b4a3928170"


def z85_encode(data: bytes) -> str:
    out = []
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i : i + 4], "big")
        out.append("".join(Z85[(value // 85**k) % 85] for k in range(4, -1, -1)))
    return "".join(out)


def z85_decode(text: str) -> bytes:
    out = b""
    for i in range(0, len(text), 5):
        value = 0
        for ch in text[i : i + 5]:
            value = value * 85 + Z85.index(ch)
        out += value.to_bytes(4, "big")
    return out


# -- reading -------------------------------------------------------------------------------------------------------


def log_actions(table: Path) -> list[dict[str, Any]]:
    """Every action of every JSON commit, in version order."""
    out = []
    for commit in sorted((table / "_delta_log").glob("*.json")):
        if commit.stem.isdigit():
            out.extend(json.loads(line) for line in commit.read_text().splitlines() if line.strip())
    return out


def _dv_id(action: dict[str, Any]) -> str:
    dv = action.get("deletionVector") or {}
    return f"{dv.get('storageType', '')}{dv.get('pathOrInlineDv', '')}@{dv.get('offset')}"


def replay(table: Path) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """(metaData, protocol, live adds, domains) after the last JSON commit (the tables here have no checkpoint)."""
    live: dict[tuple[str, str], dict[str, Any]] = {}
    metadata: dict[str, Any] = {}
    protocol: dict[str, Any] = {}
    domains: dict[str, Any] = {}
    for action in log_actions(table):
        if "add" in action:
            live[(unquote(action["add"]["path"]), _dv_id(action["add"]))] = action["add"]
        elif "remove" in action:
            live.pop((unquote(action["remove"]["path"]), _dv_id(action["remove"])), None)
        elif "metaData" in action:
            metadata = action["metaData"]
        elif "protocol" in action:
            protocol = action["protocol"]
        elif "domainMetadata" in action:
            domains[action["domainMetadata"]["domain"]] = action["domainMetadata"]
    return metadata, protocol, list(live.values()), domains


def deleted_rows(table: Path, dv: dict[str, Any] | None) -> set[int]:
    """The row indexes a deletion vector deletes, decoded with pyroaring."""
    if not dv:
        return set()
    if dv["storageType"] == "i":
        blob = z85_decode(dv["pathOrInlineDv"])[: dv["sizeInBytes"]]
    else:
        assert dv["storageType"] == "u", dv
        text = dv["pathOrInlineDv"]
        prefix, encoded = text[:-20], text[-20:]
        name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded))}.bin"
        raw = (table / prefix / name if prefix else table / name).read_bytes()
        start = dv.get("offset") or 0
        (size,) = struct.unpack(">I", raw[start : start + 4])
        blob = raw[start + 4 : start + 4 + size]
    assert struct.unpack("<I", blob[:4])[0] == DV_MAGIC
    rows = pyroaring.BitMap64.deserialize(blob[4:])
    assert len(rows) == dv["cardinality"]
    return set(rows)


def row_identities(table: Path) -> list[tuple[int, int, str]]:
    """(row id, row commit version, the row's values as JSON) of every live row, sorted."""
    metadata, _protocol, adds, _domains = replay(table)
    config = metadata.get("configuration") or {}
    id_col, version_col = config.get(ROW_ID_PROP), config.get(VERSION_PROP)
    fields = json.loads(metadata["schemaString"])["fields"]
    logical = {f["metadata"].get("delta.columnMapping.physicalName", f["name"]): f["name"] for f in fields}
    out = []
    for add in adds:
        data = pq.read_table(table / unquote(add["path"]))
        n = data.num_rows
        stored_ids = data.column(id_col).to_pylist() if id_col in data.column_names else [None] * n
        stored_versions = data.column(version_col).to_pylist() if version_col in data.column_names else [None] * n
        values = {logical[c]: data.column(c).to_pylist() for c in data.column_names if c in logical}
        gone = deleted_rows(table, add.get("deletionVector"))
        for i in range(n):
            if i in gone:
                continue
            row_id = stored_ids[i] if stored_ids[i] is not None else add["baseRowId"] + i
            version = stored_versions[i] if stored_versions[i] is not None else add["defaultRowCommitVersion"]
            row = {k: v[i] for k, v in values.items()}
            row.update({logical.get(k, k): v for k, v in add["partitionValues"].items()})
            out.append((row_id, version, json.dumps(row, sort_keys=True, default=str)))
    return sorted(out)


def high_water_mark(table: Path) -> int | None:
    domain = replay(table)[3].get("delta.rowTracking")
    return None if domain is None else json.loads(domain["configuration"])["rowIdHighWaterMark"]


def commit_lines(table: Path, version: int) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (table / "_delta_log" / f"{version:020d}.json").read_text().splitlines()]


# -- building --------------------------------------------------------------------------------------------------------


def _stats(ids: list[int], values: list[str], names: tuple[str, str]) -> str:
    a, b = names
    return json.dumps(
        {
            "numRecords": len(ids),
            "minValues": {a: min(ids), b: min(values)},
            "maxValues": {a: max(ids), b: max(values)},
            "nullCount": {a: 0, b: 0},
            "tightBounds": True,
        }
    )


def write_file(
    table: Path,
    name: str,
    ids: list[int],
    *,
    names: tuple[str, str],
    base_row_id: int | None,
    version: int | None,
    row_ids: list[int | None] | None = None,
    versions: list[int | None] | None = None,
    stats: bool = True,
    field_ids: bool = False,
) -> dict[str, Any]:
    """A data file with columns (id long, value string) under ``names`` (physical), optionally the materialised
    columns; its add action."""
    values = [f"v{i}" for i in ids]
    fields = [pa.field(names[0], pa.int64()), pa.field(names[1], pa.string())]
    if field_ids:  # column mapping id mode: Spark writes the columns' ids as Parquet field ids
        fields = [f.with_metadata({b"PARQUET:field_id": str(k + 1).encode()}) for k, f in enumerate(fields)]
    arrays = [pa.array(ids, pa.int64()), pa.array(values, pa.string())]
    if row_ids is not None:
        fields.append(pa.field(ROW_ID_COL, pa.int64()))
        arrays.append(pa.array(row_ids, pa.int64()))
    if versions is not None:
        fields.append(pa.field(VERSION_COL, pa.int64()))
        arrays.append(pa.array(versions, pa.int64()))
    pq.write_table(pa.Table.from_arrays(arrays, schema=pa.schema(fields)), table / name)
    add: dict[str, Any] = {
        "path": name,
        "partitionValues": {},
        "size": (table / name).stat().st_size,
        "modificationTime": int(time.time() * 1000),
        "dataChange": True,
    }
    if stats:
        add["stats"] = _stats(ids, values, names)
    if base_row_id is not None:
        add["baseRowId"] = base_row_id
    if version is not None:
        add["defaultRowCommitVersion"] = version
    return add


def write_dv(table: Path, deleted: list[int]) -> dict[str, Any]:
    """A deletion vector file in the protocol's layout (pyroaring's portable 64-bit bitmap); its descriptor."""
    bitmap = pyroaring.BitMap64(deleted)
    blob = struct.pack("<I", DV_MAGIC) + bitmap.serialize()
    dv_uuid = uuid.uuid4()
    body = b"\x01" + struct.pack(">I", len(blob)) + blob + struct.pack(">I", zlib.crc32(blob))
    (table / f"deletion_vector_{dv_uuid}.bin").write_bytes(body)
    return {
        "storageType": "u",
        "pathOrInlineDv": z85_encode(dv_uuid.bytes),
        "offset": 1,
        "sizeInBytes": len(blob),
        "cardinality": len(deleted),
    }


def write_commit(table: Path, version: int, actions: list[dict[str, Any]]) -> None:
    log = table / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    info = {"commitInfo": {"timestamp": 1_700_000_000_000 + version, "operation": "WRITE"}}
    text = "".join(json.dumps(a) + "\n" for a in [info, *actions])
    (log / f"{version:020d}.json").write_text(text)


def mark_action(mark: int) -> dict[str, Any]:
    config = json.dumps({"rowIdHighWaterMark": mark})
    return {"domainMetadata": {"domain": "delta.rowTracking", "configuration": config, "removed": False}}


def remove_of(add: dict[str, Any]) -> dict[str, Any]:
    keys = ("path", "partitionValues", "size", "deletionVector", "baseRowId", "defaultRowCommitVersion")
    return {"remove": {**{k: add[k] for k in keys if k in add}, "deletionTimestamp": 1, "dataChange": True}}


def build_table(
    table: Path,
    *,
    enabled: bool = True,
    suspended: bool = False,
    column_mapping: str = "none",
    extra_config: dict[str, str] | None = None,
) -> Path:
    """A row-tracking table with the history Spark gives it:

    - v0: A (ids 0-9) and B (ids 10-19), baseRowIds 0 and 10, mark 19;
    - v1, an UPDATE: B rewritten as C with the materialised columns partly filled (ids 10-17 keep row ids 10-17; two
      new rows have none; three updated rows have no materialised version), C gets baseRowId 20 and a deletion vector
      on physical row 1; A gets a deletion vector on rows 2 and 5; mark 29;
    - v2: D (ids 100-104) appended, baseRowId 30, mark 34.
    """
    table.mkdir(parents=True)
    mapped = column_mapping != "none"
    ids_mode = column_mapping == "id"
    names = ("col-7a1", "col-7b2") if mapped else ("id", "value")
    fields = []
    for k, (logical, kind) in enumerate((("id", "long"), ("value", "string"))):
        meta = {"delta.columnMapping.id": k + 1, "delta.columnMapping.physicalName": names[k]} if mapped else {}
        fields.append({"name": logical, "type": kind, "nullable": True, "metadata": meta})
    config = {
        "delta.enableDeletionVectors": "true",
        "delta.enableRowTracking": "true" if enabled else "false",
        ROW_ID_PROP: ROW_ID_COL,
        VERSION_PROP: VERSION_COL,
    }
    if suspended:
        config["delta.rowTrackingSuspended"] = "true"
    if mapped:
        config.update({"delta.columnMapping.mode": column_mapping, "delta.columnMapping.maxColumnId": "2"})
    config.update(extra_config or {})
    readers = ["deletionVectors", *(["columnMapping"] if mapped else [])]
    writers = ["deletionVectors", "domainMetadata", "rowTracking", *(["columnMapping"] if mapped else [])]
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": readers, "writerFeatures": writers}
    metadata = {
        "id": "5f1d2c3b-0000-4000-8000-00000000beef",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps({"type": "struct", "fields": fields}),
        "partitionColumns": [],
        "configuration": config,
        "createdTime": 1_700_000_000_000,
    }
    a = write_file(table, "a.parquet", list(range(10)), names=names, base_row_id=0, version=0, field_ids=ids_mode)
    b = write_file(table, "b.parquet", list(range(10, 20)), names=names, base_row_id=10, version=0, field_ids=ids_mode)
    write_commit(table, 0, [{"protocol": protocol}, {"metaData": metadata}, {"add": a}, {"add": b}, mark_action(19)])
    c = write_file(
        table,
        "c.parquet",
        [*range(10, 18), 50, 51],
        names=names,
        base_row_id=20,
        version=1,
        row_ids=[*range(10, 18), None, None],
        versions=[0, 0, 0, None, None, None, 0, 0, None, None],
        field_ids=ids_mode,
    )
    c["deletionVector"] = write_dv(table, [1])
    a_dv = {**a, "deletionVector": write_dv(table, [2, 5]), "dataChange": True}
    write_commit(table, 1, [remove_of(b), remove_of(a), {"add": a_dv}, {"add": c}, mark_action(29)])
    d = write_file(
        table, "d.parquet", list(range(100, 105)), names=names, base_row_id=30, version=2, field_ids=ids_mode
    )
    write_commit(table, 2, [{"add": d}, mark_action(34)])
    return table


# the oracle's answer for `build_table`, written out by hand from the history above
BUILT_IDENTITIES = sorted(
    [(i, 0, i) for i in range(10) if i not in (2, 5)]
    + [(10, 0, 10)]
    + [(12, 0, 12), (13, 1, 13), (14, 1, 14), (15, 1, 15), (16, 0, 16), (17, 0, 17), (28, 1, 50), (29, 1, 51)]
    + [(30 + k, 2, 100 + k) for k in range(5)]
)


def identities_by_id(identities: list[tuple[int, int, str]]) -> list[tuple[int, int, int]]:
    """(row id, version, the row's `id` value) from `row_identities` (tables built by `build_table`)."""
    return sorted((rid, version, json.loads(row)["id"]) for rid, version, row in identities)
