"""Which catalog serves a table name: `SCHEME_TO_CATALOG` maps a URI scheme to its `CatalogResolver`; a URI of any
other scheme is a location already. `resolve_location` is the one place a table URI becomes a location (the engine's
`Table`, the Airflow hook and table discovery all call it), so every surface resolves names the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from airflow_provider_deltalite.engine.catalog.base import CatalogName, CatalogResolver
from airflow_provider_deltalite.engine.catalog.glue import GlueCatalog
from airflow_provider_deltalite.engine.errors import InvalidArgument

SCHEME_TO_CATALOG: dict[str, type[CatalogResolver]] = {
    "glue": GlueCatalog,
}

# The storage options catalogs read: never handed to a store's filesystem.
CATALOG_OPTIONS = frozenset(option for resolver in SCHEME_TO_CATALOG.values() for option in resolver.options)


@dataclass(frozen=True)
class ResolvedLocation:
    """Where a table's files are, and the storage options to reach them.

    Attributes:
        uri: the table's location (the URI as given when it named no catalog table).
        storage_options: the options for that store (the catalogs' own removed).
        name: the catalog name it was resolved from (``glue://sales/orders``), or None.
    """

    uri: str
    storage_options: dict[str, Any] = field(default_factory=dict, repr=False)  # credentials: never in a repr
    name: str | None = None


def catalog_of(uri: str) -> type[CatalogResolver] | None:
    """The resolver class of a URI's scheme, or None when the URI is a location (a path, ``s3://``...)."""
    try:
        scheme = urlsplit(uri.strip()).scheme.lower()
    except (AttributeError, ValueError):
        return None
    return SCHEME_TO_CATALOG.get(scheme)


def storage_options_only(storage_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The storage options without those of the catalogs."""
    return {k: v for k, v in (storage_options or {}).items() if k not in CATALOG_OPTIONS}


def resolve_location(uri: str, storage_options: Mapping[str, Any] | None = None) -> ResolvedLocation:
    """The location of the table ``uri`` names: asks the catalog for a catalog name (``glue://sales/orders``), else
    returns ``uri`` itself. The storage options come back without the catalogs' own.

    Example:
        >>> resolve_location("s3://lake/orders", {"glue_region": "eu-west-1", "anon": True})
        ResolvedLocation(uri='s3://lake/orders', name=None)

    Raises:
        InvalidArgument: the URI names a database, not a table, or is not a catalog name.
        CatalogTableNotFound, NotADeltaTable, CatalogError, MissingDependency: see `CatalogResolver.resolve`.
    """
    options = dict(storage_options or {})
    resolver_class = catalog_of(uri)
    if resolver_class is None:
        return ResolvedLocation(uri, storage_options_only(options))
    name = CatalogName.parse(uri)
    if name.table is None:
        raise InvalidArgument(f"{name} names a database; a table is {name.scheme}://{name.database}/<table>", str(name))
    table = resolver_class(options).resolve(name)
    return ResolvedLocation(table.location, storage_options_only(options), table.name)


def list_catalog_tables(uri: str, storage_options: Mapping[str, Any] | None = None) -> list[str]:
    """The names (``glue://sales/orders``) of the Delta tables of the catalog database ``uri`` names, sorted.

    Raises:
        InvalidArgument: ``uri`` is not a catalog name.
        CatalogTableNotFound: no such database.
        CatalogError: the catalog could not answer.
    """
    resolver_class = catalog_of(uri)
    if resolver_class is None:
        raise InvalidArgument(f"not a catalog name (known: {', '.join(sorted(SCHEME_TO_CATALOG))})", uri)
    name = CatalogName.parse(uri)
    if name.table is not None:
        return [str(resolver_class(dict(storage_options or {})).resolve(name).name)]
    return [table.name for table in resolver_class(dict(storage_options or {})).list_tables(name)]
