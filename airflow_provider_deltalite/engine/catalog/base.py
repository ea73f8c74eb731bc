"""The catalog contract: a `CatalogResolver` turns a table's name (``glue://database/table``) into the location of
its files, and lists the Delta tables of a database.

A catalog sits beside the storage backends: it is asked once, before a table is opened, and the table is then read
and written at the location it gave, with the storage options of that store. A new kind of catalog is a new resolver
module and an entry in `registry.SCHEME_TO_CATALOG`, not a branch on a scheme name in the callers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import unquote, urlsplit

from airflow_provider_deltalite.engine.errors import InvalidArgument, redact_uri


@dataclass(frozen=True)
class CatalogName:
    """A name in a catalog: ``<scheme>://<database>`` (a database) or ``<scheme>://<database>/<table>`` (a table).

    Example:
        >>> CatalogName.parse("glue://sales/orders")
        CatalogName(scheme='glue', database='sales', table='orders')
        >>> str(CatalogName("glue", "sales", None))
        'glue://sales'
    """

    scheme: str
    database: str
    table: str | None

    @classmethod
    def parse(cls, uri: str) -> CatalogName:
        """The database and table ``uri`` names.

        Raises:
            InvalidArgument: the URI holds more than a database and a table, credentials, a query or a port.
        """
        text = uri.strip()
        try:
            parts = urlsplit(text)
            port = parts.port
        except ValueError:
            raise InvalidArgument("not a catalog name; write <catalog>://database/table", redact_uri(text)) from None
        scheme = parts.scheme.lower()
        shown = f"{scheme}://database/table"
        if parts.username is not None or parts.password is not None or port is not None:
            raise InvalidArgument(f"a catalog name holds no user, password or port; write {shown}", redact_uri(text))
        if parts.query or parts.fragment:
            raise InvalidArgument(f"a catalog name has no query or fragment; write {shown}", redact_uri(text))
        database = unquote(parts.netloc)
        path = [unquote(p) for p in parts.path.strip("/").split("/")] if parts.path.strip("/") else []
        if not database or len(path) > 1 or any(not p for p in path):
            raise InvalidArgument(f"not a catalog name; write {shown} (or {scheme}://database)", redact_uri(text))
        return cls(scheme, database, path[0] if path else None)

    def __str__(self) -> str:
        base = f"{self.scheme}://{self.database}"
        return base if self.table is None else f"{base}/{self.table}"

    def of_table(self, table: str) -> CatalogName:
        """The name of a table of this database."""
        return CatalogName(self.scheme, self.database, table)


@dataclass(frozen=True)
class CatalogTable:
    """A Delta table a catalog knows: its name (``glue://sales/orders``) and the URI of its files."""

    name: str
    location: str


class CatalogResolver(ABC):
    """One catalog client, built from the storage options (credentials, region, endpoint).

    Subclasses name the options they read in ``options``; those options are removed from the storage options before
    the store's filesystem sees them.

    Args:
        storage_options: the table's storage options (the catalog's own, and the store's credentials, which the
            catalog may share).
    """

    scheme: ClassVar[str]
    options: ClassVar[tuple[str, ...]] = ()

    def __init__(self, storage_options: Mapping[str, Any]) -> None:
        self.storage_options = dict(storage_options)

    @abstractmethod
    def resolve(self, name: CatalogName) -> CatalogTable:
        """The Delta table ``name`` names (``name.table`` is set).

        Raises:
            CatalogTableNotFound: no such database or table.
            NotADeltaTable: the table is of another format, or has no location.
            CatalogError: the catalog could not answer.
            MissingDependency: the catalog's client library is not installed.
        """

    @abstractmethod
    def list_tables(self, database: CatalogName) -> list[CatalogTable]:
        """Every Delta table of ``database`` (``database.table`` is None), sorted by name; other tables are left out.

        Raises:
            CatalogTableNotFound: no such database.
            CatalogError: the catalog could not answer.
        """
