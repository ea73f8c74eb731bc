"""Health, the plan and its run on moto's S3 API: the same figures as delta-rs reads, and the compaction it planned."""

from __future__ import annotations

import collections
from typing import Any

import deltalake
import pyarrow as pa
import pytest
import s3fs

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.maintenance.planner import plan_maintenance, run_plan
from tests.moto_server import deltars_s3_options

pytestmark = pytest.mark.s3

BUCKET = "health"
APPENDS = 6  # each append writes one file per partition: 6 fragments each, above min_input_files=5


def _rows(dt: deltalake.DeltaTable) -> collections.Counter:
    return collections.Counter(map(repr, pa.table(dt.to_pyarrow_table()).sort_by("id").to_pylist()))


def test_health_plan_and_run_on_s3_match_deltars(s3_endpoint: dict[str, Any]) -> None:
    s3fs.S3FileSystem(**s3_endpoint).call_s3("create_bucket", Bucket=BUCKET)
    uri = f"s3://{BUCKET}/events"
    options = deltars_s3_options(s3_endpoint)
    for n in range(APPENDS):
        batch = pa.table({"id": [2 * n, 2 * n + 1], "part": ["a", "b"], "v": [float(n), -float(n)]})
        deltalake.write_deltalake(uri, batch, partition_by=["part"], mode="append", storage_options=options)
    theirs = deltalake.DeltaTable(uri, storage_options=options)
    actions = pa.table(theirs.get_add_actions(flatten=True))
    before_rows = _rows(theirs)

    table = DeltaTable(uri, storage_options=s3_endpoint)
    health = table.health()
    assert (health.version, health.files, health.bytes, health.rows) == (
        APPENDS - 1,
        actions.num_rows,
        sum(actions.column("size_bytes").to_pylist()),
        sum(actions.column("num_records").to_pylist()),
    )
    assert [(p.partition_values, p.files) for p in health.partitions] == [({"part": "a"}, 6), ({"part": "b"}, 6)]
    assert (health.log.commits_since_checkpoint, health.log.log_files) == (APPENDS, APPENDS)

    plan = plan_maintenance(table)
    assert [(a.operation, a.options.get("where"), a.estimate.files_removed) for a in plan.actions] == [
        ("optimize", "part = 'a' OR part = 'b'", 12)
    ]
    run = run_plan(table, plan)
    assert [(r.operation, r.stats["numFilesRemoved"], r.stats["numFilesAdded"]) for r in run.actions] == [
        ("optimize", 12, 2)
    ]
    after = deltalake.DeltaTable(uri, storage_options=options)
    assert (after.version(), len(after.file_uris()), _rows(after)) == (APPENDS, 2, before_rows)
    assert table.health().files == 2
