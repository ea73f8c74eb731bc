"""Compacting a bin by stitching: row groups that are large enough are copied byte for byte, the rest re-encoded.

A bin's rows end up in one new file either way; what differs is the work. For each input, in order:

- re-encoded whole (as `rewrite_files` does) when it has a deletion vector to apply, when its Parquet schema is not
  the one our writer gives the table (schema drift, column mapping, INT96, another writer's annotations), when it is
  encrypted or written by a writer whose statistics readers do not trust, when its Delta statistics cannot be merged
  (`engine/stats_merge.py`), or when none of its row groups reaches ``min_row_group_size``;
- otherwise its row groups of at least ``min_row_group_size`` compressed bytes are copied (`engine/parquet/stitch.py`)
  and its smaller ones decoded and encoded together with the other re-encoded rows, into row groups of the writer's
  size, in the same output file. No output has the tiny row groups that made plain concatenation slow to read
  (PARQUET-1115).

A bin with nothing to copy, and every bin of a table whose rewritten files carry materialised row-tracking columns,
goes through `rewrite_files` unchanged. Row order inside the output differs from the inputs' (copied row groups
first); OPTIMIZE promises no order, and the rows are the same.

The new file's statistics are merged from the copied inputs' Delta statistics and the statistics collected over the
re-encoded rows of the other inputs (`merge_stats`); if they cannot be merged the rows are read again for them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import queue
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from airflow_provider_deltalite.engine.column_encodings import input_verdicts
from airflow_provider_deltalite.engine.conform import delta_schema_to_arrow, to_physical
from airflow_provider_deltalite.engine.data_file_paths import new_data_file_path, partition_directory
from airflow_provider_deltalite.engine.data_file_writer import WriterOptions, parquet_writer, row_group_tables
from airflow_provider_deltalite.engine.data_files import iter_file_rows
from airflow_provider_deltalite.engine.errors import DeltaLiteError, StorageError
from airflow_provider_deltalite.engine.parquet.encodings import dictionary_verdicts
from airflow_provider_deltalite.engine.parquet.footer import FileMetaData, read_footer
from airflow_provider_deltalite.engine.parquet.stitch import (
    NotStitchable,
    SourceFile,
    StitchWriter,
    row_group_bytes,
)
from airflow_provider_deltalite.engine.rewrite import (
    RewriteResult,
    RewriteTask,
    TableContext,
    again_after_interrupted_uploads,
    iter_live_rows,
    rewrite_files,
    rewrite_result,
)
from airflow_provider_deltalite.engine.stats_collect import StatsCollector
from airflow_provider_deltalite.engine.stats_merge import load_stats, merge_stats
from airflow_provider_deltalite.engine.stats_values import dump_json_exact
from airflow_provider_deltalite.engine.storage.base import Segment

log = logging.getLogger(__name__)

# The most bytes a composed file's own pieces (re-encoded rows, page indexes, footer) may take in memory before the
# upload; a bin with more re-encoded rows streams its file instead.
COMPOSE_LITERAL_BYTES = 64 * 1024 * 1024

__all__ = ["compact_files", "reference_footer"]


def compact_files(task: RewriteTask) -> RewriteResult:
    """Rewrite ``task.files`` into one new file, copying the row groups of at least ``task.min_row_group_size``
    bytes that can be copied; `rewrite_files` when stitching is off or nothing can be copied.

    The result counts the inputs copied (``files_copied``: at least one row group copied byte for byte) and
    re-encoded (``files_reencoded``: every row decoded), and ``bytes_copied``.

    Raises:
        StorageError: an input is missing or unreadable, or the output cannot be written.
        SchemaError: an input column cannot be read as the table's type.
    """
    if task.min_row_group_size is None or task.table.row_tracking is not None or not task.files:
        return rewrite_files(task)
    if not any(_may_hold_large_row_group(add, task.min_row_group_size) for add in task.files):
        return rewrite_files(task)  # a bin of small files (or all with deletion vectors): nothing to plan
    # the fallback runs outside this retry loop: `rewrite_files` has its own, and two nested loops would write a bin
    # nine times instead of three
    stitched = again_after_interrupted_uploads(lambda: _compact_once(task))
    return stitched if stitched is not None else rewrite_files(task)


@functools.lru_cache(maxsize=16)
def _reference_bytes(schema: pa.Schema, options: WriterOptions) -> bytes:
    sink = pa.BufferOutputStream()
    parquet_writer(sink, schema, options, None).close()
    return bytes(sink.getvalue())


def reference_footer(schema: pa.Schema, options: WriterOptions) -> FileMetaData:
    """The footer our writer gives a file of ``schema`` with no rows: the schema elements, column orders, created_by
    and ``ARROW:schema`` every stitched file gets, and that its sources must match."""
    return read_footer(_reference_bytes(schema, options))


@dataclass
class _Copied:
    add: Mapping[str, Any]
    source: SourceFile
    groups: list[int]
    small: list[int]
    stats: dict[str, Any]


def _collector(ctx: TableContext) -> StatsCollector:
    return StatsCollector(
        ctx.schema,
        column_mapping_mode=ctx.column_mapping_mode,
        partition_columns=ctx.partition_columns,
        configuration=ctx.configuration,
        table_uri=ctx.storage.table_uri,
    )


def _may_hold_large_row_group(add: Mapping[str, Any], minimum: int) -> bool:
    """Whether a file could have a row group to copy: no deletion vector to apply, and at least ``minimum`` bytes
    (a row group is never larger than its file)."""
    return not add.get("deletionVector") and int(add.get("size") or 0) >= minimum


def _plan_source(
    ctx: TableContext, add: Mapping[str, Any], reference: FileMetaData, minimum: int, shape: StatsCollector
) -> _Copied | None:
    """The row groups of ``add`` to copy and to re-encode, or None when the file is re-encoded whole (why: logged)."""
    path = add["path"]
    if not _may_hold_large_row_group(add, minimum):
        return None  # its footer is not even read
    stats = load_stats(add.get("stats"))
    if stats is None or merge_stats(shape, [stats]) is None:
        log.debug("%s is re-encoded: its Delta statistics cannot be merged", path)
        return None
    storage = ctx.storage
    if not storage.serves(path):
        return None  # iter_file_rows names the problem
    full = storage.resolve_data_path(path)
    # Storage reads a range by a path it resolves itself: relative to the root, or absolute on local disk
    name = storage.relative_to_root(full)
    if name is None:
        if not storage.native_files:
            return None  # a file outside the table's root on an object store: read it the usual way
        name = full

    def read(offset: int, length: int) -> bytes:
        return storage.read_range(name, offset, length)

    def large(meta: FileMetaData) -> list[int]:
        return [i for i, g in enumerate(meta.row_groups) if row_group_bytes(g) >= minimum]

    try:
        source = SourceFile.load(path, int(add["size"]), read, reference, large)
        source.copy_name = name
    except NotStitchable as exc:
        log.debug("%s is re-encoded: %s", path, exc)
        return None
    except FileNotFoundError:
        raise StorageError(f"data file {path} is referenced by the log but missing", storage.table_uri) from None
    if source.meta.num_rows != stats["numRecords"]:
        log.debug("%s is re-encoded: its footer and its Delta statistics count different rows", path)
        return None
    groups = large(source.meta)
    if not groups:
        return None
    copied_groups = set(groups)
    small = [i for i in range(len(source.meta.row_groups)) if i not in copied_groups]
    return _Copied(add, source, groups, small, stats)


class _Reencoder:
    """Encodes row groups (`row_group_tables`), each appended to the stitched file as it is written."""

    def __init__(
        self,
        out: StitchWriter,
        schema: pa.Schema,
        options: WriterOptions,
        reference: FileMetaData,
        verdicts: dict[str, bool] | None,
    ) -> None:
        self.out = out
        self.verdicts = verdicts
        self.schema = schema
        self.options = options
        self.reference = reference
        self.rows = 0

    def write(self, group: pa.Table) -> None:
        """Encode ``group`` as one row group and append it."""
        sink = pa.BufferOutputStream()
        writer = parquet_writer(sink, self.schema, self.options, group, verdicts=self.verdicts)
        writer.write_table(group, row_group_size=max(group.num_rows, 1))
        writer.close()
        data = bytes(sink.getvalue())
        try:
            source = SourceFile.load("re-encoded rows", len(data), lambda o, n: data[o : o + n], self.reference)
        except NotStitchable as exc:  # our own writer, our own schema: cannot happen unless pyarrow changes
            raise AssertionError(f"re-encoded rows do not fit the reference footer: {exc}") from None
        self.out.append(source, range(len(source.meta.row_groups)))
        self.rows += group.num_rows


def _compact_once(task: RewriteTask) -> RewriteResult | None:
    ctx = task.table
    storage = ctx.storage
    mode = ctx.column_mapping_mode
    uri = storage.table_uri
    minimum = int(task.min_row_group_size or 0)
    physical_schema = delta_schema_to_arrow(ctx.schema, physical=True, mode=mode, exclude=ctx.partition_columns)
    reference = reference_footer(physical_schema, task.writer)
    shape = _collector(ctx)
    collector = _collector(ctx)
    partition_values = dict(task.files[0].get("partitionValues") or {})
    directory = partition_directory(ctx.partition_columns, ctx.partition_physical_names, partition_values)
    relative, log_path = new_data_file_path(directory, codec=task.writer.compression, column_mapping=mode != "none")
    # On the local disk the file is composed while the bin is planned: the kernel copies the first inputs' row groups
    # while the next inputs' footers are read (`_ComposeStream`)
    streamed = storage.composes_from_ranges and storage.native_files
    sink: Any = None
    out: StitchWriter | None = None
    plans: list[_Copied | None] = []
    try:
        for input_add in task.files:
            plan = _plan_source(ctx, input_add, reference, minimum, shape)
            plans.append(plan)
            if plan is not None and streamed:
                if out is None:
                    sink = _ComposeStream(storage, relative)
                    out = StitchWriter(sink.write, sink.copy)
                out.append(plan.source, plan.groups)
    except BaseException:
        if sink is not None:
            _close_quietly(sink)
        raise
    copied = [p for p in plans if p is not None]
    if not copied:
        return None  # nothing to copy: the caller re-encodes the bin
    whole = [add for add, p in zip(task.files, plans, strict=True) if p is None]

    segments: list[Segment] | None = None
    if out is None:
        # On a store that composes objects from ranges (S3), the copied chunks never pass through this process: the
        # file is a list of ranges and the bytes written here, sent as one multipart upload. Those bytes are held
        # until then, so only a bin whose re-encoded part is small goes that way.
        literal = sum(row_group_bytes(p.source.meta.row_groups[g]) for p in copied for g in p.small)
        literal += sum(int(add.get("size") or 0) for add in whole)
        if storage.composes_from_ranges and literal <= COMPOSE_LITERAL_BYTES:
            segments = []
            sink = _Segments(segments)
        else:
            sink = storage.create_data_file(storage.full_path(relative))
    try:
        if out is None:
            out = StitchWriter(sink.write, sink.copy if segments is not None else None)
            for plan in copied:
                out.append(plan.source, plan.groups)
        bytes_copied = out.bytes_copied
        verdicts = None
        if task.writer.dictionary:
            verdicts = dictionary_verdicts([p.source.meta for p in copied])
            for column, verdict in input_verdicts(storage, whole).items():
                verdicts[column] = verdict and verdicts.get(column, True)
        again = _Reencoder(out, physical_schema, task.writer, reference, verdicts)

        def physical(rows: pa.Table) -> pa.Table:
            return to_physical(rows, ctx.schema, mode=mode, exclude=ctx.partition_columns, table_uri=uri)

        def reencoded() -> Iterator[pa.Table]:
            for plan in copied:
                if plan.small:  # their rows are in the file's own Delta statistics: no need to collect them
                    for rows in iter_file_rows(
                        storage,
                        plan.add["path"],
                        None,
                        ctx.schema,
                        mode=mode,
                        partition_columns=ctx.partition_columns,
                        row_groups=plan.small,
                    ):
                        yield physical(rows)
            for rows in iter_live_rows(ctx, whole):
                if rows.num_rows:
                    batch = physical(rows)
                    collector.update(batch)
                    yield batch

        for group in row_group_tables(reencoded(), task.writer.row_group_bytes):
            again.write(group)
        size = out.finish(reference)
        if streamed:
            uploaded = sink.finish()
        elif segments is not None:
            uploaded = storage.compose(relative, segments)
        else:
            sink.close()
            uploaded = size
    except DeltaLiteError:
        _close_quietly(sink)
        raise
    except (pa.ArrowException, OSError) as exc:
        _close_quietly(sink)
        raise StorageError(f"cannot write data file {relative}: {type(exc).__name__}: {exc}", uri) from None
    except BaseException:
        _close_quietly(sink)
        raise
    inputs = [p.stats for p in copied]
    if collector.num_records:
        inputs.append(collector.to_dict())
    stats = merge_stats(shape, inputs)
    if stats is None:
        # a bound the collector could not print (a date outside years 1-9999) in the re-encoded rows: count again
        collector = _collector(ctx)
        for rows in iter_live_rows(ctx, task.files):
            if rows.num_rows:
                collector.update(physical(rows))
        stats = collector.to_dict()
    written = sum(g.num_rows for g in out.row_groups)
    if written != stats["numRecords"]:
        raise StorageError(
            f"stitched file {relative} holds {written} rows where its inputs hold {stats['numRecords']}; nothing is "
            "committed and the file is left for VACUUM",
            uri,
        )
    add: dict[str, Any] = {
        "path": log_path,
        "partitionValues": partition_values,
        "size": size,
        "modificationTime": int(time.time() * 1000),
        "dataChange": False,
        "stats": dump_json_exact(stats),
    }
    if task.tags:
        add["tags"] = dict(task.tags)
    result = rewrite_result(task.task_id, task.files, [add], task.deletion_timestamp, written)
    return dataclasses.replace(
        result,
        files_copied=len(copied),
        files_reencoded=len(whole),
        bytes_copied=bytes_copied,
        bytes_uploaded=uploaded,
    )


class _Segments:
    """Collects a composed file's pieces: bytes written here (merged while contiguous) and ranges to copy."""

    def __init__(self, segments: list[Segment]) -> None:
        self.segments = segments

    def write(self, data: bytes) -> None:
        last = self.segments[-1] if self.segments else None
        if isinstance(last, bytearray):
            last += data
        else:
            self.segments.append(bytearray(data))

    def copy(self, name: str, start: int, length: int) -> None:
        self.segments.append((name, start, length))

    def close(self) -> None:
        """Nothing was written to the store yet."""


class _ComposeStream:
    """A composed file written as it is planned: its segments go, in order, to `Storage.compose` running on a thread
    of its own (on the local disk, where compose writes each segment as it comes), so that the kernel's copy of the
    first ranges overlaps the reading of the next inputs' footers and the re-encoding of the small row groups.

    The queue between them is short: the literal bytes waiting in it (re-encoded row groups, the footer) are few.
    """

    _END = object()
    _ABORT = object()
    _QUEUED = 8

    def __init__(self, storage: Any, relative: str) -> None:
        self._queue: queue.Queue[Any] = queue.Queue(self._QUEUED)
        self._sent: int | None = None
        self._error: BaseException | None = None
        self._ended = False
        self._thread = threading.Thread(
            target=self._compose, args=(storage, relative), name="deltalite-compose", daemon=True
        )
        self._thread.start()

    def write(self, data: bytes) -> None:
        self._queue.put(bytes(data))

    def copy(self, name: str, start: int, length: int) -> None:
        self._queue.put((name, start, length))

    def finish(self) -> int:
        """Wait for the file to be written; the bytes this process sent (`Storage.compose`'s answer).

        Raises:
            StorageError: what `Storage.compose` raised (the partial file is removed).
        """
        self._end(self._END)
        if self._error is not None:
            raise self._error
        assert self._sent is not None
        return self._sent

    def close(self) -> None:
        """Stop: the file is removed unless `finish` returned."""
        self._end(self._ABORT)

    def _end(self, marker: object) -> None:
        if not self._ended:
            self._ended = True
            self._queue.put(marker)
        self._thread.join()

    def _segments(self) -> Iterator[Segment]:
        while True:
            item = self._queue.get()
            if item is self._END:
                return
            if item is self._ABORT:
                raise _Abandoned
            yield item

    def _compose(self, storage: Any, relative: str) -> None:
        try:
            self._sent = storage.compose(relative, self._segments())
        except BaseException as exc:  # handed to `finish`, in the thread that waits for it
            self._error = exc
            if not isinstance(exc, _Abandoned):
                # keep taking what the planner still sends, so that it never waits on a queue nobody empties
                while self._queue.get() not in (self._END, self._ABORT):
                    pass


class _Abandoned(Exception):
    """The bin failed while its file was being composed: the partial file is removed."""


def _close_quietly(sink: Any) -> None:
    with contextlib.suppress(Exception):  # the error that made us stop matters, not this one
        sink.close()
