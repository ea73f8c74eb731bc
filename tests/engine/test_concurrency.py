"""Concurrency with real processes: 6 writers x 50 mixed commits on one table, on local disk and on moto's S3 API.

Writers: deltalite blind appends, delta-rs appends, deltalite dataChange=false rewrites, deltalite deletes. Afterwards
the log must be contiguous with every commit written once, the rows must be exactly what the successful commits
imply, and every failed commit must have raised a typed conflict and left nothing visible.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine.log_path import LogFileKind
from airflow_provider_deltalite.engine.log_segment import list_log
from airflow_provider_deltalite.engine.scan import scan
from tests.moto_server import deltars_s3_options

REPO = Path(__file__).resolve().parents[2]
WORKERS = 6
OPS = 50
# moto_server answers one request at a time: on S3 each writer does fewer operations (six writers still race on
# every commit; the local table takes the full fifty each)
S3_OPS = 15
INITIAL_IDS = list(range(12))


@pytest.fixture(scope="module")
def deltalake() -> Any:
    import deltalake

    return deltalake


def _deltars_s3_options(s3: dict[str, Any]) -> dict[str, str]:
    # delta-rs commits with If-None-Match too, so both writers are put-if-absent
    return {**deltars_s3_options(s3), "conditional_put": "etag"}


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """Where the shared table lives: URIs and storage options for deltalite and for delta-rs."""
    if request.param == "local":
        path = str(tmp_path / "table")
        return {"uri": path, "options": {}, "deltars_uri": path, "deltars_options": {}, "ops": OPS}
    s3 = request.getfixturevalue("s3_endpoint")
    import s3fs

    bucket = f"stress-{uuid.uuid4().hex[:12]}"
    s3fs.S3FileSystem(**s3).call_s3("create_bucket", Bucket=bucket)
    uri = f"s3://{bucket}/table"
    return {"uri": uri, "options": s3, "deltars_uri": uri, "deltars_options": _deltars_s3_options(s3), "ops": S3_OPS}


def _create(deltalake: Any, target: dict[str, Any]) -> None:
    for chunk in (INITIAL_IDS[:6], INITIAL_IDS[6:]):
        data = pa.table({"id": pa.array(chunk, pa.int64()), "part": [f"p{i % 3}" for i in chunk]})
        deltalake.write_deltalake(
            target["deltars_uri"], data, partition_by=["part"], mode="append", storage_options=target["deltars_options"]
        )


def _spawn(target: dict[str, Any], tmp_path: Path, worker: int, parties: int, **extra: Any) -> subprocess.Popen:
    args = [
        sys.executable,
        "-m",
        "tests.engine.stress_worker",
        "--uri",
        target["uri"],
        "--deltars-uri",
        target["deltars_uri"],
        "--options",
        json.dumps(target["options"]),
        "--deltars-options",
        json.dumps(target["deltars_options"]),
        "--worker",
        str(worker),
        "--seed",
        str(1000 + worker),
        "--out",
        str(tmp_path / f"worker-{worker}.jsonl"),
        "--barrier",
        str(tmp_path / "barrier"),
        "--parties",
        str(parties),
    ]
    for key, value in extra.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    return subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _results(tmp_path: Path) -> list[dict[str, Any]]:
    out = []
    for f in sorted(tmp_path.glob("worker-*.jsonl")):
        out.extend(json.loads(line) for line in f.read_text().splitlines())
    return out


def _join(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        output, _ = p.communicate(timeout=600)
        assert p.returncode == 0, output


def _commits(table: DeltaTable) -> dict[int, dict[str, Any]]:
    """commitInfo of every commit in the log, by version."""
    versions = sorted(f.version for f in list_log(table.storage, 0) if f.parsed.kind is LogFileKind.COMMIT)
    infos = {}
    for v in versions:
        first = table.storage.read(f"_delta_log/{v:020d}.json").splitlines()
        infos[v] = next((json.loads(line)["commitInfo"] for line in first if b'"commitInfo"' in line), {})
    return infos


def _final_ids(deltalake: Any, target: dict[str, Any]) -> tuple[list[int], list[int]]:
    ours, _ = scan(DeltaTable(target["uri"], target["options"]).snapshot(), columns=["id"])
    theirs = deltalake.DeltaTable(target["deltars_uri"], storage_options=target["deltars_options"]).to_pyarrow_table()
    return sorted(ours.column("id").to_pylist()), sorted(theirs.column("id").to_pylist())


def test_six_writers_many_commits_each(deltalake: Any, target: dict[str, Any], tmp_path: Path) -> None:
    _create(deltalake, target)
    _join([_spawn(target, tmp_path, w, WORKERS, ops=target["ops"]) for w in range(WORKERS)])
    results = _results(tmp_path)
    # rewrite/delete are skipped only when a partition is too small
    assert len(results) >= WORKERS * target["ops"] * 0.8

    table = DeltaTable(target["uri"], target["options"])
    commits = _commits(table)
    versions = sorted(commits)
    ok = [r for r in results if r["ok"]]
    failed = [r for r in results if not r["ok"]]
    # contiguous, and one commit per successful operation (nothing committed twice, no failure committed)
    assert versions == list(range(len(versions)))
    assert len(versions) == 2 + len(ok)
    ours_ok = [r for r in ok if r["txn_id"]]
    txn_ids = Counter(info.get("txnId") for info in commits.values() if info.get("txnId"))
    assert all(n == 1 for n in txn_ids.values())
    for r in ours_ok:
        assert commits[r["version"]]["txnId"] == r["txn_id"]
    # every failure is a typed conflict, and its transaction is nowhere in the log
    assert all(r["typed"] for r in failed), [r for r in failed if not r["typed"]][:3]
    assert not {r["txn_id"] for r in failed} & set(txn_ids)
    # the rows are exactly the initial rows + every successful append - every successful delete
    expected = Counter(INITIAL_IDS)
    for r in ok:
        expected.update(r["added"])
        expected.subtract(r["removed"])
    expected_ids = sorted(expected.elements())
    ours, theirs = _final_ids(deltalake, target)
    assert ours == expected_ids
    assert theirs == expected_ids
    counts = Counter(r["op"] for r in ok)
    assert all(counts[op] > 0 for op in ("append", "deltars_append", "rewrite", "delete")), counts


def test_two_rewrites_of_the_same_files_from_one_version(
    deltalake: Any, target: dict[str, Any], tmp_path: Path
) -> None:
    """The race that makes delta-rs 1.6.4-1.6.6 duplicate rows: exactly one rewrite wins, the rows are unchanged."""
    _create(deltalake, target)
    _join([_spawn(target, tmp_path, w, 2, mode="rewrite-same", read_version=1) for w in range(2)])
    results = _results(tmp_path)
    assert sorted(r["ok"] for r in results) == [False, True]
    (loser,) = [r for r in results if not r["ok"]]
    assert loser["error"] == "ConcurrentDeleteRead" and "version 2 (OPTIMIZE)" in loser["message"]
    table = DeltaTable(target["uri"], target["options"])
    assert sorted(_commits(table)) == [0, 1, 2]
    ours, theirs = _final_ids(deltalake, target)
    assert ours == theirs == INITIAL_IDS
