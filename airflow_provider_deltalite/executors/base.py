"""The one thing maintenance asks of an executor: run a function over picklable work items."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Protocol, TypeVar, runtime_checkable

T = TypeVar("T")
R = TypeVar("R")


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
