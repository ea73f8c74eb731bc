"""`deltalite maintain-lake PREFIX...`: find the Delta tables under the prefixes, measure them in parallel, plan the
lake within one budget (`plan_lake`), print the plan, then run each chosen table's share (unless ``--dry-run``).

Everything that can be wrong with the input (a budget of zero or below, a bad policy file or key, a history location
that is not a history table) is one error line and exit 2 before any table is read or anything is written.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from typing import TYPE_CHECKING, Any

from airflow_provider_deltalite.cli.arguments import add_history_argument
from airflow_provider_deltalite.cli.common import (
    add_executor_arguments,
    check_spark_options,
    make_executor,
    storage_options,
)
from airflow_provider_deltalite.cli.render import print_json
from airflow_provider_deltalite.engine.errors import DeltaLiteError
from airflow_provider_deltalite.maintenance.wording import count, human_size

if TYPE_CHECKING:
    from airflow_provider_deltalite.maintenance.planner.lake import LakePlan


def positive_whole(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a whole number above 0, got {value}")
    return value


def positive_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number above 0, got {text}")
    return value


def add_maintain_lake_arguments(p: argparse.ArgumentParser) -> None:
    """``PREFIX...``, the budget, ``--policy``, ``--dry-run``, ``--history`` and the executor options."""
    p.add_argument("prefixes", nargs="+", metavar="PREFIX", help="paths or URIs holding Delta tables")
    p.add_argument("--budget-bytes", type=positive_whole, metavar="N", help="bytes all rewrites may read together")
    p.add_argument("--budget-files", type=positive_whole, metavar="N", help="files all VACUUMs may delete together")
    p.add_argument("--budget-seconds", type=positive_number, metavar="S", help="estimated wall time of the whole run")
    p.add_argument(
        "--policy",
        metavar="FILE",
        help='lake policy: MaintenancePolicy keys, table_cooldown_hours and [tables."GLOB"] rules (JSON or TOML)',
    )
    p.add_argument("--dry-run", action="store_true", help="print the lake plan only; run nothing")
    p.add_argument("--max-depth", type=int, default=3, metavar="N", help="directory levels searched per prefix (3)")
    p.add_argument("--parallelism", type=positive_whole, default=4, metavar="N", help="tables measured at once (4)")
    add_history_argument(p)
    add_executor_arguments(p)


def cmd_maintain_lake(args: argparse.Namespace) -> None:
    from airflow_provider_deltalite.maintenance.planner.lake_policy import LakeBudget, LakePolicy
    from airflow_provider_deltalite.maintenance.planner.lake_prefixes import plan_prefixes

    options = storage_options(args.storage_option)
    budget = LakeBudget(args.budget_bytes, args.budget_files, args.budget_seconds)
    policy = LakePolicy.from_file(args.policy) if args.policy else LakePolicy()
    check_spark_options(args)
    plan, tables = plan_prefixes(
        args.prefixes,
        policy,
        budget,
        storage_options=lambda _: options,
        history_uri=args.history_uri,
        executor=args.executor,
        max_depth=args.max_depth,
        max_workers=args.parallelism,
    )
    if not args.json:
        print_lake_plan(plan, len(args.prefixes))
    runs: dict[str, Any] = {}
    failed: list[str] = []
    if not args.dry_run:
        runs, failed = _run(args, plan, tables, options)
    if args.json:
        print_json({"lakePlan": plan.to_dict(), "runs": runs if not args.dry_run else None})
    if failed:
        raise DeltaLiteError(f"{count(len(failed), 'table')} of {len(plan.chosen_tables)} failed: {'; '.join(failed)}")


def _run(
    args: argparse.Namespace, plan: LakePlan, tables: list[Any], options: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    from airflow_provider_deltalite.maintenance.history.lake_rows import deferred_rows
    from airflow_provider_deltalite.maintenance.history.record import write_rows
    from airflow_provider_deltalite.maintenance.planner import run_plan
    from airflow_provider_deltalite.maintenance.planner.lake import chosen_plan
    from airflow_provider_deltalite.table import DeltaTable

    run_id = str(uuid.uuid4())
    by_uri = {t.table_uri: t for t in tables}
    runs: dict[str, Any] = {}
    failed: list[str] = []
    executor = make_executor(args) if args.executor == "spark" else None
    try:
        for entry in plan.chosen_tables:
            table_plan = chosen_plan(plan, by_uri[entry.table_uri])
            if table_plan is None:
                continue
            table = DeltaTable(entry.table_uri, storage_options=options)
            try:
                done = run_plan(
                    table,
                    table_plan,
                    executor=executor,
                    max_concurrent_tasks=args.max_concurrent_tasks,
                    history_uri=args.history_uri,
                    run_id=run_id,
                )
            except DeltaLiteError as exc:
                failed.append(f"{entry.table_uri}: {type(exc).__name__}")
                runs[entry.table_uri] = {"error": type(exc).__name__, "message": str(exc)}
                if not args.json:
                    print(f"failed {entry.table_uri}: {exc}", file=sys.stderr)
                continue
            runs[entry.table_uri] = done.to_dict()
            if not args.json:
                seconds = (done.end_time_ms - done.start_time_ms) / 1000
                ran = ", ".join(a.operation for a in done.actions)
                print(f"ran   {entry.table_uri}: {ran} in {seconds:.1f} s")
    finally:
        if executor is not None:
            executor.close()
    if args.history_uri:
        rows = deferred_rows(plan, by_uri, run_id, int(time.time() * 1000))
        if rows:
            write_rows(args.history_uri, rows, options)
    return runs, failed


def print_lake_plan(plan: LakePlan, prefixes: int) -> None:
    """The ranked actions (chosen or not, why), the tables not chosen with their reason, and the totals."""
    b = plan.budget
    limits = [
        f"rewrite {human_size(b.bytes_rewritten)}" if b.bytes_rewritten else "",
        f"delete {count(b.files_deleted, 'file')}" if b.files_deleted else "",
        f"{b.seconds:g} s" if b.seconds else "",
    ]
    budget = ", ".join(x for x in limits if x) or "none"
    print(
        f"lake  {count(prefixes, 'prefix').replace('prefixs', 'prefixes')}, {count(len(plan.tables), 'table')}, "
        f"budget: {budget}"
    )
    if plan.actions:
        head = f"{'operation':<10} {'rewrite':>10} {'delete':>8} {'gain':>7} {'per GiB':>9} {'est. s':>8}"
        print(f"  {'#':>3}  {head}  table")
    for a in plan.actions:
        per = f"{a.gain_per_gib:,.0f}" if a.gain_per_gib is not None else "-"
        rewrite = human_size(a.estimate.bytes_read) if a.estimate.bytes_read else "-"
        delete = str(a.estimate.files_deleted) if a.estimate.files_deleted else "-"
        mark = "" if a.chosen else "  (not chosen)"
        print(
            f"  {a.rank:>3}  {a.operation:<10} {rewrite:>10} {delete:>8} {a.gain.files:>7g} {per:>9} "
            f"{a.seconds:>8.1f}  {a.table_uri}{mark}"
        )
        if not a.chosen:
            print(f"       {a.reason}")
    others = [t for t in plan.tables if not t.chosen]
    if others:
        print("tables not chosen")
        for t in others:
            print(
                f"  {t.table_uri}: {t.status}: {t.reason}" if t.status != t.reason else f"  {t.table_uri}: {t.reason}"
            )
    total = plan.total
    print(
        f"total {count(len(plan.chosen_tables), 'table')} chosen: rewrite {human_size(total.bytes_read)}, "
        f"delete {count(total.files_deleted, 'file')}, about {plan.seconds:.1f} s"
    )


def add_lake_health_arguments(p: argparse.ArgumentParser) -> None:
    """``PREFIX...``, ``--html``, ``--history``, ``--max-depth`` and ``--parallelism``."""
    p.add_argument("prefixes", nargs="+", metavar="PREFIX", help="paths or URIs holding Delta tables")
    p.add_argument("--html", metavar="FILE", help="also write a self-contained page of the lake to FILE")
    p.add_argument("--max-depth", type=int, default=3, metavar="N", help="directory levels searched per prefix (3)")
    p.add_argument("--parallelism", type=positive_whole, default=4, metavar="N", help="tables measured at once (4)")
    add_history_argument(p)


def cmd_lake_health(args: argparse.Namespace) -> None:
    from airflow_provider_deltalite.maintenance.history import check_history_table
    from airflow_provider_deltalite.maintenance.history.speeds import last_runs
    from airflow_provider_deltalite.maintenance.planner.lake import measure_lake
    from airflow_provider_deltalite.maintenance.planner.lake_prefixes import tables_under
    from airflow_provider_deltalite.report.lake_page import lake_entries

    options = storage_options(args.storage_option)
    if args.history_uri:
        check_history_table(args.history_uri, options)
    uris = tables_under(args.prefixes, lambda _: options, max_depth=args.max_depth)
    tables = measure_lake(uris, storage_options=options, max_workers=args.parallelism)
    entries = lake_entries(tables, last_runs(args.history_uri, options) if args.history_uri else None)
    if args.html:
        from airflow_provider_deltalite.report.lake_page import write_lake_page

        write_lake_page(entries, args.html, f"Health of {', '.join(args.prefixes)}")
    if args.json:
        return print_json(
            [
                {
                    "tableUri": e.table_uri,
                    "health": e.health.to_dict() if e.health is not None else None,
                    "lastMaintenance": e.last_maintenance,
                    "error": e.error,
                }
                for e in entries
            ]
        )
    for e in entries:
        if e.health is None:
            print(f"{e.table_uri}: {e.error}")
            continue
        h = e.health
        print(
            f"{e.table_uri}: {h.files:,} files, {h.small_file_share * 100:.1f}% small, "
            f"{human_size(h.tombstones.reclaimable_bytes)} reclaimable, last maintenance "
            + (
                time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(e.last_maintenance / 1000))
                if e.last_maintenance
                else "never"
            )
        )
    if args.html:
        print(f"page  {args.html}")
