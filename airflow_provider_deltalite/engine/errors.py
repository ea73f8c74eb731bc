"""Typed errors raised by the engine; every message is one line naming the table and the problem.

An error crosses a process boundary (a Spark task to its driver, a trigger to its task) as a JSON-safe payload
(`DeltaLiteError.to_payload`), and `DeltaLiteError.from_payload` rebuilds the same class with the same attributes on
the other side. Only DeltaLiteError subclasses of this package that are already loaded can be rebuilt: a payload names
a class, and nothing named by data is ever imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

_PACKAGE = "airflow_provider_deltalite"
_BASE_ATTRIBUTES = frozenset({"problem", "table_uri"})
_SCALARS = (str, int, float, bool, type(None))
_Scalar = str | int | float | bool | None
ErrorT = TypeVar("ErrorT", bound="DeltaLiteError")


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
        return _rebuild(type(self), vars(self), f"{self.problem}; {detail}", self.table_uri)

    def to_payload(self) -> dict[str, Any]:
        """This error as JSON values, for `from_payload` in another process.

        ``{"error": "<module>.<qualname>", "message": str(self), "problem": ..., "table_uri": ..., "details": {...}}``,
        where ``details`` holds the subclass's attributes (`VersionNotFound.earliest`, `LogGap.since`...); tuples
        become lists, and an attribute that is not a JSON value (or a list of them) is left out.

        Example:
            >>> LogGap("commits removed", "/t", since=3, oldest_available=10).to_payload()["details"]
            {'since': 3, 'oldest_available': 10}
        """
        details: dict[str, _Scalar | list[_Scalar]] = {}
        for key, value in vars(self).items():
            if key in _BASE_ATTRIBUTES or key.startswith("_"):
                continue
            if isinstance(value, _SCALARS):
                details[key] = value
            elif isinstance(value, tuple | list) and all(isinstance(v, _SCALARS) for v in value):
                details[key] = list(value)
        return {
            "error": f"{type(self).__module__}.{type(self).__qualname__}",
            "message": str(self),
            "problem": self.problem,
            "table_uri": self.table_uri,
            "details": details,
        }

    @classmethod
    def from_payload(cls: type[ErrorT], payload: Mapping[str, Any]) -> ErrorT:
        """The error a `to_payload` payload describes: the same class, message and attributes (lists as tuples).

        Keys of ``payload`` other than those `to_payload` writes are ignored (an event may carry a ``status``).

        Raises:
            ValueError: the payload is malformed, or names a class that is not a loaded subclass of ``cls`` defined
                in this package (nothing is imported to find it).
        """
        if not isinstance(payload, Mapping):
            raise ValueError(f"an error payload must be a mapping, got {type(payload).__name__}")
        path, problem, table_uri = payload.get("error"), payload.get("problem"), payload.get("table_uri")
        details = payload.get("details", {})
        if not isinstance(path, str) or not isinstance(problem, str) or not isinstance(table_uri, str | None):
            raise ValueError("an error payload needs 'error' and 'problem' strings and a 'table_uri' string or null")
        error_class = _error_classes().get(path)
        if error_class is None or not issubclass(error_class, cls):
            raise ValueError(f"{path!r} is not a {cls.__name__} class of {_PACKAGE}")
        if not isinstance(details, Mapping):
            raise ValueError(f"the details of an error payload must be a mapping, got {type(details).__name__}")
        attributes: dict[str, Any] = {}
        for key, value in details.items():
            if not isinstance(key, str) or not key.isidentifier() or key.startswith("_") or key in _BASE_ATTRIBUTES:
                raise ValueError(f"{key!r} is not an attribute an error payload can set")
            if isinstance(value, list) and all(isinstance(v, _SCALARS) for v in value):
                value = tuple(value)
            elif not isinstance(value, _SCALARS):
                raise ValueError(f"the error attribute {key!r} holds {type(value).__name__}, not a JSON value")
            attributes[key] = value
        return _rebuild(error_class, attributes, problem, table_uri)


def _rebuild(cls: type[ErrorT], attributes: Mapping[str, Any], problem: str, table_uri: str | None) -> ErrorT:
    # Subclasses take extra keyword arguments (LogGap(since=...)) and some rewrite the problem
    # (ConcurrentModification appends the winning commit): set the attributes, then run only the base initialiser.
    error = cls.__new__(cls)
    error.__dict__.update(attributes)
    DeltaLiteError.__init__(error, problem, table_uri)
    return error


def _error_classes() -> dict[str, type[DeltaLiteError]]:
    """Every loaded DeltaLiteError class defined in this package, by ``module.qualname``."""
    found: dict[str, type[DeltaLiteError]] = {}
    pending: list[type[DeltaLiteError]] = [DeltaLiteError]
    while pending:
        cls = pending.pop()
        if cls.__module__ == _PACKAGE or cls.__module__.startswith(f"{_PACKAGE}."):
            found[f"{cls.__module__}.{cls.__qualname__}"] = cls
        pending.extend(cls.__subclasses__())
    return found


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


class RowTrackingError(DeltaLiteError):
    """The table's row-tracking state cannot be kept correct: a high-water mark below row ids already in use, a file
    whose row ids are unknown (no ``numRecords``, no ``baseRowId``), or table properties that contradict each other.
    Nothing is written."""


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


class CommitStoreError(StorageError):
    """The external commit store (a DynamoDB table, as delta-spark's S3DynamoDBLogStore uses) failed, or its entries
    contradict the log."""


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


class InvalidPolicy(InvalidArgument):
    """A maintenance policy (`maintenance.planner.MaintenancePolicy`) has an unknown key, a value of the wrong type
    or out of range, or its file cannot be read; ``key`` names the key (None when the whole file is at fault)."""

    def __init__(self, problem: str, table_uri: str | None = None, *, key: str | None = None) -> None:
        self.key = key
        super().__init__(problem, table_uri)


class MissingDependency(DeltaLiteError):
    """A feature needs an optional package that is not installed; the message names the extra that brings it.

    Attributes:
        package: the missing package's import name.
        extra: the extra of ``airflow-provider-deltalite`` that installs it.
    """

    def __init__(self, problem: str, table_uri: str | None = None, *, package: str, extra: str) -> None:
        self.package = package
        self.extra = extra
        super().__init__(problem, table_uri)


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


class InvalidInventory(InvalidArgument):
    """A VACUUM inventory cannot be used: unreadable, an unknown format, a missing column or one of the wrong type.
    Nothing was deleted."""


class CatalogTableNotFound(TableNotFound):
    """A catalog (the AWS Glue Data Catalog) has no such database or no such table in it.

    Attributes:
        database: the database named.
        table: the table named (None when the database itself is missing and no table was asked for).
    """

    def __init__(self, problem: str, table_uri: str | None = None, *, database: str, table: str | None = None) -> None:
        self.database = database
        self.table = table
        super().__init__(problem, table_uri)


class NotADeltaTable(DeltaLiteError):
    """A catalog's table is not a Delta table (another format, a view), or gives no location to read it at. Nothing
    was read or written."""


class CatalogError(DeltaLiteError):
    """A catalog could not answer: unreachable, access denied, throttled past the retries, a malformed answer."""
