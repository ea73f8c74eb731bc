"""DeltaLiteHook: connection -> table URI, fsspec storage options (every secret masked) and DeltaTable.

Connections come from AIRFLOW_CONN_<ID> variables, as Airflow reads them outside a task; no database is needed.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_deltalite.hooks.deltalite import DeltaLiteHook, InvalidConnection


def _connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: Any) -> None:
    doc = {"conn_type": "deltalite", **fields}
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(doc))


def _secret() -> str:
    return f"secret-{uuid.uuid4().hex}"  # the masker is process-wide: a fresh value per test proves this test masked it


def _redacted(text: str) -> str:
    from airflow.sdk.log import redact

    return redact(text)


def test_s3_fields_map_to_s3fs_options_and_every_credential_is_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    key_id, secret, token, extra_secret = (_secret() for _ in range(4))
    _connection(
        monkeypatch,
        "lake",
        host="s3://lake/warehouse/",
        extra={
            "aws_access_key_id": key_id,
            "aws_secret_access_key": secret,
            "aws_session_token": token,
            "endpoint_url": "http://127.0.0.1:9000",
            "region_name": "eu-west-1",
            "storage_options": {"client_kwargs": {"verify": False}, "sse_customer_key": extra_secret},
        },
    )
    hook = DeltaLiteHook("lake")
    assert hook.get_storage_options() == {
        "key": key_id,
        "secret": secret,
        "token": token,
        "endpoint_url": "http://127.0.0.1:9000",
        "client_kwargs": {"region_name": "eu-west-1", "verify": False},
        "sse_customer_key": extra_secret,
    }
    line = f"cmd --conf a={key_id} b={secret} c={token} d={extra_secret} endpoint http://127.0.0.1:9000 eu-west-1"
    assert _redacted(line) == "cmd --conf a=*** b=*** c=*** d=*** endpoint http://127.0.0.1:9000 eu-west-1"


def test_dynamodb_fields_map_to_the_commit_mode_options_and_unused_ones_are_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow_provider_deltalite.engine.storage import DELTALITE_OPTIONS
    from airflow_provider_deltalite.hooks.connection_form import CONN_FIELDS

    key_id = _secret()
    ddb = {"dynamodb_table_name": "delta_log", "dynamodb_region": "eu-west-1", "dynamodb_endpoint": "http://ddb:8000"}
    _connection(
        monkeypatch,
        "ddb",
        host="s3://lake/warehouse",
        extra={**dict.fromkeys(CONN_FIELDS), "aws_access_key_id": key_id, **ddb},
    )
    options = DeltaLiteHook("ddb").get_storage_options()
    assert options == {"key": key_id, **ddb}
    assert set(ddb) <= set(DELTALITE_OPTIONS)  # the storage takes them out of the fsspec options
    # names and places, not credentials: readable in logs
    assert _redacted(f"x {key_id} delta_log http://ddb:8000") == "x *** delta_log http://ddb:8000"
    # only the table name filled; the region and endpoint saved as "" by an older form are not set
    _connection(
        monkeypatch,
        "ddb2",
        host="s3://lake/warehouse",
        extra={"dynamodb_table_name": "delta_log", "dynamodb_region": "", "dynamodb_endpoint": None},
    )
    assert DeltaLiteHook("ddb2").get_storage_options() == {"dynamodb_table_name": "delta_log"}


def test_gcs_and_azure_fields_map_to_their_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    account_key, client_secret = _secret(), _secret()
    _connection(
        monkeypatch,
        "gcs",
        host="gs://bucket/tables",
        extra={"gcs_token": json.dumps({"type": "service_account", "private_key": "k"}), "gcs_project": "p1"},
    )
    _connection(
        monkeypatch,
        "adls",
        host="abfss://data@acct.dfs.core.windows.net/lake",
        extra={
            "azure_account_name": "acct",
            "azure_account_key": account_key,
            "azure_tenant_id": "t",
            "azure_client_id": "c",
            "azure_client_secret": client_secret,
        },
    )
    assert DeltaLiteHook("gcs").get_storage_options() == {
        "token": {"type": "service_account", "private_key": "k"},
        "project": "p1",
    }
    assert DeltaLiteHook("adls").get_storage_options() == {
        "account_name": "acct",
        "account_key": account_key,
        "tenant_id": "t",
        "client_id": "c",
        "client_secret": client_secret,
    }
    assert _redacted(f"{account_key} {client_secret} acct") == "*** *** acct"


def test_legacy_prefixed_extra_fields_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = _secret()
    _connection(
        monkeypatch,
        "old",
        host="s3://b",
        extra={"extra__deltalite__aws_access_key_id": "AKIAOLDFORM", "extra__deltalite__aws_secret_access_key": secret},
    )
    assert DeltaLiteHook("old").get_storage_options() == {"key": "AKIAOLDFORM", "secret": secret}


def test_table_uris_resolve_against_the_base_uri(monkeypatch: pytest.MonkeyPatch) -> None:
    _connection(monkeypatch, "lake", host="s3://lake/warehouse/")
    hook = DeltaLiteHook("lake")
    assert hook.base_uri == "s3://lake/warehouse"
    assert hook.resolve_table_uri("sales/orders") == "s3://lake/warehouse/sales/orders"
    assert hook.resolve_table_uri("./sales//orders/") == "s3://lake/warehouse/sales/orders"
    assert hook.resolve_table_uri(None) == "s3://lake/warehouse"
    assert hook.resolve_table_uri("s3://other/t") == "s3://other/t"
    assert hook.resolve_table_uri("/abs/path") == "/abs/path"
    assert DeltaLiteHook(None).resolve_table_uri("file:///x/y") == "file:///x/y"
    assert DeltaLiteHook(None).get_storage_options() == {}


def test_relative_table_without_a_base_uri_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _connection(monkeypatch, "nobase", extra={})
    with pytest.raises(InvalidConnection) as err:
        DeltaLiteHook("nobase").resolve_table_uri("events")
    assert str(err.value) == (
        "connection 'nobase': the table URI 'events' is relative and the connection has no base URI (host)"
    )
    with pytest.raises(InvalidConnection) as err:
        DeltaLiteHook(None).resolve_table_uri(None)
    assert str(err.value) == "no table URI is given and no deltalite connection gives a base URI to join it to"


def test_missing_connection_is_one_clear_error() -> None:
    with pytest.raises(InvalidConnection) as err:
        DeltaLiteHook("does_not_exist").get_storage_options()
    assert str(err.value) == (
        "connection 'does_not_exist': is not defined (add it in the UI, with `airflow connections add`, or as the "
        "environment variable AIRFLOW_CONN_DOES_NOT_EXIST)"
    )


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"extra": '{"aws_secret_access_key": "hunter2-SECRET-VALUE",'}, "extra is not valid JSON (line 1, column 50)"),
        ({"extra": "[1, 2]"}, "extra must be a JSON object, not list"),
        (
            {"extra": {"aws_secret_key": "hunter2-SECRET-VALUE"}},
            "unknown extra field(s) aws_secret_key; put fsspec options under 'storage_options'",
        ),
        ({"extra": {"region_name": 5}}, "extra field 'region_name' must be a string, not int"),
        ({"extra": {"storage_options": "not json"}}, "extra field 'storage_options' is not a JSON object"),
        ({"extra": {"storage_options": [1]}}, "extra field 'storage_options' must be a JSON object"),
        ({"host": "relative/base"}, "the base URI (host) must be an absolute path or a URI such as s3://bucket/prefix"),
        ({"conn_type": "aws"}, "has type 'aws', expected 'deltalite'"),
        (
            {"extra": {"aws_access_key_id": "AKIAEXAMPLE1", "azure_account_key": "hunter2-SECRET-VALUE"}},
            "extra holds fields of several stores (azure, s3) and the URI does not say which one applies",
        ),
        (
            {"host": "s3://b", "extra": {"azure_account_key": "hunter2-SECRET-VALUE"}},
            "extra field(s) azure_account_key do not apply to a s3 table",
        ),
    ],
)
def test_malformed_connection_is_one_line_naming_the_field_never_a_value(
    monkeypatch: pytest.MonkeyPatch, fields: dict[str, Any], problem: str
) -> None:
    doc = {"conn_type": "deltalite", **fields}
    monkeypatch.setenv("AIRFLOW_CONN_BROKEN", json.dumps(doc))
    with pytest.raises(InvalidConnection) as err:
        DeltaLiteHook("broken").get_storage_options()
    assert str(err.value) == f"connection 'broken': {problem}"
    assert "hunter2" not in str(err.value)


def test_get_table_opens_the_resolved_table_with_the_options(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from airflow_provider_deltalite.demo import create_small_file_table

    create_small_file_table(str(tmp_path / "events"), files=3, rows_per_file=10)
    _connection(monkeypatch, "local", host=str(tmp_path), extra={"storage_options": {"auto_mkdir": True}})
    table = DeltaLiteHook("local").get_table("events")
    assert table.uri.rstrip("/").endswith(str(tmp_path / "events"))
    assert table.storage._options == {"auto_mkdir": True}
    assert table.snapshot().version == 3
    assert DeltaLiteHook("local").test_connection() == (True, f"connection is valid; {tmp_path} is reachable")
    _connection(monkeypatch, "gone", host=str(tmp_path / "missing"))
    ok, message = DeltaLiteHook("gone").test_connection()
    assert ok is False and "missing" in message and "\n" not in message


def test_form_metadata_of_older_uis_is_the_provider_info_one() -> None:
    from airflow_provider_deltalite import get_provider_info

    conn_type = get_provider_info()["connection-types"][0]
    behaviour = DeltaLiteHook.get_ui_field_behaviour()
    assert behaviour == {
        "hidden_fields": conn_type["ui-field-behaviour"]["hidden-fields"],
        "relabeling": conn_type["ui-field-behaviour"]["relabeling"],
        "placeholders": conn_type["ui-field-behaviour"]["placeholders"],
    }
    assert behaviour["hidden_fields"] == ["schema", "login", "password", "port"]
    secret_fields = sorted(k for k, v in conn_type["conn-fields"].items() if v["schema"].get("format") == "password")
    assert secret_fields == [
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
        "azure_account_key",
        "azure_client_secret",
        "azure_connection_string",
        "azure_sas_token",
        "gcs_token",
    ]


def test_a_connection_saved_by_the_form_reads_only_the_fields_that_are_filled(monkeypatch: pytest.MonkeyPatch) -> None:
    # Airflow's form can save every field it shows: the unused ones as null (Airflow 3) or "" (older forms)
    from airflow_provider_deltalite.hooks.connection_form import CONN_FIELDS

    key_id, secret = _secret(), _secret()
    filled = {
        "aws_access_key_id": key_id,
        "aws_secret_access_key": secret,
        "region_name": "eu-west-1",
        "storage_options": {"requester_pays": True, "client_kwargs": {"verify": False}},
    }
    _connection(monkeypatch, "ui", host="s3://lake/warehouse", extra={**dict.fromkeys(CONN_FIELDS), **filled})
    expected = {
        "key": key_id,
        "secret": secret,
        "client_kwargs": {"region_name": "eu-west-1", "verify": False},
        "requester_pays": True,
    }
    assert DeltaLiteHook("ui").get_storage_options() == expected
    # the other storage options typed as JSON text (a form without a JSON editor), empty strings elsewhere
    as_text = {**dict.fromkeys(CONN_FIELDS, ""), **filled, "storage_options": json.dumps(filled["storage_options"])}
    _connection(monkeypatch, "text", host="s3://lake/warehouse", extra=as_text)
    assert DeltaLiteHook("text").get_storage_options() == expected
    # a GCS connection holding every S3 and Azure field as null is a GCS connection, not one of several stores
    _connection(
        monkeypatch,
        "gcs",
        host="gs://bucket/lake",
        extra={**dict.fromkeys(CONN_FIELDS), "gcs_key_file": "/secrets/sa.json", "gcs_project": "p"},
    )
    assert DeltaLiteHook("gcs").get_storage_options() == {"token": "/secrets/sa.json", "project": "p"}


def test_every_field_of_the_form_has_a_placeholder_and_secrets_are_never_suggested() -> None:
    from airflow_provider_deltalite import get_provider_info

    [conn_type] = get_provider_info()["connection-types"]
    fields = conn_type["conn-fields"]
    placeholders = conn_type["ui-field-behaviour"]["placeholders"]
    assert set(placeholders) == {"host", "extra", *fields}
    assert all(isinstance(text, str) and text.strip() for text in placeholders.values())
    assert fields["storage_options"]["label"] == "Other storage options"
    assert fields["storage_options"]["schema"] == {"type": ["object", "null"]}  # Airflow 3's UI: a JSON editor
    suggested = {name: spec["schema"]["examples"] for name, spec in fields.items() if "examples" in spec["schema"]}
    assert suggested == {
        "endpoint_url": ["https://minio.internal:9000"],
        "region_name": ["eu-west-1"],
        "gcs_key_file": ["/secrets/gcs-service-account.json"],
        "gcs_project": ["my-gcp-project"],
        "azure_account_name": ["mystorageaccount"],
    }
    assert not any(fields[name]["schema"].get("format") == "password" for name in suggested)
    assert json.loads(placeholders["extra"]) == {
        "region_name": "eu-west-1",
        "storage_options": {"any fsspec option": "value"},
    }
    assert json.loads(placeholders["storage_options"]) == {"requester_pays": True, "client_kwargs": {"verify": False}}


def test_airflows_connection_form_service_serves_the_fields_placeholders_and_suggestions(tmp_path: Path) -> None:
    # what Airflow's own UI API hands the connection form (a fresh AIRFLOW_HOME, Airflow's code, no mock of ours)
    import subprocess
    import sys

    from airflow_provider_deltalite.demo import airflow_env

    script = (
        "import json\n"
        "from airflow.api_fastapi.core_api.services.ui.connections import HookMetaService\n"
        "[meta] = [m for m in HookMetaService.hook_meta_data() if m.connection_type == 'deltalite']\n"
        "print(json.dumps(meta.model_dump(mode='json')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        env=airflow_env(tmp_path, tmp_path / "dags"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    meta = json.loads(out.stdout.strip().splitlines()[-1])
    from airflow_provider_deltalite.hooks.connection_form import CONN_FIELDS, PLACEHOLDERS

    host = {"hidden": False, "placeholder": PLACEHOLDERS["host"], "title": "Base URI"}
    assert meta["standard_fields"]["host"] == host
    assert meta["standard_fields"]["password"]["hidden"] is True
    extra = meta["extra_fields"]
    assert sorted(extra) == sorted(CONN_FIELDS)
    assert extra["storage_options"]["schema"]["type"] == ["object", "null"]
    assert extra["storage_options"]["schema"]["title"] == "Other storage options"
    assert extra["region_name"]["schema"]["examples"] == ["eu-west-1"]
    assert extra["aws_secret_access_key"]["schema"] == {
        "type": ["string", "null"],
        "format": "password",
        "title": "AWS secret access key",
    }


def test_the_history_uri_field_resolves_like_a_table_and_is_not_a_storage_option(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _connection(monkeypatch, "lake", host="s3://lake/warehouse", extra={"history_uri": "_ops/history"})
    hook = DeltaLiteHook("lake")
    assert hook.history_uri() == "s3://lake/warehouse/_ops/history"
    assert hook.get_storage_options("s3://lake/warehouse/t") == {}
    _connection(monkeypatch, "other", extra={"history_uri": "s3://audit/history"})
    assert DeltaLiteHook("other").history_uri() == "s3://audit/history"
    _connection(monkeypatch, "none", host="/data")
    assert DeltaLiteHook("none").history_uri() is None
    assert DeltaLiteHook(None).history_uri() is None


def test_an_operator_refuses_a_history_that_is_not_a_history_table_before_anything_runs(tmp_path: Path) -> None:
    import deltalake
    import pyarrow as pa

    from airflow_provider_deltalite.engine.errors import InvalidArgument
    from airflow_provider_deltalite.operators.optimize import OptimizeOperator
    from tests.helpers import tree_state

    table = tmp_path / "t"
    for i in range(3):
        deltalake.write_deltalake(str(table), pa.table({"id": [i]}), mode="append")
    other = tmp_path / "other"
    deltalake.write_deltalake(str(other), pa.table({"id": [1]}))
    before = tree_state(tmp_path)
    op = OptimizeOperator(task_id="o", table_uri=str(table), history_uri=str(other))
    with pytest.raises(InvalidArgument) as raised:
        op.execute({})
    assert str(raised.value) == (
        f"table {other}: the operations history table's schema is not the history schema: it has no column 'table_uri'"
    )
    assert tree_state(tmp_path) == before
