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
- `test_three_deltars_writers_during_maintenance`: 3 delta-rs processes x 10 seeded operations while this process runs
  OPTIMIZE, Z-order, checkpoint and VACUUM (the table's retention: 3 s) in a loop.
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
from airflow_provider_deltalite.engine.errors import ConcurrentDeleteRead, ConcurrentModification
from airflow_provider_deltalite.maintenance import rewrites
from airflow_provider_deltalite.maintenance.vacuum import run as vacuum_run
from tests.moto_server import deltars_s3_options
from tests.reliability.deltars_writer import apply
from tests.reliability.ledger import Ledger, check_log, commit_infos, live_paths, read_versions
from tests.reliability.soak import RecordingExecutor

REPO = Path(__file__).resolve().parents[2]
WRITERS = 3
OPS = 10


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
    outcomes = []

    def ours(op: str, point: str, deltars_op: str, run: Any, **spec: Any) -> None:
        hook.arm(point, deltars_op, **spec)
        before = live_paths(table, table.latest_version())
        try:
            stats = run()
        except ConcurrentModification as exc:
            winner = hook.report["version"] if hook.report else None
            outcomes.append((op, deltars_op, type(exc).__name__, exc.winning_operation, exc.winning_version == winner))
            return
        version, winner = stats.committed_version, hook.report["version"]
        ledger.ours[version] = "OPTIMIZE"
        # it landed right after delta-rs's commit and left delta-rs's new files live
        kept = live_paths(table, winner) - live_paths(table, winner - 1) <= live_paths(table, version)
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
    ]
    table.checkpoint()  # delta-rs reads the versions after it from our checkpoint

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
    expected = on_storage - live_paths(table, snap)
    assert sorted(executor.deleted) == sorted(expected)
    assert len(expected) >= 4 + 5  # 4 aborted rewrites' files, and at least the 5 files the first OPTIMIZEs removed
    assert not _data_files(table) & expected
    latest = table.latest_version()
    check_log(ledger, commit_infos(table.storage, latest))
    skipped = read_versions(ledger, table, uri, target["deltars"], latest, gone=executor.deleted)
    # with no retention, only versions before VACUUM's snapshot may miss files
    assert skipped and max(skipped) < snap


CONCURRENT_APPEND_RS = "Failed to commit transaction: Commit failed: a concurrent transactions added new data."


def _data_files(table: DeltaTable) -> set[str]:
    """Every data file on storage, relative to the table root (listed with fsspec, not by VACUUM)."""
    fs, root = table.storage.fs, table.storage.full_path("").rstrip("/")
    return {p[len(root) + 1 :] for p in fs.find(root) if "/_delta_log/" not in p and p.endswith(".parquet")}
