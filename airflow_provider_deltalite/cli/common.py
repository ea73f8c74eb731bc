"""What every `deltalite` subcommand shares: the one-line-error parser, opening the table, the executor choice."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from airflow_provider_deltalite.maintenance.executor import Executor
    from airflow_provider_deltalite.table import DeltaTable


EXIT_ERROR = 2


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr (argparse prints the usage block)."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"deltalite: error: {message}\n")
        raise SystemExit(EXIT_ERROR)


def storage_options(pairs: Sequence[str] | None) -> dict[str, str]:
    options: dict[str, str] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--storage-option needs KEY=VALUE, got {pair.split('=')[0]!r}")
        options[key] = value
    return options


def open_table(args: argparse.Namespace) -> DeltaTable:
    """The table named on the command line, with its ``--storage-option`` pairs."""
    from airflow_provider_deltalite.table import DeltaTable

    return DeltaTable(args.table, storage_options=storage_options(args.storage_option))


def check_history(table: DeltaTable, history_uri: str | None) -> None:
    """A ``--history`` that is not a Delta table with the history schema (nor an empty location) is bad input: one
    error before anything runs. Later failures to write it are a warning only."""
    if not history_uri:
        return
    from airflow_provider_deltalite.maintenance.history import check_history_table
    from airflow_provider_deltalite.maintenance.history.record import history_storage_options

    check_history_table(history_uri, history_storage_options(table, history_uri))


def non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {value}")
    return value


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text}")
    return value


def add_executor_arguments(p: argparse.ArgumentParser) -> None:
    """``--executor``, ``--spark-master``, ``--spark-checkpoint-tasks`` and ``--max-concurrent-tasks``."""
    add_spark_arguments(p)
    p.add_argument("--max-concurrent-tasks", type=int, metavar="N", help="threads of the local executor")


def add_spark_arguments(p: argparse.ArgumentParser) -> None:
    """``--executor``, ``--spark-master`` and ``--spark-checkpoint-tasks``."""
    p.add_argument("--executor", choices=("local", "spark"), default="local")
    p.add_argument(
        "--spark-master",
        metavar="URL",
        help="with --executor spark: local[N], spark://host:port, sc://host:port (Spark Connect); "
        "default $SPARK_REMOTE, else local[*]",
    )
    p.add_argument(
        "--spark-checkpoint-tasks",
        type=_byte_count,
        metavar="BYTES",
        help="with --executor spark: a --where plan, health and maintain's plan read a checkpoint of at least "
        "BYTES with Spark tasks (default 1073741824, 1 GiB; 0: always)",
    )


def _byte_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a number of bytes (0 or more): {text}")
    return value


def checkpoint_read_by_tasks(args: argparse.Namespace, table: Any) -> bool:
    """Whether Spark tasks would read the table's checkpoint (`engine.checkpoint_tasks`): ``--executor spark`` and a
    checkpoint of at least ``--spark-checkpoint-tasks`` bytes (default 1 GiB) in the listing, which also fails for a
    missing table before any session starts."""
    if args.executor != "spark":
        return False
    from airflow_provider_deltalite.engine.checkpoint_tasks import (
        DEFAULT_CHECKPOINT_TASK_BYTES,
        listed_checkpoint_bytes,
    )

    threshold = args.spark_checkpoint_tasks
    threshold = DEFAULT_CHECKPOINT_TASK_BYTES if threshold is None else threshold
    size = listed_checkpoint_bytes(table.storage)
    return size > 0 and size >= threshold


def check_spark_options(args: argparse.Namespace) -> None:
    """The Spark options (`add_spark_arguments`) given without ``--executor spark``: one line naming the first."""
    if args.executor == "spark":
        return
    if args.spark_master:
        raise ValueError("--spark-master needs --executor spark")
    if getattr(args, "spark_checkpoint_tasks", None) is not None:
        raise ValueError("--spark-checkpoint-tasks needs --executor spark")


def make_executor(args: argparse.Namespace) -> Executor:
    """The executor ``--executor`` chose (the caller closes it)."""
    if args.executor == "spark":
        from airflow_provider_deltalite.executors.spark import SparkExecutor

        threshold = getattr(args, "spark_checkpoint_tasks", None)
        if threshold is None:
            return SparkExecutor.start(master=args.spark_master or None, app_name=f"deltalite {args.command}")
        return SparkExecutor.start(
            master=args.spark_master or None, app_name=f"deltalite {args.command}", checkpoint_task_bytes=threshold
        )
    check_spark_options(args)
    from airflow_provider_deltalite.executors import LocalExecutor

    return LocalExecutor(args.max_concurrent_tasks)
