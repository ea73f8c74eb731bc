"""The generic backend: any fsspec filesystem (GCS, ABFS, ...), one retried request per operation or file.

It has no put-if-absent: `write_create_only` checks and then writes, which `Storage` allows only in single-writer
mode. The stores with more to offer subclass it (`local`, `s3`, `memory`).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Container, Iterable
from typing import Any, TypeVar

from airflow_provider_deltalite.engine.storage.base import (
    DEFAULT_DELETE_BATCH,
    STREAM_CHUNK_BYTES,
    DeleteOutcome,
    DirListing,
    ErrorTranslation,
    FileInfo,
    ReadFailed,
    Segment,
    delete_each,
    mtime_ms,
)
from airflow_provider_deltalite.engine.storage.paths import describe
from airflow_provider_deltalite.engine.storage.retry import (
    RetryingReader,
    StorageRetryPolicy,
    is_backend_failure,
    is_precondition_failure,
    is_transient,
    retry_call,
)

T = TypeVar("T")


class FsspecBackend:
    """A `StorageBackend` over any fsspec filesystem (see `base.StorageBackend` for the contract)."""

    lists_from_name = False
    atomic_create_only = False
    has_real_directories = False
    native_files = False
    writes_temporary_files = False
    transient_faults = True
    composes_from_ranges = False
    delete_batch_size = DEFAULT_DELETE_BATCH

    def __init__(self, fs: Any, policy: StorageRetryPolicy) -> None:
        self.fs = fs
        self.policy = policy

    @classmethod
    def filesystem_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        """The options to build this store's filesystem with (from the user's storage options)."""
        # Other writers change the log under us; a cached directory listing makes a new commit look missing.
        return {"use_listings_cache": False, **options}

    @property
    def default_concurrency(self) -> int:
        # listing and deleting wait on the network: more threads than cores keep the store busy
        return max(8, 4 * (os.cpu_count() or 1))

    def strip_protocol(self, uri: str) -> str:
        return self.fs._strip_protocol(uri)

    def request(self, call: Callable[[], T]) -> T:
        return retry_call(self.policy, call)

    # -- reads -----------------------------------------------------------------------------------------------

    def exists(self, full: str) -> bool:
        return bool(self.request(lambda: self.fs.exists(full)))

    def has_files_under(self, full_dir: str) -> bool:
        # A prefix exists only with something in it on object stores (the local backend looks for a file).
        return self.exists(full_dir)

    def is_dir(self, full: str) -> bool:
        return bool(self.request(lambda: self.fs.isdir(full)))

    def read(self, full: str) -> bytes:
        return self.request(lambda: self.fs.cat_file(full))

    def read_range(self, full: str, start: int, length: int) -> bytes:
        return self.request(lambda: self.fs.cat_file(full, start=start, end=start + length))

    def read_many(self, full: list[str]) -> dict[str, bytes]:
        # A retry fetches only the files whose fetch failed transiently.
        done: dict[str, bytes] = {}
        where = [full[0]]  # the file an error names: the one whose fetch failed
        one_error = not self.transient_faults  # the local disk raises the first error (its path is not told)

        def fetch() -> None:
            todo = [p for p in dict.fromkeys(full) if p not in done]
            got = self.fs.cat(todo, on_error="raise" if one_error else "return")
            errors: list[tuple[str, BaseException]] = []
            for p in todo:
                value = got[p]
                if isinstance(value, BaseException):
                    errors.append((p, value))
                else:
                    done[p] = value
            if errors:
                # an answer (a missing file) wins over a fault: retrying cannot change it
                errors.sort(key=lambda e: is_transient(e[1]))
                where[0] = errors[0][0]
                raise errors[0][1]

        try:
            self.request(fetch)
        except Exception as exc:
            raise ReadFailed(where[0], exc) from None
        return done

    def open_read(self, full: str, errors: ErrorTranslation) -> Any:
        # a Parquet decode makes many ranged reads: a read that fails transiently opens the object again
        return RetryingReader(lambda: self.fs.open(full, "rb"), self.policy, errors)

    def open_data_file(self, full: str, errors: ErrorTranslation) -> Any:
        return self.open_read(full, errors)

    def create_data_file(self, full: str) -> Any:
        return self.request(lambda: self.fs.open(full, "wb"))

    def compose(self, full: str, segments: Iterable[Segment]) -> int:
        # the fallback: every byte through this process, ranges read a chunk at a time
        sent = 0
        sink = self.create_data_file(full)
        try:
            for segment in segments:
                if isinstance(segment, bytes | bytearray | memoryview):
                    sink.write(segment)
                    sent += len(segment)
                    continue
                source, start, length = segment
                end = start + length
                while start < end:
                    piece = self.read_range(source, start, min(STREAM_CHUNK_BYTES, end - start))
                    if not piece:
                        raise OSError(f"{source} ends before byte {end}")
                    sink.write(piece)
                    sent += len(piece)
                    start += len(piece)
        except BaseException:
            with contextlib.suppress(Exception):
                discard = getattr(sink, "discard", None)  # s3fs-like files: abandon the upload
                if discard is not None:
                    discard()
                else:
                    sink.close()
            raise
        sink.close()  # a streamed upload is finished once: never retried
        return sent

    # -- writes ----------------------------------------------------------------------------------------------

    def write_create_only(self, full: str, data: bytes) -> None:
        def attempt() -> None:
            try:
                self._put_if_absent(full, data)
            except Exception as exc:
                # A failed condition means the name is taken: by another writer, or by an earlier try of ours whose
                # response was lost. Telling the two apart is the transaction's job (it reads the txnId), not ours.
                if is_precondition_failure(exc):
                    raise FileExistsError(full) from None
                raise

        self.request(attempt)

    def _put_if_absent(self, full: str, data: bytes) -> None:
        # not atomic: safe only with one writer (`Storage` allows it in single-writer mode only)
        if self.fs.exists(full):
            raise FileExistsError(full)
        self.fs.pipe_file(full, data)

    def write(self, full: str, data: bytes) -> None:
        self.request(lambda: self.fs.pipe_file(full, data))

    # -- listing ---------------------------------------------------------------------------------------------

    def _ls(self, full_dir: str) -> list[dict[str, Any]]:
        listed = self.request(lambda: self.fs.ls(full_dir, detail=True))
        if len(listed) == 1 and listed[0].get("type") == "file" and listed[0]["name"].rstrip("/") == full_dir:
            # fsspec lists a file as itself; a file is not a directory (as on the local disk)
            raise NotADirectoryError(full_dir)
        return listed

    def list_from(self, full_dir: str, start_name: str) -> list[FileInfo]:
        entries = []
        for entry in self._ls(full_dir):
            if entry.get("type") == "directory":
                continue
            name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
            if name >= start_name:
                entries.append(FileInfo(name, int(entry.get("size") or 0), mtime_ms(entry)))
        return entries

    def list_dir(self, full_dir: str, without_details: Container[str]) -> DirListing:
        files: list[tuple[str, int, int]] = []
        dirs: list[tuple[str, int]] = []
        others: list[str] = []
        for entry in self._ls(full_dir):
            name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
            if entry.get("type") == "directory":
                dirs.append((name, mtime_ms(entry)))
            elif entry.get("type") == "file":
                files.append((name, int(entry.get("size") or 0), mtime_ms(entry)))
            else:
                others.append(name)
        return DirListing(
            tuple(f[0] for f in files),
            tuple(f[1] for f in files),
            tuple(f[2] for f in files),
            tuple(d[0] for d in dirs),
            tuple(d[1] for d in dirs),
            tuple(others),
        )

    # -- deletes ---------------------------------------------------------------------------------------------

    def delete(self, paths: list[str], full: list[str]) -> DeleteOutcome:
        def failure(exc: Exception) -> str | None:
            if not is_backend_failure(exc):
                return None
            tries = f" (after {self.policy.attempts} attempts)" if is_transient(exc) else ""
            return describe(exc) + tries

        return delete_each(paths, full, lambda f: self.request(functools.partial(self.fs.rm_file, f)), failure)

    def remove_empty_dir(self, full: str) -> bool:
        return False  # no directories of its own: a prefix disappears with its last object
