"""The Spark executor: each work item is one Spark task running on an executor's Python worker (classic PySpark).

The engine reaches the executors as a zip of the installed package (`executors.engine_zip`), added once per
SparkContext with ``addPyFile`` unless the job was submitted with it (``--py-files``). Starting a session is in
`executors.spark_session`, how failures come back in `executors.spark_errors`. PySpark is imported lazily: this module
is imported on Spark's Python workers too, where only the functions the tasks run are needed.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import suppress
from typing import TYPE_CHECKING, Any, TypeVar, cast

from airflow_provider_deltalite.engine.errors import DeltaLiteError, ExecutorError, redact_uri
from airflow_provider_deltalite.executors.spark_errors import (
    OK,
    describe_failure,
    error_from_record,
    error_record,
    is_spark_error,
)
from airflow_provider_deltalite.executors.spark_session import start_session, wait_for_executor
from airflow_provider_deltalite.maintenance.executor import WORKER_IMPORTS

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

T = TypeVar("T")
R = TypeVar("R")

# How long each warm-up task keeps its worker busy, so that the warm-up tasks land on distinct workers.
WARM_UP_HOLD_S = 0.5
_ship_lock = threading.Lock()


def _run_item(fn: Callable[[T], R], items: Iterator[T]) -> Iterator[tuple[int, Any]]:
    """Runs on the Spark worker: apply ``fn`` to the partition's one item.

    A `DeltaLiteError` comes back as a value rather than a task failure: it is deterministic (Spark retrying the
    task cannot help) and, sent as an object, it keeps its class, message and attributes on the driver.
    """
    for item in items:
        try:
            result = fn(item)
        except DeltaLiteError as exc:
            yield error_record(exc)
        else:
            yield OK, result


def _map_side(fn: Callable[[T], Iterator[tuple[int, bytes]]], items: Iterator[T]) -> Iterator[tuple[int, Any]]:
    """Runs on the Spark worker: the map stage of `SparkExecutor.map_reduce`, a DeltaLiteError sent on as a record."""
    for item in items:
        try:
            for reducer, payload in fn(item):
                yield reducer, (OK, payload)
        except DeltaLiteError as exc:
            yield 0, error_record(exc)
            return


def _reduce_side(
    fn: Callable[[int, Iterator[bytes]], R], reducer: int, records: Iterator[tuple[int, Any]]
) -> Iterator[tuple[int, Any]]:
    """Runs on the Spark worker: one reducer of `SparkExecutor.map_reduce` over the records shuffled to it."""
    failed: list[tuple[int, Any]] = []

    def payloads() -> Iterator[bytes]:
        for _, (status, value) in records:
            if status != OK:
                failed.append((status, value))
                return
            yield value

    try:
        result = fn(reducer, payloads())
    except DeltaLiteError as exc:
        yield error_record(exc)
        return
    yield failed[0] if failed else (OK, result)


def _label(fn: Callable[..., Any]) -> str:
    """The function's name for job descriptions and errors (the wrapped function's, for a functools.partial)."""
    fn = getattr(fn, "func", fn) if isinstance(fn, functools.partial) else fn
    return getattr(fn, "__qualname__", type(fn).__name__)


def _identity(reducer: int) -> int:
    return reducer


def _warm_worker(modules: tuple[str, ...], _: int) -> int:
    """Runs on a Spark worker: import ``modules``, so later tasks find them loaded."""
    for name in modules:
        importlib.import_module(name)
    # Hold the worker a moment: a task that finished at once would free its worker for the next warm-up task, and a
    # worker that took none would stay cold.
    time.sleep(WARM_UP_HOLD_S)
    return os.getpid()


class SparkExecutor:
    """Run work items as Spark tasks, one task per item, on the executors of a classic SparkSession.

    ``SparkExecutor(spark)`` wraps a session someone else owns (the spark-submit job); `SparkExecutor.start` creates
    one and `close` stops only a session created that way.

    Example:
        >>> executor = SparkExecutor.start("local[2]")  # doctest: +SKIP
        >>> sorted(executor.map(abs, [-1, -2]))  # doctest: +SKIP
        [1, 2]
        >>> executor.close()  # doctest: +SKIP
    """

    name = "spark"

    def __init__(
        self, spark: SparkSession, *, warm_imports: Sequence[str] = WORKER_IMPORTS, _owned: bool = False
    ) -> None:
        try:
            sc = spark.sparkContext
        except Exception:  # Spark Connect sessions have no SparkContext, and we need RDDs
            raise ExecutorError(
                "the Spark executor needs a classic SparkSession; Spark Connect sessions are not supported"
            ) from None
        self._spark = spark
        self._sc: SparkContext | None = sc
        self._owned = _owned
        self.master = cast(str, sc.master)  # SparkContext refuses to start without spark.master
        self.warm_imports = tuple(warm_imports)
        self.warmed_workers: tuple[int, ...] = ()  # process ids of the Python workers `warm_up` started

    @classmethod
    def start(
        cls,
        master: str = "local[*]",
        app_name: str = "deltalite",
        conf: Mapping[str, str] | None = None,
        *,
        connect_timeout: float = 5.0,
        executor_timeout: float = 60.0,
        warm_imports: Sequence[str] = WORKER_IMPORTS,
    ) -> SparkExecutor:
        """Create a SparkSession for ``master`` and wrap it; `close` stops it.

        A ``spark://`` master must accept a TCP connection within ``connect_timeout`` seconds, and at least one
        executor must register within ``executor_timeout`` seconds. For ``local`` masters and masters on a loopback
        address the driver binds to 127.0.0.1 and the Python workers use this interpreter unless PYSPARK_PYTHON is
        set. ``conf`` overrides every default set here. The workers import ``warm_imports`` before `start` returns
        (`warm_up`); the default is what maintenance work items use (`maintenance.executor.WORKER_IMPORTS`).

        Raises:
            ExecutorError: the master cannot be reached, no executor registered in time, another SparkContext is
                already running in this process, or Spark failed to start.
        """
        spark = start_session(master, app_name, conf, connect_timeout=connect_timeout)
        executor = cls(spark, warm_imports=warm_imports, _owned=True)
        try:
            if not master.startswith("local"):
                wait_for_executor(spark.sparkContext, redact_uri(master) or master, executor_timeout)
            executor.warm_up()
        except BaseException:
            executor.close()
            raise
        return executor

    def warm_up(self) -> None:
        """Start a Python worker per core and import the engine there once (the modules in ``warm_imports``).

        Spark keeps its Python workers between jobs, so the first operation does not pay for starting them and for
        importing pyarrow and the engine from the zip (about 1.5 s per worker on a small machine); a broken
        environment on the executors (no pyarrow, a Python that cannot import the engine) fails here, with the
        worker's error, instead of in the middle of an operation.
        """
        warm = functools.partial(_warm_worker, self.warm_imports)
        self.warmed_workers = tuple(sorted(set(self.map(warm, list(range(self.parallelism))))))

    @property
    def parallelism(self) -> int:
        """Spark's default parallelism (the cores of the registered executors; at least 2 on a cluster)."""
        return int(self._context().defaultParallelism)

    @property
    def spark(self) -> SparkSession:
        """The wrapped session."""
        return self._spark

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[R]:
        """Run ``fn`` on each item as its own Spark task; yield the results as the tasks finish.

        Each item is a one-task Spark job on one partition of ``sc.parallelize(items, len(items))``. Up to twice
        the cluster's parallelism are submitted at once (driver threads) so that every core stays busy while
        finished results are collected; unlike ``toLocalIterator``, which runs at most two partitions at a time.
        When the caller stops iterating or an item fails, the jobs still running are cancelled.

        Raises:
            DeltaLiteError: (the same class and message) when ``fn`` raised one on a worker.
            ExecutorError: any other task or cluster failure, as one line with the worker's exception and message.
        """
        items = list(items)
        if not items:
            return
        sc = self._context()
        self._ship_engine(sc)
        label = _label(fn)
        rdd = sc.parallelize(items, len(items))
        task = functools.partial(_run_item, fn)
        tag = f"deltalite-{uuid.uuid4().hex}"
        slots = min(len(items), max(2, 2 * self.parallelism))
        pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="deltalite-spark")
        pending: set[Future[list[tuple[int, Any]]]] = set()

        def run(index: int) -> list[tuple[int, Any]]:
            # Job tags and descriptions are thread-local in the JVM (PySpark pins one JVM thread per Python thread).
            sc.addJobTag(tag)
            sc.setJobDescription(f"deltalite {label} item {index + 1}/{len(items)}")
            try:
                return sc.runJob(rdd, task, [index])
            finally:
                sc.removeJobTag(tag)

        try:
            for index in range(len(items)):
                pending.add(pool.submit(run, index))
                if len(pending) >= slots:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        yield from self._unpack(future.result, label)
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    yield from self._unpack(future.result, label)
        finally:
            if pending:
                for future in pending:
                    future.cancel()
                with suppress(Exception):  # the context may be gone already; then nothing is left to cancel
                    sc.cancelJobsWithTag(tag)
            pool.shutdown(wait=True, cancel_futures=True)

    def map_reduce(
        self,
        map_fn: Callable[[T], Iterator[tuple[int, bytes]]],
        items: Sequence[T],
        reduce_fn: Callable[[int, Iterator[bytes]], R],
        num_reducers: int,
    ) -> list[R]:
        """A map stage (a Spark task per item), Spark's shuffle, and a reduce stage (a Spark task per reducer).

        ``map_fn(item)`` yields ``(reducer, payload)``; reducer ``r`` sees every payload sent to it, in no particular
        order, through ``reduce_fn(r, payloads)``, which runs on an executor and streams them (the shuffle spills to
        the executors' local disks, so neither side has to hold a stage's data in memory). Results come back in
        reducer order.

        Raises:
            DeltaLiteError: (the same class and message) when either function raised one on a worker.
            ExecutorError: any other task or cluster failure, as one line with the worker's exception and message.
        """
        items = list(items)
        if not items or num_reducers < 1:
            return []
        sc = self._context()
        self._ship_engine(sc)
        label = _label(reduce_fn)
        shuffled = (
            sc.parallelize(items, len(items))
            .mapPartitions(functools.partial(_map_side, map_fn))
            .partitionBy(num_reducers, _identity)
        )
        reduced = shuffled.mapPartitionsWithIndex(functools.partial(_reduce_side, reduce_fn))
        sc.setJobDescription(f"deltalite {label}: {len(items)} map tasks, {num_reducers} reduce tasks")
        try:
            return list(self._unpack(reduced.collect, label))
        finally:
            # None clears the description (the JVM's setLocalProperty removes a null); PySpark annotates only str.
            sc.setJobDescription(None)  # type: ignore[arg-type]

    def close(self) -> None:
        """Stop the session if `start` created it; a wrapped session is left running for its owner."""
        if self._sc is None:
            return
        self._sc = None
        if self._owned:
            self._spark.stop()

    # -- internals -----------------------------------------------------------------------------------------

    def _context(self) -> SparkContext:
        sc = self._sc
        if sc is None or sc._jsc is None:
            raise ExecutorError(f"the Spark executor for {redact_uri(self.master)} is closed or its context stopped")
        return sc

    def _unpack(self, records_of: Callable[[], list[tuple[int, Any]]], label: str) -> Iterator[Any]:
        """The values of the (status, value) records ``records_of()`` returns; errors raised as `map` documents."""
        try:
            records = records_of()
        except Exception as exc:
            if not is_spark_error(exc):
                raise
            raise ExecutorError(describe_failure(exc, label, redact_uri(self.master))) from None
        for status, value in records:
            if status != OK:
                raise error_from_record(status, value)
            yield value

    @staticmethod
    def _ship_engine(sc: SparkContext) -> None:
        with _ship_lock:
            if getattr(sc, "_deltalite_engine_shipped", False):
                return
            from airflow_provider_deltalite.executors.engine_zip import PACKAGE, build_package_zip

            package_init = sys.modules[PACKAGE].__file__ or ""
            if not os.path.isfile(package_init):
                # Imported from an archive: spark-submit received the package with --py-files and ships it already.
                sc._deltalite_engine_shipped = True  # type: ignore[attr-defined]
                return
            path = build_package_zip()
            name = os.path.basename(path)
            submitted = sc.getConf().get("spark.submit.pyFiles", "") or ""
            if name not in {os.path.basename(p) for p in submitted.split(",") if p}:
                sc.addPyFile(path)
            sc._deltalite_engine_shipped = True  # type: ignore[attr-defined]
