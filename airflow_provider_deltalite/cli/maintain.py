"""`deltalite maintain`: plan a table's maintenance from its health, print the plan with its reasons, run it (unless
``--dry-run``), then print what changed."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from airflow_provider_deltalite.cli.arguments import add_history_argument
from airflow_provider_deltalite.cli.common import (
    add_executor_arguments,
    check_history,
    check_spark_options,
    checkpoint_read_by_tasks,
    make_executor,
    open_table,
)
from airflow_provider_deltalite.cli.render import print_json
from airflow_provider_deltalite.maintenance.wording import human_size

if TYPE_CHECKING:
    from airflow_provider_deltalite.maintenance.health.metrics import TableHealth
    from airflow_provider_deltalite.maintenance.planner import (
        DeferredAction,
        Estimate,
        MaintenancePlan,
        MaintenanceRun,
        PlannedAction,
    )


def add_maintain_arguments(p: argparse.ArgumentParser) -> None:
    """``TABLE``, ``--dry-run``, ``--policy`` and the executor options."""
    p.add_argument("table")
    p.add_argument("--dry-run", action="store_true", help="print the plan only; run nothing")
    p.add_argument(
        "--policy",
        metavar="FILE",
        help="thresholds, budgets and cooldowns: a JSON file, or TOML when it ends in .toml (default: the anchors')",
    )
    add_history_argument(p)
    add_executor_arguments(p)


def cmd_maintain(args: argparse.Namespace) -> None:
    # the planner (and pyarrow) load here, not with the CLI
    from airflow_provider_deltalite.maintenance.planner import (
        MaintenancePolicy,
        health_and_plan,
        policy_health,
        run_plan,
    )

    table = open_table(args)  # reads nothing yet; its URI names the table in errors
    # a bad policy file or key fails here, before the table is read or anything is written
    policy = MaintenancePolicy.from_file(args.policy, table.uri) if args.policy else MaintenancePolicy()
    check_spark_options(args)
    check_history(table, args.history_uri)
    # a checkpoint Spark tasks read for the plan (`checkpoint_tasks`): the session starts first and serves the run
    tasks = make_executor(args) if checkpoint_read_by_tasks(args, table) else None
    executor = tasks
    try:
        before, plan = health_and_plan(table, policy, tasks=tasks)
        if not args.json:
            print_plan(plan)
        run: MaintenanceRun | None = None
        after: TableHealth | None = None
        if not args.dry_run and not plan.is_empty:
            # the local executors are the operations' own (VACUUM sizes its pool for storage, not the CPU)
            if executor is None and args.executor == "spark":
                executor = make_executor(args)
            run = run_plan(
                table,
                plan,
                executor=executor,
                max_concurrent_tasks=args.max_concurrent_tasks,
                history_uri=args.history_uri,
            )
            after = policy_health(table, policy, tasks=executor)
    finally:
        if executor is not None:
            executor.close()
    if args.json:
        return print_json(
            {
                "plan": plan.to_dict(),
                "run": run.to_dict() if run is not None else None,
                "healthBefore": before.to_dict(),
                "healthAfter": after.to_dict() if after is not None else None,
            }
        )
    if run is not None and after is not None:
        print_run(run)
        print_changes(before, after)


def _estimate_text(e: Estimate) -> str:
    parts = []
    if e.bytes_read:
        parts.append(f"read {human_size(e.bytes_read)}, write {human_size(e.bytes_written)}")
    if e.files_removed or e.files_added:
        parts.append(f"{e.files_removed} files into {e.files_added}")
    if e.files_deleted:
        parts.append(f"delete {e.files_deleted} file" + ("s" if e.files_deleted != 1 else ""))
    return ", ".join(parts)


def _where(partitions: tuple[dict[str, str | None], ...]) -> str:
    if not partitions:
        return "table"
    return f"{len(partitions)} partition" + ("s" if len(partitions) > 1 else "")


def _action_lines(action: PlannedAction | DeferredAction) -> list[str]:
    estimate = _estimate_text(action.estimate)
    head = f"  {action.operation:<11} {_where(action.partitions):<14} {estimate}".rstrip()
    return [head, *(f"      {reason.text}" for reason in action.reasons)]


def print_plan(plan: MaintenancePlan) -> None:
    """The plan: each action with its partitions, estimate and reasons; the deferred ones; the total."""
    if plan.is_empty:
        print(f"plan  {plan.table_uri} at version {plan.version}: nothing to run")
    else:
        count = len(plan.actions)
        print(f"plan  {plan.table_uri} at version {plan.version}: {count} action{'s' if count > 1 else ''}")
        for action in plan.actions:
            for line in _action_lines(action):
                print(line)
        total = _estimate_text(plan.total)
        if total:
            print(f"  total       {total}")
    if plan.deferred:
        print("deferred (cooldowns and budgets)")
        for deferred in plan.deferred:
            for line in _action_lines(deferred):
                print(line)


def _ran_text(operation: str, stats: dict[str, Any]) -> str:
    if operation == "vacuum":
        left = stats.get("numFilesDeferred") or 0
        deleted = stats["objectsDeleted"]
        return f"deleted {deleted} file{'s' if deleted != 1 else ''} ({human_size(stats['sizeOfDataToDelete'])})" + (
            f", {left} left for the next run" if left else ""
        )
    if operation == "checkpoint":
        return f"checkpoint at version {stats['checkpoint']['version']}"
    version = stats.get("committedVersion")
    committed = f", version {version}" if version is not None else ", nothing committed"
    return f"removed {stats['numFilesRemoved']} files, added {stats['numFilesAdded']}{committed}"


def print_run(run: MaintenanceRun) -> None:
    """One line per action that ran."""
    seconds = (run.end_time_ms - run.start_time_ms) / 1000
    count = len(run.actions)
    print(f"ran   {count} action{'s' if count != 1 else ''} in {seconds:.1f} s")
    for action in run.actions:
        print(f"  {action.operation:<11} {_ran_text(action.operation, action.stats)}")


def print_changes(before: TableHealth, after: TableHealth) -> None:
    """The health figures maintenance moves, before -> after."""
    rows = [
        ("files", str(before.files), str(after.files)),
        ("small files", str(before.small_files), str(after.small_files)),
        ("deleted rows", str(before.deleted_rows), str(after.deleted_rows)),
        ("tombstone bytes", human_size(before.tombstones.bytes), human_size(after.tombstones.bytes)),
        (
            "commits since checkpoint",
            str(before.log.commits_since_checkpoint),
            str(after.log.commits_since_checkpoint),
        ),
    ]
    print(f"health  version {before.version} -> {after.version}")
    for name, old, new in rows:
        print(f"  {name:<25} {old} -> {new}")
