"""Writing a classic checkpoint, `<version>.checkpoint.parquet`, where other writers may write the same name.

Every writer of a version's classic checkpoint describes the same table state, and delta-rs writes one after each
commit at its checkpoint interval, so two writers (one of them deltalite) can write the same name. Replacing the
object is not harmless on an object store: a reader lists it, takes the listed size, and then reads the Parquet
footer at that offset; when another writer's object (of another size) replaced it meanwhile, the reader fails with a
corrupt footer (delta-rs: "Invalid Parquet file. Corrupt footer", seen with delta-rs 1.6.3 on S3). So, as the
reference does when the file is already there (`Checkpoints.writeAtomicCheckpointParquetFile`), the checkpoint is
written only if absent and an existing one is reused.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_deltalite.engine.errors import StorageError
from airflow_provider_deltalite.engine.storage import Storage


def write_or_reuse(storage: Storage, path: str, data: bytes, num_rows: int) -> tuple[int, int]:
    """Write ``data`` to ``path`` unless a readable checkpoint is there already; its (rows, bytes).

    Without a put-if-absent (a store that cannot, outside single-writer mode) the file is written as before. An
    existing file that does not read as Parquet (left by a writer on a store that shows partial writes) is replaced.
    """
    if storage.create_only is None:
        storage.write(path, data)
        return num_rows, len(data)
    try:
        storage.write_create_only(path, data)
        return num_rows, len(data)
    except FileExistsError:
        pass
    try:
        with storage.open_input(path) as fh:
            meta = pq.read_metadata(fh)
        directory, _, name = path.rpartition("/")
        size = next(f.size for f in storage.list_from(directory, name) if f.name == name)
        return meta.num_rows, size
    except (pa.ArrowException, OSError, StorageError, StopIteration):
        storage.write(path, data)
        return num_rows, len(data)
