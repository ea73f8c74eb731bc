"""`DeltaMaintenanceOperator` called directly (issue 20, item 4): a policy holding an unknown key fails with one line
naming it, XCom keeps the worst partitions, the lineage facet, and the spark-submit route.

The example DAG that maps this operator over a lake (example_dags/maintain_lake.py) is tested in
tests/airflow/test_maintain_lake_dag.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from airflow_provider_deltalite.demo import FAST_JVM_CONF
from airflow_provider_deltalite.engine.errors import InvalidArgument
from airflow_provider_deltalite.operators.lineage import run_facet_fields
from airflow_provider_deltalite.operators.maintenance import DeltaMaintenanceOperator, xcom_health
from tests.helpers import tree_state

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]


def _append(path: Path, first: int, rows: int) -> None:
    data = pa.table({"id": list(range(first, first + rows)), "name": [f"n{i}" for i in range(first, first + rows)]})
    deltalake.write_deltalake(str(path), data, mode="append")


def _rows(path: Path) -> list[int]:
    return sorted(deltalake.DeltaTable(str(path)).to_pyarrow_table()["id"].to_pylist())


def _adds(path: Path, version: int) -> list[dict[str, Any]]:
    text = (path / "_delta_log" / f"{version:020d}.json").read_text()
    return [a["add"] for a in map(json.loads, text.splitlines()) if "add" in a]


def _data_files(path: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in path.glob("*.parquet")}


def test_the_operator_names_the_unknown_key_in_one_line(tmp_path: Path) -> None:
    _append(tmp_path / "t", 0, 3)
    (tmp_path / "policy.json").write_text('{"min_input_file": 3}')
    state = tree_state(tmp_path)
    for policy in ({"bogus_key": 1}, '{"bogus_key": 1}'):
        op = DeltaMaintenanceOperator(task_id="m", table_uri=str(tmp_path / "t"), policy=policy)
        with pytest.raises(InvalidArgument) as raised:
            op.execute({})
        message = str(raised.value)
        assert message.startswith(f"table {tmp_path / 't'}: unknown policy key 'bogus_key'"), message
        assert "\n" not in message
    op = DeltaMaintenanceOperator(task_id="m", table_uri=str(tmp_path / "t"), policy=str(tmp_path / "policy.json"))
    with pytest.raises(InvalidArgument) as raised:
        op.execute({})
    assert str(raised.value).startswith(f"table {tmp_path / 't'}: unknown policy key 'min_input_file'")
    op = DeltaMaintenanceOperator(task_id="m", table_uri=str(tmp_path / "t"), policy="{'bogus': 1}")  # Jinja's
    with pytest.raises(InvalidArgument) as raised:
        op.execute({})
    assert str(raised.value).startswith(f"table {tmp_path / 't'}: unknown policy key 'bogus'")
    op = DeltaMaintenanceOperator(task_id="m", table_uri=str(tmp_path / "t"), policy="{not json")
    with pytest.raises(InvalidArgument) as raised:
        op.execute({})
    assert str(raised.value) == f"table {tmp_path / 't'}: policy is not valid JSON (line 1, column 2)"
    assert tree_state(tmp_path) == state


def test_xcom_health_keeps_the_worst_hundred_partitions() -> None:
    partitions = [{"partitionValues": {"d": str(i)}, "files": i % 7, "smallFiles": i % 5} for i in range(150)]
    health = {"files": 1, "partitions": partitions}
    kept = xcom_health(health)
    # independent: 30 partitions each for smallFiles 4, 3, 2 and 1 (120 > 100): all of 4, 3, 2 (90), then the ten
    # with smallFiles 1 and the most files, first by position among equals
    ones = sorted((p for p in partitions if p["smallFiles"] == 1), key=lambda p: -p["files"])[:10]
    expected = [p for p in partitions if p["smallFiles"] >= 2 or p in ones]
    assert kept == {"files": 1, "partitions": expected, "partitionsTruncated": True}
    hundred = partitions[:100]
    assert xcom_health({"partitions": hundred}) == {"partitions": hundred, "partitionsTruncated": False}


def test_the_lineage_facet_holds_table_level_health() -> None:
    stats = {
        "plan": {"actions": []},
        "healthBefore": {"files": 8, "partitions": [{}], "partitionsTruncated": False},
        "healthAfter": {"files": 1, "partitions": [{}], "partitionsTruncated": False},
        "run": {"actions": [{"operation": "optimize"}], "filesToDelete": ["x"]},
        "skippedReason": None,
    }
    assert run_facet_fields("MAINTAIN", stats) == {
        "operation": "MAINTAIN",
        "stats": {"actions": [{"operation": "optimize"}], "skippedReason": None},
        "healthBefore": {"files": 8},
        "healthAfter": {"files": 1},
    }
    assert run_facet_fields("OPTIMIZE", {"numFilesRemoved": 3, "plan": {}}) == {
        "operation": "OPTIMIZE",
        "stats": {"numFilesRemoved": 3},
    }


def test_spark_submit_runs_the_planned_actions(tmp_path: Path) -> None:
    # the spark-submit route: the plan reaches the driver as --options and runs there as planned
    path = tmp_path / "t"
    for i in range(6):
        _append(path, 10 * i, 10)
    size = sum(_data_files(path).values())
    op = DeltaMaintenanceOperator(task_id="m", table_uri=str(path), conf=FAST_JVM_CONF)
    result = op.execute({})
    assert op._hook is not None  # spark-submit ran
    assert [a["operation"] for a in result["plan"]["actions"]] == ["optimize"]
    [done] = result["run"]["actions"]
    stats = done["stats"]
    assert (stats["executor"], stats["numFilesRemoved"], stats["numFilesAdded"], stats["committedVersion"]) == (
        "spark",
        6,
        1,
        6,
    )
    assert stats["filesRemoved"]["totalSize"] == size
    assert (result["healthBefore"]["files"], result["healthAfter"]["files"], result["skippedReason"]) == (6, 1, None)
    assert deltalake.DeltaTable(str(path)).version() == 6
    assert _rows(path) == list(range(60))
    from openlineage.client.serde import Serde

    facet = Serde.to_dict(op.get_openlineage_facets_on_complete(None).run_facets["deltalite"])
    [facet_action] = facet["stats"]["actions"]  # (Serde leaves the None values out)
    assert (facet["operation"], facet_action["stats"]["numFilesRemoved"], facet["stats"]["planVersion"]) == (
        "MAINTAIN",
        6,
        5,
    )
    assert (facet["healthBefore"]["files"], facet["healthAfter"]["files"], facet["healthAfter"]["version"]) == (6, 1, 6)
    assert "partitions" not in facet["healthBefore"] and "partitions" not in facet["healthAfter"]
