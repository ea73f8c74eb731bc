"""One storage interface over fsspec: listing the log from a version, reads, and create-only writes."""

from __future__ import annotations

import contextlib
import os
import posixpath
import random
import stat
import threading
import time
import uuid
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import unquote, urlsplit

import fsspec
import pyarrow as pa

from airflow_provider_deltalite.engine.crash_points import crash_point
from airflow_provider_deltalite.engine.errors import CreateOnlyNotSupported, StorageError, TableNotFound, redact_uri

# Options that configure deltalite itself rather than the fsspec backend.
_DELTALITE_OPTIONS = ("deltalite_single_writer",)


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


# Per-key and per-request S3 error codes that mean "slow down and try again".
_RETRYABLE_CODES = frozenset(
    {"SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout", "Throttling", "ThrottlingException", "503"}
)
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

    Example:
        >>> storage = Storage("/tmp/table")
        >>> [f.name for f in storage.list_from("_delta_log", "00000000000000000010")]  # doctest: +SKIP
    """

    def __init__(self, table_uri: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self.table_uri = normalize_table_uri(table_uri)
        options = dict(storage_options or {})
        self.single_writer = str(options.pop("deltalite_single_writer", "false")).lower() in ("1", "true", "yes")
        for key in _DELTALITE_OPTIONS:
            options.pop(key, None)
        self._options = options
        fs_options = dict(options)
        if urlsplit(self.table_uri).scheme not in ("", "file", "memory", "local"):
            # Other writers change the log under us; a cached directory listing makes a new commit look missing.
            fs_options.setdefault("use_listings_cache", False)
        try:
            self.fs, root = fsspec.core.url_to_fs(self.table_uri, **fs_options)
        except (ImportError, ValueError) as exc:
            raise StorageError(f"cannot open storage: {type(exc).__name__}: {exc}", self.table_uri) from None
        self.root = root.rstrip("/") or "/"
        self.protocol = self.fs.protocol[0] if isinstance(self.fs.protocol, tuple | list) else self.fs.protocol

    # The fsspec filesystem holds sockets and event loops; Spark ships Storage to executors, so rebuild it there.
    def __getstate__(self) -> dict[str, Any]:
        return {"table_uri": self.table_uri, "options": self._options, "single_writer": self.single_writer}

    def __setstate__(self, state: dict[str, Any]) -> None:
        options = dict(state["options"])
        if state["single_writer"]:
            options["deltalite_single_writer"] = "true"
        self.__init__(state["table_uri"], options)  # type: ignore[misc]

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

    # -- reads ---------------------------------------------------------------------------------------------

    def exists(self, path: str) -> bool:
        """Whether a file or directory exists."""
        try:
            return bool(self.fs.exists(self.full_path(path)))
        except (PermissionError, OSError) as exc:
            raise self._wrap(exc, path) from None

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` is a directory (or a prefix holding objects)."""
        try:
            return bool(self.fs.isdir(self.full_path(path)))
        except (PermissionError, OSError) as exc:
            raise self._wrap(exc, path) from None

    def read(self, path: str) -> bytes:
        """The whole content of a file. Raises FileNotFoundError when it does not exist."""
        try:
            return self.fs.cat_file(self.full_path(path))
        except FileNotFoundError:
            raise
        except NotADirectoryError:  # a parent is a regular file: the path does not exist
            raise FileNotFoundError(path) from None
        except (PermissionError, OSError) as exc:
            raise self._wrap(exc, path) from None

    def read_many(self, paths: Iterable[str]) -> list[bytes]:
        """The contents of several files, fetched concurrently where the backend can."""
        paths = list(paths)
        if not paths:
            return []
        full = [self.full_path(p) for p in paths]
        try:
            if len(full) == 1:
                return [self.fs.cat_file(full[0])]
            result = self.fs.cat(full, on_error="raise")
        except FileNotFoundError:
            raise
        except NotADirectoryError:  # a parent is a regular file: the path does not exist
            raise FileNotFoundError(paths[0]) from None
        except (PermissionError, OSError) as exc:
            raise self._wrap(exc, paths[0]) from None
        return [result[p] for p in full]

    def read_range(self, path: str, start: int, length: int) -> bytes:
        """``length`` bytes of a file starting at ``start``."""
        try:
            return self.fs.cat_file(self.full_path(path), start=start, end=start + length)
        except FileNotFoundError:
            raise
        except NotADirectoryError:  # a parent is a regular file: the path does not exist
            raise FileNotFoundError(path) from None
        except (PermissionError, OSError) as exc:
            raise self._wrap(exc, path) from None

    def open_input(self, path: str) -> Any:
        """A binary file object for random access reads (Parquet)."""
        try:
            return self.fs.open(self.full_path(path), "rb")
        except FileNotFoundError:
            raise
        except NotADirectoryError:  # a parent is a regular file: the path does not exist
            raise FileNotFoundError(path) from None
        except (PermissionError, OSError) as exc:
            raise self._wrap(exc, path) from None

    def open_data_file(self, full: str) -> Any:
        """A file to decode Parquet from, at a full path (`resolve_data_path`).

        On local disk it is a pyarrow native file: its reads release the GIL, so the threads of the local executor
        decode in parallel, where an fsspec file object would take the GIL for every read.
        """
        if self.protocol in ("file", "local"):
            return pa.OSFile(self.fs._strip_protocol(full), "rb")
        return self.fs.open(full, "rb")

    def create_data_file(self, full: str) -> Any:
        """A new file to write Parquet to, at a full path (a pyarrow native file on local disk, as `open_data_file`)."""
        if self.protocol in ("file", "local"):
            local = self.fs._strip_protocol(full)
            os.makedirs(os.path.dirname(local), exist_ok=True)
            return pa.OSFile(local, "wb")
        return self.fs.open(full, "wb")

    def list_from(self, directory: str, start_name: str = "") -> list[FileInfo]:
        """Files directly inside ``directory`` whose name sorts at or after ``start_name``, sorted by name.

        On S3 this asks the server to start the listing there (``StartAfter``), so a long log is not listed whole.
        """
        full_dir = self.full_path(directory).rstrip("/")
        try:
            if self.protocol in ("s3", "s3a") and start_name:
                entries = self._s3_list_from(full_dir, start_name)
            elif self.protocol in ("file", "local"):
                entries = _local_list_from(full_dir, start_name)
            else:
                raw = self.fs.ls(full_dir, detail=True)
                entries = []
                for entry in raw:
                    if entry.get("type") == "directory":
                        continue
                    name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
                    if name >= start_name:
                        entries.append(FileInfo(name, int(entry.get("size") or 0), _mtime_ms(entry)))
        except FileNotFoundError:
            raise
        except NotADirectoryError:  # a parent is a regular file: the path does not exist
            raise FileNotFoundError(directory) from None
        except (PermissionError, OSError) as exc:
            raise self._wrap(exc, directory) from None
        entries.sort(key=lambda f: f.name)
        return entries

    def _s3_list_from(self, full_dir: str, start_name: str) -> list[FileInfo]:
        from fsspec.asyn import sync

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
            response = sync(self.fs.loop, self.fs._call_s3, "list_objects_v2", **kwargs)
            for obj in response.get("Contents", []):
                name = obj["Key"][len(prefix) :]
                if name and "/" not in name and name >= start_name:
                    out.append(FileInfo(name, int(obj.get("Size", 0)), _mtime_ms(obj)))
            if not response.get("IsTruncated"):
                break
            token = response.get("NextContinuationToken")
        if not out and not self.fs.exists(full_dir):
            raise FileNotFoundError(full_dir)
        return out

    def list_dir(self, directory: str, without_details: Container[str] = frozenset()) -> DirListing:
        """One level of ``directory`` (relative to the root; ``""`` is the root) with sizes and mtimes, from listing
        requests only: ``os.scandir`` locally, paginated ``ListObjectsV2`` with a ``/`` delimiter on S3.

        Symbolic links are not followed. A directory that does not exist lists as empty. Plain files named in
        ``without_details`` need no size or mtime: locally they skip their ``lstat`` and report -1 for both (object
        stores list them anyway).
        """
        full_dir = self.full_path(directory).rstrip("/") if directory else self.root
        try:
            if self.protocol in ("file", "local"):
                return _local_list_dir(full_dir, without_details)
            if self.protocol in ("s3", "s3a"):
                return self._s3_list_dir(full_dir)
            return self._fsspec_list_dir(full_dir)
        except (FileNotFoundError, NotADirectoryError):
            return DirListing()
        except (PermissionError, OSError) as exc:
            raise self._wrap(exc, directory or "/") from None

    def _s3_list_dir(self, full_dir: str) -> DirListing:
        from fsspec.asyn import sync

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
            response = sync(self.fs.loop, self.fs._call_s3, "list_objects_v2", **kwargs)
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
        for entry in self.fs.ls(full_dir, detail=True):
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

        Raises:
            FileExistsError: the file exists.
            CreateOnlyNotSupported: the store has no put-if-absent and single-writer mode is off.
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
        try:
            if self.protocol in ("file", "local"):
                _local_create_only(full, data)
            elif self.protocol == "memory":
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
        except FileExistsError:
            raise
        except (PermissionError, OSError) as exc:
            if _is_lost_conditional_put(exc):
                raise FileExistsError(full) from None
            raise self._wrap(exc, path) from None

    def write(self, path: str, data: bytes) -> None:
        """Write (or replace) ``path`` so that readers see the old or the new content, never a part."""
        full = self.full_path(path)
        try:
            if self.protocol in ("file", "local"):
                _local_replace(full, data)
            else:
                self.fs.pipe_file(full, data)
        except (PermissionError, OSError) as exc:
            raise self._wrap(exc, path) from None

    def delete(self, paths: Iterable[str]) -> None:
        """Delete files; files already gone are fine (another cleanup may have run)."""
        paths = list(paths)
        full = [self.full_path(p) for p in paths]
        if not full:
            return
        try:
            if self.protocol in ("file", "local"):
                for f in full:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(f)
            else:
                self.fs.rm(full)
        except FileNotFoundError:
            pass
        except (PermissionError, OSError) as exc:
            raise self._wrap(exc, paths[0]) from None

    def delete_files(self, paths: Iterable[str], *, attempts: int = 4, backoff_s: float = 0.1) -> DeleteOutcome:
        """Delete exactly these files (no globbing, no recursion) and report each outcome.

        S3 deletes up to 1,000 keys per ``DeleteObjects`` request; keys the store answers with a throttling or
        transient error are retried, up to ``attempts`` tries in all with jittered exponential backoff, and so is a
        request that fails as a whole. Local files are unlinked (a symbolic link itself, never its target). Other
        stores delete file by file.
        """
        paths = list(paths)
        if not paths:
            return DeleteOutcome()
        if self.protocol in ("file", "local"):
            return _local_delete(paths, [self.full_path(p) for p in paths])
        if self.protocol in ("s3", "s3a"):
            return self._s3_delete(paths, attempts, backoff_s)
        return self._fsspec_delete(paths, attempts, backoff_s)

    def _s3_delete(self, paths: list[str], attempts: int, backoff_s: float) -> DeleteOutcome:
        from fsspec.asyn import sync

        by_key: dict[tuple[str, str], str] = {}
        for path in paths:
            bucket, _, key = self.full_path(path).partition("/")
            by_key[(bucket, key)] = path
        deleted: list[str] = []
        failed: list[tuple[str, str]] = []
        pending = list(by_key)
        for attempt in range(attempts):
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
                    except PermissionError as exc:  # retrying cannot help
                        failed.extend((by_key[(bucket, k)], f"PermissionError: {exc}") for k in keys)
                        continue
                    except (OSError, ValueError) as exc:
                        # s3fs already retried throttling inside the request; the whole batch's outcome is unknown
                        for key in keys:
                            retry.append((bucket, key))
                            reasons[(bucket, key)] = f"{type(exc).__name__}: {exc}"
                        continue
                    except Exception as exc:  # an error s3fs did not translate: not known to be transient
                        for key in keys:
                            reasons[(bucket, key)] = f"{type(exc).__name__}: {exc}"
                            failed.append((by_key[(bucket, key)], reasons[(bucket, key)]))
                        continue
                    for item in response.get("Deleted", []):
                        if (bucket, item["Key"]) in by_key:
                            deleted.append(by_key[(bucket, item["Key"])])
                    for err in response.get("Errors", []):
                        ident = (bucket, err.get("Key", ""))
                        if ident not in by_key:
                            continue
                        reason = f"{err.get('Code')}: {err.get('Message')}"
                        if err.get("Code") in _RETRYABLE_CODES:
                            retry.append(ident)
                            reasons[ident] = reason
                        else:
                            failed.append((by_key[ident], reason))
            if not retry:
                break
            if attempt == attempts - 1:
                failed.extend((by_key[i], reasons[i]) for i in retry)
                break
            time.sleep(random.uniform(0, backoff_s * (2**attempt)))
            pending = retry
        return DeleteOutcome(tuple(deleted), (), tuple(failed))

    def _fsspec_delete(self, paths: list[str], attempts: int, backoff_s: float) -> DeleteOutcome:
        deleted: list[str] = []
        missing: list[str] = []
        failed: list[tuple[str, str]] = []
        for path in paths:
            full = self.full_path(path)
            for attempt in range(attempts):
                try:
                    self.fs.rm_file(full)
                except FileNotFoundError:
                    missing.append(path)
                except (PermissionError, OSError) as exc:
                    if _is_throttling(exc) and attempt < attempts - 1:
                        time.sleep(random.uniform(0, backoff_s * (2**attempt)))
                        continue
                    failed.append((path, f"{type(exc).__name__}: {exc}"))
                else:
                    deleted.append(path)
                break
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
        return StorageError(f"storage error on {path}: {type(exc).__name__}: {exc}", self.table_uri)

    def __repr__(self) -> str:
        return f"Storage({redact_uri(self.table_uri)!r})"


# Stores whose fsspec backend does an atomic put-if-absent. s3fs sends `If-None-Match: *` (AWS S3 since 2024, MinIO,
# moto); local files use a hard link. Other object stores are refused until their backend is verified.
_NATIVE_CREATE_ONLY = frozenset({"file", "local", "memory", "s3", "s3a"})
_MEMORY_LOCK = threading.Lock()


def _is_lost_conditional_put(exc: BaseException) -> bool:
    # s3fs maps a failed If-None-Match to FileExistsError only when the response names the condition; some servers
    # omit it, and a concurrent conditional write to the same key answers 409 ConditionalRequestConflict.
    text = str(exc)
    return "PreconditionFailed" in text or "ConditionalRequestConflict" in text or "Precondition Failed" in text


def _temp_name(full: str) -> str:
    directory, name = os.path.split(full)
    # a leading dot keeps the temporary file out of log listings and VACUUM (hidden)
    return os.path.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")


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


def _is_throttling(exc: BaseException) -> bool:
    text = str(exc)
    return any(word in text for word in ("SlowDown", "TooManyRequests", "429", "503", "Throttl", "rateLimitExceeded"))


def _is_absolute_uri(path: str) -> bool:
    scheme = urlsplit(path).scheme
    return (bool(scheme) and len(scheme) > 1) or path.startswith("/")


def absolute_uri_to_path(uri: str) -> str:
    """Decode an absolute URI from the log (``file:/a%20b``, ``s3://b/k``) into a path the store accepts."""
    parts = urlsplit(uri)
    if parts.scheme in ("file", ""):
        return unquote(parts.path)
    return f"{parts.scheme}://{parts.netloc}{unquote(parts.path)}"
