"""`engine.read_ahead`: an iterator run on its own thread, a byte budget ahead of its consumer."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from airflow_provider_deltalite.engine.read_ahead import read_ahead


class _Source:
    """Items 0..n-1 of ``size`` bytes each; records how far it was pulled, on which thread, and its closing."""

    def __init__(self, n: int, fail_at: int | None = None) -> None:
        self.n, self.fail_at = n, fail_at
        self.produced = 0
        self.closed_on: str | None = None
        self.threads: set[str] = set()

    def __iter__(self) -> Iterator[int]:
        try:
            for i in range(self.n):
                self.threads.add(threading.current_thread().name)
                if i == self.fail_at:
                    raise OSError(f"input {i} unreadable")
                self.produced += 1
                yield i
        finally:
            self.closed_on = threading.current_thread().name


def test_items_arrive_in_order_from_another_thread() -> None:
    source = _Source(50)
    assert list(read_ahead(source, max_bytes=3, size=lambda _: 1, name="reader")) == list(range(50))
    assert source.threads == {"reader"}
    assert source.closed_on == "reader"


def test_the_producer_stays_within_its_byte_budget() -> None:
    source = _Source(40)
    seen = []
    for item in read_ahead(source, max_bytes=10, size=lambda _: 4):
        time.sleep(0.005)  # a slow consumer: the producer runs ahead as far as it may
        # pulled = taken + held (produced while under 10 bytes of 4-byte items: three at most)
        assert source.produced - (item + 1) <= 3
        seen.append(item)
    assert seen == list(range(40))


def test_nothing_is_produced_while_the_budget_is_full() -> None:
    # the producer waits for room before it produces an item, not with the item in hand: 8 bytes of 4-byte items
    # are two items, and no third is pulled until one of them is taken
    source = _Source(30)
    for item in read_ahead(source, max_bytes=8, size=lambda _: 4):
        time.sleep(0.005)
        assert source.produced - (item + 1) <= 2


def test_an_item_larger_than_the_budget_still_passes() -> None:
    assert list(read_ahead(iter([1, 2, 3]), max_bytes=1, size=lambda item: 100 * item)) == [1, 2, 3]


def test_an_error_is_raised_at_its_place_after_the_items_before_it() -> None:
    source = _Source(10, fail_at=6)
    got = []
    with pytest.raises(OSError, match="input 6 unreadable"):
        for item in read_ahead(source, max_bytes=100, size=lambda _: 1):
            got.append(item)
    assert got == [0, 1, 2, 3, 4, 5]
    assert source.closed_on is not None


def test_a_consumer_that_stops_early_stops_and_closes_the_producer() -> None:
    source = _Source(1_000_000)
    stream = read_ahead(source, max_bytes=5, size=lambda _: 1, name="reader")
    assert [next(stream) for _ in range(3)] == [0, 1, 2]
    stream.close()  # waits for the producer to stop
    assert source.closed_on == "reader"
    assert source.produced <= 3 + 5 + 1
    assert not any(t.name == "reader" for t in threading.enumerate())
