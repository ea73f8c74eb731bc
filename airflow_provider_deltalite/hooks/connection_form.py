"""The ``deltalite`` connection form: its extra fields and field behaviour, declared once.

`get_provider_info` publishes them as ``conn-fields`` / ``ui-field-behaviour`` (Airflow 3.2+ builds the form from
these without importing the hook); `DeltaLiteHook`'s legacy classmethods serve the same data to older UIs. This
module imports nothing from Airflow, because provider discovery reads it while Airflow itself is starting.

Every field has a placeholder (``placeholders`` of the field behaviour). Airflow 3's UI shows those of the standard
fields (``host``, ``extra``); for the extra fields it shows a field's ``examples`` instead, as suggestions: the
fields whose placeholder is a typical value carry it there too (`SUGGESTED`); secrets never (no made-up credential is
ever suggested).
The UI can save a field left empty as ``null`` in the extra JSON: the hook reads ``null`` and ``""`` as "not set".
"""

from __future__ import annotations

from typing import Any

_STRING: dict[str, Any] = {"type": ["string", "null"]}
_SECRET: dict[str, Any] = {"type": ["string", "null"], "format": "password"}


_OBJECT: dict[str, Any] = {"type": ["object", "null"]}

# The hint shown in each empty field: what a value looks like, or what leaving it empty means.
PLACEHOLDERS: dict[str, str] = {
    "host": "s3://bucket/warehouse or glue://database (tables given by a relative path or name are found below it)",
    "extra": '{"region_name": "eu-west-1", "storage_options": {"any fsspec option": "value"}}',
    "aws_access_key_id": "AKIA... (empty: the worker's AWS credential chain, e.g. an instance role)",
    "aws_secret_access_key": "the secret of that access key id",
    "aws_session_token": "temporary credentials (STS) only",
    "endpoint_url": "https://minio.internal:9000",
    "region_name": "eu-west-1",
    "dynamodb_table_name": "delta_log (empty: commits are conditional PUTs; see docs/commit-modes.md)",
    "dynamodb_region": "us-east-1 (empty: the AWS region above, else us-east-1)",
    "dynamodb_endpoint": "https://dynamodb.us-east-1.amazonaws.com (empty: AWS's)",
    "glue_region": "eu-west-1 (empty: the AWS region above, else us-east-1)",
    "glue_endpoint": "https://glue.eu-west-1.amazonaws.com (empty: AWS's)",
    "glue_catalog_id": "123456789012 (empty: the account of the credentials)",
    "gcs_key_file": "/secrets/gcs-service-account.json",
    "gcs_token": 'google_default, or a pasted {"type": "service_account", ...}',
    "gcs_project": "my-gcp-project",
    "azure_account_name": "mystorageaccount",
    "azure_account_key": "the account's access key (or use a SAS token or a service principal)",
    "azure_sas_token": "sv=...&ss=b&srt=co&sp=rwdlac&sig=...",
    "azure_tenant_id": "the directory (tenant) id, a GUID",
    "azure_client_id": "the application (client) id, a GUID",
    "azure_client_secret": "the client secret of that application",
    "azure_connection_string": "DefaultEndpointsProtocol=https;AccountName=...;AccountKey=...",
    "storage_options": '{"requester_pays": true, "client_kwargs": {"verify": false}}',
    "history_uri": "s3://lake/_deltalite_history (empty: no operations history)",
}


def _field(label: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"label": label, "description": description, "schema": dict(schema)}


CONN_FIELDS: dict[str, dict[str, Any]] = {
    "aws_access_key_id": _field("AWS access key id", "S3: access key id (s3fs `key`)", _SECRET),
    "aws_secret_access_key": _field("AWS secret access key", "S3: secret access key (s3fs `secret`)", _SECRET),
    "aws_session_token": _field("AWS session token", "S3: session token of temporary credentials", _SECRET),
    "endpoint_url": _field("S3 endpoint URL", "S3-compatible stores (MinIO, Ceph): e.g. https://minio:9000", _STRING),
    "region_name": _field("AWS region", "S3: the bucket's region, e.g. eu-west-1", _STRING),
    "dynamodb_table_name": _field(
        "DynamoDB commit table",
        "S3: commit through this DynamoDB table as delta-spark's S3DynamoDBLogStore does (its "
        "spark.io.delta.storage.S3DynamoDBLogStore.ddb.tableName); only for tables those writers share",
        _STRING,
    ),
    "dynamodb_region": _field("DynamoDB region", "S3: the region of the DynamoDB commit table", _STRING),
    "dynamodb_endpoint": _field("DynamoDB endpoint URL", "S3: a DynamoDB endpoint other than AWS's", _STRING),
    "glue_region": _field(
        "Glue Data Catalog region",
        "Tables by name, glue://database/table (or a name below a glue://database base URI): the catalog's region",
        _STRING,
    ),
    "glue_endpoint": _field("Glue endpoint URL", "Tables by name: a Glue endpoint other than AWS's", _STRING),
    "glue_catalog_id": _field(
        "Glue catalog id", "Tables by name: the AWS account id of a catalog shared from another account", _STRING
    ),
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
    "storage_options": _field(
        "Other storage options",
        "A JSON object of further fsspec options for the store, passed as they are; its keys win over the fields above",
        _OBJECT,
    ),
    "history_uri": _field(
        "Operations history table",
        "A Delta table (URI, or a path under the base URI) each maintenance operation appends one row to",
        _STRING,
    ),
}
# Fields whose placeholder is a typical value: Airflow 3's UI offers it as a suggestion (a field's ``examples``).
SUGGESTED = ("endpoint_url", "region_name", "gcs_key_file", "gcs_project", "azure_account_name")
for _name in SUGGESTED:
    CONN_FIELDS[_name]["schema"]["examples"] = [PLACEHOLDERS[_name]]

UI_FIELD_BEHAVIOUR: dict[str, Any] = {
    "hidden-fields": ["schema", "login", "password", "port"],
    "relabeling": {"host": "Base URI"},
    "placeholders": dict(PLACEHOLDERS),
}
