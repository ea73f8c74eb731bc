"""`DeltaLiteHook`: a `deltalite` connection turned into a table URI, fsspec storage options and a `DeltaTable`.

The connection holds a base URI (the ``host`` field, e.g. ``s3://lake/warehouse``) and the storage credentials in its
extra JSON. Well-known fields map to the fsspec backend of the base URI's scheme; a ``storage_options`` object is
passed to fsspec as it is (its keys win; a JSON object, or a string holding one)::

    {
      "aws_access_key_id": "AKIA...", "aws_secret_access_key": "...", "aws_session_token": "...",
      "endpoint_url": "https://minio.internal:9000", "region_name": "eu-west-1",
      "glue_region": "eu-west-1", "glue_endpoint": "https://glue.eu-west-1.amazonaws.com", "glue_catalog_id": "1234...",
      "gcs_key_file": "/secrets/sa.json", "gcs_token": {...service account JSON...}, "gcs_project": "p",
      "azure_account_name": "acct", "azure_account_key": "...", "azure_sas_token": "...",
      "azure_tenant_id": "...", "azure_client_id": "...", "azure_client_secret": "...",
      "storage_options": {"any_fsspec_option": "..."}
    }

A field that is ``null`` or ``""`` is not set: Airflow's connection form can save every field it shows, the unused ones
as ``null``, so a connection made in the UI holds all the fields of every store and only the filled ones count.

Every credential value is registered with Airflow's secret masker (`mask_secret`) as soon as it is read, so it is
replaced by ``***`` in every task log line, whatever prints it.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from airflow.providers.common.compat.sdk import AirflowNotFoundException, BaseHook, mask_secret

from airflow_provider_deltalite.engine.errors import DeltaLiteError, InvalidArgument
from airflow_provider_deltalite.engine.storage.retry import RETRY_OPTIONS

if TYPE_CHECKING:
    from airflow_provider_deltalite.table import DeltaTable

CONN_TYPE = "deltalite"

# Connection extra fields -> (backend, fsspec option). ``region_name`` goes into s3fs's client_kwargs.
S3_FIELDS = {
    "aws_access_key_id": "key",
    "aws_secret_access_key": "secret",
    "aws_session_token": "token",
    "endpoint_url": "endpoint_url",
    "region_name": "region_name",
    # the DynamoDB commit mode (engine/storage/dynamodb_commit.py): storage options of the same names
    "dynamodb_table_name": "dynamodb_table_name",
    "dynamodb_region": "dynamodb_region",
    "dynamodb_endpoint": "dynamodb_endpoint",
    # tables by name, glue://database/table (engine/catalog/glue.py): storage options of the same names
    "glue_region": "glue_region",
    "glue_endpoint": "glue_endpoint",
    "glue_catalog_id": "glue_catalog_id",
}
GCS_FIELDS = {"gcs_token": "token", "gcs_key_file": "token", "gcs_project": "project"}
AZURE_FIELDS = {
    "azure_account_name": "account_name",
    "azure_account_key": "account_key",
    "azure_sas_token": "sas_token",
    "azure_tenant_id": "tenant_id",
    "azure_client_id": "client_id",
    "azure_client_secret": "client_secret",
    "azure_connection_string": "connection_string",
}
BACKEND_FIELDS = {"s3": S3_FIELDS, "gcs": GCS_FIELDS, "azure": AZURE_FIELDS}
_SCHEME_BACKEND = {
    "s3": "s3",
    "s3a": "s3",
    "gs": "gcs",
    "gcs": "gcs",
    "abfs": "azure",
    "abfss": "azure",
    "az": "azure",
    "adl": "azure",
    "glue": "s3",  # the Glue Data Catalog's tables are on S3, reached with the S3 fields
}
STORAGE_OPTIONS_FIELD = "storage_options"
# the operations history table of the connection's tables (a URI, or a path joined to the base URI)
HISTORY_FIELD = "history_uri"
KNOWN_FIELDS = frozenset({*S3_FIELDS, *GCS_FIELDS, *AZURE_FIELDS, STORAGE_OPTIONS_FIELD, HISTORY_FIELD})

# Option names that identify a place or an account without granting access: left readable in logs (they appear in
# URIs and error messages anyway). Every other string value of the storage options is masked.
NOT_SECRET = frozenset(
    {
        HISTORY_FIELD,
        "endpoint_url",
        "region_name",
        "region",
        "project",
        "account_name",
        "tenant_id",
        "client_id",
        "anon",
        "use_ssl",
        "requester_pays",
        "version_aware",
        "deltalite_single_writer",
        "dynamodb_table_name",
        "dynamodb_region",
        "dynamodb_endpoint",
        "glue_region",
        "glue_endpoint",
        "glue_catalog_id",
        *RETRY_OPTIONS,  # numbers: masked, "10" would be starred out of every log line
    }
)


class InvalidConnection(DeltaLiteError):
    """The Airflow connection of a deltalite task is missing, of another type, or holds extra fields that cannot be
    used. The message names the connection and the field, never a value."""


def mask_storage_options(options: Mapping[str, Any]) -> None:
    """Register every credential value in ``options`` (nested dicts and lists included) with Airflow's masker."""
    for key, value in options.items():
        if key in NOT_SECRET:
            continue
        if isinstance(value, Mapping):
            mask_storage_options(value)
        elif isinstance(value, list | tuple):
            for item in value:
                if isinstance(item, Mapping):
                    mask_storage_options(item)
                elif isinstance(item, str):
                    mask_secret(item)
        elif isinstance(value, str):
            mask_secret(value)


def _scheme(uri: str) -> str:
    scheme = urlsplit(uri).scheme.lower() if "://" in uri else ""
    return "" if len(scheme) == 1 else scheme  # a Windows drive letter is not a scheme


def _is_absolute(uri: str) -> bool:
    return bool(_scheme(uri)) or uri.startswith("/") or uri.startswith("file:")


def _holds_password(uri: str) -> bool:
    """Whether ``uri`` carries ``user:password@``. Its user and password are masked first: the caller refuses the URI,
    and it must not reach a log, an argument list or an error as it is (fsspec would take them for a bucket name)."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return False
    if parts.password is None:  # abfss://container@account...: a user part alone names a place
        return False
    for part in (parts.username, parts.password):
        if part:
            mask_secret(part)
            mask_secret(unquote(part))
    return True


class DeltaLiteHook(BaseHook):
    """Reads a ``deltalite`` connection: the base URI of the tables and the storage options to reach them.

    Args:
        deltalite_conn_id: the connection id; ``None`` means no connection (table URIs are used as given, with the
            credentials of the environment, e.g. an instance role).

    Example:
        >>> hook = DeltaLiteHook("lake")  # doctest: +SKIP
        >>> hook.resolve_table_uri("events")  # base URI s3://lake/warehouse  # doctest: +SKIP
        's3://lake/warehouse/events'
        >>> hook.get_table("events").snapshot().version  # doctest: +SKIP
        42
    """

    conn_name_attr = "deltalite_conn_id"
    default_conn_name = "deltalite_default"
    conn_type = CONN_TYPE
    hook_name = "Delta Lake (deltalite)"

    def __init__(self, deltalite_conn_id: str | None = default_conn_name) -> None:
        super().__init__()
        self.deltalite_conn_id = deltalite_conn_id
        self._loaded: tuple[str | None, dict[str, Any]] | None = None

    # -- connection ---------------------------------------------------------------------------------------------

    def _fail(self, problem: str) -> InvalidConnection:
        return InvalidConnection(f"connection {self.deltalite_conn_id!r}: {problem}")

    def _load(self) -> tuple[str | None, dict[str, Any]]:
        """The base URI and the extra fields of the connection, read once and validated."""
        if self._loaded is not None:
            return self._loaded
        if self.deltalite_conn_id is None:
            self._loaded = (None, {})
            return self._loaded
        try:
            conn = self.get_connection(self.deltalite_conn_id)
        except AirflowNotFoundException:
            raise self._fail(
                "is not defined (add it in the UI, with `airflow connections add`, or as the "
                f"environment variable AIRFLOW_CONN_{self.deltalite_conn_id.upper()})"
            ) from None
        if conn.conn_type != CONN_TYPE:
            raise self._fail(f"has type {conn.conn_type!r}, expected {CONN_TYPE!r}")
        if conn.password:  # hidden in the form, but a URI-style connection can still carry one
            mask_secret(conn.password)
        extra = self._parse_extra(conn.extra)
        base = (conn.host or "").strip() or None
        if base is not None and "://" not in base and not base.startswith("/"):
            raise self._fail("the base URI (host) must be an absolute path or a URI such as s3://bucket/prefix")
        if base is not None and _holds_password(base):
            raise self._fail("the base URI (host) holds credentials (user:password@); put them in the extra fields")
        self._loaded = (base.rstrip("/") if base and base.rstrip("/") else base, extra)
        return self._loaded

    def _parse_extra(self, text: str | None) -> dict[str, Any]:
        if not text:
            return {}
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            # Only the position: the text itself holds credentials.
            raise self._fail(f"extra is not valid JSON (line {exc.lineno}, column {exc.colno})") from None
        if not isinstance(raw, dict):
            raise self._fail(f"extra must be a JSON object, not {type(raw).__name__}")
        extra: dict[str, Any] = {}
        for key, value in raw.items():
            # Airflow 2 forms stored custom fields as extra__<conn_type>__<field>.
            name = key.removeprefix(f"extra__{CONN_TYPE}__")
            if value in (None, ""):
                continue
            extra[name] = value
        mask_storage_options(extra)  # before any check can fail and anything is logged
        unknown = sorted(set(extra) - KNOWN_FIELDS)
        if unknown:
            raise self._fail(
                f"unknown extra field(s) {', '.join(unknown)}; put fsspec options under {STORAGE_OPTIONS_FIELD!r}"
            )
        options = extra.get(STORAGE_OPTIONS_FIELD, {})
        if isinstance(options, str):
            try:
                options = json.loads(options)
            except json.JSONDecodeError:
                raise self._fail(f"extra field {STORAGE_OPTIONS_FIELD!r} is not a JSON object") from None
            if isinstance(options, dict):
                mask_storage_options(options)
        if not isinstance(options, dict):
            raise self._fail(f"extra field {STORAGE_OPTIONS_FIELD!r} must be a JSON object")
        extra[STORAGE_OPTIONS_FIELD] = options
        for name, value in extra.items():
            if name == STORAGE_OPTIONS_FIELD or (name == "gcs_token" and isinstance(value, dict)):
                continue
            if not isinstance(value, str):
                raise self._fail(f"extra field {name!r} must be a string, not {type(value).__name__}")
        return extra

    # -- public API ---------------------------------------------------------------------------------------------

    @property
    def base_uri(self) -> str | None:
        """The connection's base URI (``host``), without a trailing slash; None when it has none."""
        return self._load()[0]

    def resolve_table_uri(self, table_uri: str | None) -> str:
        """The table's full URI: an absolute path or a URI as given, a relative path joined to the base URI.

        Example:
            >>> hook.resolve_table_uri("sales/orders")  # base URI s3://lake/warehouse  # doctest: +SKIP
            's3://lake/warehouse/sales/orders'
            >>> hook.resolve_table_uri(None)  # the base URI is itself the table  # doctest: +SKIP
            's3://lake/warehouse'

        Raises:
            InvalidConnection: the path is relative (or None) and there is no base URI to join it to.
            InvalidArgument: the URI holds credentials (``user:password@``); they belong in the connection.
        """
        text = None if table_uri is None else str(table_uri).strip()
        if text and _is_absolute(text):
            if _holds_password(text):
                raise InvalidArgument(
                    "the table URI holds credentials (user:password@); put them in a deltalite connection", text
                )
            return text
        base = self.base_uri
        if base is None:
            what = "no table URI is given" if not text else f"the table URI {text!r} is relative"
            if self.deltalite_conn_id is None:
                raise InvalidConnection(f"{what} and no deltalite connection gives a base URI to join it to")
            raise self._fail(f"{what} and the connection has no base URI (host)")
        if not text:
            return base
        return f"{base}/{posixpath.normpath(text).lstrip('/')}"

    def history_uri(self) -> str | None:
        """The connection's operations history table (extra field ``history_uri``, resolved as a table URI), or
        None when it names none."""
        _, extra = self._load()
        value = extra.get(HISTORY_FIELD) if extra else None
        text = str(value).strip() if value else ""
        return self.resolve_table_uri(text) if text else None

    def get_storage_options(self, table_uri: str | None = None) -> dict[str, Any]:
        """The fsspec storage options for tables of this connection (for ``table_uri``'s store, when given).

        The backend whose well-known fields apply is taken from the scheme of ``table_uri`` or, without it, of the
        base URI; without either, from the fields present (which must then belong to one backend). Every credential
        value has been registered with ``mask_secret``.

        Example:
            >>> DeltaLiteHook("lake").get_storage_options()  # doctest: +SKIP
            {'key': 'AKIA...', 'secret': '...', 'client_kwargs': {'region_name': 'eu-west-1'}}

        Raises:
            InvalidConnection: the connection is missing or malformed, or holds fields of another backend.
        """
        base, extra = self._load()
        if not extra:
            return {}
        scheme = _scheme(table_uri) if table_uri and _is_absolute(table_uri) else _scheme(base or "")
        present = {backend for backend, fields in BACKEND_FIELDS.items() if any(f in extra for f in fields)}
        backend = _SCHEME_BACKEND.get(scheme)
        if backend is None and len(present) > 1:
            raise self._fail(
                f"extra holds fields of several stores ({', '.join(sorted(present))}) and the URI "
                "does not say which one applies"
            )
        if backend is None and present:
            backend = next(iter(present))
        others = present - {backend}
        if others:
            fields = sorted(f for b in others for f in BACKEND_FIELDS[b] if f in extra)
            raise self._fail(f"extra field(s) {', '.join(fields)} do not apply to a {scheme or 'local'} table")
        options: dict[str, Any] = {}
        backend_fields: Mapping[str, str] = {} if backend is None else BACKEND_FIELDS.get(backend, {})
        for field, option in backend_fields.items():
            if field in extra:
                if field == "region_name":
                    options.setdefault("client_kwargs", {})["region_name"] = extra[field]
                elif field == "gcs_token" and isinstance(extra[field], str) and extra[field].lstrip().startswith("{"):
                    options[option] = json.loads(extra[field])  # a service-account JSON pasted as a string
                else:
                    options[option] = extra[field]
        for key, value in extra[STORAGE_OPTIONS_FIELD].items():
            if key == "client_kwargs" and isinstance(value, dict) and isinstance(options.get(key), dict):
                options[key] = {**options[key], **value}
            else:
                options[key] = value
        mask_storage_options(options)
        return options

    def resolve_table(self, table_uri: str | None) -> tuple[str, dict[str, Any]]:
        """The table's location and the storage options to reach it: `resolve_table_uri`, then a catalog name
        (``glue://sales/orders``, or ``orders`` below a ``glue://sales`` base URI) resolved through its catalog
        (`engine.catalog.resolve_location`), so that a Spark job is handed the location, never the name.

        Example:
            >>> DeltaLiteHook("lake").resolve_table("glue://sales/orders")  # doctest: +SKIP
            ('s3://lake/sales/orders', {'key': '...', 'secret': '...'})

        Raises:
            InvalidConnection, InvalidArgument: as `resolve_table_uri` and `get_storage_options`.
            CatalogTableNotFound, NotADeltaTable, CatalogError: the catalog name cannot be resolved.
        """
        from airflow_provider_deltalite.engine.catalog import resolve_location

        uri = self.resolve_table_uri(table_uri)
        resolved = resolve_location(uri, self.get_storage_options(uri))
        if resolved.name is not None:
            self.log.info("%s is the Delta table at %s", resolved.name, resolved.uri)
        return resolved.uri, resolved.storage_options

    def get_table(self, table_uri: str | None = None) -> DeltaTable:
        """A `DeltaTable` for ``table_uri`` (resolved against the base URI, and through its catalog for a catalog
        name) with the connection's storage options.

        Example:
            >>> DeltaLiteHook("lake").get_table("events").snapshot().num_files  # doctest: +SKIP
        """
        from airflow_provider_deltalite.table import DeltaTable

        uri, options = self.resolve_table(table_uri)
        return DeltaTable(uri, storage_options=options)

    def get_conn(self) -> dict[str, Any]:
        """The storage options (Airflow's generic hook entry point)."""
        return self.get_storage_options()

    def test_connection(self) -> tuple[bool, str]:
        """Check the connection from the UI or API: the fields parse and the base URI (if any) can be listed (a
        catalog database, ``glue://sales``, is asked for its tables)."""
        try:
            base = self.base_uri
            options = self.get_storage_options()
            if base is not None:
                from airflow_provider_deltalite.engine.catalog import (
                    catalog_of,
                    list_catalog_tables,
                    storage_options_only,
                )
                from airflow_provider_deltalite.engine.storage import Storage

                if catalog_of(base) is not None:
                    list_catalog_tables(base, options)
                else:
                    Storage(base, storage_options_only(options)).list_from("")
        except Exception as exc:
            return False, str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return True, "connection is valid" + (f"; {base} is reachable" if base else "")

    # -- UI metadata for Airflow < 3.2 (3.2+ reads `conn-fields` / `ui-field-behaviour` from the provider info) ----

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Form layout of the connection type for older Airflow UIs."""
        from airflow_provider_deltalite.hooks.connection_form import UI_FIELD_BEHAVIOUR

        return {
            "hidden_fields": list(UI_FIELD_BEHAVIOUR["hidden-fields"]),
            "relabeling": dict(UI_FIELD_BEHAVIOUR["relabeling"]),
            "placeholders": dict(UI_FIELD_BEHAVIOUR["placeholders"]),
        }

    @classmethod
    def get_connection_form_widgets(cls) -> dict[str, Any]:
        """WTForms widgets of the extra fields for older Airflow UIs (imported only there)."""
        from flask_appbuilder.fieldwidgets import BS3PasswordFieldWidget, BS3TextFieldWidget
        from flask_babel import lazy_gettext
        from wtforms import PasswordField, StringField

        from airflow_provider_deltalite.hooks.connection_form import CONN_FIELDS

        widgets: dict[str, Any] = {}
        for name, spec in CONN_FIELDS.items():
            if spec["schema"].get("format") == "password":
                widgets[name] = PasswordField(lazy_gettext(spec["label"]), widget=BS3PasswordFieldWidget())
            else:
                widgets[name] = StringField(lazy_gettext(spec["label"]), widget=BS3TextFieldWidget())
        return widgets
