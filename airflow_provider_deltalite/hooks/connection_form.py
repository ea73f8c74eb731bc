"""The ``deltalite`` connection form: its extra fields and field behaviour, declared once.

`get_provider_info` publishes them as ``conn-fields`` / ``ui-field-behaviour`` (Airflow 3.2+ builds the form from
these without importing the hook); `DeltaLiteHook`'s legacy classmethods serve the same data to older UIs. This
module imports nothing from Airflow, because provider discovery reads it while Airflow itself is starting.
"""

from __future__ import annotations

from typing import Any

_STRING: dict[str, Any] = {"type": ["string", "null"]}
_SECRET: dict[str, Any] = {"type": ["string", "null"], "format": "password"}


def _field(label: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"label": label, "description": description, "schema": dict(schema)}


CONN_FIELDS: dict[str, dict[str, Any]] = {
    "aws_access_key_id": _field("AWS access key id", "S3: access key id (s3fs `key`)", _SECRET),
    "aws_secret_access_key": _field("AWS secret access key", "S3: secret access key (s3fs `secret`)", _SECRET),
    "aws_session_token": _field("AWS session token", "S3: session token of temporary credentials", _SECRET),
    "endpoint_url": _field("S3 endpoint URL", "S3-compatible stores (MinIO, Ceph): e.g. https://minio:9000", _STRING),
    "region_name": _field("AWS region", "S3: the bucket's region, e.g. eu-west-1", _STRING),
    "gcs_key_file": _field("GCS key file", "GCS: path of a service-account JSON key file on the workers", _STRING),
    "gcs_token": _field(
        "GCS token", "GCS: a service-account JSON (pasted) or a gcsfs token value such as google_default", _SECRET
    ),
    "gcs_project": _field("GCS project", "GCS: the project id", _STRING),
    "azure_account_name": _field("Azure storage account", "ADLS Gen2 / Blob: the storage account name", _STRING),
    "azure_account_key": _field("Azure account key", "ADLS Gen2 / Blob: a storage account key", _SECRET),
    "azure_sas_token": _field("Azure SAS token", "ADLS Gen2 / Blob: a shared access signature", _SECRET),
    "azure_tenant_id": _field("Azure tenant id", "Service principal: the tenant (directory) id", _STRING),
    "azure_client_id": _field("Azure client id", "Service principal: the application (client) id", _STRING),
    "azure_client_secret": _field("Azure client secret", "Service principal: the client secret", _SECRET),
    "azure_connection_string": _field("Azure connection string", "A storage connection string", _SECRET),
}

UI_FIELD_BEHAVIOUR: dict[str, Any] = {
    "hidden-fields": ["schema", "login", "password", "port"],
    "relabeling": {"host": "Base URI"},
    "placeholders": {
        "host": "s3://bucket/warehouse (tables given by a relative path are found below it)",
        "extra": '{"storage_options": {"any fsspec option": "value"}}',
        "endpoint_url": "https://minio.internal:9000",
        "region_name": "eu-west-1",
    },
}
