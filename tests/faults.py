"""`FaultyFileSystem`: an fsspec filesystem that wraps a real one (s3fs on moto, memory://) and makes a share of its
requests fail the way s3fs reports transient faults, to show that the storage layer retries them and that what still
fails does so cleanly.

It keeps the target's ``protocol`` (and, for s3fs, its event loop and ``_call_s3``), so `Storage` takes the same code
paths it takes in production: paged ``ListObjectsV2`` and ``DeleteObjects`` through ``_call_s3``, conditional PUTs
through ``pipe_file(mode="create")``, ranged reads through an open file.

Faults come in three kinds, each raised with the type and message s3fs really surfaces after its own retries:

``timeout``
    botocore ``ReadTimeoutError``/``ConnectTimeoutError`` (an OSError through botocore's vendored requests), or the
    ``TimeoutError`` s3fs makes of an S3 ``RequestTimeout`` answer.
``slowdown``
    ``OSError(EBUSY, "Please reduce your request rate.")`` made by ``s3fs.errors.translate_boto_error`` from a 503
    ``SlowDown`` ``ClientError`` (kept as ``__cause__``), and its siblings 503 ``ServiceUnavailable`` and 500
    ``InternalError`` (``OSError(EREMOTEIO, ...)``).
``reset``
    botocore ``ConnectionClosedError`` (not an OSError), aiohttp ``ClientOSError(ECONNRESET)``, and on body reads
    aiohttp ``ClientPayloadError`` (not an OSError either).

They are injected before the request reaches the target, either at random (``rate``, with a seeded RNG, over the
``categories`` read, list, write, delete) or by script (`fail_next`). A "lost response" (`lose_next`, ``lost_rate``)
performs a write or delete on the target and then raises a connection reset, as when the server applied a request
whose response never arrived. Every injected fault is counted per category and kind (`injected`), every request per
category and operation (`calls`).

Example:
    >>> fs = FaultyFileSystem(s3fs.S3FileSystem(**options), rate=0.1, seed=7)  # doctest: +SKIP
    >>> DeltaTable("s3://bucket/t", filesystem=fs).optimize()  # doctest: +SKIP
    >>> fs.injected  # doctest: +SKIP
    Counter({('read', 'slowdown'): 3, ('list', 'timeout'): 1, ...})
"""

from __future__ import annotations

import contextlib
import errno
import math
import random
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from fsspec.spec import AbstractFileSystem

KINDS = ("timeout", "slowdown", "reset")
CATEGORIES = ("read", "list", "write", "delete")
# How `Storage` reaches S3 through `_call_s3`, by API method.
_S3_METHODS = {
    "list_objects_v2": "list",
    "delete_objects": "delete",
    "delete_object": "delete",
    "put_object": "write",
    "get_object": "read",
    "head_object": "read",
}


@dataclass
class _Script:
    category: str
    remaining: float
    kind: str
    match: str | None
    op: str | None

    def applies(self, category: str, op: str, path: str) -> bool:
        return (
            self.remaining > 0
            and self.category == category
            and (self.match is None or self.match in path)
            and (self.op is None or self.op == op)
        )


def _client_error(code: str, message: str, status: int, operation: str) -> Exception:
    from botocore.exceptions import ClientError

    response = {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": status, "RequestId": "FAULTY"},
    }
    return ClientError(response, operation)  # type: ignore[arg-type]


def make_fault(kind: str, rng: random.Random, *, endpoint: str, operation: str, body_read: bool = False) -> Exception:
    """One transient failure of ``kind`` as s3fs surfaces it (see the module docstring), chosen by ``rng``."""
    from botocore.exceptions import ConnectionClosedError, ConnectTimeoutError, ReadTimeoutError
    from s3fs.errors import translate_boto_error

    if kind == "timeout":
        choice = rng.randrange(3)
        if choice == 0:
            return ReadTimeoutError(endpoint_url=endpoint)
        if choice == 1:
            return ConnectTimeoutError(endpoint_url=endpoint)
        return translate_boto_error(
            _client_error(
                "RequestTimeout",
                "Your socket connection to the server was not read from or written to within the timeout period. "
                "Idle connections will be closed.",
                400,
                operation,
            )
        )
    if kind == "slowdown":
        code, message, status = rng.choice(
            [
                ("SlowDown", "Please reduce your request rate.", 503),
                ("ServiceUnavailable", "Please reduce your request rate.", 503),
                ("InternalError", "We encountered an internal error. Please try again.", 500),
            ]
        )
        return translate_boto_error(_client_error(code, message, status, operation))
    if kind == "reset":
        import aiohttp

        choice = rng.randrange(3 if body_read else 2)
        if choice == 0:
            return ConnectionClosedError(endpoint_url=endpoint)
        if choice == 1:
            return aiohttp.ClientOSError(errno.ECONNRESET, "Connection reset by peer")
        return aiohttp.ClientPayloadError("Response payload is not completed")
    raise ValueError(f"unknown fault kind {kind!r}")


class FaultyFileSystem(AbstractFileSystem):
    """Wraps ``target`` and injects transient faults (see the module docstring).

    Args:
        target: the real filesystem.
        rate: the share of requests in ``categories`` that fail at random.
        seed: seeds the RNG that decides which requests fail and how.
        kinds: the kinds random faults are drawn from.
        categories: the request categories random faults hit.
        lost_rate: the share of writes and deletes that are performed and then answered with a connection reset.
        on_lost: called with the path after a lost-response write was performed and before its error is raised (to
            let another writer act in between).
    """

    cachable = False
    protocol = "faulty"

    def __init__(
        self,
        target: AbstractFileSystem,
        *,
        rate: float = 0.0,
        seed: int = 0,
        kinds: tuple[str, ...] = KINDS,
        categories: tuple[str, ...] = CATEGORIES,
        lost_rate: float = 0.0,
        on_lost: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__()
        self.target = target
        self.protocol = target.protocol  # type: ignore[misc]
        self._strip_protocol = target._strip_protocol  # type: ignore[method-assign]
        self.rate = rate
        self.kinds = tuple(kinds)
        self.categories = tuple(categories)
        self.lost_rate = lost_rate
        self.on_lost = on_lost
        self.enabled = True
        self.injected: Counter[tuple[str, str]] = Counter()
        self.calls: Counter[tuple[str, str]] = Counter()
        self._rng = random.Random(seed)
        self._scripts: list[_Script] = []
        self._lost_scripts: list[_Script] = []
        self._lock = threading.Lock()
        endpoint = getattr(target, "endpoint_url", None) or (getattr(target, "client_kwargs", None) or {}).get(
            "endpoint_url"
        )
        self._endpoint = str(endpoint or "https://s3.amazonaws.com")

    # -- control ---------------------------------------------------------------------------------------------

    def fail_next(
        self,
        category: str,
        count: float = 1,
        kind: str = "slowdown",
        *,
        match: str | None = None,
        op: str | None = None,
    ) -> None:
        """Make the next ``count`` requests of ``category`` (whose path contains ``match``, of operation ``op``) fail
        with ``kind``; ``count=math.inf`` is a permanent fault."""
        if category not in CATEGORIES or kind not in KINDS:
            raise ValueError(f"unknown category {category!r} or kind {kind!r}")
        with self._lock:
            self._scripts.append(_Script(category, count, kind, match, op))

    def lose_next(self, count: float = 1, *, category: str = "write", match: str | None = None) -> None:
        """Perform the next ``count`` writes (or deletes) on the target, then raise a connection reset."""
        with self._lock:
            self._lost_scripts.append(_Script(category, count, "reset", match, None))

    def clear(self) -> None:
        """Drop every scripted fault (counters stay)."""
        with self._lock:
            self._scripts.clear()
            self._lost_scripts.clear()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No random faults inside the block (scripts still apply)."""
        self.enabled = False
        try:
            yield
        finally:
            self.enabled = True

    def total(self, kind: str | None = None, category: str | None = None) -> int:
        """Faults injected so far, of ``kind`` and ``category`` when given."""
        return sum(n for (c, k), n in self.injected.items() if kind in (None, k) and category in (None, c))

    def count(self, category: str, op: str | None = None) -> int:
        """Requests of ``category`` (and operation ``op``) seen so far, the failed ones included."""
        return sum(n for (c, o), n in self.calls.items() if c == category and op in (None, o))

    # -- injection --------------------------------------------------------------------------------------------

    def _before(self, category: str, op: str, path: str, *, body_read: bool = False) -> None:
        with self._lock:
            self.calls[(category, op)] += 1
            kind = None
            for script in self._scripts:
                if script.applies(category, op, path):
                    script.remaining -= 1
                    kind = script.kind
                    break
            if kind is None and self.enabled and category in self.categories and self._rng.random() < self.rate:
                kind = self._rng.choice(self.kinds)
            if kind is None:
                return
            self.injected[(category, kind)] += 1
            fault = make_fault(kind, self._rng, endpoint=self._url(path), operation=op, body_read=body_read)
        raise fault

    def _lost(self, category: str, op: str, path: str) -> bool:
        with self._lock:
            lose = False
            for script in self._lost_scripts:
                if script.applies(category, op, path):
                    script.remaining -= 1
                    lose = True
                    break
            if not lose and self.enabled and self.lost_rate and category in self.categories:
                lose = self._rng.random() < self.lost_rate
            if lose:
                self.injected[(category, "lost")] += 1
        return lose

    def _after(self, category: str, op: str, path: str) -> None:
        """After a write or delete was performed: maybe lose its response."""
        if not self._lost(category, op, path):
            return
        if self.on_lost is not None:
            self.on_lost(path)
        from botocore.exceptions import ConnectionClosedError

        raise ConnectionClosedError(endpoint_url=self._url(path))

    def _url(self, path: str) -> str:
        return f"{self._endpoint.rstrip('/')}/{path.lstrip('/')}"

    # -- the filesystem -----------------------------------------------------------------------------------------

    @property
    def loop(self) -> Any:
        """The target's event loop (s3fs): `Storage` runs ``_call_s3`` on it."""
        return self.target.loop

    async def _call_s3(self, method: str, *args: Any, **kwargs: Any) -> Any:
        category = _S3_METHODS.get(method, "read")
        path = f"{kwargs.get('Bucket', '')}/{kwargs.get('Key') or kwargs.get('Prefix') or ''}"
        self._before(category, method, path)
        result = await self.target._call_s3(method, *args, **kwargs)
        if category in ("write", "delete"):
            self._after(category, method, path)
        return result

    def exists(self, path: str, **kwargs: Any) -> bool:
        self._before("read", "exists", path)
        return self.target.exists(path, **kwargs)

    def isdir(self, path: str) -> bool:
        self._before("read", "isdir", path)
        return self.target.isdir(path)

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        self._before("read", "info", path)
        return self.target.info(path, **kwargs)

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> Any:
        self._before("list", "ls", path)
        return self.target.ls(path, detail=detail, **kwargs)

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        self._before("read", "cat_file", path)
        return self.target.cat_file(path, start=start, end=end, **kwargs)

    def cat(self, path: Any, recursive: bool = False, on_error: str = "raise", **kwargs: Any) -> Any:
        paths = path if isinstance(path, list) else [path]
        out: dict[str, Any] = {}
        rest = []
        for p in paths:
            try:
                self._before("read", "cat", p)
                rest.append(p)
            except Exception as exc:
                if on_error == "raise":
                    raise
                out[self._strip_protocol(p)] = exc
        if rest:
            got = self.target.cat(rest, recursive=recursive, on_error=on_error, **kwargs)
            out.update(got if isinstance(got, dict) else {self._strip_protocol(rest[0]): got})
        if not isinstance(path, list) and len(out) == 1:
            value = next(iter(out.values()))
            if isinstance(value, BaseException):
                raise value
            return value
        return out

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        self._before("write", "pipe_file", path)
        self.target.pipe_file(path, value, mode=mode, **kwargs)
        self._after("write", "pipe_file", path)

    def open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        category = "read" if "r" in mode else "write"
        self._before(category, "open", path)
        fh = self.target.open(path, mode, **kwargs)
        return _FaultyFile(self, fh, path, category)

    def rm_file(self, path: str) -> None:
        self._before("delete", "rm_file", path)
        self.target.rm_file(path)
        self._after("delete", "rm_file", path)

    def rm(self, path: Any, recursive: bool = False, maxdepth: int | None = None) -> None:
        first = path[0] if isinstance(path, list) and path else str(path)
        self._before("delete", "rm", first)
        self.target.rm(path, recursive=recursive, maxdepth=maxdepth)
        self._after("delete", "rm", first)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        self.target.makedirs(path, exist_ok=exist_ok)

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        self.target.mkdir(path, create_parents=create_parents, **kwargs)

    def invalidate_cache(self, path: str | None = None) -> None:
        self.target.invalidate_cache(path)


class _FaultyFile:
    """A target file whose reads (and, for writes, the final upload at close) fail like the filesystem's requests."""

    def __init__(self, fs: FaultyFileSystem, fh: Any, path: str, category: str) -> None:
        self._fs = fs
        self._fh = fh
        self._path = path
        self._category = category

    def read(self, length: int = -1) -> bytes:
        self._fs._before("read", "file.read", self._path, body_read=True)
        return self._fh.read(length)

    def close(self) -> None:
        if self._category == "write" and not self._fh.closed:
            try:
                self._fs._before("write", "file.close", self._path)
            except Exception:
                # the upload failed: the target never receives the object
                with contextlib.suppress(Exception):
                    self._fh.discard()
                    self._fh.closed = True  # an s3fs file must not upload its buffer when it is collected
                raise
            self._fh.close()
            self._fs._after("write", "file.close", self._path)
            return
        self._fh.close()

    def __enter__(self) -> _FaultyFile:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fh, name)


INFINITE = math.inf
