"""The AWS Glue Data Catalog: ``glue://database/table`` resolved through Glue's ``GetTable``.

Which tables are Delta tables, and where their files are, as the writers that register them leave it:

- Spark with delta-spark's ``DeltaCatalog`` (on a Glue-backed Hive metastore: EMR, Glue jobs) stores a Delta table as
  a data-source table Hive cannot read: the table parameter ``spark.sql.sources.provider`` is ``delta``, the real
  location is the ``path`` parameter of the storage descriptor's SerDe info, and the storage descriptor's
  ``Location`` is a placeholder, ``<default table path>-__PLACEHOLDER__``.
- Glue crawlers that create native Delta tables, Athena and Trino register the real location as ``Location`` and
  mark the table with ``spark.sql.sources.provider=delta``, ``table_type=DELTA`` or ``classification=delta``.
- Glue crawlers that write manifests instead (and tables made for delta-spark's ``GENERATE symlink_format_manifest``)
  read ``<table>/_symlink_format_manifest`` with Hive's ``SymlinkTextInputFormat``: the Delta table is its parent.

So a table is a Delta table when one of those three parameters says ``delta`` (in any case) or it reads a symlink
manifest; its location is the SerDe ``path`` when there is one, else the manifest's table, else ``Location`` without
a trailing ``-__PLACEHOLDER__``. The location is used as
written (``s3a://`` stays ``s3a://``: a DynamoDB commit table keys its entries by the URI the other writers use).

Storage options read here (`GLUE_OPTIONS`): ``glue_region`` (else the S3 ``client_kwargs`` region, else the AWS
configuration, else us-east-1), ``glue_endpoint`` (else botocore's: ``AWS_ENDPOINT_URL_GLUE`` or AWS's), and
``glue_catalog_id`` (the AWS account whose catalog holds the table, for a catalog shared across accounts). The
credentials are those of S3 (``key``/``secret``/``token``/``profile``), else the AWS credential chain.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_deltalite.engine.catalog.base import CatalogName, CatalogResolver, CatalogTable
from airflow_provider_deltalite.engine.errors import (
    CatalogError,
    CatalogTableNotFound,
    MissingDependency,
    NotADeltaTable,
    redact_uri,
)
from airflow_provider_deltalite.engine.storage.paths import describe

REGION_OPTION = "glue_region"
ENDPOINT_OPTION = "glue_endpoint"
CATALOG_ID_OPTION = "glue_catalog_id"
GLUE_OPTIONS = (REGION_OPTION, ENDPOINT_OPTION, CATALOG_ID_OPTION)
DEFAULT_REGION = "us-east-1"

PLACEHOLDER_SUFFIX = "-__PLACEHOLDER__"  # Spark's HiveExternalCatalog, for tables Hive cannot read
SYMLINK_INPUT_FORMAT = "org.apache.hadoop.hive.ql.io.SymlinkTextInputFormat"
MANIFEST_DIR = "_symlink_format_manifest"  # delta-spark's GENERATE symlink_format_manifest writes it at the root
# The parameters that mark a Delta table, by who writes them: Spark (and the crawler's native tables), Athena and
# Trino, crawlers.
DELTA_MARKERS = ("spark.sql.sources.provider", "table_type", "classification")


def _manifest_table(table: Mapping[str, Any]) -> str | None:
    """The Delta table a symlink-manifest table reads (the parent of ``_symlink_format_manifest``), else None."""
    descriptor = table.get("StorageDescriptor") or {}
    if str(descriptor.get("InputFormat") or "").strip() != SYMLINK_INPUT_FORMAT:
        return None
    parent, _, last = str(descriptor.get("Location") or "").strip().rstrip("/").rpartition("/")
    return parent if last == MANIFEST_DIR and "://" in parent else None


def is_delta(table: Mapping[str, Any]) -> bool:
    """Whether a Glue ``Table`` (as ``GetTable`` returns it) is marked as a Delta table, or reads a Delta table's
    symlink manifest."""
    parameters = table.get("Parameters") or {}
    marked = any(str(parameters.get(key, "")).strip().lower() == "delta" for key in DELTA_MARKERS)
    return marked or _manifest_table(table) is not None


def delta_location(table: Mapping[str, Any]) -> str | None:
    """Where a Glue Delta table's files are: the SerDe ``path`` parameter, else the table a symlink manifest belongs
    to, else ``Location`` without Spark's ``-__PLACEHOLDER__`` suffix; None when none is set.

    Example:
        >>> delta_location({"StorageDescriptor": {"Location": "s3://wh/sales.db/orders-__PLACEHOLDER__",
        ...     "SerdeInfo": {"Parameters": {"path": "s3a://lake/orders"}}}})
        's3a://lake/orders'
        >>> delta_location({"StorageDescriptor": {"Location": "s3://wh/sales.db/orders-__PLACEHOLDER__"}})
        's3://wh/sales.db/orders'
    """
    descriptor = table.get("StorageDescriptor") or {}
    serde_parameters = (descriptor.get("SerdeInfo") or {}).get("Parameters") or {}
    path = str(serde_parameters.get("path") or "").strip()
    if path:
        return path.rstrip("/") or path
    manifest_of = _manifest_table(table)
    if manifest_of is not None:
        return manifest_of
    location = str(descriptor.get("Location") or "").strip().rstrip("/")
    location = location.removesuffix(PLACEHOLDER_SUFFIX)
    return location or None


def _what_it_is(table: Mapping[str, Any]) -> str:
    """How a table that is not a Delta table describes itself, for the error (its format or kind)."""
    parameters = table.get("Parameters") or {}
    for key in DELTA_MARKERS:
        value = str(parameters.get(key, "")).strip()
        if value:
            return f"{key}={value}"
    kind = str(table.get("TableType") or "").strip()
    return f"a {kind}" if kind else "no Delta marker (spark.sql.sources.provider, table_type or classification)"


def _error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, Mapping):
        error = response.get("Error") or {}
        if isinstance(error, Mapping):
            return str(error.get("Code", ""))
    return ""


class GlueCatalog(CatalogResolver):
    """The AWS Glue Data Catalog (see the module docstring for the options and the rules).

    Example:
        >>> GlueCatalog({"glue_region": "eu-west-1"}).resolve(CatalogName.parse("glue://sales/orders"))
        ...     # doctest: +SKIP
        CatalogTable(name='glue://sales/orders', location='s3://lake/sales/orders')
    """

    scheme = "glue"
    options = GLUE_OPTIONS

    def __init__(self, storage_options: Mapping[str, Any]) -> None:
        super().__init__(storage_options)
        options = self.storage_options
        client_kwargs = options.get("client_kwargs") or {}
        self.region: str | None = options.get(REGION_OPTION) or client_kwargs.get("region_name") or None
        self.endpoint: str | None = options.get(ENDPOINT_OPTION) or None
        self.catalog_id: str | None = options.get(CATALOG_ID_OPTION) or None
        self._credentials = {k: options[k] for k in ("key", "secret", "token") if options.get(k)}
        self._profile = options.get("profile") or None
        self._client: Any = None

    @property
    def client(self) -> Any:
        """A botocore Glue client, made on first use."""
        if self._client is None:
            try:
                import botocore.session
                from botocore.config import Config
            except ImportError:
                raise MissingDependency(
                    "glue:// tables need botocore: pip install 'airflow-provider-deltalite[s3]'",
                    package="botocore",
                    extra="s3",
                ) from None
            session = botocore.session.Session(profile=self._profile)
            self.region = self.region or session.get_config_variable("region") or DEFAULT_REGION
            self._client = session.create_client(
                "glue",
                region_name=self.region,
                endpoint_url=self.endpoint,
                aws_access_key_id=self._credentials.get("key"),
                aws_secret_access_key=self._credentials.get("secret"),
                aws_session_token=self._credentials.get("token"),
                config=Config(retries={"mode": "standard"}, connect_timeout=10, read_timeout=30),
            )
        return self._client

    def _where(self) -> str:
        where = f"the Glue Data Catalog of region {self.region or DEFAULT_REGION}"
        if self.catalog_id:
            where += f", catalog {self.catalog_id}"
        return where + (f" at {redact_uri(self.endpoint)}" if self.endpoint else "")

    def _ids(self) -> dict[str, str]:
        return {"CatalogId": self.catalog_id} if self.catalog_id else {}

    def _call(self, name: CatalogName, operation: str, **kwargs: Any) -> Any:
        """One Glue request; a missing database or table becomes CatalogTableNotFound, any other failure a
        CatalogError naming the request, the code and the catalog (never the credentials)."""
        try:
            client = self.client
        except MissingDependency:
            raise
        except Exception as exc:  # a bad endpoint URL, an unknown profile
            raise CatalogError(f"cannot make a Glue client for {self._where()}: {describe(exc)}", str(name)) from None
        try:
            return getattr(client, operation)(**self._ids(), **kwargs)
        except Exception as exc:
            if type(exc).__module__.split(".")[0] != "botocore" and not isinstance(exc, OSError):
                raise
            if _error_code(exc) == "EntityNotFoundException":
                raise self._not_found(name) from None
            raise CatalogError(f"Glue {operation} failed in {self._where()}: {describe(exc)}", str(name)) from None

    def _not_found(self, name: CatalogName) -> CatalogTableNotFound:
        """Which of the database and the table is missing (Glue answers EntityNotFoundException for both)."""
        database_missing = name.table is None
        if not database_missing:
            try:
                self.client.get_database(**self._ids(), Name=name.database)
            except Exception as exc:
                database_missing = _error_code(exc) == "EntityNotFoundException"
        if database_missing:
            problem = f"database {name.database!r} does not exist in {self._where()}"
        else:
            problem = f"table {name.table!r} does not exist in database {name.database!r} of {self._where()}"
        return CatalogTableNotFound(problem, str(name), database=name.database, table=name.table)

    def resolve(self, name: CatalogName) -> CatalogTable:
        answer = self._call(name, "get_table", DatabaseName=name.database, Name=name.table)
        table = answer.get("Table") or {}
        return self._delta_table(name, table)

    def _delta_table(self, name: CatalogName, table: Mapping[str, Any]) -> CatalogTable:
        if not is_delta(table):
            raise NotADeltaTable(f"the Glue table is not a Delta table ({_what_it_is(table)})", str(name))
        location = delta_location(table)
        if location is None:
            raise NotADeltaTable(
                "the Glue table gives no location (no SerDe path parameter, no storage descriptor Location)",
                str(name),
            )
        return CatalogTable(str(name), location)

    def list_tables(self, database: CatalogName) -> list[CatalogTable]:
        found: list[CatalogTable] = []
        token: str | None = None
        while True:
            more = {"NextToken": token} if token else {}
            page = self._call(database, "get_tables", DatabaseName=database.database, **more)
            for table in page.get("TableList") or ():
                name = database.of_table(str(table.get("Name", "")))
                if name.table and is_delta(table) and delta_location(table) is not None:
                    found.append(CatalogTable(str(name), str(delta_location(table))))
            token = page.get("NextToken")
            if not token:
                break
        return sorted(found, key=lambda t: t.name)
