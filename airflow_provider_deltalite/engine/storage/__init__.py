"""Storage behind one contract: `Storage` (the files of one table) over a backend per kind of store.

- `base`: the backend contract (`StorageBackend`) and the values it returns (`FileInfo`, `DirListing`,
  `DeleteOutcome`);
- `fsspec_backend`, `local`, `s3`, `memory`: the backends, and `backends.SCHEME_TO_BACKEND`, which picks one;
- `table_storage`: `Storage`, the table-rooted object the engine uses (paths, errors, the create-only mode);
- `retry`: the retry policy for transient failures; `upload`: streamed data-file uploads;
- `paths`: URI normalisation and log paths; `result_files`: single files outside a table.
"""

from __future__ import annotations

from airflow_provider_deltalite.engine.storage.backends import SCHEME_TO_BACKEND, backend_class, backend_for
from airflow_provider_deltalite.engine.storage.base import DeleteOutcome, DirListing, FileInfo, StorageBackend
from airflow_provider_deltalite.engine.storage.local import is_temporary_name
from airflow_provider_deltalite.engine.storage.paths import absolute_uri_to_path, normalize_table_uri, uri_scheme
from airflow_provider_deltalite.engine.storage.result_files import delete_file, read_bytes, write_bytes
from airflow_provider_deltalite.engine.storage.retry import (
    RETRY_OPTIONS,
    TRANSIENT_CODES,
    RetryingReader,
    StorageRetryPolicy,
    is_backend_failure,
    is_precondition_failure,
    is_transient,
    retry_call,
)
from airflow_provider_deltalite.engine.storage.table_storage import DELTALITE_OPTIONS, Storage

__all__ = [
    "DELTALITE_OPTIONS",
    "RETRY_OPTIONS",
    "SCHEME_TO_BACKEND",
    "TRANSIENT_CODES",
    "DeleteOutcome",
    "DirListing",
    "FileInfo",
    "RetryingReader",
    "Storage",
    "StorageBackend",
    "StorageRetryPolicy",
    "absolute_uri_to_path",
    "backend_class",
    "backend_for",
    "delete_file",
    "is_backend_failure",
    "is_precondition_failure",
    "is_temporary_name",
    "is_transient",
    "normalize_table_uri",
    "read_bytes",
    "retry_call",
    "uri_scheme",
    "write_bytes",
]
