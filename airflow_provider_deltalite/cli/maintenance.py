"""`deltalite optimize`, `zorder`, `vacuum` and `checkpoint`: the maintenance operations from the command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from airflow_provider_deltalite.cli.arguments import optimize_options, vacuum_options, zorder_options
from airflow_provider_deltalite.cli.common import make_executor, open_table
from airflow_provider_deltalite.cli.render import (
    human_size,
    print_json,
    print_rewrite_summary,
    print_vacuum_summary,
    progress_bar,
    vacuum_progress,
)
from airflow_provider_deltalite.maintenance.clustering.zorder import zorder
from airflow_provider_deltalite.maintenance.optimize import optimize
from airflow_provider_deltalite.maintenance.optimize_stats import OptimizeStats
from airflow_provider_deltalite.maintenance.options import MaintenanceOptions
from airflow_provider_deltalite.maintenance.vacuum import vacuum


def _run_rewrite(
    args: argparse.Namespace, operation: Callable[..., OptimizeStats], options: MaintenanceOptions
) -> OptimizeStats:
    """Run OPTIMIZE or Z-order with the chosen executor and, on a terminal, a progress bar."""
    table = open_table(args)
    table.snapshot()  # a missing table or bad protocol fails before a Spark session is started
    show_progress = not args.json and sys.stderr.isatty()
    executor = make_executor(args)
    try:
        return operation(table, options, executor=executor, progress=progress_bar if show_progress else None)
    finally:
        executor.close()
        if show_progress:
            sys.stderr.write("\n")


def cmd_optimize(args: argparse.Namespace) -> None:
    stats = _run_rewrite(args, optimize, optimize_options(args, args.table))
    if args.json:
        return print_json(stats.to_dict())
    print_rewrite_summary(stats, "optimize", "rewrote", "rewrite")


def cmd_zorder(args: argparse.Namespace) -> None:
    stats = _run_rewrite(args, zorder, zorder_options(args, args.table))
    if args.json:
        return print_json(stats.to_dict())
    print_rewrite_summary(stats, "zorder", "clustered", "cluster")
    z: dict[str, Any] = stats.z_order_stats or {}
    print(
        f"  curve {z['curve']} over {', '.join(z['columns'])}: {z['numOutputCubes']} partitions clustered, "
        f"{z['numSkippedCubes']} already clustered and skipped"
    )


def cmd_vacuum(args: argparse.Namespace) -> None:
    options = vacuum_options(args, args.table)
    table = open_table(args)
    table.snapshot()  # a missing table or bad protocol fails before a Spark session is started
    show_progress = not args.json and sys.stderr.isatty()
    # The local executor is vacuum's own (its default pool is sized for waiting on storage, not for the CPU).
    executor = make_executor(args) if args.executor == "spark" else None
    if executor is None and args.spark_master:
        raise ValueError("--spark-master needs --executor spark")
    try:
        stats = vacuum(
            table,
            options,
            executor=executor,
            max_concurrent_tasks=args.max_concurrent_tasks if executor is None else None,
            progress=vacuum_progress if show_progress else None,
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
    result = open_table(args).checkpoint(cleanup_log=args.cleanup_log)
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
