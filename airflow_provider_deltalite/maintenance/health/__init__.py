"""Table health: what `deltalite health` and `DeltaTable.health` report, from the log and file statistics only.

The names are loaded on first use (PEP 562), so that `deltalite describe`, which counts its size histogram with
`histogram.bucket_counts`, does not import the health computation.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_deltalite.maintenance.health.compute import table_health
    from airflow_provider_deltalite.maintenance.health.metrics import (
        SIZE_BUCKET_EDGES,
        ColumnClustering,
        LastRuns,
        LogHealth,
        PartitionHealth,
        SizeBucket,
        TableHealth,
        Tombstones,
        plain,
    )

_WHERE = {
    "table_health": "compute",
    **{
        name: "metrics"
        for name in (
            "SIZE_BUCKET_EDGES",
            "ColumnClustering",
            "LastRuns",
            "LogHealth",
            "PartitionHealth",
            "SizeBucket",
            "TableHealth",
            "Tombstones",
            "plain",
        )
    },
}

__all__ = [
    "SIZE_BUCKET_EDGES",
    "ColumnClustering",
    "LastRuns",
    "LogHealth",
    "PartitionHealth",
    "SizeBucket",
    "TableHealth",
    "Tombstones",
    "plain",
    "table_health",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
