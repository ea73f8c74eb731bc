"""The `deltalite` command line: readable summaries on a terminal, one JSON document with --json, errors as one line.

One module per group of subcommands: `read` (describe, files, history, scan), `maintenance` (optimize, zorder,
vacuum, checkpoint), `tail` (changes, watch), `health`, `maintain` (the planner), `maintain_lake` (the lake
planner); `arguments` turns the maintenance options into their options objects (shared with the spark-submit
job), `render` prints, `common` opens tables and executors.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from airflow_provider_deltalite.cli.arguments import (
    add_history_argument,
    add_optimize_arguments,
    add_vacuum_arguments,
    add_zorder_arguments,
)
from airflow_provider_deltalite.cli.common import (
    EXIT_ERROR,
    Parser,
    add_executor_arguments,
    non_negative,
    positive_seconds,
)
from airflow_provider_deltalite.cli.health import add_health_arguments, cmd_health
from airflow_provider_deltalite.cli.maintain import add_maintain_arguments, cmd_maintain
from airflow_provider_deltalite.cli.maintain_lake import (
    add_lake_health_arguments,
    add_maintain_lake_arguments,
    cmd_lake_health,
    cmd_maintain_lake,
)
from airflow_provider_deltalite.cli.maintenance import (
    add_writer_arguments,
    cmd_checkpoint,
    cmd_optimize,
    cmd_vacuum,
    cmd_zorder,
)
from airflow_provider_deltalite.cli.read import cmd_describe, cmd_files, cmd_history, cmd_scan
from airflow_provider_deltalite.cli.render import change_line, describe_document, files_document, size_histogram
from airflow_provider_deltalite.cli.startup import pandas_kept_out, prefer_jemalloc, settle_for_exit
from airflow_provider_deltalite.cli.tail import cmd_changes, cmd_watch
from airflow_provider_deltalite.engine.errors import DeltaLiteError
from airflow_provider_deltalite.version import __version__

__all__ = [
    "build_parser",
    "change_line",
    "console_main",
    "describe_document",
    "files_document",
    "main",
    "size_histogram",
]


def cmd_demo(args: argparse.Namespace) -> None:
    """Run the `airflow_provider_deltalite.demo` (``make demo``): a small-file table, the nightly compaction DAG with
    ``airflow dags test`` on local Spark, and a before/after summary."""
    from airflow_provider_deltalite.demo import run_demo

    code = run_demo(args.workdir, keep=args.keep)
    if code:
        raise SystemExit(code)


def build_parser() -> argparse.ArgumentParser:
    """The `deltalite` argument parser: one subcommand per command, each with its handler as ``func``."""
    # A Parser like the subcommands it is a parent of (argparse copies its arguments; it never parses itself).
    common = Parser(add_help=False)
    common.add_argument("--json", action="store_true", help="print exactly one JSON document on stdout")
    common.add_argument(
        "--storage-option", action="append", metavar="KEY=VALUE", help="fsspec storage option (repeatable)"
    )
    parser = Parser(prog="deltalite", description="Delta Lake table maintenance and inspection.")
    parser.add_argument("--version", action="version", version=f"deltalite {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    p = sub.add_parser("describe", parents=[common], help="version, files, schema, protocol, properties")
    p.add_argument("table")
    p.add_argument("--version", type=non_negative, dest="version")
    p.set_defaults(func=cmd_describe)

    p = sub.add_parser("files", parents=[common], help="the live files of a version")
    p.add_argument("table")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--version", type=non_negative, dest="version")
    group.add_argument("--timestamp", help="ISO-8601 time; the newest version committed at or before it")
    p.add_argument(
        "--where",
        help="only the files a scan with this filter reads (partitions pruned while the log is read, then statistics)",
    )
    p.set_defaults(func=cmd_files)

    p = sub.add_parser("history", parents=[common], help="commitInfo per version, newest first")
    p.add_argument("table")
    p.add_argument("--limit", type=non_negative)
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("scan", parents=[common], help="read rows, with pruning and skipping")
    p.add_argument("table")
    p.add_argument("--version", type=non_negative, dest="version")
    p.add_argument("--columns", help="comma-separated column names")
    p.add_argument("--filter", help="e.g. \"date = '2024-01-01' AND id > 10\"")
    p.add_argument("--output", help="write the rows to this Parquet file")
    p.set_defaults(func=cmd_scan)

    p = sub.add_parser("health", parents=[common], help="small files, deleted rows, clustering, tombstones, the log")
    add_health_arguments(p)
    p.set_defaults(func=cmd_health)

    p = sub.add_parser("checkpoint", parents=[common], help="write a checkpoint of the latest version")
    p.add_argument("table")
    p.add_argument("--cleanup-log", action="store_true", help="then delete log files past delta.logRetentionDuration")
    add_history_argument(p)
    p.set_defaults(func=cmd_checkpoint)

    p = sub.add_parser("optimize", parents=[common], help="compact small files (bin packing, dataChange=false)")
    p.add_argument("table")
    add_optimize_arguments(p)
    add_writer_arguments(p)
    add_executor_arguments(p)
    p.set_defaults(func=cmd_optimize)

    p = sub.add_parser("zorder", parents=[common], help="cluster files along a Z-order or Hilbert curve")
    p.add_argument("table")
    add_zorder_arguments(p)
    add_writer_arguments(p)
    add_executor_arguments(p)
    p.set_defaults(func=cmd_zorder)

    p = sub.add_parser("vacuum", parents=[common], help="delete files the table no longer references")
    p.add_argument("table")
    add_vacuum_arguments(p)
    add_executor_arguments(p)
    p.set_defaults(func=cmd_vacuum)

    p = sub.add_parser(
        "maintain", parents=[common], help="plan maintenance from the table's health, run it, show the gain"
    )
    add_maintain_arguments(p)
    p.set_defaults(func=cmd_maintain)

    p = sub.add_parser(
        "maintain-lake", parents=[common], help="plan every table under the prefixes within one budget, run the best"
    )
    add_maintain_lake_arguments(p)
    p.set_defaults(func=cmd_maintain_lake)

    p = sub.add_parser("lake-health", parents=[common], help="every table under the prefixes, worst first")
    add_lake_health_arguments(p)
    p.set_defaults(func=cmd_lake_health)

    p = sub.add_parser("changes", parents=[common], help="commits after a version, classified (data ones by default)")
    p.add_argument("table")
    p.add_argument("--since", type=non_negative, required=True, help="the last version already seen")
    p.add_argument("--until", type=non_negative, help="the newest version to list")
    p.add_argument("--all", action="store_true", dest="all_kinds", help="every commit, not only data-changing ones")
    p.set_defaults(func=cmd_changes)

    p = sub.add_parser("watch", parents=[common], help="print data-changing versions as they land (Ctrl-C stops)")
    p.add_argument("table")
    p.add_argument("--since", type=non_negative, help="the last version already seen (default: the latest)")
    p.add_argument("--interval", type=positive_seconds, default=5.0, metavar="S", help="seconds between polls (5)")
    p.add_argument("--all", action="store_true", dest="all_kinds", help="every commit, not only data-changing ones")
    p.set_defaults(func=cmd_watch)

    p = sub.add_parser("demo", parents=[common], help=argparse.SUPPRESS)
    p.add_argument("--workdir", help="work directory (kept); default: a temporary one, removed at the end")
    p.add_argument("--keep", action="store_true", help="keep the temporary work directory")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 success, 2 bad input or a table error)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with pandas_kept_out(args.command, getattr(args, "executor", None), getattr(args, "html", None) is not None):
            args.func(args)
    except DeltaLiteError as exc:
        sys.stderr.write(f"deltalite: error: {exc}\n")
        return EXIT_ERROR
    except BrokenPipeError:  # the reader went away (`| head`): not an error; before OSError, its base class
        return 0
    except (ValueError, OSError) as exc:
        sys.stderr.write(f"deltalite: error: {' '.join(str(exc).split())}\n")
        return EXIT_ERROR
    return 0


def console_main(argv: Sequence[str] | None = None) -> int:
    """The `deltalite` command and ``python -m airflow_provider_deltalite``: `main` in a process that exits when it
    returns."""
    # neither in `main`, which also runs inside longer-lived programs (tests, a notebook)
    prefer_jemalloc()
    code = main(argv)
    settle_for_exit()
    return code
