"""Row tracking (PROTOCOL "Row Tracking"): the table's row-tracking state, fresh row ids for new files at commit
time, and the materialised columns that carry each row's id and commit version through a rewrite.

- **Supported** (`rowTracking` in the protocol, ``delta.rowTrackingSuspended`` not true): every new add gets a fresh
  ``baseRowId`` above the ``rowIdHighWaterMark`` of the ``delta.rowTracking`` domain (from its ``numRecords``: physical
  rows, those a deletion vector deleted included) and ``defaultRowCommitVersion`` = the version being written, and the
  commit moves the mark. `assign_row_ids` does this for each commit attempt (`engine/transaction.py`), so a retry at
  a later version is computed again against the winners' mark.
- **Enabled** (``delta.enableRowTracking`` true as well): a rewrite keeps each row's identity by writing the hidden
  columns named in the table configuration: ``coalesce(materialised id, baseRowId + physical row index)`` and
  ``coalesce(materialised version, defaultRowCommitVersion)`` (`FileRowIds`). They are physical-only: not in the table
  schema, no stats, no field id.

The reference: ``spark/.../RowId.scala`` (assignFreshRowIds), ``DefaultRowCommitVersion.scala``, ``RowTracking.scala``
(preserveRowTrackingColumns) and ``MaterializedRowTrackingColumn.scala`` of delta-io/delta.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.errors import DeltaLiteError, RowTrackingError
from airflow_provider_deltalite.engine.properties import ENABLE_ROW_TRACKING
from airflow_provider_deltalite.engine.properties import ROW_TRACKING_COMMIT_VERSION_COLUMN as COMMIT_VERSION_COLUMN
from airflow_provider_deltalite.engine.properties import ROW_TRACKING_ROW_ID_COLUMN as ROW_ID_COLUMN
from airflow_provider_deltalite.engine.properties import ROW_TRACKING_SUSPENDED as SUSPENDED

if TYPE_CHECKING:
    from airflow_provider_deltalite.engine.snapshot import Snapshot

FEATURE = "rowTracking"
DOMAIN = "delta.rowTracking"
# commitInfo tag: the commit kept every row's id and commit version (the reference adds it to every commit on an
# enabled table)
PRESERVED_TAG = "delta.rowTracking.preserved"
# the mark of a table that has never assigned a row id: the first id is 0
MISSING_HIGH_WATER_MARK = -1
_ROW_FIELDS = ("baseRowId", "defaultRowCommitVersion")

# the live add that a staged add re-adds (same path and deletion vector), or None
PriorAdd = Callable[[Mapping[str, Any]], Mapping[str, Any] | None]


@dataclass(frozen=True)
class MaterializedColumns:
    """The physical names of the hidden columns that hold materialised row ids and row commit versions."""

    row_id: str
    commit_version: str

    @property
    def names(self) -> tuple[str, str]:
        return self.row_id, self.commit_version


@dataclass(frozen=True)
class RowTrackingState:
    """What row tracking asks of a writer on one snapshot.

    Attributes:
        supported: the protocol has `rowTracking`.
        suspended: ``delta.rowTrackingSuspended`` is true: no row ids are assigned.
        enabled: ``delta.enableRowTracking`` is true (and supported): rewrites preserve row ids.
        high_water_mark: the highest row id assigned so far (-1 when none).
        columns: the materialised columns' names (set when they are configured).
    """

    supported: bool
    suspended: bool
    enabled: bool
    high_water_mark: int
    columns: MaterializedColumns | None

    @property
    def assigns_row_ids(self) -> bool:
        """New files get baseRowId and defaultRowCommitVersion."""
        return self.supported and not self.suspended

    @property
    def preserves_row_ids(self) -> bool:
        """Rewrites write the materialised columns."""
        return self.enabled and not self.suspended and self.columns is not None


def row_tracking_state(snapshot: Snapshot) -> RowTrackingState:
    """The row-tracking state of ``snapshot`` (no checks of the live files: see `ensure_row_tracking_consistent`).

    Raises:
        InvalidTableProperty: a row-tracking property is not a boolean.
        RowTrackingError: the ``delta.rowTracking`` domain does not hold a high-water mark.
    """
    if not snapshot.protocol.has_feature(FEATURE):
        return RowTrackingState(False, False, False, MISSING_HIGH_WATER_MARK, None)
    properties = snapshot.properties
    suspended = properties.boolean(SUSPENDED)
    enabled = properties.boolean(ENABLE_ROW_TRACKING)
    domain = snapshot.domain_metadata.get(DOMAIN)
    mark = parse_high_water_mark(domain.get("configuration"), snapshot.table_uri) if domain else None
    explicit = properties.explicit
    row_id, version = explicit.get(ROW_ID_COLUMN), explicit.get(COMMIT_VERSION_COLUMN)
    columns = MaterializedColumns(row_id, version) if enabled and row_id and version else None
    return RowTrackingState(True, suspended, enabled, MISSING_HIGH_WATER_MARK if mark is None else mark, columns)


def materialized_columns(snapshot: Snapshot) -> MaterializedColumns | None:
    """The columns a rewrite of ``snapshot``'s files must write, or None when row ids are not preserved."""
    try:
        state = row_tracking_state(snapshot)
    except DeltaLiteError:  # a broken state is reported by ensure_row_tracking_consistent before any write
        return None
    return state.columns if state.preserves_row_ids else None


def parse_high_water_mark(configuration: Any, table_uri: str | None) -> int:
    """The ``rowIdHighWaterMark`` of a ``delta.rowTracking`` domain configuration (a JSON object as a string).

    Raises:
        RowTrackingError: the configuration is not such an object, or the mark is not an integer >= -1.
    """
    try:
        parsed = json.loads(configuration) if isinstance(configuration, str) else configuration
    except ValueError:
        parsed = None
    mark = parsed.get("rowIdHighWaterMark") if isinstance(parsed, dict) else None
    if isinstance(mark, bool) or not isinstance(mark, int) or mark < MISSING_HIGH_WATER_MARK:
        raise RowTrackingError(
            f"the {DOMAIN} domain does not hold a row id high-water mark (rowIdHighWaterMark): {configuration!r}",
            table_uri,
        )
    return mark


def high_water_mark_action(mark: int) -> dict[str, Any]:
    """The domainMetadata action that records ``mark``, as the reference serialises it."""
    return {
        "domain": DOMAIN,
        "configuration": json.dumps({"rowIdHighWaterMark": mark}, separators=(",", ":")),
        "removed": False,
    }


def ensure_row_tracking_consistent(snapshot: Snapshot) -> RowTrackingState:
    """Refuse to write to a table whose row tracking cannot be kept correct; checked before any work.

    When row ids are assigned, every live file with a ``baseRowId`` needs ``numRecords`` and its ids must lie at or
    below the high-water mark (else fresh ids would collide with them). When they are preserved, every live file
    needs ``baseRowId`` and ``defaultRowCommitVersion``, and the materialised column names must be configured.

    Raises:
        RowTrackingError: naming the property, the mark or the first file at fault.
    """
    state = row_tracking_state(snapshot)
    uri = snapshot.table_uri
    if not state.supported:
        return state
    if state.enabled and state.suspended:
        raise RowTrackingError(
            f"{ENABLE_ROW_TRACKING} and {SUSPENDED} are both true: row ids cannot be preserved and suspended at once",
            uri,
        )
    if state.enabled and state.columns is None:
        missing = [k for k in (ROW_ID_COLUMN, COMMIT_VERSION_COLUMN) if not snapshot.properties.explicit.get(k)]
        raise RowTrackingError(
            f"row tracking is enabled but {missing[0]} is not set: the materialised row-tracking column is unknown", uri
        )
    if not state.assigns_row_ids:
        return state
    files = snapshot.files
    if not files.num_rows:
        return state
    paths = files.column("path")
    base = files.column("baseRowId").combine_chunks()
    records = files.column("numRecords").combine_chunks()
    if state.enabled:
        for field in _ROW_FIELDS:
            absent = pc.is_null(files.column(field))
            if pc.any(absent).as_py():
                path = pc.filter(paths, absent)[0].as_py()
                raise RowTrackingError(
                    f"row tracking is enabled but data file {path} has no {field}: its rows' ids are unknown", uri
                )
    unknown = pc.and_(pc.is_valid(base), pc.is_null(records))
    if pc.any(unknown).as_py():
        path = pc.filter(paths, unknown)[0].as_py()
        raise RowTrackingError(
            f"data file {path} has a baseRowId but its stats have no numRecords: the row ids it uses are unknown", uri
        )
    last = pc.subtract(pc.add(pc.cast(base, pa.int64()), pc.cast(records, pa.int64())), 1)
    # a file without rows takes baseRowId = mark + 1 and leaves the mark where it was, as the reference does
    above = pc.fill_null(pc.greater(last, state.high_water_mark), False)
    if pc.any(above).as_py():
        index = int(np.argmax(pc.fill_null(last, MISSING_HIGH_WATER_MARK).to_numpy()))  # the highest id in use
        if DOMAIN in snapshot.domain_metadata:
            problem = f"the row id high-water mark {state.high_water_mark} is below row ids in use"
        else:
            problem = f"the table has no row id high-water mark (domain {DOMAIN}) but row ids are in use"
        raise RowTrackingError(
            f"{problem}: data file {paths[index].as_py()} uses ids up to {last[index].as_py()} "
            f"(baseRowId {base[index].as_py()}, {records[index].as_py()} rows)",
            uri,
        )
    return state


def num_records(add: Mapping[str, Any]) -> int | None:
    """The ``numRecords`` of an add's stats; None when they are missing or unreadable."""
    try:
        stats = json.loads(add["stats"]) if isinstance(add.get("stats"), str) else add.get("stats")
    except (ValueError, RecursionError):
        return None
    rows = stats.get("numRecords") if isinstance(stats, dict) else None
    return rows if isinstance(rows, int) and not isinstance(rows, bool) and rows >= 0 else None


def assign_row_ids(
    adds: Iterable[Mapping[str, Any]],
    *,
    version: int,
    read_mark: int,
    mark: int,
    prior: PriorAdd,
    table_uri: str | None,
) -> tuple[list[dict[str, Any]], int]:
    """The adds of a commit at ``version`` with row ids, and the new high-water mark (``mark`` when none moved).

    A re-add of a live file (``prior(add)`` gives the live add) keeps that file's values; an add that already carries
    a ``baseRowId`` at or below ``read_mark`` (the mark of the snapshot the transaction read: copied from an existing
    file) keeps it; every other add is new and gets ``mark + 1`` onwards and ``defaultRowCommitVersion = version``.

    Raises:
        RowTrackingError: a new add has no ``numRecords`` in its stats.
    """
    out = []
    for add in adds:
        staged = dict(add)
        live = prior(staged)
        base = staged.get("baseRowId")
        if live is not None and live.get("baseRowId") is not None:
            staged["baseRowId"] = live["baseRowId"]
            staged["defaultRowCommitVersion"] = live.get("defaultRowCommitVersion", version)
        elif isinstance(base, int) and not isinstance(base, bool) and base <= read_mark:
            if staged.get("defaultRowCommitVersion") is None:
                staged["defaultRowCommitVersion"] = version
        else:
            rows = num_records(staged)
            if rows is None:
                raise RowTrackingError(
                    f"cannot assign row ids to {staged['path']}: its stats have no numRecords", table_uri
                )
            staged["baseRowId"] = mark + 1
            staged["defaultRowCommitVersion"] = version
            mark += rows
        out.append(staged)
    return out, mark


def without_row_ids(adds: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The adds without baseRowId and defaultRowCommitVersion (row tracking suspended: none are propagated)."""
    return [{k: v for k, v in a.items() if k not in _ROW_FIELDS} for a in adds]


@dataclass(frozen=True)
class FileRowIds:
    """How to compute the row ids and commit versions of one data file's rows (picklable: runs on workers)."""

    columns: MaterializedColumns
    base_row_id: int | None
    default_commit_version: int | None
    path: str

    @classmethod
    def of(cls, columns: MaterializedColumns, add: Mapping[str, Any]) -> FileRowIds:
        return cls(columns, add.get("baseRowId"), add.get("defaultRowCommitVersion"), add["path"])

    def values(self, batch: pa.Table | pa.RecordBatch, first_row: int, table_uri: str | None) -> list[pa.Array]:
        """[row ids, row commit versions] of ``batch``, whose first row is the file's physical row ``first_row``
        (deleted rows count), before any deletion vector is applied."""
        n = batch.num_rows
        fallback_ids = (
            pa.array(np.arange(first_row, first_row + n, dtype=np.int64) + self.base_row_id, pa.int64())
            if self.base_row_id is not None
            else pa.nulls(n, pa.int64())
        )
        fallback_version = pa.array(
            np.full(n, self.default_commit_version if self.default_commit_version is not None else 0, np.int64),
            pa.int64(),
            mask=np.full(n, self.default_commit_version is None),
        )
        out = []
        for name, fallback in zip(self.columns.names, (fallback_ids, fallback_version), strict=True):
            stored = _stored(batch, name, self.path, table_uri)
            value = fallback if stored is None else pc.coalesce(stored, fallback)
            if value.null_count:
                raise RowTrackingError(
                    f"data file {self.path} has rows without a materialised {name} and no default to fall back to",
                    table_uri,
                )
            out.append(value)
        return out


def _stored(batch: pa.Table | pa.RecordBatch, name: str, path: str, table_uri: str | None) -> pa.Array | None:
    index = batch.schema.get_field_index(name)
    if index < 0:
        return None
    column = batch.column(index)
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if not pa.types.is_integer(column.type) and not pa.types.is_null(column.type):
        raise RowTrackingError(
            f"data file {path}: materialised column {name} holds {column.type}, not integers", table_uri
        )
    return pc.cast(column, pa.int64())


def split_materialized(
    rows: pa.Table, columns: MaterializedColumns
) -> tuple[pa.Table, list[pa.ChunkedArray | pa.Array]]:
    """``rows`` without the materialised columns, and those columns (nulls when ``rows`` has none: new rows, whose
    ids come from their file's baseRowId)."""
    extra: list[pa.ChunkedArray | pa.Array] = []
    for name in columns.names:
        index = rows.schema.get_field_index(name)
        if index < 0:
            extra.append(pa.nulls(rows.num_rows, pa.int64()))
        else:
            extra.append(rows.column(index))
            rows = rows.remove_column(index)
    return rows, extra


def with_materialized(physical: pa.Table, columns: MaterializedColumns, values: list[Any]) -> pa.Table:
    """The physical rows of a data file with the materialised columns appended (int64, nullable, no field id)."""
    for name, value in zip(columns.names, values, strict=True):
        physical = physical.append_column(pa.field(name, pa.int64()), value)
    return physical


def materialized_schema(physical: pa.Schema, columns: MaterializedColumns) -> pa.Schema:
    """A data file's physical schema with the materialised columns appended."""
    for name in columns.names:
        physical = physical.append(pa.field(name, pa.int64()))
    return physical
