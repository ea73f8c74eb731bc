"""What maintenance asks of an executor (run a function over picklable work items), and the in-process default.

Maintenance receives its executor by injection: `LocalExecutor` (threads in this process) unless the caller hands it
another, such as `executors.spark.SparkExecutor`. Both run the same work items and write identical files.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Protocol, TypeVar, runtime_checkable

T = TypeVar("T")
R = TypeVar("R")

# What maintenance work items import on a worker (the heaviest first); an executor whose workers outlive one operation
# (Spark's Python workers) can import these in advance, so the first operation does not pay for it.
WORKER_IMPORTS = (
    "pyarrow.parquet",
    "airflow_provider_deltalite.engine.rewrite",
    "airflow_provider_deltalite.maintenance.clustering.runs",
)


class Executor(Protocol):
    """Runs ``fn`` over work items and yields the results as they finish (in any order).

    ``fn`` must be a module-level function and the items and results picklable: the Spark executor ships them to
    Python workers on other machines. An exception raised by ``fn`` for any item propagates out of ``map``.
    """

    name: str

    @property
    def parallelism(self) -> int:
        """How many items run at once (Spark: the cluster's default parallelism)."""
        ...

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[R]: ...

    def close(self) -> None: ...


@runtime_checkable
class ShuffleExecutor(Executor, Protocol):
    """An executor that can also move data between tasks (Spark's shuffle): a map stage, then a reduce stage.

    ``map_fn(item)`` yields ``(reducer, payload)`` pairs, payloads being bytes; each reducer ``r`` in
    ``range(num_reducers)`` runs as one task, ``reduce_fn(r, payloads)`` over an iterator of every payload sent to it
    (in no particular order), and its return value is one of the results. An exception raised on either side
    propagates out of ``map_reduce`` as it does out of ``map``.
    """

    def map_reduce(
        self,
        map_fn: Callable[[T], Iterator[tuple[int, bytes]]],
        items: Sequence[T],
        reduce_fn: Callable[[int, Iterator[bytes]], R],
        num_reducers: int,
    ) -> list[R]: ...


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
