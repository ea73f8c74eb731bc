"""OpenLineage for deltalite's operators: the table as input and output dataset, the stats as a run facet.

The OpenLineage provider is optional. `operator_lineage` imports it when called and returns None when it is not
installed, so nothing here costs anything without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

# Stats copied into the run facet: numbers a lineage backend can chart, not file lists.
_FACET_SKIP = ("plan", "filesToDelete", "dirsToDelete")


def dataset_identity(table_uri: str) -> tuple[str, str]:
    """The OpenLineage dataset ``(namespace, name)`` of a table, per the OpenLineage naming spec.

    Example:
        >>> dataset_identity("s3://lake/warehouse/events")
        ('s3://lake', 'warehouse/events')
        >>> dataset_identity("/data/events")
        ('file', '/data/events')
    """
    uri = table_uri.rstrip("/") or table_uri
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if not scheme or len(scheme) == 1 or scheme == "file":
        path = parts.path if scheme == "file" else uri
        return "file", path
    authority = parts.hostname or ""
    if parts.username:  # abfss://container@account.dfs.core.windows.net: the container is part of the namespace
        authority = f"{parts.username}@{authority}"
    if parts.port:
        authority = f"{authority}:{parts.port}"
    scheme = {"s3a": "s3", "s3n": "s3", "gcs": "gs"}.get(scheme, scheme)
    return f"{scheme}://{authority}", parts.path.lstrip("/")


def table_level(health: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A health dict (`TableHealth.to_dict`) without its partitions: the table-level metrics."""
    if health is None:
        return None
    return {k: v for k, v in health.items() if k not in ("partitions", "partitionsTruncated")}


def run_facet_fields(operation: str, stats: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of the deltalite run facet: the operation and its stats without file lists; for MAINTAIN, the
    run's stats and the table-level health before and after."""
    if operation == "MAINTAIN":
        run = stats.get("run") or {}
        return {
            "operation": operation,
            "stats": {
                **{k: v for k, v in run.items() if k not in _FACET_SKIP},
                "skippedReason": stats.get("skippedReason"),
            },
            "healthBefore": table_level(stats.get("healthBefore")),
            "healthAfter": table_level(stats.get("healthAfter")),
        }
    return {"operation": operation, "stats": {k: v for k, v in stats.items() if k not in _FACET_SKIP}}


def operator_lineage(table_uri: str, operation: str, stats: Mapping[str, Any] | None) -> Any:
    """An ``OperatorLineage`` with the table as input and output and a ``deltalite`` run facet; None without the
    OpenLineage provider."""
    try:
        import attr
        from airflow.providers.openlineage.extractors import OperatorLineage
        from openlineage.client.generated.base import InputDataset, OutputDataset, RunFacet
    except ImportError:
        return None

    @attr.define
    class DeltaLiteMaintenanceRunFacet(RunFacet):
        """deltalite's maintenance run: the operation (OPTIMIZE, ZORDER, VACUUM) and its stats."""

        operation: str
        stats: dict[str, Any]

    @attr.define
    class DeltaLiteMaintainRunFacet(RunFacet):
        """deltalite's MAINTAIN run: the run's stats and the table-level health before and after it."""

        operation: str
        stats: dict[str, Any]
        healthBefore: dict[str, Any] | None  # camelCase: the facet's JSON names
        healthAfter: dict[str, Any] | None

    namespace, name = dataset_identity(table_uri)
    run_facets = {}
    if stats is not None:
        fields = run_facet_fields(operation, stats)
        facet = DeltaLiteMaintainRunFacet if "healthBefore" in fields else DeltaLiteMaintenanceRunFacet
        run_facets["deltalite"] = facet(**fields)
    return OperatorLineage(
        inputs=[InputDataset(namespace=namespace, name=name)],
        outputs=[OutputDataset(namespace=namespace, name=name)],
        run_facets=run_facets,
    )
