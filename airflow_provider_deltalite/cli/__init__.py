"""The `deltalite` command line: readable summaries on a terminal, one JSON document with --json, errors as one line.

One module per group of subcommands: `read` (describe, files, history, scan), `maintenance` (optimize, zorder,
vacuum, checkpoint), `tail` (changes, watch), `health`, `maintain` (the planner), `maintain_lake` (the lake
planner); `arguments` turns the maintenance options into their options objects (shared with the spark-submit
job), `render` prints, `common` opens tables and executors.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

from airflow_provider_deltalite.cli.common import (
    EXIT_ERROR,
    Parser,
    add_executor_arguments,
    non_negative,
    positive_seconds,
)
from airflow_provider_deltalite.cli.startup import (
    end_process,
    load_pyarrow_for_the_engine,
    pandas_kept_out,
    settle_for_exit,
)
from airflow_provider_deltalite.engine.errors import DeltaLiteError
from airflow_provider_deltalite.version import __version__

__all__ = [
    "build_parser",
    "change_line",
    "console_main",
    "console_run",
    "describe_document",
    "files_document",
    "main",
    "size_histogram",
]

# What the CLI re-exports from its modules, loaded on first use (`__getattr__`): `describe_document` and the others
# need the engine, which `deltalite optimize` should not pay for twice nor `deltalite --help` at all.
_EXPORTS = {
    "change_line": "render",
    "describe_document": "documents",
    "files_document": "documents",
    "size_histogram": "documents",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def cmd_demo(args: argparse.Namespace) -> None:
    """Run the `airflow_provider_deltalite.demo` (``make demo``): a small-file table, the nightly compaction DAG with
    ``airflow dags test`` on local Spark, and a before/after summary."""
    from airflow_provider_deltalite.demo import run_demo

    code = run_demo(args.workdir, keep=args.keep)
    if code:
        raise SystemExit(code)


class _Lazy:
    """``module:function`` under `cli`, imported when first called: a subcommand's handler or the adder of its
    arguments, so a process imports the modules of the one command it runs (`deltalite optimize` none of `health`'s,
    nor the describe documents')."""

    def __init__(self, module: str, function: str) -> None:
        self.module, self.function = module, function

    def __call__(self, arg: Any) -> Any:
        return getattr(importlib.import_module(f"{__name__}.{self.module}"), self.function)(arg)


def _describe_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("table")
    p.add_argument("--version", type=non_negative, dest="version")


def _files_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("table")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--version", type=non_negative, dest="version")
    group.add_argument("--timestamp", help="ISO-8601 time; the newest version committed at or before it")
    p.add_argument(
        "--where",
        help="only the files a scan with this filter reads (partitions pruned while the log is read, then statistics)",
    )


def _history_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("table")
    p.add_argument("--limit", type=non_negative)


def _scan_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("table")
    p.add_argument("--version", type=non_negative, dest="version")
    p.add_argument("--columns", help="comma-separated column names")
    p.add_argument("--filter", help="e.g. \"date = '2024-01-01' AND id > 10\"")
    p.add_argument("--output", help="write the rows to this Parquet file")


def _checkpoint_arguments(p: argparse.ArgumentParser) -> None:
    from airflow_provider_deltalite.cli.arguments import add_history_argument

    p.add_argument("table")
    p.add_argument("--cleanup-log", action="store_true", help="then delete log files past delta.logRetentionDuration")
    add_history_argument(p)


def _optimize_arguments(p: argparse.ArgumentParser) -> None:
    from airflow_provider_deltalite.cli.arguments import add_optimize_arguments
    from airflow_provider_deltalite.cli.maintenance import add_writer_arguments

    p.add_argument("table")
    add_optimize_arguments(p)
    add_writer_arguments(p)
    add_executor_arguments(p)


def _zorder_arguments(p: argparse.ArgumentParser) -> None:
    from airflow_provider_deltalite.cli.arguments import add_zorder_arguments
    from airflow_provider_deltalite.cli.maintenance import add_writer_arguments

    p.add_argument("table")
    add_zorder_arguments(p)
    add_writer_arguments(p)
    add_executor_arguments(p)


def _vacuum_arguments(p: argparse.ArgumentParser) -> None:
    from airflow_provider_deltalite.cli.arguments import add_vacuum_arguments

    p.add_argument("table")
    add_vacuum_arguments(p)
    add_executor_arguments(p)


def _changes_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("table")
    p.add_argument("--since", type=non_negative, required=True, help="the last version already seen")
    p.add_argument("--until", type=non_negative, help="the newest version to list")
    p.add_argument("--all", action="store_true", dest="all_kinds", help="every commit, not only data-changing ones")


def _watch_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("table")
    p.add_argument("--since", type=non_negative, help="the last version already seen (default: the latest)")
    p.add_argument("--interval", type=positive_seconds, default=5.0, metavar="S", help="seconds between polls (5)")
    p.add_argument("--all", action="store_true", dest="all_kinds", help="every commit, not only data-changing ones")


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workdir", help="work directory (kept); default: a temporary one, removed at the end")
    p.add_argument("--keep", action="store_true", help="keep the temporary work directory")


# name: (help, its arguments, its handler); help None: hidden from the command list
_COMMANDS: dict[str, tuple[str | None, Callable[[argparse.ArgumentParser], None], Callable[..., Any]]] = {
    "describe": ("version, files, schema, protocol, properties", _describe_arguments, _Lazy("read", "cmd_describe")),
    "files": ("the live files of a version", _files_arguments, _Lazy("read", "cmd_files")),
    "history": ("commitInfo per version, newest first", _history_arguments, _Lazy("read", "cmd_history")),
    "scan": ("read rows, with pruning and skipping", _scan_arguments, _Lazy("read", "cmd_scan")),
    "health": (
        "small files, deleted rows, clustering, tombstones, the log",
        _Lazy("health", "add_health_arguments"),
        _Lazy("health", "cmd_health"),
    ),
    "checkpoint": (
        "write a checkpoint of the latest version",
        _checkpoint_arguments,
        _Lazy("maintenance", "cmd_checkpoint"),
    ),
    "optimize": (
        "compact small files (bin packing, dataChange=false)",
        _optimize_arguments,
        _Lazy("maintenance", "cmd_optimize"),
    ),
    "zorder": (
        "cluster files along a Z-order or Hilbert curve",
        _zorder_arguments,
        _Lazy("maintenance", "cmd_zorder"),
    ),
    "vacuum": (
        "delete files the table no longer references",
        _vacuum_arguments,
        _Lazy("maintenance", "cmd_vacuum"),
    ),
    "maintain": (
        "plan maintenance from the table's health, run it, show the gain",
        _Lazy("maintain", "add_maintain_arguments"),
        _Lazy("maintain", "cmd_maintain"),
    ),
    "maintain-lake": (
        "plan every table under the prefixes within one budget, run the best",
        _Lazy("maintain_lake", "add_maintain_lake_arguments"),
        _Lazy("maintain_lake", "cmd_maintain_lake"),
    ),
    "lake-health": (
        "every table under the prefixes, worst first",
        _Lazy("maintain_lake", "add_lake_health_arguments"),
        _Lazy("maintain_lake", "cmd_lake_health"),
    ),
    "changes": (
        "commits after a version, classified (data ones by default)",
        _changes_arguments,
        _Lazy("tail", "cmd_changes"),
    ),
    "watch": (
        "print data-changing versions as they land (Ctrl-C stops)",
        _watch_arguments,
        _Lazy("tail", "cmd_watch"),
    ),
    "demo": (None, _demo_arguments, cmd_demo),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `deltalite` argument parser: one subcommand per command, each with its handler as ``func``.

    ``command``: only that subcommand, so a process builds, and imports, what the command it runs needs (argparse
    looks up its translations for every parser it makes: the fifteen subcommands took longer to build than planning a
    compaction); None: every subcommand.
    """
    # A Parser like the subcommands it is a parent of (argparse copies its arguments; it never parses itself).
    common = Parser(add_help=False)
    common.add_argument("--json", action="store_true", help="print exactly one JSON document on stdout")
    common.add_argument(
        "--storage-option", action="append", metavar="KEY=VALUE", help="fsspec storage option (repeatable)"
    )
    parser = Parser(prog="deltalite", description="Delta Lake table maintenance and inspection.")
    parser.add_argument("--version", action="version", version=f"deltalite {__version__}")
    # listed by name below ("command" in the usage and in argparse's own errors), the hidden ones left out
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser, metavar="command")
    for name, (text, arguments, handler) in _COMMANDS.items():
        if command is not None and name != command:
            continue
        # a hidden command is given no help at all: argparse lists a subcommand with any, even SUPPRESS
        shown: dict[str, Any] = {} if text is None else {"help": text}
        p = sub.add_parser(name, parents=[common], **shown)
        arguments(p)
        p.set_defaults(func=handler)
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` runs: its first word that is not an option (the top-level parser's options take no
    value); None when that is no command (argparse then reports it, with every command listed)."""
    word = next((a for a in argv if not a.startswith("-")), None)
    return word if word in _COMMANDS else None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 success, 2 bad input or a table error)."""
    return _main(argv)[0]


def _main(argv: Sequence[str] | None) -> tuple[int, bool]:
    """`main`, and whether the command ran on the engine alone (pandas kept out: no Spark, no plotting library)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = _command_of(argv)
    args = build_parser(command).parse_args(argv)
    engine_only = False
    try:
        with pandas_kept_out(
            args.command, getattr(args, "executor", None), getattr(args, "html", None) is not None
        ) as engine_only:
            args.func(args)
    except DeltaLiteError as exc:
        sys.stderr.write(f"deltalite: error: {exc}\n")
        return EXIT_ERROR, engine_only
    except BrokenPipeError:  # the reader went away (`| head`): not an error; before OSError, its base class
        return 0, engine_only
    except (ValueError, OSError) as exc:
        sys.stderr.write(f"deltalite: error: {' '.join(str(exc).split())}\n")
        return EXIT_ERROR, engine_only
    return 0, engine_only


def console_run(argv: Sequence[str] | None = None) -> tuple[int, bool]:
    """What the `deltalite` process runs before it ends (`console_main`): `main` on pyarrow loaded for the engine
    (`startup.load_pyarrow_for_the_engine`: jemalloc, one OpenBLAS thread), then the process settles for exit. Returns
    the exit code and whether the process may end without the interpreter's teardown (`startup.end_process`): the
    command ran on the engine alone."""
    # neither in `main`, which also runs inside longer-lived programs (tests, a notebook)
    load_pyarrow_for_the_engine()
    code, engine_only = _main(argv)
    settle_for_exit()
    return code, engine_only


def console_main(argv: Sequence[str] | None = None) -> int:
    """The `deltalite` command and ``python -m airflow_provider_deltalite``: `main` in a process that ends when it
    returns (at once, `startup.end_process`, after a command that ran on the engine alone)."""
    code, engine_only = console_run(argv)
    if engine_only:
        end_process(code)
    return code
