"""Typed errors raised by the engine; every message is one line naming the table and the problem."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def redact_uri(uri: str | None) -> str | None:
    """Drop user info and query strings from a URI so credentials never reach a message."""
    if uri is None:
        return None
    try:
        parts = urlsplit(uri)
    except ValueError:
        return "<unparseable uri>"
    if not parts.scheme or len(parts.scheme) == 1:  # plain path or a Windows drive letter
        return uri
    netloc = parts.hostname or ""
    if parts.port:
        netloc = f"{netloc}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class DeltaLiteError(Exception):
    """Base class of every error deltalite raises on purpose.

    Attributes:
        table_uri: the table the error is about (credentials removed), or None.
        problem: the message without the table prefix.
    """

    def __init__(self, problem: str, table_uri: str | None = None) -> None:
        self.problem = " ".join(str(problem).split())  # one line, always
        self.table_uri = redact_uri(table_uri)
        super().__init__(self.problem if self.table_uri is None else f"table {self.table_uri}: {self.problem}")

    def extended(self, detail: str) -> DeltaLiteError:
        """A copy of this error (same class and attributes) whose message ends with ``; <detail>``."""
        clone = type(self).__new__(type(self))
        clone.__dict__.update(self.__dict__)
        DeltaLiteError.__init__(clone, f"{self.problem}; {detail}", self.table_uri)
        return clone


class TableNotFound(DeltaLiteError):
    """The path does not exist, or holds no `_delta_log`, or the log holds no commits."""


class VersionNotFound(DeltaLiteError):
    """A requested version or timestamp is outside what the log can reconstruct.

    Attributes:
        earliest: the oldest version that can be read, when known.
        latest: the newest version, when known.
    """

    def __init__(
        self,
        problem: str,
        table_uri: str | None = None,
        *,
        earliest: int | None = None,
        latest: int | None = None,
    ) -> None:
        self.earliest = earliest
        self.latest = latest
        super().__init__(problem, table_uri)


class CorruptLog(DeltaLiteError):
    """The log cannot be replayed: a gap in versions, a bad commit line, an unreadable checkpoint."""


class CheckpointUnreadable(CorruptLog):
    """A checkpoint file (or part, or sidecar) is missing or cannot be parsed; older checkpoints may still serve."""


class ProtocolNotSupported(DeltaLiteError):
    """The table needs a reader or writer feature (or version) that deltalite does not implement.

    Attributes:
        features: the feature names (or `minReaderVersion=N`) that are not supported.
    """

    def __init__(self, problem: str, table_uri: str | None = None, *, features: tuple[str, ...] = ()) -> None:
        self.features = tuple(features)
        super().__init__(problem, table_uri)


class InvalidTableProperty(DeltaLiteError):
    """A table property holds a value that does not parse (an interval, a number)."""


class SchemaError(DeltaLiteError):
    """The table schema or a data file's schema cannot be understood."""


class InvalidExpression(DeltaLiteError):
    """A filter or predicate does not parse, or names a column the table does not have."""


class StorageError(DeltaLiteError):
    """The storage backend failed (permissions, network) in a way that is not a missing file."""


class UploadInterrupted(StorageError):
    """A data-file upload failed on a transient fault and was abandoned: writing the file again may succeed.

    A streamed upload cannot be replayed from its start, so the storage layer does not retry it; the writer that
    produced the rows can (OPTIMIZE re-reads a bin's inputs and writes it again under a new name)."""


class CreateOnlyNotSupported(StorageError):
    """The store cannot write a file only if it is absent, so two writers could overwrite each other's commit."""


class ConcurrentModification(DeltaLiteError):
    """Another writer committed first and its commit conflicts with this transaction.

    Attributes:
        winning_version: the version the other writer committed.
        winning_operation: that commit's `commitInfo.operation`, when it has one.
    """

    def __init__(
        self,
        problem: str,
        table_uri: str | None = None,
        *,
        winning_version: int | None = None,
        winning_operation: str | None = None,
    ) -> None:
        self.winning_version = winning_version
        self.winning_operation = winning_operation
        if winning_version is not None:
            by = f" ({winning_operation})" if winning_operation else ""
            problem = f"{problem}; conflicting commit: version {winning_version}{by}"
        super().__init__(problem, table_uri)


class ConcurrentAppend(ConcurrentModification):
    """Files were added to data this transaction read (Serializable writes only)."""


class ConcurrentDeleteRead(ConcurrentModification):
    """A file this transaction read was removed (or given a deletion vector) by another commit."""


class ConcurrentDeleteDelete(ConcurrentModification):
    """A file this transaction removes was removed by another commit."""


class MetadataChanged(ConcurrentModification):
    """The table's metadata (schema, partitioning, properties) changed since this transaction read it."""


class ProtocolChanged(ConcurrentModification):
    """The table's protocol changed since this transaction read it."""


class ConcurrentTransaction(ConcurrentModification):
    """Another commit wrote an application transaction (txn) or domain this transaction also uses."""


class CommitRetriesExhausted(ConcurrentModification):
    """No conflict was found, but other writers kept winning the next version until the attempt limit."""


class TransactionError(DeltaLiteError):
    """A transaction was used wrongly: staged actions that are invalid, a snapshot of another table, a committed one."""


class CommitTooLate(TransactionError):
    """The files a commit adds were written so long ago that a concurrent VACUUM may have deleted them (more than half
    of ``delta.deletedFileRetentionDuration``); nothing was committed."""


class ExecutorError(DeltaLiteError):
    """The place where maintenance work runs (a Spark cluster, the local pool) failed or could not be reached."""


class InvalidArgument(DeltaLiteError):
    """An argument of an operation is out of range or refers to something that does not exist."""


class RetentionTooShort(DeltaLiteError):
    """VACUUM was asked to keep deleted files for less time than the table promises its readers and writers.

    Raised for a retention below ``delta.deletedFileRetentionDuration`` and for a table whose
    ``delta.logRetentionDuration`` is shorter than its ``delta.deletedFileRetentionDuration``; both can be overridden
    with ``enforce_retention_duration=False`` once no reader or writer can need the files.
    """


class VacuumRefused(DeltaLiteError):
    """VACUUM cannot run in the requested way: LITE without the log it needs, or a table whose log and storage
    disagree so much that deleting files would be a guess (live files missing from storage)."""


class LogGap(DeltaLiteError):
    """The commits right after a cursor are gone: log cleanup removed them (a checkpoint stands in their place), so the
    changes between the cursor and the oldest retained commit cannot be listed any more.

    Attributes:
        since: the cursor that was asked for (changes after this version).
        oldest_available: the oldest commit whose changes can still be listed.
    """

    def __init__(self, problem: str, table_uri: str | None = None, *, since: int, oldest_available: int) -> None:
        self.since = since
        self.oldest_available = oldest_available
        super().__init__(problem, table_uri)


class TableRecreated(DeltaLiteError):
    """The table at the URI is not the one a cursor was taken from: its newest version is below the cursor, or a
    commit carries a metaData action with another table id.

    Attributes:
        since: the cursor that was asked for.
        latest: the newest version of the table now at the URI, when known.
        table_id: the id of the table now at the URI, when a metaData action showed it.
    """

    def __init__(
        self,
        problem: str,
        table_uri: str | None = None,
        *,
        since: int,
        latest: int | None = None,
        table_id: str | None = None,
    ) -> None:
        self.since = since
        self.latest = latest
        self.table_id = table_id
        super().__init__(problem, table_uri)
