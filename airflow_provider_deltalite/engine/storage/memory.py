"""The ``memory://`` backend (tests, examples): fsspec's in-process store, with create-only writes made atomic by a
lock (the store itself has no put-if-absent, but every writer shares this process)."""

from __future__ import annotations

import threading
from typing import Any

from airflow_provider_deltalite.engine.storage.fsspec_backend import FsspecBackend

_MEMORY_LOCK = threading.Lock()


class MemoryBackend(FsspecBackend):
    """`FsspecBackend` with an atomic put-if-absent."""

    atomic_create_only = True

    @classmethod
    def filesystem_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        return dict(options)  # one process, no other writer behind a cached listing

    def _put_if_absent(self, full: str, data: bytes) -> None:
        with _MEMORY_LOCK:
            if self.fs.exists(full):
                raise FileExistsError(full)
            self.fs.pipe_file(full, data)
