"""The `deltalite` command line: readable summaries on a terminal, one JSON document with --json, errors as one line."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from airflow_provider_deltalite.engine import DeltaLiteError, Snapshot
from airflow_provider_deltalite.engine.snapshot import json_default
from airflow_provider_deltalite.operation_arguments import (
    add_optimize_arguments,
    add_vacuum_arguments,
    add_zorder_arguments,
    optimize_options,
    vacuum_options,
    zorder_options,
)
from airflow_provider_deltalite.table import DeltaTable
from airflow_provider_deltalite.version import __version__

EXIT_ERROR = 2
_SIZE_BINS = ((1 << 20, "<1MB"), (8 << 20, "<8MB"), (64 << 20, "<64MB"), (128 << 20, "<128MB"), (1 << 30, "<1GB"))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse prints usage; the project rule is one line on stderr
        sys.stderr.write(f"deltalite: error: {message}\n")
        raise SystemExit(EXIT_ERROR)


def _storage_options(pairs: Sequence[str] | None) -> dict[str, str]:
    options: dict[str, str] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--storage-option needs KEY=VALUE, got {pair.split('=')[0]!r}")
        options[key] = value
    return options


def _open(args: argparse.Namespace) -> DeltaTable:
    return DeltaTable(args.table, storage_options=_storage_options(args.storage_option))


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {value}")
    return value


def size_histogram(sizes: Sequence[int]) -> dict[str, int]:
    """How many files fall under 1 MB, 8 MB, 64 MB, 128 MB, 1 GB, and above."""
    counts = {label: 0 for _, label in _SIZE_BINS}
    counts[">=1GB"] = 0
    for size in sizes:
        for limit, label in _SIZE_BINS:
            if size < limit:
                counts[label] += 1
                break
        else:
            counts[">=1GB"] += 1
    return counts


def describe_document(snap: Snapshot) -> dict[str, Any]:
    """What `deltalite describe --json` prints."""
    sizes = snap.raw_files.column("size").to_pylist()
    return {
        "table": snap.table_uri,
        "version": snap.version,
        "timestamp": snap.timestamp,
        "id": snap.table_id,
        "numFiles": snap.num_files,
        "sizeInBytes": snap.size_in_bytes,
        "partitionColumns": snap.partition_columns,
        "schema": snap.schema,
        "protocol": {**snap.protocol.to_dict(), "features": list(snap.protocol.features)},
        "properties": snap.properties.explicit,
        "fileSizeHistogram": size_histogram(sizes),
    }


def files_document(snap: Snapshot) -> dict[str, Any]:
    """What `deltalite files --json` prints: paths exactly as written in the log."""
    files = snap.files
    partition = snap.partition_values
    raw = files.column("partitionValues").combine_chunks()
    raw_columns = {
        logical: raw.field(physical).to_pylist()
        for logical, physical in zip(snap.partition_columns, snap.partition_physical_names, strict=True)
    }
    out = []
    paths = files.column("path").to_pylist()
    sizes = files.column("size").to_pylist()
    records = files.column("numRecords").to_pylist()
    mtimes = files.column("modificationTime").to_pylist()
    dvs = files.column("deletionVector").is_valid().to_pylist()
    for i, path in enumerate(paths):
        out.append(
            {
                "path": path,
                "size": sizes[i],
                "partitionValues": {c: raw_columns[c][i] for c in partition.column_names},
                "numRecords": records[i],
                "modificationTime": mtimes[i],
                "deletionVector": bool(dvs[i]),
            }
        )
    return {"version": snap.version, "files": out}


def _print_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, default=json_default, ensure_ascii=False) + "\n")


def _human_size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def cmd_describe(args: argparse.Namespace) -> None:
    snap = _open(args).snapshot(version=args.version)
    doc = describe_document(snap)
    if args.json:
        return _print_json(doc)
    proto = doc["protocol"]
    print(f"table       {doc['table']}")
    print(f"version     {doc['version']}")
    print(f"files       {doc['numFiles']} ({_human_size(doc['sizeInBytes'])})")
    print(f"partitions  {', '.join(doc['partitionColumns']) or '-'}")
    print(
        f"protocol    reader {proto['minReaderVersion']}, writer {proto['minWriterVersion']}; "
        f"features: {', '.join(proto['features']) or '-'}"
    )
    print("schema")
    for field in doc["schema"]["fields"]:
        kind = field["type"] if isinstance(field["type"], str) else field["type"].get("type")
        print(f"  {field['name']}: {kind}{'' if field.get('nullable', True) else ' not null'}")
    print("properties")
    for key, value in sorted(doc["properties"].items()):
        print(f"  {key} = {value}")
    print("file sizes")
    for label, count in doc["fileSizeHistogram"].items():
        print(f"  {label:>7}  {count}")


def cmd_files(args: argparse.Namespace) -> None:
    snap = _open(args).snapshot(version=args.version, timestamp=args.timestamp)
    doc = files_document(snap)
    if args.json:
        return _print_json(doc)
    print(f"version {doc['version']}: {len(doc['files'])} files")
    for f in doc["files"]:
        dv = " dv" if f["deletionVector"] else ""
        parts = ",".join(f"{k}={v}" for k, v in f["partitionValues"].items())
        print(
            f"  {f['size']:>12}  {f['numRecords'] if f['numRecords'] is not None else '-':>10}  {f['path']}{dv}"
            f"{'  [' + parts + ']' if parts else ''}"
        )


def cmd_history(args: argparse.Namespace) -> None:
    entries = _open(args).history(limit=args.limit)
    if args.json:
        return _print_json(entries)
    for e in entries:
        print(f"{e['version']:>8}  {e.get('timestamp', '')}  {e.get('operation', '-')}")


def cmd_scan(args: argparse.Namespace) -> None:
    from airflow_provider_deltalite.engine.scan import scan

    snap = _open(args).snapshot(version=args.version)
    columns = [c.strip() for c in args.columns.split(",") if c.strip()] if args.columns else None
    rows, metrics = scan(snap, columns=columns, filter=args.filter)
    if args.output:
        import pyarrow.parquet as pq

        pq.write_table(rows, args.output)
    doc = {
        "version": snap.version,
        "rows": metrics.rows,
        "filesTotal": metrics.files_total,
        "filesSkippedByPartition": metrics.files_skipped_by_partition,
        "filesSkippedByStats": metrics.files_skipped_by_stats,
        "filesRead": metrics.files_read,
        "output": args.output,
    }
    if args.json:
        return _print_json(doc)
    print(
        f"version {doc['version']}: {doc['rows']} rows from {doc['filesRead']} of {doc['filesTotal']} files "
        f"({doc['filesSkippedByPartition']} skipped by partition, {doc['filesSkippedByStats']} by stats)"
    )
    if not args.output:
        print(rows.slice(0, 20).to_pandas().to_string() if rows.num_rows and _has_pandas() else rows.slice(0, 20))


def cmd_checkpoint(args: argparse.Namespace) -> None:
    from airflow_provider_deltalite.engine.checkpoint_writer import write_checkpoint
    from airflow_provider_deltalite.engine.features import ensure_writable
    from airflow_provider_deltalite.engine.log_cleanup import (
        cleanup_expired_logs,
        expired_log_cleanup_enabled,
        log_retention_ms,
    )

    snap = _open(args).snapshot()
    ensure_writable(snap.protocol, snap.table_uri)
    if args.cleanup_log:
        # check the cleanup settings before the checkpoint is written, so bad input writes nothing
        expired_log_cleanup_enabled(snap.properties)
        log_retention_ms(snap.properties)
    info = write_checkpoint(snap)
    cleanup = cleanup_expired_logs(snap) if args.cleanup_log else None
    doc = {"checkpoint": info.to_dict(), "cleanup": cleanup.to_dict() if cleanup else None}
    if args.json:
        return _print_json(doc)
    print(
        f"checkpoint  version {info.version} ({info.kind}): {info.size} actions, {info.num_of_add_files} files, "
        f"{_human_size(info.size_in_bytes)}"
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


def _progress_bar(event: Any) -> None:
    width = 30
    filled = width * event.bins_done // max(event.bins_total, 1)
    sys.stderr.write(
        f"\r[{'#' * filled}{'.' * (width - filled)}] {event.bins_done}/{event.bins_total} bins, "
        f"{_human_size(event.bytes_done)} of {_human_size(event.bytes_total)} rewritten"
    )
    sys.stderr.flush()


def _executor(args: argparse.Namespace) -> Any:
    if args.executor == "spark":
        from airflow_provider_deltalite.executors.spark import SparkExecutor

        return SparkExecutor.start(master=args.spark_master or "local[*]", app_name=f"deltalite {args.command}")
    if args.spark_master:
        raise ValueError("--spark-master needs --executor spark")
    from airflow_provider_deltalite.executors import LocalExecutor

    return LocalExecutor(args.max_concurrent_tasks)


def _run_rewrite(args: argparse.Namespace, operation: Callable[..., Any], options: dict[str, Any]) -> Any:
    """Run OPTIMIZE or Z-order with the chosen executor and, on a terminal, a progress bar."""
    table = _open(args)
    table.snapshot()  # a missing table or bad protocol fails before a Spark session is started
    show_progress = not args.json and sys.stderr.isatty()
    executor = _executor(args)
    try:
        return operation(table, **options, executor=executor, progress=_progress_bar if show_progress else None)
    finally:
        executor.close()
        if show_progress:
            sys.stderr.write("\n")


def _print_rewrite_summary(stats: Any, command: str, did: str, would: str) -> None:
    what = f"would {would}" if stats.dry_run else did
    print(
        f"{command:<9} {what} {stats.num_files_removed} files ({_human_size(stats.files_removed.total_size)}) "
        f"in {stats.num_bins} bins across {stats.partitions_optimized} partitions"
    )
    if not stats.dry_run:
        print(f"  added {stats.num_files_added} files ({_human_size(stats.files_added.total_size)})")
    print(
        f"  considered {stats.total_considered_files} files, skipped {stats.total_files_skipped}; "
        f"deletion vectors purged: {stats.num_deletion_vectors_removed}"
    )
    if stats.committed_version is None:
        print("  nothing committed" + (" (dry run)" if stats.dry_run else ""))
    else:
        versions = ", ".join(str(v) for v in stats.committed_versions)
        print(f"  committed version {versions} (read version {stats.read_version}), executor {stats.executor}")


def cmd_optimize(args: argparse.Namespace) -> None:
    from airflow_provider_deltalite.maintenance.optimize import optimize

    stats = _run_rewrite(args, optimize, optimize_options(args))
    if args.json:
        return _print_json(stats.to_dict())
    _print_rewrite_summary(stats, "optimize", "rewrote", "rewrite")


def cmd_zorder(args: argparse.Namespace) -> None:
    from airflow_provider_deltalite.maintenance.zorder import zorder

    stats = _run_rewrite(args, zorder, zorder_options(args))
    if args.json:
        return _print_json(stats.to_dict())
    _print_rewrite_summary(stats, "zorder", "clustered", "cluster")
    z = stats.z_order_stats
    print(
        f"  curve {z['curve']} over {', '.join(z['columns'])}: {z['numOutputCubes']} partitions clustered, "
        f"{z['numSkippedCubes']} already clustered and skipped"
    )


def _vacuum_progress(event: Any) -> None:
    if event.phase == "listing":
        text = f"listing: {event.done} directories, {event.files} files"
    else:
        text = f"deleting: {event.done}/{event.total} files"
    sys.stderr.write(f"\r{text}\x1b[K")
    sys.stderr.flush()


def cmd_vacuum(args: argparse.Namespace) -> None:
    from airflow_provider_deltalite.maintenance.vacuum import vacuum

    table = _open(args)
    table.snapshot()  # a missing table or bad protocol fails before a Spark session is started
    show_progress = not args.json and sys.stderr.isatty()
    # The local executor is vacuum's own (its default pool is sized for waiting on storage, not for the CPU).
    executor = _executor(args) if args.executor == "spark" else None
    if executor is None and args.spark_master:
        raise ValueError("--spark-master needs --executor spark")
    try:
        stats = vacuum(
            table,
            **vacuum_options(args),
            executor=executor,
            max_concurrent_tasks=args.max_concurrent_tasks if executor is None else None,
            progress=_vacuum_progress if show_progress else None,
        )
    finally:
        if executor is not None:
            executor.close()
        if show_progress:
            sys.stderr.write("\n")
    if args.json:
        return _print_json(stats.to_dict())
    retention = stats.specified_retention_millis
    if retention is None:
        retention = stats.default_retention_millis
    horizon = datetime.fromtimestamp(stats.min_retained_timestamp / 1000, UTC).isoformat(timespec="seconds")
    what = "would delete" if stats.is_dry_run else "deleted"
    count = stats.num_files_to_delete if stats.is_dry_run else stats.objects_deleted
    print(
        f"vacuum    {stats.mode}: {what} {count} files and directories ({_human_size(stats.size_of_data_to_delete)}) "
        f"of version {stats.latest_commit_version}"
    )
    print(
        f"  retention {retention / 3_600_000:g} hours (table: {stats.default_retention_millis / 3_600_000:g} hours); "
        f"unreferenced files modified before {horizon} are deleted"
    )
    if stats.mode == "FULL":
        print(
            f"  listed {stats.files_and_dirs_present_before_delete} files and directories in "
            f"{stats.dirs_present_before_delete} directories ({stats.time_taken_to_identify_eligible_files} ms)"
        )
    elif stats.eligible_start_commit_version is None:
        print("  no commits expired since the last vacuum")
    else:
        print(f"  read commits {stats.eligible_start_commit_version}..{stats.eligible_end_commit_version}")
    if stats.is_dry_run:
        for f in stats.files_to_delete or []:
            print(f"  {f['size']:>12}  {f['path']}")
        for d in stats.dirs_to_delete or []:
            print(f"  {'dir':>12}  {d}/")
        print("  nothing deleted or committed (dry run)")
    elif stats.committed_versions:
        start, end = stats.committed_versions
        print(f"  committed VACUUM START (version {start}) and VACUUM END (version {end}), executor {stats.executor}")
    else:
        print(f"  no log entries committed, executor {stats.executor}")


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text}")
    return value


def change_line(change: dict[str, Any]) -> str:
    """One readable line for a commit of `deltalite changes` / `watch` (a `CommitChange.to_dict()`)."""
    ts = change["timestamp"]
    when = datetime.fromtimestamp(ts / 1000, UTC).isoformat(timespec="seconds") if ts is not None else "-"
    line = f"{change['version']:>8}  {change['kind']:<11}  {change['operation'] or '-':<18}  {when}"
    if change["kind"] == "data":
        rows = "?" if change["added_rows"] is None else change["added_rows"]
        line += (
            f"  +{change['added_files']} files ({rows} rows, {_human_size(change['added_bytes'])})"
            f"  -{change['removed_files']} files"
        )
    return line


def cmd_changes(args: argparse.Namespace) -> None:
    changes = _open(args).changes(since=args.since, until=args.until)
    doc = changes.to_dict(all_kinds=args.all_kinds)
    if args.json:
        return _print_json(doc)
    for change in doc["versions"]:
        print(change_line(change))
    what = "commits" if args.all_kinds else "data-changing commits"
    print(
        f"{len(doc['versions'])} {what} after version {changes.since} ({len(changes.changes)} commits in all); "
        f"latest version {changes.latest}"
    )


def cmd_watch(args: argparse.Namespace) -> None:
    """Poll the log and print each data-changing version (every version with --all) as it lands; Ctrl-C stops."""
    from airflow_provider_deltalite.maintenance.changes import KINDS, counting_kinds, poll_changes

    table = _open(args)
    since = table.latest_version() if args.since is None else args.since
    first = table.changes(since=since)  # a missing table or a bad cursor fails here, before anything is printed
    kinds = KINDS if args.all_kinds else counting_kinds()
    sys.stderr.write(
        f"deltalite: watching {table.uri} after version {since} every {args.interval:g} s (Ctrl-C stops)\n"
    )
    sys.stderr.flush()

    def show(changes: Any) -> None:
        for change in changes.changes:
            if change.kind in kinds:
                doc = change.to_dict()
                # one JSON document per line (JSON Lines): the stream has no end to wrap in a single document
                print(json.dumps(doc, default=json_default) if args.json else change_line(doc), flush=True)

    try:
        show(first)
        for changes in poll_changes(table.storage, first.latest, interval=args.interval, table_id=first.table_id):
            show(changes)
    except KeyboardInterrupt:
        return


def _has_pandas() -> bool:
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True


def cmd_demo(args: argparse.Namespace) -> None:
    """Run the `airflow_provider_deltalite.demo` (``make demo``): a small-file table, the nightly compaction DAG with
    ``airflow dags test`` on local Spark, and a before/after summary."""
    from airflow_provider_deltalite.demo import run_demo

    code = run_demo(args.workdir, keep=args.keep)
    if code:
        raise SystemExit(code)


def _add_executor_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--executor", choices=("local", "spark"), default="local")
    p.add_argument("--spark-master", metavar="URL", help="with --executor spark (default local[*])")
    p.add_argument("--max-concurrent-tasks", type=int, metavar="N", help="threads of the local executor")


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print exactly one JSON document on stdout")
    common.add_argument(
        "--storage-option", action="append", metavar="KEY=VALUE", help="fsspec storage option (repeatable)"
    )
    parser = _Parser(prog="deltalite", description="Delta Lake table maintenance and inspection.")
    parser.add_argument("--version", action="version", version=f"deltalite {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("describe", parents=[common], help="version, files, schema, protocol, properties")
    p.add_argument("table")
    p.add_argument("--version", type=_non_negative, dest="version")
    p.set_defaults(func=cmd_describe)

    p = sub.add_parser("files", parents=[common], help="the live files of a version")
    p.add_argument("table")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--version", type=_non_negative, dest="version")
    group.add_argument("--timestamp", help="ISO-8601 time; the newest version committed at or before it")
    p.set_defaults(func=cmd_files)

    p = sub.add_parser("history", parents=[common], help="commitInfo per version, newest first")
    p.add_argument("table")
    p.add_argument("--limit", type=_non_negative)
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("scan", parents=[common], help="read rows, with pruning and skipping")
    p.add_argument("table")
    p.add_argument("--version", type=_non_negative, dest="version")
    p.add_argument("--columns", help="comma-separated column names")
    p.add_argument("--filter", help="e.g. \"date = '2024-01-01' AND id > 10\"")
    p.add_argument("--output", help="write the rows to this Parquet file")
    p.set_defaults(func=cmd_scan)

    p = sub.add_parser("checkpoint", parents=[common], help="write a checkpoint of the latest version")
    p.add_argument("table")
    p.add_argument("--cleanup-log", action="store_true", help="then delete log files past delta.logRetentionDuration")
    p.set_defaults(func=cmd_checkpoint)

    p = sub.add_parser("optimize", parents=[common], help="compact small files (bin packing, dataChange=false)")
    p.add_argument("table")
    add_optimize_arguments(p)
    _add_executor_arguments(p)
    p.set_defaults(func=cmd_optimize)

    p = sub.add_parser("zorder", parents=[common], help="cluster files along a Z-order or Hilbert curve")
    p.add_argument("table")
    add_zorder_arguments(p)
    _add_executor_arguments(p)
    p.set_defaults(func=cmd_zorder)

    p = sub.add_parser("vacuum", parents=[common], help="delete files the table no longer references")
    p.add_argument("table")
    add_vacuum_arguments(p)
    _add_executor_arguments(p)
    p.set_defaults(func=cmd_vacuum)

    p = sub.add_parser("changes", parents=[common], help="commits after a version, classified (data ones by default)")
    p.add_argument("table")
    p.add_argument("--since", type=_non_negative, required=True, help="the last version already seen")
    p.add_argument("--until", type=_non_negative, help="the newest version to list")
    p.add_argument("--all", action="store_true", dest="all_kinds", help="every commit, not only data-changing ones")
    p.set_defaults(func=cmd_changes)

    p = sub.add_parser("watch", parents=[common], help="print data-changing versions as they land (Ctrl-C stops)")
    p.add_argument("table")
    p.add_argument("--since", type=_non_negative, help="the last version already seen (default: the latest)")
    p.add_argument("--interval", type=_positive_seconds, default=5.0, metavar="S", help="seconds between polls (5)")
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


if __name__ == "__main__":
    raise SystemExit(main())
