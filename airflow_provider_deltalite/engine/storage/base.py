"""The contract every storage backend implements (`StorageBackend`), and the values its listings and deletes return.

A backend is one kind of store (the local disk, S3, ``memory://``, any other fsspec filesystem) seen through the few
operations the engine needs: reads, a create-only write, a replacing write, a listing from a name, a listing of one
directory level and a batch delete. What a store can do differently is a capability attribute (`lists_from_name`,
`atomic_create_only`, `has_real_directories`, ...), so callers ask what the store does and never test its scheme.

Backends take full backend paths (``bucket/table/_delta_log/...``, ``/data/table/...``); `Storage` resolves paths
relative to the table root, chooses the create-only mode and turns what a backend finally raised into the table's
errors.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

# A piece of a composed file (`StorageBackend.compose`): literal bytes, or (source full path, start, length).
Segment = bytes | bytearray | tuple[str, int, int]
# Bytes streamed per read when a range passes through this process.
STREAM_CHUNK_BYTES = 8 * 1024 * 1024

# Paths per delete task: S3's DeleteObjects takes at most 1,000 keys; other stores delete file by file, where the
# same size keeps tasks short enough to report progress.
DEFAULT_DELETE_BATCH = 1000


@dataclass(frozen=True)
class FileInfo:
    """One listed object: its name relative to the listed directory, size in bytes, and mtime in ms."""

    name: str
    size: int
    modification_time: int


@dataclass(frozen=True)
class DirListing:
    """One level of a directory, from one listing (no per-file metadata requests), as columns: a directory can hold
    a million files, and an object per file is what a listing would then spend its time on.

    Attributes:
        file_names / file_sizes / file_mtimes: plain files (mtimes in ms).
        dir_names / dir_mtimes: subdirectories (mtime 0 where the store has no directories of its own, like S3).
            Symbolic links are never among them: a listing does not follow links.
        others: names of entries that are neither plain files nor directories (symbolic links, sockets, S3 keys with
            an empty path segment). They are reported so that callers know the directory is not empty.
    """

    file_names: tuple[str, ...] = ()
    file_sizes: tuple[int, ...] = ()
    file_mtimes: tuple[int, ...] = ()
    dir_names: tuple[str, ...] = ()
    dir_mtimes: tuple[int, ...] = ()
    others: tuple[str, ...] = ()

    @property
    def files(self) -> list[FileInfo]:
        """The plain files as FileInfo."""
        return [FileInfo(*f) for f in zip(self.file_names, self.file_sizes, self.file_mtimes, strict=True)]

    @property
    def dirs(self) -> list[FileInfo]:
        """The subdirectories as FileInfo (size 0)."""
        return [FileInfo(n, 0, m) for n, m in zip(self.dir_names, self.dir_mtimes, strict=True)]


@dataclass(frozen=True)
class DeleteOutcome:
    """What `Storage.delete_files` did, path by path (paths as given).

    Attributes:
        deleted: deletions the store confirmed. S3 confirms a key that did not exist too (DeleteObjects cannot tell).
        missing: files that were already gone (stores that can tell).
        failed: ``(path, reason)`` of deletions that still failed after the retries.
    """

    deleted: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    failed: tuple[tuple[str, str], ...] = ()


def delete_each(
    paths: list[str], full: list[str], remove: Callable[[str], object], failure: Callable[[Exception], str | None]
) -> DeleteOutcome:
    """Delete ``full`` paths one request each; ``failure(exc)`` is the reason to record for an exception, or None to
    let it propagate (not a storage failure). A path already gone counts as missing, not failed."""
    deleted: list[str] = []
    missing: list[str] = []
    failed: list[tuple[str, str]] = []
    for path, f in zip(paths, full, strict=True):
        try:
            remove(f)
        except FileNotFoundError:
            missing.append(path)
        except Exception as exc:
            reason = failure(exc)
            if reason is None:
                raise
            failed.append((path, reason))
        else:
            deleted.append(path)
    return DeleteOutcome(tuple(deleted), tuple(missing), tuple(failed))


class ReadFailed(Exception):
    """A read of several files failed on ``full`` (a full backend path) with ``cause``; `Storage` names that file."""

    def __init__(self, full: str, cause: BaseException) -> None:
        super().__init__(full)
        self.full = full
        self.cause = cause


# What a backend gets to translate the final failure of a request it makes later (a read of an open file).
ErrorTranslation = Callable[[], AbstractContextManager[None]]


class StorageBackend(Protocol):
    """One kind of store, over an fsspec filesystem. Every method makes its requests under the backend's retry
    policy (``request``), page by page and key by key where one operation takes several requests, and raises the
    backend's own errors: FileNotFoundError for a missing file, FileExistsError for a taken name in
    `write_create_only`; `Storage` wraps the rest.

    Capabilities:
        lists_from_name: the store starts a listing at a name itself (S3 ``StartAfter``), so `list_from` costs what
            comes after the name; elsewhere it lists the whole directory and filters.
        atomic_create_only: `write_create_only` is an atomic put-if-absent (a local hard link, S3's conditional PUT,
            the memory store under a lock); without it `write_create_only` checks and then writes.
        has_real_directories: directories exist on their own and stay behind empty (the local disk); on object
            stores a prefix disappears with its last object.
        native_files: paths are files of this machine: pyarrow's native files and ``os`` open them directly, and
            they may be symbolic links.
        writes_temporary_files: writes go through hidden temporary names, which a killed writer leaves behind.
        transient_faults: requests can fail transiently and are retried under the policy (the local disk: no, its
            faults are answers).
        default_concurrency: threads that keep the store busy when listing and deleting.
        delete_batch_size: paths per delete task (S3: the DeleteObjects limit).
        composes_from_ranges: `compose` builds a new object on the store from byte ranges of other objects without
            their bytes passing through this process (S3: a multipart upload of ``UploadPartCopy`` parts; the local
            disk: ``copy_file_range``, a copy in the kernel); elsewhere `compose` streams every byte through the worker.
    """

    fs: Any
    lists_from_name: bool
    atomic_create_only: bool
    has_real_directories: bool
    native_files: bool
    writes_temporary_files: bool
    transient_faults: bool
    delete_batch_size: int
    composes_from_ranges: bool

    @property
    def default_concurrency(self) -> int: ...

    def strip_protocol(self, uri: str) -> str:
        """The backend path of an absolute URI of this store."""
        ...

    def request(self, call: Callable[[], T]) -> T:
        """``call()``, one request, under the retry policy."""
        ...

    def exists(self, full: str) -> bool: ...

    def is_dir(self, full: str) -> bool: ...

    def has_files_under(self, full_dir: str) -> bool:
        """Whether a file lies below ``full_dir``, at any depth (one listing request at most on an object store;
        an empty directory holds none)."""
        ...

    def read(self, full: str) -> bytes:
        """The whole file (FileNotFoundError when missing)."""
        ...

    def read_range(self, full: str, start: int, length: int) -> bytes:
        """``length`` bytes from ``start``."""
        ...

    def read_many(self, full: list[str]) -> dict[str, bytes]:
        """Several whole files by full path, fetched concurrently where the store can; `ReadFailed` names the file
        whose fetch failed."""
        ...

    def open_read(self, full: str, errors: ErrorTranslation) -> Any:
        """A seekable binary file for random-access reads; ``errors`` wraps each later request it makes."""
        ...

    def open_data_file(self, full: str, errors: ErrorTranslation) -> Any:
        """`open_read` for a Parquet decode (a pyarrow native file where `native_files`)."""
        ...

    def create_data_file(self, full: str) -> Any:
        """A new file to stream a data file to (parent directories made where `has_real_directories`)."""
        ...

    def compose(self, full: str, segments: Iterable[Segment]) -> int:
        """Write a new file ``full`` made of ``segments`` in order: literal bytes, or ``(source full path, start,
        length)`` ranges of other files of the store. Returns the bytes this process sent (literal bytes, and ranges
        the store could not copy itself). A failure leaves no object behind where the store can abandon an upload.
        ``segments`` is iterated once, as the file is written: it may be an iterator still being filled.
        """
        ...

    def write_create_only(self, full: str, data: bytes) -> None:
        """Write ``full`` only if absent; FileExistsError when it exists (atomic where `atomic_create_only`)."""
        ...

    def write(self, full: str, data: bytes) -> None:
        """Write or replace ``full``; readers see the old or the new content, never a part."""
        ...

    def list_from(self, full_dir: str, start_name: str) -> list[FileInfo]:
        """Files directly inside ``full_dir`` named ``start_name`` or later (any order; FileNotFoundError when the
        directory does not exist)."""
        ...

    def list_dir(self, full_dir: str, without_details: Container[str]) -> DirListing:
        """One level of ``full_dir`` from listing requests only (FileNotFoundError when it does not exist)."""
        ...

    def delete(self, paths: list[str], full: list[str]) -> DeleteOutcome:
        """Delete exactly these files (``full`` are their backend paths) and report each of ``paths``."""
        ...

    def remove_empty_dir(self, full: str) -> bool:
        """Remove an empty directory (never recursively); False when it is not empty or gone."""
        ...


def mtime_ms(entry: Mapping[str, Any]) -> int:
    """The modification time in ms of a listing entry: each backend names it differently (the log needs it only for
    commit timestamps)."""
    for key in ("mtime", "LastModified", "last_modified", "updated", "created", "modified"):
        value = entry.get(key)
        if value is None:
            continue
        if isinstance(value, datetime):
            return int(value.timestamp() * 1000)
        if isinstance(value, int | float):
            return int(value * 1000) if value < 1e11 else int(value)
        if isinstance(value, str):
            try:
                return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
            except ValueError:
                continue
    return 0
