"""A data file streamed to an object store, which fails once and for all: a streamed upload cannot be replayed."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

from airflow_provider_deltalite.engine.errors import StorageError, UploadInterrupted
from airflow_provider_deltalite.engine.storage.paths import describe
from airflow_provider_deltalite.engine.storage.retry import is_transient

T = TypeVar("T")


class Upload:
    """A data file streamed to an object store. A streamed (multipart) upload cannot be replayed from the start, so
    it is not retried: the first failure abandons it (the multipart upload is aborted where the store has one) and
    raises StorageError, and every later write or flush raises it again.

    Args:
        fh: the store's file object, open for writing.
        table_uri: the table the file belongs to (for the error).
        path: the file as errors name it (relative to the table root where it lies inside).
    """

    def __init__(self, fh: Any, table_uri: str, path: str) -> None:
        self._fh = fh
        self._table_uri = table_uri
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

    def __enter__(self) -> Upload:
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
                f"cannot upload data file {self._path}: {describe(exc)}; a streamed upload cannot be replayed, so "
                "it was abandoned: nothing is committed, and whatever reached the store is left for VACUUM",
                self._table_uri,
            )
            raise self._failure from None

    def _abandon(self) -> None:
        fh = self._fh
        with contextlib.suppress(Exception):
            discard = getattr(fh, "discard", None)
            if discard is not None:
                discard()  # s3fs: aborts the multipart upload; the object never appears
                fh.closed = True  # a discarded fsspec file must not upload what it buffered when collected
