"""Liquid clustering metadata: whether a table is clustered and on which columns (protocol "Clustered Table").

A table is clustered when its protocol lists the writer feature ``clustering`` (or ``liquid``, the name a Databricks
preview used). Its clustering columns live in the ``delta.clustering`` domain (``delta.liquid`` in that preview), by
physical name under column mapping. Writers spell the configuration in three shapes, all accepted here:

- a list of name paths, as Spark and Kernel write it: ``{"clusteringColumns": [["a"], ["s", "b"]]}``;
- a flat list of names, as the protocol's example shows: ``{"clusteringColumns": ["a", "b"]}``;
- the preview's objects: ``{"clusteringColumns": [{"physicalName": ["a"]}]}``.

The columns are returned under their logical names, spelled as Delta spells them in ``ZCUBE_ZORDER_BY`` tags and in
``clusterBy`` (`format_column`: nested fields joined by dots, a segment holding a dot backquoted).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_deltalite.engine.column_mapping import physical_name
from airflow_provider_deltalite.engine.errors import CorruptLog

CLUSTERING_FEATURES = ("clustering", "liquid")
CLUSTERING_DOMAINS = ("delta.clustering", "delta.liquid")
CLUSTERING_PROVIDER = "liquid"


@dataclass(frozen=True)
class ClusteringColumn:
    """One clustering column: its logical path (as the schema spells it), physical path and Delta type."""

    logical: tuple[str, ...]
    physical: tuple[str, ...]
    type: Any

    @property
    def name(self) -> str:
        """The logical name as Delta writes it in tags and commit parameters (``a``, ``s.b``, ```a.b```)."""
        # every OPTIMIZE reads the clustering domain; only a clustered table needs the expression modules
        from airflow_provider_deltalite.engine.expressions import format_column

        return format_column(self.logical)

    @property
    def dotted(self) -> str:
        """The logical path joined by dots, as the statistics collector names its columns."""
        return ".".join(self.logical)


@dataclass(frozen=True)
class ClusteringSpec:
    """A clustered table's clustering: the domain it came from and its columns (empty: clustered on nothing)."""

    domain: str | None
    columns: tuple[ClusteringColumn, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


def is_clustered(protocol: Any) -> bool:
    """Whether a protocol (`ProtocolView`) makes the table clustered."""
    return any(protocol.has_feature(f) for f in CLUSTERING_FEATURES)


def clustering_spec(snapshot: Any) -> ClusteringSpec | None:
    """The clustering of a snapshot; None when the table is not clustered.

    Raises:
        CorruptLog: the domain's configuration is not JSON or not in one of the three shapes, or it names a column
            the schema does not have (the message names it).
    """
    if not is_clustered(snapshot.protocol):
        return None
    domains: Mapping[str, Mapping[str, Any]] = snapshot.domain_metadata or {}
    for domain in CLUSTERING_DOMAINS:
        action = domains.get(domain)
        if action is None or action.get("removed"):
            continue
        paths = _physical_paths(action.get("configuration"), domain, snapshot.table_uri)
        columns = tuple(
            _resolve(snapshot.schema, snapshot.column_mapping_mode, p, domain, snapshot.table_uri) for p in paths
        )
        return ClusteringSpec(domain, columns)
    return ClusteringSpec(None, ())


def _physical_paths(configuration: Any, domain: str, uri: str | None) -> list[tuple[str, ...]]:
    try:
        parsed = json.loads(configuration) if isinstance(configuration, str) else configuration
    except (ValueError, RecursionError):
        raise CorruptLog(f"the {domain} domain's configuration is not JSON", uri) from None
    columns = parsed.get("clusteringColumns") if isinstance(parsed, dict) else None
    if not isinstance(columns, list):
        raise CorruptLog(f"the {domain} domain has no clusteringColumns list", uri)
    paths: list[tuple[str, ...]] = []
    for entry in columns:
        if isinstance(entry, dict):  # the preview's {"physicalName": [...]}
            entry = entry.get("physicalName")
        if isinstance(entry, str):
            entry = [entry]
        if not isinstance(entry, list) or not entry or not all(isinstance(p, str) and p for p in entry):
            raise CorruptLog(f"the {domain} domain holds a clustering column that is not a name: {entry!r}", uri)
        paths.append(tuple(entry))
    return paths


def _resolve(
    schema: Mapping[str, Any], mode: str, path: Sequence[str], domain: str, uri: str | None
) -> ClusteringColumn:
    found = _walk(schema, mode, path)
    if found is None and len(path) == 1 and "." in path[0]:
        found = _walk(schema, mode, path[0].split("."))  # a flat name written dotted for a nested field
    if found is None:
        shown = ".".join(path)
        raise CorruptLog(
            f"the {domain} domain names clustering column '{shown}', which is not in the table schema", uri
        )
    logical, field = found
    return ClusteringColumn(tuple(logical), tuple(path), field["type"])


def _walk(schema: Mapping[str, Any], mode: str, path: Sequence[str]) -> tuple[list[str], dict] | None:
    fields = schema.get("fields") or []
    logical: list[str] = []
    field: dict | None = None
    for i, part in enumerate(path):
        # physical names under column mapping; Delta's resolver is case-insensitive
        match = [f for f in fields if physical_name(f, mode) == part] or [
            f for f in fields if physical_name(f, mode).lower() == part.lower()
        ]
        if len(match) != 1:
            return None
        field = match[0]
        logical.append(field["name"])
        if i < len(path) - 1:
            kind = field["type"]
            if not (isinstance(kind, dict) and kind.get("type") == "struct"):
                return None
            fields = kind.get("fields") or []
    return (logical, field) if field is not None else None
