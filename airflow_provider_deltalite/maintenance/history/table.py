"""The operations history table: an ordinary Delta table, created and appended to by deltalite's own writer.

Each append is one new data file and one blind-append commit (`engine/transaction.py`): concurrent writers race for
the next version with create-only writes, and a blind append never conflicts with another, so every row lands
(the loser of a race writes the next free version). The table is created on the first append when nothing is at its
location; two writers creating it at once both go on (the second finds the first's version 0).

Example:
    >>> check_history_table("s3://lake/_maintenance_history")  # doctest: +SKIP
    >>> append_history("s3://lake/_maintenance_history", [row])  # doctest: +SKIP
    5
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from airflow_provider_deltalite.engine.data_file_writer import WriterOptions
from airflow_provider_deltalite.engine.errors import InvalidArgument, TableNotFound
from airflow_provider_deltalite.engine.rewrite import TableContext, write_data_file
from airflow_provider_deltalite.engine.snapshot import Snapshot
from airflow_provider_deltalite.engine.table import Table

# (column, Delta type, nullable): the history schema. Counts are longs, times UTC timestamps (microseconds).
_COUNTS = ("files_read", "bytes_read", "files_written", "bytes_written", "files_deleted", "bytes_deleted")
_HEALTH = (
    "files",
    "bytes",
    "small_files",
    "deleted_rows",
    "tombstone_bytes",
    "commits_since_checkpoint",
)
COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("table_uri", "string", False),
    ("table_id", "string", True),
    ("run_id", "string", True),
    ("operation", "string", False),
    ("start_time", "timestamp", False),
    ("end_time", "timestamp", False),
    ("read_version", "long", True),
    ("version", "long", True),
    *((name, "long", True) for name in _COUNTS),
    *((f"{name}_before", "long", True) for name in _HEALTH),
    *((f"{name}_after", "long", True) for name in _HEALTH),
    ("executor", "string", True),
    ("outcome", "string", False),
    ("error_class", "string", True),
    ("error_message", "string", True),
    ("deltalite_version", "string", True),
)
HEALTH_FIGURES = _HEALTH
_ARROW = {"string": pa.string(), "long": pa.int64(), "timestamp": pa.timestamp("us", tz="UTC")}
ARROW_SCHEMA = pa.schema([pa.field(n, _ARROW[t], nullable=null) for n, t, null in COLUMNS])
DELTA_SCHEMA = {
    "type": "struct",
    "fields": [{"name": n, "type": t, "nullable": null, "metadata": {}} for n, t, null in COLUMNS],
}


def _table(uri: str, storage_options: Mapping[str, Any] | None) -> Table:
    return Table(uri, storage_options)


def check_history_table(uri: str, storage_options: Mapping[str, Any] | None = None) -> Snapshot | None:
    """That ``uri`` can hold the operations history: a Delta table with the history schema (its snapshot), or a
    location that holds nothing yet (None: the first append creates the table). Nothing is written.

    Raises:
        InvalidArgument: the location holds files but no Delta table, or a Delta table whose schema is not the
            history schema (the message names the first column that differs).
    """
    table = _table(uri, storage_options)
    try:
        snapshot = table.snapshot()
    except TableNotFound:
        # files in _delta_log only: another writer is creating the table (its version 0 is not in place yet)
        if table.storage.has_files_under("") and not table.storage.has_files_under("_delta_log"):
            raise InvalidArgument(
                "the operations history location is not a Delta table (it holds files but no _delta_log)", table.uri
            ) from None
        return None
    _check_schema(snapshot)
    return snapshot


def _check_schema(snapshot: Snapshot) -> None:
    fields = {f["name"]: f for f in snapshot.schema.get("fields", [])}
    for name, kind, _ in COLUMNS:
        found = fields.get(name)
        if found is None:
            problem = f"has no column {name!r}"
        elif found["type"] != kind:
            problem = f"has column {name!r} of type {json.dumps(found['type'])}, not {kind}"
        else:
            continue
        raise InvalidArgument(
            f"the operations history table's schema is not the history schema: it {problem}", snapshot.table_uri
        )
    extra = sorted(set(fields) - {n for n, _, _ in COLUMNS})
    if extra:
        raise InvalidArgument(
            f"the operations history table's schema is not the history schema: it has column {extra[0]!r} too",
            snapshot.table_uri,
        )
    if snapshot.partition_columns:
        raise InvalidArgument("the operations history table must not be partitioned", snapshot.table_uri)


def _create(table: Table) -> None:
    now = int(time.time() * 1000)
    version0 = [
        {"commitInfo": {"timestamp": now, "operation": "CREATE TABLE", "operationParameters": {}}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": str(uuid.uuid4()),
                "name": "deltalite_operations_history",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(DELTA_SCHEMA),
                "partitionColumns": [],
                "configuration": {},
                "createdTime": now,
            }
        },
    ]
    body = "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in version0).encode()
    # another writer may create it first: its version 0 is then checked like any other table's
    with contextlib.suppress(FileExistsError):
        table.storage.write_create_only("_delta_log/00000000000000000000.json", body)


def append_history(
    uri: str, rows: Sequence[Mapping[str, Any]], storage_options: Mapping[str, Any] | None = None
) -> int | None:
    """Append ``rows`` (dicts of `COLUMNS`; missing ones are null) to the history table at ``uri``, creating it when
    its location holds nothing; returns the committed version (None: no rows).

    Raises:
        InvalidArgument: as `check_history_table`.
        DeltaLiteError: the data file or the commit could not be written.
    """
    if not rows:
        return None
    table = _table(uri, storage_options)
    snapshot = check_history_table(uri, storage_options)
    for wait in range(100):
        if snapshot is not None:
            break
        if wait == 0:
            _create(table)
        else:  # another writer's version 0 is still being written
            time.sleep(0.05)
        snapshot = check_history_table(uri, storage_options)
    if snapshot is None:
        raise TableNotFound("the operations history table was not created: its version 0 never appeared", uri)
    data = pa.Table.from_pylist([{n: row.get(n) for n, _, _ in COLUMNS} for row in rows], schema=ARROW_SCHEMA)
    add = write_data_file(TableContext.from_snapshot(snapshot), {}, [data], WriterOptions())
    assert add is not None  # at least one row
    txn = table.transaction(snapshot)
    txn.add({**add, "dataChange": True})
    return txn.commit("WRITE", {"mode": "Append", "partitionBy": "[]"}).version


def read_history(uri: str, storage_options: Mapping[str, Any] | None = None) -> pa.Table:
    """Every row of the history table (an empty table with the history schema when there is none yet)."""
    from airflow_provider_deltalite.engine.scan import scan

    snapshot = check_history_table(uri, storage_options)
    if snapshot is None:
        return ARROW_SCHEMA.empty_table()
    rows, _ = scan(snapshot, [n for n, _, _ in COLUMNS])
    return rows.cast(ARROW_SCHEMA)
