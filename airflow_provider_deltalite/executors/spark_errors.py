"""How failures of Spark tasks reach the driver: deltalite errors keep their class, everything else becomes one line.

A work item that raises a `DeltaLiteError` sends it back as a record instead of failing its task (the error is
deterministic, so Spark retrying the task cannot help), in the errors' own wire format (`DeltaLiteError.to_payload`),
so it keeps its class, message and attributes on the driver; any other failure reaches the driver as a PySpark or Py4J
exception whose text holds the worker's traceback somewhere inside a JVM stack, and is turned into an `ExecutorError`
naming the worker's exception. PySpark is imported lazily: this module runs on Spark's Python workers too.
"""

from __future__ import annotations

import re
from contextlib import suppress
from typing import Any

from airflow_provider_deltalite.engine.errors import DeltaLiteError, ExecutorError

# What a task sends back: (OK, result) or (RAISED, DeltaLiteError.to_payload()). MARKER rows carry no data: the
# shuffle sends one to every reducer, so that a reducer no payload reaches still runs.
OK = 0
RAISED = 1
MARKER = 2

_MAX_MESSAGE = 1000

# What the Spark workers' Python must have besides pyspark (the engine itself comes in the shipped zip).
WORKER_REQUIREMENTS = ("pyarrow", "fsspec", "numpy")
_NO_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")


def error_record(exc: DeltaLiteError) -> tuple[int, Any]:
    """Runs on the worker: the record that carries ``exc`` to the driver (`error_from_record` rebuilds it there)."""
    return RAISED, exc.to_payload()


def error_from_record(status: int, value: Any) -> DeltaLiteError:
    """On the driver: the error a record that is not ``OK`` carries; an `ExecutorError` when it cannot be rebuilt."""
    try:
        if status == RAISED:
            return DeltaLiteError.from_payload(value)
    except ValueError:
        pass
    described = value if isinstance(value, dict) else {}
    return ExecutorError(f"Spark task failed: {described.get('error')}: {described.get('message')}")


def is_spark_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure reported by Spark (PySpark or Py4J) rather than a bug on the driver."""
    try:
        from pyspark.errors import PySparkException
    except ImportError:  # pragma: no cover - pyspark is there whenever this executor runs
        return False
    if isinstance(exc, PySparkException):
        return True
    try:  # classic pyspark only: pyspark-client (Spark Connect) comes without py4j
        from py4j.protocol import Py4JError
    except ImportError:
        return False
    return isinstance(exc, Py4JError)


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (its class name when it has none), clipped; a gRPC error (a Spark Connect
    server refusing a request) as its status and details, which its multi-line text starts without."""
    for error in (exc, exc.__cause__, exc.__context__):  # pyspark wraps the gRPC error, keeping it as the context
        code, details = getattr(error, "code", None), getattr(error, "details", None)
        if callable(code) and callable(details):
            with suppress(Exception):
                return _clip(f"{code().name}: {details()}")
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


def _missing_worker_module(raised: str) -> str | None:
    """The required module a worker's ``"ModuleNotFoundError: No module named 'x'"`` names, else None."""
    match = _NO_MODULE.fullmatch(raised)
    if match is None or match.group(1).split(".")[0] not in WORKER_REQUIREMENTS:
        return None
    return match.group(1)


def describe_failure(exc: BaseException, label: str, master: str | None) -> str:
    """One line for a failed Spark task or job: the worker's exception when the text holds one, else Spark's.

    A worker whose Python lacks a module every task needs (pyarrow, which Spark's Arrow tasks import before any of
    ours runs, fsspec, numpy) gets a line saying so: it is the cluster's environment, not the item, that is wrong.
    """
    raised = worker_exception(str(exc))
    if raised is not None:
        missing = _missing_worker_module(raised)
        if missing is not None:
            # Spark's error names its own files, never the worker's interpreter: say where that Python is chosen.
            return _clip(
                f"the Python of the Spark workers on {master} cannot import {missing} ({raised}): install "
                f"{', '.join(WORKER_REQUIREMENTS)} for the Python the workers run (PYSPARK_PYTHON or "
                "spark.pyspark.python of the cluster or Spark Connect server)"
            )
        return _clip(f"Spark task {label} failed on {master}: {raised}")
    message = str(exc)
    java = getattr(exc, "java_exception", None)  # Py4JJavaError: str() starts with "An error occurred while calling"
    if java is not None:
        with suppress(Exception):  # the gateway may be gone; then the Python-side text is all there is
            message = str(java.getMessage())
    lines = message.strip().splitlines()
    return _clip(f"Spark job for {label} failed on {master}: {lines[0] if lines else type(exc).__name__}")
