"""The DynamoDB commit mode (delta-spark's S3DynamoDBLogStore protocol) on moto's S3 and DynamoDB.

No runnable peer speaks the protocol any more (delta-rs removed its DynamoDB log store), so these tests check its
invariants with oracles of their own: the raw log files and DynamoDB items read with s3fs and botocore, delta-rs
reading the table back, and the item layout written out here from delta-spark's S3DynamoDBLogStore.java.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_provider_deltalite import DeltaTable
from tests.engine.dynamodb_writer import commit_blind_appends
from tests.helpers import cli_failure
from tests.moto_server import deltars_s3_options

REPO = Path(__file__).resolve().parents[2]
LOG = "_delta_log"


def _ddb(s3: dict[str, Any]) -> Any:
    import botocore.session

    return botocore.session.Session().create_client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url=s3["endpoint_url"],
        aws_access_key_id=s3["key"],
        aws_secret_access_key=s3["secret"],
    )


@pytest.fixture
def target(s3_endpoint: dict[str, Any]) -> dict[str, Any]:
    """A bucket with a one-row table written by delta-rs (version 0), and a DynamoDB table with delta-spark's keys."""
    import deltalake
    import s3fs

    s3 = s3_endpoint
    fs = s3fs.S3FileSystem(**s3)
    bucket = f"ddb-{uuid.uuid4().hex[:12]}"
    fs.call_s3("create_bucket", Bucket=bucket)
    uri = f"s3://{bucket}/table"
    deltalake.write_deltalake(uri, pa.table({"id": pa.array([-1], pa.int64())}), storage_options=deltars_s3_options(s3))
    ddb_table = f"delta_log_{uuid.uuid4().hex[:8]}"
    # S3DynamoDBLogStore.tryEnsureTableExists: tablePath (S, HASH) + fileName (S, RANGE)
    _ddb(s3).create_table(
        TableName=ddb_table,
        AttributeDefinitions=[
            {"AttributeName": "tablePath", "AttributeType": "S"},
            {"AttributeName": "fileName", "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": "tablePath", "KeyType": "HASH"},
            {"AttributeName": "fileName", "KeyType": "RANGE"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    options = {**s3, "dynamodb_table_name": ddb_table, "dynamodb_endpoint": s3["endpoint_url"]}
    return {"uri": uri, "s3": s3, "fs": fs, "ddb_table": ddb_table, "options": options, "bucket": bucket}


def _items(target: dict[str, Any]) -> list[dict[str, Any]]:
    response = _ddb(target["s3"]).query(
        TableName=target["ddb_table"],
        KeyConditionExpression="tablePath = :p",
        ExpressionAttributeValues={":p": {"S": target["uri"]}},
        ConsistentRead=True,
    )
    return response["Items"]


def _commit_files(target: dict[str, Any]) -> dict[int, bytes]:
    fs = target["fs"]
    names = [p.rsplit("/", 1)[1] for p in fs.ls(f"{target['bucket']}/table/{LOG}", refresh=True)]
    commits = sorted(n for n in names if re.fullmatch(r"\d{20}\.json", n))
    return {int(n[:20]): fs.cat_file(f"{target['bucket']}/table/{LOG}/{n}") for n in commits}


def _txn_id(body: bytes) -> str | None:
    for line in body.decode().splitlines():
        action = json.loads(line)
        if "commitInfo" in action:
            return action["commitInfo"].get("txnId")
    return None


def _writer(target: dict[str, Any], tmp_path: Path, worker: int, commits: int, parties: int, **env: str) -> Any:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.engine.dynamodb_writer",
            "--uri",
            target["uri"],
            "--options",
            json.dumps(target["options"]),
            "--worker",
            str(worker),
            "--commits",
            str(commits),
            "--out",
            str(tmp_path / f"w{worker}.jsonl"),
            "--barrier",
            str(tmp_path / "barrier"),
            "--parties",
            str(parties),
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
        stderr=subprocess.PIPE,
        text=True,
    )


def _commit_here(target: dict[str, Any], tmp_path: Path, worker: int, commits: int) -> list[dict[str, Any]]:
    """Commit blind appends from this process (what the writer processes do); their records."""
    out = tmp_path / f"here{worker}.jsonl"
    with out.open("a") as fh:
        commit_blind_appends(DeltaTable(target["uri"], target["options"]), worker, commits, fh)
    return [json.loads(line) for line in out.read_text().splitlines()]


def _delta_spark_item(uri: str, version: int, temp_path: str, expire_time: int | None) -> dict[str, Any]:
    # S3DynamoDBLogStore.createPutItemRequest: every attribute a string (S) but expireTime (N), written only once the
    # entry is complete; `complete` is the string "true"/"false" (dbResultToCommitEntry compares getS() to "true").
    item = {
        "tablePath": {"S": uri},
        "fileName": {"S": f"{version:020d}.json"},
        "tempPath": {"S": temp_path},
        "complete": {"S": "false" if expire_time is None else "true"},
    }
    if expire_time is not None:
        item["expireTime"] = {"N": str(expire_time)}
    return item


def test_concurrent_writer_processes_lose_and_duplicate_nothing(target: dict[str, Any], tmp_path: Path) -> None:
    import deltalake

    workers, commits = 4, 4
    procs = [_writer(target, tmp_path, w, commits, workers) for w in range(workers)]
    for proc in procs:
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
    records = [json.loads(line) for w in range(workers) for line in (tmp_path / f"w{w}.jsonl").read_text().splitlines()]
    assert len(records) == workers * commits

    files = _commit_files(target)
    last = workers * commits
    assert sorted(files) == list(range(last + 1))  # contiguous, nothing past the last commit
    by_txn = {_txn_id(body): v for v, body in files.items() if v > 0}
    assert len(by_txn) == last  # no txnId twice
    assert by_txn == {r["txn_id"]: r["version"] for r in records}  # every writer's commit, at the version it saw

    items = _items(target)
    assert sorted(i["fileName"]["S"] for i in items) == [f"{v:020d}.json" for v in range(1, last + 1)]
    assert {i["complete"]["S"] for i in items} == {"true"}
    for item in items:  # the temp file named by each entry holds exactly the commit
        version = int(item["fileName"]["S"][:20])
        temp = f"{target['bucket']}/table/{LOG}/{item['tempPath']['S']}"
        assert target["fs"].cat_file(temp) == files[version]

    # every committed version has its temp file, and every entry a writer lost to another left one more
    temps = target["fs"].ls(f"{target['bucket']}/table/{LOG}/.tmp", refresh=True)
    assert len(temps) >= last

    dt = deltalake.DeltaTable(target["uri"], storage_options=deltars_s3_options(target["s3"]))
    assert dt.version() == last
    ids = sorted(dt.to_pyarrow_table().column("id").to_pylist())
    assert ids == sorted([-1, *(i for r in records for i in r["ids"])])
    assert len(ids) == 1 + 2 * last


def test_item_layout_is_what_delta_spark_reads(target: dict[str, Any], tmp_path: Path) -> None:
    _commit_here(target, tmp_path, 0, 1)
    after = int(time.time())
    [item] = _items(target)
    temp_path = item["tempPath"]["S"]
    assert re.fullmatch(
        r"\.tmp/00000000000000000001\.json\.[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}", temp_path
    )
    expire = int(item["expireTime"]["N"])
    assert after + 86_400 - 60 <= expire <= after + 86_400  # BaseExternalLogStore: one day after completion
    assert item == _delta_spark_item(target["uri"], 1, temp_path, expire)
    files = _commit_files(target)
    assert target["fs"].cat_file(f"{target['bucket']}/table/{LOG}/{temp_path}") == files[1]


def _crash_at_entry(target: dict[str, Any], tmp_path: Path, version: int) -> bytes:
    """A writer killed between its DynamoDB entry and the copy to N.json; the content of its temp file."""
    proc = _writer(target, tmp_path, 9, 1, 1, DELTALITE_CRASH_AT="after_dynamodb_entry")
    proc.communicate(timeout=60)
    assert proc.returncode == -9
    assert version not in _commit_files(target)
    [item] = [i for i in _items(target) if i["fileName"]["S"] == f"{version:020d}.json"]
    assert item == _delta_spark_item(target["uri"], version, item["tempPath"]["S"], None)
    return target["fs"].cat_file(f"{target['bucket']}/table/{LOG}/{item['tempPath']['S']}")


def test_killed_writer_is_recovered_by_reader_and_by_next_writer(target: dict[str, Any], tmp_path: Path) -> None:
    import deltalake

    # a reader (snapshot loading lists the log) finishes version 1
    body = _crash_at_entry(target, tmp_path, 1)
    assert DeltaTable(target["uri"], target["options"]).snapshot().version == 1
    assert _commit_files(target)[1] == body
    assert {i["complete"]["S"] for i in _items(target)} == {"true"}

    # the next writer finishes version 2 and commits 3
    body = _crash_at_entry(target, tmp_path, 2)
    [record] = _commit_here(target, tmp_path, 1, 1)
    assert record["version"] == 3
    files = _commit_files(target)
    assert sorted(files) == [0, 1, 2, 3] and files[2] == body
    assert _txn_id(files[3]) == record["txn_id"]
    assert [i["complete"]["S"] for i in _items(target)] == ["true"] * 3
    dt = deltalake.DeltaTable(target["uri"], storage_options=deltars_s3_options(target["s3"]))
    assert dt.version() == 3 and dt.to_pyarrow_table().num_rows == 1 + 2 * 3


WARNING = (
    "deltalite: {uri}: _delta_log/.tmp/ holds files, a sign of writers that commit through a DynamoDB table "
    "(delta-spark's S3DynamoDBLogStore); they do not see our conditional-PUT commits and can overwrite them: set the "
    "storage option dynamodb_table_name to their DynamoDB table (their "
    "spark.io.delta.storage.S3DynamoDBLogStore.ddb.tableName)"
)


def test_warning_when_the_log_shows_dynamodb_writers(
    target: dict[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="airflow_provider_deltalite")
    s3, fs, bucket = target["s3"], target["fs"], target["bucket"]

    def commit(uri: str, options: dict[str, Any]) -> None:
        with (tmp_path / "out.jsonl").open("a") as out:
            commit_blind_appends(DeltaTable(uri, options), 0, 1, out)

    commit(target["uri"], s3)  # no temp files: nothing said
    assert caplog.records == []

    table2 = f"s3://{bucket}/table2"
    fs.copy(f"{bucket}/table/{LOG}", f"{bucket}/table2/{LOG}", recursive=True)
    fs.pipe_file(f"{bucket}/table2/{LOG}/.tmp/00000000000000000002.json.{uuid.uuid4()}", b"{}\n")
    assert DeltaTable(table2, s3).snapshot().version == 1  # reading: nothing said
    assert caplog.records == []
    commit(table2, s3)
    commit(f"s3://{bucket}/table2/", s3)  # the same table again (another spelling): said once per process
    assert [r.getMessage() for r in caplog.records] == [WARNING.format(uri=table2)]

    caplog.clear()  # configured for DynamoDB: temp files are expected, nothing said
    table3 = f"s3://{bucket}/table3"
    fs.copy(f"{bucket}/table2/{LOG}", f"{bucket}/table3/{LOG}", recursive=True)
    commit(table3, {**target["options"]})
    assert caplog.records == []


def test_missing_dynamodb_table_is_one_line_and_writes_nothing(target: dict[str, Any]) -> None:
    s3 = target["s3"]
    before = target["fs"].find(target["bucket"], detail=True, refresh=True)
    line = cli_failure(
        "optimize",
        target["uri"],
        "--storage-option",
        f"key={s3['key']}",
        "--storage-option",
        f"secret={s3['secret']}",
        "--storage-option",
        f"endpoint_url={s3['endpoint_url']}",
        "--storage-option",
        "dynamodb_table_name=no_such_table",
        "--storage-option",
        f"AWS_ENDPOINT_URL_DYNAMODB={s3['endpoint_url']}",
    )
    assert line == (
        f"deltalite: error: table {target['uri']}: DynamoDB table 'no_such_table' (storage option "
        f"dynamodb_table_name) does not exist in region us-east-1 at {s3['endpoint_url']}"
    )
    after = target["fs"].find(target["bucket"], detail=True, refresh=True)
    assert {k: v["ETag"] for k, v in after.items()} == {k: v["ETag"] for k, v in before.items()}
    assert _ddb(s3).scan(TableName=target["ddb_table"])["Items"] == []


def test_dynamodb_options_without_a_table_name_are_one_clear_error() -> None:
    from airflow_provider_deltalite.engine.errors import InvalidArgument
    from airflow_provider_deltalite.engine.storage import Storage

    with pytest.raises(InvalidArgument) as info:
        Storage("s3://bucket/t", {"dynamodb_region": "eu-west-1", "AWS_ENDPOINT_URL_DYNAMODB": "http://x"})
    assert str(info.value) == (
        "table s3://bucket/t: storage option(s) AWS_ENDPOINT_URL_DYNAMODB, dynamodb_region need dynamodb_table_name "
        "(the DynamoDB table of the commit log)"
    )
    storage = Storage("s3://bucket/t", {"DELTA_DYNAMO_TABLE_NAME": "delta_log", "dynamodb_region": "eu-west-1"})
    assert storage.commit_mode == "dynamodb"
    assert (storage.commit_store.table_name, storage.commit_store.region) == ("delta_log", "eu-west-1")
    assert pickle.loads(pickle.dumps(storage)).commit_mode == "dynamodb"  # as Spark ships it to executors
    assert Storage("s3://bucket/t").commit_mode == "native"


def test_recovery_never_replaces_a_commit_another_writer_made(target: dict[str, Any], tmp_path: Path) -> None:
    import deltalake

    # our writer dies holding the entry of version 1; a conditional-PUT writer (delta-rs) then takes version 1
    ours = _crash_at_entry(target, tmp_path, 1)
    rs_options = deltars_s3_options(target["s3"])
    deltalake.write_deltalake(
        target["uri"], pa.table({"id": pa.array([7], pa.int64())}), mode="append", storage_options=rs_options
    )
    theirs = _commit_files(target)[1]
    assert theirs != ours
    # the next reader completes the entry without copying over delta-rs's commit; the next writer commits 2
    assert DeltaTable(target["uri"], target["options"]).snapshot().version == 1
    [record] = _commit_here(target, tmp_path, 2, 1)
    files = _commit_files(target)
    assert record["version"] == 2 and files[1] == theirs and _txn_id(files[2]) == record["txn_id"]
    assert [i["complete"]["S"] for i in _items(target)] == ["true", "true"]
    dt = deltalake.DeltaTable(target["uri"], storage_options=rs_options)
    assert sorted(dt.to_pyarrow_table().column("id").to_pylist()) == sorted([-1, 7, *record["ids"]])
