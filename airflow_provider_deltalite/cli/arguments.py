"""The command-line options of the maintenance operations, turned into their options objects.

The `deltalite` CLI and the spark-submit job (`jobs/driver.py`) share these, so both accept the same words and build
the same `OptimizeOptions` / `ZOrderOptions` / `VacuumOptions`. The names are the options' own (``--columns``,
``--retention-hours``, ``--mode``); the spellings of 0.1 (``--by``, ``--retain-hours``, ``--lite``,
``--no-retention-check``) still work for one release and print a deprecation warning on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, TypeVar

from airflow_provider_deltalite.engine.errors import InvalidArgument
from airflow_provider_deltalite.maintenance.option_values import split_columns
from airflow_provider_deltalite.maintenance.options import (
    CURVES,
    VACUUM_INVENTORY_FORMATS,
    VACUUM_MODES,
    MaintenanceOptions,
    OptimizeOptions,
    VacuumOptions,
    ZOrderOptions,
)

OptionsT = TypeVar("OptionsT", bound=MaintenanceOptions)


def _options(cls: type[OptionsT], args: argparse.Namespace, table_uri: str | None) -> OptionsT:
    # every option the parser defines carries the field's own name (``dest``), so the namespace maps onto the object
    return cls.build({name: getattr(args, name) for name in cls.field_names() if hasattr(args, name)}, table_uri)


def byte_count(text: str) -> int:
    """A whole number of bytes (range checks, with the table in the message, happen in the options)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of bytes: {text!r}") from None


def ratio(text: str) -> float:
    """A share between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1: {value}")
    return value


def column_list(text: str) -> list[str]:
    """Comma-separated column names (``a,b,c``); backquote a name that holds a comma or a dot."""
    names = split_columns(text)
    if names is None:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of column names: {text!r}")
    return names


def hours(text: str) -> float:
    """A number of hours (the sign is checked by the options, which name the table in their message)."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of hours: {text!r}") from None


class DeprecatedAlias(argparse.Action):
    """An old spelling of an option: stores like the new one and warns once on stderr."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, new: str, const: Any = None, **kwargs: Any):
        self.new = new
        nargs = 0 if const is not None else None
        super().__init__(option_strings, dest, nargs=nargs, const=const, help=argparse.SUPPRESS, **kwargs)

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: str | None = None
    ) -> None:
        sys.stderr.write(f"deltalite: warning: {option} is deprecated and will be removed; use {self.new}\n")
        setattr(namespace, self.dest, self.const if self.const is not None else values)


def add_optimize_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of OPTIMIZE (`OptimizeOptions`)."""
    parser.add_argument("--where", help="predicate on partition columns, e.g. \"date >= '2026-11-01'\"")
    parser.add_argument(
        "--target-size", type=byte_count, metavar="BYTES", help="largest bin (default delta.targetFileSize or 1 GiB)"
    )
    parser.add_argument("--min-file-size", type=byte_count, metavar="BYTES", help="rewrite files below this size")
    parser.add_argument("--batch-size", type=byte_count, metavar="BYTES", help="input bytes per commit (default: one)")
    parser.add_argument(
        "--max-deleted-rows-ratio", type=ratio, metavar="FLOAT", help="rewrite files whose DV removes more (0.05)"
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="clustered table: recluster every file, sealed cubes and other columns' files included (OPTIMIZE FULL)",
    )
    parser.add_argument(
        "--min-cube-size",
        type=byte_count,
        metavar="BYTES",
        help="clustered table: cubes of this size are sealed, never rewritten (default 100 x the target size)",
    )
    _add_max_bytes_to_rewrite(parser, "bins")
    parser.add_argument(
        "--min-row-group-size",
        type=byte_count,
        metavar="BYTES",
        help="copy row groups of at least this many compressed bytes as they are, re-encode smaller ones (8 MiB)",
    )
    parser.add_argument("--dry-run", action="store_true", help="plan only; write nothing")
    add_history_argument(parser)


def add_history_argument(parser: argparse.ArgumentParser) -> None:
    """``--history URI``: the operations history Delta table the run appends its row to (``history_uri``)."""
    parser.add_argument(
        "--history",
        dest="history_uri",
        metavar="URI",
        help="append one row per operation to this operations history Delta table (created when absent)",
    )


def _add_max_bytes_to_rewrite(parser: argparse.ArgumentParser, units: str) -> None:
    parser.add_argument(
        "--max-bytes-to-rewrite",
        type=byte_count,
        metavar="BYTES",
        help=f"read at most this many input bytes; {units} that do not fit wait for a later run (default: no limit)",
    )


def optimize_options(args: argparse.Namespace, table_uri: str | None = None) -> OptimizeOptions:
    """The `OptimizeOptions` that `add_optimize_arguments` parsed."""
    return _options(OptimizeOptions, args, table_uri)


def add_zorder_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of Z-order / Hilbert clustering (`ZOrderOptions`); ``--columns`` is required."""
    parser.add_argument("--columns", type=column_list, metavar="A,B,...", help="clustering columns (required)")
    parser.add_argument("--by", type=column_list, dest="columns", action=DeprecatedAlias, new="--columns")
    parser.add_argument("--curve", default="zorder", help=f"{' or '.join(CURVES)} (default zorder)")
    parser.add_argument("--where", help="predicate on partition columns choosing the partitions")
    parser.add_argument(
        "--target-size", type=byte_count, metavar="BYTES", help="bytes per output file (default delta.targetFileSize)"
    )
    _add_max_bytes_to_rewrite(parser, "partitions")
    parser.add_argument("--dry-run", action="store_true", help="plan only; write nothing")
    add_history_argument(parser)


def zorder_options(args: argparse.Namespace, table_uri: str | None = None) -> ZOrderOptions:
    """The `ZOrderOptions` that `add_zorder_arguments` parsed.

    Raises:
        InvalidArgument: ``--columns`` was not given (argparse cannot require one of two spellings).
    """
    if args.columns is None:
        raise InvalidArgument("the following arguments are required: --columns")
    return _options(ZOrderOptions, args, table_uri)


def add_vacuum_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of VACUUM (`VacuumOptions`)."""
    parser.add_argument(
        "--retention-hours",
        type=hours,
        metavar="H",
        help="keep deleted files this long (default delta.deletedFileRetentionDuration, 168 hours unless set)",
    )
    parser.add_argument(
        "--retain-hours", type=hours, dest="retention_hours", action=DeprecatedAlias, new="--retention-hours"
    )
    parser.add_argument("--dry-run", action="store_true", help="list what would be deleted; delete nothing")
    add_history_argument(parser)
    parser.add_argument(
        "--mode",
        choices=VACUUM_MODES,
        default="full",
        help="full (list storage, the default) or lite (take candidates from the log since the last VACUUM)",
    )
    parser.add_argument("--lite", dest="mode", const="lite", action=DeprecatedAlias, new="--mode lite")
    parser.add_argument(
        "--no-enforce-retention-duration",
        dest="enforce_retention_duration",
        action="store_false",
        help="allow a retention below the table's (files in-flight writers or readers need may be deleted)",
    )
    parser.add_argument(
        "--no-retention-check",
        dest="enforce_retention_duration",
        const=False,
        action=DeprecatedAlias,
        new="--no-enforce-retention-duration",
    )
    parser.add_argument(
        "--no-commit-log-entries",
        dest="commit_log_entries",
        action="store_false",
        help="do not commit VACUUM START / VACUUM END to the log",
    )
    parser.add_argument(
        "--inventory",
        metavar="PATH_OR_URI",
        help="read the table's files from this inventory instead of listing storage (FULL): CSV or Parquet with "
        "path, length, isDir, modificationTime, or an S3 Inventory report's manifest.json",
    )
    parser.add_argument(
        "--max-files-to-delete",
        type=int,
        metavar="N",
        help="delete at most N files, the oldest first; the rest wait for a later run (default: no limit)",
    )
    parser.add_argument(
        "--inventory-format",
        choices=VACUUM_INVENTORY_FORMATS,
        help="the inventory's format (default: from its name: .csv, .csv.gz, .parquet, manifest.json)",
    )


def vacuum_options(args: argparse.Namespace, table_uri: str | None = None) -> VacuumOptions:
    """The `VacuumOptions` that `add_vacuum_arguments` parsed."""
    return _options(VacuumOptions, args, table_uri)
