"""The Spark executor: each work item is one Spark task on an executor's Python worker, through the DataFrame API.

Every job is a ``mapInArrow`` query, so the same code runs on a classic SparkSession and on a Spark Connect session
(which has no SparkContext and no RDDs). The engine reaches the executors as a zip of the installed package
(`executors.engine_zip`): ``addPyFile`` once per SparkContext unless the job was submitted with it (``--py-files``),
``addArtifacts(..., pyfile=True)`` once per Spark Connect session. Starting a session is in `executors.spark_session`,
how failures come back in `executors.spark_errors`. PySpark is imported lazily: this module is imported on Spark's
Python workers too, where only the functions the tasks run are needed.
"""

from __future__ import annotations

import functools
import os
import pickle
import shutil
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import suppress
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from airflow_provider_deltalite.engine.checkpoint_tasks import DEFAULT_CHECKPOINT_TASK_BYTES
from airflow_provider_deltalite.engine.errors import ExecutorError
from airflow_provider_deltalite.executors import spark_tasks as tasks
from airflow_provider_deltalite.executors.spark_errors import (
    OK,
    describe_failure,
    error_from_record,
    is_spark_error,
)
from airflow_provider_deltalite.executors.spark_session import (
    is_connect_session,
    pandas_warning_ignored,
    resolve_master,
    session_master,
    shown_master,
    start_session,
    wait_for_executor,
)
from airflow_provider_deltalite.maintenance.executor import WORKER_IMPORTS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

T = TypeVar("T")
R = TypeVar("R")

_ship_lock = threading.Lock()


def _label(fn: Callable[..., Any]) -> str:
    """The function's name for errors (the wrapped function's, for a functools.partial)."""
    fn = getattr(fn, "func", fn) if isinstance(fn, functools.partial) else fn
    return getattr(fn, "__qualname__", type(fn).__name__)


class SparkExecutor:
    """Run work items as Spark tasks, one task per item, on a classic SparkSession or a Spark Connect session.

    Every job is a DataFrame query (``mapInArrow``), so the same code runs on both kinds of session; nothing needs a
    SparkContext except shipping the engine to a classic session (``addPyFile``). ``SparkExecutor(spark)`` wraps a
    session someone else owns (the spark-submit job); `SparkExecutor.start` creates one and `close` stops only a
    session created that way.

    Example:
        >>> executor = SparkExecutor.start("local[2]")  # doctest: +SKIP
        >>> sorted(executor.map(abs, [-1, -2]))  # doctest: +SKIP
        [1, 2]
        >>> executor.close()  # doctest: +SKIP
    """

    name = "spark"

    def __init__(
        self,
        spark: SparkSession,
        *,
        warm_imports: Sequence[str] = WORKER_IMPORTS,
        checkpoint_task_bytes: int | None = DEFAULT_CHECKPOINT_TASK_BYTES,
        _owned: bool = False,
        _shown: str | None = None,
    ) -> None:
        self._spark: SparkSession | None = spark
        # a partition-pruned replay reads a checkpoint of at least this many bytes with this executor's tasks
        # (`engine.checkpoint_tasks`); None: always in the planning process
        self.checkpoint_task_bytes = checkpoint_task_bytes
        self._owned = _owned
        self.remote = is_connect_session(spark)
        self.master = _shown or session_master(spark)
        self.warm_imports = tuple(warm_imports)
        self.warmed_workers: tuple[int, ...] = ()  # process ids of the Python workers `warm_up` started
        self._parallelism: int | None = None

    @classmethod
    def start(
        cls,
        master: str | None = None,
        app_name: str = "deltalite",
        conf: Mapping[str, str] | None = None,
        *,
        connect_timeout: float = 5.0,
        executor_timeout: float = 60.0,
        warm_imports: Sequence[str] = WORKER_IMPORTS,
        checkpoint_task_bytes: int | None = DEFAULT_CHECKPOINT_TASK_BYTES,
    ) -> SparkExecutor:
        """Create a SparkSession for ``master`` and wrap it; `close` stops it.

        ``master`` is a classic master (``local[...]``, ``spark://...``, ``yarn``...) or a Spark Connect address
        (``sc://host:port``); without one, the ``SPARK_REMOTE`` environment variable (pyspark's convention) names a
        Spark Connect server, else ``local[*]``. A ``spark://`` master or an ``sc://`` server must accept a TCP
        connection within ``connect_timeout`` seconds, and on a classic master other than ``local`` at least one
        executor must register within ``executor_timeout`` seconds. For ``local`` masters and masters on a
        loopback address the driver binds to 127.0.0.1 and the Python workers use this interpreter unless
        PYSPARK_PYTHON is set. ``conf`` overrides every default set here (on Spark Connect: runtime settings
        only). The workers import ``warm_imports`` before `start` returns (`warm_up`); the default is what
        maintenance work items use (`maintenance.executor.WORKER_IMPORTS`). An OPTIMIZE or Z-order with ``where``
        reads a checkpoint of at least ``checkpoint_task_bytes`` (default 1 GiB; None: never) with Spark tasks,
        one per part, sidecar or row-group range (`engine.checkpoint_tasks`), instead of in this process.

        Raises:
            ExecutorError: the master or server cannot be reached, no executor registered in time, another
                SparkContext is already running in this process, or Spark failed to start.
        """
        master = resolve_master(master)
        shown = shown_master(master)
        spark = start_session(master, app_name, conf, connect_timeout=connect_timeout)
        executor = cls(
            spark, warm_imports=warm_imports, checkpoint_task_bytes=checkpoint_task_bytes, _owned=True, _shown=shown
        )
        try:
            if not master.startswith(("local", "sc://")):  # a Connect server manages its own executors
                wait_for_executor(spark.sparkContext, shown, executor_timeout)
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
        warm = functools.partial(tasks.warm_worker, self.warm_imports)
        # Two tasks per core: Spark hands out idle workers in turn, and an interrupted task may have left a spare
        # worker that one round of warm-up tasks would not reach.
        self.warmed_workers = tuple(sorted(set(self.map(warm, list(range(2 * self.parallelism))))))

    @property
    def parallelism(self) -> int:
        """Spark's default parallelism (the cores of the registered executors; at least 2 on a cluster).

        Read once, as the number of partitions Spark gives a DataFrame with no parallelism of its own (a SparkContext
        would tell directly, but a Spark Connect session has none).
        """
        if self._parallelism is None:
            spark = self._session()
            table = self._collect(
                lambda: spark.range(0, 1 << 16).selectExpr("spark_partition_id() AS p").agg({"p": "max"}),
                "parallelism",
            )
            self._parallelism = int(table.column(0)[0].as_py()) + 1
        return self._parallelism

    @property
    def spark(self) -> SparkSession:
        """The wrapped session."""
        return self._session()

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[R]:
        """Run ``fn`` on each item as its own Spark task; yield the results as the tasks finish.

        Each item is a one-task query: ``mapInArrow`` over a one-row DataFrame, the task returning the pickled
        result. Up to twice the cluster's parallelism are submitted at once (driver threads) so that every core
        stays busy while finished results are collected. When the caller stops iterating or an item fails, the
        queries still running are interrupted (through a tag of this call).

        Raises:
            DeltaLiteError: (the same class and message) when ``fn`` raised one on a worker.
            ExecutorError: any other task or cluster failure, as one line with the worker's exception and message.
        """
        items = list(items)
        if not items:
            return
        spark = self._session()
        self._ship_engine(spark)
        label = _label(fn)
        job = self._ship_job(spark, (fn, items)) if self.remote else None
        tag = f"deltalite-{uuid.uuid4().hex}"
        slots = min(len(items), max(2, 2 * self.parallelism))
        pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="deltalite-spark")
        pending: set[Future[pa.Table]] = set()

        def run(index: int) -> pa.Table:
            if job is None:  # classic: each query carries its own item only
                task = functools.partial(tasks.run_item, tasks.Job((fn, [items[index]])), 0)
            else:
                task = functools.partial(tasks.run_item, job, index)
            # Tags are per thread (classic: PySpark pins one JVM thread per Python thread; Connect: per client thread).
            _tag(spark, tag, add=True)
            try:
                return self._collect(lambda: spark.range(0, 1, 1, 1).mapInArrow(task, tasks.SCHEMA_DDL), label)
            finally:
                _tag(spark, tag, add=False)

        try:
            for index in range(len(items)):
                pending.add(pool.submit(run, index))
                if len(pending) >= slots:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        yield from _values(future.result())
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    yield from _values(future.result())
        finally:
            for future in pending:
                future.cancel()
            # Interrupt until every started query returned: a thread may submit its query just after an interrupt.
            while pending:
                with suppress(Exception):  # the session may be gone already; then nothing is left to interrupt
                    _interrupt(spark, tag)
                _, pending = wait(pending, timeout=0.2)
            pool.shutdown(wait=True, cancel_futures=True)

    def map_tasks(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """Run ``fn`` on each item as one Spark task of a single query; the results in item order.

        One query for all items instead of one per item (`map`): for many short items of one step, such as the
        slices of a checkpoint (`engine.checkpoint_tasks`), one round trip to the cluster instead of one per item.

        Raises:
            DeltaLiteError: (the same class and message) when ``fn`` raised one on a worker.
            ExecutorError: any other task or cluster failure, as one line with the worker's exception and message.
        """
        items = list(items)
        if not items:
            return []
        spark = self._session()
        self._ship_engine(spark)
        job = self._job(spark, (fn, items))
        n = len(items)
        table = self._collect(
            lambda: spark.range(0, n, 1, n).mapInArrow(functools.partial(tasks.run_items, job), tasks.SCHEMA_DDL),
            _label(fn),
        )
        values = list(_values(table))
        order = table.column("reducer").to_pylist()
        if sorted(order) != list(range(n)):
            raise ExecutorError(f"Spark job for {_label(fn)} on {self.master} returned {len(order)} of {n} results")
        return [value for _, value in sorted(zip(order, values, strict=True), key=lambda p: p[0])]

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

        The stages are DataFrame queries: the map side a ``mapInArrow`` emitting (key, status, payload) rows,
        ``repartition(num_reducers, "reducer")`` on a key chosen per reducer so that Spark's hash partitioning puts
        each reducer in a partition of its own, and the reduce side a ``mapInArrow`` per partition (the partition's
        number is the reducer's, so a reducer streams its payloads from the first row on).

        Raises:
            DeltaLiteError: (the same class and message) when either function raised one on a worker.
            ExecutorError: any other task or cluster failure, as one line with the worker's exception and message.
        """
        items = list(items)
        if not items or num_reducers < 1:
            return []
        spark = self._session()
        self._ship_engine(spark)
        label = _label(reduce_fn)
        keys = self._partition_keys(num_reducers)
        job = self._job(spark, (map_fn, items, reduce_fn))

        def query() -> DataFrame:
            mapped = spark.range(0, len(items), 1, len(items)).mapInArrow(
                functools.partial(tasks.map_side, job, keys), tasks.SCHEMA_DDL
            )
            markers = spark.range(0, num_reducers, 1, min(num_reducers, max(1, self.parallelism))).mapInArrow(
                functools.partial(tasks.markers, keys), tasks.SCHEMA_DDL
            )
            return (
                mapped.unionByName(markers)
                .repartition(num_reducers, "reducer")
                .mapInArrow(functools.partial(tasks.reduce_side, job), tasks.SCHEMA_DDL)
            )

        table = self._collect(query, label)
        results: dict[int, Any] = {}
        for reducer, value in zip(table.column("reducer").to_pylist(), _values(table), strict=True):
            results[reducer] = value
        missing = sorted(set(range(num_reducers)) - results.keys())
        if missing:
            raise ExecutorError(f"Spark job for {label} on {self.master} returned no result for reducers {missing}")
        return [results[r] for r in range(num_reducers)]

    def close(self) -> None:
        """Stop the session if `start` created it; a wrapped session is left running for its owner."""
        spark, self._spark = self._spark, None
        if spark is not None and self._owned:
            with suppress(Exception):  # a Connect server that went away cannot release the session; nothing to do
                spark.stop()

    # -- internals -----------------------------------------------------------------------------------------

    def _session(self) -> SparkSession:
        spark = self._spark
        if spark is None or (not self.remote and spark.sparkContext._jsc is None):
            raise ExecutorError(f"the Spark executor for {self.master} is closed or its context stopped")
        return spark

    def _job(self, spark: SparkSession, value: tuple[Any, ...]) -> tasks.Job:
        """``value`` (a job's functions and items) as the tasks receive it: see `spark_tasks.Job`."""
        return self._ship_job(spark, value) if self.remote else tasks.Job(value)

    @staticmethod
    def _ship_job(spark: SparkSession, value: tuple[Any, ...]) -> tasks.Job:
        """Send ``value`` to a Spark Connect session as a file artifact; the Job names it (`spark_tasks.Job`)."""
        from pyspark import cloudpickle

        name = f"deltalite-job-{uuid.uuid4().hex}.pickle"
        scratch = tempfile.mkdtemp(prefix="deltalite-job-")  # private to this user (mode 0700)
        try:
            path = os.path.join(scratch, name)
            with open(path, "wb") as f:
                f.write(cloudpickle.dumps(value))
            spark.addArtifacts(path, file=True)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return tasks.Job(artifact=name)

    def _partition_keys(self, num_reducers: int) -> list[int]:
        """For each reducer, a key that Spark's hash partitioning into ``num_reducers`` partitions sends to the
        partition of the reducer's own number (asked of Spark, so that the hash is exactly the one it uses)."""
        spark = self._session()
        candidates = 64 * num_reducers  # a reducer with no key among these has odds of about e**-64
        table = self._collect(
            lambda: (
                spark.range(0, candidates)
                .selectExpr("id", f"pmod(hash(id), {num_reducers}) AS p")
                .groupBy("p")
                .agg({"id": "min"})
            ),
            "the shuffle's partition keys",
        )
        found = dict(zip(table.column(0).to_pylist(), table.column(1).to_pylist(), strict=True))
        if len(found) < num_reducers:  # pragma: no cover - see above
            raise ExecutorError(f"no partition key found for some of {num_reducers} reducers on {self.master}")
        return [int(found[r]) for r in range(num_reducers)]

    def _collect(self, query: Callable[[], DataFrame], label: str) -> pa.Table:
        """The Arrow result of ``query()``; a Spark failure raised as the one line `map` documents."""
        try:
            with pandas_warning_ignored():
                return query().toArrow()
        except Exception as exc:
            if not is_spark_error(exc):
                raise
            raise ExecutorError(describe_failure(exc, label, self.master)) from None

    @staticmethod
    def _ship_engine(spark: SparkSession) -> None:
        """Make the engine importable by the session's Python workers, once per session (classic: per context)."""
        with _ship_lock:
            holder: Any = spark if is_connect_session(spark) else spark.sparkContext
            if getattr(holder, "_deltalite_engine_shipped", False):
                return
            from airflow_provider_deltalite.executors.engine_zip import PACKAGE, build_package_zip

            package_init = sys.modules[PACKAGE].__file__ or ""
            if not os.path.isfile(package_init) and holder is not spark:
                # Imported from an archive: spark-submit received the package with --py-files and ships it already.
                holder._deltalite_engine_shipped = True
                return
            path = build_package_zip()
            if holder is spark:
                # Spark Connect: the zip becomes an artifact of this session, on its workers' Python path.
                spark.addArtifacts(path, pyfile=True)
            else:
                submitted = holder.getConf().get("spark.submit.pyFiles", "") or ""
                if os.path.basename(path) not in {os.path.basename(p) for p in submitted.split(",") if p}:
                    holder.addPyFile(path)
            holder._deltalite_engine_shipped = True


def _tag(spark: SparkSession, tag: str, *, add: bool) -> None:
    """Add (or remove) ``tag`` to the queries this thread starts.

    A classic session's own tags do not reach the jobs of an Arrow collect (they run in a thread the JVM starts for
    the transfer); the SparkContext's job tags, inherited by that thread, do. A Connect session has only its own.
    """
    if is_connect_session(spark):
        spark.addTag(tag) if add else spark.removeTag(tag)
    elif add:
        spark.sparkContext.addJobTag(tag)
    else:
        spark.sparkContext.removeJobTag(tag)


def _interrupt(spark: SparkSession, tag: str) -> None:
    """Interrupt the queries tagged ``tag`` by `_tag`, in whichever thread they run."""
    if is_connect_session(spark):
        spark.interruptTag(tag)
    else:
        spark.sparkContext.cancelJobsWithTag(tag)


def _values(table: pa.Table) -> Iterator[Any]:
    """The results a job's (reducer, status, payload) rows carry; an error record is raised as `map` documents."""
    for status, payload in zip(table.column("status").to_pylist(), table.column("payload").to_pylist(), strict=True):
        value = pickle.loads(payload)
        if status != OK:
            raise error_from_record(status, value)
        yield value
