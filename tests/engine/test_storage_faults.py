"""Storage faults (issue 9, item 2): transient errors injected under `Storage` by `tests.faults.FaultyFileSystem`.

- the retry policy and the classifier, on the errors s3fs really raises;
- every `Storage` method survives faults on its first k < attempts requests, and a permanent fault is a StorageError
  naming the path after exactly ``attempts`` tries;
- a commit whose conditional PUT landed but whose response was lost is committed once (also with a concurrent writer
  in between);
- under 10% injected faults OPTIMIZE, Z-order, VACUUM, checkpoint, snapshot load and ``changes`` on a moto table
  either complete with the right result or raise a DeltaLiteError, and the log is never left partial or duplicated.

``python -m tests.engine.test_storage_faults --runs 50`` runs the last part for many seeds and prints the counts.
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import math
import pickle
import re
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine.checkpoint_writer import write_checkpoint
from airflow_provider_deltalite.engine.errors import DeltaLiteError, InvalidArgument, StorageError, UploadInterrupted
from airflow_provider_deltalite.engine.history import read_commit_info
from airflow_provider_deltalite.engine.log_path import LOG_DIR, version_prefix
from airflow_provider_deltalite.engine.rewrite import UPLOAD_ATTEMPTS
from airflow_provider_deltalite.engine.storage import Storage
from airflow_provider_deltalite.engine.storage.retry import (
    StorageRetryPolicy,
    is_transient,
    retry_call,
)
from airflow_provider_deltalite.engine.transaction import RetryPolicy
from tests.faults import KINDS, FaultyFileSystem, make_fault
from tests.moto_server import deltars_s3_options

ATTEMPTS = 4
FAST = {
    "deltalite_retry_attempts": str(ATTEMPTS),
    "deltalite_retry_base_delay_s": "0.001",
    "deltalite_retry_max_delay_s": "0.004",
}
COMMIT_RETRY = RetryPolicy(max_attempts=20, base_delay_s=0.001, max_delay_s=0.01)
BUCKET = "faults"


# -- the policy and the classifier ------------------------------------------------------------------------------


def test_default_policy_gives_up_within_half_a_minute() -> None:
    policy = StorageRetryPolicy()
    assert (policy.attempts, policy.base_delay_s, policy.max_delay_s) == (10, 0.1, 5.0)
    ceilings = [min(policy.max_delay_s, policy.base_delay_s * 2 ** (n - 1)) for n in range(1, policy.attempts)]
    assert round(sum(ceilings), 6) == 21.3  # the most sleeping one request can cost
    assert all(0 <= policy.delay(n) <= c for n, c in enumerate(ceilings, start=1))


def test_policy_from_storage_options() -> None:
    storage = Storage("memory://retry-options", FAST)
    assert storage.retry_policy == StorageRetryPolicy(attempts=4, base_delay_s=0.001, max_delay_s=0.004)
    assert "deltalite_retry_attempts" not in storage.fs.storage_options
    copy = pickle.loads(pickle.dumps(storage))  # a Spark executor rebuilds the same policy from the options
    assert copy.retry_policy == storage.retry_policy


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"deltalite_retry_attempts": "0"}, "deltalite_retry_attempts"),
        ({"deltalite_retry_attempts": "ten"}, "deltalite_retry_attempts"),
        ({"deltalite_retry_attempts": 2.5}, "deltalite_retry_attempts"),
        ({"deltalite_retry_base_delay_s": "-1"}, "deltalite_retry_base_delay_s"),
        ({"deltalite_retry_max_delay_s": "nan"}, "deltalite_retry_max_delay_s"),
    ],
)
def test_invalid_retry_option_is_one_clear_error(options: dict[str, Any], named: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        Storage("memory://retry-bad", options)
    assert named in str(caught.value) and "memory://retry-bad" in str(caught.value)


def _s3_errors() -> dict[str, BaseException]:
    """Errors exactly as s3fs raises them for S3 answers (translate_boto_error on a botocore ClientError)."""
    from botocore.exceptions import ClientError
    from s3fs.errors import translate_boto_error

    def answer(code: str, status: int, message: str = "m", **extra: str) -> BaseException:
        error = {"Code": code, "Message": message, **extra}
        return translate_boto_error(ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": status}}, "op"))

    return {
        "slowdown": answer("SlowDown", 503, "Please reduce your request rate."),
        "unavailable": answer("ServiceUnavailable", 503),
        "internal": answer("InternalError", 500),
        "bad-gateway": answer("502", 502, "Bad Gateway"),
        "gateway-timeout": answer("504", 504, "Gateway Timeout"),
        "too-many": answer("429", 429, "Too Many Requests"),
        "request-timeout": answer("RequestTimeout", 400),
        "no-such-key": answer("NoSuchKey", 404),
        "access-denied": answer("AccessDenied", 403),
        "precondition": answer(
            "PreconditionFailed",
            412,
            "At least one of the pre-conditions you specified did not hold",
            Condition="If-None-Match",
        ),
        "precondition-unnamed": answer("PreconditionFailed", 412),
        "conditional-conflict": answer("ConditionalRequestConflict", 409),
        "invalid-range": answer("InvalidRange", 416),
    }


def test_classifier_on_real_error_types() -> None:
    import aiohttp
    from botocore.exceptions import (
        ConnectionClosedError,
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        ReadTimeoutError,
    )
    from fsspec.exceptions import FSTimeoutError

    s3 = _s3_errors()
    transient = [
        s3["slowdown"],
        s3["unavailable"],
        s3["internal"],
        s3["bad-gateway"],
        s3["gateway-timeout"],
        s3["too-many"],
        s3["request-timeout"],
        TimeoutError("timed out"),
        TimeoutError(),
        FSTimeoutError(),
        ConnectionResetError(104, "Connection reset by peer"),
        ConnectionAbortedError(),
        BrokenPipeError(),
        ReadTimeoutError(endpoint_url="http://127.0.0.1:1/b/k"),
        ConnectTimeoutError(endpoint_url="http://127.0.0.1:1/b/k"),
        ConnectionClosedError(endpoint_url="http://127.0.0.1:1/b/k"),
        EndpointConnectionError(endpoint_url="http://127.0.0.1:1/b/k"),
        aiohttp.ClientOSError(104, "Connection reset by peer"),
        aiohttp.ServerDisconnectedError(),
        aiohttp.ClientPayloadError("Response payload is not completed"),
    ]
    answers = [
        s3["no-such-key"],
        s3["access-denied"],
        s3["precondition"],
        s3["precondition-unnamed"],
        s3["conditional-conflict"],
        s3["invalid-range"],
        FileNotFoundError("b/k"),
        FileExistsError("b/k"),
        PermissionError("denied"),
        NoCredentialsError(),
        ValueError("bad"),
        OSError(28, "No space left on device"),
        KeyboardInterrupt(),
    ]
    assert [type(e).__name__ for e in transient if not is_transient(e)] == []
    assert [repr(e) for e in answers if is_transient(e)] == []
    # what s3fs makes of the answers: FileExistsError only when the condition is named
    assert isinstance(s3["precondition"], FileExistsError) and not isinstance(
        s3["precondition-unnamed"], FileExistsError
    )
    # every fault the test filesystem injects is one the classifier knows
    rng = __import__("random").Random(3)
    for kind in KINDS:
        for _ in range(20):
            assert is_transient(make_fault(kind, rng, endpoint="http://h/b/k", operation="GetObject", body_read=True))


def test_retry_call_tries_exactly_attempts_times() -> None:
    policy = StorageRetryPolicy(attempts=5, base_delay_s=0.0)
    calls: list[int] = []

    def flaky(fail: int, error: BaseException) -> Callable[[], str]:
        def request() -> str:
            calls.append(1)
            if len(calls) <= fail:
                raise error
            return "ok"

        return request

    assert retry_call(policy, flaky(4, TimeoutError())) == "ok" and len(calls) == 5
    calls.clear()
    with pytest.raises(TimeoutError):
        retry_call(policy, flaky(5, TimeoutError()))
    assert len(calls) == 5
    calls.clear()
    with pytest.raises(PermissionError):  # an answer is never retried
        retry_call(policy, flaky(5, PermissionError()))
    assert len(calls) == 1


def test_filesystem_keyword() -> None:
    memory = fsspec.filesystem("memory")
    faulty = FaultyFileSystem(memory)
    table = DeltaTable("memory://given-fs/t", FAST, filesystem=faulty)
    assert table.storage.fs is faulty and table.storage.root == "/given-fs/t" and table.storage.protocol == "memory"
    copy = pickle.loads(pickle.dumps(table.storage))  # executors rebuild from the URI: the wrapper is not shipped
    assert copy.fs is memory and copy.root == "/given-fs/t"
    with pytest.raises(InvalidArgument, match=r"serves memory://, not the table's s3://"):
        DeltaTable("s3://bucket/t", filesystem=faulty)
    with pytest.raises(InvalidArgument, match=r"not the table's file://"):
        Storage("/tmp/somewhere", filesystem=faulty)


# -- each Storage method on S3 ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def s3(s3_endpoint: dict[str, Any]) -> Any:
    import s3fs

    fs = s3fs.S3FileSystem(**s3_endpoint, use_listings_cache=False, skip_instance_cache=True)
    fs.call_s3("create_bucket", Bucket=BUCKET)
    return fs


PARQUET = pa.table({"id": pa.array(range(10_000), pa.int64()), "s": [f"v{i % 97}" for i in range(10_000)]})


@pytest.fixture
def prefix(s3: Any) -> str:
    """A fresh prefix holding a few files: two commits, a.json, b.json, d.parquet (five row groups), sub/x.bin."""
    prefix = f"{BUCKET}/m-{uuid.uuid4().hex[:10]}"
    buf = io.BytesIO()
    pq.write_table(PARQUET, buf, row_group_size=2_000)
    s3.pipe(
        {
            f"{prefix}/{LOG_DIR}/{version_prefix(0)}.json": b"zero",
            f"{prefix}/{LOG_DIR}/{version_prefix(1)}.json": b"one",
            f"{prefix}/a.json": b"A",
            f"{prefix}/b.json": b"BBBB",
            f"{prefix}/d.parquet": buf.getvalue(),
            f"{prefix}/sub/x.bin": b"x",
        }
    )
    return prefix


def _faulty_storage(s3: Any, prefix: str, **faults: Any) -> tuple[Storage, FaultyFileSystem]:
    faulty = FaultyFileSystem(s3, **faults)
    return Storage(f"s3://{prefix}", FAST, filesystem=faulty), faulty


# (name, category, op, match, call, check): `call` runs the method, `check` gets its result and the plain filesystem
Case = tuple[str, str, str, str | None, Callable[[Storage], Any], Callable[[Any, Any, str], None]]


def _equal(expected: Any) -> Callable[[Any, Any, str], None]:
    def check(result: Any, s3: Any, prefix: str) -> None:
        assert result == expected

    return check


def _written(key: str, content: bytes) -> Callable[[Any, Any, str], None]:
    def check(result: Any, s3: Any, prefix: str) -> None:
        assert s3.cat_file(f"{prefix}/{key}") == content

    return check


def _gone(key: str) -> Callable[[Any, Any, str], None]:
    def check(result: Any, s3: Any, prefix: str) -> None:
        assert not s3.exists(f"{prefix}/{key}")

    return check


def _read_parquet(storage: Storage, opener: str) -> pa.Table:
    fh = storage.open_data_file(storage.full_path("d.parquet")) if opener == "data" else storage.open_input("d.parquet")
    with fh:
        return pq.ParquetFile(fh).read()


C0, C1 = f"{version_prefix(0)}.json", f"{version_prefix(1)}.json"
CASES: list[Case] = [
    ("exists", "read", "exists", "a.json", lambda s: s.exists("a.json"), _equal(True)),
    ("is_dir", "read", "isdir", "sub", lambda s: s.is_dir("sub"), _equal(True)),
    ("read", "read", "cat_file", "b.json", lambda s: s.read("b.json"), _equal(b"BBBB")),
    ("read_many", "read", "cat", "b.json", lambda s: s.read_many(["a.json", "b.json"]), _equal([b"A", b"BBBB"])),
    ("read_range", "read", "cat_file", "b.json", lambda s: s.read_range("b.json", 1, 2), _equal(b"BB")),
    (
        "list_from_start_after",
        "list",
        "list_objects_v2",
        None,
        lambda s: [f.name for f in s.list_from(LOG_DIR, version_prefix(1))],
        _equal([C1]),
    ),
    ("list_from_whole", "list", "ls", None, lambda s: [f.name for f in s.list_from(LOG_DIR)], _equal([C0, C1])),
    (
        "list_dir",
        "list",
        "list_objects_v2",
        None,
        lambda s: (sorted(s.list_dir("").file_names), s.list_dir("").dir_names),
        _equal((["a.json", "b.json", "d.parquet"], ("_delta_log", "sub"))),
    ),
    ("write", "write", "pipe_file", "w.json", lambda s: s.write("w.json", b"W"), _written("w.json", b"W")),
    (
        "write_create_only",
        "write",
        "pipe_file",
        "c.json",
        lambda s: s.write_create_only("c.json", b"C"),
        _written("c.json", b"C"),
    ),
    (
        "delete_files",
        "delete",
        "delete_objects",
        None,
        lambda s: s.delete_files(["a.json", "b.json"]).deleted,
        _equal(("a.json", "b.json")),
    ),
    ("delete", "delete", "delete_objects", None, lambda s: s.delete(["a.json"]), _gone("a.json")),
    ("open_data_file", "read", "file.read", "d.parquet", lambda s: _read_parquet(s, "data"), _equal(PARQUET)),
    ("open_input", "read", "open", "d.parquet", lambda s: _read_parquet(s, "input"), _equal(PARQUET)),
]


@pytest.mark.s3
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_method_survives_faults_on_its_first_tries(case: Case, s3: Any, prefix: str) -> None:
    name, category, op, match, call, check = case
    kind = KINDS[CASES.index(case) % len(KINDS)]  # each kind on a third of the methods
    storage, faulty = _faulty_storage(s3, prefix)
    faulty.fail_next(category, ATTEMPTS - 1, kind, match=match, op=op)
    result = call(storage)
    check(result, s3, prefix)
    assert faulty.total() == ATTEMPTS - 1
    if name == "read_many":  # only the failing file is fetched again
        assert faulty.count(category, op) == 2 + ATTEMPTS - 1
    elif name in ("open_data_file", "list_dir"):  # several reads or listings; the failed ones were repeated
        assert faulty.count(category, op) >= ATTEMPTS
    else:
        assert faulty.count(category, op) == ATTEMPTS


@pytest.mark.s3
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_permanent_fault_is_a_storage_error_after_exactly_attempts_tries(case: Case, s3: Any, prefix: str) -> None:
    name, category, op, match, call, _check = case
    kind = KINDS[(CASES.index(case) + 1) % len(KINDS)]
    storage, faulty = _faulty_storage(s3, prefix)
    faulty.fail_next(category, math.inf, kind, match=match, op=op)
    if name == "delete_files":  # reports each file instead of raising
        outcome = storage.delete_files(["a.json", "b.json"])
        assert outcome.deleted == () and [p for p, _ in outcome.failed] == ["a.json", "b.json"]
        assert all(reason.endswith(f"(after {ATTEMPTS} attempts)") for _, reason in outcome.failed)
        assert faulty.count(category, op) == ATTEMPTS
        return
    with pytest.raises(StorageError) as caught:
        call(storage)
    message = str(caught.value)
    named = {"list_from_start_after": LOG_DIR, "list_from_whole": LOG_DIR, "list_dir": "/", "delete": "a.json"}
    assert message.startswith(f"table s3://{prefix}: storage error on {named.get(name, match)}")
    assert f"after {ATTEMPTS} attempts" in message
    assert "testing" not in message  # the credentials of the s3_endpoint fixture
    assert faulty.count(category, op) == ATTEMPTS + (name == "read_many")  # a.json was fetched once
    assert "\n" not in message


@pytest.mark.s3
def test_answers_are_not_retried(s3: Any, prefix: str) -> None:
    storage, faulty = _faulty_storage(s3, prefix)
    with pytest.raises(FileNotFoundError):
        storage.read("missing.json")
    assert faulty.count("read", "cat_file") == 1
    with pytest.raises(FileExistsError):
        storage.write_create_only("a.json", b"other")  # moto answers 412 PreconditionFailed
    assert faulty.count("write", "pipe_file") == 1 and s3.cat_file(f"{prefix}/a.json") == b"A"
    with pytest.raises(FileNotFoundError):
        storage.read_many(["a.json", "missing.json"])
    assert storage.list_dir("nowhere").file_names == ()


@pytest.mark.s3
@pytest.mark.parametrize("fault", ["error", "lost"])
def test_a_failed_data_file_upload_is_not_replayed(s3: Any, prefix: str, fault: str) -> None:
    storage, faulty = _faulty_storage(s3, prefix)
    if fault == "error":
        faulty.fail_next("write", 1, "reset", op="file.close")
    else:
        faulty.lose_next(1, match="new.parquet")
    sink = storage.create_data_file(storage.full_path("new.parquet"))
    writer = pq.ParquetWriter(sink, PARQUET.schema)
    writer.write_table(PARQUET)
    writer.close()
    with pytest.raises(StorageError) as caught:
        sink.close()
    # a reset is transient: the typed subclass tells a writer that producing the file again may succeed
    assert type(caught.value) is UploadInterrupted
    assert re.fullmatch(
        rf"table s3://{prefix}: cannot upload data file new\.parquet: (ConnectionClosedError|ClientOSError): .*; a "
        "streamed upload cannot be replayed, so it was abandoned: nothing is committed, and whatever reached the "
        "store is left for VACUUM",
        str(caught.value),
    )
    assert faulty.count("write", "file.close") == 1  # tried once
    # an upload that failed never appears; one whose response was lost is there, unreferenced, for VACUUM
    assert s3.exists(f"{prefix}/new.parquet") == (fault == "lost")
    with pytest.raises(StorageError, match=r"cannot upload data file new\.parquet"):
        sink.write(b"more")


def test_file_by_file_deletes_and_create_only_writes_on_memory() -> None:
    """The paths a store without DeleteObjects takes (memory://): per-file deletes and an exists-then-write commit."""
    memory = fsspec.filesystem("memory")
    root = f"memory://faults-{uuid.uuid4().hex[:8]}"
    faulty = FaultyFileSystem(memory)
    storage = Storage(root, FAST, filesystem=faulty)
    for name in ("a", "b", "c"):
        storage.write(f"{name}.bin", name.encode())
    faulty.fail_next("delete", ATTEMPTS - 1, "timeout", match="a.bin")
    faulty.lose_next(1, category="delete", match="b.bin")  # deleted, then the response is lost: the retry finds it gone
    faulty.fail_next("delete", math.inf, "reset", match="c.bin")
    outcome = storage.delete_files(["a.bin", "b.bin", "c.bin"])
    assert (outcome.deleted, outcome.missing) == (("a.bin",), ("b.bin",))
    assert [p for p, _ in outcome.failed] == ["c.bin"] and outcome.failed[0][1].endswith(f"(after {ATTEMPTS} attempts)")
    assert faulty.count("delete", "rm_file") == ATTEMPTS + 2 + ATTEMPTS
    assert memory.exists(f"{root[9:]}/c.bin") and not memory.exists(f"{root[9:]}/a.bin")

    faulty.lose_next(1, match="commit.json")
    with pytest.raises(FileExistsError):  # it landed; the retry finds the name taken (whose it is: the txnId tells)
        storage.write_create_only("commit.json", b"mine")
    assert memory.cat_file(f"{root[9:]}/commit.json") == b"mine" and faulty.count("write", "pipe_file") == 4


@pytest.mark.s3
@pytest.mark.parametrize("interrupted", [2, 3])
@pytest.mark.parametrize("operation", ["optimize", "zorder"])
def test_a_bin_is_written_again_after_an_interrupted_upload(
    s3: Any, tmp_path: Path, s3_endpoint: dict[str, Any], interrupted: int, operation: str
) -> None:
    """The upload is not replayed, but the bin is: its inputs are read again and written under a new name, up to
    UPLOAD_ATTEMPTS (3) times in all; the abandoned uploads never appear and nothing else is committed."""
    import deltalake

    uri = _upload_table(s3, tmp_path, appends=2)
    before = sorted(
        deltalake.DeltaTable(uri, storage_options=deltars_s3_options(s3_endpoint)).to_pyarrow_table()["id"].to_pylist()
    )
    faulty = FaultyFileSystem(s3)
    faulty.fail_next("write", interrupted, "reset", op="file.close")
    table = DeltaTable(uri, FAST, filesystem=faulty)

    def run() -> Any:
        if operation == "zorder":
            return table.zorder(["x"], max_concurrent_tasks=1, retry=COMMIT_RETRY)
        return table.optimize(max_concurrent_tasks=1, retry=COMMIT_RETRY)

    if interrupted == UPLOAD_ATTEMPTS:
        with pytest.raises(UploadInterrupted, match="cannot upload data file"):
            run()
        assert sorted(_commits(s3, uri)) == [0, 1]
        return
    stats = run()
    assert faulty.count("write", "file.close") == 2 + interrupted  # two bins (partitions), one written three times
    assert stats.committed_version == 2 and stats.num_files_added == 2 and stats.num_files_removed == 4
    after = deltalake.DeltaTable(uri, storage_options=deltars_s3_options(s3_endpoint))
    assert sorted(after.to_pyarrow_table()["id"].to_pylist()) == before == list(range(40))
    data_files = [p for p in s3.find(uri[len("s3://") :]) if p.endswith(".parquet") and "_delta_log" not in p]
    assert len(data_files) == 4 + 2  # the inputs and the two new files: no abandoned upload became an object


# -- commits whose response was lost -----------------------------------------------------------------------------


def _upload_table(s3: Any, tmp: Path, appends: int = 6) -> str:
    """A partitioned table written by delta-rs (``appends`` commits of 20 rows in two partitions), uploaded to moto;
    its ``s3://`` URI."""
    import deltalake

    local = tmp / f"t-{uuid.uuid4().hex[:8]}"
    for k in range(appends):
        ids = range(k * 20, k * 20 + 20)
        data = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "x": pa.array([(i * 7919) % 1000 for i in ids], pa.int64()),
                "p": ["a" if i % 2 else "b" for i in ids],
            }
        )
        deltalake.write_deltalake(str(local), data, mode="append", partition_by=["p"])
    prefix = f"{BUCKET}/{local.name}"
    s3.put(str(local), prefix, recursive=True)
    return f"s3://{prefix}"


def _commits(s3: Any, uri: str) -> dict[int, bytes]:
    prefix = uri[len("s3://") :]
    names = [n.rsplit("/", 1)[-1] for n in s3.ls(f"{prefix}/{LOG_DIR}", detail=False)]
    versions = sorted(int(n[:20]) for n in names if re.fullmatch(r"\d{20}\.json", n))
    paths = {v: f"{prefix}/{LOG_DIR}/{version_prefix(v)}.json" for v in versions}
    contents = s3.cat(list(paths.values())) if paths else {}  # concurrently
    return {v: contents[path] for v, path in paths.items()}


def _txn_id(body: bytes) -> str | None:
    for line in body.decode().splitlines():
        if line.strip() and "commitInfo" in json.loads(line):
            return json.loads(line)["commitInfo"].get("txnId")
    return None


def _append_txn(table: DeltaTable, app: str) -> Any:
    txn = table.transaction(retry=COMMIT_RETRY, post_commit_hooks=False)
    txn.set_app_transaction(app, 1)
    return txn


@pytest.mark.s3
def test_lost_commit_response_commits_once(s3: Any, tmp_path: Path, s3_endpoint: dict[str, Any]) -> None:
    uri = _upload_table(s3, tmp_path, appends=2)
    before = _commits(s3, uri)
    faulty = FaultyFileSystem(s3)
    faulty.lose_next(1, match=f"{LOG_DIR}/{version_prefix(2)}.json")
    table = DeltaTable(uri, FAST, filesystem=faulty)
    stats = table.optimize(retry=COMMIT_RETRY)
    assert faulty.injected == {("write", "lost"): 1}
    # the conditional PUT was sent twice: the first landed, the second found the name taken (412)
    assert faulty.count("write", "pipe_file") == 2
    after = _commits(s3, uri)
    assert stats.committed_version == 2 and sorted(after) == [0, 1, 2]
    assert {v: after[v] for v in before} == before
    info = read_commit_info(DeltaTable(uri, s3_endpoint).storage, 2)
    assert info is not None and info["operation"] == "OPTIMIZE"
    assert info["operationMetrics"]["numRemovedFiles"] == str(stats.num_files_removed) == "4"


@pytest.mark.s3
@pytest.mark.parametrize("when", ["other-writer-after-our-landed-put", "other-writer-wins-first"])
def test_lost_commit_response_with_a_concurrent_writer(
    s3: Any, tmp_path: Path, s3_endpoint: dict[str, Any], when: str
) -> None:
    uri = _upload_table(s3, tmp_path, appends=1)
    other = DeltaTable(uri, s3_endpoint)
    theirs: list[Any] = []

    def other_commits(path: str) -> None:
        theirs.append(_append_txn(other, "other").commit("WRITE"))

    faulty = FaultyFileSystem(s3, on_lost=other_commits if when == "other-writer-after-our-landed-put" else None)
    ours = DeltaTable(uri, FAST, filesystem=faulty)
    txn = _append_txn(ours, "ours")  # reads version 0
    if when == "other-writer-wins-first":
        theirs.append(_append_txn(other, "other").commit("WRITE"))  # takes version 1
        faulty.lose_next(1, match=f"{LOG_DIR}/{version_prefix(2)}.json")
    else:
        faulty.lose_next(1, match=f"{LOG_DIR}/{version_prefix(1)}.json")
    mine = txn.commit("WRITE")
    other_bytes = _commits(s3, uri)[theirs[0].version]
    expected = (1, 2) if when == "other-writer-after-our-landed-put" else (2, 1)
    assert (mine.version, theirs[0].version) == expected
    commits = _commits(s3, uri)
    assert sorted(commits) == [0, 1, 2]
    assert _txn_id(commits[mine.version]) == mine.txn_id and _txn_id(commits[theirs[0].version]) == theirs[0].txn_id
    assert commits[theirs[0].version] == other_bytes  # the other writer's version is untouched
    assert faulty.injected == {("write", "lost"): 1}


@pytest.mark.s3
def test_commit_write_that_fails_for_good(s3: Any, tmp_path: Path) -> None:
    uri = _upload_table(s3, tmp_path, appends=1)
    faulty = FaultyFileSystem(s3)
    # never lands: a typed error that says so, and the log is unchanged
    faulty.fail_next("write", math.inf, "reset", op="pipe_file")
    with pytest.raises(StorageError) as caught:
        _append_txn(DeltaTable(uri, FAST, filesystem=faulty), "app").commit("WRITE")
    assert re.fullmatch(
        rf"table {uri}: storage error on {LOG_DIR}/{version_prefix(1)}\.json after {ATTEMPTS} attempts: "
        r"(ConnectionClosedError|ClientOSError): [^;]*; version 1 was not written; nothing was committed",
        str(caught.value),
    ), str(caught.value)
    assert sorted(_commits(s3, uri)) == [0]
    assert faulty.count("write", "pipe_file") == ATTEMPTS

    # the first try lands but its response is lost, and every retry fails: the version's txnId shows it is ours
    faulty = FaultyFileSystem(s3, on_lost=lambda path: faulty.fail_next("write", math.inf, "timeout", op="pipe_file"))
    faulty.lose_next(1, match=f"{LOG_DIR}/{version_prefix(1)}.json")
    landed = _append_txn(DeltaTable(uri, FAST, filesystem=faulty), "app").commit("WRITE")
    commits = _commits(s3, uri)
    assert landed.version == 1 and sorted(commits) == [0, 1] and _txn_id(commits[1]) == landed.txn_id
    assert faulty.count("write", "pipe_file") == ATTEMPTS


# -- operations under 10% injected faults ------------------------------------------------------------------------

RATE = 0.10  # of every read, list, write and delete request
LOST_RATE = 0.05  # of writes and deletes: performed, then answered with a connection reset
OPERATIONS = ("snapshot", "changes", "checkpoint", "optimize", "zorder", "vacuum")


def _rows(uri: str, s3_endpoint: dict[str, Any]) -> collections.Counter:
    """The table's rows as delta-rs 1.6.3 reads them through a plain (fault-free) S3 client."""
    import deltalake

    rows = deltalake.DeltaTable(uri, storage_options=deltars_s3_options(s3_endpoint)).to_pyarrow_table()
    rows = pa.table(rows).select(["id", "x", "p"])
    return collections.Counter(zip(*(rows.column(c).to_pylist() for c in rows.column_names), strict=True))


def _check_log(s3: Any, uri: str) -> int:
    """The log holds no partial or duplicate commit: every version file parses, versions are contiguous from 0, and
    no two commits carry the same txnId. Returns the latest version."""
    commits = _commits(s3, uri)
    versions = sorted(commits)
    assert versions == list(range(versions[-1] + 1)), versions
    txn_ids = []
    for version, body in commits.items():
        lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
        assert lines, f"version {version} is empty"
        infos = [line["commitInfo"] for line in lines if "commitInfo" in line]
        assert len(infos) <= 1, f"version {version} has {len(infos)} commitInfo actions"
        if infos and infos[0].get("txnId"):
            txn_ids.append(infos[0]["txnId"])
    assert len(txn_ids) == len(set(txn_ids)), "a transaction committed twice"
    return versions[-1]


def _commit_actions(s3: Any, uri: str, version: int) -> tuple[dict[str, Any], list[dict], list[dict]]:
    body = s3.cat_file(f"{uri[5:]}/{LOG_DIR}/{version_prefix(version)}.json")
    lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
    info = next(line["commitInfo"] for line in lines if "commitInfo" in line)
    return (
        info,
        [line["add"] for line in lines if "add" in line],
        [line["remove"] for line in lines if "remove" in line],
    )


def _check_rewrite(stats: Any, s3: Any, uri: str, operation: str) -> None:
    """OptimizeStats are the commit's: operationMetrics and the actions it holds."""
    assert stats.committed_version is not None
    info, adds, removes = _commit_actions(s3, uri, stats.committed_version)
    metrics = info["operationMetrics"]
    assert info["operation"] == operation
    assert (int(metrics["numAddedFiles"]), int(metrics["numRemovedFiles"])) == (
        stats.num_files_added,
        stats.num_files_removed,
    )
    assert (len(adds), len(removes)) == (stats.num_files_added, stats.num_files_removed)
    assert int(metrics["numAddedBytes"]) == sum(a["size"] for a in adds) == stats.files_added.total_size
    assert int(metrics["numRemovedBytes"]) == sum(r["size"] for r in removes) == stats.files_removed.total_size


def run_operations(
    s3: Any, s3_endpoint: dict[str, Any], tmp: Path, seed: int, attempts: int = 10
) -> tuple[list[tuple[str, str]], FaultyFileSystem]:
    """Run every operation once on a fresh moto table with faults injected, checking each outcome; returns
    ``(operation, "completed" | "failed: <message>")`` in order, and the fault counters."""
    uri = _upload_table(s3, tmp)
    expected = _rows(uri, s3_endpoint)
    plain = DeltaTable(uri, s3_endpoint)
    faulty = FaultyFileSystem(s3, rate=RATE, seed=seed, lost_rate=LOST_RATE)
    options = {**FAST, "deltalite_retry_attempts": str(attempts)}
    table = DeltaTable(uri, options, filesystem=faulty)
    outcomes: list[tuple[str, str]] = []
    latest = _check_log(s3, uri)
    for operation in OPERATIONS:
        before = latest
        try:
            if operation == "snapshot":
                snapshot = table.snapshot()
                reference = plain.snapshot()
                assert snapshot.version == reference.version
                assert sorted(snapshot.files.column("path").to_pylist()) == sorted(
                    reference.files.column("path").to_pylist()
                )
            elif operation == "changes":
                assert table.changes(since=-1).to_dict(all_kinds=True) == plain.changes(since=-1).to_dict(
                    all_kinds=True
                )
            elif operation == "checkpoint":
                written = write_checkpoint(table.snapshot())
                assert written.version == before
                assert json.loads(s3.cat_file(f"{uri[5:]}/{LOG_DIR}/_last_checkpoint"))["version"] == before
            elif operation == "optimize":
                _check_rewrite(table.optimize(retry=COMMIT_RETRY, max_concurrent_tasks=2), s3, uri, "OPTIMIZE")
            elif operation == "zorder":
                _check_rewrite(table.zorder(["x"], retry=COMMIT_RETRY, max_concurrent_tasks=2), s3, uri, "OPTIMIZE")
            elif operation == "vacuum":
                stats = table.vacuum(retention_hours=0, enforce_retention_duration=False, max_concurrent_tasks=2)
                _, end = stats.committed_versions
                info, _, _ = _commit_actions(s3, uri, end)
                assert info["operationParameters"]["status"] == "COMPLETED"
                assert int(info["operationMetrics"]["numDeletedFiles"]) == stats.objects_deleted
                # nothing but live files is left (orphans of failed operations included)
                live = {p for p in plain.snapshot().files.column("path").to_pylist()}
                stored = {
                    name[len(uri) - 4 :]
                    for name in s3.find(uri[5:])
                    if name.endswith(".parquet") and f"/{LOG_DIR}/" not in name
                }
                assert stored == {unquote(p) for p in live}
            outcomes.append((operation, "completed"))
        except DeltaLiteError as exc:
            assert "\n" not in str(exc) and "testing" not in str(exc)
            outcomes.append((operation, f"failed: {type(exc).__name__}: {exc}"))
        latest = _check_log(s3, uri)
        if operation in ("checkpoint", "optimize", "zorder", "vacuum"):
            assert _rows(uri, s3_endpoint) == expected
            # every live file is there (a failed VACUUM or OPTIMIZE never loses one)
            for path in plain.snapshot().files.column("path").to_pylist():
                assert s3.exists(f"{uri[5:]}/{unquote(path)}"), path
    return outcomes, faulty


@pytest.mark.s3
@pytest.mark.parametrize(("seed", "attempts"), [(1, 10), (2, 10), (3, 2)])
def test_operations_under_ten_percent_faults(
    s3: Any, s3_endpoint: dict[str, Any], tmp_path: Path, seed: int, attempts: int
) -> None:
    outcomes, faulty = run_operations(s3, s3_endpoint, tmp_path, seed, attempts)
    assert [op for op, _ in outcomes] == list(OPERATIONS)
    print(seed, attempts, outcomes, dict(faulty.injected))
    assert faulty.total() > 0
    if attempts == 10:  # with the production budget a 10% fault rate is absorbed; only a data-file upload can fail
        assert all(
            result == "completed" or "a streamed upload cannot be replayed" in result for _, result in outcomes
        ), outcomes


def main() -> None:
    """Run `run_operations` for many seeds against a moto_server this script starts; print the counts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--attempts", type=int, default=10, help="deltalite_retry_attempts (production: 10)")
    parser.add_argument("--first-seed", type=int, default=1000)
    args = parser.parse_args()
    import s3fs

    from tests.conftest import s3_endpoint as endpoint_fixture

    with tempfile.TemporaryDirectory() as tmp:
        factory = type("Factory", (), {"mktemp": lambda self, name: Path(tempfile.mkdtemp(dir=tmp))})()
        endpoint = endpoint_fixture.__wrapped__(factory)  # the fixture's generator: starts and stops moto_server
        options = next(endpoint)
        try:
            fs = s3fs.S3FileSystem(**options, use_listings_cache=False, skip_instance_cache=True)
            fs.call_s3("create_bucket", Bucket=BUCKET)
            counts: collections.Counter = collections.Counter()
            faults: collections.Counter = collections.Counter()
            failures: collections.Counter = collections.Counter()
            started = time.monotonic()
            for seed in range(args.first_seed, args.first_seed + args.runs):
                outcomes, faulty = run_operations(fs, options, Path(tmp), seed, args.attempts)
                faults.update({f"{c}/{k}": n for (c, k), n in faulty.injected.items()})
                for operation, result in outcomes:
                    counts[(operation, result.split(":")[0])] += 1
                    if result != "completed":
                        failures[(operation, re.sub(r"\b[0-9a-f-]{8,}\b|\d{20}|part-\S+", "*", result)[:160])] += 1
                print(f"seed {seed}: " + ", ".join(f"{o}={r.split(':')[0]}" for o, r in outcomes), flush=True)
            print(f"\n{args.runs} runs, attempts={args.attempts}, {time.monotonic() - started:.0f} s")
            for operation in OPERATIONS:
                done, failed = counts[(operation, "completed")], counts[(operation, "failed")]
                print(f"  {operation:10s} completed {done:3d}  failed typed {failed:3d}")
            print("injected faults: " + ", ".join(f"{k}={n}" for k, n in sorted(faults.items())))
            for (operation, reason), n in failures.most_common():
                print(f"  {n:3d} x {operation}: {reason}")
        finally:
            next(endpoint, None)


if __name__ == "__main__":
    sys.exit(main())
