"""LocalExecutor: every item's result comes back (in any order), at most N items in flight, errors propagate."""

from __future__ import annotations

import threading
import time

import pytest

from airflow_provider_deltalite.engine import TableNotFound
from airflow_provider_deltalite.executors import LocalExecutor


def _square(x: int) -> int:
    return x * x


class _Gauge:
    """Counts how many calls run at the same time and remembers the peak.

    The first ``together`` calls wait for each other before leaving, so the peak reaches ``together`` however the
    machine schedules the threads; a bound that held only because threads were slow to start would show as a peak
    above it.
    """

    def __init__(self, together: int) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.peak = 0
        self.together = together
        self.barrier = threading.Barrier(together, timeout=30)

    def __call__(self, x: int) -> int:
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        if x < self.together:
            self.barrier.wait()
        time.sleep(0.005)
        with self.lock:
            self.running -= 1
        return x


def test_results_of_every_item_in_completion_order() -> None:
    # Item 0 cannot finish until the caller has taken the other three results, so with 4 threads the results follow
    # completion, not input.
    others_taken = threading.Event()

    def slow_first(x: int) -> int:
        if x == 0:
            assert others_taken.wait(timeout=30)
        return x * 10

    results: list[int] = []
    for result in LocalExecutor(4).map(slow_first, [0, 1, 2, 3]):
        results.append(result)
        if len(results) == 3:
            others_taken.set()
    assert results[-1] == 0
    assert sorted(results) == [0, 10, 20, 30]


def test_single_thread_and_single_item_run_inline() -> None:
    assert list(LocalExecutor(1).map(_square, [3, 1, 2])) == [9, 1, 4]
    assert list(LocalExecutor(8).map(_square, [7])) == [49]
    assert list(LocalExecutor(8).map(_square, [])) == []


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_in_flight_count_is_bounded(workers: int) -> None:
    gauge = _Gauge(workers)
    assert sorted(LocalExecutor(workers).map(gauge, range(12))) == list(range(12))
    assert gauge.peak == workers


def test_parallelism_is_the_thread_count() -> None:
    assert LocalExecutor(3).parallelism == 3
    assert LocalExecutor().parallelism >= 1


def test_exception_in_fn_propagates_with_its_type() -> None:
    def fail_on_two(x: int) -> int:
        if x == 2:
            raise TableNotFound("no _delta_log", "/tmp/t")
        return x

    with pytest.raises(TableNotFound) as info:
        list(LocalExecutor(2).map(fail_on_two, range(5)))
    assert str(info.value) == "table /tmp/t: no _delta_log"


def test_stopping_early_cancels_queued_items() -> None:
    started: list[int] = []
    # The first two items wait for each other, so both have started before either returns, however busy the machine
    # (CI once scheduled the second thread only after the first result had been taken).
    both_started = threading.Barrier(2, timeout=30)

    def record(x: int) -> int:
        started.append(x)
        if x < 2:
            both_started.wait()
        return x

    results = LocalExecutor(2).map(record, range(20))
    first = next(results)
    results.close()
    assert first in (0, 1)
    # Only the first two items had been submitted when the first result was yielded; the rest never started.
    assert sorted(started) == [0, 1]


@pytest.mark.parametrize("bad", [0, -1])
def test_max_concurrent_tasks_must_be_positive(bad: int) -> None:
    with pytest.raises(ValueError, match=f"max_concurrent_tasks must be at least 1, got {bad}"):
        LocalExecutor(bad)
