"""The local executor: a thread pool in this process (pyarrow releases the GIL while it decodes and encodes)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


class LocalExecutor:
    """Run work items on ``max_concurrent_tasks`` threads (default: the number of CPUs).

    At most ``max_concurrent_tasks`` items are in flight, so memory stays bounded by what that many items hold.

    Example:
        >>> list(LocalExecutor(2).map(abs, [-1, -2]))  # doctest: +SKIP
        [1, 2]
    """

    name = "local"

    def __init__(self, max_concurrent_tasks: int | None = None) -> None:
        if max_concurrent_tasks is not None and max_concurrent_tasks < 1:
            raise ValueError(f"max_concurrent_tasks must be at least 1, got {max_concurrent_tasks}")
        self._workers = max_concurrent_tasks or os.cpu_count() or 1

    @property
    def parallelism(self) -> int:
        return self._workers

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[R]:
        items = list(items)
        if self._workers == 1 or len(items) <= 1:
            for item in items:
                yield fn(item)
            return
        with ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="deltalite") as pool:
            pending: set[Future[R]] = set()
            queue = iter(items)
            try:
                for item in queue:
                    pending.add(pool.submit(fn, item))
                    if len(pending) >= self._workers:
                        done, pending = wait(pending, return_when=FIRST_COMPLETED)
                        for future in done:
                            yield future.result()
                while pending:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        yield future.result()
            finally:
                for future in pending:
                    future.cancel()

    def close(self) -> None:
        """Nothing to release: each `map` owns its pool."""
