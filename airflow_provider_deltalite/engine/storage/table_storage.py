"""`Storage`: the files of one table, over the backend of its store: listing the log from a version, reads, and
create-only writes."""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import Container, Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from airflow_provider_deltalite.engine.errors import CreateOnlyNotSupported, InvalidArgument, StorageError, redact_uri
from airflow_provider_deltalite.engine.storage.backends import LOCAL_SCHEMES, backend_class, backend_for, protocols_of
from airflow_provider_deltalite.engine.storage.base import (
    DeleteOutcome,
    DirListing,
    FileInfo,
    ReadFailed,
    Segment,
    StorageBackend,
)
from airflow_provider_deltalite.engine.storage.create_only_commits import CreateOnlyCommits
from airflow_provider_deltalite.engine.storage.dynamodb_commit import (
    DYNAMODB_OPTIONS,
    LOG_DIR,
    DynamoDBCommits,
    commit_version,
)
from airflow_provider_deltalite.engine.storage.local import LocalBackend, local_path
from airflow_provider_deltalite.engine.storage.paths import (
    absolute_uri_to_path,
    describe,
    is_absolute_uri,
    normalize_table_uri,
)
from airflow_provider_deltalite.engine.storage.retry import (
    RETRY_OPTIONS,
    StorageRetryPolicy,
    is_backend_failure,
    is_transient,
)
from airflow_provider_deltalite.engine.storage.upload import Upload

# Options that configure deltalite itself rather than the fsspec backend: `Storage` takes them out of the storage
# options before it builds the filesystem.
DELTALITE_OPTIONS = ("deltalite_single_writer", *RETRY_OPTIONS, *DYNAMODB_OPTIONS)


class Storage:
    """Files of one table, addressed by paths relative to the table root.

    The same object serves local paths, ``file://``, ``memory://``, ``s3://``, ``gs://`` and ``abfs://``; every
    method takes paths relative to the table root (``_delta_log/00000000000000000000.json``) or absolute URIs. The
    work is done by the store's backend (`backends.SCHEME_TO_BACKEND`), whose capabilities `Storage` exposes
    (`lists_from_name`, `atomic_create_only`, `has_real_directories`, `native_files`, ...).

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
            - ``dynamodb_table_name`` (alias ``DELTA_DYNAMO_TABLE_NAME``): commit through this DynamoDB table, as
              delta-spark's S3DynamoDBLogStore does (`dynamodb_commit`); without it, commits are create-only writes.
            - ``dynamodb_region``, ``dynamodb_endpoint`` (alias ``AWS_ENDPOINT_URL_DYNAMODB``): where that table is
              (default: the S3 ``client_kwargs`` region, else the AWS configuration, else us-east-1).
            - ``dynamodb_key``, ``dynamodb_secret``, ``dynamodb_token``: credentials for DynamoDB (default: the S3
              ones, ``key``/``secret``/``token``, else the AWS credential chain).
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
        # How commit files are written: through a DynamoDB table when the options name one, else create-only writes.
        self.commit_store: DynamoDBCommits | CreateOnlyCommits = (
            DynamoDBCommits.from_options(
                self.table_uri, {k: own[k] for k in DYNAMODB_OPTIONS if k in own}, options, self.retry_policy
            )
            or CreateOnlyCommits()
        )
        scheme = urlsplit(self.table_uri).scheme
        if filesystem is not None:
            protocols = protocols_of(filesystem)
            wanted = {"file", "local"} if scheme in LOCAL_SCHEMES else {scheme}
            if not wanted & set(protocols):
                raise InvalidArgument(
                    f"the filesystem given serves {'/'.join(protocols)}://, not the table's "
                    f"{scheme or 'file'}:// location",
                    self.table_uri,
                )
            fs = filesystem
            root = filesystem._strip_protocol(self.table_uri)
        elif scheme in LOCAL_SCHEMES:
            # every local operation is a system call: no fsspec filesystem (nor its import) unless `fs` is asked for
            fs, root = None, local_path(self.table_uri)
        else:
            import fsspec

            fs_options = backend_class(scheme).filesystem_options(options)
            try:
                fs, root = fsspec.core.url_to_fs(self.table_uri, **fs_options)
            except (ImportError, ValueError) as exc:
                raise StorageError(f"cannot open storage: {type(exc).__name__}: {exc}", self.table_uri) from None
        self.root = root.rstrip("/") or "/"
        self.protocols = protocols_of(fs) if fs is not None else ("file", "local")
        self.protocol = self.protocols[0]
        self.backend: StorageBackend = (
            backend_for(fs, self.retry_policy)
            if fs is not None
            else LocalBackend(None, self.retry_policy, LocalBackend.filesystem_options(options))
        )

    @property
    def fs(self) -> Any:
        """The store's fsspec filesystem (a local table's is built on first use: its own operations need none)."""
        return self.backend.fs

    # The fsspec filesystem holds sockets and event loops; Spark ships Storage to executors, so rebuild it there.
    def __getstate__(self) -> dict[str, Any]:
        return {"table_uri": self.table_uri, "options": self._options, "own_options": self._own_options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["table_uri"], {**state["options"], **state["own_options"]})  # type: ignore[misc]

    # -- capabilities (see `base.StorageBackend`) ------------------------------------------------------------

    @property
    def lists_from_name(self) -> bool:
        """The store starts a listing at a name itself (S3 ``StartAfter``); elsewhere `list_from` lists it all."""
        return self.backend.lists_from_name

    @property
    def atomic_create_only(self) -> bool:
        """`write_create_only` is an atomic put-if-absent on this store."""
        return self.backend.atomic_create_only

    @property
    def has_real_directories(self) -> bool:
        """Directories exist on their own and may be left empty (the local disk)."""
        return self.backend.has_real_directories

    @property
    def composes_from_ranges(self) -> bool:
        """`compose` copies byte ranges on the store itself (S3 ``UploadPartCopy``, the local disk's kernel); elsewhere
        it streams them."""
        return self.backend.composes_from_ranges

    def compose(self, path: str, segments: Iterable[Segment]) -> int:
        """Write the new file ``path`` from ``segments``: literal bytes, or ``(path, start, length)`` ranges of other
        files of the table (paths as `read_range` takes them). Returns the bytes this process sent; on a store that
        `composes_from_ranges`, ranges are copied by the store and never pass through here (on S3, those of 5 MiB
        and more).

        ``segments`` is iterated once, as the file is written: the local disk copies the first ranges while an
        iterator is still producing the next.

        Raises:
            StorageError: a source is missing or a request failed; nothing is left at ``path`` where the store can
                abandon an upload (S3 aborts the multipart upload; the local disk removes the partial file).
        """
        resolved = (
            s if isinstance(s, bytes | bytearray | memoryview) else (self.full_path(s[0]), s[1], s[2]) for s in segments
        )
        with self._errors(path, missing=False):
            return self.backend.compose(self.full_path(path), resolved)

    @property
    def native_files(self) -> bool:
        """Paths are files of this machine (``os`` and pyarrow open them; they may be symbolic links)."""
        return self.backend.native_files

    @property
    def writes_temporary_files(self) -> bool:
        """Writes go through hidden temporary names that a killed writer leaves behind (the local disk)."""
        return self.backend.writes_temporary_files

    @property
    def default_concurrency(self) -> int:
        """Threads that keep this store busy when listing and deleting."""
        return self.backend.default_concurrency

    @property
    def delete_batch_size(self) -> int:
        """Paths per delete task (S3: the DeleteObjects limit)."""
        return self.backend.delete_batch_size

    def serves(self, uri: str) -> bool:
        """Whether an absolute URI from the log can name a file of this store: a path without a scheme does, a URI
        does when its scheme is one the store's filesystem serves (``s3://`` in a local table's log does not)."""
        scheme = urlsplit(uri).scheme.lower()
        return len(scheme) <= 1 or scheme in self.protocols

    # -- paths -------------------------------------------------------------------------------------------

    def full_path(self, path: str) -> str:
        """The backend path of ``path`` (relative to the root, or an absolute URI of this store)."""
        if "://" in path or path.startswith("file:"):
            return self.backend.strip_protocol(path)
        if path.startswith("/") and self.native_files:
            return path
        return posixpath.join(self.root, path) if self.root != "/" else "/" + path

    def resolve_data_path(self, path_in_log: str) -> str:
        """Resolve an add/remove ``path`` exactly as the protocol says: a URI-encoded relative path or an absolute URI.

        The value is decoded once; relative paths are joined to the table root.
        """
        if is_absolute_uri(path_in_log):
            return self.full_path(absolute_uri_to_path(path_in_log))
        return self.full_path(unquote(path_in_log))

    def path_key(self, path_in_log: str) -> str:
        """The key of a file's ``path`` as written in the log, the same for every spelling of one file: relative to
        the table root when the file lies under it, else the full path (`resolve_data_path`)."""
        full = self.resolve_data_path(path_in_log)
        return rel if (rel := self.relative_to_root(full)) is not None else full

    def relative_to_root(self, full_path: str) -> str | None:
        """The path relative to the table root, or None when ``full_path`` lies outside it."""
        prefix = self.root.rstrip("/") + "/"
        return full_path[len(prefix) :] if full_path.startswith(prefix) else None

    # -- errors ------------------------------------------------------------------------------------------

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

    def _wrap(self, exc: BaseException, path: str) -> StorageError:
        # A transient failure reaches here only when every try failed (see `retry_call`).
        tries = ""
        if is_transient(exc) and self.backend.transient_faults and self.retry_policy.attempts > 1:
            tries = f" after {self.retry_policy.attempts} attempts"
        return StorageError(f"storage error on {path}{tries}: {describe(exc)}", self.table_uri)

    # -- reads ---------------------------------------------------------------------------------------------

    def exists(self, path: str) -> bool:
        """Whether a file or directory exists."""
        with self._errors(path, missing=False):
            return self.backend.exists(self.full_path(path))

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` is a directory (or a prefix holding objects)."""
        with self._errors(path, missing=False):
            return self.backend.is_dir(self.full_path(path))

    def read(self, path: str) -> bytes:
        """The whole content of a file. Raises FileNotFoundError when it does not exist."""
        with self._errors(path):
            return self.backend.read(self.full_path(path))

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
        try:
            done = self.backend.read_many(full)
        except ReadFailed as failure:
            by_full = dict(zip(full, paths, strict=False))
            with self._errors(by_full[failure.full]):
                raise failure.cause from None
        return [done[p] for p in full]

    def read_range(self, path: str, start: int, length: int) -> bytes:
        """``length`` bytes of a file starting at ``start``."""
        with self._errors(path):
            return self.backend.read_range(self.full_path(path), start, length)

    def open_input(self, path: str) -> Any:
        """A binary file object for random access reads (Parquet); on object stores its reads are retried."""
        with self._errors(path):
            return self.backend.open_read(self.full_path(path), lambda: self._errors(path))

    def open_data_file(self, full: str) -> Any:
        """A file to decode Parquet from, at a full path (`resolve_data_path`).

        On local disk it is a pyarrow native file: its reads release the GIL, so the threads of the local executor
        decode in parallel, where an fsspec file object would take the GIL for every read. On object stores a read
        that fails transiently opens the object again at the same offset (a Parquet decode makes many ranged reads).
        """
        if self.native_files:
            return self.backend.open_data_file(full, contextlib.nullcontext)
        path = self.relative_to_root(full) or full
        with self._errors(path):
            return self.backend.open_data_file(full, lambda: self._errors(path))

    def create_data_file(self, full: str) -> Any:
        """A new file to write Parquet to, at a full path (a pyarrow native file on local disk, as `open_data_file`).

        On object stores the content is streamed to the store (a multipart upload for large files), which cannot be
        replayed: a failure while writing or closing abandons the upload and raises StorageError, so the operation
        commits nothing, and whatever reached the store is an orphan for VACUUM.
        """
        if self.native_files:
            return self.backend.create_data_file(full)
        path = self.relative_to_root(full) or full
        with self._errors(path):
            return Upload(self.backend.create_data_file(full), self.table_uri, path)

    def list_from(self, directory: str, start_name: str = "") -> list[FileInfo]:
        """Files directly inside ``directory`` whose name sorts at or after ``start_name``, sorted by name.

        On S3 this asks the server to start the listing there (``StartAfter``), so a long log is not listed whole.
        """
        if directory.rstrip("/") == LOG_DIR:
            # a commit whose writer died before it was whole (DynamoDB mode): finish it, so this listing shows it
            self.commit_store.recover(self)
        full_dir = self.full_path(directory).rstrip("/")
        with self._errors(directory or "/"):
            entries = self.backend.list_from(full_dir, start_name)
        entries.sort(key=lambda f: f.name)
        return entries

    def has_files_under(self, directory: str) -> bool:
        """Whether any file lies below ``directory`` (one request at most: S3 lists one key)."""
        with self._errors(directory, missing=False):
            return self.backend.has_files_under(self.full_path(directory).rstrip("/"))

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
                return self.backend.list_dir(full_dir, without_details)
        except FileNotFoundError:  # NotADirectoryError arrives as FileNotFoundError
            return DirListing()

    # -- writes ------------------------------------------------------------------------------------------

    @property
    def create_only(self) -> str | None:
        """How this store writes a file only if it is absent: ``"native"`` (atomic put-if-absent), ``"single-writer"``
        (the user opted in with ``deltalite_single_writer``: an existence check, safe only without other writers),
        or None (commits are refused). Commit files follow `commit_mode`."""
        if self.atomic_create_only:
            return "native"
        return "single-writer" if self.single_writer else None

    @property
    def commit_mode(self) -> str | None:
        """How commit files (``_delta_log/N.json``) are written: ``"dynamodb"`` (through the DynamoDB table the
        options name, delta-spark's S3DynamoDBLogStore protocol), else as `create_only` says."""
        return self.commit_store.mode(self)

    def write_create_only(self, path: str, data: bytes) -> None:
        """Write ``path`` only if it does not exist; raises FileExistsError when it does (another writer won).

        A commit file (``_delta_log/N.json``) goes through the commit strategy of the storage options: with a
        DynamoDB table (``dynamodb_table_name``), the table decides who writes N (`dynamodb_commit`); else the
        create-only write below.

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
        if commit_version(path) is not None:
            self.commit_store.write_commit(self, path, data)
        else:
            self.write_if_absent(path, data)

    def write_if_absent(self, path: str, data: bytes) -> None:
        """`write_create_only` without the commit strategy: the store's create-only write, or single-writer mode's.

        Raises:
            FileExistsError: ``path`` exists.
            CreateOnlyNotSupported: the store has no put-if-absent and single-writer mode is off.
        """
        if self.create_only is None:
            raise CreateOnlyNotSupported(
                f"the {self.protocol}:// store cannot write a file only if it is absent, so concurrent writers "
                "could overwrite each other's commits; if this table has exactly one writer, pass the storage option "
                "deltalite_single_writer=true",
                self.table_uri,
            )
        self.put_if_absent(path, data)

    def put_if_absent(self, path: str, data: bytes) -> None:
        """The store's own create-only write of ``path`` (no commit strategy, no mode check; see
        `write_create_only`): FileExistsError when the name is taken."""
        with self._errors(path):
            self.backend.write_create_only(self.full_path(path), data)

    def write(self, path: str, data: bytes) -> None:
        """Write (or replace) ``path`` so that readers see the old or the new content, never a part."""
        with self._errors(path):
            self.backend.write(self.full_path(path), data)

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
        return self.backend.delete(paths, [self.full_path(p) for p in paths])

    def remove_empty_dir(self, directory: str) -> bool:
        """Remove ``directory`` if it is empty (never recursively); False when it is not empty, is gone, or the store
        has no directories of its own (object stores: a prefix disappears with its last object)."""
        if not self.has_real_directories or not directory:
            return False
        return self.backend.remove_empty_dir(self.full_path(directory))

    def __repr__(self) -> str:
        return f"Storage({redact_uri(self.table_uri)!r})"
