"""Other writers (issue 19, item 3): delta-rs 1.6.3 processes append, delete, update and merge while deltalite's
OPTIMIZE, Z-order, VACUUM and checkpoint run, on local disk and on moto's S3 API.

delta-rs commits with a conditional PUT (``If-None-Match: *``) on S3: in 1.6.3 its default S3 log store is the
put-if-absent one (``AWS_S3_LOCKING_PROVIDER=dynamodb`` is refused, ``AWS_S3_ALLOW_UNSAFE_RENAME=true`` would switch
to an unsafe copy); the tests also pass object_store's ``aws_conditional_put=etag`` and check that delta-rs does not
overwrite a taken version (`test_deltars_never_overwrites_a_version`).

Every row has a unique id. The delta-rs writers report what they did and the version they committed (the ledger,
tests/reliability/ledger.py); every version 0..latest is then read with delta-rs and with deltalite and compared with
what the ledger alone implies. The races:

- `test_each_race_ends_as_the_reference_says`: deltalite's operation is held at its crash point (files written, commit
  not) while a delta-rs process commits one operation: a barrier, so each race is the same on every run. Compaction
  (and Z-order) vs a blind append or a change in another partition: the commit retries and lands. Vs a delete, update
  or merge of a file it rewrites: ConcurrentDeleteRead naming delta-rs's version and operation, nothing committed.
  delta-rs starting from a version before our OPTIMIZE and changing compacted rows: delta-rs fails its commit. A VACUUM
  (retention 0) held after VACUUM START while delta-rs rewrites a file: nothing a later version references is deleted.
- `test_three_deltars_writers_during_maintenance`: 3 delta-rs processes x 8 seeded operations while this process runs
  OPTIMIZE, Z-order, checkpoint and VACUUM (the table's retention: `RETENTION_S`) in a loop, then the same checks, and
  VACUUM's: it deleted no file a version from its snapshot on references, and only files removed before its horizon.
- `test_a_checkpoint_deltars_wrote_is_reused_not_replaced`: the regression test of the one engine change this found.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine.errors import CommitTooLate, ConcurrentModification
from airflow_provider_deltalite.maintenance import rewrites
from airflow_provider_deltalite.maintenance.vacuum import run as vacuum_run
from tests.moto_server import deltars_s3_options
from tests.reliability.deltars_writer import apply, torn_read
from tests.reliability.ledger import (
    Ledger,
    Versions,
    check_log,
    check_ours_change_no_data,
    commit_infos,
    read_versions,
)
from tests.reliability.soak import RecordingExecutor

REPO = Path(__file__).resolve().parents[2]
WRITERS = 3
OPS = 8


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """Where the table lives: its URI, deltalite's storage options and delta-rs's."""
    if request.param == "local":
        path = str(tmp_path / "table")
        return {"uri": path, "options": {}, "deltars": {}}
    s3 = request.getfixturevalue("s3_endpoint")
    import s3fs

    bucket = f"writers-{uuid.uuid4().hex[:12]}"
    s3fs.S3FileSystem(**s3).call_s3("create_bucket", Bucket=bucket)
    uri = f"s3://{bucket}/table"
    return {"uri": uri, "options": s3, "deltars": {**deltars_s3_options(s3), "aws_conditional_put": "etag"}}


class DeltaRs:
    """One delta-rs process serving commands (`deltars_writer --serve`); every report goes into the ledger."""

    def __init__(self, target: dict[str, Any], ledger: Ledger) -> None:
        self.target = target
        self.ledger = ledger
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.deltars_writer", "--serve"],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.n = 0

    def __call__(self, op: str, **spec: Any) -> dict[str, Any]:
        self.n += 1
        command = {"op": op, "uri": self.target["uri"], "options": self.target["deltars"], "tag": f"rs{self.n}", **spec}
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        return self.ledger.record(json.loads(self.proc.stdout.readline()))

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0


class HeldAt:
    """Replaces deltalite's crash points: at the armed point, run one delta-rs command and wait for its report."""

    def __init__(self, deltars: DeltaRs) -> None:
        self.deltars = deltars
        self.armed: tuple[str, str, dict[str, Any]] | None = None
        self.report: dict[str, Any] | None = None

    def arm(self, point: str, op: str, **spec: Any) -> None:
        self.armed, self.report = (point, op, spec), None

    def __call__(self, name: str) -> None:
        if self.armed and self.armed[0] == name:
            _, op, spec = self.armed
            self.armed = None
            self.report = self.deltars(op, **spec)
            assert self.report["ok"], self.report


def _rows(part: str, *ids: int, val: int = 0) -> list[list[Any]]:
    return [[i, part, val] for i in ids]


@pytest.fixture
def held(target: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[HeldAt, Ledger]]:
    ledger = Ledger()
    deltars = DeltaRs(target, ledger)
    hook = HeldAt(deltars)
    monkeypatch.setattr(rewrites, "crash_point", hook)
    monkeypatch.setattr(vacuum_run, "crash_point", hook)
    try:
        yield hook, ledger
    finally:
        deltars.close()


def test_deltars_never_overwrites_a_version(target: dict[str, Any]) -> None:
    """With these storage options delta-rs writes a version only if it is absent, as deltalite does."""
    base = {"uri": target["uri"], "options": target["deltars"]}
    assert apply({**base, "op": "create", "tag": "c", "rows": _rows("p0", 1)})["ok"]
    table = DeltaTable(target["uri"], target["options"])
    taken = b'{"commitInfo":{"timestamp":1,"operation":"SOMEONE ELSE"}}\n'
    table.storage.write("_delta_log/00000000000000000001.json", taken)  # another writer's version 1
    report = apply({**base, "op": "append", "tag": "a", "rows": _rows("p0", 2), "read_version": 0})
    assert (report["ok"], report["version"]) == (True, 2)
    assert table.storage.read("_delta_log/00000000000000000001.json") == taken


def test_each_race_ends_as_the_reference_says(target: dict[str, Any], held: tuple[HeldAt, Ledger]) -> None:
    hook, ledger = held
    rs = hook.deltars
    uri, options = target["uri"], target["options"]
    assert rs("create", rows=_rows("p0", 1, 2))["ok"]
    for part, ids in [("p0", (3, 4)), ("p1", (11, 12)), ("p1", (13, 14)), ("p1", (15, 16))]:
        assert rs("append", rows=_rows(part, *ids))["ok"]
    for part, ids in [("p2", (21, 22)), ("p2", (23, 24)), ("p2", (25, 26)), ("p0", (5, 6))]:
        assert rs("append", rows=_rows(part, *ids))["ok"]
    table = DeltaTable(uri, options)
    versions = Versions(table)
    outcomes = []

    def ours(op: str, point: str, deltars_op: str, run: Any, **spec: Any) -> None:
        hook.arm(point, deltars_op, **spec)
        try:
            stats = run()
        except ConcurrentModification as exc:
            winner = hook.report["version"] if hook.report else None
            outcomes.append((op, deltars_op, type(exc).__name__, exc.winning_operation, exc.winning_version == winner))
            return
        version, winner = stats.committed_version, hook.report["version"]
        ledger.ours[version] = "OPTIMIZE"
        # it landed right after delta-rs's commit and left delta-rs's new files live
        kept = versions.live(winner) - versions.live(winner - 1) <= versions.live(version)
        outcomes.append((op, deltars_op, "committed", version == winner + 1, kept))

    def optimize(where: str) -> Any:
        return lambda: table.optimize(where=where)

    def zorder(where: str) -> Any:
        return lambda: table.zorder(["val", "id"], where=where)

    ours("OPTIMIZE", "after_data_files", "append", optimize("part = 'p0'"), rows=_rows("p0", 7, 8))
    ours("OPTIMIZE", "after_data_files", "delete", optimize("part = 'p1'"), part="p1", ids=[11])
    ours("OPTIMIZE", "after_data_files", "update", optimize("part = 'p2'"), part="p2", ids=[21], val=100)
    merge = {"part": "p0", "rows": _rows("p0", 3, 9, val=200), "existing": [3]}
    ours("OPTIMIZE", "after_data_files", "merge", optimize("part = 'p0'"), **merge)
    ours("OPTIMIZE", "after_data_files", "update", optimize("part = 'p1'"), part="p2", ids=[22], val=101)
    # delta-rs starting from the version before our OPTIMIZE of p1, changing rows it compacted
    stale = table.latest_version() - 1  # the only commit since: our OPTIMIZE of p1
    for op, spec in [
        ("delete", {"part": "p1", "ids": [13]}),
        ("update", {"part": "p1", "ids": [14], "val": 102}),
        ("merge", {"part": "p1", "rows": _rows("p1", 15, 17, val=103), "existing": [15]}),
        ("append", {"rows": _rows("p1", 18)}),
    ]:
        r = rs(op, read_version=stale, **spec)
        first_line = r.get("message", "").split("\n")[0] if not r["ok"] else None
        outcomes.append(("deltars-from-" + str(stale), op, r["ok"], r.get("error"), first_line))
    ours("ZORDER", "after_data_files", "append", zorder("part = 'p2'"), rows=_rows("p2", 27, 28))
    ours("ZORDER", "after_data_files", "delete", zorder("part = 'p0'"), part="p0", ids=[4])
    # schema evolution: the metadata changed, so the commit is retried on the new snapshot (same partitioning)
    ours("OPTIMIZE", "after_data_files", "evolve", optimize("part = 'p1'"), rows=_rows("p1", 19))
    assert [o[:5] for o in outcomes] == [
        ("OPTIMIZE", "append", "committed", True, True),
        ("OPTIMIZE", "delete", "ConcurrentDeleteRead", "DELETE", True),
        ("OPTIMIZE", "update", "ConcurrentDeleteRead", "UPDATE", True),
        ("OPTIMIZE", "merge", "ConcurrentDeleteRead", "MERGE", True),
        ("OPTIMIZE", "update", "committed", True, True),  # delta-rs changed p2, the OPTIMIZE compacted p1
        # delta-rs from before that OPTIMIZE: its changes to compacted rows fail (our adds are new data to it)
        (f"deltars-from-{stale}", "delete", False, "CommitFailedError", CONCURRENT_APPEND_RS),
        (f"deltars-from-{stale}", "update", False, "CommitFailedError", CONCURRENT_APPEND_RS),
        (f"deltars-from-{stale}", "merge", False, "CommitFailedError", CONCURRENT_APPEND_RS),
        (f"deltars-from-{stale}", "append", True, None, None),
        ("ZORDER", "append", "committed", True, True),
        ("ZORDER", "delete", "ConcurrentDeleteRead", "DELETE", True),
        ("OPTIMIZE", "evolve", "committed", True, True),
    ]
    table.checkpoint()  # delta-rs reads the versions after it from our checkpoint
    checked = table.latest_version()
    assert read_versions(ledger, versions, uri, target["deltars"], 0, checked) == []

    # VACUUM with no retention, held after VACUUM START while delta-rs rewrites a file live in VACUUM's snapshot
    on_storage = _data_files(table)
    hook.arm("vacuum_after_start", "update", part="p2", ids=[23], val=300)
    executor = RecordingExecutor(4)
    stats = table.vacuum(retention_hours=0, enforce_retention_duration=False, executor=executor)
    start, end = stats.committed_versions
    ledger.ours.update({start: "VACUUM START", end: "VACUUM END"})
    assert hook.report and hook.report["version"] == start + 1
    snap = stats.latest_commit_version
    # exactly what no version from VACUUM's snapshot on references: the tombstoned files and the files the aborted
    # rewrites left; none delta-rs's update removed while VACUUM ran, none it added
    expected = on_storage - versions.live(snap)
    assert sorted(executor.deleted) == sorted(expected)
    assert len(expected) >= 4 + 5  # 4 aborted rewrites' files, and at least the 5 files the first OPTIMIZEs removed
    assert not _data_files(table) & expected
    latest = table.latest_version()
    check_log(ledger, commit_infos(table.storage, latest))
    check_ours_change_no_data(ledger, table.storage)
    # with no retention, versions before VACUUM's snapshot may miss files (most do); none after it
    assert read_versions(ledger, versions, uri, target["deltars"], snap, latest, gone=executor.deleted) == []
    assert [v for v in range(snap) if versions.live(v) & expected]


CONCURRENT_APPEND_RS = "Failed to commit transaction: Commit failed: a concurrent transactions added new data."


def _data_files(table: DeltaTable) -> set[str]:
    """Every data file on storage, relative to the table root (listed with fsspec, not by VACUUM)."""
    fs, root = table.storage.fs, table.storage.full_path("").rstrip("/")
    return {p[len(root) + 1 :] for p in fs.find(root) if "/_delta_log/" not in p and p.endswith(".parquet")}


# the stress table's delta.deletedFileRetentionDuration: VACUUM deletes what was removed earlier in the run
RETENTION_S = 4


def _spawn_writer(target: dict[str, Any], tmp_path: Path, worker: int) -> subprocess.Popen:
    args = ["--uri", target["uri"], "--options", json.dumps(target["deltars"]), "--worker", str(worker)]
    args += ["--seed", str(19_000 + worker), "--ops", str(OPS), "--out", str(tmp_path / f"writer-{worker}.jsonl")]
    args += ["--barrier", str(tmp_path / "barrier"), "--parties", str(WRITERS + 1)]
    cmd = [sys.executable, "-m", "tests.reliability.deltars_writer", *args]
    return subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _tombstone_times(table: DeltaTable, latest: int) -> dict[str, int]:
    """The newest deletionTimestamp of every path some commit removed (decoded, as VACUUM names files)."""
    from urllib.parse import unquote

    times: dict[str, int] = {}
    for v in range(latest + 1):
        for line in table.storage.read(f"_delta_log/{v:020d}.json").decode().splitlines():
            remove = json.loads(line).get("remove") if line.strip() else None
            if remove:
                path = unquote(remove["path"])
                times[path] = max(times.get(path, 0), int(remove["deletionTimestamp"]))
    return times


def test_a_torn_read_is_told_from_other_failures() -> None:
    # the two ways a delta-rs read of a checkpoint replaced under it fails, as delta-rs 1.6.3 words them
    torn = [
        "Kernel error: Arrow error: External: Generic LocalFileSystem error: Requested range was invalid",
        "Generic error: Parquet error: Corrupt footer",
    ]
    other = ["Generic LocalFileSystem error: Object at location x not found", "Schema error: invalid data type"]
    assert [torn_read({"error": "DeltaError", "message": m}) for m in torn + other] == [True, True, False, False]
    assert torn_read({"error": "CommitFailedError", "message": torn[0]}) is False


def test_three_deltars_writers_during_maintenance(target: dict[str, Any], tmp_path: Path) -> None:
    uri, options = target["uri"], target["options"]
    ledger = Ledger()
    config = {"delta.checkpointInterval": "5", "delta.deletedFileRetentionDuration": f"interval {RETENTION_S} seconds"}
    base = {"uri": uri, "options": target["deltars"]}
    ledger.record(apply({**base, "op": "create", "tag": "init0", "rows": _rows("p0", 1, 2), "configuration": config}))
    for n, part in enumerate(("p1", "p2"), start=1):
        ledger.record(apply({**base, "op": "append", "tag": f"init{n}", "rows": _rows(part, 10 * n, 10 * n + 1)}))
    assert all(r["ok"] for r in ledger.deltars)
    table = DeltaTable(uri, options)
    writers = [_spawn_writer(target, tmp_path, w) for w in range(1, WRITERS + 1)]
    (tmp_path / "barrier").mkdir(exist_ok=True)
    (tmp_path / "barrier" / "test").touch()

    ours: list[dict[str, Any]] = []
    vacuums: list[dict[str, Any]] = []
    cycle = 0
    # our maintenance loop, while the writers run and twice more after (checkpoint and VACUUM take turns)
    while any(w.poll() is None for w in writers) or cycle < 2:
        part = f"p{cycle % 3}"
        ours.append(_maintain("OPTIMIZE", ledger, lambda: table.optimize()))
        ours.append(
            _maintain("ZORDER", ledger, lambda part=part: table.zorder(["val", "id"], where=f"part = '{part}'"))
        )
        if cycle % 2:
            ours.append(_maintain("VACUUM", ledger, lambda: _vacuum(table, ledger, vacuums)))
        else:
            ours.append(_maintain("CHECKPOINT", ledger, lambda: table.checkpoint()))
        cycle += 1
    for w in writers:
        out, _ = w.communicate(timeout=120)
        assert w.returncode == 0, out
    for f in sorted(tmp_path.glob("writer-*.jsonl")):
        for line in f.read_text().splitlines():
            ledger.record(json.loads(line))
    print(json.dumps({"ours": ours, "vacuums": [{**v, "deleted": len(v["deleted"])} for v in vacuums]}))  # with -s

    # delta-rs: a lost race is its typed CommitFailedError; what committed did exactly what the writer asked
    reports = ledger.deltars
    assert len(reports) == 3 + WRITERS * OPS
    untyped = [r for r in reports if not r["ok"] and r["error"] != "CommitFailedError"]
    assert not untyped, json.dumps(untyped)
    for r in reports:
        if r["ok"] and r["op"] in ("delete", "update"):
            assert r["metrics"]["rows"] == len(r["deleted"] or r["updated"]), r
        if r["ok"] and r["op"] == "merge":
            assert r["metrics"] == {"rows": len(r["updated"]), "inserted": len(r["added"])}, r
    latest = table.latest_version()
    check_log(ledger, commit_infos(table.storage, latest))
    check_ours_change_no_data(ledger, table.storage)
    # VACUUM deleted no file a version from its snapshot on references, and only files removed before its horizon
    versions = Versions(table)
    tombstoned = _tombstone_times(table, latest)
    gone: set[str] = set()
    for run in vacuums:
        deleted = set(run["deleted"])
        gone |= deleted
        assert not [v for v in range(run["snap"], latest + 1) if versions.live(v) & deleted]
        assert all(tombstoned[p] < run["horizon"] for p in deleted if p in tombstoned)
    skipped = read_versions(ledger, versions, uri, target["deltars"], 0, latest, gone=gone)
    # a version may miss files only when it was superseded before a VACUUM's horizon
    assert not skipped or max(skipped) < max(run["snap"] for run in vacuums)
    # every kind of operation ran, so the checks above did not hold vacuously
    assert {r["op"] for r in reports if r["ok"]} == {"create", "append", "delete", "update", "merge"}
    assert {o["op"] for o in ours if o["ok"]} == {"OPTIMIZE", "ZORDER", "CHECKPOINT", "VACUUM"}
    assert [v for v, op in ledger.ours.items() if op == "OPTIMIZE"]


def _maintain(name: str, ledger: Ledger, run: Any) -> dict[str, Any]:
    """Run one of our operations; it commits (recorded in the ledger) or aborts typed (recorded in the outcome)."""
    try:
        stats = run()
    except ConcurrentModification as exc:
        return {"op": name, "ok": False, "error": type(exc).__name__, "winner": exc.winning_operation}
    except CommitTooLate as exc:  # the files waited longer than half the retention: refused, nothing committed
        return {"op": name, "ok": False, "error": type(exc).__name__}
    version = getattr(stats, "committed_version", None)
    if version is not None:
        ledger.ours[version] = "OPTIMIZE"
    return {"op": name, "ok": True, "version": version}


def _vacuum(table: DeltaTable, ledger: Ledger, runs: list[dict[str, Any]]) -> None:
    """VACUUM with the table's retention; what it deleted, its snapshot version and its horizon go into ``runs``."""
    executor = RecordingExecutor(4)
    stats = table.vacuum(executor=executor)
    start, end = stats.committed_versions
    ledger.ours.update({start: "VACUUM START", end: "VACUUM END"})
    runs.append(
        {"snap": stats.latest_commit_version, "horizon": stats.min_retained_timestamp, "deleted": executor.deleted}
    )


def test_a_checkpoint_deltars_wrote_is_reused_not_replaced(target: dict[str, Any]) -> None:
    """Replacing delta-rs's `<v>.checkpoint.parquet` with ours (another size) made delta-rs readers that had listed it
    fail with "Invalid Parquet file. Corrupt footer" on S3; like the reference, we reuse the file that is there."""
    import io

    import pyarrow.parquet as pq

    uri, options = target["uri"], target["options"]
    ledger = Ledger()
    base = {"uri": uri, "options": target["deltars"]}
    config = {"delta.checkpointInterval": "2"}
    ledger.record(apply({**base, "op": "create", "tag": "c", "rows": _rows("p0", 1, 2), "configuration": config}))
    ledger.record(apply({**base, "op": "append", "tag": "a", "rows": _rows("p1", 10)}))
    table = DeltaTable(uri, options)
    path = "_delta_log/00000000000000000001.checkpoint.parquet"
    theirs = table.storage.read(path)  # delta-rs 1.6.3 checkpoints after version v when (v + 1) % interval == 0
    info = table.checkpoint().checkpoint
    assert table.storage.read(path) == theirs
    rows = pq.read_metadata(io.BytesIO(theirs)).num_rows
    assert (info.version, info.paths, info.size, info.size_in_bytes) == (1, (path,), rows, len(theirs))
    assert read_versions(ledger, Versions(table), uri, target["deltars"], 0, 1) == []
