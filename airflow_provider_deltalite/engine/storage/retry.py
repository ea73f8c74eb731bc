"""Retrying storage requests that failed transiently: the policy, the classifier, and a retrying read-only file.

An object store answers a small share of requests with a time-out, a reset connection or a "slow down" (HTTP 503);
the same request a moment later succeeds. `Storage` runs every request under a `StorageRetryPolicy` and retries exactly
the failures `is_transient` recognises; everything else (a missing file, a refused permission, a failed precondition)
is an answer, not a fault, and is never retried.

The defaults follow object_store (the Rust crate behind delta-rs): about ten tries with full-jitter exponential
backoff, so one request gives up after at most ~21 s of sleeping (~11 s expected) instead of failing an hours-long
OPTIMIZE on one blip, or hanging a sensor for minutes on a store that is really down.

Example:
    >>> policy = StorageRetryPolicy(attempts=3, base_delay_s=0.0)
    >>> retry_call(policy, lambda: "done")
    'done'
"""

from __future__ import annotations

import contextlib
import errno
import io
import random
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, TypeVar

from airflow_provider_deltalite.engine.errors import DeltaLiteError

T = TypeVar("T")

# Storage options (popped by `Storage`, never passed to fsspec) that configure the policy without code.
ATTEMPTS_OPTION = "deltalite_retry_attempts"
BASE_DELAY_OPTION = "deltalite_retry_base_delay_s"
MAX_DELAY_OPTION = "deltalite_retry_max_delay_s"
RETRY_OPTIONS = (ATTEMPTS_OPTION, BASE_DELAY_OPTION, MAX_DELAY_OPTION)


@dataclass(frozen=True)
class StorageRetryPolicy:
    """How often and how patiently one storage request is retried after a transient failure.

    Attributes:
        attempts: tries in total, the first included (1 means no retry).
        base_delay_s: the backoff ceiling before the second try; it doubles per try up to ``max_delay_s``, and the
            actual sleep is drawn uniformly below the ceiling ("full jitter"), so clients throttled together do not
            come back together.
        max_delay_s: the largest backoff ceiling.

    With the defaults (10, 0.1 s, 5 s) the ceilings are 0.1, 0.2, ... 3.2, 5, 5, 5 s: at most 21.3 s of sleeping in
    all, 10.7 s on average. s3fs and botocore retry some failures inside one of our tries already; ours covers the
    rest (connection resets, time-outs after their budget, 5xx answers) and reads of an open file, which they do not.
    """

    attempts: int = 10
    base_delay_s: float = 0.1
    max_delay_s: float = 5.0

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int) or self.attempts < 1:
            raise ValueError(f"attempts must be an integer >= 1, got {self.attempts!r}")
        for name in ("base_delay_s", "max_delay_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
                raise ValueError(f"{name} must be a non-negative number of seconds, got {value!r}")

    def delay(self, failures: int) -> float:
        """The sleep after the ``failures``-th failed try (1-based)."""
        ceiling = min(self.max_delay_s, self.base_delay_s * (2 ** min(failures - 1, 62)))
        return random.uniform(0, ceiling)

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> StorageRetryPolicy:
        """The policy the ``deltalite_retry_*`` storage options describe (strings are accepted: they come from
        connection extras and ``--storage-option KEY=VALUE``); defaults for the options not given.

        Raises:
            ValueError: a value does not parse or is out of range (the message names the option, never a secret).
        """
        fields = {ATTEMPTS_OPTION: ("attempts", int), BASE_DELAY_OPTION: ("base_delay_s", float)}
        fields[MAX_DELAY_OPTION] = ("max_delay_s", float)
        values: dict[str, Any] = {}
        for option, (name, kind) in fields.items():
            if option not in options:
                continue
            raw = options[option]
            try:
                if isinstance(raw, bool):
                    raise ValueError
                values[name] = kind(raw.strip() if isinstance(raw, str) else raw)
                if kind is int and isinstance(raw, float) and not raw.is_integer():
                    raise ValueError
            except (TypeError, ValueError):
                raise ValueError(f"storage option {option} must be a number, got {raw!r}") from None
        try:
            return cls(**values)
        except ValueError as exc:
            raise ValueError(f"storage option {_option_for(str(exc))}: {exc}") from None


def _option_for(message: str) -> str:
    for option, name in zip(RETRY_OPTIONS, ("attempts", "base_delay_s", "max_delay_s"), strict=True):
        if message.startswith(name):
            return option
    return "deltalite_retry_*"


# S3 error codes (and HTTP statuses as s3fs reports them when the body has no code) that mean "try again".
TRANSIENT_CODES = frozenset(
    {
        "SlowDown",
        "ServiceUnavailable",
        "RequestTimeout",
        "InternalError",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestLimitExceeded",
        "TooManyRequests",
        "TooManyRequestsException",
        "OperationAborted",  # "a conflicting conditional operation is currently in progress ... try again"
        "429",
        "500",
        "502",
        "503",
        "504",
    }
)
TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
# botocore and aiohttp failures of the connection itself (matched by class name: neither is a dependency of the
# engine). botocore's HTTPClientError covers ConnectionClosedError, ReadTimeoutError and ResponseStreamingError; its
# ConnectionError covers EndpointConnectionError and ConnectTimeoutError. aiohttp's reach us from a body read.
_TRANSIENT_CLASS_NAMES = frozenset(
    {
        "HTTPClientError",
        "ConnectionError",
        "ClientConnectionError",
        "ClientPayloadError",
        "ServerDisconnectedError",
        "IncompleteRead",
        "IncompleteReadError",
        "ProtocolError",
        "ResponseParserError",
    }
)
_TRANSIENT_ERRNOS = frozenset(
    {
        errno.EBUSY,  # s3fs: SlowDown, ServiceUnavailable, 503
        errno.EAGAIN,
        errno.ETIMEDOUT,
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.ECONNREFUSED,
        errno.EPIPE,
        getattr(errno, "EREMOTEIO", errno.EIO),  # s3fs: InternalError, 500
    }
)
# When only the text is left (an error rebuilt from a message): the code in botocore's "An error occurred (Code)"
# form, or a phrase servers use. Bare numbers are not matched: a path can contain "503".
_TRANSIENT_TEXT = re.compile(
    r"\((?:" + "|".join(sorted(TRANSIENT_CODES)) + r")\)"
    r"|\b(?:SlowDown|ServiceUnavailable|Service Unavailable|InternalError|Internal Server Error|RequestTimeout"
    r"|Bad Gateway|Gateway Time-?out|Too Many Requests|TooManyRequests|Throttl\w*|reduce your request rate)\b",
    re.IGNORECASE,
)
# A failed condition is the store's answer to a conditional write: another writer (or our own earlier try) won.
_PRECONDITION_TEXT = ("PreconditionFailed", "Precondition Failed", "ConditionalRequestConflict")
_ANSWERS = (FileNotFoundError, FileExistsError, PermissionError, IsADirectoryError, NotADirectoryError)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    # the error and what it was translated from, as a traceback shows them (`raise ... from None` ends the chain)
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 8:
        seen.add(id(current))
        yield current
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)


def _class_names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _client_error_transient(exc: BaseException) -> bool | None:
    # botocore ClientError (s3fs keeps it as the __cause__ of the OSError it raises): the code and status decide.
    response = getattr(exc, "response", None)
    if not isinstance(response, Mapping):
        return None
    error = response.get("Error") or {}
    code = str(error.get("Code", "")) if isinstance(error, Mapping) else ""
    status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    return code in TRANSIENT_CODES or status in TRANSIENT_STATUS


def is_precondition_failure(exc: BaseException) -> bool:
    """Whether ``exc`` (or the error it was translated from) is a failed write condition: S3's 412
    PreconditionFailed, or 409 ConditionalRequestConflict (a concurrent conditional write to the same key)."""
    for link in _chain(exc):
        if any(text in str(link) for text in _PRECONDITION_TEXT):
            return True
        response = getattr(link, "response", None)
        if isinstance(response, Mapping):
            error = response.get("Error") or {}
            code = str(error.get("Code", "")) if isinstance(error, Mapping) else ""
            if any(text in code for text in _PRECONDITION_TEXT):
                return True
    return False


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure that the same request may not meet again: a time-out, a reset or refused
    connection, an HTTP 429/500/502/503/504 or an S3 SlowDown/ServiceUnavailable/InternalError/RequestTimeout/
    Throttling answer, as s3fs, botocore, aiohttp, asyncio or the OS raise them.

    Answers are never transient: FileNotFoundError, FileExistsError, PermissionError, a failed precondition.

    Example:
        >>> is_transient(ConnectionResetError(104, "Connection reset by peer"))
        True
        >>> is_transient(FileNotFoundError("s3://bucket/key"))
        False
    """
    if isinstance(exc, (*_ANSWERS, DeltaLiteError)):  # a DeltaLiteError is a verdict already made
        return False
    if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit
        return False
    if is_precondition_failure(exc):
        return False
    for link in _chain(exc):
        if isinstance(link, TimeoutError | ConnectionError):  # asyncio.TimeoutError and fsspec's are TimeoutError
            return True
        verdict = _client_error_transient(link)
        if verdict is not None:
            if verdict:
                return True
            continue
        names = _class_names(link)
        if names & _TRANSIENT_CLASS_NAMES and type(link).__module__.split(".")[0] != "builtins":
            return True
        if isinstance(link, OSError) and link.errno in _TRANSIENT_ERRNOS:
            return True
        if _TRANSIENT_TEXT.search(str(link)):
            return True
    return False


def is_backend_failure(exc: BaseException) -> bool:
    """Whether ``exc`` came from the storage backend (so it belongs in a `StorageError`), not from a bug of ours:
    an OSError, a transient failure, or any botocore/aiobotocore/aiohttp/urllib3 exception (some are not OSErrors,
    like botocore's NoCredentialsError)."""
    if isinstance(exc, DeltaLiteError):
        return False
    if isinstance(exc, OSError) or is_transient(exc):
        return True
    return any(
        cls.__module__.split(".")[0] in ("botocore", "aiobotocore", "aiohttp", "urllib3", "requests", "google", "azure")
        for cls in type(exc).__mro__
    )


def retry_call(
    policy: StorageRetryPolicy,
    request: Callable[[], T],
    *,
    transient: Callable[[BaseException], bool] = is_transient,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``request()``, tried again after each transient failure until ``policy.attempts`` tries are used.

    The last failure (or the first one that is not transient) is raised unchanged; a transient failure that reaches
    the caller therefore always cost ``policy.attempts`` tries.
    """
    failures = 0
    while True:
        try:
            return request()
        except Exception as exc:
            failures += 1
            if failures >= policy.attempts or not transient(exc):
                raise
        sleep(policy.delay(failures))


class RetryingReader(io.RawIOBase):
    """A read-only, seekable file over an object store whose reads are retried: on a transient failure the object is
    opened again and the read repeated at the same offset (a Parquet decode makes many ranged reads, and one failed
    read would otherwise fail a whole OPTIMIZE).

    Args:
        opener: opens the object afresh (an fsspec ``fs.open(path, "rb")``); it is itself retried.
        policy: the retry policy; each read has its own ``attempts``.
        errors: translates what a read finally raised (`Storage` makes it the table's StorageError, naming the path),
            so a Parquet decode that gives up reports the path, the cause and the table.
    """

    def __init__(
        self,
        opener: Callable[[], Any],
        policy: StorageRetryPolicy,
        errors: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext,
    ) -> None:
        super().__init__()
        self._opener = opener
        self._policy = policy
        self._errors = errors
        self._fh: Any = retry_call(policy, opener)
        self._pos = 0
        self._size: int | None = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    @property
    def size(self) -> int:
        """The object's size in bytes."""
        if self._size is None:
            self._size = int(self._request(lambda fh: fh.size))
        return self._size

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            target = offset
        elif whence == io.SEEK_CUR:
            target = self._pos + offset
        elif whence == io.SEEK_END:
            target = self.size + offset
        else:
            raise ValueError(f"invalid whence {whence}")
        if target < 0:
            raise ValueError(f"negative seek position {target}")
        self._pos = target
        return target

    def read(self, size: int | None = -1) -> bytes:
        def read(fh: Any) -> bytes:
            if fh.tell() != self._pos:
                fh.seek(self._pos)
            return fh.read(-1 if size is None else size)

        data = self._request(read)
        self._pos += len(data)
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed and self._fh is not None:
            # a read-only handle holds nothing to lose; its close must not mask a decode error
            with contextlib.suppress(Exception):
                self._fh.close()
            self._fh = None
        super().close()

    def _request(self, request: Callable[[Any], T]) -> T:
        if self.closed:
            raise ValueError("I/O operation on closed file")

        def attempt() -> T:
            if self._fh is None:
                self._fh = self._opener()
            try:
                return request(self._fh)
            except Exception as exc:
                if is_transient(exc):
                    # the handle's buffer and connection are suspect after a failed read: start from a fresh one
                    stale, self._fh = self._fh, None
                    with contextlib.suppress(Exception):
                        stale.close()
                raise

        with self._errors():
            return retry_call(self._policy, attempt)
