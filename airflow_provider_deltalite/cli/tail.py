"""`deltalite changes` and `deltalite watch`: following a table's commits."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from airflow_provider_deltalite.cli.common import open_table
from airflow_provider_deltalite.cli.render import change_line, json_default, print_json


def cmd_changes(args: argparse.Namespace) -> None:
    changes = open_table(args).changes(since=args.since, until=args.until)
    doc = changes.to_dict(all_kinds=args.all_kinds)
    if args.json:
        return print_json(doc)
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

    table = open_table(args)
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
