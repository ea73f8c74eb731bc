"""The local-disk backend: ``os.scandir`` listings, hard-link create-only writes through hidden temporary names, and
pyarrow native files for data files. Local requests are made once: a disk's faults are answers, not blips.

Every operation here is a direct system call, so a local table never needs fsspec (an import of 50-80 ms per
process): `Storage` builds no filesystem for it, and ``fs`` makes fsspec's local filesystem only when a caller asks
for it (writing a result file through fsspec, say)."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import uuid
from collections.abc import Callable, Container, Iterable
from typing import Any, TypeVar

import pyarrow as pa

from airflow_provider_deltalite.engine.crash_points import crash_point
from airflow_provider_deltalite.engine.storage.base import (
    STREAM_CHUNK_BYTES,
    DeleteOutcome,
    DirListing,
    ErrorTranslation,
    FileInfo,
    ReadFailed,
    Segment,
    delete_each,
)
from airflow_provider_deltalite.engine.storage.fsspec_backend import FsspecBackend
from airflow_provider_deltalite.engine.storage.retry import StorageRetryPolicy

T = TypeVar("T")


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


# What fsspec's local filesystem strips from a URI before making the path absolute (`local_path`).
_LOCAL_PREFIXES = ("file://", "file:", "local://", "local:")


def local_path(uri: str) -> str:
    """The local path of a path or ``file:``/``local:`` URI, as fsspec's local filesystem makes it (its
    ``_strip_protocol`` on POSIX: the scheme taken off as written, no decoding, relative paths made absolute, trailing
    slashes dropped).

    Example:
        >>> local_path("file:///tmp/t/"), local_path("/tmp/t")
        ('/tmp/t', '/tmp/t')
    """
    for prefix in _LOCAL_PREFIXES:
        if uri.startswith(prefix):
            uri = uri[len(prefix) :]
            break
    if uri.startswith("~"):
        uri = os.path.expanduser(uri)
    elif not uri.startswith("/"):
        uri = f"{os.getcwd()}/{'' if uri == '.' else uri.removeprefix('./')}"
    return uri.rstrip("/") or "/"


class LocalBackend(FsspecBackend):
    """A `StorageBackend` on the local disk (see `base.StorageBackend` for the contract).

    Built with ``fs=None`` (the usual case), it makes no fsspec filesystem unless ``fs`` is read; built with one (a
    filesystem the caller handed to `Storage`), its reads go through it as they always did.
    """

    atomic_create_only = True
    has_real_directories = True
    native_files = True
    writes_temporary_files = True
    transient_faults = False

    def __init__(self, fs: Any, policy: StorageRetryPolicy, options: dict[str, Any] | None = None) -> None:
        self._fs = fs
        self._given = fs is not None
        # the kernel copies the ranges of `compose` (copy_file_range); a filesystem the caller gave streams them
        self.composes_from_ranges = not self._given
        self._options = dict(options or {})
        self.policy = policy

    @property
    def fs(self) -> Any:
        if self._fs is None:
            import fsspec

            self._fs = fsspec.filesystem("file", **self._options)
        return self._fs

    @fs.setter
    def fs(self, value: Any) -> None:
        self._fs = value

    @classmethod
    def filesystem_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        return dict(options)

    @property
    def default_concurrency(self) -> int:
        # bound by the CPU (Python's work per entry and the system calls): more threads than cores add contention
        return os.cpu_count() or 1

    def request(self, call: Callable[[], T]) -> T:
        return call()

    def strip_protocol(self, uri: str) -> str:
        return local_path(uri)

    # Reads go through a filesystem the caller gave (theirs to wrap or instrument); else they are system calls.

    def exists(self, full: str) -> bool:
        if self._given:
            return super().exists(full)
        return os.path.lexists(full)  # as fsspec's: the entry itself, a dangling link included

    def has_files_under(self, full_dir: str) -> bool:
        # Directories, unlike an object store's prefixes, exist empty: `os.makedirs` makes a new table's
        # `_delta_log` one level at a time, so its parent exists, empty, for a moment before the first commit.
        if self._given:  # the same walk, through the caller's filesystem; it stops at the first level with a file
            return any(files for _, _, files in self.fs.walk(full_dir))
        pending = [full_dir]
        while pending:
            try:
                with os.scandir(pending.pop()) as entries:
                    for entry in entries:
                        if not entry.is_dir(follow_symlinks=False):
                            return True
                        pending.append(entry.path)
            except (FileNotFoundError, NotADirectoryError):
                continue
        return False

    def is_dir(self, full: str) -> bool:
        return super().is_dir(full) if self._given else os.path.isdir(full)

    def read(self, full: str) -> bytes:
        if self._given:
            return super().read(full)
        with open(full, "rb") as fh:
            return fh.read()

    def read_range(self, full: str, start: int, length: int) -> bytes:
        if self._given:
            return super().read_range(full, start, length)
        with open(full, "rb") as fh:
            fh.seek(start)
            return fh.read(length)

    def read_many(self, full: list[str]) -> dict[str, bytes]:
        if self._given:
            return super().read_many(full)
        done: dict[str, bytes] = {}
        for path in dict.fromkeys(full):
            try:
                done[path] = self.read(path)
            except Exception as exc:
                raise ReadFailed(path, exc) from None
        return done

    def open_read(self, full: str, errors: ErrorTranslation) -> Any:
        if self._given:
            return self.fs.open(full, "rb")
        return open(full, "rb")  # the caller closes it

    def open_data_file(self, full: str, errors: ErrorTranslation) -> Any:
        # A pyarrow native file: its reads release the GIL, so the threads of the local executor decode in
        # parallel, where an fsspec file object would take the GIL for every read.
        return pa.OSFile(local_path(full), "rb")

    def create_data_file(self, full: str) -> Any:
        local = local_path(full)
        os.makedirs(os.path.dirname(local), exist_ok=True)
        return pa.OSFile(local, "wb")

    def compose(self, full: str, segments: Iterable[Segment]) -> int:
        """The ranges copied by the kernel (``copy_file_range``: no byte through this process, and shared extents on
        filesystems that have them), the literal bytes written; a failure removes the partial file.

        One thread: writes to one file take its inode lock in turn, and two threads copying at their own offsets
        measured no faster than one (ext4, 970 MiB)."""
        if self._given:
            return super().compose(full, segments)
        local = local_path(full)
        os.makedirs(os.path.dirname(local), exist_ok=True)
        sent = 0
        fd = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for segment in segments:
                if isinstance(segment, bytes | bytearray | memoryview):
                    _write_all(fd, segment)
                    sent += len(segment)
                else:
                    _copy_range(local_path(segment[0]), segment[1], segment[2], fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(local)
            raise
        os.close(fd)
        return sent

    def write_create_only(self, full: str, data: bytes) -> None:
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

    def write(self, full: str, data: bytes) -> None:
        tmp = _write_temp(full, data)
        try:
            os.replace(tmp, full)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def list_from(self, full_dir: str, start_name: str) -> list[FileInfo]:
        # fsspec stats every entry; a long local log only needs the names after start_name stat'ed
        entries = []
        with os.scandir(full_dir) as scan:
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

    def list_dir(self, full_dir: str, without_details: Container[str]) -> DirListing:
        names: list[str] = []
        sizes: list[int] = []
        mtimes: list[int] = []
        dirs: list[str] = []
        dir_mtimes: list[int] = []
        others: list[str] = []
        with os.scandir(full_dir) as scan:
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

    def delete(self, paths: list[str], full: list[str]) -> DeleteOutcome:
        def failure(exc: Exception) -> str | None:
            return f"{type(exc).__name__}: {exc.strerror or exc}" if isinstance(exc, OSError) else None

        # on a symbolic link os.unlink removes the link, never the file it points to
        return delete_each(paths, full, os.unlink, failure)

    def remove_empty_dir(self, full: str) -> bool:
        try:
            os.rmdir(full)
        except OSError:
            return False
        return True


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


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# copy_file_range refuses some pairs of files (another filesystem on older kernels, special files): stream those
_NO_KERNEL_COPY = frozenset({errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM, errno.EBADF})


def _copy_range(source: str, start: int, length: int, fd: int) -> None:
    """Append ``length`` bytes of ``source`` from ``start`` at ``fd``'s position, in the kernel where it can."""
    end = start + length
    with open(source, "rb", buffering=0) as fh:
        src = fh.fileno()
        kernel = hasattr(os, "copy_file_range")
        while start < end:
            if kernel:
                try:
                    done = os.copy_file_range(src, fd, end - start, start)
                except OSError as exc:
                    if exc.errno not in _NO_KERNEL_COPY:
                        raise
                    done = 0
                if not done:  # some filesystems answer 0 rather than an error: the read below tells the end apart
                    kernel = False
                    continue
            else:
                piece = os.pread(src, min(STREAM_CHUNK_BYTES, end - start), start)
                _write_all(fd, piece)
                done = len(piece)
            if not done:
                raise OSError(f"{source} ends before byte {end}")
            start += done
