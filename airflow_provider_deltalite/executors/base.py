"""The one thing maintenance asks of an executor: run a function over picklable work items."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Protocol, TypeVar

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
