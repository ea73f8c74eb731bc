"""Sustained load on one table on moto's S3 API (issue 9, item 5): the short run of tests/reliability/soak.py.

4 appender, 3 OPTIMIZE and 1 VACUUM processes and a NewVersionSensor poller work on one table for
``DELTALITE_SOAK_SECONDS`` (default 45) seconds, longer until VACUUM has deleted files; then no row is lost or
duplicated, every version is written once by the loop that reported it, VACUUM deleted no live file, and the sensor
reported every append exactly once. The 5-minute run is ``python -m tests.reliability.soak --seconds 300``.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_deltalite import DeltaTable
from tests.reliability.soak import (
    APPENDERS,
    OPTIMIZERS,
    analyze,
    append_rows,
    create_table,
    run_soak,
    summary_table,
    table_uri,
)

SECONDS = float(os.environ.get("DELTALITE_SOAK_SECONDS", "45"))


@pytest.mark.s3
@pytest.mark.airflow  # the soak polls with a NewVersionSensor
@pytest.mark.slow
def test_sustained_load_loses_no_row_version_file_or_event(s3_endpoint: dict[str, Any], tmp_path: Path) -> None:
    # past SECONDS until VACUUM has deleted files (at most three times as long): a slow machine once ran 3 VACUUM runs
    # of 17 s in 45 s against a 20-second retention, and none could delete a file yet
    report = run_soak(s3_endpoint, SECONDS, tmp_path / "soak", vacuumed_within=3 * SECONDS)
    print(summary_table(report))  # shown with -s or on failure
    c = report["counts"]

    assert report["violations"] == []
    assert report["facts"] == {
        "versions_contiguous": True,
        "shared_txn_ids": 0,
        "unclaimed_versions": 0,
        "versions_claimed_twice": 0,
        "rows_equal_committed": True,
        "duplicate_ids": 0,
        "deleted_live_files": 0,
        "missing_live_files": 0,
        "sensor_exactly_data_versions": True,
        "data_versions": c["append_commits"],
    }
    # every version after 0 is one loop's commit, and the rows are exactly the appended ones
    assert c["final_version"] == sum(c["commits"].values())
    assert c["final_rows"] == c["appended_rows"]
    assert c["sensor_versions_reported"] == c["append_commits"]
    assert c["errors"] == 0
    # each kind of process really did its work, so none of the checks above held vacuously
    assert [c["commits"][f"appender-{i}"] > 0 for i in range(APPENDERS)] == [True] * APPENDERS
    assert sum(c["commits"][f"optimize-{i}"] for i in range(OPTIMIZERS)) == c["optimize_commits"] > 0
    assert c["files_vacuumed"] > 0 and c["vacuum_runs_deleting"] > 0
    assert c["sensor_events"] > 0


@pytest.mark.s3
def test_the_checks_catch_a_lost_row_a_deleted_live_file_and_a_repeated_event(
    s3_endpoint: dict[str, Any], tmp_path: Path
) -> None:
    """The soak's checker on a real two-append table, with worker logs that break each invariant once."""
    import s3fs

    bucket = f"soakcheck-{uuid.uuid4().hex[:8]}"
    s3fs.S3FileSystem(**s3_endpoint).call_s3("create_bucket", Bucket=bucket)
    uri = table_uri(bucket)
    create_table(uri, s3_endpoint)
    table = DeltaTable(uri, s3_endpoint)
    appended = []
    for seq, ids in ((0, [0, 1]), (2, [2])):
        txn, add = append_rows(table, "p0", ids, seq, seq, ["x"] * len(ids))
        appended.append((txn.commit("WRITE"), add))
    (first, first_add), (second, second_add) = appended
    timing = {"attempts": 1, "written_ms": 0, "committed_ms": 0}
    logs = {
        # the second append claims an id (3) it never wrote: a lost row
        "appender-0": [
            {
                "event": "commit",
                "version": 1,
                "txn_id": first.txn_id,
                "path": first_add["path"],
                "ids": [0, 1],
                **timing,
            },
            {
                "event": "commit",
                "version": 2,
                "txn_id": second.txn_id,
                "path": second_add["path"],
                "ids": [2, 3],
                **timing,
            },
        ],
        # a VACUUM that says it deleted the first file, live from version 1 on (and committed no START/END)
        "vacuum-0": [
            {
                "event": "run",
                "snapshot_version": 1,
                "versions": [],
                "deleted": [first_add["path"]],
                "objects_deleted": 1,
                "files_to_delete": 1,
                "seconds": 0,
            }
        ],
        # the sensor reports version 1 twice (the second report from the wrong baseline)
        "sensor-0": [
            {"event": "report", "baseline": 0, "version": 1, "versions": [1], "added_rows": 2},
            {"event": "report", "baseline": 0, "version": 2, "versions": [1, 2], "added_rows": 3},
            {"event": "done", "pokes": 3},
        ],
    }
    workdir = tmp_path / "logs"
    workdir.mkdir()
    for name, events in logs.items():
        (workdir / f"{name}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))

    report = analyze(uri, s3_endpoint, workdir, {name: 0 for name in logs})

    assert (first.version, second.version) == (1, 2)
    assert report["violations"] == [
        "vacuum: versions [] are operations [] with metrics [], not VACUUM START (>= 1 files to delete) and VACUUM END "
        "(1 deleted) without file actions",
        "rows: 1 committed ids lost (e.g. [3]), 0 extra (e.g. [])",
        f"VACUUM from version 1 deleted {first_add['path']}, live until inf: live in VACUUM's own snapshot (added in "
        "version 1)",
        "sensor: 3 versions reported vs 2 data versions; duplicated [1], missed [], not data [], in order: True",
        "sensor: a report's baseline is not the version the previous report ended at",
        "sensor: added_rows sum to 5, 4 rows were appended",
    ]
    assert report["facts"] == {
        "versions_contiguous": True,
        "shared_txn_ids": 0,
        "unclaimed_versions": 0,
        "versions_claimed_twice": 0,
        "rows_equal_committed": False,
        "duplicate_ids": 0,
        "deleted_live_files": 1,
        "missing_live_files": 0,
        "sensor_exactly_data_versions": False,
        "data_versions": 2,
    }
