"""Tables by their Glue name in Airflow: the hook, every operator, the sensor and the trigger resolve
``glue://database/table`` (or a name below a ``glue://database`` base URI) in the worker or the triggerer, and a Spark
job is handed the table's location. On moto's Glue and S3, with Glue entries in the shapes Spark's DeltaCatalog and
Glue crawlers write (`tests/glue_tables.py`); the data is written and read back by delta-rs."""

from __future__ import annotations

import json
import uuid
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from airflow_provider_deltalite.demo import FAST_JVM_CONF
from airflow_provider_deltalite.engine.errors import CatalogTableNotFound, NotADeltaTable
from airflow_provider_deltalite.hooks.deltalite import DeltaLiteHook
from airflow_provider_deltalite.operators.base import JOB_FILE
from airflow_provider_deltalite.operators.maintenance import DeltaMaintenanceOperator
from airflow_provider_deltalite.operators.optimize import OptimizeOperator
from airflow_provider_deltalite.operators.vacuum import VacuumOperator
from airflow_provider_deltalite.operators.zorder import ZOrderOperator
from airflow_provider_deltalite.sensors.new_version import NewVersionSensor
from airflow_provider_deltalite.triggers.new_data import raise_from_event
from airflow_provider_deltalite.triggers.new_version import NewVersionTrigger
from tests import glue_tables as shapes
from tests.airflow.test_new_version_trigger import _first_event
from tests.moto_server import deltars_s3_options

pytestmark = pytest.mark.s3

APPENDS = 4


def _rows(uri: str, s3: dict[str, Any]) -> list[int]:
    table = deltalake.DeltaTable(uri.replace("s3a://", "s3://", 1), storage_options=deltars_s3_options(s3))
    return sorted(table.to_pyarrow_table()["id"].to_pylist())


@pytest.fixture(scope="module")
def glue_lake(s3_endpoint: dict[str, Any]) -> dict[str, Any]:
    """Two delta-rs tables of APPENDS files registered in Glue (Spark's shape with an s3a:// path, a crawler's), a
    Parquet table, and the deltalite connection of the database (its base URI ``glue://<database>``)."""
    import s3fs

    s3 = {**s3_endpoint, "key": f"AKIA{uuid.uuid4().hex[:16].upper()}", "secret": f"secret-{uuid.uuid4().hex}"}
    bucket = f"gluelake-{uuid.uuid4().hex[:8]}"
    s3fs.S3FileSystem(**s3).call_s3("create_bucket", Bucket=bucket)
    data = {name: f"s3://{bucket}/lake/{name}" for name in ("orders", "events")}
    for n, uri in enumerate(data.values()):
        for i in range(APPENDS):
            ids = pa.array(range(100 * n + 10 * i, 100 * n + 10 * i + 10), pa.int64())
            deltalake.write_deltalake(uri, pa.table({"id": ids}), mode="append", storage_options=deltars_s3_options(s3))
    database = f"lake_{uuid.uuid4().hex[:8]}"
    orders = data["orders"].replace("s3://", "s3a://", 1)
    shapes.register(
        shapes.glue_client(s3),
        database,
        [
            shapes.spark_delta_catalog(database, "orders", orders),
            shapes.crawler_native("events", data["events"]),
            shapes.crawler_parquet("clicks", f"s3://{bucket}/raw/clicks/"),
        ],
    )
    extra = {
        "aws_access_key_id": s3["key"],
        "aws_secret_access_key": s3["secret"],
        "endpoint_url": s3["endpoint_url"],
        "region_name": "us-east-1",
        "glue_endpoint": s3["endpoint_url"],
        "glue_region": "us-east-1",
    }
    return {
        "s3": s3,
        "database": database,
        "data": data,
        "orders": orders,
        "connection": {"conn_type": "deltalite", "host": f"glue://{database}", "extra": extra},
        "where": f"the Glue Data Catalog of region us-east-1 at {s3['endpoint_url']}",
    }


@pytest.fixture
def gluelake(glue_lake: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """`glue_lake` with its connection defined as ``gluelake``."""
    monkeypatch.setenv("AIRFLOW_CONN_GLUELAKE", json.dumps(glue_lake["connection"]))
    return glue_lake


def _s3_options(lake: dict[str, Any]) -> dict[str, Any]:
    s3 = lake["s3"]
    return {
        "key": s3["key"],
        "secret": s3["secret"],
        "endpoint_url": s3["endpoint_url"],
        "client_kwargs": {"region_name": "us-east-1"},
    }


def test_the_hook_resolves_a_glue_name_to_the_location_and_the_stores_options(
    gluelake: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    hook = DeltaLiteHook("gluelake")
    db = gluelake["database"]
    assert hook.resolve_table("orders") == (gluelake["orders"], _s3_options(gluelake))
    assert hook.resolve_table(f"glue://{db}/events") == (gluelake["data"]["events"], _s3_options(gluelake))
    assert hook.get_storage_options(f"glue://{db}/orders") == {
        **_s3_options(gluelake),
        "glue_endpoint": gluelake["s3"]["endpoint_url"],
        "glue_region": "us-east-1",
    }
    table = hook.get_table("events")
    assert (table.uri, table.latest_version()) == (gluelake["data"]["events"], APPENDS - 1)
    assert hook.test_connection() == (True, f"connection is valid; glue://{db} is reachable")
    monkeypatch.setenv("AIRFLOW_CONN_NODB", json.dumps({**gluelake["connection"], "host": "glue://no_such_db"}))
    assert DeltaLiteHook("nodb").test_connection() == (
        False,
        f"table glue://no_such_db: database 'no_such_db' does not exist in {gluelake['where']}",
    )


@pytest.mark.parametrize(
    ("operator", "kwargs"),
    [
        (OptimizeOperator, {}),
        (ZOrderOperator, {"columns": ["id"]}),
        (VacuumOperator, {}),
        (DeltaMaintenanceOperator, {}),
    ],
)
def test_every_operator_resolves_the_name_in_the_worker(
    gluelake: dict[str, Any], operator: type, kwargs: dict[str, Any]
) -> None:
    op = operator(task_id="t", table_uri="orders", deltalite_conn_id="gluelake", **kwargs)
    assert op.resolve({}) == gluelake["orders"]
    assert (op.resolved_table_uri, op._storage_options) == (gluelake["orders"], _s3_options(gluelake))
    missing = operator(task_id="m", table_uri="no_such_table", deltalite_conn_id="gluelake", **kwargs)
    with pytest.raises(CatalogTableNotFound) as raised:
        missing.resolve({})
    db = gluelake["database"]
    assert str(raised.value) == (
        f"table glue://{db}/no_such_table: table 'no_such_table' does not exist in database '{db}' of "
        f"{gluelake['where']}"
    )
    with pytest.raises(NotADeltaTable) as raised:
        operator(task_id="p", table_uri="clicks", deltalite_conn_id="gluelake", **kwargs).resolve({})
    assert (
        str(raised.value) == f"table glue://{db}/clicks: the Glue table is not a Delta table (classification=parquet)"
    )


@pytest.mark.slow
def test_optimize_by_glue_name_hands_the_spark_job_the_location(
    gluelake: dict[str, Any], capfd: pytest.CaptureFixture[str]
) -> None:
    before = _rows(gluelake["orders"], gluelake["s3"])
    op = OptimizeOperator(task_id="optimize", table_uri="orders", deltalite_conn_id="gluelake", conf=FAST_JVM_CONF)
    stats = op.execute({})
    assert (stats["numFilesRemoved"], stats["numFilesAdded"], stats["committedVersion"]) == (APPENDS, 1, APPENDS)
    assert (stats["executor"], stats["skippedReason"]) == ("spark", None)
    oracle = deltalake.DeltaTable(gluelake["data"]["orders"], storage_options=deltars_s3_options(gluelake["s3"]))
    assert (oracle.version(), len(oracle.file_uris())) == (APPENDS, 1)
    assert _rows(gluelake["orders"], gluelake["s3"]) == before
    log = "".join(capfd.readouterr())
    [cmd] = [line for line in log.splitlines() if "Spark-Submit cmd:" in line]
    assert f" {JOB_FILE} optimize --table {gluelake['orders']} --result " in cmd  # the location, not the name
    assert f"glue://{gluelake['database']}/orders is the Delta table at {gluelake['orders']}" in log


def test_the_sensor_pokes_a_table_by_its_glue_name(gluelake: dict[str, Any]) -> None:
    sensor = NewVersionSensor(task_id="s", table_uri="events", deltalite_conn_id="gluelake", since=0, mode="poke")
    done = sensor.poke({})
    assert done.is_done
    assert (done.xcom_value["table_uri"], done.xcom_value["versions"]) == (
        gluelake["data"]["events"],
        list(range(1, APPENDS)),
    )
    missing = NewVersionSensor(
        task_id="m", table_uri="no_such_table", deltalite_conn_id="gluelake", since=0, fail_if_missing=True
    )
    with pytest.raises(CatalogTableNotFound):
        missing.poke({})
    waiting = NewVersionSensor(task_id="w", table_uri="no_such_table", deltalite_conn_id="gluelake", since=0)
    assert waiting.poke({}) is False  # a table not registered yet is waited for, as a path not written yet
    with pytest.raises(NotADeltaTable):
        NewVersionSensor(task_id="p", table_uri="clicks", deltalite_conn_id="gluelake", since=0).poke({})


def test_the_trigger_watches_a_table_by_its_glue_name(gluelake: dict[str, Any]) -> None:
    event = _first_event(NewVersionTrigger("events", deltalite_conn_id="gluelake", since=1, poll_interval=0.05))
    assert (event.payload["status"], event.payload["table_uri"], event.payload["versions"]) == (
        "success",
        gluelake["data"]["events"],
        [2, 3],
    )
    event = _first_event(NewVersionTrigger("clicks", deltalite_conn_id="gluelake", since=0, poll_interval=0.05))
    with pytest.raises(NotADeltaTable) as raised:
        raise_from_event(event.payload)
    db = gluelake["database"]
    assert (
        str(raised.value) == f"table glue://{db}/clicks: the Glue table is not a Delta table (classification=parquet)"
    )


def test_the_lake_dags_discovery_lists_the_delta_tables_of_a_glue_database(gluelake: dict[str, Any]) -> None:
    """example_dags/maintain_lake.py's ``plan`` with a ``glue://`` prefix: the lake plan names the database's Delta
    tables (not its Parquet one) by their catalog names, which the mapped maintenance tasks then resolve one by one."""
    import importlib.util

    from tests.airflow.conftest import EXAMPLE_DAGS

    spec = importlib.util.spec_from_file_location("maintain_lake_for_glue", EXAMPLE_DAGS / "maintain_lake.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dag = module.deltalite_maintain_lake()
    plan = dag.get_task("plan").python_callable
    db = gluelake["database"]
    lake_plan = plan([f"glue://{db}"], "gluelake", {}, None, None, None, "")
    assert sorted(t["tableUri"] for t in lake_plan["tables"]) == [f"glue://{db}/events", f"glue://{db}/orders"]
    op = DeltaMaintenanceOperator(task_id="maintain", table_uri=f"glue://{db}/events", deltalite_conn_id="gluelake")
    assert op.resolve({}) == gluelake["data"]["events"]
