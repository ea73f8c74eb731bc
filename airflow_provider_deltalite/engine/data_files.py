"""Reading one data file of a table as logical rows with its deletion vector applied, whole or streamed."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.conform import delta_schema_to_arrow, file_columns, to_logical
from airflow_provider_deltalite.engine.errors import DeltaLiteError, SchemaError, StorageError
from airflow_provider_deltalite.engine.row_tracking import FileRowIds
from airflow_provider_deltalite.engine.storage import Storage

# Rows per decoded batch when streaming: large enough that per-batch overhead vanishes, small enough that a few
# concurrent readers stay far below a row group's worth of memory each.
STREAM_BATCH_ROWS = 131_072
# A local file up to this size is read into memory in one call before it is decoded: the Parquet reader's small reads
# of each column chunk cost more than one read of a small file (a compaction of 400 files of 0.6 MiB spent 6% less CPU
# reading them). Small, so that a reader holds at most this much more than the row group it holds anyway.
WHOLE_READ_BYTES = 2 * 1024 * 1024


def deleted_row_indexes(storage: Storage, path: str, deletion_vector: Mapping[str, Any] | None) -> np.ndarray | None:
    """The sorted row indexes a file's deletion vector removes, or None without one."""
    if deletion_vector is None:
        return None
    # the deletion-vector codec is loaded by the first file that has one
    from airflow_provider_deltalite.engine.deletion_vectors import read_deletion_vector

    try:
        deleted = read_deletion_vector(
            deletion_vector, storage.table_uri, storage.read_range, table_uri=storage.table_uri
        )
    except FileNotFoundError:
        raise StorageError(
            f"deletion vector of {path} is referenced by the log but its file is missing", storage.table_uri
        ) from None
    return np.sort(deleted)  # streaming finds each batch's range by binary search


def iter_file_rows(
    storage: Storage,
    path: str,
    deletion_vector: Mapping[str, Any] | None,
    schema: dict,
    *,
    mode: str,
    partition_columns: Sequence[str],
    batch_rows: int = STREAM_BATCH_ROWS,
    columns: Sequence[str] | None = None,
    row_ids: FileRowIds | None = None,
    row_groups: Sequence[int] | None = None,
    use_threads: bool = True,
    size: int | None = None,
) -> Iterator[pa.Table]:
    """Stream the live rows of one data file in the table's logical data schema (partition columns excluded).

    Rows removed by the deletion vector are dropped; at most one batch of ``batch_rows`` rows is decoded at a time.
    ``columns`` (top-level logical names) limits what is decoded and returned. With ``row_ids`` (row tracking
    preserved; only without ``columns``), each row also carries its row id and row commit version in the materialised
    columns, appended after the data columns and computed from the physical row index before the deletion vector
    drops rows. ``row_groups`` reads only those row groups (only for a file without a deletion vector or ``row_ids``,
    whose row positions would be wrong). ``use_threads``: decode the columns on pyarrow's thread pool. ``size``: the
    file's size as the log gives it, if known (saves asking the file system).

    Raises:
        StorageError: the file or its deletion vector is missing or unreadable.
        SchemaError: a column of the file cannot be read as the table's type.
    """
    uri = storage.table_uri
    if row_groups is not None and (deletion_vector is not None or row_ids is not None):
        raise ValueError("row_groups cannot be read with a deletion vector or row ids")
    _ensure_same_store(storage, path)
    deleted = deleted_row_indexes(storage, path, deletion_vector)
    full = storage.resolve_data_path(path)
    offset = 0
    try:
        with storage.open_data_file(full) as fh:
            source = fh
            if isinstance(fh, pa.OSFile):
                whole = _read_small_file(fh, size)
                if whole is not None:
                    source = pa.BufferReader(whole)
            # pyarrow's default INT96 unit (ns) silently wraps dates past 2262; microseconds cover Delta's range.
            parquet = pq.ParquetFile(source, coerce_int96_timestamp_unit="us")
            if parquet.metadata.num_rows == 0:
                return
            read_columns = None
            if columns is not None:
                wanted = set(columns)
                schema = {**schema, "fields": [f for f in schema["fields"] if f["name"] in wanted]}
                read_columns = file_columns(parquet.schema_arrow, schema, mode)
            for part in _iter_tables(parquet, batch_rows, read_columns, row_groups, use_threads):
                rows = to_logical(part, schema, mode=mode, exclude=partition_columns, table_uri=uri)
                if row_ids is not None:
                    for name, values in zip(row_ids.columns.names, row_ids.values(part, offset, uri), strict=True):
                        rows = rows.append_column(name, values)
                if deleted is not None and len(deleted):
                    rows = _drop_deleted(rows, deleted, offset)
                offset += part.num_rows
                yield rows
    except FileNotFoundError:
        raise StorageError(f"data file {path} is referenced by the log but missing", uri) from None
    except SchemaError as exc:  # name the file: it is the one to fix or remove
        raise SchemaError(f"data file {path}: {exc.problem}", uri) from None
    except DeltaLiteError:
        raise
    except (pa.ArrowException, OSError) as exc:
        raise StorageError(f"data file {path} is unreadable: {type(exc).__name__}: {exc}", uri) from None


def _read_small_file(fh: pa.OSFile, size: int | None) -> pa.Buffer | None:
    """The bytes of a file of at most WHOLE_READ_BYTES, read in one call; None for a larger one (``fh`` at its
    start). ``size``: the file's size as the log gives it, if known."""
    if size is not None and size <= WHOLE_READ_BYTES:
        # the log's size and a byte more, in one call (no call for the size: each call into pyarrow hands the GIL
        # over); a file whose size differs from the log's is read as it is, as without a size
        data = fh.read_buffer(size + 1)
        if data.size == size:
            return data
        fh.seek(0)
    return fh.read_buffer() if fh.size() <= WHOLE_READ_BYTES else None


def _iter_tables(
    parquet: pq.ParquetFile,
    batch_rows: int,
    columns: Sequence[str] | None,
    row_groups: Sequence[int] | None,
    use_threads: bool,
) -> Iterator[pa.Table]:
    """`iter_batches` as tables; a file of one row group that fits one batch (a small file) in one call."""
    if row_groups is None and parquet.num_row_groups == 1 and parquet.metadata.num_rows <= batch_rows:
        # every call into pyarrow hands the GIL over, to another task's thread when tasks run side by side: a small
        # file read in one call instead of a batch iterator costs 400 such hand-overs fewer per 100 files
        yield parquet.read_row_group(0, columns=columns, use_threads=use_threads)
        return
    for batch in iter_batches(parquet, batch_rows, columns, row_groups, use_threads):
        yield pa.Table.from_batches([batch])


def iter_batches(
    parquet: pq.ParquetFile,
    batch_rows: int,
    columns: Sequence[str] | None,
    row_groups: Sequence[int] | None = None,
    use_threads: bool = True,
) -> Iterator[pa.RecordBatch]:
    """The file's rows (of ``row_groups``, default all) in batches of ``batch_rows`` (the last one shorter), read one
    row group at a time.

    The batches are those of ``parquet.iter_batches(batch_rows)``, which span row groups; but that reader holds the
    compressed column chunks of every row group it has not finished (about the whole file: 1 GiB for a 1 GiB file),
    where reading row group by row group holds one. A batch that spans row groups is stitched from their pieces, so
    what a writer fed from here sees, and writes, is unchanged.
    """
    pending: list[pa.RecordBatch] = []
    held = 0
    for group in range(parquet.num_row_groups) if row_groups is None else row_groups:
        for batch in parquet.iter_batches(
            batch_size=batch_rows, row_groups=[group], columns=columns, use_threads=use_threads
        ):
            start = 0
            while start < batch.num_rows:
                take = min(batch_rows - held, batch.num_rows - start)
                pending.append(batch.slice(start, take) if take < batch.num_rows else batch)
                held += take
                start += take
                if held == batch_rows:
                    yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)
                    pending, held = [], 0
    if pending:
        yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)


def _ensure_same_store(storage: Storage, path: str) -> None:
    """Refuse an absolute URI of another store (``s3://...`` in a local table's log): resolving it on the table's
    store would open some other object (a local file named ``s3:/...``), not the file the log means."""
    scheme = urlsplit(path).scheme.lower()
    if not storage.serves(path):
        raise StorageError(
            f"data file {path} is on another store ({scheme}) than the table ({storage.protocol}); deltalite reads a "
            "table's data files from the table's own store",
            storage.table_uri,
        )


def read_file_rows(
    storage: Storage,
    path: str,
    deletion_vector: Mapping[str, Any] | None,
    schema: dict,
    *,
    mode: str,
    partition_columns: Sequence[str],
) -> pa.Table:
    """All live rows of one data file (see `iter_file_rows`) as one table."""
    parts = list(
        iter_file_rows(
            storage, path, deletion_vector, schema, mode=mode, partition_columns=partition_columns, batch_rows=1 << 30
        )
    )
    if not parts:
        return delta_schema_to_arrow(schema, exclude=partition_columns).empty_table()
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def _drop_deleted(rows: pa.Table, deleted: np.ndarray, offset: int) -> pa.Table:
    lo, hi = np.searchsorted(deleted, [offset, offset + rows.num_rows])
    if lo == hi:
        return rows
    keep = np.ones(rows.num_rows, dtype=bool)
    keep[deleted[lo:hi].astype(np.int64) - offset] = False
    return pc.filter(rows, pa.array(keep))
