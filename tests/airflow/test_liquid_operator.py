"""OptimizeOperator on a liquid-clustered table: ``full`` and ``min_cube_size`` from templates to the job's commit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_provider_deltalite.demo import FAST_JVM_CONF
from airflow_provider_deltalite.operators.optimize import OptimizeOperator
from tests.maintenance import liquid_tables as lt
from tests.maintenance.test_liquid_clustering import _actions, _delta_rs_rows, _kernel_rows


def _table(path: Path) -> Path:
    table = lt.clustered_points(path, files=3, rows=500)
    # a file clustered on other columns: only `full` rewrites it
    lt.append(path, lt.points(9, 500), provider="liquid", tags={"ZCUBE_ID": "old", "ZCUBE_ZORDER_BY": '["y"]'})
    return table


def test_full_and_min_cube_size_render_into_the_plan_without_starting_spark(tmp_path: Path) -> None:
    path = _table(tmp_path / "t")
    op = OptimizeOperator(
        task_id="o",
        table_uri=str(path),
        full="{{ params.full }}",
        min_cube_size="{{ params.cube }}",
        min_small_files="{{ params.n }}",
    )
    op.render_template_fields({"params": {"full": "true", "cube": "123456789", "n": "100"}, "ds": "2026-11-20"})
    stats = op.execute({})
    assert stats["skippedReason"] == "4 files to compact, fewer than min_small_files=100"
    c = stats["clusteringStats"]
    assert (c["isFull"], c["minCubeSize"], c["mergedFiles"]["num"], c["skippedOtherFiles"]["num"]) == (
        True,
        123456789,
        4,
        0,
    )
    assert op._hook is None
    assert lt.next_version(path) == 5


@pytest.mark.slow
def test_full_reaches_the_spark_job_and_its_commit(tmp_path: Path) -> None:
    path = _table(tmp_path / "t")
    before = _delta_rs_rows(path), _kernel_rows(path)
    op = OptimizeOperator(task_id="o", table_uri=str(path), full="{{ params.full }}", conf=FAST_JVM_CONF)
    op.render_template_fields({"params": {"full": "True"}, "ds": "2026-11-20"})
    stats = op.execute({})
    assert (stats["committedVersion"], stats["numFilesRemoved"], stats["executor"]) == (5, 4, "spark")
    actions = _actions(path, 5)
    assert actions[0]["commitInfo"]["operationParameters"]["isFull"] is True
    adds = [a["add"] for a in actions if "add" in a]
    assert all(a["clusteringProvider"] == "liquid" and a["tags"]["ZCUBE_ZORDER_BY"] == '["x","y"]' for a in adds)
    assert json.loads(adds[0]["stats"])["numRecords"] == 2000
    assert (_delta_rs_rows(path), _kernel_rows(path)) == before
