"""The operations history on moto's S3 API: concurrent appends (conditional PUTs) lose no row, and an OPTIMIZE of a
table on S3 records its row in a history beside it with the table's credentials. Read back with delta-rs."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import deltalake
import pyarrow as pa
import pytest
import s3fs

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.maintenance.history import append_history
from tests.moto_server import deltars_s3_options

pytestmark = pytest.mark.s3

BUCKET = "history"


def test_concurrent_appends_on_s3_lose_no_row(s3_endpoint: dict[str, Any]) -> None:
    s3fs.S3FileSystem(**s3_endpoint).call_s3("create_bucket", Bucket=BUCKET)
    uri = f"s3://{BUCKET}/ops"
    when = datetime(2026, 12, 1, tzinfo=UTC)

    def append(writer: int) -> None:
        for n in range(4):
            row = {"table_uri": f"/t/{writer}", "operation": "vacuum", "start_time": when, "end_time": when,
                   "outcome": "committed", "version": n}  # fmt: skip
            append_history(uri, [row], s3_endpoint)

    threads = [threading.Thread(target=append, args=(w,)) for w in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    theirs = deltalake.DeltaTable(uri, storage_options=deltars_s3_options(s3_endpoint))
    rows = theirs.to_pyarrow_table().to_pylist()
    assert sorted((r["table_uri"], r["version"]) for r in rows) == sorted(
        (f"/t/{w}", n) for w in range(5) for n in range(4)
    )
    assert theirs.version() == 20


def test_an_optimize_on_s3_records_its_row_beside_the_table(s3_endpoint: dict[str, Any]) -> None:
    s3fs.S3FileSystem(**s3_endpoint).call_s3("create_bucket", Bucket="lake")
    options = deltars_s3_options(s3_endpoint)
    uri = "s3://lake/events"
    for n in range(5):
        deltalake.write_deltalake(uri, pa.table({"id": [n]}), mode="append", storage_options=options)
    sizes = pa.table(deltalake.DeltaTable(uri, storage_options=options).get_add_actions(flatten=True))["size_bytes"]
    stats = DeltaTable(uri, storage_options=s3_endpoint).optimize(history_uri="s3://lake/_history")
    assert stats.committed_version == 5
    [row] = deltalake.DeltaTable("s3://lake/_history", storage_options=options).to_pyarrow_table().to_pylist()
    assert (row["table_uri"], row["operation"], row["outcome"], row["version"]) == (uri, "optimize", "committed", 5)
    assert (row["files_read"], row["bytes_read"], row["files_before"], row["files_after"]) == (
        5,
        sum(sizes.to_pylist()),
        5,
        1,
    )
