"""The same read path on an object store: corpus tables uploaded to moto's S3 API read as delta-rs reads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine import TableNotFound, VersionNotFound
from airflow_provider_deltalite.engine.scan import scan
from tests.conformance.corpus import CORPUS, deltars_paths, normalise_path, read_expected, row_multiset

pytestmark = pytest.mark.s3

TABLES = [
    "dat-historical/multi_partitioned/delta",  # escaped and unicode partition directories, null partitions
    "kernel-rs-golden/dv-partitioned-with-checkpoint/delta",  # deletion vectors and a checkpoint
    "kernel-rs-golden/multi-part-checkpoint/delta",
    "kernel-rs-data/v2-checkpoints-parquet-with-sidecars",  # V2 checkpoint with sidecars and _last_checkpoint
    "delta-kernel-defaults/basic-with-checkpoint",
    "delta-rs/table_with_deletion_logs",  # checkpoints at 10 and 20, a protocol upgrade midway
    "kernel-rs-golden/table-with-columnmapping-mode-name/delta",
]


@pytest.fixture(scope="module")
def bucket(s3_endpoint: dict) -> tuple[str, dict]:
    import s3fs

    fs = s3fs.S3FileSystem(**s3_endpoint)
    fs.call_s3("create_bucket", Bucket="corpus")
    for name in TABLES:
        local = CORPUS / name
        if local.is_dir():
            fs.put(str(local), f"corpus/{name}", recursive=True)
    return "s3://corpus", s3_endpoint


@pytest.mark.parametrize("name", [t for t in TABLES if (CORPUS / t).is_dir()])
def test_s3_table_matches_delta_rs_and_expected_rows(bucket: tuple[str, dict], name: str) -> None:
    base, options = bucket
    local = CORPUS / name
    table = DeltaTable(f"{base}/{name}", storage_options=options)
    snap = table.snapshot()
    ours = {normalise_path(p, Path(table.storage.root)) for p in snap.raw_files.column("path").to_pylist()}
    theirs = deltars_paths(local)
    if theirs is not None:
        assert ours == theirs
    expected = local.parent / "expected"
    if expected.is_dir():
        latest = expected / "latest" if (expected / "latest").is_dir() else expected
        rows, metrics = scan(snap)
        want = read_expected(latest)
        assert metrics.files_read == snap.num_files
        assert row_multiset(rows, want.column_names) == row_multiset(want, want.column_names)


def test_s3_missing_table_and_version_errors(bucket: tuple[str, dict]) -> None:
    base, options = bucket
    with pytest.raises(TableNotFound) as info:
        DeltaTable(f"{base}/no-such-table", storage_options=options).snapshot()
    assert "no-such-table" in str(info.value) and "testing" not in str(info.value)
    name = "delta-kernel-defaults/basic-with-checkpoint"
    with pytest.raises(VersionNotFound) as info:
        DeltaTable(f"{base}/{name}", storage_options=options).snapshot(version=999)
    assert "999" in str(info.value)
