"""The documents `deltalite describe` and `deltalite files` print, built from a snapshot or a replay stream."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.arrow_util import contiguous
from airflow_provider_deltalite.engine.clustering_domain import clustering_spec
from airflow_provider_deltalite.engine.snapshot import Snapshot
from airflow_provider_deltalite.engine.snapshot_stream import ReplayStream
from airflow_provider_deltalite.maintenance.health.histogram import bucket_counts

_SIZE_BINS = ((1 << 20, "<1MB"), (8 << 20, "<8MB"), (64 << 20, "<64MB"), (128 << 20, "<128MB"), (1 << 30, "<1GB"))


def size_histogram(sizes: Sequence[int] | pa.Array) -> dict[str, int]:
    """How many files fall under 1 MB, 8 MB, 64 MB, 128 MB, 1 GB, and above."""
    values = sizes.to_numpy(zero_copy_only=False) if isinstance(sizes, pa.Array) else np.asarray(sizes, np.int64)
    # bucket i holds the sizes below limit i and at or above limit i - 1; the last one everything at or above 1 GB
    counts, _ = bucket_counts(values, (0, *(limit for limit, _ in _SIZE_BINS)))
    return dict(zip([label for _, label in _SIZE_BINS] + [">=1GB"], (int(c) for c in counts), strict=True))


# what describe reads of the file actions besides their keys: sizes, not statistics
DESCRIBE_FILE_FIELDS = ("size",)


def describe_document(table: Snapshot | ReplayStream) -> dict[str, Any]:
    """What `deltalite describe --json` prints, of a snapshot or, summed a batch at a time, of a stream (what the CLI
    reads: memory follows a batch of file sizes, not the table)."""
    if isinstance(table, ReplayStream):
        snap = table.snapshot
        files = size = 0
        histogram: dict[str, int] = {}
        for adds, _ in table.batches():
            sizes = pc.fill_null(contiguous(adds.column("size")), 0)
            files += len(sizes)
            size += int(pc.sum(sizes).as_py() or 0)
            for label, count in size_histogram(sizes).items():
                histogram[label] = histogram.get(label, 0) + count
        histogram = histogram or size_histogram(pa.array([], pa.int64()))
    else:
        snap = table
        sizes = pc.fill_null(contiguous(snap.raw_files.column("size")), 0)
        files, size, histogram = snap.num_files, snap.size_in_bytes, size_histogram(sizes)
    clustering = clustering_spec(snap)
    return {
        "table": snap.table_uri,
        "version": snap.version,
        "timestamp": snap.timestamp,
        "id": snap.table_id,
        "numFiles": files,
        "sizeInBytes": size,
        "partitionColumns": snap.partition_columns,
        # None: not a clustered table; []: clustered on no column (CLUSTER BY NONE)
        "clusteringColumns": list(clustering.names) if clustering is not None else None,
        "schema": snap.schema,
        "protocol": {**snap.protocol.to_dict(), "features": list(snap.protocol.features)},
        "properties": snap.properties.explicit,
        "fileSizeHistogram": histogram,
    }


def files_document(snap: Snapshot, indexes: np.ndarray | None = None) -> dict[str, Any]:
    """What `deltalite files --json` prints: paths exactly as written in the log (of the files at ``indexes`` of
    ``snap.files`` when given: those a ``--where`` selects)."""
    files = snap.files
    partition = snap.partition_values
    if indexes is not None:
        files, partition = pc.take(files, indexes), pc.take(partition, indexes)
    raw = files.column("partitionValues").combine_chunks()
    raw_columns = {
        logical: raw.field(physical).to_pylist()
        for logical, physical in zip(snap.partition_columns, snap.partition_physical_names, strict=True)
    }
    out = []
    paths = files.column("path").to_pylist()
    sizes = files.column("size").to_pylist()
    records = files.column("numRecords").to_pylist()
    mtimes = files.column("modificationTime").to_pylist()
    dvs = pc.is_valid(files.column("deletionVector")).to_pylist()
    for i, path in enumerate(paths):
        out.append(
            {
                "path": path,
                "size": sizes[i],
                "partitionValues": {c: raw_columns[c][i] for c in partition.column_names},
                "numRecords": records[i],
                "modificationTime": mtimes[i],
                "deletionVector": bool(dvs[i]),
            }
        )
    return {"version": snap.version, "files": out}
