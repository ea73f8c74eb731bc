"""Recording what a maintenance operation did: one history row per operation, written by `recorded`.

`recorded` wraps the maintenance operations themselves (`optimize`, `zorder`, `vacuum`, `checkpoint`), the one place
the CLI, the Python API, the Spark job behind the operators and `run_plan` all go through. When the operation's options
name a ``history_uri`` (or `checkpoint` gets one), it measures the table's health before and after, times the run and
appends one row: what was read, written and deleted, the version committed, the executor and the outcome
(``committed``, ``nothing to do``, ``conflict``, ``error``; `plan_lake`'s surfaces add ``deferred by budget``).

Writing the history never fails the maintenance: any failure there (a store that is down, a table with another
schema) is one warning line (logger ``airflow_provider_deltalite.history``), and the operation's result or error is
returned or raised as it would have been.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypeVar
from urllib.parse import urlsplit

from airflow_provider_deltalite.engine.errors import ConcurrentModification, DeltaLiteError, redact_uri
from airflow_provider_deltalite.engine.storage import normalize_table_uri
from airflow_provider_deltalite.maintenance.history.table import HEALTH_FIGURES, append_history
from airflow_provider_deltalite.version import __version__

log = logging.getLogger("airflow_provider_deltalite.history")

P = ParamSpec("P")
R = TypeVar("R")

COMMITTED, NOTHING_TO_DO, DEFERRED_BY_BUDGET, CONFLICT, ERROR = (
    "committed",
    "nothing to do",
    "deferred by budget",
    "conflict",
    "error",
)


@dataclass(frozen=True)
class RunContext:
    """Set by `run_plan` (and the lake's surfaces) around each action: the run the rows belong to and the planned
    operation's name (``purge`` runs through `optimize`)."""

    run_id: str | None
    operation: str | None = None


_context: contextvars.ContextVar[RunContext | None] = contextvars.ContextVar("deltalite_history_run", default=None)


@contextmanager
def run_context(run_id: str | None, operation: str | None = None) -> Iterator[None]:
    """Rows recorded inside carry ``run_id`` and, when given, ``operation`` as their operation."""
    token = _context.set(RunContext(run_id, operation))
    try:
        yield
    finally:
        _context.reset(token)


def warn_history(uri: str, exc: BaseException) -> None:
    """The one warning line of a history write that failed."""
    problem = exc.problem if isinstance(exc, DeltaLiteError) else " ".join(str(exc).split())
    log.warning(
        "deltalite: warning: the operations history %s was not written: %s: %s",
        redact_uri(uri),
        type(exc).__name__,
        problem,
    )


def write_rows(uri: str, rows: Sequence[Mapping[str, Any]], storage_options: Mapping[str, Any] | None) -> bool:
    """Append ``rows``; on any failure one warning line and False (never raises)."""
    try:
        append_history(uri, rows, storage_options)
    except Exception as exc:
        warn_history(uri, exc)
        return False
    return True


def timestamp(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def health_figures(health: Any, suffix: str) -> dict[str, Any]:
    """The history's health columns (``files_before``, ...) from a `TableHealth` or its dict (None: all null)."""
    if health is None:
        return {f"{name}_{suffix}": None for name in HEALTH_FIGURES}
    if not isinstance(health, Mapping):
        health = health.to_dict()
    return {
        f"files_{suffix}": health["files"],
        f"bytes_{suffix}": health["bytes"],
        f"small_files_{suffix}": health["smallFiles"],
        f"deleted_rows_{suffix}": health["deletedRows"],
        f"tombstone_bytes_{suffix}": health["tombstones"]["bytes"],
        f"commits_since_checkpoint_{suffix}": health["log"]["commitsSinceCheckpoint"],
    }


def result_row(operation: str, result: Mapping[str, Any]) -> dict[str, Any]:
    """The counts, version, executor and outcome of an operation's result dict (its stats' ``to_dict``)."""
    if operation == "checkpoint":
        info = result["checkpoint"]
        return {
            "version": info["version"],
            "files_written": len(info.get("paths") or ()),
            "bytes_written": info.get("sizeInBytes"),
            "executor": "local",
            "outcome": COMMITTED,
        }
    if operation == "vacuum":
        versions = result.get("committedVersions") or []
        return {
            "read_version": result.get("latestCommitVersion"),
            "version": versions[-1] if versions else None,
            "files_deleted": result.get("objectsDeleted"),
            "bytes_deleted": result.get("sizeOfDataToDelete") if result.get("objectsDeleted") else 0,
            "executor": result.get("executor"),
            "outcome": COMMITTED if result.get("objectsDeleted") else NOTHING_TO_DO,
        }
    committed = result.get("committedVersion")
    return {
        "read_version": result.get("readVersion"),
        "version": committed,
        "files_read": result.get("numFilesRemoved"),
        "bytes_read": (result.get("filesRemoved") or {}).get("totalSize"),
        "files_written": result.get("numFilesAdded"),
        "bytes_written": (result.get("filesAdded") or {}).get("totalSize"),
        "files_deleted": 0,
        "bytes_deleted": 0,
        "executor": result.get("executor"),
        "outcome": COMMITTED if committed is not None else NOTHING_TO_DO,
    }


def error_row(exc: BaseException) -> dict[str, Any]:
    """The outcome of an operation that raised (its message only when it is one of ours: those hold no secrets)."""
    return {
        "outcome": CONFLICT if isinstance(exc, ConcurrentModification) else ERROR,
        "error_class": type(exc).__name__,
        "error_message": str(exc) if isinstance(exc, DeltaLiteError) else None,
    }


def base_row(table_uri: str, table_id: str | None, operation: str, start_ms: int, end_ms: int) -> dict[str, Any]:
    context = _context.get()
    return {
        "table_uri": redact_uri(table_uri),
        "table_id": table_id,
        "run_id": context.run_id if context else None,
        "operation": (context.operation if context and context.operation else operation),
        "start_time": timestamp(start_ms),
        "end_time": timestamp(end_ms),
        "deltalite_version": __version__,
    }


def _history_uri(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[str | None, bool]:
    """The history URI the call names (options object, keyword field, or ``history_uri=``) and whether it is a
    dry run (not recorded)."""
    for value in (*args[:1], kwargs.get("options")):
        uri = getattr(value, "history_uri", None)
        if uri:
            return str(uri), bool(getattr(value, "dry_run", False))
    uri = kwargs.get("history_uri")
    return (str(uri) if uri else None), bool(kwargs.get("dry_run", False))


def _measure(table: Any) -> tuple[Any, str | None]:
    """The table's health and id, or (None, None) when they cannot be measured (the operation will say why)."""
    from airflow_provider_deltalite.engine.snapshot_stream import stream_snapshot
    from airflow_provider_deltalite.maintenance.health.compute import table_health

    try:
        # health reads the table as a stream (bounded memory); the id is in the state the stream opens with
        return table_health(table), stream_snapshot(table.storage).snapshot.table_id
    except Exception:
        return None, None


def recorded(operation: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Record the decorated operation (``fn(table, options_or_first_arg, ..., **kwargs)``) in the history its
    options name (see the module docstring)."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            table: Any = args[0] if args else kwargs.get("table")
            uri, dry_run = _history_uri(tuple(args[1:]), kwargs)
            if uri is None or dry_run or table is None:
                return fn(*args, **kwargs)
            before, table_id = _measure(table)
            start = int(time.time() * 1000)
            storage_options = history_storage_options(table, uri)
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                row = {**base_row(table.uri, table_id, operation, start, int(time.time() * 1000)), **error_row(exc)}
                write_rows(uri, [{**row, **health_figures(before, "before")}], storage_options)
                raise
            end = int(time.time() * 1000)
            after, _ = _measure(table)
            stats = result.to_dict() if hasattr(result, "to_dict") else {}
            name = operation
            if operation == "optimize" and stats.get("clusteringStats"):
                name = "cluster"
            row = {
                **base_row(table.uri, table_id, name, start, end),
                **result_row(operation, stats),
                **health_figures(before, "before"),
                **health_figures(after, "after"),
            }
            write_rows(uri, [row], storage_options)
            return result

        return run

    return wrap


def history_storage_options(table: Any, history_uri: str) -> Mapping[str, Any] | None:
    """The table's storage options for its history table (see `same_store_options`)."""
    storage = getattr(table, "storage", None)
    if storage is None:
        return None
    options = {**getattr(storage, "_options", {}), **getattr(storage, "_own_options", {})}
    return same_store_options(storage.table_uri, options, history_uri)


def same_store_options(
    table_uri: str, storage_options: Mapping[str, Any] | None, history_uri: str
) -> Mapping[str, Any] | None:
    """The table's storage options (its credentials, endpoint and deltalite's own) when the history lives on the
    same kind of store as the table; none for another store (a local history of an S3 table)."""
    if urlsplit(normalize_table_uri(history_uri)).scheme != urlsplit(normalize_table_uri(table_uri)).scheme:
        return None
    return storage_options
