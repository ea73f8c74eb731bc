"""Command-line arguments of the maintenance operations, shared by the `deltalite` CLI and the spark-submit job.

Both front ends accept the same words for the same operation, and turn them into the same keyword arguments.
"""

from __future__ import annotations

import argparse
from typing import Any


def byte_count(text: str) -> int:
    """A whole number of bytes (range checks, with the table in the message, happen in the operation)."""
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


def add_optimize_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of OPTIMIZE (`maintenance.optimize.optimize`)."""
    parser.add_argument("--where", help="predicate on partition columns, e.g. \"date >= '2026-11-01'\"")
    parser.add_argument(
        "--target-size", type=byte_count, metavar="BYTES", help="largest bin (default delta.targetFileSize or 1 GiB)"
    )
    parser.add_argument("--min-file-size", type=byte_count, metavar="BYTES", help="rewrite files below this size")
    parser.add_argument("--batch-size", type=byte_count, metavar="BYTES", help="input bytes per commit (default: one)")
    parser.add_argument(
        "--max-deleted-rows-ratio", type=ratio, metavar="FLOAT", help="rewrite files whose DV removes more (0.05)"
    )
    parser.add_argument("--dry-run", action="store_true", help="plan only; write nothing")


def optimize_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of `optimize` that `add_optimize_arguments` parsed."""
    return {
        "where": args.where,
        "target_size": args.target_size,
        "min_file_size": args.min_file_size,
        "max_deleted_rows_ratio": args.max_deleted_rows_ratio,
        "batch_size": args.batch_size,
        "dry_run": args.dry_run,
    }


def column_list(text: str) -> list[str]:
    """Comma-separated column names (``a,b,c``); backquote a name that holds a comma or a dot."""
    names, current, quoted = [], "", False
    for char in text:
        if char == "`":
            quoted = not quoted
        if char == "," and not quoted:
            names.append(current.strip())
            current = ""
        else:
            current += char
    names.append(current.strip())
    if any(not n for n in names):
        raise argparse.ArgumentTypeError(f"not a comma-separated list of column names: {text!r}")
    return names


def add_zorder_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of Z-order / Hilbert clustering (`maintenance.zorder.zorder`)."""
    parser.add_argument("--by", type=column_list, required=True, metavar="A,B,...", help="clustering columns")
    parser.add_argument("--curve", default="zorder", help="zorder (default) or hilbert")
    parser.add_argument("--where", help="predicate on partition columns choosing the partitions")
    parser.add_argument(
        "--target-size", type=byte_count, metavar="BYTES", help="bytes per output file (default delta.targetFileSize)"
    )
    parser.add_argument("--dry-run", action="store_true", help="plan only; write nothing")


def zorder_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of `zorder` that `add_zorder_arguments` parsed (the columns included)."""
    return {
        "columns": args.by,
        "curve": args.curve,
        "where": args.where,
        "target_size": args.target_size,
        "dry_run": args.dry_run,
    }


def hours(text: str) -> float:
    """A number of hours (the sign is checked by the operation, which names the table in its message)."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of hours: {text!r}") from None


def add_vacuum_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of VACUUM (`maintenance.vacuum.vacuum`)."""
    parser.add_argument(
        "--retain-hours",
        type=hours,
        metavar="H",
        help="keep deleted files this long (default delta.deletedFileRetentionDuration, 168 hours unless set)",
    )
    parser.add_argument("--dry-run", action="store_true", help="list what would be deleted; delete nothing")
    parser.add_argument("--lite", action="store_true", help="take candidates from the log, not a storage listing")
    parser.add_argument(
        "--no-retention-check",
        action="store_true",
        help="allow a retention below the table's (files in-flight writers or readers need may be deleted)",
    )
    parser.add_argument(
        "--no-commit-log-entries", action="store_true", help="do not commit VACUUM START / VACUUM END to the log"
    )


def vacuum_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of `vacuum` that `add_vacuum_arguments` parsed."""
    return {
        "retention_hours": args.retain_hours,
        "dry_run": args.dry_run,
        "mode": "lite" if args.lite else "full",
        "enforce_retention_duration": not args.no_retention_check,
        "commit_log_entries": not args.no_commit_log_entries,
    }
