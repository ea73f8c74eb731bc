"""VACUUM on the S3 API of a moto_server on 127.0.0.1: the property test of test_vacuum_property.py over real
uploads, and the request pattern (one delimiter LIST per directory page, no per-file HEAD, DeleteObjects batches).

S3 sets LastModified itself (to the second), so time is real here: each history is uploaded in two phases, the
commits before the horizon and old orphans first, then, a few seconds later, the later commits and young orphans;
the retention is chosen so that the horizon falls between the phases.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import deltalake
import pytest
import s3fs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine.storage import DirListing, Storage
from airflow_provider_deltalite.maintenance.vacuum import vacuum
from tests.maintenance.vacuum_histories import (
    HOUR_MS,
    commit_lines,
    is_hidden,
    needed_by,
    ops,
    orphans,
    snapshot_rows,
    write_history,
    written_paths,
)
from tests.moto_server import deltars_s3_options

pytestmark = pytest.mark.s3

BUCKET = "vacuum"
PHASE_GAP_S = 2.2  # LastModified has whole seconds: the gap keeps the phases at least a second apart


@pytest.fixture(scope="module")
def fs(s3_endpoint: dict[str, Any]) -> Any:
    filesystem = s3fs.S3FileSystem(**s3_endpoint)
    filesystem.call_s3("create_bucket", Bucket=BUCKET)
    return filesystem


def _objects(fs: Any, prefix: str) -> dict[str, int]:
    """Keys under ``prefix`` (relative to it) with LastModified in ms."""
    fs.invalidate_cache()
    found = fs.find(prefix, detail=True)
    return {
        name[len(prefix) + 1 :]: int(info["LastModified"].timestamp() * 1000)
        for name, info in found.items()
        if info["type"] == "file"
    }


def _retention_hours(horizon_ms: int) -> float:
    """The retention that puts the horizon at ``horizon_ms`` for a VACUUM starting now."""
    return (time.time() * 1000 - horizon_ms) / HOUR_MS


class _Staged:
    """One history built locally and uploaded in two phases: the commits before ``old`` (and old orphans, hidden
    files) first, the rest later."""

    def __init__(self, local: Path, key: str, history, placed) -> None:
        self.local, self.key = local, key
        self.latest = write_history(local, history, deltalake)
        self.young: set[str] = set()
        self.old_orphans: set[str] = set()
        for o in placed:
            rel = f"{o.directory}/{o.name}" if o.directory else o.name
            (local / rel).parent.mkdir(parents=True, exist_ok=True)
            (local / rel).write_bytes(b"orphan")
            (self.young if o.young else self.old_orphans).add(rel)
        self.hidden = {"_SUCCESS", ".hidden.parquet", "_tmp/part-0.parquet", "p=a/.part-0.parquet.crc"}
        for rel in self.hidden:
            (local / rel).parent.mkdir(parents=True, exist_ok=True)
            (local / rel).write_bytes(b"hidden")
        self.old = 0

    def phases(self) -> dict[str, int]:
        phase = {rel: 1 for rel in self.hidden | self.old_orphans} | {rel: 2 for rel in self.young}
        for v in range(self.latest + 1):
            rel = f"_delta_log/{v:020d}.json"
            phase[rel] = 1 if v < self.old else 2
            for path in written_paths(commit_lines(self.local, v)):
                phase[path] = phase[rel]
        return phase

    def stamp(self, phase: int, when_ms: int) -> None:
        """Give this phase's commits their time (commitInfo and the removes' deletionTimestamp)."""
        for v in range(self.latest + 1):
            if (1 if v < self.old else 2) != phase:
                continue
            actions = commit_lines(self.local, v)
            for a in actions:
                if "commitInfo" in a:
                    a["commitInfo"]["timestamp"] = when_ms + v
                if "remove" in a:
                    a["remove"]["deletionTimestamp"] = when_ms + v
            (self.local / "_delta_log" / f"{v:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))

    def upload(self, fs: Any, phase: int) -> None:
        for rel, p in sorted(self.phases().items()):
            if p == phase:
                fs.pipe_file(f"{self.key}/{rel}", (self.local / rel).read_bytes())


@pytest.mark.slow
@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_vacuum_on_random_histories_on_s3(
    s3_endpoint: dict[str, Any], fs: Any, tmp_path_factory: pytest.TempPathFactory, data
) -> None:
    run = f"{BUCKET}/{uuid.uuid4().hex}"
    options = deltars_s3_options(s3_endpoint)
    staged = []
    for k in range(3):
        history = data.draw(ops, label=f"history {k}")
        placed = data.draw(orphans, label=f"orphans {k}")
        table = _Staged(tmp_path_factory.mktemp("s3-history") / "table", f"{run}/t{k}", history, placed)
        table.old = data.draw(st.integers(0, table.latest + 1), label=f"commits before the horizon {k}")
        staged.append(table)
    outside = {f"{run}/outside/part-0.parquet": b"outside", f"{run}/t0_sibling/part-0.parquet": b"sibling"}

    t1 = int(time.time() * 1000)
    for table in staged:
        table.stamp(1, t1 - 1000)
        table.upload(fs, 1)
    for key, body in outside.items():
        fs.pipe_file(key, body)
    phase1_end = math.ceil(time.time()) * 1000  # LastModified of every phase-1 object is at or below this
    time.sleep(max(0.0, phase1_end / 1000 + PHASE_GAP_S - time.time()))
    t2 = int(time.time() * 1000)
    for table in staged:
        table.stamp(2, t2)
        table.upload(fs, 2)
    horizon = phase1_end + 500

    for table in staged:
        uri = f"s3://{table.key}"
        kept_versions = list(range(max(table.old - 1, 0), table.latest + 1))
        rows = snapshot_rows(uri, kept_versions, deltalake, options)
        needed = needed_by(uri, kept_versions, deltalake, uri, options)
        listed = _objects(fs, table.key)
        visible = {rel: m for rel, m in listed.items() if not is_hidden(rel)}
        expected = {rel for rel, m in visible.items() if m < horizon and rel not in needed}
        assert table.old_orphans <= expected and not table.young & expected
        lite_first = data.draw(st.booleans(), label="LITE first")

        before = set(listed)
        if lite_first:
            dry = vacuum(
                DeltaTable(uri, s3_endpoint),
                mode="lite",
                dry_run=True,
                retention_hours=_retention_hours(horizon),
                enforce_retention_duration=False,
            )
            assert set(_objects(fs, table.key)) == before
            real = vacuum(
                DeltaTable(uri, s3_endpoint),
                mode="lite",
                retention_hours=_retention_hours(horizon),
                enforce_retention_duration=False,
            )
            gone = before - set(_objects(fs, table.key))
            assert {f["path"] for f in dry.files_to_delete} == gone
            removed_early = set()
            for v in range(table.old):
                for a in commit_lines(table.local, v):
                    for kind in ("remove", "cdc"):
                        if kind in a:
                            removed_early.add(unquote(a[kind]["path"]))
            assert gone == (removed_early & set(visible)) - needed
            assert real.objects_deleted == len(gone)
            expected -= gone
            before = set(_objects(fs, table.key))

        dry = vacuum(
            DeltaTable(uri, s3_endpoint),
            dry_run=True,
            retention_hours=_retention_hours(horizon),
            enforce_retention_duration=False,
        )
        assert set(_objects(fs, table.key)) == before
        real = vacuum(
            DeltaTable(uri, s3_endpoint), retention_hours=_retention_hours(horizon), enforce_retention_duration=False
        )
        after = set(_objects(fs, table.key))
        gone = before - after
        assert gone == {f["path"] for f in dry.files_to_delete} == expected
        assert (dry.dirs_to_delete, real.objects_deleted) == ([], len(gone))
        assert real.committed_versions == (real.latest_commit_version + 1, real.latest_commit_version + 2)
        assert table.young | table.hidden <= after
        assert snapshot_rows(uri, kept_versions, deltalake, options) == rows
    for key, body in outside.items():
        assert fs.cat_file(key) == body


def test_listing_and_deleting_send_paged_lists_and_batched_deletes(fs: Any, s3_endpoint: dict[str, Any]) -> None:
    """Storage.list_dir pages a delimiter listing (no HEAD per file); Storage.delete_files sends one DeleteObjects
    per 1,000 keys and deletes names with glob characters exactly. Requests are counted on the client's own
    event hooks."""
    prefix = f"{BUCKET}/{uuid.uuid4().hex}"
    names = [f"p=1/f-{i:04d}.parquet" for i in range(1001)] + ["a[1].parquet", "a1.parquet", "p=1/sub/x"]
    fs.pipe({f"{prefix}/{n}": b"x" for n in names})
    storage = Storage(f"s3://{prefix}", s3_endpoint)
    storage.list_dir("")  # connects the client
    calls: list[str] = []
    storage.fs.s3.meta.events.register("before-call.s3", lambda model, **_: calls.append(model.name))

    top = storage.list_dir("")
    assert sorted(f.name for f in top.files) == ["a1.parquet", "a[1].parquet"]
    assert [d.name for d in top.dirs] == ["p=1"]
    inner = storage.list_dir("p=1")
    assert (len(inner.files), [d.name for d in inner.dirs]) == (1001, ["sub"])
    assert all(f.size == 1 and f.modification_time > 0 for f in inner.files)
    assert calls == ["ListObjectsV2"] * 3  # the root, then two pages of p=1
    calls.clear()
    outcome = storage.delete_files(["a[1].parquet", *(f"p=1/f-{i:04d}.parquet" for i in range(1001))])
    assert (len(outcome.deleted), outcome.failed) == (1002, ())
    assert calls == ["DeleteObjects"] * 2
    assert sorted(_objects(fs, prefix)) == ["a1.parquet", "p=1/sub/x"]
    assert storage.list_dir("missing") == storage.list_dir("p=1/missing") == DirListing((), (), ())
