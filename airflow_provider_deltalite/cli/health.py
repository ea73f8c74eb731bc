"""`deltalite health`: a table's health from its log and file statistics, as a few plain lines, JSON, or a page."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_provider_deltalite.cli.common import (
    add_spark_arguments,
    check_spark_options,
    checkpoint_read_by_tasks,
    make_executor,
    open_table,
)
from airflow_provider_deltalite.cli.render import print_json
from airflow_provider_deltalite.maintenance.option_values import split_columns
from airflow_provider_deltalite.maintenance.wording import count, human_size, percent

if TYPE_CHECKING:
    from airflow_provider_deltalite.maintenance.health.metrics import TableHealth
    from airflow_provider_deltalite.table import DeltaTable

WORST_PARTITIONS = 20


def positive_bytes(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of bytes: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of bytes: {value}")
    return value


def add_health_arguments(p: argparse.ArgumentParser) -> None:
    """``TABLE``, ``--columns``, ``--min-file-size``, ``--html``, ``--history`` and the Spark options (a large
    checkpoint summed by Spark tasks)."""
    p.add_argument("table")
    p.add_argument("--columns", help="measure clustering on these columns (a,b; default: clustering or Z-order ones)")
    p.add_argument(
        "--min-file-size", type=positive_bytes, metavar="BYTES", help="files below it are small (default: OPTIMIZE's)"
    )
    p.add_argument("--html", metavar="FILE", help="also write a self-contained page with the charts to FILE")
    p.add_argument(
        "--history", dest="history_uri", metavar="URI", help="with --html: a panel of the table's operations history"
    )
    add_spark_arguments(p)


def cmd_health(args: argparse.Namespace) -> None:
    columns = None
    if args.columns is not None:
        columns = split_columns(args.columns)
        if columns is None:
            raise ValueError(f"--columns: a column name is empty in {args.columns!r}")
    table = open_table(args)
    history = None
    if args.history_uri:
        if not args.html:
            raise ValueError("--history draws a panel of the page: it needs --html")
        history = table_history(table, args.history_uri)
    check_spark_options(args)
    # no snapshot: health reads the table as a stream, in memory that follows a batch of files, not the table; a
    # checkpoint Spark tasks would read starts the session first (below the threshold none is started)
    executor = make_executor(args) if checkpoint_read_by_tasks(args, table) else None
    try:
        health = table.health(columns=columns, min_file_size=args.min_file_size, executor=executor)
    finally:
        if executor is not None:
            executor.close()
    if args.html:
        # only here: the page loads its plotting library
        from airflow_provider_deltalite.report.health_page import write_health_page

        write_health_page(health, args.html, history)
    if args.json:
        return print_json(health.to_dict())
    for line in health_lines(health):
        print(line)
    if args.html:
        print(f"page        {args.html}")


def table_history(table: DeltaTable, history_uri: str) -> list[dict[str, Any]]:
    """The rows of the operations history at ``history_uri`` about ``table`` (a location that is not a history
    table is one error line)."""
    from airflow_provider_deltalite.engine import arrow_compute as pc
    from airflow_provider_deltalite.engine.errors import redact_uri
    from airflow_provider_deltalite.maintenance.history import read_history
    from airflow_provider_deltalite.maintenance.history.record import history_storage_options

    rows = read_history(history_uri, history_storage_options(table, history_uri))
    return pc.filter(rows, pc.equal(rows["table_uri"], redact_uri(table.uri) or table.uri)).to_pylist()


def health_lines(h: TableHealth) -> list[str]:
    """The readable summary: the table's figures, then the partitions with the most small files."""
    ts, log, runs = h.tombstones, h.log, h.last_runs
    lines = [
        f"table       {h.table_uri} (version {h.version})",
        f"files       {h.files:,} ({human_size(h.bytes)}), {h.rows:,} rows"
        + (f", {count(h.files_without_stats, 'file')} without statistics" if h.files_without_stats else ""),
        f"small       {h.small_files:,} files below {human_size(h.min_file_size)} ({percent(h.small_file_share)} of "
        f"files, {human_size(h.small_bytes)})",
        f"deleted     {h.deleted_rows:,} rows by deletion vectors ({percent(h.deleted_row_share)} of rows) in "
        f"{count(h.files_with_deletion_vectors, 'file')}",
        f"tombstones  {count(ts.files, 'file')} ({human_size(ts.bytes)}): "
        f"{human_size(ts.reclaimable_bytes)} reclaimable now"
        f" ({count(ts.reclaimable_files, 'file')}), {human_size(ts.bytes - ts.reclaimable_bytes)} later"
        + (
            f" (from {_when(ts.next_reclaimable_at)}, all by {_when(ts.all_reclaimable_at)})"
            if ts.next_reclaimable_at is not None and ts.all_reclaimable_at is not None
            else ""
        )
        + f"; retention {ts.retention_hours:g} h",
        "log         "
        + (
            f"{count(log.commits_since_checkpoint, 'commit')} since checkpoint {log.last_checkpoint_version}"
            if log.last_checkpoint_version is not None
            else f"{count(log.commits_since_checkpoint, 'commit')}, no checkpoint"
        )
        + f" (every {log.checkpoint_interval}); {count(log.log_files, 'file')} ({human_size(log.log_bytes)}); "
        f"{count(log.versions_in_log_retention, 'version')} in the {log.log_retention_hours:g} h log retention, "
        f"{log.versions_in_file_retention:,} in the {ts.retention_hours:g} h file retention",
        f"optimize    {_last(runs.optimize_version, runs.hours_since_optimize)}",
        f"vacuum      {_last(runs.vacuum_version, runs.hours_since_vacuum)}",
    ]
    if not h.clustering:
        lines.append("clustering  - (no clustering or Z-order columns; pass --columns)")
    for c in h.clustering:
        if c.point_query_files is None:
            figures = "no min/max statistics"
        else:
            figures = (
                f"{c.point_query_files:.2f} files per point query, overlap depth {c.average_depth or 0:.2f} "
                f"average / {c.max_depth} max"
            )
        without = f", {count(c.files_without_stats, 'file')} without statistics" if c.files_without_stats else ""
        lines.append(f"clustering  {c.column} ({h.clustering_source}): {figures}{without}")
    if h.partition_columns:
        worst = [p for p in h.worst_partitions(WORST_PARTITIONS) if p.small_files]
        if not worst:
            lines.append("partitions  none has small files")
        else:
            lines.append(f"partitions with the most small files ({len(worst)} of {len(h.partitions):,})")
            for p in worst:
                values = ", ".join(f"{k}={'null' if v is None else v}" for k, v in p.partition_values.items())
                lines.append(
                    f"  {values}: {p.small_files:,} of {p.files:,} files small ({human_size(p.small_bytes)}), "
                    f"{p.deleted_rows:,} rows deleted, {human_size(p.tombstone_bytes)} in tombstones"
                )
    return lines


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _last(version: int | None, hours: float | None) -> str:
    if version is None or hours is None:
        return "none in the log"
    return f"version {version}, {hours:.1f} h ago"
