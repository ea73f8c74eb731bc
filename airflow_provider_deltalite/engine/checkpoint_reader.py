"""Checkpoint reading: the files of a checkpoint (classic, multi-part, V2 with sidecars) as Arrow action tables.

Parquet checkpoints are read column by column and reshaped to deltalite's layout; JSON checkpoints (V2 top-level
files) go through the commit parser in `commit_file`.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_deltalite.engine import actions as A
from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.arrow_util import contiguous, struct_array
from airflow_provider_deltalite.engine.commit_file import (
    NonFileAction,
    clean_commit_bytes,
    empty_file_actions,
    find_non_file_actions,
    parse_commit_file_actions,
    with_order,
)
from airflow_provider_deltalite.engine.errors import CheckpointUnreadable, CorruptLog
from airflow_provider_deltalite.engine.log_path import LOG_DIR, SIDECAR_DIR
from airflow_provider_deltalite.engine.log_segment import CheckpointRef
from airflow_provider_deltalite.engine.stats_values import dump_json_exact
from airflow_provider_deltalite.engine.storage import Storage

# marks the rows (given their paths and deletion vectors) that a later commit replaces
Superseded = Callable[[pa.Array, pa.Array], pa.Array]


def _arrow_to_python(value: Any, arrow_type: pa.DataType) -> Any:
    """Convert a to_pylist value back to JSON-like Python, turning Arrow maps into dicts."""
    if value is None:
        return None
    if pa.types.is_map(arrow_type):
        return {k: _arrow_to_python(v, arrow_type.item_type) for k, v in value}
    if pa.types.is_struct(arrow_type):
        return {
            f.name: _arrow_to_python(value.get(f.name), f.type) for f in arrow_type if value.get(f.name) is not None
        }
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return [_arrow_to_python(v, arrow_type.value_type) for v in value]
    return value


def _conform(column: pa.Array, target: pa.DataType) -> pa.Array:
    """Reshape a checkpoint column to deltalite's field layout (maps of partition values become structs)."""
    if isinstance(column, pa.ChunkedArray):
        column = contiguous(column)
    if column.type == target:
        return column
    if pa.types.is_struct(target) and pa.types.is_map(column.type):
        children = map_lookup_many(column, [f.name for f in target])
        children = [pc.cast(c, f.type) for c, f in zip(children, target, strict=True)]
        return struct_array(children, list(target), pc.is_valid(column))
    if pa.types.is_struct(target) and pa.types.is_struct(column.type):
        names = set(column.type.names)
        children = [
            _conform(column.field(f.name), f.type) if f.name in names else pa.nulls(len(column), f.type) for f in target
        ]
        return struct_array(children, list(target), pc.is_valid(column))
    return pc.cast(column, target, safe=False)


def map_lookup_many(column: pa.MapArray, keys: list[str]) -> list[pa.Array]:
    """The value of each key in every map (first occurrence; null when absent), like `pc.map_lookup` per key.

    One pass over the flattened entries per key instead of a per-row lookup: partitionValues maps of a checkpoint
    have a few entries each, and `map_lookup` cost dominated reading large checkpoints.
    """
    n = len(column)
    offsets = column.offsets.to_numpy()
    lengths = np.diff(offsets)
    start, stop = int(offsets[0]), int(offsets[-1])
    entry_keys = column.keys.slice(start, stop - start)
    entry_values = column.items.slice(start, stop - start)
    if (
        len(keys) == 1
        and (lengths <= 1).all()
        and pc.all(pc.equal(entry_keys, pa.scalar(keys[0], entry_keys.type))).as_py() is not False
    ):
        # one partition column, at most one entry per map (the common checkpoint): the entries are the values
        has = (lengths == 1) & pc.is_valid(column).to_numpy(zero_copy_only=False)
        if stop - start == n and has.all():
            return [entry_values]
        return [pc.take(entry_values, pa.array(offsets[:-1] - start, mask=~has))]
    owner = np.repeat(np.arange(n, dtype=np.int64), lengths)
    # a null map may still have entries underneath; they are not its values
    live_entry = np.repeat(pc.is_valid(column).to_numpy(zero_copy_only=False), lengths)
    out = []
    for key in keys:
        hits = pc.fill_null(pc.equal(entry_keys, pa.scalar(key, entry_keys.type)), False)
        entries = np.flatnonzero(hits.to_numpy(zero_copy_only=False) & live_entry)
        position = np.full(n, -1, dtype=np.int64)
        # reversed, so that for a duplicated key the first entry is written last and wins
        position[owner[entries[::-1]]] = entries[::-1]
        found = position >= 0
        missing = int(n - found.sum())
        validity = pa.py_buffer(np.packbits(found, bitorder="little")) if missing else None
        take = pa.Array.from_buffers(pa.int64(), n, [validity, pa.py_buffer(position)], null_count=missing)
        out.append(pc.take(entry_values, take))
    return out


def _stats_from_parsed(column: pa.Array) -> pa.Array:
    # Some writers put only stats_parsed into checkpoints; turn it back into the JSON form the rest of the engine reads.
    values = []
    for row in column.to_pylist():
        # decimals stay exact: a rounded bound in a checkpoint we write later could make readers skip live rows
        values.append(None if row is None else dump_json_exact(_jsonable(row)))
    return pa.array(values, pa.string())


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if hasattr(value, "isoformat"):
        text = value.isoformat()
        return text.replace("+00:00", "Z") if "+00:00" in text else text
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def file_actions_from_checkpoint_table(
    table: pa.Table, partition_columns: list[str], seq_start: int, superseded: Superseded | None
) -> tuple[pa.Table, pa.Table, int]:
    """The add and remove rows of a checkpoint's Parquet ``table`` in the replay's form (the log's columns, a commit
    version of -1, sequence numbers from ``seq_start``), without those ``superseded`` says a later commit replaces;
    and the next free sequence number."""
    ps = A.partition_struct(partition_columns)
    out = []
    seq = seq_start
    for name, fields in ((A.ADD, A.add_fields(ps)), (A.REMOVE, A.remove_fields(ps))):
        target = pa.struct(fields)
        if name not in table.column_names:
            rows = pa.schema(fields).empty_table()
            if name == A.ADD:
                rows = rows.append_column("tags", pa.nulls(0, A.STRING_MAP))
        else:
            column = contiguous(table.column(name))
            keep = pc.is_valid(column)
            if superseded is not None:
                # one selection (at most one copy of the checkpoint's strings) for both the row kind and later commits
                dvs = (
                    _conform(column.field("deletionVector"), A.DELETION_VECTOR)
                    if "deletionVector" in column.type.names
                    else pa.nulls(len(column), A.DELETION_VECTOR)
                )
                keep = pc.and_(keep, pc.invert(superseded(column.field("path"), dvs)))
            pieces = [_conformed_rows(piece, name, target) for piece in _kept_pieces(column, keep)]
            rows = pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces)
        n = rows.num_rows
        out.append(with_order(rows, np.full(n, -1, dtype=np.int64), np.arange(seq, seq + n, dtype=np.int64)))
        seq += n
    return out[0], out[1], seq


# A selection of kept rows is made of zero-copy slices when it has at most this many runs per this many rows (and
# at least _MIN_RUNS); more fragmented ones are copied by one filter.
_ROWS_PER_RUN = 1024
_MIN_RUNS = 128


def _kept_pieces(column: pa.Array, keep: pa.Array) -> list[pa.Array]:
    """The rows of ``column`` that ``keep`` selects, as slices when they form few runs, else as one filtered copy.

    A checkpoint is mostly one kind of action in long runs, and later commits supersede few of its rows: slicing
    keeps the decoded columns as they are, where a filter would copy every path and stats string once more (the
    largest transient of a snapshot load: ~300 MB at a million files).
    """
    mask = pc.fill_null(keep, False).to_numpy(zero_copy_only=False)
    n = len(mask)
    if n == 0 or mask.all():
        return [column]
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.view(np.int8), [0]))))
    starts, stops = edges[0::2], edges[1::2]
    if len(starts) == 0:
        return [column.slice(0, 0)]
    if len(starts) > max(_MIN_RUNS, n // _ROWS_PER_RUN):
        return [pc.filter(column, keep)]
    return [column.slice(int(a), int(b - a)) for a, b in zip(starts, stops, strict=True)]


def _conformed_rows(column: pa.Array, name: str, target: pa.DataType) -> pa.Table:
    """Kept rows of a checkpoint's add or remove column as a table in deltalite's layout (adds with ``tags``)."""
    present = set(column.type.names)
    conformed = _conform(column, target)
    if "stats_parsed" in present and ("stats" not in present or column.field("stats").null_count == len(column)):
        conformed = _replace_field(conformed, "stats", _stats_from_parsed(column.field("stats_parsed")))
    rows = pa.Table.from_struct_array(conformed)
    if name != A.ADD:
        return rows
    tags = _conform(column.field("tags"), A.STRING_MAP) if "tags" in present else pa.nulls(len(column), A.STRING_MAP)
    return rows.append_column("tags", tags)


def _replace_field(struct: pa.StructArray, name: str, values: pa.Array) -> pa.StructArray:
    arrays = [values if f.name == name else struct.field(f.name) for f in struct.type]
    return struct_array(arrays, list(struct.type), pc.is_valid(struct))


def non_file_from_checkpoint_table(table: pa.Table, version: int) -> list[NonFileAction]:
    """The protocol, metadata, txn, domain metadata, checkpoint metadata and sidecar actions of a checkpoint's Parquet
    ``table`` (of checkpoint ``version``), ordered before every commit's actions."""
    found = []
    for name in (A.PROTOCOL, A.METADATA, A.TXN, A.DOMAIN_METADATA, A.CHECKPOINT_METADATA, A.SIDECAR):
        if name not in table.column_names:
            continue
        column = contiguous(table.column(name))
        valid = pc.filter(column, pc.is_valid(column))
        for i, row in enumerate(valid.to_pylist()):
            found.append(NonFileAction(version, -1_000_000_000 + i, name, _arrow_to_python(row, column.type)))
    return found


_CHECKPOINT_COLUMNS = (
    A.ADD,
    A.REMOVE,
    A.METADATA,
    A.PROTOCOL,
    A.TXN,
    A.DOMAIN_METADATA,
    A.CHECKPOINT_METADATA,
    A.SIDECAR,
)


# The fields of a file action replay always reads: the logical-file key, and the partition.
KEY_FIELDS = frozenset({"path", "deletionVector", "partitionValues"})


def checkpoint_projection(schema: pa.Schema, stats_parsed: bool, fields: frozenset[str] | None = None) -> list[str]:
    """The checkpoint columns replay needs: whole non-file actions, and only the known fields of add and remove
    (only ``fields`` and the key fields, when given).

    Spark may add `stats_parsed` / `partitionValues_parsed` and future writers other fields; reading what replay
    ignores costs time and memory on every load. `stats_parsed` is read when asked for or when there is no `stats`.
    """
    empty = A.partition_struct([])
    wanted = {
        A.ADD: {f.name for f in A.add_fields(empty)} | {"tags"},
        A.REMOVE: {f.name for f in A.remove_fields(empty)},
    }
    if fields is not None:
        wanted = {kind: names & (fields | KEY_FIELDS) for kind, names in wanted.items()}
        stats_parsed = stats_parsed and "stats" in fields
    columns = []
    for name in schema.names:
        if name not in _CHECKPOINT_COLUMNS:
            continue
        field_type = schema.field(name).type
        if name not in wanted or not pa.types.is_struct(field_type):
            columns.append(name)
            continue
        keep = [f for f in field_type.names if f in wanted[name]]
        wants_stats = fields is None or "stats" in fields
        if (
            name == A.ADD
            and wants_stats
            and "stats_parsed" in field_type.names
            and (stats_parsed or "stats" not in field_type.names)
        ):
            keep.append("stats_parsed")
        columns.extend(f"{name}.{f}" for f in keep)
    return columns


def _read_parquet_actions(data: bytes, fields: frozenset[str] | None = None) -> pa.Table:
    pf = pq.ParquetFile(pa.BufferReader(data))
    schema = pf.schema_arrow
    table = pf.read(columns=checkpoint_projection(schema, stats_parsed=False, fields=fields))
    add_type = schema.field(A.ADD).type if A.ADD in schema.names else None
    if (
        add_type is not None
        and pa.types.is_struct(add_type)
        and (fields is None or "stats" in fields)
        and {"stats", "stats_parsed"} <= set(add_type.names)
        and pc.all(pc.is_null(pc.struct_field(table.column(A.ADD), "stats"))).as_py() is not False
    ):
        # stats kept only in parsed form (delta.checkpoint.writeStatsAsJson=false): read that column after all
        table = pf.read(columns=checkpoint_projection(schema, stats_parsed=True, fields=fields))
    return table


@dataclass
class CheckpointContent:
    """A checkpoint's non-file actions and its (not yet conformed) action tables."""

    version: int
    non_file: list[NonFileAction]
    tables: list[pa.Table]
    json_parts: list[bytes]


def read_checkpoint(storage: Storage, ref: CheckpointRef, fields: frozenset[str] | None = None) -> CheckpointContent:
    """Read every file of a checkpoint (parts, V2 top-level file and its sidecars); of the file actions only
    ``fields`` (and `KEY_FIELDS`), when given.

    Raises CorruptLog when any file is missing or unreadable, so the caller can fall back to an older checkpoint.
    """
    uri = storage.table_uri
    try:
        raw_files = storage.read_many([f.path for f in ref.files])
    except FileNotFoundError:
        raise CheckpointUnreadable(f"checkpoint {ref.version} is missing a file", uri) from None
    tables: list[pa.Table] = []
    json_parts: list[bytes] = []
    non_file: list[NonFileAction] = []
    try:
        for f, data in zip(ref.files, raw_files, strict=True):
            if f.parsed.file_format == "json":
                data = clean_commit_bytes(data)
                json_parts.append(data)
                non_file.extend(find_non_file_actions([(ref.version, data)], uri, order_base=-1_000_000_000))
            else:
                table = _read_parquet_actions(data, fields)
                tables.append(table)
                non_file.extend(non_file_from_checkpoint_table(table, ref.version))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise CheckpointUnreadable(f"checkpoint {ref.version} is unreadable: {type(exc).__name__}", uri) from None
    sidecars = [a.value for a in non_file if a.name == A.SIDECAR]
    if sidecars:
        paths = [
            f"{LOG_DIR}/{SIDECAR_DIR}/{s.get('path', '')}" if "/" not in s.get("path", "") else s["path"]
            for s in sidecars
        ]
        try:
            with ThreadPoolExecutor(max_workers=min(8, len(paths))) as pool:
                blobs = storage.read_many(paths)
                tables.extend(pool.map(lambda blob: _read_parquet_actions(blob, fields), blobs))
        except FileNotFoundError:
            raise CheckpointUnreadable(f"checkpoint {ref.version} refers to a missing sidecar file", uri) from None
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise CheckpointUnreadable(
                f"a sidecar of checkpoint {ref.version} is unreadable: {type(exc).__name__}", uri
            ) from None
    if not any(a.name == A.PROTOCOL for a in non_file) or not any(a.name == A.METADATA for a in non_file):
        # A checkpoint that parses but lacks these is corrupt, not unreadable: falling back would hide the damage.
        raise CorruptLog(f"checkpoint {ref.version} has no protocol or metaData action", uri)
    return CheckpointContent(ref.version, non_file, tables, json_parts)


def checkpoint_file_actions(
    content: CheckpointContent,
    partition_columns: list[str],
    table_uri: str | None,
    superseded: Superseded | None = None,
) -> tuple[pa.Table, pa.Table]:
    """The checkpoint's adds and removes in deltalite's layout.

    ``superseded(paths, deletion_vectors)`` marks rows that later commits replace; they are dropped while reading.
    The raw tables are released from ``content`` as they are converted, which keeps peak memory near one copy.
    """
    adds, removes = [], []
    seq = -(1 << 40)
    while content.tables:
        a, r, seq = file_actions_from_checkpoint_table(content.tables.pop(0), partition_columns, seq, superseded)
        adds.append(a)
        removes.append(r)
    if content.json_parts:
        a, r = parse_commit_file_actions(
            [(-1, d) for d in content.json_parts], partition_columns, table_uri, seq_base=seq
        )
        if superseded is not None:
            a = pc.filter(a, pc.invert(superseded(a.column("path"), a.column("deletionVector"))))
            r = pc.filter(r, pc.invert(superseded(r.column("path"), r.column("deletionVector"))))

        adds.append(a)
        removes.append(r)
    if not adds:
        return empty_file_actions(partition_columns)
    return pa.concat_tables(adds), pa.concat_tables(removes)
