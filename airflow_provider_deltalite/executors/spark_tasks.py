"""What the Spark executor's tasks run on the Python workers: one work item, the two sides of the shuffle, warm-up.

Each function is given to ``mapInArrow`` (bound to its arguments with functools.partial) and returns
(reducer, status, payload) rows: results and errors go back to the driver as pickled payloads (`spark_errors`), a
DeltaLiteError as a record rather than a task failure. PySpark is imported lazily: only the workers need it here.
"""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import pyarrow as pa

from airflow_provider_deltalite.engine.errors import DeltaLiteError
from airflow_provider_deltalite.executors.spark_errors import MARKER, OK, error_record

T = TypeVar("T")
R = TypeVar("R")

# How long each warm-up task keeps its worker busy, so that the warm-up tasks land on distinct workers.
WARM_UP_HOLD_S = 0.5

# Every task of this executor returns (reducer, status, payload) rows: the reducer (or, in the shuffle, the key that
# routes a row to it), OK / RAISED / MARKER, and the pickled result, the error's payload or a shuffled payload.
SCHEMA = pa.schema([("reducer", pa.int64()), ("status", pa.int32()), ("payload", pa.binary())])
SCHEMA_DDL = "reducer BIGINT, status INT, payload BINARY"


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


def run_item(fn: Callable[[T], R], item: T, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Runs on the Spark worker (``mapInArrow`` over a one-row DataFrame): apply ``fn`` to ``item``.

    A `DeltaLiteError` comes back as a record rather than a task failure: it is deterministic (Spark retrying the
    task cannot help) and, sent as its payload, it keeps its class, message and attributes on the driver.
    """
    for _ in batches:  # the one input row only gives the task its partition
        pass
    try:
        status, value = OK, fn(item)
    except DeltaLiteError as exc:
        status, value = error_record(exc)
    yield result_batch([(0, status, dumps(value))])


def map_side(
    fn: Callable[[T], Iterator[tuple[int, bytes]]],
    items: Sequence[T],
    keys: Sequence[int],
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """Runs on the Spark worker: the map stage of `SparkExecutor.map_reduce` for the item indexes in ``batches``.

    Each payload becomes a row keyed so that Spark's hash partitioning sends it to its reducer's partition
    (``keys[reducer]``); a DeltaLiteError goes on as a record to reducer 0, which reports it.
    """
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
    (and learns its number)."""
    for batch in batches:
        reducers = batch.column(0).to_pylist()
        if reducers:
            yield result_batch([(keys[r], MARKER, str(r).encode()) for r in reducers])


def reduce_side(fn: Callable[[int, Iterator[bytes]], R], batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Runs on the Spark worker: one reducer of `SparkExecutor.map_reduce` over the rows shuffled to its partition.

    The partition holds exactly one reducer's rows (its keys hash there and no other reducer's do), its MARKER
    among them; the payloads stream to ``fn`` in the order they arrive.
    """
    rows = arrow_rows(batches)
    reducer: int | None = None
    ahead: list[bytes] = []  # payloads read while looking for the marker, which names the reducer
    failed: list[tuple[int, bytes]] = []
    for _, status, value in rows:
        if status == MARKER:
            reducer = int(value)
            break
        if status != OK:
            failed.append((status, value))
            break
        ahead.append(value)
    if reducer is None and not failed:
        return  # an empty partition: no reducer hashes here

    def payloads() -> Iterator[bytes]:
        yield from ahead
        ahead.clear()
        if failed:
            return
        for _, status, value in rows:
            if status == MARKER:
                continue
            if status != OK:
                failed.append((status, value))
                return
            yield value

    if reducer is None:  # an error record reached this partition first; another task reports it as well
        yield result_batch([(-1, *failed[0])])
        return
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
