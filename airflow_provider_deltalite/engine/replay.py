"""Log replay: parse commits and checkpoints into Arrow tables and reconcile them into a table state.

Commit files are parsed with one vectorised pyarrow JSON pass over all of them (only `add` and `remove` are read
that way); the rare non-file actions (one commitInfo per commit, metaData, protocol, txn, domainMetadata) are found
by a byte search and parsed one by one, so the cost per file action stays in Arrow.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from airflow_provider_deltalite.engine import actions as A
from airflow_provider_deltalite.engine.arrow_util import contiguous
from airflow_provider_deltalite.engine.errors import CheckpointUnreadable, CorruptLog
from airflow_provider_deltalite.engine.file_stats import dump_json_exact
from airflow_provider_deltalite.engine.log_path import LOG_DIR, SIDECAR_DIR
from airflow_provider_deltalite.engine.log_segment import CheckpointRef
from airflow_provider_deltalite.engine.storage import Storage

_BOM = b"\xef\xbb\xbf"

# marks the rows (given their paths and deletion vectors) that a later commit replaces
Superseded = Callable[[pa.Array, pa.Array], pa.Array]
_KEY_NEEDLES = tuple((name, f'"{name}"'.encode()) for name in A.NON_FILE_ACTIONS)


@dataclass
class NonFileAction:
    """A parsed non-file action with where it came from (version, and its order inside the replay)."""

    version: int
    order: int
    name: str
    value: dict[str, Any]


@dataclass
class ParsedActions:
    """Actions of a set of log files: file actions as Arrow tables, the rest as dicts.

    ``adds`` and ``removes`` carry two extra columns: ``_version`` (commit version, -1 inside a checkpoint) and
    ``_seq`` (replay order; larger wins).
    """

    adds: pa.Table
    removes: pa.Table
    non_file: list[NonFileAction] = field(default_factory=list)


# -- commit files ------------------------------------------------------------------------------------------


def _clean_commit_bytes(data: bytes) -> bytes:
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    if data and not data.endswith(b"\n"):
        data += b"\n"
    return data


def commit_lines(version: int, data: bytes, table_uri: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """The actions of a commit file one line at a time: ``(line number, action object)``, blank lines skipped.

    Raises:
        CorruptLog: a line is not valid JSON or not a JSON object (the version and line are named).
    """
    for line_no, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            raise CorruptLog(
                f"commit {version} line {line_no} is not valid JSON (truncated or corrupt commit file)", table_uri
            ) from None
        except RecursionError:  # Python's parser gives up on deep nesting; no writer nests actions that deep
            raise CorruptLog(f"commit {version} line {line_no} is JSON nested too deeply to read", table_uri) from None
        if not isinstance(obj, dict):
            raise CorruptLog(f"commit {version} line {line_no} is not a JSON object", table_uri)
        yield line_no, obj


def _strip_blank_lines(data: bytes) -> bytes:
    return b"".join(line + b"\n" for line in data.split(b"\n") if line.strip())


def find_non_file_actions(
    contents: Sequence[tuple[int, bytes]], table_uri: str | None, order_base: int = 0
) -> list[NonFileAction]:
    """Locate and parse the non-file actions of commit files by searching for their keys.

    A key string can only appear unescaped as a JSON key (inside strings quotes are escaped), except as a bare
    string value; each candidate line is parsed, so such a value is recognised and skipped.
    """
    found: list[NonFileAction] = []
    for version, data in contents:
        starts: set[int] = set()
        for _name, needle in _KEY_NEEDLES:
            pos = data.find(needle)
            while pos != -1:
                starts.add(data.rfind(b"\n", 0, pos) + 1)
                end = data.find(b"\n", pos)
                pos = data.find(needle, end if end != -1 else len(data))
        for start in sorted(starts):
            end = data.find(b"\n", start)
            line = data[start : end if end != -1 else len(data)]
            try:
                obj = json.loads(line)
            except ValueError:
                raise CorruptLog(f"commit {version} has a line that is not valid JSON", table_uri) from None
            except RecursionError:  # Python's parser gives up on deep nesting; no writer nests actions that deep
                raise CorruptLog(f"commit {version} has a line of JSON nested too deeply to read", table_uri) from None
            if not isinstance(obj, dict) or len(obj) != 1:
                continue
            ((name, value),) = obj.items()
            if name in A.NON_FILE_ACTIONS and isinstance(value, dict):
                found.append(NonFileAction(version, order_base + start, name, value))
    return found


def parse_commit_file_actions(
    contents: Sequence[tuple[int, bytes]], partition_columns: list[str], table_uri: str | None, seq_base: int = 0
) -> tuple[pa.Table, pa.Table]:
    """The add and remove actions of commit files, as Arrow tables in the order they appear.

    Raises CorruptLog naming the commit version for a line that is not JSON or an action of the wrong shape.
    """
    schema = A.json_read_schema(partition_columns)
    versions: list[int] = []
    counts: list[int] = []
    chunks: list[bytes] = []
    for version, data in contents:
        if not data.strip():
            continue
        counts.append(data.count(b"\n"))
        versions.append(version)
        chunks.append(data)
    buffer = b"".join(chunks)
    if not buffer:
        return _empty_file_actions(partition_columns)
    try:
        table = pa_json.read_json(
            pa.BufferReader(buffer),
            read_options=pa_json.ReadOptions(block_size=max(1 << 22, min(len(buffer) // 2 + 1, 1 << 26))),
            parse_options=pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
        )
    except pa.ArrowInvalid:
        return _parse_commits_slowly(contents, partition_columns, table_uri, seq_base)
    if table.num_rows != sum(counts):
        # Blank lines are skipped by the reader and would shift rows against versions; drop them and retry.
        cleaned = [(v, _strip_blank_lines(d)) for v, d in contents]
        if any(len(a) != len(b) for (_, a), (_, b) in zip(contents, cleaned, strict=True)):
            return parse_commit_file_actions(cleaned, partition_columns, table_uri, seq_base)
        raise CorruptLog("commit files could not be split into one action per line", table_uri)
    row_versions = np.repeat(np.asarray(versions, dtype=np.int64), counts)
    tags = _tags_column(buffer, table.num_rows, row_versions, table_uri)
    return _split_file_actions(table, row_versions, seq_base, tags)


def _empty_file_actions(partition_columns: list[str]) -> tuple[pa.Table, pa.Table]:
    ps = A.partition_struct(partition_columns)
    empty_add = pa.schema([*A.add_fields(ps), pa.field("tags", A.STRING_MAP)]).empty_table()
    empty_remove = pa.schema(A.remove_fields(ps)).empty_table()
    return _with_order(empty_add, [], []), _with_order(empty_remove, [], [])


def _split_file_actions(
    table: pa.Table, row_versions: np.ndarray, seq_base: int, tags: pa.Array | None
) -> tuple[pa.Table, pa.Table]:
    seq = np.arange(seq_base, seq_base + table.num_rows, dtype=np.int64)
    out = []
    for name in (A.ADD, A.REMOVE):
        column = contiguous(table.column(name))
        mask = column.is_valid()
        rows = pa.Table.from_struct_array(column.filter(mask)) if len(column) else None
        if rows is None:
            rows = pa.schema(list(column.type)).empty_table()
        if name == A.ADD:
            add_tags = tags.filter(mask) if tags is not None else pa.nulls(rows.num_rows, A.STRING_MAP)
            rows = rows.append_column("tags", add_tags)
        mask_np = mask.to_numpy(zero_copy_only=False)
        out.append(_with_order(rows, row_versions[mask_np], seq[mask_np]))
    return out[0], out[1]


def _with_order(table: pa.Table, versions: Iterable[int], seq: Iterable[int]) -> pa.Table:
    table = table.append_column(
        "_version",
        pa.array(np.asarray(list(versions) if not isinstance(versions, np.ndarray) else versions, dtype=np.int64)),
    )
    return table.append_column(
        "_seq", pa.array(np.asarray(list(seq) if not isinstance(seq, np.ndarray) else seq, dtype=np.int64))
    )


def _tags_column(buffer: bytes, num_rows: int, row_versions: np.ndarray, table_uri: str | None) -> pa.Array | None:
    # Tags are free-form maps, which the Arrow JSON reader cannot parse; they are rare, so parse only tagged lines.
    if b'"tags"' not in buffer:
        return None
    values: list[Any] = [None] * num_rows
    for i, line in enumerate(buffer.split(b"\n")[:num_rows]):
        if b'"tags"' in line:
            try:
                obj = json.loads(line)
            except RecursionError:  # the Arrow reader took the line; Python's parser gives up on deep nesting
                raise CorruptLog(
                    f"commit {row_versions[i]} has a line of JSON nested too deeply to read", table_uri
                ) from None
            action = obj.get(A.ADD) or obj.get(A.REMOVE) or {}
            tags = action.get("tags")
            if isinstance(tags, dict):
                values[i] = [(str(k), None if v is None else str(v)) for k, v in tags.items()]
    return pa.array(values, type=A.STRING_MAP)


def _parse_commits_slowly(
    contents: Sequence[tuple[int, bytes]], partition_columns: list[str], table_uri: str | None, seq_base: int
) -> tuple[pa.Table, pa.Table]:
    """Line-by-line parsing, used when the vectorised pass fails: finds the bad line, or tolerates odd types."""
    ps = A.partition_struct(partition_columns)
    add_type, remove_type = pa.struct(A.add_fields(ps)), pa.struct(A.remove_fields(ps))
    adds: list[dict] = []
    removes: list[dict] = []
    add_order: tuple[list[int], list[int]] = ([], [])
    remove_order: tuple[list[int], list[int]] = ([], [])
    seq = seq_base
    for version, data in contents:
        for line_no, obj in commit_lines(version, data, table_uri):
            for name, target, order in ((A.ADD, adds, add_order), (A.REMOVE, removes, remove_order)):
                if name in obj:
                    action = obj[name]
                    if not isinstance(action, dict) or not isinstance(action.get("path"), str):
                        raise CorruptLog(f"commit {version} line {line_no}: {name} action without a path", table_uri)
                    target.append(action)
                    order[0].append(version)
                    order[1].append(seq)
            seq += 1
    try:
        add_table = _dicts_to_table(adds, add_type, with_tags=True)
        remove_table = _dicts_to_table(removes, remove_type, with_tags=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
        raise CorruptLog(f"a file action has a field of the wrong type: {exc}", table_uri) from None
    return _with_order(add_table, *add_order), _with_order(remove_table, *remove_order)


def _dicts_to_table(rows: list[dict], struct_type: pa.StructType, *, with_tags: bool) -> pa.Table:
    columns = {}
    for f in struct_type:
        values = [r.get(f.name) for r in rows]
        if f.name == "partitionValues":
            values = [{k: (None if (v or {}).get(k) is None else str(v[k])) for k in f.type.names} for v in values]
        if f.name == "size" or f.name in ("modificationTime", "deletionTimestamp"):
            values = [None if v is None else int(v) for v in values]
        columns[f.name] = pa.array(values, type=f.type)
    if with_tags:
        columns["tags"] = pa.array(
            [
                [(str(k), None if v is None else str(v)) for k, v in r["tags"].items()]
                if isinstance(r.get("tags"), dict)
                else None
                for r in rows
            ],
            type=A.STRING_MAP,
        )
    return pa.table(columns)


# -- checkpoints -------------------------------------------------------------------------------------------


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
        children = _map_lookup_many(column, [f.name for f in target])
        children = [c.cast(f.type) for c, f in zip(children, target, strict=True)]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=column.is_null())
    if pa.types.is_struct(target) and pa.types.is_struct(column.type):
        names = set(column.type.names)
        children = [
            _conform(column.field(f.name), f.type) if f.name in names else pa.nulls(len(column), f.type) for f in target
        ]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=column.is_null())
    return column.cast(target, safe=False)


def _map_lookup_many(column: pa.MapArray, keys: list[str]) -> list[pa.Array]:
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
    owner = np.repeat(np.arange(n, dtype=np.int64), lengths)
    # a null map may still have entries underneath; they are not its values
    live_entry = np.repeat(column.is_valid().to_numpy(zero_copy_only=False), lengths)
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
        out.append(entry_values.take(take))
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


def _file_actions_from_checkpoint_table(
    table: pa.Table, partition_columns: list[str], seq_start: int, superseded: Superseded | None
) -> tuple[pa.Table, pa.Table, int]:
    ps = A.partition_struct(partition_columns)
    out = []
    seq = seq_start
    for name, fields in ((A.ADD, A.add_fields(ps)), (A.REMOVE, A.remove_fields(ps))):
        target = pa.struct(fields)
        if name not in table.column_names:
            rows = pa.schema(fields).empty_table()
            tags = pa.nulls(0, A.STRING_MAP)
        else:
            column = contiguous(table.column(name))
            keep = column.is_valid()
            if superseded is not None:
                # one filter (one copy of the checkpoint's strings) for both the row kind and later commits
                dvs = (
                    _conform(column.field("deletionVector"), A.DELETION_VECTOR)
                    if "deletionVector" in column.type.names
                    else pa.nulls(len(column), A.DELETION_VECTOR)
                )
                keep = pc.and_(keep, pc.invert(superseded(column.field("path"), dvs)))
            column = column.filter(keep)
            present = set(column.type.names)
            conformed = _conform(column, target)
            if "stats_parsed" in present and (
                "stats" not in present or column.field("stats").null_count == len(column)
            ):
                conformed = _replace_field(conformed, "stats", _stats_from_parsed(column.field("stats_parsed")))
            rows = pa.Table.from_struct_array(conformed)
            tags = (
                _conform(column.field("tags"), A.STRING_MAP)
                if "tags" in present
                else pa.nulls(len(column), A.STRING_MAP)
            )
        if name == A.ADD:
            rows = rows.append_column("tags", tags)
        n = rows.num_rows
        out.append(_with_order(rows, np.full(n, -1, dtype=np.int64), np.arange(seq, seq + n, dtype=np.int64)))
        seq += n
    return out[0], out[1], seq


def _replace_field(struct: pa.StructArray, name: str, values: pa.Array) -> pa.StructArray:
    arrays = [values if f.name == name else struct.field(f.name) for f in struct.type]
    return pa.StructArray.from_arrays(arrays, fields=list(struct.type), mask=struct.is_null())


def _non_file_from_checkpoint_table(table: pa.Table, version: int) -> list[NonFileAction]:
    found = []
    for name in (A.PROTOCOL, A.METADATA, A.TXN, A.DOMAIN_METADATA, A.CHECKPOINT_METADATA, A.SIDECAR):
        if name not in table.column_names:
            continue
        column = contiguous(table.column(name))
        valid = column.filter(column.is_valid())
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


def _checkpoint_projection(schema: pa.Schema, stats_parsed: bool) -> list[str]:
    """The checkpoint columns replay needs: whole non-file actions, and only the known fields of add and remove.

    Spark may add `stats_parsed` / `partitionValues_parsed` and future writers other fields; reading what replay
    ignores costs time and memory on every load. `stats_parsed` is read when asked for or when there is no `stats`.
    """
    empty = A.partition_struct([])
    wanted = {
        A.ADD: {f.name for f in A.add_fields(empty)} | {"tags"},
        A.REMOVE: {f.name for f in A.remove_fields(empty)},
    }
    columns = []
    for name in schema.names:
        if name not in _CHECKPOINT_COLUMNS:
            continue
        field_type = schema.field(name).type
        if name not in wanted or not pa.types.is_struct(field_type):
            columns.append(name)
            continue
        keep = [f for f in field_type.names if f in wanted[name]]
        if name == A.ADD and "stats_parsed" in field_type.names and (stats_parsed or "stats" not in field_type.names):
            keep.append("stats_parsed")
        columns.extend(f"{name}.{f}" for f in keep)
    return columns


def _read_parquet_actions(data: bytes) -> pa.Table:
    pf = pq.ParquetFile(pa.BufferReader(data))
    schema = pf.schema_arrow
    table = pf.read(columns=_checkpoint_projection(schema, stats_parsed=False))
    add_type = schema.field(A.ADD).type if A.ADD in schema.names else None
    if (
        add_type is not None
        and pa.types.is_struct(add_type)
        and {"stats", "stats_parsed"} <= set(add_type.names)
        and pc.all(pc.is_null(pc.struct_field(table.column(A.ADD), "stats"))).as_py() is not False
    ):
        # stats kept only in parsed form (delta.checkpoint.writeStatsAsJson=false): read that column after all
        table = pf.read(columns=_checkpoint_projection(schema, stats_parsed=True))
    return table


@dataclass
class CheckpointContent:
    """A checkpoint's non-file actions and its (not yet conformed) action tables."""

    version: int
    non_file: list[NonFileAction]
    tables: list[pa.Table]
    json_parts: list[bytes]


def read_checkpoint(storage: Storage, ref: CheckpointRef) -> CheckpointContent:
    """Read every file of a checkpoint (parts, V2 top-level file and its sidecars).

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
                data = _clean_commit_bytes(data)
                json_parts.append(data)
                non_file.extend(find_non_file_actions([(ref.version, data)], uri, order_base=-1_000_000_000))
            else:
                table = _read_parquet_actions(data)
                tables.append(table)
                non_file.extend(_non_file_from_checkpoint_table(table, ref.version))
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
                tables.extend(pool.map(_read_parquet_actions, blobs))
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
        a, r, seq = _file_actions_from_checkpoint_table(content.tables.pop(0), partition_columns, seq, superseded)
        adds.append(a)
        removes.append(r)
    if content.json_parts:
        a, r = parse_commit_file_actions(
            [(-1, d) for d in content.json_parts], partition_columns, table_uri, seq_base=seq
        )
        if superseded is not None:
            a = a.filter(pc.invert(superseded(a.column("path"), a.column("deletionVector"))))
            r = r.filter(pc.invert(superseded(r.column("path"), r.column("deletionVector"))))
        adds.append(a)
        removes.append(r)
    if not adds:
        return _empty_file_actions(partition_columns)
    return pa.concat_tables(adds), pa.concat_tables(removes)


# -- reconciliation --------------------------------------------------------------------------------------


def file_keys(paths: pa.Array, dvs: pa.Array, normalize) -> pa.Array:
    """The logical-file key `(path, deletion vector id)` as one string per row.

    Paths are compared after resolving them (relative and absolute spellings of one file are one file); the
    resolution runs in Python only for paths that are absolute or URI-escaped.
    """
    paths = contiguous(paths)
    needs = pc.or_(pc.match_substring(paths, "%"), pc.match_substring(paths, ":"))
    needs = pc.or_(needs, pc.starts_with(paths, "/"))
    if pc.any(needs).as_py():
        idx = np.flatnonzero(needs.to_numpy(zero_copy_only=False))
        values = paths.to_pylist()
        for i in idx:
            values[i] = normalize(values[i])
        paths = pa.array(values, pa.string())
    dvs = contiguous(dvs)
    if dvs.null_count == len(dvs):
        return paths
    offset = pc.cast(dvs.field("offset"), pa.string())
    dv_id = pc.binary_join_element_wise(
        dvs.field("storageType"),
        dvs.field("pathOrInlineDv"),
        pc.if_else(offset.is_valid(), pc.binary_join_element_wise("@", offset, ""), ""),
        "",
        null_handling="replace",
        null_replacement="",
    )
    # Files without a deletion vector keep the bare path as key, so the key does not depend on the batch.
    return pc.if_else(dvs.is_valid(), pc.binary_join_element_wise(paths, dv_id, "\x1f"), paths)


def reconcile(
    adds: pa.Table,
    removes: pa.Table,
    normalize: Callable[[str], str],
    checkpoint: CheckpointContent | None = None,
    partition_columns: list[str] | None = None,
    table_uri: str | None = None,
) -> tuple[pa.Table, pa.Table]:
    """Newest action per logical file wins: surviving adds are the live files, surviving removes the tombstones.

    ``adds``/``removes`` are the commit actions after the checkpoint, in replay order (``_seq``). The checkpoint's own
    actions are reconciled already (the protocol allows no two actions for one file in a checkpoint), so only the
    commits are grouped, and a checkpoint row survives unless a commit touches its file: the cost of reconciling
    follows the commits, not the size of the table.
    """
    add_keys = file_keys(adds.column("path"), adds.column("deletionVector"), normalize).cast(pa.string())
    remove_keys = file_keys(removes.column("path"), removes.column("deletionVector"), normalize).cast(pa.string())
    keys = pa.concat_arrays([add_keys, remove_keys])
    seq = pa.concat_arrays([contiguous(adds.column("_seq")), contiguous(removes.column("_seq"))])
    winners = pa.table({"k": keys, "s": seq}).group_by("k", use_threads=False).aggregate([("s", "max")])
    winning = winners.column("s_max")
    live = adds.filter(pc.is_in(adds.column("_seq"), value_set=winning))
    tombstones = removes.filter(pc.is_in(removes.column("_seq"), value_set=winning))
    if checkpoint is None:
        return live, tombstones
    touched = contiguous(winners.column("k"))

    def superseded(paths: pa.Array, dvs: pa.Array) -> pa.Array:
        if not len(touched):
            return pa.nulls(len(paths), pa.bool_()).fill_null(False)
        return pc.is_in(file_keys(paths, dvs, normalize).cast(pa.string()), value_set=touched)

    base_adds, base_removes = checkpoint_file_actions(
        checkpoint, partition_columns or [], table_uri, superseded=superseded
    )
    return (
        pa.concat_tables([base_adds, live], promote_options="permissive"),
        pa.concat_tables([base_removes, tombstones], promote_options="permissive"),
    )


def latest_non_file_state(actions: Sequence[NonFileAction]) -> dict[str, Any]:
    """Reconcile non-file actions: newest protocol and metaData, newest txn per appId, domains with removal."""
    state: dict[str, Any] = {"protocol": None, "metaData": None, "txn": {}, "domainMetadata": {}, "commitInfo": {}}
    for action in sorted(actions, key=lambda a: (a.version, a.order)):
        if action.name == A.PROTOCOL:
            state["protocol"] = action.value
        elif action.name == A.METADATA:
            state["metaData"] = action.value
        elif action.name == A.TXN and isinstance(action.value.get("appId"), str):
            state["txn"][action.value["appId"]] = action.value
        elif action.name == A.DOMAIN_METADATA and isinstance(action.value.get("domain"), str):
            if action.value.get("removed"):
                state["domainMetadata"].pop(action.value["domain"], None)
            else:
                state["domainMetadata"][action.value["domain"]] = action.value
        elif action.name == A.COMMIT_INFO and action.version >= 0:
            state["commitInfo"].setdefault(action.version, action.value)
    return state
