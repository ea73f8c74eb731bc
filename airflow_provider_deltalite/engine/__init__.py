"""The Delta format engine: storage, log replay, snapshots, scans. It imports neither Airflow nor Spark."""

from airflow_provider_deltalite.engine.errors import (
    CheckpointUnreadable,
    CorruptLog,
    DeltaLiteError,
    InvalidExpression,
    InvalidTableProperty,
    ProtocolNotSupported,
    SchemaError,
    StorageError,
    TableNotFound,
    VersionNotFound,
)
from airflow_provider_deltalite.engine.snapshot import Snapshot
from airflow_provider_deltalite.engine.table import DeltaTable

__all__ = [
    "CheckpointUnreadable",
    "CorruptLog",
    "DeltaLiteError",
    "DeltaTable",
    "InvalidExpression",
    "InvalidTableProperty",
    "ProtocolNotSupported",
    "SchemaError",
    "Snapshot",
    "StorageError",
    "TableNotFound",
    "VersionNotFound",
]
