"""A delta-rs (deltalake 1.6.3) writer process for tests/reliability/test_other_writers.py.

Run as ``python -m tests.reliability.deltars_writer``. Every row it writes has a unique ``id``; every operation tags its
commit with ``commitInfo.ledger`` (delta-rs's custom metadata) and reports one JSON line: what it did (rows added,
ids deleted, new values of ids updated), whether delta-rs committed it and the version delta-rs says it committed.
That report is the test's ledger: the table at any version must be exactly what the ledger's operations up to that
version imply.

Two modes:

``--serve``
    one command per stdin line (a JSON object: ``op`` and its arguments, ``uri``, ``options``, optionally
    ``read_version`` to start the operation from an older snapshot), one report per stdout line. The test sends a
    command from inside a deltalite operation (at one of its crash points) and waits for the report: a barrier, so
    the race is the same on every run.
``--stress``
    waits at a start barrier, then ``--ops`` seeded operations on its own ids (appends, and deletes, updates and merges
    of rows it appended before, one partition at a time), a report per operation in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from tests.barrier import wait

PARTITIONS = ("p0", "p1", "p2")
STRESS_OPS = ("append", "delete", "update", "merge")
RETRIES = 6


def _rows_table(rows: list[list[Any]]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "part": pa.array([r[1] for r in rows], pa.string()),
            "val": pa.array([r[2] for r in rows], pa.int64()),
        }
    )


def _where(part: str, ids: list[int]) -> str:
    # the partition narrows what delta-rs's conflict checker counts as read, as a user's predicate would
    return f"part = '{part}' AND id IN ({', '.join(str(i) for i in ids)})"


def apply(command: Mapping[str, Any]) -> dict[str, Any]:
    """Run one operation with delta-rs; its report (``ok``, ``version``; or ``error`` and ``message``)."""
    from deltalake import CommitProperties, DeltaTable, write_deltalake

    op = command["op"]
    report: dict[str, Any] = {
        "op": op,
        "tag": command["tag"],
        "added": [],
        "deleted": [],
        "updated": {},
        "read_version": command.get("read_version"),
    }
    props = CommitProperties(custom_metadata={"ledger": command["tag"]})
    try:
        if op == "create":
            write_deltalake(
                command["uri"],
                _rows_table(command["rows"]),
                partition_by=["part"],
                configuration=command.get("configuration"),
                storage_options=dict(command["options"]),
                commit_properties=props,
            )
            report.update(ok=True, version=0, added=command["rows"])
            return report
        dt = DeltaTable(command["uri"], version=command.get("read_version"), storage_options=dict(command["options"]))
        report["read_version"] = dt.version()
        if op == "append":
            write_deltalake(dt, _rows_table(command["rows"]), mode="append", commit_properties=props)
            report["added"] = command["rows"]
        elif op == "evolve":
            # an append that adds a column: schema evolution changes the table's metadata
            data = _rows_table(command["rows"]).append_column("extra", pa.array(["x"] * len(command["rows"])))
            write_deltalake(dt, data, mode="append", schema_mode="merge", commit_properties=props)
            report["added"] = command["rows"]
        elif op == "delete":
            metrics = dt.delete(_where(command["part"], command["ids"]), commit_properties=props)
            report["deleted"] = command["ids"]
            report["metrics"] = {"rows": metrics.get("num_deleted_rows")}
        elif op == "update":
            metrics = dt.update(
                predicate=_where(command["part"], command["ids"]),
                updates={"val": str(command["val"])},
                commit_properties=props,
            )
            report["updated"] = {str(i): command["val"] for i in command["ids"]}
            report["metrics"] = {"rows": metrics.get("num_updated_rows")}
        elif op == "merge":
            # rows whose id exists get the new val (same partition); the others are inserted
            metrics = (
                dt.merge(
                    _rows_table(command["rows"]),
                    predicate=f"t.part = '{command['part']}' AND t.id = s.id",
                    source_alias="s",
                    target_alias="t",
                    commit_properties=props,
                )
                .when_matched_update(updates={"val": "s.val"})
                .when_not_matched_insert_all()
                .execute()
            )
            existing = set(command["existing"])
            report["added"] = [r for r in command["rows"] if r[0] not in existing]
            report["updated"] = {str(r[0]): r[2] for r in command["rows"] if r[0] in existing}
            report["metrics"] = {
                "rows": metrics.get("num_target_rows_updated"),
                "inserted": metrics.get("num_target_rows_inserted"),
            }
        else:
            raise ValueError(f"unknown op {op!r}")
        report.update(ok=True, version=dt.version())
    except Exception as exc:  # the test decides which failures are acceptable: it reads error
        report.update(ok=False, version=None, error=type(exc).__name__, message=str(exc)[:400])
    return report


# What a delta-rs read of a Parquet object replaced under it says: pages that no longer decode, or (the new object
# being shorter than the one it listed) a byte range past the end, "Requested range was invalid" on a local table.
TORN_READ_MESSAGES = ("Parquet error", "Requested range was invalid")


def torn_read(report: dict[str, Any]) -> bool:
    """A delta-rs operation that failed reading a Parquet object which another writer replaced under it."""
    message = report.get("message") or ""
    return report["error"] == "DeltaError" and any(m in message for m in TORN_READ_MESSAGES)


def serve() -> None:
    for line in sys.stdin:
        if line.strip():
            sys.stdout.write(json.dumps(apply(json.loads(line))) + "\n")
            sys.stdout.flush()


def stress(args: argparse.Namespace) -> None:
    """``--ops`` seeded operations on this worker's own rows, a report line each."""
    rng = random.Random(args.seed)
    live: dict[int, str] = {}  # this worker's ids -> partition, as its committed operations left them
    next_id = args.worker * 1_000_000 + 1
    stamp = args.worker * 1_000_000
    base = {"uri": args.uri, "options": json.loads(args.options)}
    wait(Path(args.barrier), args.parties)
    with open(args.out, "a") as out:
        for n in range(args.ops):
            # every kind in turn, so that each runs a few times whatever the seed (the test checks that each committed)
            op = STRESS_OPS[n % len(STRESS_OPS)] if live else "append"
            part = rng.choice(sorted(set(live.values()))) if op != "append" else rng.choice(PARTITIONS)
            mine = sorted(i for i, p in live.items() if p == part)
            stamp += 1
            tag = f"w{args.worker}-{n}"
            if op == "append":
                rows = [[next_id + k, part, 0] for k in range(rng.randint(2, 5))]
                next_id += len(rows)
                command = {"op": op, "rows": rows}
            elif op in ("delete", "update"):
                command = {"op": op, "part": part, "ids": rng.sample(mine, min(len(mine), rng.randint(1, 2)))}
                command["val"] = stamp
            else:
                old = rng.sample(mine, min(len(mine), 2))
                rows = [[i, part, stamp] for i in old] + [[next_id, part, stamp]]
                next_id += 1
                command = {"op": op, "part": part, "rows": rows, "existing": old}
            # A lost race is retried on the newer table, as a delta-rs user does: our OPTIMIZE and Z-order loop
            # rewrites the same files all the time, and a DML that only ever lost would leave its kind untested.
            # A torn read is retried too: a delta-rs writer replaces the checkpoint of a version it committed with a
            # plain PUT even when we checkpointed that version first, and a delta-rs reader that had read the old
            # object's footer then reads the new object's pages ("Parquet error: ...") or, the new object being
            # shorter, past its end. Nothing was committed; a delta-rs user retries it. The report counts them
            # (``torn_reads``).
            torn = 0
            for _ in range(RETRIES):
                report = apply({**base, **command, "tag": tag})
                if report["ok"] or not (report["error"] == "CommitFailedError" or torn_read(report)):
                    break
                torn += torn_read(report)
            report["torn_reads"] = torn
            if report["ok"]:
                for row in report["added"]:
                    live[row[0]] = row[1]
                for i in report["deleted"]:
                    live.pop(i)
            out.write(json.dumps(report) + "\n")
            out.flush()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", action="store_true")
    parser.add_argument("--uri")
    parser.add_argument("--options", default="{}")
    parser.add_argument("--worker", type=int, default=1)
    parser.add_argument("--ops", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out")
    parser.add_argument("--barrier")
    parser.add_argument("--parties", type=int, default=1)
    args = parser.parse_args(argv)
    if args.serve:
        serve()
    else:
        stress(args)


if __name__ == "__main__":
    main(sys.argv[1:])
