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
