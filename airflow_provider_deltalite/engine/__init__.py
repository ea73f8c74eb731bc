"""The Delta format engine: storage, log replay, snapshots, scans. It imports neither Airflow nor Spark.

The names below are imported when first used (PEP 562), as the package root does: importing a leaf such as
``engine.errors`` runs this file first, and Airflow's triggerer imports a trigger's module on its event loop, so
this file must not pull in pyarrow and the log replay.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_deltalite.engine.errors import (
        CatalogError,
        CatalogTableNotFound,
        CheckpointUnreadable,
        CommitRetriesExhausted,
        CommitTooLate,
        ConcurrentAppend,
        ConcurrentDeleteDelete,
        ConcurrentDeleteRead,
        ConcurrentModification,
        ConcurrentTransaction,
        CorruptLog,
        CreateOnlyNotSupported,
        DeltaLiteError,
        ExecutorError,
        InvalidArgument,
        InvalidExpression,
        InvalidTableProperty,
        LogGap,
        MetadataChanged,
        NotADeltaTable,
        ProtocolChanged,
        ProtocolNotSupported,
        RetentionTooShort,
        SchemaError,
        StorageError,
        TableNotFound,
        TableRecreated,
        TransactionError,
        UploadInterrupted,
        VacuumRefused,
        VersionNotFound,
    )
    from airflow_provider_deltalite.engine.file_actions import remove_from_add
    from airflow_provider_deltalite.engine.snapshot import Snapshot
    from airflow_provider_deltalite.engine.table import Table
    from airflow_provider_deltalite.engine.transaction import CommitResult, RetryPolicy, Transaction

_ERRORS = "airflow_provider_deltalite.engine.errors"
_EXPORTS = {
    "CatalogError": _ERRORS,
    "CatalogTableNotFound": _ERRORS,
    "CheckpointUnreadable": _ERRORS,
    "CommitRetriesExhausted": _ERRORS,
    "CommitTooLate": _ERRORS,
    "ConcurrentAppend": _ERRORS,
    "ConcurrentDeleteDelete": _ERRORS,
    "ConcurrentDeleteRead": _ERRORS,
    "ConcurrentModification": _ERRORS,
    "ConcurrentTransaction": _ERRORS,
    "CorruptLog": _ERRORS,
    "CreateOnlyNotSupported": _ERRORS,
    "DeltaLiteError": _ERRORS,
    "ExecutorError": _ERRORS,
    "InvalidArgument": _ERRORS,
    "InvalidExpression": _ERRORS,
    "InvalidTableProperty": _ERRORS,
    "LogGap": _ERRORS,
    "MetadataChanged": _ERRORS,
    "NotADeltaTable": _ERRORS,
    "ProtocolChanged": _ERRORS,
    "ProtocolNotSupported": _ERRORS,
    "RetentionTooShort": _ERRORS,
    "SchemaError": _ERRORS,
    "StorageError": _ERRORS,
    "TableNotFound": _ERRORS,
    "TableRecreated": _ERRORS,
    "TransactionError": _ERRORS,
    "UploadInterrupted": _ERRORS,
    "VacuumRefused": _ERRORS,
    "VersionNotFound": _ERRORS,
    "remove_from_add": "airflow_provider_deltalite.engine.file_actions",
    "Snapshot": "airflow_provider_deltalite.engine.snapshot",
    "Table": "airflow_provider_deltalite.engine.table",
    "CommitResult": "airflow_provider_deltalite.engine.transaction",
    "RetryPolicy": "airflow_provider_deltalite.engine.transaction",
    "Transaction": "airflow_provider_deltalite.engine.transaction",
}

__all__ = [
    "CatalogError",
    "CatalogTableNotFound",
    "CheckpointUnreadable",
    "CommitResult",
    "CommitRetriesExhausted",
    "CommitTooLate",
    "ConcurrentAppend",
    "ConcurrentDeleteDelete",
    "ConcurrentDeleteRead",
    "ConcurrentModification",
    "ConcurrentTransaction",
    "CorruptLog",
    "CreateOnlyNotSupported",
    "DeltaLiteError",
    "ExecutorError",
    "InvalidArgument",
    "InvalidExpression",
    "InvalidTableProperty",
    "LogGap",
    "MetadataChanged",
    "NotADeltaTable",
    "ProtocolChanged",
    "ProtocolNotSupported",
    "RetentionTooShort",
    "RetryPolicy",
    "SchemaError",
    "Snapshot",
    "StorageError",
    "Table",
    "TableNotFound",
    "TableRecreated",
    "Transaction",
    "TransactionError",
    "UploadInterrupted",
    "VacuumRefused",
    "VersionNotFound",
    "remove_from_add",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
