"""Finding the Delta tables under a prefix: the directories that hold a ``_delta_log/``.

One listing request per directory (`Storage.list_dir`: ``os.scandir`` locally, ``ListObjectsV2`` with a ``/``
delimiter on S3), level by level, so a lake of a thousand tables costs a thousand small listings, never a listing of
every data file. A table's own directories (partitions, ``_delta_log``) are not descended into: a table inside
another table is not a table of the lake.

A catalog database is a prefix too: ``glue://sales`` lists the Delta tables the catalog registers in ``sales`` (one
``GetTables`` request per page, no storage listing) and returns their names, ``glue://sales/orders``, which every
surface opens as it opens a path (`engine.catalog`).
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from airflow_provider_deltalite.engine.catalog import catalog_of, list_catalog_tables, storage_options_only
from airflow_provider_deltalite.engine.errors import InvalidArgument
from airflow_provider_deltalite.engine.log_path import LOG_DIR
from airflow_provider_deltalite.engine.storage import Storage, normalize_table_uri


def _hidden(name: str) -> bool:
    # Spark's and Delta's rule for names that hold no table data (``_spark_metadata``, ``.tmp``)
    return name.startswith(("_", "."))


def find_delta_tables(
    prefix_uri: str, storage_options: Mapping[str, Any] | None = None, *, max_depth: int = 3
) -> list[str]:
    """The URIs of the Delta tables at or under ``prefix_uri``, sorted.

    A directory is a table when it holds a ``_delta_log`` directory. ``max_depth`` is how many levels below the
    prefix are searched (0: only the prefix itself). Directories whose name starts with ``_`` or ``.`` are skipped.
    A prefix that does not exist holds no table.

    A catalog database (``glue://sales``) is asked for its Delta tables instead, and their catalog names are returned
    (``glue://sales/orders``); its tables of other formats are left out, and ``max_depth`` does not apply.

    Args:
        prefix_uri: a local path or a URI (``s3://lake/warehouse``), or a catalog database (``glue://sales``).
        storage_options: the store's options (credentials, endpoint), as for `DeltaTable`.
        max_depth: levels to search below the prefix (default 3).

    Raises:
        InvalidArgument: ``max_depth`` is not a whole number of at least 0.
        StorageError: a listing failed.
        CatalogTableNotFound: the catalog has no such database.
        CatalogError: the catalog could not answer.

    Example:
        >>> find_delta_tables("s3://lake/warehouse", {"anon": False})  # doctest: +SKIP
        ['s3://lake/warehouse/events', 's3://lake/warehouse/sales/orders']
        >>> find_delta_tables("glue://sales", {"glue_region": "eu-west-1"})  # doctest: +SKIP
        ['glue://sales/customers', 'glue://sales/orders']
    """
    if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 0:
        raise InvalidArgument(f"max_depth must be a whole number of at least 0, got {max_depth!r}", prefix_uri)
    if isinstance(prefix_uri, str) and catalog_of(prefix_uri) is not None:
        return list_catalog_tables(prefix_uri, storage_options)
    root = normalize_table_uri(prefix_uri).rstrip("/") or "/"
    storage = Storage(root, storage_options_only(storage_options))
    found: list[str] = []
    level = [""]  # directories relative to the prefix
    with ThreadPoolExecutor(max_workers=max(1, min(16, storage.default_concurrency))) as pool:
        for depth in range(max_depth + 1):
            below: list[str] = []
            for directory, listing in zip(level, pool.map(storage.list_dir, level), strict=True):
                if LOG_DIR in listing.dir_names:
                    found.append(f"{root.rstrip('/')}/{directory}" if directory else root)
                elif depth < max_depth:
                    below += [f"{directory}/{n}" if directory else n for n in listing.dir_names if not _hidden(n)]
            level = below
            if not level:
                break
    return sorted(found)
