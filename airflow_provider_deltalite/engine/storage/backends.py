"""Which backend serves a store: `SCHEME_TO_BACKEND` maps a filesystem protocol (or a URI scheme) to its backend
class; any other scheme gets the generic fsspec backend. A new kind of store is a new backend module and an entry
here, not a branch on a scheme name in the callers."""

from __future__ import annotations

from typing import Any

from airflow_provider_deltalite.engine.storage.base import StorageBackend
from airflow_provider_deltalite.engine.storage.fsspec_backend import FsspecBackend
from airflow_provider_deltalite.engine.storage.local import LocalBackend
from airflow_provider_deltalite.engine.storage.memory import MemoryBackend
from airflow_provider_deltalite.engine.storage.retry import StorageRetryPolicy
from airflow_provider_deltalite.engine.storage.s3 import S3Backend

SCHEME_TO_BACKEND: dict[str, type[FsspecBackend]] = {
    "": LocalBackend,  # a path without a scheme
    "file": LocalBackend,
    "local": LocalBackend,
    "memory": MemoryBackend,
    "s3": S3Backend,
    "s3a": S3Backend,
}

# The schemes a local path is served by (a path has none).
LOCAL_SCHEMES = frozenset({"", "file", "local"})


def backend_class(scheme: str) -> type[FsspecBackend]:
    """The backend class of a URI scheme or filesystem protocol (the generic one for schemes not listed)."""
    return SCHEME_TO_BACKEND.get(scheme, FsspecBackend)


def protocols_of(fs: Any) -> tuple[str, ...]:
    """The protocols an fsspec filesystem serves (``fs.protocol`` is a string or a tuple)."""
    return tuple(fs.protocol) if isinstance(fs.protocol, tuple | list) else (fs.protocol,)


def backend_for(fs: Any, policy: StorageRetryPolicy) -> StorageBackend:
    """The backend for an fsspec filesystem, picked by its (first) protocol."""
    return backend_class(protocols_of(fs)[0])(fs, policy)
