"""Property: over random histories, VACUUM (LITE then FULL, each dry run first) keeps every version within retention
readable by delta-rs 1.6.3 with all its rows, deletes exactly the visible files older than the horizon that no such
version needs, never touches young, hidden, linked or out-of-root files, and its dry run lists exactly what the real
run then deletes. Locally here; on the S3 API of moto_server in test_vacuum_s3.py."""

from __future__ import annotations

import time

import deltalake
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.maintenance.vacuum import vacuum
from tests.maintenance.vacuum_histories import (
    HOUR_MS,
    RETENTION_HOURS,
    all_entries,
    expired_log_paths,
    furnish,
    needed_by,
    ops,
    orphans,
    place_in_time,
    retained_versions,
    snapshot_rows,
    visible_files,
    write_history,
)


@pytest.mark.slow
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=ops, placed=orphans, data=st.data())
def test_vacuum_on_random_histories(tmp_path_factory: pytest.TempPathFactory, history, placed, data) -> None:
    root = tmp_path_factory.mktemp("history") / "table"
    latest = write_history(root, history, deltalake)
    old = data.draw(st.integers(0, latest + 1), label="commits before the horizon")
    lite_first = data.draw(st.booleans(), label="LITE first")
    now = int(time.time() * 1000)
    times = place_in_time(root, latest, old, now)
    scene = furnish(root, placed, now)
    horizon = now - RETENTION_HOURS * HOUR_MS
    kept_versions = retained_versions(times, horizon)
    rows = snapshot_rows(str(root), kept_versions, deltalake)
    needed = needed_by(str(root), kept_versions, deltalake, str(root))
    visible = visible_files(root)
    expected = {rel for rel, mtime in visible.items() if mtime < horizon and rel not in needed}
    untouched = {p: p.read_bytes() for p in scene.outside}
    assert scene.old_orphans <= expected and not scene.young_orphans & expected

    before = all_entries(root)
    if lite_first:
        dry = vacuum(DeltaTable(str(root)), mode="lite", dry_run=True)
        assert all_entries(root) == before
        real = vacuum(DeltaTable(str(root)), mode="lite")
        gone = before - all_entries(root)
        assert {f["path"] for f in dry.files_to_delete} == gone
        assert gone == (expired_log_paths(root, old) & set(visible)) - needed
        assert (real.mode, real.objects_deleted, dry.dirs_to_delete) == ("LITE", len(gone), [])
        assert not gone & (scene.old_orphans | scene.young_orphans)  # LITE never sees never-committed files
        expected -= gone
        before = all_entries(root)

    dry = vacuum(DeltaTable(str(root)), dry_run=True)
    assert all_entries(root) == before
    real = vacuum(DeltaTable(str(root)))
    gone = before - all_entries(root)
    planned = {f["path"] for f in dry.files_to_delete} | set(dry.dirs_to_delete)
    assert gone == planned
    assert {p for p in gone if p in visible} == expected
    assert real.objects_deleted == len(gone)
    assert scene.empty_old_dir in gone
    # a directory left empty is one younger than the horizon (emptied by the LITE run just now)
    for rel in all_entries(root):
        full = root / rel
        if full.is_dir() and not full.is_symlink() and not rel.startswith("_delta_log") and not any(full.iterdir()):
            assert lite_first and full.stat().st_mtime_ns // 1_000_000 >= horizon, rel

    for rel in scene.young_orphans | scene.hidden | scene.links:
        assert (root / rel).exists() or (root / rel).is_symlink(), rel
    assert {p: p.read_bytes() for p in scene.outside} == untouched
    assert snapshot_rows(str(root), kept_versions, deltalake) == rows
