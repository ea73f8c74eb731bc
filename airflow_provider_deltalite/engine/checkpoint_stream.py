"""Reading a checkpoint part by part, keeping only the file actions of the partitions a filter selects.

`checkpoint_reader.read_checkpoint` holds every file of a checkpoint in memory and conforms every row: right for a
whole-table snapshot, and the cost of planning one partition of a table of millions of files. Here each Parquet
file (a classic checkpoint, a part of a multi-part one, a V2 sidecar) is opened for random access and read in two
passes:

1. the partition values of ``add`` and ``remove`` only, one row group at a time, evaluated against the filter;
2. for the row groups where a row survives, the columns replay needs, in batches, each cut to the surviving rows
   before it is conformed (and before any statistics are parsed, which happens later and only for kept files).

Peak memory is one row group's partition values plus one batch of the other columns, whatever the table's size.
Parts and sidecars are read in parallel. The non-file actions (protocol, metaData, txn, domains, sidecars) are read
first, from their own columns, since binding the filter needs the latest metaData.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_deltalite.engine import actions as A
from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.arrow_util import bool_array, contiguous
from airflow_provider_deltalite.engine.checkpoint_pages import PagedColumns
from airflow_provider_deltalite.engine.checkpoint_pruning import row_group_may_match, selected_rows
from airflow_provider_deltalite.engine.checkpoint_reader import (
    Superseded,
    checkpoint_projection,
    file_actions_from_checkpoint_table,
    non_file_from_checkpoint_table,
)
from airflow_provider_deltalite.engine.commit_file import (
    NonFileAction,
    clean_commit_bytes,
    empty_file_actions,
    find_non_file_actions,
    parse_commit_file_actions,
)
from airflow_provider_deltalite.engine.errors import CheckpointUnreadable, CorruptLog
from airflow_provider_deltalite.engine.log_path import LOG_DIR, SIDECAR_DIR
from airflow_provider_deltalite.engine.log_segment import CheckpointRef
from airflow_provider_deltalite.engine.partition_filter import BoundPartitionFilter
from airflow_provider_deltalite.engine.storage import Storage

# Rows decoded at once in the second pass: a batch of paths and JSON stats of this many files is a few MB.
BATCH_ROWS = 32_768
# How much of a column chunk is read from storage at a time (pyarrow's buffered stream), so a checkpoint's
# row group of a million rows is never held compressed in memory as a whole.
READ_BUFFER = 1 << 20
# Files of one checkpoint read at once (parts of a multi-part checkpoint, V2 sidecars).
PARALLEL_FILES = 4
# Each file's rows take sequence numbers from their own range, so parallel reads need no coordination; a
# Parquet file of a checkpoint holds far fewer than 2**34 rows.
SEQ_BASE = -(1 << 50)
SEQ_STRIDE = 1 << 34

_NON_FILE = (A.PROTOCOL, A.METADATA, A.TXN, A.DOMAIN_METADATA, A.CHECKPOINT_METADATA, A.SIDECAR)


@dataclass
class CheckpointSources:
    """A checkpoint opened for pruned reading: its non-file actions, and where its file actions are."""

    version: int
    non_file: list[NonFileAction]
    parquet_paths: list[str]  # relative to the table root: parts and sidecars
    json_parts: list[bytes]


def open_checkpoint(storage: Storage, ref: CheckpointRef) -> CheckpointSources:
    """Read a checkpoint's non-file actions (from their own columns) and find the files that hold its file actions.

    Raises:
        CheckpointUnreadable: a file is missing or is not a readable checkpoint file (naming it).
        CorruptLog: the checkpoint has no protocol or metaData action.
    """
    non_file: list[NonFileAction] = []
    parquet: list[str] = []
    json_parts: list[bytes] = []
    for f in ref.files:
        if f.parsed.file_format == "json":
            data = clean_commit_bytes(_read_or_unreadable(storage, f.path, ref.version))
            json_parts.append(data)
            non_file.extend(find_non_file_actions([(ref.version, data)], storage.table_uri, order_base=-1_000_000_000))
            continue
        parquet.append(f.path)
        with open_checkpoint_part(storage, f.path, ref.version) as pf:
            non_file.extend(non_file_from_checkpoint_table(_non_file_rows(pf), ref.version))
    for sidecar in (a.value for a in non_file if a.name == A.SIDECAR):
        path = str(sidecar.get("path", ""))
        parquet.append(path if "/" in path else f"{LOG_DIR}/{SIDECAR_DIR}/{path}")
    if not any(a.name == A.PROTOCOL for a in non_file) or not any(a.name == A.METADATA for a in non_file):
        raise CorruptLog(f"checkpoint {ref.version} has no protocol or metaData action", storage.table_uri)
    return CheckpointSources(ref.version, non_file, parquet, json_parts)


def _non_file_rows(pf: pq.ParquetFile) -> pa.Table:
    """The rows of a checkpoint file that hold non-file actions, in file order (the other rows' columns null).

    Decoding a nested column such as ``metaData`` for a million null rows costs a third of a second; its leading
    leaf alone costs a few ms and carries the struct's validity (definition levels). So one leaf per action finds
    the rows that hold one, and the whole columns are decoded only up to the last of them: writers put protocol
    and metaData first, so that is usually the first batch.
    """
    schema = pf.schema_arrow
    columns = [c for c in _NON_FILE if c in schema.names and pa.types.is_struct(schema.field(c).type)]
    others = [c for c in _NON_FILE if c in schema.names and c not in columns]
    if not columns:
        return pf.read(columns=others)
    if others:  # not a struct (no checkpoint writer does this): read them whole
        return pf.read(columns=columns + others)
    present = _rows_present(pf, [f"{c}.{schema.field(c).type.field(0).name}" for c in columns])
    wanted = np.flatnonzero(present)
    if not len(wanted):
        return pa.table({c: pa.nulls(0, schema.field(c).type) for c in columns})
    return present_rows(pf, present, columns)


def present_rows(
    pf: pq.ParquetFile, present: np.ndarray, columns: list[str], row_groups: Sequence[int] | None = None
) -> pa.Table:
    """The ``columns`` of the rows ``present`` marks (over ``row_groups``, or the whole file), decoded a batch at a
    time and only up to the last marked row: what the non-file reads keep of a checkpoint."""
    last = int(np.flatnonzero(present)[-1])
    pieces = []
    offset = 0
    for batch in pf.iter_batches(batch_size=BATCH_ROWS, row_groups=row_groups, columns=columns, use_threads=False):
        chosen = present[offset : offset + batch.num_rows]
        if chosen.any():
            pieces.append(pc.filter(pa.Table.from_batches([batch]), bool_array(chosen)))
        offset += batch.num_rows
        if offset > last:
            break
    return pa.concat_tables(pieces)


def _rows_present(pf: pq.ParquetFile, probes: list[str]) -> np.ndarray:
    """Rows where one of the ``probes`` leaves is not null, a row group at a time; a row group whose statistics say
    every probe is null there is not read (the file actions' row groups of a large checkpoint). The probes are
    fields the protocol requires of their action (minReaderVersion, id, appId, domain, version, path), so a null
    one is a row without that action."""
    leaves = _leaf_indexes(pf)
    parts = []
    for rg in range(pf.num_row_groups):
        meta = pf.metadata.row_group(rg)
        n = meta.num_rows
        stats = [meta.column(leaves[p]).statistics if p in leaves else None for p in probes]
        if all(s is not None and s.has_null_count and s.null_count == n for s in stats):
            parts.append(np.zeros(n, dtype=bool))
            continue
        probe = pf.read_row_group(rg, columns=probes, use_threads=False)
        present = np.zeros(n, dtype=bool)
        for name in probe.column_names:
            present |= np.asarray(pc.is_valid(probe.column(name)).to_numpy(zero_copy_only=False), dtype=bool)
        parts.append(present)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=bool)


def pruned_checkpoint_file_actions(
    storage: Storage,
    sources: CheckpointSources,
    partition_columns: list[str],
    keep: BoundPartitionFilter,
    superseded: Superseded | None,
    fields: frozenset[str] | None = None,
) -> tuple[pa.Table, pa.Table]:
    """The checkpoint's adds and removes whose partitions ``keep`` selects and no later commit supersedes (of their
    fields only ``fields`` and the key fields, when given).

    Raises:
        CheckpointUnreadable: a part or sidecar is missing or unreadable (naming it).
    """

    def read(indexed: tuple[int, str]) -> tuple[pa.Table, pa.Table]:
        index, path = indexed
        seq = SEQ_BASE + index * SEQ_STRIDE
        return _pruned_file(storage, path, sources.version, partition_columns, keep, superseded, seq, fields)

    paths = list(enumerate(sources.parquet_paths))
    if len(paths) > 1:
        with ThreadPoolExecutor(max_workers=min(PARALLEL_FILES, len(paths))) as pool:
            pieces = list(pool.map(read, paths))
    else:
        pieces = [read(p) for p in paths]
    if sources.json_parts:
        seq = SEQ_BASE + len(paths) * SEQ_STRIDE
        a, r = parse_commit_file_actions(
            [(-1, d) for d in sources.json_parts], partition_columns, storage.table_uri, seq_base=seq
        )
        pieces.append((_keep_rows(a, keep, superseded), _keep_rows(r, keep, superseded)))
    if not pieces:
        return empty_file_actions(partition_columns)
    adds = pa.concat_tables([p[0] for p in pieces], promote_options="permissive")
    removes = pa.concat_tables([p[1] for p in pieces], promote_options="permissive")
    return adds, removes


def _keep_rows(rows: pa.Table, keep: BoundPartitionFilter, superseded: Superseded | None) -> pa.Table:
    mask = keep.mask_struct(rows.column("partitionValues"))
    if superseded is not None and rows.num_rows:
        gone = superseded(rows.column("path"), rows.column("deletionVector"))
        mask &= ~np.asarray(gone.to_numpy(zero_copy_only=False), dtype=bool)
    return rows if mask.all() else pc.filter(rows, pa.array(mask))


def _pruned_file(
    storage: Storage,
    path: str,
    version: int,
    partition_columns: list[str],
    keep: BoundPartitionFilter,
    superseded: Superseded | None,
    seq: int,
    fields: frozenset[str] | None,
) -> tuple[pa.Table, pa.Table]:
    pieces = list(checkpoint_file_batches(storage, path, version, partition_columns, keep, superseded, seq, fields))
    if not pieces:
        return empty_file_actions(partition_columns)
    return pa.concat_tables([a for a, _ in pieces]), pa.concat_tables([r for _, r in pieces])


def stream_checkpoint_file_actions(
    storage: Storage,
    sources: CheckpointSources,
    partition_columns: list[str],
    superseded: Superseded | None,
    fields: frozenset[str] | None = None,
) -> Iterator[tuple[pa.Table, pa.Table]]:
    """Every add and remove of the checkpoint no later commit supersedes, a batch at a time (adds, removes), file
    after file: what a whole-table aggregation reads without holding the table.

    Raises:
        CheckpointUnreadable: a part or sidecar is missing or unreadable (naming it), possibly after some batches.
    """
    for index, path in enumerate(sources.parquet_paths):
        seq = SEQ_BASE + index * SEQ_STRIDE
        yield from checkpoint_file_batches(
            storage, path, sources.version, partition_columns, None, superseded, seq, fields
        )
    if sources.json_parts:
        seq = SEQ_BASE + len(sources.parquet_paths) * SEQ_STRIDE
        a, r = parse_commit_file_actions(
            [(-1, d) for d in sources.json_parts], partition_columns, storage.table_uri, seq_base=seq
        )
        if superseded is not None:
            a = pc.filter(a, pc.invert(superseded(a.column("path"), a.column("deletionVector"))))
            r = pc.filter(r, pc.invert(superseded(r.column("path"), r.column("deletionVector"))))
        yield a, r


def checkpoint_remove_paths(storage: Storage, sources: CheckpointSources) -> pa.Array:
    """The paths of the checkpoint's removes (one leaf column read per file; superseded ones included)."""
    paths = []
    for path in sources.parquet_paths:
        with open_checkpoint_part(storage, path, sources.version) as pf:
            if A.REMOVE not in pf.schema_arrow.names:
                continue
            column = contiguous(pf.read(columns=[f"{A.REMOVE}.path"]).column(A.REMOVE))
            paths.append(pc.cast(pc.filter(contiguous(column.field("path")), pc.is_valid(column)), pa.string()))
    if sources.json_parts:
        _, r = parse_commit_file_actions([(-1, d) for d in sources.json_parts], [], storage.table_uri)
        paths.append(pc.cast(contiguous(r.column("path")), pa.string()))
    return pa.concat_arrays(paths) if paths else pa.array([], pa.string())


def checkpoint_file_batches(
    storage: Storage,
    path: str,
    version: int,
    partition_columns: list[str],
    keep: BoundPartitionFilter | None,
    superseded: Superseded | None,
    seq: int,
    fields: frozenset[str] | None,
    row_groups: Sequence[int] | None = None,
) -> Iterator[tuple[pa.Table, pa.Table]]:
    """The adds and removes of one checkpoint file (of its ``row_groups`` only, when given), a batch at a time, in
    deltalite's layout: with ``keep``, only rows of the partitions it selects (row groups without one are not
    decoded beyond their partition values)."""
    with _reading_source(storage, path, version) as (pf, source):
        schema = pf.schema_arrow
        kinds = [k for k in (A.ADD, A.REMOVE) if k in schema.names and pa.types.is_struct(schema.field(k).type)]
        if not kinds:
            return
        projection = [c for c in checkpoint_projection(schema, False, fields) if c.split(".")[0] in kinds]
        with_parsed = [c for c in checkpoint_projection(schema, True, fields) if c.split(".")[0] in kinds]
        leaves = _leaf_indexes(pf)
        stats_column = leaves.get(f"{A.ADD}.stats")
        paged: PagedColumns | None = None
        footer_read = False
        values_reader: pq.ParquetFile | None = None
        for rg in range(pf.num_row_groups) if row_groups is None else row_groups:
            if keep is not None and not row_group_may_match(pf, rg, keep, leaves):
                continue
            decoded: dict[str, pa.Array] = {}
            if keep is not None and values_reader is None:
                values_reader = _with_dictionaries(pf, source, leaves)
            rows = selected_rows(values_reader, rg, kinds, keep, decoded) if keep is not None else None
            if rows is not None and not rows.any():
                continue
            # stats only in parsed form in this row group (writeStatsAsJson=false): read stats_parsed as well
            wants_stats = fields is None or "stats" in fields
            columns = with_parsed if wants_stats and _all_null(pf, rg, stats_column) else projection
            if rows is not None and int(rows.sum()) > PAGED_MAX_ROWS:
                # many rows kept: few pages to skip, and the kept rows are streamed a batch at a time as they are
                for table in _kept_batches(pf, rg, columns, rows):
                    a, r, seq = file_actions_from_checkpoint_table(table, partition_columns, seq, superseded)
                    yield a, r
                continue
            if rows is None:
                for batch in pf.iter_batches(
                    batch_size=BATCH_ROWS, row_groups=[rg], columns=columns, use_threads=False
                ):
                    table = pa.Table.from_batches([batch])
                    a, r, seq = file_actions_from_checkpoint_table(table, partition_columns, seq, superseded)
                    yield a, r
                continue
            large = [c for c in columns if c in leaves and _chunk_bytes(pf, rg, leaves[c]) >= PAGED_COLUMN_BYTES]
            if large and not footer_read:
                footer_read = True
                paged = PagedColumns.open(source)
            chosen = pa.array(rows)
            # the partition values the first pass decoded, and the large columns read by the pages that hold a row
            held = {c: pc.filter(decoded[c], chosen) for c in columns if c in decoded}
            for column in large:
                values = paged.rows(rg, column, rows) if paged is not None else None
                if values is not None:
                    held[column] = values
            rest = [c for c in columns if c not in held]
            table = _assemble(schema, columns, _decoded_rows(pf, rg, rest, rows), held)
            a, r, seq = file_actions_from_checkpoint_table(table, partition_columns, seq, superseded)
            yield a, r


# A column chunk at least this large (uncompressed) is read page by page when a filter keeps few of its rows: the
# paths and JSON statistics of a checkpoint's row group. Smaller ones are decoded whole (a page is about 1 MiB).
PAGED_COLUMN_BYTES = 1 << 20
# Above this many kept rows in a row group few pages are skipped, and the kept rows are streamed a batch at a time.
PAGED_MAX_ROWS = BATCH_ROWS


def _chunk_bytes(pf: pq.ParquetFile, rg: int, leaf: int) -> int:
    return int(pf.metadata.row_group(rg).column(leaf).total_uncompressed_size)


def _kept_batches(pf: pq.ParquetFile, rg: int, columns: list[str], rows: np.ndarray) -> Iterator[pa.Table]:
    """The rows ``rows`` of ``columns`` of row group ``rg``, decoded in batches up to the last row kept (pyarrow
    cannot skip pages, but it can stop), each batch cut to its kept rows."""
    last = int(np.flatnonzero(rows)[-1])
    offset = 0
    for batch in pf.iter_batches(batch_size=BATCH_ROWS, row_groups=[rg], columns=columns, use_threads=False):
        start, offset = offset, offset + batch.num_rows
        if start > last:
            break
        chosen = rows[start:offset]
        if chosen.any():
            yield pc.filter(pa.Table.from_batches([batch]), pa.array(chosen))


def _decoded_rows(pf: pq.ParquetFile, rg: int, columns: list[str], rows: np.ndarray) -> pa.Table | None:
    """`_kept_batches` in one table (None without columns)."""
    if not columns:
        return None
    return pa.concat_tables(_kept_batches(pf, rg, columns, rows))


def _assemble(schema: pa.Schema, columns: list[str], decoded: pa.Table | None, held: dict[str, Any]) -> pa.Table:
    """The kept rows of ``columns`` as pyarrow reads them (one struct per action, its fields in schema order), from
    the columns decoded in the second pass and those ``held`` already (each a struct of its one field)."""
    if not held:
        assert decoded is not None
        return decoded
    out = {}
    for kind in dict.fromkeys(c.split(".", 1)[0] for c in columns):
        names = {c.split(".", 1)[1] for c in columns if c.split(".", 1)[0] == kind}
        fields = [f for f in schema.field(kind).type if f.name in names]
        whole = contiguous(decoded.column(kind)) if decoded is not None and kind in decoded.column_names else None
        children = []
        validity = None if whole is None else pc.is_valid(whole)
        for f in fields:
            paged = held.get(f"{kind}.{f.name}")
            if paged is not None:
                child = paged.field(0)
                # a one-column file has no Arrow schema of the checkpoint's: its strings may be of another width
                children.append(child if child.type == f.type else pc.cast(child, f.type))
                validity = pc.is_valid(paged) if validity is None else validity
            else:
                assert whole is not None
                children.append(whole.field(f.name))
        assert validity is not None
        out[kind] = pa.StructArray.from_arrays(children, fields=fields, mask=pc.invert(validity))
    return pa.table(out)


def _leaf_indexes(pf: pq.ParquetFile) -> dict[str, int]:
    schema = pf.metadata.schema
    return {schema.column(i).path: i for i in range(len(schema))}


def _with_dictionaries(pf: pq.ParquetFile, source: Any, leaves: dict[str, int]) -> pq.ParquetFile:
    """``pf`` reading the keys and values of the partitionValues maps as dictionaries (the first pass): a million
    rows hold a few thousand distinct values, and building a string per row was most of that pass's decoding."""
    names = [f"{k}.partitionValues.key_value.{leaf}" for k in (A.ADD, A.REMOVE) for leaf in ("key", "value")]
    wanted = [name for name in names if name in leaves]
    if not wanted:
        return pf
    try:
        return pq.ParquetFile(source, metadata=pf.metadata, read_dictionary=wanted, buffer_size=READ_BUFFER)
    except (pa.ArrowException, KeyError, ValueError, OSError):
        return pf


def _all_null(pf: pq.ParquetFile, rg: int, column: int | None) -> bool:
    """Whether the JSON stats of a row group's adds are all null (only stats_parsed holds them), by its metadata."""
    if column is None:
        return "stats_parsed" in pf.schema_arrow.field(A.ADD).type.names if A.ADD in pf.schema_arrow.names else False
    meta = pf.metadata.row_group(rg).column(column)
    stats = meta.statistics
    if stats is None or not stats.has_null_count:
        return _has_parsed(pf)  # unknown: reading stats_parsed too is always correct
    return stats.null_count == meta.num_values and _has_parsed(pf)


def _has_parsed(pf: pq.ParquetFile) -> bool:
    return A.ADD in pf.schema_arrow.names and "stats_parsed" in pf.schema_arrow.field(A.ADD).type.names


def _read_or_unreadable(storage: Storage, path: str, version: int) -> bytes:
    try:
        return storage.read(path)
    except FileNotFoundError:
        missing = f"checkpoint {version} is missing its file {_name(path)}"
        raise CheckpointUnreadable(missing, storage.table_uri) from None


@contextlib.contextmanager
def open_checkpoint_part(storage: Storage, path: str, version: int) -> Iterator[Any]:
    """A checkpoint Parquet file opened for random access; any failure to read it names the file."""
    with _reading_source(storage, path, version) as (pf, _):
        yield pf


@contextlib.contextmanager
def _reading_source(storage: Storage, path: str, version: int) -> Iterator[tuple[Any, Any]]:
    """`open_checkpoint_part`, with the file object too (for `PagedColumns`, which reads pages of it)."""
    name = _name(path)
    try:
        source = storage.open_data_file(storage.full_path(path)) if storage.native_files else storage.open_input(path)
    except FileNotFoundError:
        raise CheckpointUnreadable(f"checkpoint {version} is missing its file {name}", storage.table_uri) from None
    try:
        with source:
            yield pq.ParquetFile(source, buffer_size=READ_BUFFER), source
    except FileNotFoundError:
        raise CheckpointUnreadable(f"checkpoint {version} is missing its file {name}", storage.table_uri) from None
    except (pa.ArrowException, OSError, ValueError, KeyError, IndexError) as exc:
        raise CheckpointUnreadable(
            f"checkpoint {version} file {name} is unreadable: {type(exc).__name__}", storage.table_uri
        ) from None


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


__all__ = [
    "CheckpointSources",
    "checkpoint_remove_paths",
    "open_checkpoint",
    "pruned_checkpoint_file_actions",
    "stream_checkpoint_file_actions",
]
