"""The rewrite primitive: read some live files of one partition and write their rows into one new data file.

OPTIMIZE hands each bin to an executor as a `RewriteTask`; the local executor runs `rewrite_files` on a thread, the
Spark executor on a Python worker of the cluster. Tasks and results are plain picklable data, so both places produce
the same actions. Memory stays bounded: rows stream from the inputs in batches, decoded and gathered into row groups
on a thread of their own (`engine.read_ahead`, `row_group_tables`) while the task's thread encodes the row group before
them; a bin is never held in memory whole.

Memory of one rewrite task, whatever the size of the bin, the target file size or the table::

    G_in + 3 * B + 3 * (row_group_bytes + B) + D + (row_group_bytes + B)

``G_in`` is the largest compressed input row group (the reader holds one row group's column chunks, `iter_file_rows`:
about 30 MB for delta-rs' million-row groups, up to 128 MiB for Spark's), ``B`` one decoded batch
(`STREAM_BATCH_ROWS` rows: 5 MB at 40 bytes a row), ``row_group_bytes`` the writer's buffer (`WriterOptions`: filled
up to one batch past it, then encoded, which holds the row group's pages besides), ``D`` the dictionary encoders'
hash tables (a few tens of MB at most: a dictionary is dropped once it outgrows its page), and the last term the
reading thread's lead (the row group it gathers, or the one it has handed over and waits to see taken). The target
size only lengthens the file's footer. The local executor runs ``max_concurrent_tasks`` tasks at once, on top of the
process itself (interpreter, pyarrow, the snapshot: 100 to 200 MB); at the defaults (16 MiB row groups, 2 tasks) a
compaction of 5.5 GiB peaked at 394 MB (benchmarks/memory_bound.py).
"""

from __future__ import annotations

import json
import operator
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_deltalite.engine.column_encodings import input_verdicts
from airflow_provider_deltalite.engine.conform import delta_schema_to_arrow, to_physical
from airflow_provider_deltalite.engine.data_file_paths import new_data_file_path, partition_directory
from airflow_provider_deltalite.engine.data_file_writer import FileWriter, WriterOptions, row_group_tables
from airflow_provider_deltalite.engine.data_files import iter_file_rows
from airflow_provider_deltalite.engine.errors import UploadInterrupted
from airflow_provider_deltalite.engine.file_actions import remove_from_add
from airflow_provider_deltalite.engine.read_ahead import read_ahead
from airflow_provider_deltalite.engine.row_tracking import (
    FileRowIds,
    MaterializedColumns,
    materialized_columns,
    materialized_schema,
    split_materialized,
    with_materialized,
)
from airflow_provider_deltalite.engine.snapshot import Snapshot
from airflow_provider_deltalite.engine.stats_collect import StatsCollector
from airflow_provider_deltalite.engine.storage import Storage

T = TypeVar("T")

# A bin whose upload is interrupted by a transient fault is written again, up to this many times in all.
UPLOAD_ATTEMPTS = 3


@dataclass(frozen=True)
class TableContext:
    """What a worker needs to read and write files of a table at one version (picklable; no snapshot)."""

    storage: Storage
    schema: dict
    column_mapping_mode: str
    partition_columns: tuple[str, ...]
    partition_physical_names: tuple[str, ...]
    configuration: Mapping[str, str]
    # row tracking preserved: the hidden columns every rewritten file carries
    row_tracking: MaterializedColumns | None = None

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot) -> TableContext:
        return cls(
            storage=snapshot.storage,
            schema=snapshot.schema,
            column_mapping_mode=snapshot.column_mapping_mode,
            partition_columns=tuple(snapshot.partition_columns),
            partition_physical_names=tuple(snapshot.partition_physical_names),
            configuration=dict(snapshot.properties.explicit),
            row_tracking=materialized_columns(snapshot),
        )


@dataclass(frozen=True)
class RewriteTask:
    """One unit of rewrite work: live add actions of one partition whose rows go into one new file.

    Attributes:
        table: the table.
        task_id: the bin's number in its plan (results carry it back).
        files: the live add actions, as dicts in log form (with their deletion vectors).
        deletion_timestamp: the time stamped on every remove (one per operation, as the reference does).
        writer: how the new file is encoded.
        tags: tags for the new file's add action, if any.
        min_row_group_size: stitch (`engine/rewrite_stitch.py`): copy the row groups of at least this many compressed
            bytes as they are and re-encode the rest; None: re-encode every row (`rewrite_files`).
        decode_threads: decode each input's columns on pyarrow's thread pool. Worth it only when fewer tasks than
            cores run at once: when every core runs a task, handing a small file's few column chunks to the pool
            costs more than it saves (a compaction of 400 files of 0.6 MiB on 2 tasks: 4% more CPU).
    """

    table: TableContext
    task_id: int
    files: tuple[Mapping[str, Any], ...]
    deletion_timestamp: int
    writer: WriterOptions = field(default_factory=WriterOptions)
    tags: Mapping[str, str] | None = None
    min_row_group_size: int | None = None
    decode_threads: bool = True


@dataclass(frozen=True)
class RewriteResult:
    """What a rewrite wrote: the add and remove actions to commit and what was read and written."""

    task_id: int
    adds: tuple[dict[str, Any], ...]
    removes: tuple[dict[str, Any], ...]
    rows_read: int
    rows_written: int
    bytes_read: int
    bytes_written: int
    deletion_vectors_removed: int
    deleted_rows_removed: int
    # how the rows got there (`engine/rewrite_stitch.py`): inputs with row groups copied byte for byte, inputs
    # decoded and encoded again, and the column-chunk bytes copied
    files_copied: int = 0
    files_reencoded: int = 0
    bytes_copied: int = 0
    # bytes this process wrote to the store for the new files (a stitched file composed on the store from ranges of
    # its inputs sends only what it re-encoded, its page indexes and its footer)
    bytes_uploaded: int = 0


def rewrite_files(task: RewriteTask) -> RewriteResult:
    """Rewrite the rows of ``task.files`` into one new data file (none when every row is deleted).

    The new file lands in the partition's directory under a fresh name, with the table's physical column names
    (and field ids in id mode), Delta stats for the configured columns, and ``dataChange=false`` on its add and on
    every remove. A failure leaves at most an unreferenced file behind, which VACUUM removes.

    Raises:
        StorageError: an input is missing or unreadable, or the output cannot be written.
        SchemaError: an input column cannot be read as the table's type.
    """
    if not task.files:
        raise ValueError("a rewrite task needs at least one file")

    def rewrite_once() -> RewriteResult:
        counter = _RowCounter()
        add = write_data_file(
            task.table,
            dict(task.files[0].get("partitionValues") or {}),
            counter.count(
                read_ahead(
                    row_group_tables(
                        iter_live_rows(task.table, task.files, use_threads=task.decode_threads),
                        task.writer.row_group_bytes,
                    ),
                    task.writer.row_group_bytes,
                    operator.attrgetter("nbytes"),
                )
            ),
            task.writer,
            tags=task.tags,
            verdicts=input_verdicts(task.table.storage, task.files) if task.writer.dictionary else None,
        )
        return rewrite_result(task.task_id, task.files, [add] if add else [], task.deletion_timestamp, counter.rows)

    return again_after_interrupted_uploads(rewrite_once)


def again_after_interrupted_uploads(write: Callable[[], T]) -> T:
    """Run ``write`` (which reads its inputs and writes new files under fresh names), again after an
    `UploadInterrupted`, up to UPLOAD_ATTEMPTS times in all.

    The inputs can be read again, unlike an upload stream. Whatever an abandoned upload left on the store is referenced
    by nothing and is removed by VACUUM.
    """
    for attempt in range(1, UPLOAD_ATTEMPTS + 1):
        try:
            return write()
        except UploadInterrupted:
            if attempt == UPLOAD_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


def iter_live_rows(
    ctx: TableContext,
    files: Sequence[Mapping[str, Any]],
    columns: Sequence[str] | None = None,
    *,
    use_threads: bool = True,
) -> Iterator[pa.Table]:
    """The live rows of ``files`` (deletion vectors applied) in the logical data schema, streamed in file order.

    When the table preserves row ids and all columns are read, the rows also carry the materialised row-tracking
    columns (`iter_file_rows`), which `write_data_file` writes back. ``use_threads``: decode each file's columns on
    pyarrow's thread pool (`RewriteTask.decode_threads`).
    """
    tracked = ctx.row_tracking if columns is None else None
    for add in files:
        yield from iter_file_rows(
            ctx.storage,
            add["path"],
            add.get("deletionVector"),
            ctx.schema,
            mode=ctx.column_mapping_mode,
            partition_columns=ctx.partition_columns,
            columns=columns,
            row_ids=FileRowIds.of(tracked, add) if tracked is not None else None,
            use_threads=use_threads,
            size=int(add["size"]) if add.get("size") is not None else None,
        )


def write_data_file(
    ctx: TableContext,
    partition_values: Mapping[str, str | None],
    rows: Iterable[pa.Table],
    writer: WriterOptions,
    *,
    tags: Mapping[str, str] | None = None,
    verdicts: Mapping[str, bool] | None = None,
) -> dict[str, Any] | None:
    """Write logical ``rows`` into one new data file of the partition; its add action (None when no rows came).

    ``verdicts``: the inputs' dictionary verdicts per physical column (`dictionary_columns`).

    The add has ``dataChange=false``, Delta stats for the configured columns, and the table's physical names. When
    the table preserves row ids, the file also holds the materialised row-tracking columns: those ``rows`` carry (as
    `iter_live_rows` gives them), else nulls (new rows: their ids come from the file's baseRowId).
    """
    storage = ctx.storage
    mode = ctx.column_mapping_mode
    physical_schema = delta_schema_to_arrow(ctx.schema, physical=True, mode=mode, exclude=ctx.partition_columns)
    tracked = ctx.row_tracking
    if tracked is not None:
        physical_schema = materialized_schema(physical_schema, tracked)
    directory = partition_directory(ctx.partition_columns, ctx.partition_physical_names, partition_values)
    relative, log_path = new_data_file_path(directory, codec=writer.compression, column_mapping=mode != "none")
    stats = StatsCollector(
        ctx.schema,
        column_mapping_mode=mode,
        partition_columns=ctx.partition_columns,
        configuration=ctx.configuration,
        table_uri=storage.table_uri,
    )
    # the writer keeps the min and max of every column's row groups anyway: those of strings and integers are taken from
    # its footer, not computed twice
    from_footer = stats.bounds_from_parquet(physical_schema)
    # row ids run in long ascending stretches: delta encoding stores them in a few bits (4 MB less per million rows)
    out = FileWriter(
        storage,
        relative,
        physical_schema,
        writer,
        delta_encoded=(tracked.row_id,) if tracked else (),
        verdicts=verdicts,
        # per row group, not per input batch: one kernel call per column for a group of many small inputs' rows (the
        # materialised columns are not in the table schema: no stats)
        on_group=lambda group: stats.update(group, counted_only=from_footer),
    )

    def physical(chunk: pa.Table) -> pa.Table:
        hidden: list[Any] = []
        if tracked is not None:
            chunk, hidden = split_materialized(chunk, tracked)
        table = to_physical(chunk, ctx.schema, mode=mode, exclude=ctx.partition_columns, table_uri=storage.table_uri)
        return with_materialized(table, tracked, hidden) if tracked is not None else table

    try:
        for group in row_group_tables((physical(c) for c in rows if c.num_rows), writer.row_group_bytes):
            out.write(group)
        size = out.close()
        if from_footer and out.metadata is not None:
            _bounds_from_footer(stats, from_footer, out.metadata, lambda g, n: out.read_back(g, n))
    except BaseException:
        out.abort()
        raise
    if not stats.num_records:
        return None
    add: dict[str, Any] = {
        "path": log_path,
        "partitionValues": dict(partition_values),
        "size": size,
        "modificationTime": int(time.time() * 1000),
        "dataChange": False,
        "stats": stats.to_json(),
    }
    if tags:
        add["tags"] = dict(tags)
    return add


def _bounds_from_footer(
    stats: StatsCollector,
    names: Sequence[str],
    metadata: pq.FileMetaData,
    read_back: Callable[[int, str], pa.ChunkedArray],
) -> None:
    """Add the min and max of the columns ``names`` (`StatsCollector.bounds_from_parquet`: strings and integers) to
    ``stats`` from the row-group statistics of the file's footer; a row group whose chunk has values but no bounds (the
    writer keeps none of a string longer than its statistics limit, 4 KiB) is read back from the file."""
    if metadata.num_row_groups == 0:
        return
    first = metadata.row_group(0)
    index = {first.column(j).path_in_schema: j for j in range(first.num_columns)}
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        for name in names:
            chunk = group.column(index[name]) if name in index else None
            st = chunk.statistics if chunk is not None else None
            if st is not None and st.has_min_max and type(st.min) is type(st.max) and type(st.min) in (str, int):
                stats.add_bounds(name, (st.min, st.max))
            elif chunk is None or st is None or not st.has_null_count or st.null_count < chunk.num_values:
                stats.add_bounds(name, read_back(g, name))


def rewrite_result(
    task_id: int,
    files: Sequence[Mapping[str, Any]],
    adds: Sequence[dict[str, Any]],
    deletion_timestamp: int,
    rows_read: int,
) -> RewriteResult:
    """The result of rewriting ``files`` into ``adds``: removes (each with its file's deletion vector) and counts."""
    removes = tuple(remove_from_add(a, deletion_timestamp, data_change=False) for a in files)
    dvs = [a["deletionVector"] for a in files if a.get("deletionVector")]
    return RewriteResult(
        task_id=task_id,
        adds=tuple(adds),
        removes=removes,
        rows_read=rows_read,
        rows_written=sum(json.loads(a["stats"])["numRecords"] for a in adds),
        bytes_read=sum(int(a["size"]) for a in files),
        bytes_written=sum(int(a["size"]) for a in adds),
        deletion_vectors_removed=len(dvs),
        deleted_rows_removed=sum(int(dv.get("cardinality") or 0) for dv in dvs),
        files_reencoded=len(files),
        bytes_uploaded=sum(int(a["size"]) for a in adds),
    )


class _RowCounter:
    def __init__(self) -> None:
        self.rows = 0

    def count(self, chunks: Iterable[pa.Table]) -> Iterator[pa.Table]:
        for chunk in chunks:
            self.rows += chunk.num_rows
            yield chunk
