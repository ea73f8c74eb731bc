"""Writing checkpoints: classic single-file checkpoints, V2 checkpoints with sidecars, and `_last_checkpoint`.

The `_last_checkpoint` file itself (reading, writing, checksum) is in `last_checkpoint`.

A checkpoint holds the reconciled state of one version as Parquet, one action per row, in the column layout the
reference implementation writes (`txn`, `add`, `remove`, `metaData`, `protocol`, `domainMetadata`, plus
`checkpointMetadata` and `sidecar` for V2-spec checkpoints). The rules followed here are the reference's
(`Checkpoints.scala`, `InMemoryLogReplay.scala`, `LastCheckpointInfo.scala`):

- adds and removes are written with ``dataChange=false``; removes carry no stats and no tags;
- tombstones are kept only while ``deletionTimestamp > now - delta.deletedFileRetentionDuration`` (a missing
  timestamp counts as 0, so it is dropped);
- when ``delta.setTransactionRetentionDuration`` is set, txns are kept only while ``lastUpdated`` is newer than the
  retention (a txn without ``lastUpdated`` is dropped);
- multi-part checkpoints are never written (deprecated, and forbidden once v2Checkpoint is enabled).
"""

from __future__ import annotations

import io
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_deltalite.engine import actions as A
from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.arrow_util import (
    bool_array,
    contiguous,
    int64_array,
    struct_array,
    validity_bitmap,
)
from airflow_provider_deltalite.engine.checkpoint_file import write_or_reuse
from airflow_provider_deltalite.engine.conform import delta_schema_to_arrow
from airflow_provider_deltalite.engine.crash_points import crash_point
from airflow_provider_deltalite.engine.errors import TransactionError
from airflow_provider_deltalite.engine.last_checkpoint import read_last_checkpoint_hint, write_last_checkpoint
from airflow_provider_deltalite.engine.log_path import LOG_DIR, SIDECAR_DIR, version_prefix
from airflow_provider_deltalite.engine.log_segment import complete_checkpoints, list_log
from airflow_provider_deltalite.engine.properties import (
    CHECKPOINT_WRITE_STATS_AS_JSON,
    CHECKPOINT_WRITE_STATS_AS_STRUCT,
    DELETED_FILE_RETENTION_DURATION,
    SET_TRANSACTION_RETENTION_DURATION,
    checkpoint_interval,
    checkpoint_policy,
)
from airflow_provider_deltalite.engine.snapshot import Snapshot
from airflow_provider_deltalite.engine.stats_parse import parse_stats
from airflow_provider_deltalite.engine.storage import Storage

__all__ = [
    "SIDECAR_PART_SIZE",
    "CheckpointInfo",
    "write_checkpoint",
]

V2_CHECKPOINT_FEATURE = "v2Checkpoint"

# The reference's `checkpoint.partSize` default for V2 sidecars: at most this many file actions per sidecar file.
SIDECAR_PART_SIZE = 50_000


@dataclass(frozen=True)
class CheckpointInfo:
    """What `write_checkpoint` wrote.

    Attributes:
        version: the table version the checkpoint describes.
        kind: ``"classic"`` (one `<v>.checkpoint.parquet`) or ``"v2"`` (a UUID-named top-level file plus sidecars).
        paths: the files written, relative to the table root; the checkpoint file first, then its sidecars.
        size: the number of actions (rows) in the checkpoint, sidecars included.
        size_in_bytes: the bytes of all checkpoint files, sidecars included.
        num_of_add_files: the number of `add` actions.
        last_checkpoint_updated: whether `_delta_log/_last_checkpoint` now points at this checkpoint (it is left
            alone when it already points at a newer one).
    """

    version: int
    kind: str
    paths: tuple[str, ...]
    size: int
    size_in_bytes: int
    num_of_add_files: int
    last_checkpoint_updated: bool

    def to_dict(self) -> dict[str, Any]:
        """The plain dict shown by the CLI and returned over XCom."""
        return {
            "version": self.version,
            "kind": self.kind,
            "paths": list(self.paths),
            "size": self.size,
            "sizeInBytes": self.size_in_bytes,
            "numOfAddFiles": self.num_of_add_files,
            "lastCheckpointUpdated": self.last_checkpoint_updated,
        }


@dataclass(frozen=True)
class _Options:
    """Everything the properties decide, resolved (and validated) before anything is written."""

    json_stats: bool
    struct_stats: bool
    v2_spec: bool  # the protocol supports v2Checkpoint: write checkpointMetadata (and sidecar) columns
    use_sidecars: bool  # policy v2: UUID-named top-level file with sidecars
    tombstone_cutoff: int
    txn_cutoff: int | None


def _options(snapshot: Snapshot, now_ms: int) -> _Options:
    props = snapshot.properties
    checkpoint_interval(props)  # a table whose checkpoint settings do not parse gets no checkpoint at all
    policy = checkpoint_policy(props, snapshot.table_uri)
    json_stats = props.boolean(CHECKPOINT_WRITE_STATS_AS_JSON)
    # Only when set explicitly: PROTOCOL.md says the default is false (the reference's code says true).
    struct_stats = CHECKPOINT_WRITE_STATS_AS_STRUCT in props.explicit and props.boolean(
        CHECKPOINT_WRITE_STATS_AS_STRUCT
    )
    tombstone_cutoff = now_ms - props.interval_ms(DELETED_FILE_RETENTION_DURATION)
    txn_cutoff = (
        now_ms - props.interval_ms(SET_TRANSACTION_RETENTION_DURATION)
        if SET_TRANSACTION_RETENTION_DURATION in props
        else None
    )
    v2_spec = snapshot.protocol.has_feature(V2_CHECKPOINT_FEATURE)
    return _Options(json_stats, struct_stats, v2_spec, v2_spec and policy == "v2", tombstone_cutoff, txn_cutoff)


# -- building the action rows ------------------------------------------------------------------------------------


def _partition_map(values: pa.Array, always: Sequence[str]) -> pa.MapArray:
    """partitionValues as the log's map<string,string> from deltalite's struct of physical columns.

    The columns in ``always`` (the current partition columns) are written for every non-null row, with a null value
    where the log had null; other struct fields (partition columns of an older metaData) only where they hold a
    value. A null struct (partitionValues absent in the log) stays a null map.
    """
    values = contiguous(values)
    n = len(values)
    names = list(values.type.names) if pa.types.is_struct(values.type) else []
    row_valid = pc.is_valid(values).to_numpy(zero_copy_only=False)
    if not names or n == 0:
        empty = pa.array([], pa.string())
        return _map_array(np.zeros(n + 1, dtype=np.int32), empty, empty, row_valid)
    children = [pc.cast(pc.struct_field(values, [j]), pa.string()) for j in range(len(names))]
    include = np.empty((n, len(names)), dtype=bool)
    for j, (name, child) in enumerate(zip(names, children, strict=True)):
        include[:, j] = True if name in always else pc.is_valid(child).to_numpy(zero_copy_only=False)
    include &= row_valid[:, None]
    rows, cols = np.nonzero(include)  # row-major: each row's entries in struct-field order
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(include.sum(axis=1), out=offsets[1:])
    # Arrays over the NumPy buffers: `pa.array` of a NumPy array imports numpy.ma, in the serial tail of a commit
    keys = pc.take(pa.array(names, pa.string()), int64_array(cols))
    items = pc.take(pa.concat_arrays(children), int64_array(cols.astype(np.int64) * n + rows))
    return _map_array(offsets, keys, items, row_valid)


def _map_array(offsets: np.ndarray, keys: pa.Array, items: pa.Array, valid: np.ndarray) -> pa.MapArray:
    """A string map array from its parts, null where ``valid`` is false (built from buffers: `MapArray.from_arrays`
    inverts a mask through `pyarrow.compute`, whose 55-70 ms import is more than the rest of a small commit)."""
    entries = pa.StructArray.from_arrays([keys, items], fields=[A.STRING_MAP.key_field, A.STRING_MAP.item_field])
    validity = validity_bitmap(bool_array(valid))
    data = pa.py_buffer(np.ascontiguousarray(offsets, dtype=np.int32))
    return pa.Array.from_buffers(A.STRING_MAP, len(valid), [validity, data], children=[entries])


def _prune_empty_structs(array: pa.Array) -> pa.Array | None:
    """Drop struct fields without children, recursively (Parquet cannot store an empty group); None if nothing is
    left."""
    if not pa.types.is_struct(array.type):
        return array
    kept_arrays, kept_fields = [], []
    for field, child in zip(array.type, array.flatten(), strict=True):
        pruned = _prune_empty_structs(child)
        if pruned is not None:
            kept_arrays.append(pruned)
            kept_fields.append(pa.field(field.name, pruned.type, field.nullable))
    if not kept_fields:
        return None
    return struct_array(kept_arrays, kept_fields, pc.is_valid(array))


def _stats_parsed(snapshot: Snapshot, stats: pa.Array) -> pa.Array | None:
    """`add.stats_parsed`: the stats JSON typed by the table schema, keyed by physical column names."""
    schema = delta_schema_to_arrow(
        snapshot.schema, physical=True, mode=snapshot.column_mapping_mode, exclude=snapshot.partition_columns
    )
    parsed = parse_stats(stats, schema, table_uri=snapshot.table_uri)
    # parse_stats reads an absent tightBounds as true (that is what it means); the checkpoint keeps it absent.
    written = pc.fill_null(pc.match_substring(stats, '"tightBounds"'), False)
    tight = pc.if_else(written, parsed.field("tightBounds"), pa.scalar(None, pa.bool_()))
    order = ("numRecords", "minValues", "maxValues", "nullCount")
    arrays = [parsed.field(name) for name in order] + [tight]
    fields = [parsed.type.field(name) for name in order] + [pa.field("tightBounds", pa.bool_())]
    return _prune_empty_structs(struct_array(arrays, fields, pc.is_valid(parsed)))


def _partition_values_parsed(snapshot: Snapshot) -> pa.Array | None:
    """`add.partitionValues_parsed`: typed partition values keyed by physical column names."""
    if not snapshot.partition_columns:
        return None
    typed = snapshot.partition_values
    arrays = [contiguous(typed.column(name)) for name in snapshot.partition_columns]
    return pa.StructArray.from_arrays(arrays, names=list(snapshot.partition_physical_names))


def _add_column(snapshot: Snapshot, options: _Options) -> pa.StructArray:
    raw = snapshot.raw_files
    n = raw.num_rows
    stats = pc.cast(contiguous(raw.column("stats")), pa.string())
    columns: list[tuple[str, pa.Array]] = [
        ("path", pc.cast(contiguous(raw.column("path")), pa.string())),
        ("partitionValues", _partition_map(raw.column("partitionValues"), snapshot.partition_physical_names)),
        ("size", contiguous(raw.column("size"))),
        ("modificationTime", contiguous(raw.column("modificationTime"))),
        # the reference writes dataChange=false for every action of a checkpoint (InMemoryLogReplay)
        ("dataChange", pa.repeat(pa.scalar(False), n) if n else pa.array([], pa.bool_())),
    ]
    if options.json_stats:
        columns.append(("stats", stats))
    columns += [
        ("tags", pc.cast(contiguous(raw.column("tags")), A.STRING_MAP)),
        ("deletionVector", pc.cast(contiguous(raw.column("deletionVector")), A.DELETION_VECTOR)),
        ("baseRowId", contiguous(raw.column("baseRowId"))),
        ("defaultRowCommitVersion", contiguous(raw.column("defaultRowCommitVersion"))),
        ("clusteringProvider", pc.cast(contiguous(raw.column("clusteringProvider")), pa.string())),
    ]
    if options.struct_stats:
        parsed = _stats_parsed(snapshot, stats)
        if parsed is not None:
            columns.append(("stats_parsed", parsed))
        partition = _partition_values_parsed(snapshot)
        if partition is not None:
            columns.append(("partitionValues_parsed", partition))
    return pa.StructArray.from_arrays([c for _, c in columns], names=[name for name, _ in columns])


def _remove_column(snapshot: Snapshot, options: _Options) -> pa.StructArray:
    tombstones = snapshot.tombstones
    deleted_at = pc.fill_null(contiguous(tombstones.column("deletionTimestamp")), 0)
    tombstones = pc.filter(tombstones, pc.greater(deleted_at, options.tombstone_cutoff))
    n = tombstones.num_rows
    arrays = [
        pc.cast(contiguous(tombstones.column("path")), pa.string()),
        contiguous(tombstones.column("deletionTimestamp")),
        pa.repeat(pa.scalar(False), n) if n else pa.array([], pa.bool_()),
        contiguous(tombstones.column("extendedFileMetadata")),
        _partition_map(tombstones.column("partitionValues"), snapshot.partition_physical_names),
        contiguous(tombstones.column("size")),
        pc.cast(contiguous(tombstones.column("deletionVector")), A.DELETION_VECTOR),
        contiguous(tombstones.column("baseRowId")),
        contiguous(tombstones.column("defaultRowCommitVersion")),
    ]
    return pa.StructArray.from_arrays(arrays, fields=list(A.CHECKPOINT_REMOVE_TYPE))


def _string_map(value: Any) -> list[tuple[str, str | None]] | None:
    if not isinstance(value, Mapping):
        return None
    return [(str(k), None if v is None else str(v)) for k, v in value.items()]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _non_file_rows(snapshot: Snapshot, options: _Options) -> list[tuple[str, pa.Array]]:
    """protocol, metaData, domainMetadata and txn rows, in the reference's order."""
    proto = snapshot.protocol
    protocol = {
        "minReaderVersion": proto.min_reader_version,
        "minWriterVersion": proto.min_writer_version,
        # feature lists exist exactly when the versions say they do (reader 3 / writer 7)
        "readerFeatures": list(proto.reader_features) if proto.min_reader_version >= 3 else None,
        "writerFeatures": list(proto.writer_features) if proto.min_writer_version >= 7 else None,
    }
    meta = snapshot.metadata
    # written as the log has it (absent stays null) so that a snapshot read from the checkpoint is the same
    fmt = meta.get("format")
    columns = meta.get("partitionColumns")
    metadata = {
        "id": _str(meta.get("id")),
        "name": _str(meta.get("name")),
        "description": _str(meta.get("description")),
        "format": (
            {"provider": _str(fmt.get("provider")), "options": _string_map(fmt.get("options"))}
            if isinstance(fmt, Mapping)
            else None
        ),
        "schemaString": _str(meta.get("schemaString")),
        "partitionColumns": [str(c) for c in columns] if isinstance(columns, list) else None,
        "configuration": _string_map(meta.get("configuration")),
        "createdTime": _int(meta.get("createdTime")),
    }
    domains = [
        {"domain": d.get("domain"), "configuration": _str(d.get("configuration")), "removed": False}
        for d in snapshot.domain_metadata.values()
    ]
    txns = []
    for txn in snapshot.app_transactions.values():
        last_updated = _int(txn.get("lastUpdated"))
        if options.txn_cutoff is not None and (last_updated is None or last_updated <= options.txn_cutoff):
            continue  # expired under delta.setTransactionRetentionDuration
        txns.append({"appId": txn.get("appId"), "version": _int(txn.get("version")), "lastUpdated": last_updated})
    rows = [
        (A.PROTOCOL, pa.array([protocol], A.PROTOCOL_TYPE)),
        (A.METADATA, pa.array([metadata], A.METADATA_TYPE)),
    ]
    if domains:
        rows.append((A.DOMAIN_METADATA, pa.array(domains, A.DOMAIN_METADATA_TYPE)))
    if txns:
        rows.append((A.TXN, pa.array(txns, A.TXN_TYPE)))
    return rows


def _assemble(schema: pa.Schema, parts: Sequence[tuple[str, pa.Array]]) -> pa.Table:
    """One table of ``schema`` where each part fills its own column and every other column is null."""
    tables = []
    for name, values in parts:
        n = len(values)
        if n == 0:
            continue
        columns = [values if f.name == name else pa.nulls(n, f.type) for f in schema]
        tables.append(pa.Table.from_arrays(columns, schema=schema))
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables)


def _to_parquet(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="snappy")
    return sink.getvalue()


def _stat(storage: Storage, directory: str, name: str, fallback_ms: int) -> int:
    """The modification time of a file just written (the fallback when the store does not report one)."""
    for info in storage.list_from(directory, name):
        if info.name == name:
            return info.modification_time or fallback_ms
        if info.name > name:
            break
    return fallback_ms


# -- writing -----------------------------------------------------------------------------------------------------


def write_checkpoint(snapshot: Snapshot, *, now_ms: int | None = None) -> CheckpointInfo:
    """Write a checkpoint of ``snapshot.version`` and point `_delta_log/_last_checkpoint` at it.

    A classic `<version>.checkpoint.parquet` is written unless the protocol lists the `v2Checkpoint` feature and
    ``delta.checkpointPolicy`` is ``v2``: then the file actions go to sidecar files under `_delta_log/_sidecars/`
    (one per 50,000 actions) and a UUID-named top-level file holds one `checkpointMetadata` row, a `sidecar` row per
    sidecar and the non-file actions. With v2Checkpoint supported but the classic policy, the classic file carries a
    `checkpointMetadata` row (a V2-spec classic checkpoint). A classic file another writer already wrote for this
    version is reused, not replaced (`checkpoint_file`). Every file is written atomically; `_last_checkpoint` is
    written last and never moved back from a newer checkpoint to an older one (one that names a checkpoint missing
    from the log is replaced).

    Args:
        snapshot: the table state to checkpoint (its commit exists: a snapshot is only built from a committed log).
        now_ms: the current time in ms since the epoch (tests pin it); tombstones and txns expire against it.

    Returns:
        What was written.

    Raises:
        InvalidTableProperty: ``delta.checkpointInterval``, ``delta.checkpointPolicy``,
            ``delta.deletedFileRetentionDuration``, ``delta.setTransactionRetentionDuration`` or
            ``delta.checkpoint.writeStatsAs*`` does not parse; nothing is written then.
        StorageError: a write failed.
    """
    if snapshot.pruned_by is not None:
        # the checkpoint would list only those partitions' files, and every reader would lose the others
        raise TransactionError(
            f"a snapshot loaded for the partitions of {snapshot.pruned_by!r} cannot be checkpointed", snapshot.table_uri
        )
    if snapshot.file_fields is not None:
        raise TransactionError("a snapshot loaded without all file fields cannot be checkpointed", snapshot.table_uri)
    now_ms = int(time.time() * 1000) if now_ms is None else int(now_ms)
    options = _options(snapshot, now_ms)  # every property is checked before the first byte is written
    storage = snapshot.storage
    version = snapshot.version

    adds = _add_column(snapshot, options)
    removes = _remove_column(snapshot, options)
    non_file = _non_file_rows(snapshot, options)
    file_fields = [pa.field(A.ADD, adds.type), pa.field(A.REMOVE, A.CHECKPOINT_REMOVE_TYPE)]
    top_fields = [pa.field(A.TXN, A.TXN_TYPE), *file_fields]
    top_fields += [
        pa.field(A.METADATA, A.METADATA_TYPE),
        pa.field(A.PROTOCOL, A.PROTOCOL_TYPE),
        pa.field(A.DOMAIN_METADATA, A.DOMAIN_METADATA_TYPE),
    ]
    if options.v2_spec:
        top_fields += [pa.field(A.CHECKPOINT_METADATA, A.CHECKPOINT_METADATA_TYPE), pa.field(A.SIDECAR, A.SIDECAR_TYPE)]
    top_schema = pa.schema(top_fields)
    header: list[tuple[str, pa.Array]] = []
    if options.v2_spec:
        header.append(
            (A.CHECKPOINT_METADATA, pa.array([{"version": version, "tags": None}], A.CHECKPOINT_METADATA_TYPE))
        )

    written: list[str] = []
    if not options.use_sidecars:
        table = _assemble(top_schema, [*header, *non_file, (A.ADD, adds), (A.REMOVE, removes)])
        data = _to_parquet(table)
        path = f"{LOG_DIR}/{version_prefix(version)}.checkpoint.parquet"
        size, total_bytes = write_or_reuse(storage, path, data, table.num_rows)  # another writer's stays as it is
        written.append(path)
        v2_pointer = None
    else:
        # Sidecars first: the top-level file names them, and a reader must never find it before they exist.
        file_schema = pa.schema(file_fields)
        file_table = _assemble(file_schema, [(A.ADD, adds), (A.REMOVE, removes)])
        sidecar_rows = []
        sidecar_paths = []
        sidecar_bytes = 0
        for start in range(0, file_table.num_rows, SIDECAR_PART_SIZE):
            data = _to_parquet(file_table.slice(start, SIDECAR_PART_SIZE))
            name = f"{uuid.uuid4()}.parquet"
            directory = f"{LOG_DIR}/{SIDECAR_DIR}"
            storage.write(f"{directory}/{name}", data)
            mtime = _stat(storage, directory, name, int(time.time() * 1000))
            sidecar_rows.append({"path": name, "sizeInBytes": len(data), "modificationTime": mtime, "tags": None})
            sidecar_paths.append(f"{directory}/{name}")
            sidecar_bytes += len(data)
        parts = list(header)
        if sidecar_rows:
            parts.append((A.SIDECAR, pa.array(sidecar_rows, A.SIDECAR_TYPE)))
        table = _assemble(top_schema, [*parts, *non_file])
        data = _to_parquet(table)
        top_name = f"{version_prefix(version)}.checkpoint.{uuid.uuid4()}.parquet"
        storage.write(f"{LOG_DIR}/{top_name}", data)
        written += [f"{LOG_DIR}/{top_name}", *sidecar_paths]
        top_mtime = _stat(storage, LOG_DIR, top_name, int(time.time() * 1000))
        size = table.num_rows + file_table.num_rows
        total_bytes = len(data) + sidecar_bytes
        v2_pointer = {"path": top_name, "sizeInBytes": len(data), "modificationTime": top_mtime}

    crash_point("during_checkpoint_write")
    updated = _write_last_checkpoint(storage, version, size, total_bytes, len(adds), v2_pointer)
    return CheckpointInfo(
        version=version,
        kind="v2" if options.use_sidecars else "classic",
        paths=tuple(written),
        size=size,
        size_in_bytes=total_bytes,
        num_of_add_files=len(adds),
        last_checkpoint_updated=updated,
    )


def _write_last_checkpoint(
    storage: Storage, version: int, size: int, size_in_bytes: int, num_adds: int, v2: dict[str, Any] | None
) -> bool:
    hint = read_last_checkpoint_hint(storage)
    # A pointer to a checkpoint that is not in the log (written by hand, left by a replaced log) is replaced: delta-rs
    # refuses to open a table whose `_last_checkpoint` names a missing checkpoint.
    if (
        hint is not None
        and hint["version"] > version
        and hint["version"] in complete_checkpoints(list_log(storage, hint["version"]))
    ):
        return False  # a newer checkpoint exists; the pointer only ever moves forward
    write_last_checkpoint(storage, version, size, size_in_bytes, num_adds, v2)
    return True
