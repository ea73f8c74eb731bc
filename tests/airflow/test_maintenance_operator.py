"""`DeltaMaintenanceOperator` and the example DAG example_dags/maintain_lake.py (issue 20, item 4).

The DAG runs with ``dag.test()`` in a migrated Airflow home (tests/airflow/maintain_run/run_maintain_lake.py), its
Spark work over the session's Spark Connect server (a ``spark_connect`` connection), on three tables under one
prefix that need different work:

- ``a_small``: eight one-append files (delta-rs): eight fragments, at least ``min_input_files``: OPTIMIZE;
- ``b_vacuum``: two files, the first removed by a hand-written commit whose ``deletionTimestamp`` (and the file's
  mtime) is 30 days old: past the 7-day retention, so VACUUM deletes it;
- ``nested/c_tidy``: one file: nothing to do, so no Spark (``skippedReason``), and nothing written.

Every expectation comes from the files on disk, the hand-written commit and delta-rs, not from deltalite. A second
run with a policy holding an unknown key fails every maintain task and writes nothing; the operator called directly
fails with one line naming the key.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from airflow_provider_deltalite.demo import FAST_JVM_CONF
from airflow_provider_deltalite.engine.errors import InvalidArgument
from airflow_provider_deltalite.operators.lineage import run_facet_fields
from airflow_provider_deltalite.operators.maintenance import DeltaMaintenanceOperator, xcom_health
from tests.airflow.conftest import AirflowHome
from tests.helpers import tree_state

pytestmark = pytest.mark.slow

RUNNER = Path(__file__).resolve().parent / "maintain_run" / "run_maintain_lake.py"
REPO_ROOT = Path(__file__).resolve().parents[2]
DAY_MS = 24 * 3_600_000
POLICY = {"min_input_files": 6}  # the default is 5: the plan's reason shows which one it used
GIB = 1 << 30
SMALL_FILES = 8


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


class Lake:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.small, self.vacuum, self.tidy = root / "a_small", root / "b_vacuum", root / "nested" / "c_tidy"
        for i in range(SMALL_FILES):
            _append(self.small, 10 * i, 10)
        self.small_sizes = _data_files(self.small)
        _append(self.vacuum, 0, 10)
        _append(self.vacuum, 100, 10)
        [self.removed] = _adds(self.vacuum, 0)
        self.removed_size = (self.vacuum / self.removed["path"]).stat().st_size
        now = int(time.time() * 1000)
        old = now - 30 * DAY_MS
        remove = {
            "path": self.removed["path"],
            "deletionTimestamp": old,
            "dataChange": True,
            "extendedFileMetadata": True,
            "partitionValues": {},
            "size": self.removed_size,
        }
        commit = {"timestamp": now, "operation": "DELETE", "operationParameters": {}}
        log = self.vacuum / "_delta_log" / f"{2:020d}.json"
        log.write_text(json.dumps({"commitInfo": commit}) + "\n" + json.dumps({"remove": remove}) + "\n")
        os.utime(self.vacuum / self.removed["path"], (old / 1000, old / 1000))
        _append(self.tidy, 0, 5)


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Lake:
    return Lake(tmp_path_factory.mktemp("maintain-lake"))


@pytest.fixture(scope="module")
def runs(
    airflow_home: AirflowHome, spark_connect_server: str, lake: Lake, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    host, port = spark_connect_server.removeprefix("sc://").rsplit(":", 1)
    out = tmp_path_factory.mktemp("maintain-run") / "runs.json"
    tidy_before = tree_state(lake.tidy)
    conf = {"prefix": str(lake.root), "deltalite_conn_id": "", "spark_conn_id": "spark_connect"}
    connection = {"conn_type": "spark_connect", "host": host, "port": int(port)}
    env = {
        **airflow_home.env,
        "AIRFLOW_CONN_SPARK_CONNECT": json.dumps(connection),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    }
    # the first run has a policy with an unknown key; the second maintains
    confs = [{**conf, "policy": {"bogus_key": 1}}, {**conf, "policy": POLICY}]
    proc = subprocess.run(
        [sys.executable, str(RUNNER), str(out), json.dumps(confs)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    refused, maintained = json.loads(out.read_text())
    return {
        "maintained": maintained,
        "refused": refused,
        "output": proc.stdout + proc.stderr,
        "tidy_unchanged": tree_state(lake.tidy) == tidy_before,
    }


def test_one_mapped_task_per_table_and_a_summary(runs: dict[str, Any], lake: Lake) -> None:
    run = runs["maintained"]
    assert run["state"] == "success"
    assert run["tasks"] == {
        "find_tables": "success",
        "maintain[0]": "success",
        "maintain[1]": "success",
        "maintain[2]": "success",
        "summary": "success",
    }
    assert run["xcom"]["find_tables"] == [str(lake.small), str(lake.vacuum), str(lake.tidy)]
    assert run["xcom"]["summary"] == [
        f"{lake.small}: optimize; files {SMALL_FILES} -> 1, small files {SMALL_FILES} -> 1",
        f"{lake.vacuum}: vacuum; files 1 -> 1, small files 1 -> 1",
        f"{lake.tidy}: nothing; files 1 -> 1, small files 1 -> 1 ({run['xcom']['maintain[2]']['skippedReason']})",
    ]


def test_the_small_file_table_is_compacted(runs: dict[str, Any], lake: Lake) -> None:
    result = runs["maintained"]["xcom"]["maintain[0]"]
    assert set(result) == {"plan", "healthBefore", "healthAfter", "run", "skippedReason"}
    assert result["skippedReason"] is None
    plan = result["plan"]
    assert (plan["tableUri"], plan["version"]) == (str(lake.small), SMALL_FILES - 1)
    assert plan["policy"]["min_input_files"] == 6
    [action] = plan["actions"]
    assert action["operation"] == "optimize"
    [reason] = action["reasons"]
    assert (reason["metric"], reason["value"], reason["policyKey"], reason["threshold"]) == (
        "fragments",
        SMALL_FILES,
        "min_input_files",
        6,
    )
    size = sum(lake.small_sizes.values())
    assert action["estimate"] == {
        "bytesRead": size,
        "bytesWritten": size,
        "filesRemoved": SMALL_FILES,
        "filesAdded": -(-size // GIB),
        "filesDeleted": 0,
    }
    before, after = result["healthBefore"], result["healthAfter"]
    assert (before["version"], before["files"], before["bytes"], before["rows"]) == (
        SMALL_FILES - 1,
        SMALL_FILES,
        sum(lake.small_sizes.values()),
        10 * SMALL_FILES,
    )
    assert (before["smallFiles"], before["partitionsTruncated"], len(before["partitions"])) == (SMALL_FILES, False, 1)
    dt = deltalake.DeltaTable(str(lake.small))
    [live] = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    assert dt.version() == SMALL_FILES  # one OPTIMIZE commit
    assert (after["version"], after["files"], after["bytes"], after["rows"]) == (
        SMALL_FILES,
        1,
        live["size_bytes"],
        10 * SMALL_FILES,
    )
    assert after["lastRuns"]["optimizeVersion"] == SMALL_FILES
    assert _rows(lake.small) == list(range(10 * SMALL_FILES))
    run = result["run"]
    assert (run["tableUri"], run["planVersion"]) == (str(lake.small), SMALL_FILES - 1)
    [done] = run["actions"]
    stats = done["stats"]
    assert (done["operation"], stats["executor"], stats["readVersion"], stats["committedVersion"]) == (
        "optimize",
        "spark",
        SMALL_FILES - 1,
        SMALL_FILES,
    )
    assert (stats["numFilesRemoved"], stats["filesRemoved"]["totalSize"]) == (SMALL_FILES, size)
    assert (stats["numFilesAdded"], stats["filesAdded"]["totalSize"]) == (1, live["size_bytes"])


def test_the_old_tombstone_is_vacuumed(runs: dict[str, Any], lake: Lake) -> None:
    result = runs["maintained"]["xcom"]["maintain[1]"]
    assert result["skippedReason"] is None
    [action] = result["plan"]["actions"]
    assert action["operation"] == "vacuum"
    assert action["estimate"] == {
        "bytesRead": 0,
        "bytesWritten": 0,
        "filesRemoved": 0,
        "filesAdded": 0,
        "filesDeleted": 1,
    }
    before, after = result["healthBefore"], result["healthAfter"]
    assert (before["version"], before["files"]) == (2, 1)
    tombstones = before["tombstones"]
    assert (tombstones["files"], tombstones["bytes"]) == (1, lake.removed_size)
    assert (tombstones["reclaimableFiles"], tombstones["reclaimableBytes"]) == (1, lake.removed_size)
    assert (after["version"], after["files"]) == (4, 1)  # VACUUM START and VACUUM END
    assert after["lastRuns"]["vacuumVersion"] == 4
    assert not (lake.vacuum / lake.removed["path"]).exists()
    assert len(_data_files(lake.vacuum)) == 1
    assert deltalake.DeltaTable(str(lake.vacuum)).version() == 4
    assert _rows(lake.vacuum) == list(range(100, 110))
    [done] = result["run"]["actions"]
    stats = done["stats"]
    assert (done["operation"], stats["executor"], stats["committedVersions"]) == ("vacuum", "spark", [3, 4])
    assert (stats["numFilesToDelete"], stats["sizeOfDataToDelete"], stats["objectsDeleted"]) == (
        1,
        lake.removed_size,
        1,
    )


def test_the_tidy_table_is_left_alone_without_spark(runs: dict[str, Any], lake: Lake) -> None:
    result = runs["maintained"]["xcom"]["maintain[2]"]
    assert result["plan"]["actions"] == []
    assert result["run"] is None
    assert result["skippedReason"] == "nothing to do: the plan of version 0 has no action"
    assert runs["tidy_unchanged"]
    # before and after (nothing ran, nothing changed) hold the figures delta-rs reads: one five-row file of version
    # 0, small under the default 1 GiB minimum file size, but one fragment is below min_input_files
    dt = deltalake.DeltaTable(str(lake.tidy))
    [live] = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    assert (dt.version(), live["num_records"]) == (0, 5)
    for health in (result["healthBefore"], result["healthAfter"]):
        assert (health["version"], health["files"], health["bytes"], health["rows"]) == (0, 1, live["size_bytes"], 5)
        assert (health["minFileSize"], health["smallFiles"], health["smallBytes"]) == (GIB, 1, live["size_bytes"])
        assert (health["deletedRows"], health["tombstones"]["files"], health["lastRuns"]["optimizeVersion"]) == (
            0,
            0,
            None,
        )
        assert [(p["partitionValues"], p["files"], p["bytes"]) for p in health["partitions"]] == [
            ({}, 1, live["size_bytes"])
        ]


def test_an_unknown_policy_key_fails_every_table_and_writes_nothing(runs: dict[str, Any]) -> None:
    run = runs["refused"]
    assert run["state"] == "failed"
    assert run["tasks"] == {
        "find_tables": "success",
        "maintain[0]": "failed",
        "maintain[1]": "failed",
        "maintain[2]": "failed",
        "summary": "upstream_failed",
    }
    assert "unknown policy key 'bogus_key'" in runs["output"]
    assert run["tree_unchanged"]


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
