"""One storage interface over fsspec: listing the log from a version, reads, and create-only writes."""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import stat
import threading
import time
import uuid
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

import fsspec
import pyarrow as pa

from airflow_provider_deltalite.engine.crash_points import crash_point
from airflow_provider_deltalite.engine.errors import (
    CreateOnlyNotSupported,
    InvalidArgument,
    StorageError,
    TableNotFound,
    UploadInterrupted,
    redact_uri,
)
from airflow_provider_deltalite.engine.storage_retry import (
    RETRY_OPTIONS,
    TRANSIENT_CODES,
    RetryingReader,
    StorageRetryPolicy,
    is_backend_failure,
    is_precondition_failure,
    is_transient,
    retry_call,
)

T = TypeVar("T")

# Options that configure deltalite itself rather than the fsspec backend: `Storage` takes them out of the storage
# options before it builds the filesystem.
DELTALITE_OPTIONS = ("deltalite_single_writer", *RETRY_OPTIONS)


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


_S3_DELETE_BATCH = 1000  # the DeleteObjects limit


def _mtime_ms(entry: Mapping[str, Any]) -> int:
    # Each backend names the modification time differently; the log needs it only for commit timestamps.
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


def normalize_table_uri(uri: str) -> str:
    """Turn a user-supplied table location into a URI fsspec understands (relative paths become absolute)."""
    if not isinstance(uri, str) or not uri.strip():
        raise TableNotFound("empty table URI")
    uri = uri.strip()
    scheme = urlsplit(uri).scheme
    if not scheme or len(scheme) == 1:
        return os.path.abspath(os.path.expanduser(uri))
    if scheme == "file":
        path = uri[len("file:") :]
        path = "/" + path.lstrip("/")
        return unquote(path)
    return uri.rstrip("/")


class Storage:
    """Files of one table, addressed by paths relative to the table root.

    The same object serves local paths, ``file://``, ``memory://``, ``s3://``, ``gs://`` and ``abfs://``; every
    method takes paths relative to the table root (``_delta_log/00000000000000000000.json``) or absolute URIs.

    Every request to a store other than the local disk runs under a `StorageRetryPolicy`: a transient failure (a
    time-out, a reset connection, HTTP 429/5xx, S3 SlowDown) is retried with full-jitter exponential backoff, and what
    still fails is a `StorageError` naming the path, the last cause and the table. Local files take direct code paths
    (``os.scandir``, ``pa.OSFile``, hard links) without retries.

    Args:
        table_uri: the table root.
        storage_options: options for the fsspec backend (credentials, endpoint), plus deltalite's own, which are
            removed before the backend sees them:

            - ``deltalite_single_writer``: ``true`` lets a store without put-if-absent take commits (one writer only).
            - ``deltalite_retry_attempts``: tries per request in total (default 10; 1 turns retries off).
            - ``deltalite_retry_base_delay_s``: the first backoff ceiling in seconds (default 0.1; it doubles per try).
            - ``deltalite_retry_max_delay_s``: the largest backoff ceiling in seconds (default 5).
        filesystem: a ready fsspec filesystem to use instead of building one from the URI and options (the root
            still comes from the URI, and the filesystem must serve its scheme). It is not pickled: a copy sent to a
            Spark executor builds its own from the URI and options.

    Raises:
        InvalidArgument: a ``deltalite_*`` option is invalid, or ``filesystem`` serves another scheme.
        StorageError: the backend cannot be built (a missing package, bad options).

    Example:
        >>> storage = Storage("/tmp/table")
        >>> [f.name for f in storage.list_from("_delta_log", "00000000000000000010")]  # doctest: +SKIP
        >>> Storage("s3://bucket/t", {"deltalite_retry_attempts": "5"}).retry_policy.attempts  # doctest: +SKIP
        5
    """

    def __init__(
        self, table_uri: str, storage_options: Mapping[str, Any] | None = None, *, filesystem: Any = None
    ) -> None:
        self.table_uri = normalize_table_uri(table_uri)
        options = dict(storage_options or {})
        own = {key: options.pop(key) for key in DELTALITE_OPTIONS if key in options}
        self.single_writer = str(own.get("deltalite_single_writer", "false")).lower() in ("1", "true", "yes")
        try:
            self.retry_policy = StorageRetryPolicy.from_options(own)
        except ValueError as exc:
            raise InvalidArgument(str(exc), self.table_uri) from None
        self._own_options = own
        self._options = options
        scheme = urlsplit(self.table_uri).scheme
        if filesystem is not None:
            protocols = filesystem.protocol if isinstance(filesystem.protocol, tuple | list) else (filesystem.protocol,)
            wanted = {"file", "local"} if scheme in ("", "file", "local") else {scheme}
            if not wanted & set(protocols):
                raise InvalidArgument(
                    f"the filesystem given serves {'/'.join(protocols)}://, not the table's "
                    f"{scheme or 'file'}:// location",
                    self.table_uri,
                )
            self.fs = filesystem
            root = filesystem._strip_protocol(self.table_uri)
        else:
            fs_options = dict(options)
            if scheme not in ("", "file", "memory", "local"):
                # Other writers change the log under us; a cached directory listing makes a new commit look missing.
                fs_options.setdefault("use_listings_cache", False)
            try:
                self.fs, root = fsspec.core.url_to_fs(self.table_uri, **fs_options)
            except (ImportError, ValueError) as exc:
                raise StorageError(f"cannot open storage: {type(exc).__name__}: {exc}", self.table_uri) from None
        self.root = root.rstrip("/") or "/"
        self.protocol = self.fs.protocol[0] if isinstance(self.fs.protocol, tuple | list) else self.fs.protocol
        self._local = self.protocol in ("file", "local")

    # The fsspec filesystem holds sockets and event loops; Spark ships Storage to executors, so rebuild it there.
    def __getstate__(self) -> dict[str, Any]:
        return {"table_uri": self.table_uri, "options": self._options, "own_options": self._own_options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["table_uri"], {**state["options"], **state["own_options"]})  # type: ignore[misc]

    # -- paths -------------------------------------------------------------------------------------------

    def full_path(self, path: str) -> str:
        """The backend path of ``path`` (relative to the root, or an absolute URI of this store)."""
        if "://" in path or path.startswith("file:"):
            return self.fs._strip_protocol(path)
        if path.startswith("/") and self.protocol in ("file", "local"):
            return path
        return posixpath.join(self.root, path) if self.root != "/" else "/" + path

    def resolve_data_path(self, path_in_log: str) -> str:
        """Resolve an add/remove ``path`` exactly as the protocol says: a URI-encoded relative path or an absolute URI.

        The value is decoded once; relative paths are joined to the table root.
        """
        if _is_absolute_uri(path_in_log):
            return self.full_path(absolute_uri_to_path(path_in_log))
        return self.full_path(unquote(path_in_log))

    def relative_to_root(self, full_path: str) -> str | None:
        """The path relative to the table root, or None when ``full_path`` lies outside it."""
        prefix = self.root.rstrip("/") + "/"
        return full_path[len(prefix) :] if full_path.startswith(prefix) else None

    # -- requests ------------------------------------------------------------------------------------------

    def _retry(self, request: Callable[[], T]) -> T:
        """One request under the retry policy (the local disk is tried once: its faults are not transient)."""
        if self._local:
            return request()
        return retry_call(self.retry_policy, request)

    @contextlib.contextmanager
    def _errors(self, path: str, *, missing: bool = True) -> Iterator[None]:
        """Translate what a request on ``path`` finally raised: FileNotFoundError (and FileExistsError) pass (a
        NotADirectoryError, a parent that is a regular file, is a missing path); other backend failures become a
        StorageError. ``missing=False`` wraps FileNotFoundError too (where no file is asked for)."""
        try:
            yield
        except FileExistsError:
            raise
        except FileNotFoundError as exc:
            if missing:
                raise
            raise self._wrap(exc, path) from None
        except NotADirectoryError as exc:
            if missing:
                raise FileNotFoundError(path) from None
            raise self._wrap(exc, path) from None
        except Exception as exc:
            if not is_backend_failure(exc):
                raise
            raise self._wrap(exc, path) from None

    # -- reads ---------------------------------------------------------------------------------------------

    def exists(self, path: str) -> bool:
        """Whether a file or directory exists."""
        full = self.full_path(path)
        with self._errors(path, missing=False):
            return bool(self._retry(lambda: self.fs.exists(full)))

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` is a directory (or a prefix holding objects)."""
        full = self.full_path(path)
        with self._errors(path, missing=False):
            return bool(self._retry(lambda: self.fs.isdir(full)))

    def read(self, path: str) -> bytes:
        """The whole content of a file. Raises FileNotFoundError when it does not exist."""
        full = self.full_path(path)
        with self._errors(path):
            return self._retry(lambda: self.fs.cat_file(full))

    def read_many(self, paths: Iterable[str]) -> list[bytes]:
        """The contents of several files, fetched concurrently where the backend can.

        A retry fetches only the files whose fetch failed transiently. Raises FileNotFoundError when one is missing.
        """
        paths = list(paths)
        if not paths:
            return []
        full = [self.full_path(p) for p in paths]
        if len(full) == 1:
            return [self.read(paths[0])]
        by_full = dict(zip(full, paths, strict=False))
        done: dict[str, bytes] = {}
        where = [paths[0]]  # the path an error names: the one whose fetch failed

        def fetch() -> None:
            todo = [p for p in dict.fromkeys(full) if p not in done]
            got = self.fs.cat(todo, on_error="raise" if self._local else "return")
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
                where[0] = by_full[errors[0][0]]
                raise errors[0][1]

        try:
            self._retry(fetch)
        except Exception:
            with self._errors(where[0]):
                raise
        return [done[p] for p in full]

    def read_range(self, path: str, start: int, length: int) -> bytes:
        """``length`` bytes of a file starting at ``start``."""
        full = self.full_path(path)
        with self._errors(path):
            return self._retry(lambda: self.fs.cat_file(full, start=start, end=start + length))

    def open_input(self, path: str) -> Any:
        """A binary file object for random access reads (Parquet); on object stores its reads are retried."""
        return self._open_for_read(self.full_path(path), path)

    def open_data_file(self, full: str) -> Any:
        """A file to decode Parquet from, at a full path (`resolve_data_path`).

        On local disk it is a pyarrow native file: its reads release the GIL, so the threads of the local executor
        decode in parallel, where an fsspec file object would take the GIL for every read. On object stores a read
        that fails transiently opens the object again at the same offset (a Parquet decode makes many ranged reads).
        """
        if self._local:
            return pa.OSFile(self.fs._strip_protocol(full), "rb")
        return self._open_for_read(full, self.relative_to_root(full) or full)

    def _open_for_read(self, full: str, path: str) -> Any:
        if self._local:
            with self._errors(path):
                return self.fs.open(full, "rb")
        with self._errors(path):
            return _StorageErrorReader(lambda: self.fs.open(full, "rb"), self.retry_policy, self, path)

    def create_data_file(self, full: str) -> Any:
        """A new file to write Parquet to, at a full path (a pyarrow native file on local disk, as `open_data_file`).

        On object stores the content is streamed to the store (a multipart upload for large files), which cannot be
        replayed: a failure while writing or closing abandons the upload and raises StorageError, so the operation
        commits nothing, and whatever reached the store is an orphan for VACUUM.
        """
        if self._local:
            local = self.fs._strip_protocol(full)
            os.makedirs(os.path.dirname(local), exist_ok=True)
            return pa.OSFile(local, "wb")
        path = self.relative_to_root(full) or full
        with self._errors(path):
            return _Upload(self._retry(lambda: self.fs.open(full, "wb")), self, path)

    def list_from(self, directory: str, start_name: str = "") -> list[FileInfo]:
        """Files directly inside ``directory`` whose name sorts at or after ``start_name``, sorted by name.

        On S3 this asks the server to start the listing there (``StartAfter``), so a long log is not listed whole.
        """
        full_dir = self.full_path(directory).rstrip("/")
        with self._errors(directory):
            if self.protocol in ("s3", "s3a") and start_name:
                entries = self._s3_list_from(full_dir, start_name)  # each page is retried on its own
            elif self._local:
                entries = _local_list_from(full_dir, start_name)
            else:
                raw = self._retry(lambda: self.fs.ls(full_dir, detail=True))
                entries = []
                for entry in raw:
                    if entry.get("type") == "directory":
                        continue
                    name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
                    if name >= start_name:
                        entries.append(FileInfo(name, int(entry.get("size") or 0), _mtime_ms(entry)))
        entries.sort(key=lambda f: f.name)
        return entries

    def _s3_list_from(self, full_dir: str, start_name: str) -> list[FileInfo]:
        bucket, _, key_prefix = full_dir.partition("/")
        prefix = key_prefix.rstrip("/") + "/" if key_prefix else ""
        # StartAfter is exclusive; start from the name just before start_name so start_name itself is included.
        start_after = prefix + start_name[:-1] + chr(ord(start_name[-1]) - 1) + "\U0010ffff"
        out: list[FileInfo] = []
        token = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "Delimiter": "/"}
            if token:
                kwargs["ContinuationToken"] = token
            else:
                kwargs["StartAfter"] = start_after
            response = self._s3_request("list_objects_v2", **kwargs)
            for obj in response.get("Contents", []):
                name = obj["Key"][len(prefix) :]
                if name and "/" not in name and name >= start_name:
                    out.append(FileInfo(name, int(obj.get("Size", 0)), _mtime_ms(obj)))
            if not response.get("IsTruncated"):
                break
            token = response.get("NextContinuationToken")
        if not out and not self._retry(lambda: self.fs.exists(full_dir)):
            raise FileNotFoundError(full_dir)
        return out

    def _s3_request(self, method: str, **kwargs: Any) -> Any:
        """One S3 API call through s3fs (its event loop and client), under the retry policy."""
        from fsspec.asyn import sync

        return self._retry(lambda: sync(self.fs.loop, self.fs._call_s3, method, **kwargs))

    def list_dir(self, directory: str, without_details: Container[str] = frozenset()) -> DirListing:
        """One level of ``directory`` (relative to the root; ``""`` is the root) with sizes and mtimes, from listing
        requests only: ``os.scandir`` locally, paginated ``ListObjectsV2`` with a ``/`` delimiter on S3.

        Symbolic links are not followed. A directory that does not exist lists as empty. Plain files named in
        ``without_details`` need no size or mtime: locally they skip their ``lstat`` and report -1 for both (object
        stores list them anyway).
        """
        full_dir = self.full_path(directory).rstrip("/") if directory else self.root
        try:
            with self._errors(directory or "/"):
                if self._local:
                    return _local_list_dir(full_dir, without_details)
                if self.protocol in ("s3", "s3a"):
                    return self._s3_list_dir(full_dir)  # each page is retried on its own
                return self._fsspec_list_dir(full_dir)
        except FileNotFoundError:  # NotADirectoryError arrives as FileNotFoundError
            return DirListing()

    def _s3_list_dir(self, full_dir: str) -> DirListing:
        bucket, _, key_prefix = full_dir.partition("/")
        prefix = key_prefix.rstrip("/") + "/" if key_prefix else ""
        names: list[str] = []
        sizes: list[int] = []
        mtimes: list[int] = []
        dirs: list[str] = []
        others: list[str] = []
        token = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "Delimiter": "/"}
            if token:
                kwargs["ContinuationToken"] = token
            response = self._s3_request("list_objects_v2", **kwargs)
            for obj in response.get("Contents", []):
                name = obj["Key"][len(prefix) :]
                if name:  # the empty name is the directory's own marker object
                    names.append(name)
                    sizes.append(int(obj.get("Size", 0)))
                    mtimes.append(_mtime_ms(obj))
            for common in response.get("CommonPrefixes", []):
                name = common["Prefix"][len(prefix) :].rstrip("/")
                if name and "/" not in name:
                    dirs.append(name)
                else:  # "a//b": a key with an empty segment, not a directory anyone can name
                    others.append(common["Prefix"][len(prefix) :])
            if not response.get("IsTruncated"):
                break
            token = response.get("NextContinuationToken")
        return DirListing(tuple(names), tuple(sizes), tuple(mtimes), tuple(dirs), (0,) * len(dirs), tuple(others))

    def _fsspec_list_dir(self, full_dir: str) -> DirListing:
        files: list[tuple[str, int, int]] = []
        dirs: list[tuple[str, int]] = []
        others: list[str] = []
        for entry in self._retry(lambda: self.fs.ls(full_dir, detail=True)):
            name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
            if entry.get("type") == "directory":
                dirs.append((name, _mtime_ms(entry)))
            elif entry.get("type") == "file":
                files.append((name, int(entry.get("size") or 0), _mtime_ms(entry)))
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

    # -- writes ------------------------------------------------------------------------------------------

    @property
    def create_only(self) -> str | None:
        """How this store writes a file only if it is absent: ``"native"`` (atomic put-if-absent), ``"single-writer"``
        (the user opted in with ``deltalite_single_writer``: an existence check, safe only without other writers),
        or None (commits are refused)."""
        if self.protocol in _NATIVE_CREATE_ONLY:
            return "native"
        return "single-writer" if self.single_writer else None

    def write_create_only(self, path: str, data: bytes) -> None:
        """Write ``path`` only if it does not exist; raises FileExistsError when it does (another writer won).

        Local files are written to a hidden temporary name and hard-linked into place, so the name appears with its
        whole content or not at all; S3 uses a conditional PUT (`If-None-Match: *`).

        On object stores a transient failure is retried like every request. Its outcome is unknown (the write may have
        landed and only the response been lost), so a retry that finds the name taken raises FileExistsError as well:
        whether the file there is the caller's own write is for the caller to read (a commit's ``txnId``).

        Raises:
            FileExistsError: the file exists.
            CreateOnlyNotSupported: the store has no put-if-absent and single-writer mode is off.
            StorageError: the write still failed after the retries; it may or may not have landed.
        """
        mode = self.create_only
        if mode is None:
            raise CreateOnlyNotSupported(
                f"the {self.protocol}:// store cannot write a file only if it is absent, so concurrent writers "
                "could overwrite each other's commits; if this table has exactly one writer, pass the storage option "
                "deltalite_single_writer=true",
                self.table_uri,
            )
        full = self.full_path(path)
        if self._local:
            with self._errors(path):
                _local_create_only(full, data)
            return

        def attempt() -> None:
            try:
                if self.protocol == "memory":
                    with _MEMORY_LOCK:
                        if self.fs.exists(full):
                            raise FileExistsError(full)
                        self.fs.pipe_file(full, data)
                elif mode == "native":
                    crash_point("during_commit_write")
                    self.fs.pipe_file(full, data, mode="create")
                else:
                    if self.fs.exists(full):
                        raise FileExistsError(full)
                    self.fs.pipe_file(full, data)
            except Exception as exc:
                # A failed condition means the name is taken: by another writer, or by an earlier try of ours whose
                # response was lost. Telling the two apart is the transaction's job (it reads the txnId), not ours.
                if is_precondition_failure(exc):
                    raise FileExistsError(full) from None
                raise

        with self._errors(path):
            self._retry(attempt)

    def write(self, path: str, data: bytes) -> None:
        """Write (or replace) ``path`` so that readers see the old or the new content, never a part."""
        full = self.full_path(path)
        with self._errors(path):
            if self._local:
                _local_replace(full, data)
            else:
                self._retry(lambda: self.fs.pipe_file(full, data))

    def delete(self, paths: Iterable[str]) -> None:
        """Delete files; files already gone are fine (another cleanup may have run).

        Raises:
            StorageError: some files could not be deleted (the message names the first and counts them).
        """
        outcome = self.delete_files(paths)
        if outcome.failed:
            path, reason = outcome.failed[0]
            raise StorageError(
                f"storage error on {path}: {reason}"
                + (
                    f" (and {len(outcome.failed) - 1} more files could not be deleted)"
                    if len(outcome.failed) > 1
                    else ""
                ),
                self.table_uri,
            )

    def delete_files(self, paths: Iterable[str]) -> DeleteOutcome:
        """Delete exactly these files (no globbing, no recursion) and report each outcome.

        S3 deletes up to 1,000 keys per ``DeleteObjects`` request; a request that fails transiently, and the keys the
        store answers with a throttling or transient error, are retried under the storage retry policy (deleting is
        idempotent). Local files are unlinked once (a symbolic link itself, never its target). Other stores delete
        file by file, each under the policy.
        """
        paths = list(paths)
        if not paths:
            return DeleteOutcome()
        if self._local:
            return _local_delete(paths, [self.full_path(p) for p in paths])
        if self.protocol in ("s3", "s3a"):
            return self._s3_delete(paths)
        return self._fsspec_delete(paths)

    def _s3_delete(self, paths: list[str]) -> DeleteOutcome:
        from fsspec.asyn import sync

        policy = self.retry_policy
        by_key: dict[tuple[str, str], str] = {}
        for path in paths:
            bucket, _, key = self.full_path(path).partition("/")
            by_key[(bucket, key)] = path
        deleted: list[str] = []
        failed: list[tuple[str, str]] = []
        pending = list(by_key)
        # One budget for the request and its keys: a key is retried whether its batch failed as a whole or the store
        # refused that key alone, so no key is tried more than `attempts` times.
        for attempt in range(1, policy.attempts + 1):
            retry: list[tuple[str, str]] = []
            reasons: dict[tuple[str, str], str] = {}
            for start in range(0, len(pending), _S3_DELETE_BATCH):
                chunk = pending[start : start + _S3_DELETE_BATCH]
                by_bucket: dict[str, list[str]] = {}
                for bucket, key in chunk:
                    by_bucket.setdefault(bucket, []).append(key)
                for bucket, keys in by_bucket.items():
                    try:
                        response = sync(
                            self.fs.loop,
                            self.fs._call_s3,
                            "delete_objects",
                            Bucket=bucket,
                            Delete={"Objects": [{"Key": k} for k in keys], "Quiet": False},
                        )
                    except Exception as exc:
                        if not is_backend_failure(exc):
                            raise
                        reason = _describe(exc)
                        if is_transient(exc):  # the whole batch's outcome is unknown: ask again
                            for key in keys:
                                retry.append((bucket, key))
                                reasons[(bucket, key)] = reason
                        else:  # permissions, a missing bucket: retrying cannot help
                            failed.extend((by_key[(bucket, k)], reason) for k in keys)
                        continue
                    for item in response.get("Deleted", []):
                        if (bucket, item["Key"]) in by_key:
                            deleted.append(by_key[(bucket, item["Key"])])
                    for err in response.get("Errors", []):
                        ident = (bucket, err.get("Key", ""))
                        if ident not in by_key:
                            continue
                        reason = f"{err.get('Code')}: {err.get('Message')}"
                        if err.get("Code") in TRANSIENT_CODES:
                            retry.append(ident)
                            reasons[ident] = reason
                        else:
                            failed.append((by_key[ident], reason))
            if not retry:
                break
            if attempt == policy.attempts:
                failed.extend((by_key[i], f"{reasons[i]} (after {attempt} attempts)") for i in retry)
                break
            time.sleep(policy.delay(attempt))
            pending = retry
        return DeleteOutcome(tuple(deleted), (), tuple(failed))

    def _fsspec_delete(self, paths: list[str]) -> DeleteOutcome:
        deleted: list[str] = []
        missing: list[str] = []
        failed: list[tuple[str, str]] = []
        for path in paths:
            full = self.full_path(path)
            try:
                self._retry(lambda full=full: self.fs.rm_file(full))
            except FileNotFoundError:
                missing.append(path)
            except Exception as exc:
                if not is_backend_failure(exc):
                    raise
                tries = f" (after {self.retry_policy.attempts} attempts)" if is_transient(exc) else ""
                failed.append((path, _describe(exc) + tries))
            else:
                deleted.append(path)
        return DeleteOutcome(tuple(deleted), tuple(missing), tuple(failed))

    def remove_empty_dir(self, directory: str) -> bool:
        """Remove ``directory`` if it is empty (never recursively); False when it is not empty, is gone, or the store
        has no directories of its own (object stores: a prefix disappears with its last object)."""
        if self.protocol not in ("file", "local") or not directory:
            return False
        try:
            os.rmdir(self.full_path(directory))
        except OSError:
            return False
        return True

    def _wrap(self, exc: BaseException, path: str) -> StorageError:
        # A transient failure reaches here only when every try failed (see `retry_call`).
        tries = ""
        if is_transient(exc) and not self._local and self.retry_policy.attempts > 1:
            tries = f" after {self.retry_policy.attempts} attempts"
        return StorageError(f"storage error on {path}{tries}: {_describe(exc)}", self.table_uri)

    def __repr__(self) -> str:
        return f"Storage({redact_uri(self.table_uri)!r})"


class _StorageErrorReader(RetryingReader):
    """A `RetryingReader` whose final failures are the table's errors: StorageError (a missing object stays
    FileNotFoundError), so a Parquet decode that gives up reports the path, the cause and the table."""

    def __init__(self, opener: Callable[[], Any], policy: StorageRetryPolicy, storage: Storage, path: str) -> None:
        self._storage = storage
        self._path = path
        super().__init__(opener, policy)

    def _request(self, request: Callable[[Any], T]) -> T:
        with self._storage._errors(self._path):
            return super()._request(request)


class _Upload:
    """A data file streamed to an object store. A streamed (multipart) upload cannot be replayed from the start, so
    it is not retried: the first failure abandons it (the multipart upload is aborted where the store has one) and
    raises StorageError, and every later write or flush raises it again."""

    def __init__(self, fh: Any, storage: Storage, path: str) -> None:
        self._fh = fh
        self._storage = storage
        self._path = path
        self._failure: StorageError | None = None
        self.closed = False

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def write(self, data: Any) -> int:
        return self._request(lambda: self._fh.write(data))

    def tell(self) -> int:
        return int(self._fh.tell())  # the bytes accepted so far: no request

    def flush(self) -> None:
        if not self.closed:
            self._request(self._fh.flush)

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self._failure is None:
                self._request(self._fh.close)
        finally:
            self.closed = True

    def __enter__(self) -> _Upload:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        # never finish an upload nobody closed: what was written is not known to be a whole file
        if not self.closed and self._failure is None:
            self._abandon()

    def _request(self, request: Callable[[], T]) -> T:
        if self._failure is not None:
            raise self._failure
        try:
            return request()
        except Exception as exc:
            self._abandon()
            # a transient fault may pass: the typed subclass tells the writer it may produce the file again
            error = UploadInterrupted if is_transient(exc) else StorageError
            self._failure = error(
                f"cannot upload data file {self._path}: {_describe(exc)}; a streamed upload cannot be replayed, so "
                "it was abandoned: nothing is committed, and whatever reached the store is left for VACUUM",
                self._storage.table_uri,
            )
            raise self._failure from None

    def _abandon(self) -> None:
        fh = self._fh
        with contextlib.suppress(Exception):
            discard = getattr(fh, "discard", None)
            if discard is not None:
                discard()  # s3fs: aborts the multipart upload; the object never appears
                fh.closed = True  # a discarded fsspec file must not upload what it buffered when collected


# Stores whose fsspec backend does an atomic put-if-absent. s3fs sends `If-None-Match: *` (AWS S3 since 2024, MinIO,
# moto); local files use a hard link. Other object stores are refused until their backend is verified.
_NATIVE_CREATE_ONLY = frozenset({"file", "local", "memory", "s3", "s3a"})
_MEMORY_LOCK = threading.Lock()


def _temp_name(full: str) -> str:
    directory, name = os.path.split(full)
    # a leading dot keeps the temporary file out of log listings and VACUUM (hidden)
    return os.path.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")


# `_temp_name`'s names, and Hadoop's log stores' (a dashed UUID): a writer killed before the rename leaves one behind.
_TEMP_NAME = re.compile(r"\..+\.[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}\.tmp")


def is_temporary_name(name: str) -> bool:
    """Whether ``name`` is a temporary file of an atomic local write (deltalite's or Hadoop's), not a log file.

    Example:
        >>> is_temporary_name(".00000000000000000001.json." + "a" * 32 + ".tmp")
        True
    """
    return _TEMP_NAME.fullmatch(name) is not None


def _write_temp(full: str, data: bytes) -> str:
    os.makedirs(os.path.dirname(full), exist_ok=True)
    tmp = _temp_name(full)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def _local_create_only(full: str, data: bytes) -> None:
    tmp = _write_temp(full, data)
    crash_point("during_commit_write")
    try:
        os.link(tmp, full)  # fails with FileExistsError when the name exists: the put-if-absent
    except FileExistsError:
        raise
    except OSError:
        # no hard links on this filesystem: exclusive create, then write (a reader may briefly see a short file)
        fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _local_replace(full: str, data: bytes) -> None:
    tmp = _write_temp(full, data)
    try:
        os.replace(tmp, full)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _local_list_from(directory: str, start_name: str) -> list[FileInfo]:
    # fsspec stats every entry; a long local log only needs the names after start_name stat'ed
    entries = []
    with os.scandir(directory) as scan:
        for entry in scan:
            if entry.name < start_name:
                continue
            try:
                if entry.is_dir():
                    continue
                info = entry.stat()
            except FileNotFoundError:  # removed by log cleanup while listing
                continue
            entries.append(FileInfo(entry.name, info.st_size, info.st_mtime_ns // 1_000_000))
    return entries


def _local_list_dir(directory: str, without_details: Container[str] = frozenset()) -> DirListing:
    names: list[str] = []
    sizes: list[int] = []
    mtimes: list[int] = []
    dirs: list[str] = []
    dir_mtimes: list[int] = []
    others: list[str] = []
    with os.scandir(directory) as scan:
        for entry in scan:
            if entry.name in without_details:
                try:
                    # the entry's type comes with the directory listing (d_type); no lstat when it is a plain file
                    plain = entry.is_file(follow_symlinks=False)
                except OSError:
                    plain = False
                if plain:
                    names.append(entry.name)
                    sizes.append(-1)
                    mtimes.append(-1)
                    continue
            try:
                st = entry.stat(follow_symlinks=False)  # one lstat: the type, size and mtime, links not followed
            except FileNotFoundError:  # deleted while listing
                continue
            mode = st.st_mode
            if stat.S_ISREG(mode):
                names.append(entry.name)
                sizes.append(st.st_size)
                mtimes.append(st.st_mtime_ns // 1_000_000)
            elif stat.S_ISDIR(mode):
                dirs.append(entry.name)
                dir_mtimes.append(st.st_mtime_ns // 1_000_000)
            else:
                others.append(entry.name)
    return DirListing(tuple(names), tuple(sizes), tuple(mtimes), tuple(dirs), tuple(dir_mtimes), tuple(others))


def _local_delete(paths: list[str], full: list[str]) -> DeleteOutcome:
    deleted: list[str] = []
    missing: list[str] = []
    failed: list[tuple[str, str]] = []
    for path, f in zip(paths, full, strict=True):
        try:
            os.unlink(f)  # on a symbolic link this removes the link, never the file it points to
        except FileNotFoundError:
            missing.append(path)
        except OSError as exc:
            failed.append((path, f"{type(exc).__name__}: {exc.strerror or exc}"))
        else:
            deleted.append(path)
    return DeleteOutcome(tuple(deleted), tuple(missing), tuple(failed))


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]+")


def _describe(exc: BaseException) -> str:
    """``Type: message`` of a backend error for our messages, with the user info and query of any URL in it removed
    (an endpoint URL can carry credentials; a presigned one carries a signature)."""
    text = " ".join(str(exc).split())
    text = _URL.sub(lambda m: redact_uri(m.group(0)) or "", text)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _is_absolute_uri(path: str) -> bool:
    scheme = urlsplit(path).scheme
    return (bool(scheme) and len(scheme) > 1) or path.startswith("/")


def absolute_uri_to_path(uri: str) -> str:
    """Decode an absolute URI from the log (``file:/a%20b``, ``s3://b/k``) into a path the store accepts."""
    parts = urlsplit(uri)
    if parts.scheme in ("file", ""):
        return unquote(parts.path)
    return f"{parts.scheme}://{parts.netloc}{unquote(parts.path)}"
