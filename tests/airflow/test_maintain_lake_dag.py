"""The example DAG example_dags/maintain_lake.py (issue 31, item 2) with ``dag.test()`` in a migrated Airflow home
(tests/airflow/maintain_run/run_maintain_lake.py), its Spark work over the session's Spark Connect server.

Seven tables under two prefixes (tests/lake_tables.py), written by delta-rs: four compactions of different gain per
byte, a VACUUM, a table with nothing to do and one the lake policy excludes. The budget admits the two compactions
with the most files removed per byte read, computed here from the files on disk; the DAG must plan the lake once,
map exactly those tables (and the VACUUM, which rewrites nothing), report the others with their reason, and leave
them as they were. A second run with a bad budget and one with an unknown policy key fail in the planning task and
write nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import deltalake
import pytest

from tests.airflow.conftest import AirflowHome
from tests.helpers import tree_state
from tests.lake_tables import POLICY, REWRITES, Lake

pytestmark = pytest.mark.slow

RUNNER = Path(__file__).resolve().parent / "maintain_run" / "run_maintain_lake.py"
REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Lake:
    return Lake(tmp_path_factory.mktemp("maintain-lake"))


@pytest.fixture(scope="module")
def runs(
    airflow_home: AirflowHome, spark_connect_server: str, lake: Lake, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    host, port = spark_connect_server.removeprefix("sc://").rsplit(":", 1)
    out = tmp_path_factory.mktemp("maintain-run") / "runs.json"
    history = tmp_path_factory.mktemp("history") / "ops"
    versions = lake.state()
    untouched = {n: tree_state(lake.path(n)) for n in ["b_few3", "f_excluded"]}
    conf = {
        "prefixes": [str(p) for p in lake.prefixes],
        "deltalite_conn_id": "",
        "spark_conn_id": "spark_connect",
        "policy": POLICY,
        "budget_bytes": lake.interesting_budget(),
        "history_uri": str(history),
    }
    connection = {"conn_type": "spark_connect", "host": host, "port": int(port)}
    env = {
        **airflow_home.env,
        "AIRFLOW_CONN_SPARK_CONNECT": json.dumps(connection),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    }
    # a budget of zero and an unknown policy key are refused by the planning task; the third run maintains
    confs = [{**conf, "budget_bytes": 0}, {**conf, "policy": {"bogus_key": 1}}, conf]
    proc = subprocess.run(
        [sys.executable, str(RUNNER), str(out), json.dumps(confs)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    zero, bogus, maintained = json.loads(out.read_text())
    return {
        "zero": zero,
        "bogus": bogus,
        "maintained": maintained,
        "output": proc.stdout + proc.stderr,
        "versions": versions,
        "after": lake.state(),
        "untouched": {n: tree_state(lake.path(n)) == before for n, before in untouched.items()},
        "history": history,
    }


def test_the_lake_plan_chooses_exactly_the_most_gain_per_byte(runs: dict[str, Any], lake: Lake) -> None:
    run = runs["maintained"]
    assert run["state"] == "success"
    chosen = lake.chosen_within(lake.interesting_budget())
    assert chosen == lake.ranked()[:2] == ["c_small12", "a_small8"]
    plan = run["xcom"]["plan"]  # the run's XCom holds the lake plan
    assert [Path(t["tableUri"]).name for t in plan["tables"] if t["chosen"]] == ["d_vacuum", *chosen]
    statuses = {Path(t["tableUri"]).name: (t["status"], t["reason"]) for t in plan["tables"] if not t["chosen"]}
    left = [n for n in lake.ranked() if n not in chosen]
    assert sorted(statuses) == sorted([*left, "b_few3", "f_excluded"])
    assert statuses["b_few3"] == ("nothing to do", "nothing to do")
    assert statuses["f_excluded"] == ("excluded", "excluded by the lake policy")
    for name in left:
        assert statuses[name][0] == "budget"
        assert statuses[name][1].startswith("budget: optimize: rewriting "), statuses[name]
    rewrites = [a for a in plan["actions"] if a["operation"] == "optimize"]
    assert [(Path(a["tableUri"]).name, a["chosen"]) for a in rewrites] == [(n, n in chosen) for n in lake.ranked()]
    assert plan["total"]["bytesRead"] == sum(lake.rewrite_bytes[n] for n in chosen)
    assert plan["budget"]["bytesRewritten"] == lake.interesting_budget()


def test_one_mapped_task_per_chosen_table_with_its_share(runs: dict[str, Any], lake: Lake) -> None:
    run = runs["maintained"]
    assert run["tasks"] == {
        "plan": "success",
        "chosen": "success",
        "maintain[0]": "success",
        "maintain[1]": "success",
        "maintain[2]": "success",
        "summary": "success",
    }
    mapped = run["xcom"]["chosen"]
    assert [Path(m["table_uri"]).name for m in mapped] == ["d_vacuum", "c_small12", "a_small8"]
    shares = [(m["policy"]["max_rewrite_bytes_per_run"], m["policy"]["max_files_deleted_per_run"]) for m in mapped]
    assert shares == [(0, 1), (lake.rewrite_bytes["c_small12"], 0), (lake.rewrite_bytes["a_small8"], 0)]
    for index, name in enumerate(["c_small12", "a_small8"], start=1):
        result = run["xcom"][f"maintain[{index}]"]
        assert [a["operation"] for a in result["plan"]["actions"]] == ["optimize"]
        assert (result["healthBefore"]["files"], result["healthAfter"]["files"]) == (REWRITES[name][0], 1)
        [done] = result["run"]["actions"]
        assert (done["stats"]["executor"], done["stats"]["filesRemoved"]["totalSize"]) == (
            "spark",
            lake.rewrite_bytes[name],
        )
    vacuum = run["xcom"]["maintain[0]"]
    assert [a["operation"] for a in vacuum["plan"]["actions"]] == ["vacuum"]
    assert vacuum["run"]["actions"][0]["stats"]["objectsDeleted"] == 1


def test_the_tables_on_disk_and_the_summary(runs: dict[str, Any], lake: Lake) -> None:
    before, after = runs["versions"], runs["after"]
    chosen = lake.chosen_within(lake.interesting_budget())
    for name in REWRITES:
        files = len(deltalake.DeltaTable(lake.uri(name)).file_uris())
        expected = (before[name] + 1, 1) if name in chosen else (before[name], REWRITES[name][0])
        assert (after[name], files) == expected, name
    assert after["d_vacuum"] == before["d_vacuum"] + 2 and not lake.removed_path.exists()
    assert runs["untouched"] == {"b_few3": True, "f_excluded": True}
    lines = runs["maintained"]["xcom"]["summary"]
    assert sorted(lines) == sorted(
        [f"{lake.uri(n)}: chosen: optimize; files {REWRITES[n][0]} -> 1" for n in chosen]
        + [f"{lake.uri('d_vacuum')}: chosen: vacuum; files 1 -> 1"]
        + [line for line in lines if ": budget: " in line]
        + [
            f"{lake.uri('b_few3')}: nothing to do: nothing to do",
            f"{lake.uri('f_excluded')}: excluded: excluded by the lake policy",
        ]
    )
    assert len([line for line in lines if ": budget: " in line]) == len(REWRITES) - len(chosen)


def test_the_history_holds_one_row_per_operation(runs: dict[str, Any], lake: Lake) -> None:
    rows = deltalake.DeltaTable(str(runs["history"])).to_pyarrow_table().to_pylist()
    chosen = lake.chosen_within(lake.interesting_budget())
    got = sorted((Path(r["table_uri"]).name, r["operation"], r["outcome"], r["executor"]) for r in rows)
    assert got == sorted(
        [(n, "optimize", "committed", "spark") for n in chosen] + [("d_vacuum", "vacuum", "committed", "spark")]
    )


@pytest.mark.parametrize(("run", "message"), [
    ("zero", "budget bytes_rewritten must be a whole number above 0, got 0"),
    ("bogus", "unknown policy key 'bogus_key'"),
])  # fmt: skip
def test_bad_input_fails_the_planning_task_and_writes_nothing(runs: dict[str, Any], run: str, message: str) -> None:
    record = runs[run]
    assert record["state"] == "failed"
    assert record["tasks"]["plan"] == "failed"
    assert {k: v for k, v in record["tasks"].items() if k != "plan"} in (
        {"chosen": "upstream_failed", "maintain": "upstream_failed", "summary": "upstream_failed"},
        {"chosen": "upstream_failed", "summary": "upstream_failed"},
    )
    assert message in runs["output"]
    assert record["tree_unchanged"]
