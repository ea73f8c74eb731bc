"""`deltalite optimize`, `zorder`, `vacuum` and `checkpoint`: the maintenance operations from the command line."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from airflow_provider_deltalite.cli.arguments import optimize_options, vacuum_options, zorder_options
from airflow_provider_deltalite.cli.common import (
    check_history,
    check_spark_options,
    checkpoint_read_by_tasks,
    make_executor,
    open_table,
)
from airflow_provider_deltalite.cli.render import (
    human_size,
    print_json,
    print_rewrite_summary,
    print_vacuum_summary,
    progress_bar,
    vacuum_progress,
)
from airflow_provider_deltalite.engine.errors import InvalidArgument
from airflow_provider_deltalite.maintenance.options import OptimizeOptions

if TYPE_CHECKING:
    from airflow_provider_deltalite.maintenance.optimize_stats import OptimizeStats


def add_writer_arguments(p: argparse.ArgumentParser) -> None:
    """How OPTIMIZE and Z-order encode the files they write (`WriterOptions`)."""
    # checked by WriterOptions, the one list of codecs: a bad one is one error line before anything is read
    p.add_argument(
        "--compression", metavar="CODEC", help="Parquet codec of the new files: snappy (default), zstd, gzip, lz4, none"
    )


def _run_rewrite(args: argparse.Namespace, operation: str) -> OptimizeStats:
    """Run OPTIMIZE or Z-order with the chosen executor and, on a terminal, a progress bar."""
    # the maintenance modules load here, not with the CLI: `deltalite describe` and the rest never need them (nor
    # OPTIMIZE Z-order's)
    from airflow_provider_deltalite.engine.data_file_writer import WriterOptions
    from airflow_provider_deltalite.maintenance.optimize import optimize

    table = open_table(args)  # reads nothing yet; its URI names the table in option errors
    options = optimize_options(args, table.uri) if operation == "optimize" else zorder_options(args, table.uri)
    try:
        writer = WriterOptions(compression=args.compression) if args.compression is not None else None
    except ValueError as exc:
        raise InvalidArgument(str(exc), table.uri) from None
    check_history(table, options.history_uri)
    # a missing table or bad protocol fails before a Spark session is started; the operation plans from this snapshot,
    # which holds only the partitions `--where` selects
    snapshot = None
    if not _tasks_read_checkpoint(args, table, options.where):
        snapshot = table.planning_snapshot(None, where=options.where)
    show_progress = not args.json and sys.stderr.isatty()
    executor = make_executor(args)
    progress = progress_bar if show_progress else None
    try:
        if isinstance(options, OptimizeOptions):
            return optimize(
                table, options, executor=executor, progress=progress, writer_options=writer, snapshot=snapshot
            )
        from airflow_provider_deltalite.maintenance.clustering.zorder import zorder

        return zorder(table, options, executor=executor, progress=progress, writer_options=writer, snapshot=snapshot)
    finally:
        executor.close()
        if show_progress:
            sys.stderr.write("\n")


def _tasks_read_checkpoint(args: argparse.Namespace, table: Any, where: str | None) -> bool:
    """Whether Spark tasks read the checkpoint for the plan (`engine.checkpoint_tasks`): then the session starts
    first and the operation plans with it; the listing that tells fails for a missing table before any session."""
    return bool(where) and checkpoint_read_by_tasks(args, table)


def cmd_optimize(args: argparse.Namespace) -> None:
    stats = _run_rewrite(args, "optimize")
    if args.json:
        return print_json(stats.to_dict())
    print_rewrite_summary(stats, "optimize", "rewrote", "rewrite")
    c = stats.clustering_stats
    if c is not None:
        print(
            f"  clustered on {', '.join(c['clusteringColumns'])} ({c['curve']}): {c['numOutputZCubes']} new cubes, "
            f"{c['inputNumZCubes']} small cubes merged, {c['numSealedZCubes']} sealed and "
            f"{c['numPartialZCubesKept']} small cubes left as they are"
        )


def cmd_zorder(args: argparse.Namespace) -> None:
    stats = _run_rewrite(args, "zorder")
    if args.json:
        return print_json(stats.to_dict())
    print_rewrite_summary(stats, "zorder", "clustered", "cluster")
    z: dict[str, Any] = stats.z_order_stats or {}
    print(
        f"  curve {z['curve']} over {', '.join(z['columns'])}: {z['numOutputCubes']} partitions clustered, "
        f"{z['numSkippedCubes']} already clustered and skipped"
    )


def cmd_vacuum(args: argparse.Namespace) -> None:
    from airflow_provider_deltalite.engine.snapshot_stream import stream_snapshot
    from airflow_provider_deltalite.maintenance.vacuum import vacuum
    from airflow_provider_deltalite.maintenance.vacuum.paths import VACUUM_FILE_FIELDS

    table = open_table(args)  # reads nothing yet; its URI names the table in option errors
    options = vacuum_options(args, table.uri)
    check_history(table, options.history_uri)
    # a missing table or bad protocol fails before a Spark session is started. FULL reads the files as a stream,
    # a top-level directory at a time: here only the table's state, without its files; the others read no statistics
    if options.mode.upper() == "FULL" and options.inventory is None:
        snapshot = stream_snapshot(table.storage).snapshot
    else:
        snapshot = table.snapshot(file_fields=VACUUM_FILE_FIELDS)
    show_progress = not args.json and sys.stderr.isatty()
    # The local executor is vacuum's own (its default pool is sized for waiting on storage, not for the CPU).
    check_spark_options(args)
    executor = make_executor(args) if args.executor == "spark" else None
    try:
        stats = vacuum(
            table,
            options,
            executor=executor,
            max_concurrent_tasks=args.max_concurrent_tasks if executor is None else None,
            progress=vacuum_progress if show_progress else None,
            snapshot=snapshot,
        )
    finally:
        if executor is not None:
            executor.close()
        if show_progress:
            sys.stderr.write("\n")
    if args.json:
        return print_json(stats.to_dict())
    print_vacuum_summary(stats)


def cmd_checkpoint(args: argparse.Namespace) -> None:
    table = open_table(args)
    check_history(table, args.history_uri)
    result = table.checkpoint(cleanup_log=args.cleanup_log, history_uri=args.history_uri)
    info, cleanup = result.checkpoint, result.cleanup
    doc = result.to_dict()
    if args.json:
        return print_json(doc)
    print(
        f"checkpoint  version {info.version} ({info.kind}): {info.size} actions, {info.num_of_add_files} files, "
        f"{human_size(info.size_in_bytes)}"
    )
    for path in info.paths:
        print(f"  {path}")
    if not info.last_checkpoint_updated:
        print("  _last_checkpoint left alone: it points at a newer checkpoint")
    if cleanup is not None:
        if not cleanup.enabled:
            print("log cleanup disabled (delta.enableExpiredLogCleanup=false)")
        elif cleanup.checkpoint_version is None:
            print("log cleanup: no checkpoint is old enough; nothing deleted")
        else:
            print(
                f"log cleanup: kept from checkpoint {cleanup.checkpoint_version}, "
                f"deleted {cleanup.num_files_deleted} files"
            )
