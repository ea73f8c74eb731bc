"""What the Spark executor's tasks run on the Python workers: one work item, the two sides of the shuffle, warm-up.

Each function is given to ``mapInArrow`` (bound to its arguments with functools.partial) and returns
(reducer, status, payload) rows: results and errors go back to the driver as pickled payloads (`spark_errors`), a
DeltaLiteError as a record rather than a task failure. The job's functions and work items reach a task as a `Job`:
inline in the query on a classic session, as a session artifact on Spark Connect (see `Job`). PySpark is imported
lazily: only the workers need it here.
"""

from __future__ import annotations

import importlib
import itertools
import os
import pickle
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from airflow_provider_deltalite.engine.errors import DeltaLiteError
from airflow_provider_deltalite.executors.spark_errors import MARKER, OK, error_record

# How long each warm-up task keeps its worker busy, so that the warm-up tasks land on distinct workers.
WARM_UP_HOLD_S = 0.5

# Every task of this executor returns (reducer, status, payload) rows: the reducer (or, in the shuffle, the key that
# routes a row to it), OK / RAISED / MARKER, and the pickled result, the error's payload or a shuffled payload.
SCHEMA = pa.schema([("reducer", pa.int64()), ("status", pa.int32()), ("payload", pa.binary())])
SCHEMA_DDL = "reducer BIGINT, status INT, payload BINARY"


# Jobs a worker has loaded from their artifacts, newest last: the tasks of one job reuse the worker (Spark keeps its
# Python workers), and a handful covers the jobs of one operation in flight at once.
_loaded: OrderedDict[str, tuple[Any, ...]] = OrderedDict()
_loaded_lock = threading.Lock()
_KEEP_LOADED = 4


@dataclass(frozen=True)
class Job:
    """What a task needs from the driver: the job's functions and work items, as a tuple.

    On a classic session they travel inline, pickled into the task as PySpark does with any closure; the plan and
    the UI show only the task function's name. A Spark Connect client sends the pickled closure inside the query
    plan, which the server keeps, logs at debug level and shows in its UI, and the work items carry the table's
    storage options (credentials): there the executor writes them to a private file, adds it to the session as an
    artifact (``addArtifacts(file=True)``, removed with the session) and the query carries only its ``artifact``
    name, which the task reads back through SparkFiles.
    """

    value: tuple[Any, ...] | None = None
    artifact: str | None = None

    def load(self) -> tuple[Any, ...]:
        if self.artifact is None:
            assert self.value is not None
            return self.value
        with _loaded_lock:
            if self.artifact in _loaded:
                _loaded.move_to_end(self.artifact)
                return _loaded[self.artifact]
        from pyspark import SparkFiles

        with open(SparkFiles.get(self.artifact), "rb") as f:
            value = pickle.load(f)
        with _loaded_lock:
            _loaded[self.artifact] = value
            while len(_loaded) > _KEEP_LOADED:
                _loaded.popitem(last=False)
        return value


def arrow_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[int, int, bytes]]:
    """The (reducer, status, payload) rows of the Arrow batches a task receives."""
    for batch in batches:
        columns = [batch.column(name).to_pylist() for name in ("reducer", "status", "payload")]
        yield from zip(*columns, strict=True)


def result_batch(rows: Sequence[tuple[int, int, bytes]]) -> pa.RecordBatch:
    reducers, statuses, payloads = zip(*rows, strict=True) if rows else ((), (), ())
    return pa.RecordBatch.from_arrays(
        [pa.array(reducers, pa.int64()), pa.array(statuses, pa.int32()), pa.array(payloads, pa.binary())],
        schema=SCHEMA,
    )


def run_item(job: Job, index: int, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Runs on the Spark worker (``mapInArrow`` over a one-row DataFrame): apply the job's ``fn`` to ``items[index]``
    (``job`` holds ``(fn, items)``).

    A `DeltaLiteError` comes back as a record rather than a task failure: it is deterministic (Spark retrying the
    task cannot help) and, sent as its payload, it keeps its class, message and attributes on the driver.
    """
    for _ in batches:  # the one input row only gives the task its partition
        pass
    fn, items = job.load()
    try:
        status, value = OK, fn(items[index])
    except DeltaLiteError as exc:
        status, value = error_record(exc)
    yield result_batch([(0, status, dumps(value))])


def run_items(job: Job, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Runs on the Spark worker: `run_item` for every item index in ``batches`` (a partition of one query whose rows
    are the item indexes: `SparkExecutor.map_tasks`), each result tagged with its index."""
    fn, items = job.load()
    for batch in batches:
        for index in batch.column(0).to_pylist():
            try:
                status, value = OK, fn(items[index])
            except DeltaLiteError as exc:
                status, value = error_record(exc)
            yield result_batch([(index, status, dumps(value))])


def map_side(job: Job, keys: Sequence[int], batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Runs on the Spark worker: the map stage of `SparkExecutor.map_reduce` for the item indexes in ``batches``
    (``job`` holds ``(map_fn, items, reduce_fn)``).

    Each payload becomes a row keyed so that Spark's hash partitioning sends it to its reducer's partition
    (``keys[reducer]``); a DeltaLiteError goes on as a record to reducer 0, which reports it.
    """
    fn, items, _ = job.load()
    for batch in batches:
        for index in batch.column(0).to_pylist():
            try:
                for reducer, payload in fn(items[index]):
                    yield result_batch([(keys[reducer], OK, payload)])
            except DeltaLiteError as exc:
                status, value = error_record(exc)
                yield result_batch([(keys[0], status, dumps(value))])
                return


def markers(keys: Sequence[int], batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Runs on the Spark worker: one empty MARKER row per reducer, so that a reducer no payload reaches still runs
    (its number, which the reducer checks against its partition's)."""
    for batch in batches:
        reducers = batch.column(0).to_pylist()
        if reducers:
            yield result_batch([(keys[r], MARKER, str(r).encode()) for r in reducers])


def reduce_side(job: Job, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Runs on the Spark worker: one reducer of `SparkExecutor.map_reduce` over the rows shuffled to its partition
    (the job's ``reduce_fn``).

    The partition's number is the reducer's: each reducer's key hashes to the partition of its own number
    (`SparkExecutor._partition_keys`), and the reducer's MARKER row, checked on the way, makes the task run even when
    no payload reaches it. The payloads stream to ``fn`` as they arrive: nothing is held back while looking for the
    marker, which a shuffle tends to deliver last.
    """
    from pyspark import TaskContext

    context = TaskContext.get()
    assert context is not None  # a task always has one
    reducer = context.partitionId()
    rows = arrow_rows(batches)
    first = next(rows, None)
    if first is None:
        return  # no row at all, so no reducer of this job: nothing to report
    if first[1] not in (OK, MARKER):  # a map-side error record came first; another task may report it as well
        yield result_batch([(reducer, first[1], first[2])])
        return
    fn: Callable[[int, Iterator[bytes]], Any] = job.load()[2]
    failed: list[tuple[int, bytes]] = []

    def payloads() -> Iterator[bytes]:
        for _, status, value in itertools.chain([first], rows):
            if status == MARKER:
                if int(value) != reducer:
                    raise RuntimeError(f"the shuffle sent reducer {int(value)}'s marker to partition {reducer}")
                continue
            if status != OK:
                failed.append((status, value))
                return
            yield value

    try:
        result = fn(reducer, payloads())
    except DeltaLiteError as exc:
        status, value = error_record(exc)
        yield result_batch([(reducer, status, dumps(value))])
        return
    yield result_batch([(reducer, *failed[0])] if failed else [(reducer, OK, dumps(result))])


def dumps(value: Any) -> bytes:
    from pyspark import cloudpickle

    return cloudpickle.dumps(value)


def warm_worker(modules: tuple[str, ...], _: int) -> int:
    """Runs on a Spark worker: import ``modules``, so later tasks find them loaded."""
    for name in modules:
        importlib.import_module(name)
    # Hold the worker a moment: a task that finished at once would free its worker for the next warm-up task, and a
    # worker that took none would stay cold.
    time.sleep(WARM_UP_HOLD_S)
    return os.getpid()
