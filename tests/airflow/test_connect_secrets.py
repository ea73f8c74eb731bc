"""Secrets sweep over Spark Connect (issue 18, item 3): storage credentials and the connection's token reach no query
plan, Spark UI page, event log, server log, Airflow log, XCom or error when the operators run through a
``spark_connect`` connection.

One ``dag.test()`` run of the Spark Connect DAG (tests/airflow/connect_dags/connect_dags.py), each task in a task
process of its own under Airflow's supervisor, runs OPTIMIZE, Z-order and VACUUM on a moto S3 table whose deltalite
connection holds distinctive random credentials, against a Spark Connect server started for this test
(`tests.airflow.connect_server`) that requires an authentication token (``SPARK_CONNECT_AUTHENTICATE_TOKEN``, which
the 4.2 server honours), writes an uncompressed event log (every Connect statement's plan text is in it) and serves
its UI on a loopback port. The token is on the ``spark_connect`` connection (its password); with pyspark's client a
token without TLS is sent only to ``localhost``, so the connection names the server so. Two tasks fail: one through
an unreachable address, one with a wrong token (a secret too). One more OPTIMIZE names its table by its Glue name
(moto's Glue): the worker resolves it with the same credentials, and the Connect session gets the location.

Searched, with every form of each secret `tests.airflow.test_secrets.secret_forms` knows: the Connect tab (the
sessions and their statements), the SQL tab and the REST API's SQL executions with their plan descriptions, jobs,
stages and environment, the event log, the server's log, the task log files, the run's output, XCom and rendered
fields, every row of the metadata database, every file of the Airflow home, the failed tasks' exceptions and the
table's commits. The other tests check that these places hold what they should, so the sweep cannot pass by
searching nothing.
"""

from __future__ import annotations

import json
import re
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from airflow_provider_deltalite.demo import create_small_file_table
from tests import glue_tables
from tests.airflow.conftest import AirflowHome
from tests.airflow.connect_server import start_sweep_server
from tests.airflow.test_connect_operators import ConnectRun, run_connect_dag
from tests.airflow.test_secrets import _core, _db_rows, _files_under, hits_in, secret_forms
from tests.executors.spark_cluster import free_port

pytestmark = [pytest.mark.slow, pytest.mark.s3]

SUCCEEDING = ("optimize", "zorder", "vacuum", "zorder_shuffle", "optimize_skipped", "optimize_glue")
FAILING = ("optimize_unreachable", "optimize_bad_where", "optimize_bad_token")


@dataclass
class ConnectSweep:
    secrets: dict[str, str]
    run: ConnectRun
    table_uri: str
    idle_uri: str
    address: str
    places: dict[str, dict[str, bytes]] = field(default_factory=dict)
    ui: dict[str, bytes] = field(default_factory=dict)
    event_log: dict[str, bytes] = field(default_factory=dict)
    server_log: bytes = b""


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read()


def ui_pages(ui: str) -> dict[str, bytes]:
    """The Spark UI pages and REST answers that show queries, plans and settings, by path."""
    [app] = json.loads(_get(f"{ui}/api/v1/applications"))
    api = f"{ui}/api/v1/applications/{app['id']}"
    pages = {
        path: _get(f"{ui}{path}")
        for path in ("/connect/", "/SQL/", "/jobs/", "/stages/", "/environment/", "/executors/")
    }
    for path in ("sql?details=true&planDescription=true&length=10000", "jobs", "stages?details=true", "environment"):
        pages[f"/api/v1/.../{path}"] = _get(f"{api}/{path}")
    for session in sorted(set(re.findall(rb"connect/session/\?id=([0-9a-fA-F-]+)", pages["/connect/"]))):
        path = f"/connect/session/?id={session.decode()}"
        pages[path] = _get(f"{ui}{path}")
    for execution in json.loads(pages["/api/v1/.../sql?details=true&planDescription=true&length=10000"]):
        path = f"/SQL/execution/?id={execution['id']}"
        pages[path] = _get(f"{ui}{path}")
    return pages


@pytest.fixture(scope="module")
def sweep(
    airflow_home: AirflowHome, s3_endpoint: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> ConnectSweep:
    import s3fs

    root = tmp_path_factory.mktemp("connect-secrets")
    secrets = {
        "aws_access_key_id": f"AKIA{_core()[:16].upper()}",
        "aws_secret_access_key": f"wJalr/{_core()}+K7MDENG=",
        "aws_session_token": f"IQoJb3JpZ2luX2Vj//{_core()}+tok==",
        "spark_connect_token": f"sct-{_core()}",
        "wrong_token": f"wrong-{_core()}",
    }
    bucket = f"connect-secrets-{uuid.uuid4().hex[:8]}"
    s3 = {
        **s3_endpoint,
        "key": secrets["aws_access_key_id"],
        "secret": secrets["aws_secret_access_key"],
        "token": secrets["aws_session_token"],
    }
    s3fs.S3FileSystem(**s3).call_s3("create_bucket", Bucket=bucket)
    create_small_file_table(f"s3://{bucket}/events", files=6, rows_per_file=20, storage_options=s3)
    create_small_file_table(f"s3://{bucket}/shuffled", files=4, rows_per_file=10, storage_options=s3)
    create_small_file_table(f"s3://{bucket}/compacted", files=2, rows_per_file=5, storage_options=s3)
    create_small_file_table(f"s3://{bucket}/idle", files=4, rows_per_file=5, storage_options=s3)
    create_small_file_table(f"s3://{bucket}/glued", files=4, rows_per_file=5, storage_options=s3)
    glue_database = f"connect_{uuid.uuid4().hex[:8]}"
    glue_tables.register(
        glue_tables.glue_client(s3_endpoint),
        glue_database,
        [glue_tables.spark_delta_catalog(glue_database, "glued", f"s3://{bucket}/glued")],
    )

    ui_port = free_port()
    server = start_sweep_server(
        root / "server", token=secrets["spark_connect_token"], event_log_dir=root / "events", ui_port=ui_port
    )
    try:
        port = int(server.url.rsplit(":", 1)[1])
        unreachable = free_port()
        lake_extra = {
            "aws_access_key_id": secrets["aws_access_key_id"],
            "aws_secret_access_key": secrets["aws_secret_access_key"],
            "aws_session_token": secrets["aws_session_token"],
            "endpoint_url": s3_endpoint["endpoint_url"],
            "region_name": "us-east-1",
        }
        connect = {"conn_type": "spark_connect", "host": "localhost", "port": port, "login": "deltalite-sweep"}
        connections = {
            "lake": {"conn_type": "deltalite", "host": f"s3://{bucket}", "extra": lake_extra},
            "lake_glue": {
                "conn_type": "deltalite",
                "host": f"glue://{glue_database}",
                "extra": {**lake_extra, "glue_endpoint": s3_endpoint["endpoint_url"], "glue_region": "us-east-1"},
            },
            "spark_connect": {**connect, "password": secrets["spark_connect_token"]},
            "spark_bad_token": {**connect, "password": secrets["wrong_token"]},
            "spark_unreachable": {"conn_type": "spark_connect", "host": "127.0.0.1", "port": unreachable},
        }
        run = run_connect_dag(
            airflow_home,
            root / "out",
            root / "work",
            connections,
            {"DELTALITE_CONNECT_BAD_TOKEN": "1", "DELTALITE_CONNECT_GLUE": "1", "AWS_EC2_METADATA_DISABLED": "true"},
        )
        ui = ui_pages(f"http://127.0.0.1:{ui_port}")
    finally:
        server.stop()  # the event log is complete once the server stopped
    result = ConnectSweep(secrets, run, f"s3://{bucket}/events", f"s3://{bucket}/idle", f"localhost:{port}")
    result.ui = ui
    result.event_log = {str(p.relative_to(root)): p.read_bytes() for p in _files_under(root / "events")}
    result.server_log = (root / "server" / "connect.log").read_bytes()

    fs = s3fs.S3FileSystem(**s3)
    commits = {name: fs.cat_file(name) for name in fs.find(f"{bucket}/events/_delta_log") if name.endswith(".json")}
    log_dir = airflow_home.path / "logs"

    def dumps(value: Any) -> bytes:
        return json.dumps(value, default=str).encode()

    result.places = {
        "Spark UI pages and REST answers (Connect tab, SQL plans, jobs, stages, environment)": ui,
        "Spark event log (Connect statements, SQL plans)": result.event_log,
        "Spark Connect server log": {"connect.log": result.server_log},
        "run stdout and stderr": {"stdout": run.output.encode(), "stderr": run.errors.encode()},
        "task log files of the run": {task: text.encode() for task, text in run.task_logs.items()},
        "XCom values (deserialized)": {task: dumps(value) for task, value in run.xcom.items()},
        "exceptions of failed tasks (str, repr, args, traceback)": {t: dumps(r) for t, r in run.failures.items()},
        "metadata database, every row of every table": {
            t: repr(rows).encode() for t, rows in _db_rows(airflow_home.path / "airflow.db").items()
        },
        "every file of the Airflow home (database, logs, config)": {
            str(p.relative_to(airflow_home.path)): p.read_bytes() for p in _files_under(airflow_home.path)
        },
        "Delta log commits": commits,
    }
    assert log_dir.is_dir()
    return result


def test_no_secret_reaches_any_place(sweep: ConnectSweep) -> None:
    hits = hits_in(sweep.places, sweep.secrets)
    searched = {place: len(items) for place, items in sweep.places.items()}
    forms = sum(len(secret_forms(v)) for v in sweep.secrets.values())
    print(
        f"\nSpark Connect secrets sweep: {len(sweep.secrets)} secrets in {forms} forms, {len(searched)} places "
        f"({sum(searched.values())} items, {sum(len(c) for i in sweep.places.values() for c in i.values())} bytes): "
        f"{len(hits)} hits"
    )
    for place, count in searched.items():
        print(f"  {place}: {count}")
    assert not hits, "secrets found:\n" + "\n".join(sorted({f"{p} / {i}: {n} ({f})" for p, i, n, f in hits}))
    assert all(count > 0 for count in searched.values()), searched


def test_every_task_ended_as_planned(sweep: ConnectSweep) -> None:
    assert sweep.run.result["tasks"] == {t: "success" for t in SUCCEEDING} | {t: "failed" for t in FAILING}


def test_the_operations_ran_on_the_server_and_committed(sweep: ConnectSweep) -> None:
    xcom = sweep.run.xcom
    assert (xcom["optimize"]["numFilesRemoved"], xcom["optimize"]["numFilesAdded"]) == (6, 2)
    assert (xcom["optimize"]["committedVersion"], xcom["zorder"]["committedVersion"]) == (7, 8)
    assert (xcom["vacuum"]["committedVersions"], xcom["vacuum"]["objectsDeleted"]) == ([9, 10], 8)
    assert (xcom["zorder_shuffle"]["committedVersion"], sweep.run.shuffles) == (5, {"zorder_shuffle": 1})
    assert all(xcom[t]["executor"] == "spark" for t in SUCCEEDING if t != "optimize_skipped")
    assert (xcom["optimize_skipped"]["skippedReason"], xcom["optimize_skipped"]["executor"]) == (
        "nothing to compact",
        "local",  # the preflight's dry run, in the worker
    )
    glued = xcom["optimize_glue"]
    assert (glued["numFilesRemoved"], glued["numFilesAdded"], glued["committedVersion"]) == (4, 2, 5)
    assert f" is the Delta table at {sweep.table_uri.rsplit('/', 1)[0]}/glued" in sweep.run.task_logs["optimize_glue"]


def test_the_searched_places_hold_the_queries(sweep: ConnectSweep) -> None:
    """The Connect statements and the SQL executions of the run are in the event log and the UI that were searched."""
    events = b"".join(sweep.event_log.values())
    assert events.count(b'"Event":"org.apache.spark.sql.connect.service.SparkListenerConnectOperationStarted"') >= 10
    assert b"MapInArrow" in events and b"deltalite-sweep" in events  # the plans, the connection's user id
    executions = json.loads(sweep.ui["/api/v1/.../sql?details=true&planDescription=true&length=10000"])
    assert len(executions) >= 10 and any("MapInArrow" in e["planDescription"] for e in executions)
    assert b"deltalite-sweep" in sweep.ui["/connect/"]
    assert any(path.startswith("/connect/session/") for path in sweep.ui)
    assert b"SparkConnectServer" in sweep.server_log or b"Spark Connect server started" in sweep.server_log


def test_failures_are_one_line_naming_no_token(sweep: ConnectSweep) -> None:
    failures = sweep.run.failures
    assert sorted(failures) == sorted(FAILING)
    unreachable = failures["optimize_unreachable"]
    assert unreachable["type"] == "DeltaLiteJobFailed"
    assert unreachable["str"].startswith(f"table {sweep.idle_uri}: optimize job failed: cannot reach Spark Connect ")
    bad_token = failures["optimize_bad_token"]
    assert bad_token["type"] == "DeltaLiteJobFailed"
    assert bad_token["str"] == (
        f"table {sweep.idle_uri}: optimize job failed: could not start a Spark Connect session on "
        f"sc://{sweep.address}: UNAUTHENTICATED: Invalid authentication token"
    )
    assert all("\n" not in r["str"] for r in failures.values())
