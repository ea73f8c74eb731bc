"""`deltalite describe`, `files`, `history` and `scan`: reading a table."""

from __future__ import annotations

import argparse

from airflow_provider_deltalite.cli.common import open_table
from airflow_provider_deltalite.cli.documents import DESCRIBE_FILE_FIELDS, describe_document, files_document
from airflow_provider_deltalite.cli.render import print_json
from airflow_provider_deltalite.maintenance.wording import human_size


def cmd_describe(args: argparse.Namespace) -> None:
    doc = describe_document(open_table(args).stream(args.version, file_fields=DESCRIBE_FILE_FIELDS))
    if args.json:
        return print_json(doc)
    proto = doc["protocol"]
    print(f"table       {doc['table']}")
    print(f"version     {doc['version']}")
    print(f"files       {doc['numFiles']} ({human_size(doc['sizeInBytes'])})")
    print(f"partitions  {', '.join(doc['partitionColumns']) or '-'}")
    if doc["clusteringColumns"] is not None:
        print(f"clustering  {', '.join(doc['clusteringColumns']) or '-'} (liquid)")
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
    where = args.where or None
    snap = open_table(args).snapshot(version=args.version, timestamp=args.timestamp, where=where)
    if where:
        from airflow_provider_deltalite.engine.scan import plan_scan

        # the files a scan with this filter reads: the replay kept the partitions, statistics skip the rest
        doc = files_document(snap, plan_scan(snap, where).indexes)
    else:
        doc = files_document(snap)
    if args.json:
        return print_json(doc)
    print(f"version {doc['version']}: {len(doc['files'])} files")
    for f in doc["files"]:
        dv = " dv" if f["deletionVector"] else ""
        parts = ",".join(f"{k}={v}" for k, v in f["partitionValues"].items())
        print(
            f"  {f['size']:>12}  {f['numRecords'] if f['numRecords'] is not None else '-':>10}  {f['path']}{dv}"
            f"{'  [' + parts + ']' if parts else ''}"
        )


def cmd_history(args: argparse.Namespace) -> None:
    entries = open_table(args).history(limit=args.limit)
    if args.json:
        return print_json(entries)
    for e in entries:
        print(f"{e['version']:>8}  {e.get('timestamp', '')}  {e.get('operation', '-')}")


def cmd_scan(args: argparse.Namespace) -> None:
    from airflow_provider_deltalite.engine.scan import scan

    # the log replay keeps only the partitions the filter may select
    snap = open_table(args).snapshot(version=args.version, where=args.filter or None)
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
        "prunedInReplay": metrics.pruned_in_replay,
        "output": args.output,
    }
    if args.json:
        return print_json(doc)
    scope = " in the partitions the filter selects" if metrics.pruned_in_replay else ""
    print(
        f"version {doc['version']}: {doc['rows']} rows from {doc['filesRead']} of {doc['filesTotal']} files{scope} "
        f"({doc['filesSkippedByPartition']} skipped by partition, {doc['filesSkippedByStats']} by stats)"
    )
    if not args.output:
        print(rows.slice(0, 20).to_pandas().to_string() if rows.num_rows and _has_pandas() else rows.slice(0, 20))


def _has_pandas() -> bool:
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True
