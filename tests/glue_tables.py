"""Glue Data Catalog tables on moto's Glue (the session's `moto_server`), registered the ways writers register Delta
tables, so that the resolver is tested against their shapes and not against ours:

- `spark_delta_catalog`: what Spark's HiveExternalCatalog stores for a table delta-spark's DeltaCatalog creates (a
  data-source table Hive cannot read): ``spark.sql.sources.provider=delta`` and the schema in table parameters, the
  real location in the SerDe info's ``path`` parameter, a placeholder ``<default table path>-__PLACEHOLDER__`` as
  ``Location`` and Hive's placeholder column ``col array<string>``
  (HiveExternalCatalog.newSparkSQLSpecificMetastoreTable; Spark's own HiveExternalCatalogSuite builds this shape);
- `spark_placeholder_only`: the same without the SerDe ``path`` (a writer that kept only Spark's placeholder);
- `crawler_native`: a Glue crawler's native Delta table (``CreateNativeDeltaTable``): the real ``Location`` (with a
  trailing slash), a Parquet SerDe, ``classification=delta`` and the crawler's bookkeeping parameters;
- `athena`: Athena's ``CREATE EXTERNAL TABLE ... TBLPROPERTIES ('table_type'='DELTA')``;
- `crawler_manifest`: a Glue crawler's Delta table read through manifests (before native tables, and still when
  ``WriteManifest`` is chosen): Hive's ``SymlinkTextInputFormat`` over ``<table>/_symlink_format_manifest/``;
- tables that are not Delta tables: a crawler's Parquet table, an Iceberg table, a Hive view.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

WAREHOUSE = "s3://warehouse-that-does-not-exist/spark-warehouse"


def glue_client(s3: dict[str, Any]) -> Any:
    """A botocore Glue client on the moto server of the S3 storage options ``s3``."""
    import botocore.session

    return botocore.session.Session().create_client(
        "glue",
        region_name="us-east-1",
        endpoint_url=s3["endpoint_url"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def glue_options(s3: dict[str, Any]) -> dict[str, Any]:
    """The S3 storage options plus the Glue endpoint (moto serves both on one port) and region."""
    return {**s3, "glue_endpoint": s3["endpoint_url"], "glue_region": "us-east-1"}


def _spark_schema() -> str:
    return json.dumps({"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]})


def spark_delta_catalog(database: str, name: str, location: str) -> dict[str, Any]:
    return {
        "Name": name,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": {
            "spark.sql.sources.provider": "delta",
            "spark.sql.sources.schema.numParts": "1",
            "spark.sql.sources.schema.part.0": _spark_schema(),
            "spark.sql.create.version": "4.0.1",
            "EXTERNAL": "TRUE",
            "transient_lastDdlTime": "1764633600",
        },
        "StorageDescriptor": {
            "Columns": [{"Name": "col", "Type": "array<string>", "Comment": "from deserializer"}],
            "Location": f"{WAREHOUSE}/{database}.db/{name}-__PLACEHOLDER__",
            "InputFormat": "org.apache.hadoop.mapred.SequenceFileInputFormat",
            "OutputFormat": "org.apache.hadoop.hive.ql.io.HiveSequenceFileOutputFormat",
            "Compressed": False,
            "NumberOfBuckets": -1,
            "SerdeInfo": {
                "SerializationLibrary": "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
                "Parameters": {"path": location, "serialization.format": "1"},
            },
        },
    }


def spark_placeholder_only(database: str, name: str, location: str) -> dict[str, Any]:
    table = spark_delta_catalog(database, name, location)
    table["TableType"] = "MANAGED_TABLE"
    table["Parameters"].pop("EXTERNAL")
    table["StorageDescriptor"]["Location"] = f"{location}-__PLACEHOLDER__"
    table["StorageDescriptor"]["SerdeInfo"]["Parameters"] = {"serialization.format": "1"}
    return table


def _parquet_descriptor(location: str) -> dict[str, Any]:
    return {
        "Columns": [{"Name": "id", "Type": "bigint"}],
        "Location": location,
        "InputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
        "OutputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
        "SerdeInfo": {
            "SerializationLibrary": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
            "Parameters": {"serialization.format": "1"},
        },
    }


def crawler_native(name: str, location: str) -> dict[str, Any]:
    return {
        "Name": name,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": {
            "classification": "delta",
            "CrawlerSchemaDeserializerVersion": "1.0",
            "CrawlerSchemaSerializerVersion": "1.0",
            "UPDATED_BY_CRAWLER": "delta-lake-crawler",
            "EXTERNAL": "TRUE",
        },
        "StorageDescriptor": _parquet_descriptor(location.rstrip("/") + "/"),
    }


def crawler_manifest(name: str, location: str) -> dict[str, Any]:
    descriptor = _parquet_descriptor(f"{location}/_symlink_format_manifest/")
    descriptor["InputFormat"] = "org.apache.hadoop.hive.ql.io.SymlinkTextInputFormat"
    descriptor["OutputFormat"] = "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat"
    return {
        "Name": name,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": {"classification": "parquet", "UPDATED_BY_CRAWLER": "delta-crawler", "EXTERNAL": "TRUE"},
        "StorageDescriptor": descriptor,
    }


def athena(name: str, location: str) -> dict[str, Any]:
    return {
        "Name": name,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": {"table_type": "DELTA", "EXTERNAL": "TRUE"},
        "StorageDescriptor": {"Columns": [], "Location": location},
    }


def crawler_parquet(name: str, location: str) -> dict[str, Any]:
    return {
        "Name": name,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": {"classification": "parquet", "UPDATED_BY_CRAWLER": "parquet-crawler", "EXTERNAL": "TRUE"},
        "StorageDescriptor": _parquet_descriptor(location),
    }


def iceberg(name: str, location: str) -> dict[str, Any]:
    return {
        "Name": name,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": {"table_type": "ICEBERG", "metadata_location": f"{location}/metadata/00001.metadata.json"},
        "StorageDescriptor": {"Columns": [], "Location": location},
    }


def hive_view(name: str) -> dict[str, Any]:
    return {
        "Name": name,
        "TableType": "VIRTUAL_VIEW",
        "ViewOriginalText": "SELECT 1",
        "ViewExpandedText": "SELECT 1",
        "Parameters": {},
        "StorageDescriptor": {"Columns": [{"Name": "x", "Type": "int"}]},
    }


def register(client: Any, database: str, tables: list[dict[str, Any]]) -> None:
    """Create ``database`` (if absent) and the tables in it."""
    with contextlib.suppress(client.exceptions.AlreadyExistsException):
        client.create_database(DatabaseInput={"Name": database})
    for table in tables:
        client.create_table(DatabaseName=database, TableInput=table)
