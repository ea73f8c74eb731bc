"""The Spark executor: each work item is one Spark task running on an executor's Python worker (classic PySpark).

The engine reaches the executors as a zip of the installed package (`jobs.engine_zip`), added once per
SparkContext with ``addPyFile`` unless the job was submitted with it (``--py-files``). PySpark is imported lazily:
this module is imported on Spark's Python workers too, where only `_run_item` is needed.
"""

from __future__ import annotations

import functools
import importlib
import ipaddress
import os
import pickle
import socket
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from airflow_provider_deltalite.engine.errors import DeltaLiteError, ExecutorError, redact_uri

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

T = TypeVar("T")
R = TypeVar("R")

# What a task sends back: (_OK, result), (_RAISED, DeltaLiteError) or (_RAISED_TEXT, (module, qualname, message)).
_OK = 0
_RAISED = 1
_RAISED_TEXT = 2

_MAX_MESSAGE = 1000
# How long each warm-up task keeps its worker busy, so that the warm-up tasks land on distinct workers.
WARM_UP_HOLD_S = 0.5
_ship_lock = threading.Lock()
_launch_settings: set[str] = set()  # the Spark settings the JVM of this process was launched with


def _run_item(fn: Callable[[T], R], items: Iterator[T]) -> Iterator[tuple[int, Any]]:
    """Runs on the Spark worker: apply ``fn`` to the partition's one item.

    A `DeltaLiteError` comes back as a value rather than a task failure: it is deterministic (Spark retrying the
    task cannot help) and, sent as an object, it keeps its class, message and attributes on the driver.
    """
    for item in items:
        try:
            result = fn(item)
        except DeltaLiteError as exc:
            try:
                pickle.dumps(exc)
            except Exception:  # an attribute that does not pickle: keep class and message at least
                yield _RAISED_TEXT, (type(exc).__module__, type(exc).__qualname__, str(exc))
            else:
                yield _RAISED, exc
        else:
            yield _OK, result


def _map_side(fn: Callable[[T], Iterator[tuple[int, bytes]]], items: Iterator[T]) -> Iterator[tuple[int, Any]]:
    """Runs on the Spark worker: the map stage of `SparkExecutor.map_reduce`, a DeltaLiteError sent on as a record."""
    for item in items:
        try:
            for reducer, payload in fn(item):
                yield reducer, (_OK, payload)
        except DeltaLiteError as exc:
            yield 0, _error_record(exc)
            return


def _reduce_side(
    fn: Callable[[int, Iterator[bytes]], R], reducer: int, records: Iterator[tuple[int, Any]]
) -> Iterator[tuple[int, Any]]:
    """Runs on the Spark worker: one reducer of `SparkExecutor.map_reduce` over the records shuffled to it."""
    failed: list[tuple[int, Any]] = []

    def payloads() -> Iterator[bytes]:
        for _, (status, value) in records:
            if status != _OK:
                failed.append((status, value))
                return
            yield value

    try:
        result = fn(reducer, payloads())
    except DeltaLiteError as exc:
        yield _error_record(exc)
        return
    yield failed[0] if failed else (_OK, result)


def _error_record(exc: DeltaLiteError) -> tuple[int, Any]:
    try:
        pickle.dumps(exc)
    except Exception:  # an attribute that does not pickle: keep class and message at least
        return _RAISED_TEXT, (type(exc).__module__, type(exc).__qualname__, str(exc))
    return _RAISED, exc


def _identity(reducer: int) -> int:
    return reducer


def _import_engine(_: int) -> int:
    """Runs on a Spark worker: import what the maintenance tasks need, so later tasks find it loaded."""
    import pyarrow.parquet  # noqa: F401

    import airflow_provider_deltalite.engine.rewrite
    import airflow_provider_deltalite.maintenance.clustering.runs  # noqa: F401

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

    def __init__(self, spark: SparkSession, *, _owned: bool = False) -> None:
        try:
            sc = spark.sparkContext
        except Exception:  # Spark Connect sessions have no SparkContext, and we need RDDs
            raise ExecutorError(
                "the Spark executor needs a classic SparkSession; Spark Connect sessions are not supported"
            ) from None
        self._spark = spark
        self._sc: SparkContext | None = sc
        self._owned = _owned
        self.master: str = sc.master
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
    ) -> SparkExecutor:
        """Create a SparkSession for ``master`` and wrap it; `close` stops it.

        A ``spark://`` master must accept a TCP connection within ``connect_timeout`` seconds, and at least one
        executor must register within ``executor_timeout`` seconds. For ``local`` masters and masters on a loopback
        address the driver binds to 127.0.0.1 and the Python workers use this interpreter unless PYSPARK_PYTHON is
        set. ``conf`` overrides every default set here.

        Raises:
            ExecutorError: the master cannot be reached, no executor registered in time, another SparkContext is
                already running in this process, or Spark failed to start.
        """
        shown = redact_uri(master) or master
        if master.startswith("spark://"):
            _check_reachable(master, shown, connect_timeout)
        if os.environ.get("SPARK_REMOTE") or os.environ.get("SPARK_CONNECT_MODE_ENABLED"):
            raise ExecutorError(
                "SPARK_REMOTE is set: the Spark executor needs a classic SparkSession, not Spark Connect"
            )

        from pyspark import SparkConf, SparkContext
        from pyspark.sql import SparkSession

        active = SparkContext._active_spark_context
        if active is not None:
            raise ExecutorError(
                f"a SparkContext (master {redact_uri(active.master)}) is already running in this process; "
                "wrap its session with SparkExecutor(spark) or stop it first"
            )
        loopback = _is_loopback_master(master)
        settings: dict[str, str] = {
            "spark.master": master,
            "spark.app.name": app_name,
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
        }
        env: dict[str, str] = {}
        if loopback:
            settings["spark.driver.host"] = "127.0.0.1"
            settings["spark.driver.bindAddress"] = "127.0.0.1"
            # Read once, when the JVM starts; without it Spark picks the first non-loopback interface.
            env["SPARK_LOCAL_IP"] = "127.0.0.1"
            # SparkContext reads PYSPARK_PYTHON (default: whatever `python3` is on PATH) for the workers it starts.
            env["PYSPARK_PYTHON"] = sys.executable
        settings.update({str(k): str(v) for k, v in (conf or {}).items()})
        try:
            with _env_defaults(env), warnings.catch_warnings():
                # PySpark 4.2 warns about pandas 3 while it starts, although RDD jobs never touch pandas.
                warnings.filterwarnings(
                    "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
                )
                launching = SparkContext._gateway is None
                spark_conf = SparkConf()  # once the JVM runs, this loads its system properties
                if not launching:
                    # The settings that launched the JVM became its system properties and would apply to every
                    # later context too (a previous start's executor memory, say); drop those not set this time.
                    for key in _launch_settings - settings.keys():
                        spark_conf._jconf.remove(key)
                spark_conf.setAll(list(settings.items()))
                # Not SparkSession.builder: it rebuilds the conf from the JVM defaults and would bring them back.
                sc = SparkContext(conf=spark_conf)
                if launching:
                    _launch_settings.update(settings)
                try:
                    spark = SparkSession(sc)
                except BaseException:
                    sc.stop()
                    raise
        except Exception as exc:
            raise ExecutorError(f"could not start Spark with master {shown}: {_first_line(exc)}") from None
        spark.sparkContext.setLogLevel("WARN")
        executor = cls(spark, _owned=True)
        try:
            if not master.startswith("local"):
                _wait_for_executor(spark.sparkContext, shown, executor_timeout)
            executor.warm_up()
        except BaseException:
            executor.close()
            raise
        return executor

    def warm_up(self) -> None:
        """Start a Python worker per core and import the engine there once.

        Spark keeps its Python workers between jobs, so the first operation does not pay for starting them and for
        importing pyarrow and the engine from the zip (about 1.5 s per worker on a small machine); a broken
        environment on the executors (no pyarrow, a Python that cannot import the engine) fails here, with the
        worker's error, instead of in the middle of an operation.
        """
        self.warmed_workers = tuple(sorted(set(self.map(_import_engine, list(range(self.parallelism))))))

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
        label = getattr(fn, "__qualname__", type(fn).__name__)
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
        label = getattr(reduce_fn, "__qualname__", type(reduce_fn).__name__)
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
            sc.setJobDescription(None)

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
            if not _is_spark_error(exc):
                raise
            raise ExecutorError(_describe_failure(exc, label, redact_uri(self.master))) from None
        for status, value in records:
            if status == _OK:
                yield value
            elif status == _RAISED:
                raise value
            else:
                raise _rebuild_error(*value)

    @staticmethod
    def _ship_engine(sc: SparkContext) -> None:
        with _ship_lock:
            if getattr(sc, "_deltalite_engine_shipped", False):
                return
            from airflow_provider_deltalite.jobs.engine_zip import PACKAGE, build_package_zip

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


def _check_reachable(master: str, shown: str, timeout: float) -> None:
    """Fail in seconds when no master of ``spark://h1:p1[,h2:p2]`` accepts a TCP connection.

    Spark itself retries registration three times 20 s apart before giving up; a closed port or an unknown host is
    known after one connect.
    """
    reasons = []
    for hostport in master[len("spark://") :].split(","):
        host, _, port_text = hostport.strip().rpartition(":")
        try:
            port = int(port_text)
        except ValueError:
            raise ExecutorError(f"Spark master {shown} has no port (expected spark://host:port)") from None
        try:
            socket.create_connection((host.strip("[]"), port), timeout=timeout).close()
            return
        except OSError as exc:
            reasons.append(f"{host}:{port}: {exc.strerror or type(exc).__name__}")
    raise ExecutorError(f"cannot reach Spark master {shown} ({'; '.join(reasons)})")


def _wait_for_executor(sc: SparkContext, shown: str, timeout: float) -> None:
    # The driver registers itself as an executor too, so a cluster with one executor reports two entries.
    tracker = sc._jsc.sc().statusTracker()
    deadline = time.monotonic() + timeout
    while len(tracker.getExecutorInfos()) < 2:
        if time.monotonic() > deadline:
            memory = sc.getConf().get("spark.executor.memory", "1g")
            raise ExecutorError(
                f"no Spark executor registered with master {shown} within {timeout:g}s "
                f"(are workers running with a free core and {memory} of free memory?)"
            )
        time.sleep(0.1)


def _is_loopback_master(master: str) -> bool:
    if master.startswith("local"):
        return True
    if not master.startswith("spark://"):
        return False
    hosts = [urlsplit(f"spark://{hp.strip()}").hostname or "" for hp in master[len("spark://") :].split(",")]
    return all(_is_loopback_host(h) for h in hosts)


def _is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@contextmanager
def _env_defaults(values: Mapping[str, str]) -> Iterator[None]:
    # PySpark reads these from os.environ while the gateway and the context start; set them only for that moment.
    added = [key for key in values if key not in os.environ]
    for key in added:
        os.environ[key] = values[key]
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


def _is_spark_error(exc: BaseException) -> bool:
    try:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException
    except ImportError:  # pragma: no cover - pyspark is there whenever this executor runs
        return False
    return isinstance(exc, PySparkException | Py4JError)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return _clip(line)


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."


def worker_exception(text: str) -> str | None:
    """The last exception of the last Python traceback in a Spark error text, as ``"Class: message"`` on one line.

    Returns None when the text holds no Python traceback (an executor was lost, the JVM failed).
    """
    start = text.rfind("Traceback (most recent call last):")
    if start < 0:
        return None
    lines = text[start:].splitlines()[1:]
    for n, line in enumerate(lines):  # the JVM's own stack follows the Python traceback in Py4J messages
        if line.startswith("\tat ") or line.startswith(" SQLSTATE:") or line.startswith("Driver stacktrace"):
            lines = lines[:n]
            break
    last_frame = max((n for n, line in enumerate(lines) if line.startswith((" ", "\t"))), default=-1)
    tail = " ".join(" ".join(lines[last_frame + 1 :]).split())
    return tail or None


def _describe_failure(exc: BaseException, label: str, master: str | None) -> str:
    raised = worker_exception(str(exc))
    if raised is not None:
        return _clip(f"Spark task {label} failed on {master}: {raised}")
    message = str(exc)
    java = getattr(exc, "java_exception", None)  # Py4JJavaError: str() starts with "An error occurred while calling"
    if java is not None:
        with suppress(Exception):  # the gateway may be gone; then the Python-side text is all there is
            message = str(java.getMessage())
    lines = message.strip().splitlines()
    return _clip(f"Spark job for {label} failed on {master}: {lines[0] if lines else type(exc).__name__}")


def _rebuild_error(module: str, qualname: str, message: str) -> Exception:
    try:
        cls: Any = importlib.import_module(module)
        for part in qualname.split("."):
            cls = getattr(cls, part)
        if not (isinstance(cls, type) and issubclass(cls, DeltaLiteError)):
            raise TypeError(qualname)
    except Exception:
        return ExecutorError(f"Spark task failed: {qualname}: {message}")
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    error.problem = message
    error.table_uri = None
    return error
