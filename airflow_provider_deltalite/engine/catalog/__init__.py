"""Catalogs: table names (``glue://database/table``) resolved to the locations of their files, beside the storage
backends. The contract is `base.CatalogResolver`; `registry.SCHEME_TO_CATALOG` says which resolver serves a scheme."""

from airflow_provider_deltalite.engine.catalog.base import CatalogName, CatalogResolver, CatalogTable
from airflow_provider_deltalite.engine.catalog.registry import (
    CATALOG_OPTIONS,
    SCHEME_TO_CATALOG,
    ResolvedLocation,
    catalog_of,
    list_catalog_tables,
    resolve_location,
    storage_options_only,
)

__all__ = [
    "CATALOG_OPTIONS",
    "SCHEME_TO_CATALOG",
    "CatalogName",
    "CatalogResolver",
    "CatalogTable",
    "ResolvedLocation",
    "catalog_of",
    "list_catalog_tables",
    "resolve_location",
    "storage_options_only",
]
