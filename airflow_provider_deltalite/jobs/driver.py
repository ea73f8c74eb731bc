"""The spark-submit application: run one maintenance operation with the Spark executor and report its stats.

spark-submit runs this file as the application (the engine zip from `executors.engine_zip` goes with ``--py-files``);
``python -m airflow_provider_deltalite.jobs.driver`` runs the same code on a local Spark. Usage::

    driver.py optimize --table s3://bucket/events --options '{"target_size": 268435456}' \
        --result s3://bucket/results/1.json

``--options`` is the operation's options object as one JSON document (`OptimizeOptions.to_json`, what the operators
send). A person running the job by hand may give the options as flags instead (``--target-size 268435456``, the
words of the ``deltalite`` CLI, `cli.arguments`); ``--options`` and those flags together are an error. ``maintain``
runs the actions of a maintenance plan made elsewhere (`MaintainOptions`: the plan's actions and policy, as
`DeltaMaintenanceOperator` sends them) and has no option flags.

The stats are written as JSON to ``--result`` (a local path or any fsspec URI; the table's storage options apply
when it is on the same store) and printed on stdout as one line ``DELTALITE_RESULT <json>``. Storage options
(credentials) come only from ``--storage-options-file`` (a JSON object) or the environment variable
``DELTALITE_STORAGE_OPTIONS`` (JSON; the file's keys win): never from the command line, which spark-submit, the
Spark UI and process listings all show. A deltalite error, or a bad argument or options document, prints one line
on stderr and exits with 2 before anything is written.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

if __package__ in (None, ""):
    # Run as a file (spark-submit's application), Python puts this directory first on sys.path: drop it, and fall
    # back to the package around this file only when nothing earlier (--py-files, site-packages) provides it.
    _here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == _here:
        del sys.path[0]
    if importlib.util.find_spec("airflow_provider_deltalite") is None:
        sys.path.append(os.path.dirname(os.path.dirname(_here)))

from airflow_provider_deltalite.cli.arguments import (
    add_optimize_arguments,
    add_vacuum_arguments,
    add_zorder_arguments,
    optimize_options,
    vacuum_options,
    zorder_options,
)
from airflow_provider_deltalite.engine import DeltaLiteError
from airflow_provider_deltalite.engine.storage import normalize_table_uri
from airflow_provider_deltalite.maintenance.maintain_options import MaintainOptions
from airflow_provider_deltalite.maintenance.options import (
    MaintenanceOptions,
    OptimizeOptions,
    VacuumOptions,
    ZOrderOptions,
)
from airflow_provider_deltalite.table import DeltaTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_deltalite.executors.spark import SparkExecutor
    from airflow_provider_deltalite.maintenance.executor import Executor

EXIT_ERROR = 2
RESULT_MARKER = "DELTALITE_RESULT"
STORAGE_OPTIONS_ENV = "DELTALITE_STORAGE_OPTIONS"
# The arguments every subcommand has; the rest are the operation's option flags.
COMMON_DESTS = frozenset({"command", "table", "result", "storage_options_file", "options"})


class BadInput(ValueError):
    """An argument or the storage options cannot be used; the message never repeats option values."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line on stderr instead of the usage block
        raise BadInput(message)


@dataclass(frozen=True)
class Command:
    """A subcommand: its options class, its option flags and how they build the options, and the maintenance call
    (returning stats with ``to_dict()``)."""

    help: str
    options_class: type[MaintenanceOptions]
    add_arguments: Callable[[argparse.ArgumentParser], None]
    options_from_flags: Callable[[argparse.Namespace, str | None], MaintenanceOptions]
    run: Callable[[DeltaTable, Any, Executor], Any]


def _run_optimize(table: DeltaTable, options: OptimizeOptions, executor: Executor) -> Any:
    from airflow_provider_deltalite.maintenance.optimize import optimize

    return optimize(table, options, executor=executor)


def _run_zorder(table: DeltaTable, options: ZOrderOptions, executor: Executor) -> Any:
    from airflow_provider_deltalite.maintenance.clustering.zorder import zorder

    return zorder(table, options, executor=executor)


def _run_vacuum(table: DeltaTable, options: VacuumOptions, executor: Executor) -> Any:
    from airflow_provider_deltalite.maintenance.vacuum import vacuum

    return vacuum(table, options, executor=executor)


def _run_maintain(table: DeltaTable, options: MaintainOptions, executor: Executor) -> Any:
    from airflow_provider_deltalite.maintenance.planner import MaintenancePlan, run_plan

    plan = MaintenancePlan.from_dict(options.plan_dict(table.uri))
    return run_plan(table, plan, executor=executor, history_uri=options.history_uri)


def _no_flags(parser: argparse.ArgumentParser) -> None:
    """The maintain job has no option flags: its plan is one document."""


def _maintain_from_flags(args: argparse.Namespace, table_uri: str | None) -> MaintenanceOptions:
    raise BadInput("the maintain job takes its plan as --options (a MaintainOptions JSON object)")


# Later subcommands add an entry here.
COMMANDS: dict[str, Command] = {
    "optimize": Command(
        "compact small files into larger ones", OptimizeOptions, add_optimize_arguments, optimize_options, _run_optimize
    ),
    "zorder": Command(
        "cluster files along a Z-order or Hilbert curve",
        ZOrderOptions,
        add_zorder_arguments,
        zorder_options,
        _run_zorder,
    ),
    "vacuum": Command(
        "delete files the table no longer references", VacuumOptions, add_vacuum_arguments, vacuum_options, _run_vacuum
    ),
    "maintain": Command(
        "run the actions of a maintenance plan", MaintainOptions, _no_flags, _maintain_from_flags, _run_maintain
    ),
}


def _parsers() -> tuple[_Parser, dict[str, _Parser]]:
    parser = _Parser(prog="driver", description="deltalite maintenance job for spark-submit")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    subparsers = {}
    for name, command in COMMANDS.items():
        p = subparsers[name] = sub.add_parser(name, help=command.help, description=command.help)
        p.add_argument("--table", required=True, metavar="URI", help="the Delta table (path or fsspec URI)")
        p.add_argument(
            "--options",
            metavar="JSON",
            help=f"the {command.options_class.__name__} as one JSON object (instead of the option flags)",
        )
        p.add_argument("--result", metavar="URI", help="where to write the stats JSON (path or fsspec URI)")
        p.add_argument(
            "--storage-options-file",
            metavar="PATH",
            help=f"JSON object of fsspec storage options (also read from ${STORAGE_OPTIONS_ENV})",
        )
        command.add_arguments(p)
    return parser, subparsers


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; every subcommand takes ``--table``, ``--options``, ``--result`` and
    ``--storage-options-file``, and its operation's option flags."""
    return _parsers()[0]


def given_flags(command: str, arguments: Sequence[str]) -> list[str]:
    """The option flags (by destination) among a subcommand's ``arguments``, whatever their values.

    Comparing parsed values with the defaults cannot tell ``--mode full`` from no flag, so the arguments are parsed
    again into a namespace pre-filled with a marker: argparse sets a default only where a name is not set yet.
    """
    parser = _parsers()[1][command]
    dests = set(vars(parser.parse_args(["--table", "-"]))) - COMMON_DESTS
    unset = object()
    probe = argparse.Namespace(**dict.fromkeys(dests, unset))
    with contextlib.redirect_stderr(io.StringIO()):  # a deprecated spelling warned in the first parse already
        parser.parse_args(arguments, namespace=probe)
    return sorted(dest for dest in dests if getattr(probe, dest) is not unset)


def job_options(args: argparse.Namespace, arguments: Sequence[str]) -> MaintenanceOptions:
    """The options object of the parsed job: from ``--options`` (JSON) or from the option flags.

    Raises:
        BadInput: ``--options`` and option flags together.
        InvalidArgument: the document or a flag's value is not a valid option (naming the field and the table).
    """
    command = COMMANDS[args.command]
    table_uri = normalize_table_uri(args.table)
    if args.options is None:
        return command.options_from_flags(args, table_uri)
    flags = given_flags(args.command, arguments)
    if flags:
        names = ", ".join("--" + dest.replace("_", "-") for dest in flags)
        raise BadInput(f"--options and option flags ({names}) together: give the options one way")
    return command.options_class.from_json(args.options, table_uri)


def _options_object(text: str, source: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        # The decoder's message names only a position; the text itself may hold credentials.
        raise BadInput(f"{source} is not valid JSON (line {exc.lineno}, column {exc.colno})") from None
    if not isinstance(value, dict):
        raise BadInput(f"{source} must hold a JSON object, not {type(value).__name__}")
    return value


def load_storage_options(path: str | None, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Storage options from ``$DELTALITE_STORAGE_OPTIONS`` and then the file at ``path`` (its keys win).

    Raises:
        BadInput: either source is not a JSON object.
        OSError: the file cannot be read.
    """
    environ = os.environ if environ is None else environ
    options: dict[str, Any] = {}
    if environ.get(STORAGE_OPTIONS_ENV):
        options.update(_options_object(environ[STORAGE_OPTIONS_ENV], f"${STORAGE_OPTIONS_ENV}"))
    if path:
        with open(path, encoding="utf-8") as handle:
            options.update(_options_object(handle.read(), f"storage options file {path}"))
    return options


def write_result(uri: str, text: str, table: DeltaTable) -> None:
    """Write ``text`` to ``uri``; a URI on the table's store reuses the table's filesystem (and credentials)."""
    from airflow_provider_deltalite.engine.storage import write_bytes

    write_bytes(uri, text.encode("utf-8"), filesystem=table.storage.fs)


def _spark_executor(app_name: str) -> tuple[SparkExecutor, SparkSession | None]:
    """The executor for this job, and the session to stop at the end (None when someone else owns it).

    Under spark-submit the session follows the submitted configuration. Run with ``python -m`` (no spark-submit,
    no gateway), the job starts a quiet local Spark on loopback, as `SparkExecutor.start` does. A session already
    running in this process (tests, notebooks) is reused and left running.
    """
    from airflow_provider_deltalite.executors.spark_session import pandas_warning_ignored, require_classic_pyspark

    require_classic_pyspark("the deltalite Spark job")  # pyspark-client alone has no SparkContext
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from airflow_provider_deltalite.executors.spark import SparkExecutor

    if SparkContext._active_spark_context is not None:
        return SparkExecutor(SparkSession.builder.getOrCreate()), None
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # spark-submit sets it for the Python driver it launches
        executor = SparkExecutor.start("local[*]", app_name=app_name)
        return executor, None  # closing the executor stops the session it started
    with pandas_warning_ignored():
        spark = SparkSession.builder.appName(app_name).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return SparkExecutor(spark), spark


def _error(message: str) -> int:
    sys.stderr.write(f"deltalite: error: {' '.join(message.split())}\n")
    sys.stderr.flush()
    return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job; returns 0 on success and 2 on bad input or a deltalite error (one line on stderr)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = build_parser().parse_args(argv)
    except BadInput as exc:
        return _error(str(exc))
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    command = COMMANDS[args.command]
    try:
        # the subcommand is argv's first word: the top-level parser has no options of its own
        options = job_options(args, argv[1:])  # a bad document fails here, before the table is opened
        table = DeltaTable(args.table, storage_options=load_storage_options(args.storage_options_file))
        table.latest_version()  # a missing table fails here, before a JVM starts
        executor, owned_session = _spark_executor(f"deltalite {args.command}")
        try:
            stats = command.run(table, options, executor)
        finally:
            executor.close()
            if owned_session is not None:
                owned_session.stop()
        text = json.dumps(stats.to_dict())
        if args.result:
            write_result(args.result, text, table)
    except (DeltaLiteError, BadInput) as exc:
        return _error(str(exc))
    except OSError as exc:
        return _error(f"{type(exc).__name__}: {exc}")
    sys.stdout.write(f"{RESULT_MARKER} {text}\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
