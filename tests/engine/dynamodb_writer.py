"""One writer process of the DynamoDB commit tests (run as `python -m tests.engine.dynamodb_writer`).

It waits at a start barrier, then commits ``--commits`` blind appends of one small Parquet file each to the table,
writing one JSON line per commit to ``--out``: the txnId, the version it committed at and the ids it added.
"""

from __future__ import annotations

import argparse
import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine.transaction import RetryPolicy
from tests.barrier import wait


def commit_blind_appends(table: DeltaTable, worker: int, commits: int, out: Any) -> None:
    """Commit ``commits`` blind appends of two rows each; one JSON line per commit to ``out``."""
    retry = RetryPolicy(max_attempts=500, base_delay_s=0.01, max_delay_s=0.2)
    for i in range(commits):
        ids = [worker * 1000 + i * 2, worker * 1000 + i * 2 + 1]
        rel = f"w{worker}-{i}-{uuid.uuid4().hex[:8]}.parquet"
        full = table.storage.full_path(rel)
        with table.storage.fs.open(full, "wb") as fh:
            pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), fh)
        stats = {"numRecords": 2, "minValues": {"id": ids[0]}, "maxValues": {"id": ids[1]}, "nullCount": {"id": 0}}
        txn = table.transaction(retry=retry)
        txn.add(
            {
                "path": rel,
                "partitionValues": {},
                "size": table.storage.fs.size(full),
                "dataChange": True,
                "stats": json.dumps(stats),
            }
        )
        result = txn.commit("WRITE")
        out.write(json.dumps({"txn_id": txn.txn_id, "version": result.version, "ids": ids}) + "\n")
        out.flush()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--uri", required=True)
    parser.add_argument("--options", required=True)
    parser.add_argument("--worker", type=int, required=True)
    parser.add_argument("--commits", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--barrier")
    parser.add_argument("--parties", type=int, default=1)
    args = parser.parse_args()
    table = DeltaTable(args.uri, json.loads(args.options))
    if args.barrier:
        wait(Path(args.barrier), args.parties)
    with open(args.out, "a") as out:
        commit_blind_appends(table, args.worker, args.commits, out)


if __name__ == "__main__":
    main()
