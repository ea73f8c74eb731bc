"""Tables by their Glue name (``glue://database/table``) on moto's Glue and S3: the location each writer's shape
resolves to, the tables a database lists, and one clear error for what cannot be opened; the same through the CLI.

The tables' data is written by delta-rs and read back with delta-rs (the oracle); the Glue entries are registered
the ways Spark's DeltaCatalog, Glue crawlers (native and manifest tables) and Athena register them
(`tests/glue_tables.py`).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine.catalog import CatalogName, resolve_location, storage_options_only
from airflow_provider_deltalite.engine.errors import (
    CatalogError,
    CatalogTableNotFound,
    DeltaLiteError,
    InvalidArgument,
    NotADeltaTable,
    TableNotFound,
)
from airflow_provider_deltalite.maintenance.discovery import find_delta_tables
from tests import glue_tables as shapes
from tests.executors.spark_cluster import free_port
from tests.helpers import cli_failure, run_cli
from tests.moto_server import deltars_s3_options

pytestmark = pytest.mark.s3

APPENDS = 5


def _write(uri: str, s3: dict[str, Any], first: int) -> None:
    """A delta-rs table of APPENDS small files (one append each), ids ``first ..``."""
    for i in range(APPENDS):
        ids = pa.array(range(first + 10 * i, first + 10 * i + 10), pa.int64())
        deltalake.write_deltalake(uri, pa.table({"id": ids}), mode="append", storage_options=deltars_s3_options(s3))


def _rows(uri: str, s3: dict[str, Any]) -> list[int]:
    uri = uri.replace("s3a://", "s3://", 1)  # delta-rs reads the same bucket under s3://
    return sorted(
        deltalake.DeltaTable(uri, storage_options=deltars_s3_options(s3)).to_pyarrow_table()["id"].to_pylist()
    )


@pytest.fixture(scope="module")
def lake(s3_endpoint: dict[str, Any]) -> dict[str, Any]:
    """A bucket with four delta-rs tables, and a Glue database registering them in the four writers' shapes, beside
    tables that are not Delta tables."""
    import s3fs

    s3 = s3_endpoint
    bucket = f"glue-{uuid.uuid4().hex[:10]}"
    fs = s3fs.S3FileSystem(**s3)
    fs.call_s3("create_bucket", Bucket=bucket)
    data = {name: f"s3://{bucket}/lake/{name}" for name in ("orders", "managed", "crawled", "athena", "manifest")}
    for n, uri in enumerate(data.values()):
        _write(uri, s3, 1000 * n)
    database = f"sales_{uuid.uuid4().hex[:8]}"
    orders_location = data["orders"].replace("s3://", "s3a://", 1)  # as Spark on Hadoop writes it
    shapes.register(
        shapes.glue_client(s3),
        database,
        [
            shapes.spark_delta_catalog(database, "orders", orders_location),
            shapes.spark_placeholder_only(database, "managed", data["managed"]),
            shapes.crawler_native("crawled", data["crawled"]),
            shapes.athena("athena", data["athena"]),
            shapes.crawler_manifest("manifest", data["manifest"]),
            shapes.crawler_parquet("clicks_parquet", f"s3://{bucket}/raw/clicks/"),
            shapes.iceberg("events_iceberg", f"s3://{bucket}/iceberg/events"),
            shapes.hive_view("daily_view"),
            shapes.athena("ghost", f"s3://{bucket}/lake/ghost"),  # a Delta entry whose location holds nothing
            {**shapes.athena("nowhere", ""), "StorageDescriptor": {"Columns": []}},
        ],
    )
    return {
        "s3": s3,
        "options": shapes.glue_options(s3),
        "fs": fs,
        "bucket": bucket,
        "database": database,
        "data": data,
        "locations": {**data, "orders": orders_location},
    }


# -- the location of each writer's shape ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["orders", "managed", "crawled", "athena", "manifest"])
def test_each_writers_shape_opens_at_the_tables_location(lake: dict[str, Any], name: str) -> None:
    table = DeltaTable(f"glue://{lake['database']}/{name}", storage_options=lake["options"])
    assert (table.uri, table.catalog_name) == (lake["locations"][name], f"glue://{lake['database']}/{name}")
    assert table.latest_version() == APPENDS - 1
    from airflow_provider_deltalite.engine.scan import scan

    rows, _ = scan(table.snapshot())
    assert sorted(rows["id"].to_pylist()) == _rows(lake["data"][name], lake["s3"])


def test_spark_delta_catalog_table_resolves_to_its_serde_path_not_the_placeholder(lake: dict[str, Any]) -> None:
    resolved = resolve_location(f"glue://{lake['database']}/orders", lake["options"])
    assert resolved.uri == f"s3a://{lake['bucket']}/lake/orders"
    assert resolved.name == f"glue://{lake['database']}/orders"
    # the catalog's own options are not the store's
    assert resolved.storage_options == lake["s3"]
    assert "glue_" not in repr(resolved) and "testing" not in repr(resolved)  # no options (credentials) in a repr


def test_a_path_is_its_own_location_and_catalog_options_never_reach_the_store(lake: dict[str, Any]) -> None:
    uri = lake["data"]["crawled"]
    table = DeltaTable(uri, storage_options={**lake["options"], "glue_catalog_id": "123456789012"})
    assert (table.uri, table.catalog_name, table.latest_version()) == (uri, None, APPENDS - 1)
    assert storage_options_only({"glue_region": "eu-west-1", "key": "k"}) == {"key": "k"}


# -- discovery --------------------------------------------------------------------------------------------------------


def test_discovery_lists_the_delta_tables_of_a_glue_database(lake: dict[str, Any]) -> None:
    db = lake["database"]
    found = find_delta_tables(f"glue://{db}", lake["options"])
    assert found == [f"glue://{db}/{n}" for n in ("athena", "crawled", "ghost", "managed", "manifest", "orders")]
    # each name found opens as a table (the ghost's location holds no table: it fails when read, as a path would)
    assert [DeltaTable(n, storage_options=lake["options"]).uri for n in found] == [
        lake["data"]["athena"],
        lake["data"]["crawled"],
        f"s3://{lake['bucket']}/lake/ghost",
        lake["data"]["managed"],
        lake["data"]["manifest"],
        lake["locations"]["orders"],
    ]
    assert find_delta_tables(f"glue://{db}/managed", lake["options"]) == [f"glue://{db}/managed"]
    with pytest.raises(CatalogTableNotFound) as raised:
        find_delta_tables("glue://no_such_db", lake["options"])
    assert str(raised.value) == (
        "table glue://no_such_db: database 'no_such_db' does not exist in the Glue Data Catalog of region us-east-1 "
        f"at {lake['s3']['endpoint_url']}"
    )


# -- one clear error --------------------------------------------------------------------------------------------------


def test_a_missing_database_or_table_is_table_not_found_naming_it(lake: dict[str, Any]) -> None:
    db, where = lake["database"], f"the Glue Data Catalog of region us-east-1 at {lake['s3']['endpoint_url']}"
    with pytest.raises(CatalogTableNotFound) as raised:
        DeltaTable(f"glue://{db}/no_such_table", storage_options=lake["options"])
    assert str(raised.value) == (
        f"table glue://{db}/no_such_table: table 'no_such_table' does not exist in database '{db}' of {where}"
    )
    assert isinstance(raised.value, TableNotFound)  # a sensor waits for it as for a missing path
    assert (raised.value.database, raised.value.table) == (db, "no_such_table")
    rebuilt = DeltaLiteError.from_payload(raised.value.to_payload())  # the trigger's error event
    assert (type(rebuilt), str(rebuilt), rebuilt.database) == (CatalogTableNotFound, str(raised.value), db)
    with pytest.raises(CatalogTableNotFound) as raised:
        DeltaTable("glue://no_such_db/orders", storage_options=lake["options"])
    assert str(raised.value) == f"table glue://no_such_db/orders: database 'no_such_db' does not exist in {where}"


@pytest.mark.parametrize(
    ("name", "what"),
    [
        ("clicks_parquet", "classification=parquet"),
        ("events_iceberg", "table_type=ICEBERG"),
        ("daily_view", "a VIRTUAL_VIEW"),
    ],
)
def test_a_table_of_another_format_is_not_a_delta_table(lake: dict[str, Any], name: str, what: str) -> None:
    with pytest.raises(NotADeltaTable) as raised:
        DeltaTable(f"glue://{lake['database']}/{name}", storage_options=lake["options"])
    assert str(raised.value) == f"table glue://{lake['database']}/{name}: the Glue table is not a Delta table ({what})"


def test_a_delta_entry_without_a_location_is_refused(lake: dict[str, Any]) -> None:
    with pytest.raises(NotADeltaTable) as raised:
        DeltaTable(f"glue://{lake['database']}/nowhere", storage_options=lake["options"])
    assert str(raised.value) == (
        f"table glue://{lake['database']}/nowhere: the Glue table gives no location (no SerDe path parameter, no "
        "storage descriptor Location)"
    )


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("glue://sales", "table glue://sales: glue://sales names a database; a table is glue://sales/<table>"),
        (
            "glue://sales/a/b",
            "table glue://sales/a/b: not a catalog name; write glue://database/table (or glue://database)",
        ),
        (
            "glue://sales/t?x=1",
            "table glue://sales/t: a catalog name has no query or fragment; write glue://database/table",
        ),
        (
            "glue://AKIAUSER:pw-secret-1@sales/t",
            "table glue://sales/t: a catalog name holds no user, password or port; write glue://database/table",
        ),
    ],
)
def test_a_malformed_name_is_one_line_naming_no_credential(uri: str, message: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        DeltaTable(uri)
    assert str(raised.value) == message
    assert CatalogName.parse("glue://sales/orders") == CatalogName("glue", "sales", "orders")


def test_an_unreachable_catalog_is_a_catalog_error_without_credentials(lake: dict[str, Any]) -> None:
    port = free_port()
    key, secret, token = f"AKIA{uuid.uuid4().hex[:16].upper()}", f"s/{uuid.uuid4().hex}", f"t{uuid.uuid4().hex}"
    options = {
        "key": key,
        "secret": secret,
        "token": token,
        "glue_endpoint": f"http://{key}:{token}@127.0.0.1:{port}",  # user info in an endpoint: never shown
        "glue_region": "eu-west-1",
    }
    with pytest.raises(CatalogError) as raised:
        DeltaTable("glue://sales/orders", storage_options=options)
    message = str(raised.value)
    assert message.startswith(
        f"table glue://sales/orders: Glue get_table failed in the Glue Data Catalog of region eu-west-1 at "
        f"http://127.0.0.1:{port}: EndpointConnectionError: Could not connect to the endpoint URL: "
        f'"http://127.0.0.1:{port}/"'
    ), message
    for value in (key, secret, token, secret.split("/")[1]):
        assert value not in message and value not in repr(raised.value.to_payload())


# -- the CLI ----------------------------------------------------------------------------------------------------------


def _cli_options(lake: dict[str, Any]) -> list[str]:
    s3 = lake["s3"]
    pairs = {
        "key": s3["key"],
        "secret": s3["secret"],
        "endpoint_url": s3["endpoint_url"],
        "glue_endpoint": s3["endpoint_url"],
        "glue_region": "us-east-1",
    }
    return [arg for k, v in pairs.items() for arg in ("--storage-option", f"{k}={v}")]


def _objects(lake: dict[str, Any]) -> dict[str, int]:
    fs = lake["fs"]
    fs.invalidate_cache()
    return {path: info["size"] for path, info in fs.find(lake["bucket"], detail=True).items()}


def test_cli_describes_and_optimizes_a_table_by_its_glue_name(lake: dict[str, Any]) -> None:
    name = f"glue://{lake['database']}/managed"
    out = run_cli("describe", name, "--json", *_cli_options(lake))
    assert out.returncode == 0, out.stderr
    document = json.loads(out.stdout)
    assert (document["version"], document["numFiles"]) == (APPENDS - 1, APPENDS)
    before = _rows(lake["data"]["managed"], lake["s3"])
    out = run_cli("optimize", name, "--json", *_cli_options(lake))
    assert out.returncode == 0, out.stderr
    stats = json.loads(out.stdout)
    assert (stats["numFilesRemoved"], stats["numFilesAdded"], stats["committedVersion"]) == (APPENDS, 1, APPENDS)
    oracle = deltalake.DeltaTable(lake["data"]["managed"], storage_options=deltars_s3_options(lake["s3"]))
    assert (oracle.version(), len(oracle.file_uris())) == (APPENDS, 1)
    assert _rows(lake["data"]["managed"], lake["s3"]) == before


def test_cli_errors_are_one_line_exit_2_and_write_nothing(lake: dict[str, Any]) -> None:
    db, endpoint = lake["database"], lake["s3"]["endpoint_url"]
    where = f"the Glue Data Catalog of region us-east-1 at {endpoint}"
    before = _objects(lake)
    expected = {
        f"glue://{db}/no_such_table": (
            f"table glue://{db}/no_such_table: table 'no_such_table' does not exist in database '{db}' of {where}"
        ),
        "glue://no_such_db/orders": f"table glue://no_such_db/orders: database 'no_such_db' does not exist in {where}",
        f"glue://{db}/events_iceberg": (
            f"table glue://{db}/events_iceberg: the Glue table is not a Delta table (table_type=ICEBERG)"
        ),
        f"glue://{db}/ghost": f"table s3://{lake['bucket']}/lake/ghost: path does not exist",
    }
    runs = [("optimize", name) for name in expected] + [("vacuum", f"glue://{db}/ghost")]
    for command, name in runs:
        assert cli_failure(command, name, *_cli_options(lake)) == f"deltalite: error: {expected[name]}", (command, name)
    assert _objects(lake) == before


def test_optimize_by_glue_name_on_spark_works_on_the_location(lake: dict[str, Any], spark_local: Any) -> None:
    """The name is resolved where the table is opened; Spark's tasks get the table's storage (its location) and never
    call Glue."""
    table = DeltaTable(f"glue://{lake['database']}/crawled", storage_options=lake["options"])
    before = _rows(lake["data"]["crawled"], lake["s3"])
    stats = table.optimize(executor=spark_local)
    assert (stats.num_files_removed, stats.num_files_added, stats.committed_version) == (APPENDS, 1, APPENDS)
    oracle = deltalake.DeltaTable(lake["data"]["crawled"], storage_options=deltars_s3_options(lake["s3"]))
    assert (oracle.version(), len(oracle.file_uris())) == (APPENDS, 1)
    assert _rows(lake["data"]["crawled"], lake["s3"]) == before


@pytest.mark.parametrize(
    ("options", "cause"),
    [
        ({"glue_endpoint": "not a url"}, " at not a url: ValueError: Invalid endpoint: not a url"),
        ({"profile": "no_such_profile"}, ": ProfileNotFound: The config profile (no_such_profile) could not be found"),
    ],
)
def test_a_glue_client_that_cannot_be_made_is_a_catalog_error(options: dict[str, str], cause: str) -> None:
    with pytest.raises(CatalogError) as raised:
        DeltaTable("glue://sales/orders", storage_options={**options, "glue_region": "eu-west-1"})
    assert str(raised.value) == (
        f"table glue://sales/orders: cannot make a Glue client for the Glue Data Catalog of region eu-west-1{cause}"
    )
