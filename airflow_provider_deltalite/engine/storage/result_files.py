"""Single files outside a table (a job's result, read back by the operator that started it), through the same
backends, retry policy and errors as the table's files.

Example:
    >>> write_bytes("memory://results/run-1.json", b"{}")
    >>> read_bytes("memory://results/run-1.json")
    b'{}'
    >>> delete_file("memory://results/run-1.json")
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_deltalite.engine.errors import InvalidArgument, redact_uri
from airflow_provider_deltalite.engine.storage.backends import protocols_of
from airflow_provider_deltalite.engine.storage.paths import normalize_table_uri, uri_scheme
from airflow_provider_deltalite.engine.storage.table_storage import Storage


def _file_storage(uri: str, storage_options: Mapping[str, Any] | None, filesystem: Any) -> tuple[Storage, str]:
    """A `Storage` rooted at the file's directory, and the file's name."""
    location = normalize_table_uri(uri)
    parent, _, name = location.rpartition("/")
    if not name or parent.endswith(":/"):
        raise InvalidArgument(f"{redact_uri(uri)} does not name a file")
    if filesystem is not None and uri_scheme(location) not in protocols_of(filesystem):
        filesystem = None  # another store: build its own filesystem from the URI
    return Storage(parent or "/", storage_options, filesystem=filesystem), name


def write_bytes(
    uri: str, data: bytes, storage_options: Mapping[str, Any] | None = None, *, filesystem: Any = None
) -> None:
    """Write (or replace) the file at ``uri``; on a local disk its directories are made first.

    Args:
        uri: the file (a path or a URI).
        data: its content.
        storage_options: options for the store (credentials, ``deltalite_retry_*``).
        filesystem: an fsspec filesystem to reuse (a table's, with its credentials) when it serves the URI's scheme;
            otherwise one is built from the URI and ``storage_options``.

    Raises:
        StorageError: the write still failed after the retries.
    """
    storage, name = _file_storage(uri, storage_options, filesystem)
    storage.write(name, data)


def read_bytes(uri: str, storage_options: Mapping[str, Any] | None = None, *, filesystem: Any = None) -> bytes:
    """The content of the file at ``uri`` (arguments as `write_bytes`).

    Raises:
        FileNotFoundError: the file does not exist.
        StorageError: the read still failed after the retries.
    """
    storage, name = _file_storage(uri, storage_options, filesystem)
    return storage.read(name)


def delete_file(uri: str, storage_options: Mapping[str, Any] | None = None, *, filesystem: Any = None) -> None:
    """Delete the file at ``uri`` (arguments as `write_bytes`); a file already gone is fine.

    Raises:
        StorageError: the delete still failed after the retries.
    """
    storage, name = _file_storage(uri, storage_options, filesystem)
    storage.delete([name])
