"""One writer process of the concurrency stress test (run as `python -m tests.engine.stress_worker`).

It waits at a start barrier, then performs its operations against the shared table and writes one JSON line per
operation to its result file: what it tried, whether it committed, the version, its txnId, the row ids it added or
removed, and for a failure the exception's class and whether it is a typed ConcurrentModification.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine import ConcurrentModification, remove_from_add
from airflow_provider_deltalite.engine.file_actions import live_file_actions
from airflow_provider_deltalite.engine.transaction import RetryPolicy
from tests.barrier import wait

OPERATIONS = ("append", "deltars_append", "rewrite", "delete")
WEIGHTS = (0.35, 0.2, 0.3, 0.15)
PARTITIONS = ("p0", "p1", "p2")


def _write_file(table: DeltaTable, ids: list[int], part: str) -> dict[str, Any]:
    rel = f"part={part}/stress-{uuid.uuid4()}.parquet"
    full = table.storage.full_path(rel)
    table.storage.fs.makedirs(full.rsplit("/", 1)[0], exist_ok=True)
    with table.storage.fs.open(full, "wb") as fh:
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), fh)
    size = table.storage.fs.size(full)
    stats = {"numRecords": len(ids), "minValues": {"id": min(ids)}, "maxValues": {"id": max(ids)}}
    stats["nullCount"] = {"id": 0}
    return {
        "path": rel,
        "partitionValues": {"part": part},
        "size": size,
        "dataChange": True,
        "stats": json.dumps(stats),
    }


def _ids_of(table: DeltaTable, path: str) -> list[int]:
    with table.storage.fs.open(table.storage.resolve_data_path(path), "rb") as fh:
        return pq.read_table(fh).column("id").to_pylist()


def run(args: argparse.Namespace) -> None:
    options = json.loads(args.options)
    deltars_options = json.loads(args.deltars_options)
    table = DeltaTable(args.uri, options)
    rng = random.Random(args.seed)
    retry = RetryPolicy(max_attempts=200, base_delay_s=0.01, max_delay_s=0.3)
    out = open(args.out, "a")  # noqa: SIM115 - one line per operation, flushed as we go
    next_id = args.worker * 1_000_000
    if args.mode == "rewrite-same":
        snap = table.snapshot(version=args.read_version)
        files = [f for f in live_file_actions(snap) if f["partitionValues"]["part"] == "p0"]
        txn = table.transaction(snap, retry=retry)
        _stage_rewrite(table, txn, files)
        wait(Path(args.barrier), args.parties)
        _record(out, "rewrite", lambda: txn.commit("OPTIMIZE"), txn.txn_id, [], [])
        return
    wait(Path(args.barrier), args.parties)
    for _ in range(args.ops):
        op = rng.choices(OPERATIONS, WEIGHTS)[0]
        part = rng.choice(PARTITIONS)
        if op in ("append", "deltars_append"):
            ids = list(range(next_id, next_id + rng.randint(1, 4)))
            next_id += 10
            if op == "append":
                txn = table.transaction(retry=retry)
                txn.add(_write_file(table, ids, part))
                _record(out, op, lambda txn=txn: txn.commit("WRITE"), txn.txn_id, ids, [])
            else:
                import deltalake

                data = pa.table({"id": pa.array(ids, pa.int64()), "part": [part] * len(ids)})
                _record(
                    out,
                    op,
                    lambda data=data: deltalake.write_deltalake(
                        args.deltars_uri, data, partition_by=["part"], mode="append", storage_options=deltars_options
                    ),
                    None,
                    ids,
                    [],
                )
            continue
        snap = table.snapshot()
        files = [f for f in live_file_actions(snap) if f["partitionValues"]["part"] == part]
        if op == "rewrite" and len(files) >= 2:
            chosen = rng.sample(files, min(3, len(files)))
            txn = table.transaction(snap, retry=retry)
            _stage_rewrite(table, txn, chosen)
            _record(out, op, lambda txn=txn: txn.commit("OPTIMIZE"), txn.txn_id, [], [])
        elif op == "delete" and files:
            victim = rng.choice(files)
            ids = _ids_of(table, victim["path"])
            txn = table.transaction(snap, retry=retry)
            txn.read_files([victim["path"]])
            txn.remove(remove_from_add(victim, int(time.time() * 1000), data_change=True))
            _record(out, op, lambda txn=txn: txn.commit("DELETE"), txn.txn_id, [], ids)


def _stage_rewrite(table: DeltaTable, txn: Any, files: list[dict[str, Any]]) -> None:
    ids = sorted(i for f in files for i in _ids_of(table, f["path"]))
    txn.read_files(f["path"] for f in files)
    now = int(time.time() * 1000)
    for f in files:
        txn.remove(remove_from_add(f, now, data_change=False))
    new = _write_file(table, ids, files[0]["partitionValues"]["part"])
    new["dataChange"] = False
    txn.add(new)


def _record(out: Any, op: str, commit: Any, txn_id: str | None, added: list[int], removed: list[int]) -> None:
    entry: dict[str, Any] = {"op": op, "txn_id": txn_id, "added": added, "removed": removed}
    try:
        result = commit()
        entry.update(ok=True, version=getattr(result, "version", None))
    except Exception as exc:  # the test asserts on the type recorded here
        entry.update(
            ok=False,
            error=type(exc).__name__,
            # delta-rs reports its own lost races as CommitFailedError (its conflict checker's typed error)
            typed=isinstance(exc, ConcurrentModification)
            or (op == "deltars_append" and type(exc).__name__ == "CommitFailedError"),
            message=str(exc)[:300],
        )
    out.write(json.dumps(entry) + "\n")
    out.flush()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--uri", required=True)
    parser.add_argument("--deltars-uri", required=True)
    parser.add_argument("--options", default="{}")
    parser.add_argument("--deltars-options", default="{}")
    parser.add_argument("--worker", type=int, required=True)
    parser.add_argument("--ops", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    parser.add_argument("--barrier", required=True)
    parser.add_argument("--parties", type=int, required=True)
    parser.add_argument("--mode", choices=["mixed", "rewrite-same"], default="mixed")
    parser.add_argument("--read-version", type=int)
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main(sys.argv[1:])
