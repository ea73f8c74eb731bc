"""Health summed by a runner's tasks (the Spark executor's), one checkpoint slice each, for a checkpoint too large to
read in the planning process (`engine.checkpoint_task_stream.stream_with_tasks`, from ``checkpoint_task_bytes``).

Each task streams its slice without the rows the commits after the checkpoint supersede (their keys travel with the
work) and sums it into a `HealthAccumulator` of its own, plus, for the planner's first pass, an observer of the same
batches (`PartitionTriggers`); it returns the accumulator's `HealthPart` and the observer. The planning process merges
them in slice order, then adds the commits' own surviving actions: the batches `stream_snapshot` would have handed it,
in the same order, so every figure equals the local stream's. Which files are live again after a remove (a file kept
with a new deletion vector) needs every removed path: the first round of tasks read them, and each task is given them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, Self

import pyarrow as pa

from airflow_provider_deltalite.engine.checkpoint_task_stream import SliceRead, TaskStream, stream_slice
from airflow_provider_deltalite.engine.snapshot import Snapshot
from airflow_provider_deltalite.maintenance.health.accumulate import HealthAccumulator, HealthPart
from airflow_provider_deltalite.maintenance.health.clustering_columns import MeasuredColumn


class BatchObserver(Protocol):
    """What sums the stream's batches beside the health (the planner's `PartitionTriggers`): ``empty_like`` gives a
    fresh one with the same settings (a task's), ``merge`` adds another's sums."""

    def add(self, live: pa.Table, stones: pa.Table) -> None: ...

    def empty_like(self) -> Self: ...

    def merge(self, other: Self) -> None: ...


@dataclass(frozen=True)
class SliceWork:
    """What every task of one health pass shares (sent once): the table's state, the accumulator's settings, every
    removed path, and the observer to copy."""

    snapshot: Snapshot
    measured: tuple[MeasuredColumn, ...]
    min_file_size: int
    removed: pa.Array
    observer: BatchObserver | None


def sum_slice(item: tuple[SliceRead, SliceWork]) -> tuple[HealthPart, BatchObserver | None]:
    """Runs on a task: one slice's health sums (and its observer's)."""
    read, work = item
    acc = HealthAccumulator(work.snapshot, work.measured, work.min_file_size)
    # a fresh observer: a Spark Connect worker keeps a job's items loaded for all of its tasks
    observer = work.observer.empty_like() if work.observer is not None else None
    for live, stones in stream_slice(read):
        acc.add(live, stones, work.removed)
        if observer is not None:
            observer.add(live, stones)
    return acc.part(), observer


def summing_on_tasks(stream: TaskStream, observer: BatchObserver | None = None) -> Callable[[HealthAccumulator], None]:
    """What fills an accumulator from ``stream``: the tasks' parts merged in slice order, then the batches the
    planning process holds (``stream.tail``); ``observer`` sees the same, merged and added alike."""

    def fill(acc: HealthAccumulator) -> None:
        removed = stream.removed_paths()
        work = SliceWork(stream.snapshot, acc.measured, acc.min_file_size, removed, observer)
        for part, seen in stream.fold(sum_slice, work):
            acc.merge(part)
            if observer is not None and seen is not None:
                observer.merge(seen)
        for live, stones in stream.tail:
            acc.add(live, stones, removed)
            if observer is not None:
                observer.add(live, stones)

    return fill


__all__ = ["BatchObserver", "SliceWork", "sum_slice", "summing_on_tasks"]
