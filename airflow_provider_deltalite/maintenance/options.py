"""One typed, validated options object per maintenance operation, built the same way on every surface.

The Python API builds it from keyword arguments (``OptimizeOptions(where="date = '2026-11-01'")``), the CLI from argv,
the operators from their rendered template fields (`from_text`), and the spark-submit job receives it as one JSON
document (`to_json` / `from_json`). The names follow Delta and delta-rs: ``columns``, ``retention_hours``, ``mode``,
``since``.

What can be checked without the table (types, ranges, known names) is checked here, when the object is built; what
needs the table (a column's type, a property default) is checked by the operation. A bad value raises
`InvalidArgument` naming the field; the builders that know the table (`build`, `from_text`, `from_json`) name the table
too. The checks of single values are in `option_values`. This module imports only those and the engine's errors, so
the Airflow layer can use it without loading pyarrow.

Example:
    >>> OptimizeOptions.from_text({"target_size": "268435456", "dry_run": "true"}).target_size
    268435456
    >>> VacuumOptions.from_json('{"retention_hours": 240, "mode": "lite"}').mode
    'lite'
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from airflow_provider_deltalite.engine.errors import InvalidArgument
from airflow_provider_deltalite.maintenance.option_values import (
    column_names,
    flag,
    history_location,
    one_of,
    optional_text,
    positive_bytes,
    real_number,
    retention_ms,
    share,
    strict_flag,
    whole_number,
)

OptionsT = TypeVar("OptionsT", bound="MaintenanceOptions")

CURVES = ("zorder", "hilbert")
DEFAULT_NUM_RANGES = 1000  # range ids per clustering column: the reference's 1000
DEFAULT_RUN_BYTES = 16 * 1024 * 1024  # memory one sorted clustering run may take
VACUUM_MODES = ("full", "lite")
VACUUM_INVENTORY_FORMATS = ("csv", "parquet", "s3-inventory")
GAP_POLICIES = ("raise", "resume")


# -- the options objects ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class MaintenanceOptions:
    """What every options object shares: building from loose values or JSON, and the JSON form."""

    operation: ClassVar[str]
    # field -> converter from text (rendered templates, argv); fields without one are taken as they are
    text_converters: ClassVar[Mapping[str, Callable[[str, Any], Any]]] = {}

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Validate the fields (normalising them in place); raises InvalidArgument naming the field."""

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The option names, in declaration order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def build(cls: type[OptionsT], values: Mapping[str, Any], table_uri: str | None = None) -> OptionsT:
        """From keyword values; an unknown name or a bad value raises InvalidArgument naming the table."""
        unknown = sorted(set(values) - set(cls.field_names()))
        try:
            if unknown:
                raise InvalidArgument(f"unknown {cls.operation} option {unknown[0]!r}")
            return cls(**values)
        except InvalidArgument as exc:
            raise InvalidArgument(exc.problem, table_uri) from None

    @classmethod
    def from_text(cls: type[OptionsT], values: Mapping[str, Any], table_uri: str | None = None) -> OptionsT:
        """From rendered template values (strings such as ``"5"``, ``"true"``, ``"a,b"``; None/""/"None" unset).

        A value that is unset keeps the field's default.
        """
        converted: dict[str, Any] = {}
        try:
            for name, value in values.items():
                convert = cls.text_converters.get(name)
                value = convert(name, value) if convert is not None else value
                if value is not None:
                    converted[name] = value
        except InvalidArgument as exc:
            raise InvalidArgument(exc.problem, table_uri) from None
        return cls.build(converted, table_uri)

    @classmethod
    def from_json(cls: type[OptionsT], text: str | bytes, table_uri: str | None = None) -> OptionsT:
        """From the JSON document `to_json` wrote (what the spark-submit job receives)."""
        try:
            values = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InvalidArgument(f"{cls.operation} options are not valid JSON: {exc}", table_uri) from None
        if not isinstance(values, dict):
            raise InvalidArgument(f"{cls.operation} options must be a JSON object", table_uri)
        return cls.build(values, table_uri)

    @classmethod
    def resolve(
        cls: type[OptionsT], options: OptionsT | None, values: Mapping[str, Any], table_uri: str | None = None
    ) -> OptionsT:
        """``options`` as given, or built from keyword ``values`` (passing both is an error)."""
        if options is None:
            return cls.build(values, table_uri)
        if values:
            raise InvalidArgument(
                f"pass {cls.__name__} or keyword options, not both (got {', '.join(sorted(values))})", table_uri
            )
        if not isinstance(options, cls):
            raise InvalidArgument(f"options must be {cls.__name__}, got {type(options).__name__}", table_uri)
        return options

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain JSON values (tuples as lists)."""
        return {
            name: list(value) if isinstance(value, tuple) else value
            for name, value in ((f.name, getattr(self, f.name)) for f in dataclasses.fields(self))
        }

    def to_json(self) -> str:
        """One JSON object; `from_json` reads it back to an equal object."""
        return json.dumps(self.to_dict(), sort_keys=True)

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)  # normalising a frozen dataclass while it is built


@dataclass(frozen=True, kw_only=True)
class OptimizeOptions(MaintenanceOptions):
    """OPTIMIZE (bin-packing compaction).

    Attributes:
        where: a predicate on partition columns choosing the partitions (``"date >= '2026-11-01'"``).
        target_size: the largest bin in bytes (default ``delta.targetFileSize``, else 1 GiB).
        min_file_size: files below this are rewritten (default as ``target_size``).
        max_deleted_rows_ratio: files whose deletion vector removes more than this share of rows are rewritten (0.05).
        batch_size: input bytes per commit; unset means one commit.
        dry_run: plan only; nothing is written.
        full: on a clustered table, recluster every file, sealed cubes and files clustered on other columns or by
            another provider included (Delta's ``OPTIMIZE FULL``).
        min_cube_size: on a clustered table, a cube (the files one clustering run wrote) of at least this many bytes
            is sealed and not rewritten again unless ``full`` (default 100 x the target file size: Delta's 100 GiB
            at 1 GiB).
        max_bytes_to_rewrite: read at most this many input bytes in this run (None: no limit): bins (clusters on a
            liquid-clustered table) are taken in their planned order while they fit, the rest wait for a later run
            and the stats count them (``numBinsDeferred``, ``bytesDeferred``); a bin larger than the limit is never
            rewritten under it.
        history_uri: append one row about this run to the operations history Delta table there (None: none).
        min_row_group_size: row groups of at least this many compressed bytes are copied into the new file byte for
            byte (stitched) instead of decoded and encoded again; smaller ones are re-encoded together into large row
            groups (default 8 MiB, see ``maintenance/rewrites.py``). A very large value re-encodes everything.
    """

    operation: ClassVar[str] = "optimize"
    text_converters: ClassVar[Mapping[str, Callable[[str, Any], Any]]] = {
        "where": lambda _, v: optional_text(v),
        "target_size": whole_number,
        "min_file_size": whole_number,
        "max_deleted_rows_ratio": real_number,
        "batch_size": whole_number,
        "dry_run": flag,
        "full": lambda n, v: None if optional_text(v) is None else flag(n, v),  # unset: the default, False
        "min_cube_size": whole_number,
        "max_bytes_to_rewrite": whole_number,
        "history_uri": lambda _, v: optional_text(v),
        "min_row_group_size": whole_number,
    }

    where: str | None = None
    target_size: int | None = None
    min_file_size: int | None = None
    max_deleted_rows_ratio: float | None = None
    batch_size: int | None = None
    dry_run: bool = False
    full: bool = False
    min_cube_size: int | None = None
    max_bytes_to_rewrite: int | None = None
    history_uri: str | None = None
    min_row_group_size: int | None = None

    def check(self) -> None:
        history_location(self.history_uri)
        if self.where is not None and not isinstance(self.where, str):
            raise InvalidArgument(f"where must be a predicate string, got {self.where!r}")
        for name in (
            "target_size",
            "min_file_size",
            "batch_size",
            "min_cube_size",
            "max_bytes_to_rewrite",
            "min_row_group_size",
        ):
            positive_bytes(name, getattr(self, name))
        strict_flag("full", self.full)
        self._set("max_deleted_rows_ratio", share("max_deleted_rows_ratio", self.max_deleted_rows_ratio))
        strict_flag("dry_run", self.dry_run)


@dataclass(frozen=True, kw_only=True)
class ZOrderOptions(MaintenanceOptions):
    """Clustering along a Z-order or Hilbert curve.

    Attributes:
        columns: the clustering columns (at most 32; not partition columns; they must have statistics).
        curve: ``zorder`` (bit interleaving, the default) or ``hilbert``.
        where: a predicate on partition columns choosing the partitions.
        target_size: bytes per output file (default ``delta.targetFileSize``, else 1 GiB).
        dry_run: plan only.
        num_ranges: range ids per column (the reference's 1000).
        noise: add a reproducible random byte to the key so long runs of equal keys spread over files.
        run_bytes: the (estimated) memory one sorted run may take; it bounds each task's memory.
        max_bytes_to_rewrite: read at most this many input bytes in this run (None: no limit): partitions are taken in
            their planned order while they fit, the rest wait for a later run (``numBinsDeferred``,
            ``bytesDeferred``); a partition larger than the limit is never rewritten under it.
        history_uri: append one row about this run to the operations history Delta table there (None: none).
    """

    operation: ClassVar[str] = "zorder"
    text_converters: ClassVar[Mapping[str, Callable[[str, Any], Any]]] = {
        "columns": column_names,
        "curve": lambda _, v: optional_text(v),
        "where": lambda _, v: optional_text(v),
        "target_size": whole_number,
        "dry_run": flag,
        "num_ranges": whole_number,
        "noise": flag,
        "run_bytes": whole_number,
        "max_bytes_to_rewrite": whole_number,
        "history_uri": lambda _, v: optional_text(v),
    }

    columns: tuple[str, ...] = ()
    curve: str = "zorder"
    where: str | None = None
    target_size: int | None = None
    dry_run: bool = False
    num_ranges: int = DEFAULT_NUM_RANGES
    noise: bool = True
    run_bytes: int = DEFAULT_RUN_BYTES
    max_bytes_to_rewrite: int | None = None
    history_uri: str | None = None

    def check(self) -> None:
        history_location(self.history_uri)
        columns = self.columns
        if isinstance(columns, str) or not isinstance(columns, Sequence):
            raise InvalidArgument(f"columns must be a list of column names, got {columns!r}")
        if not all(isinstance(c, str) for c in columns):
            raise InvalidArgument(f"columns must be a list of column names, got {list(columns)!r}")
        self._set("columns", tuple(columns))
        # emptiness, the 32-column limit and duplicates are the operation's to report with the schema at hand
        if self.curve not in CURVES:
            raise InvalidArgument(f"curve must be one of {', '.join(CURVES)}, got {self.curve!r}")
        if self.where is not None and not isinstance(self.where, str):
            raise InvalidArgument(f"where must be a predicate string, got {self.where!r}")
        positive_bytes("target_size", self.target_size)
        positive_bytes("max_bytes_to_rewrite", self.max_bytes_to_rewrite)
        strict_flag("dry_run", self.dry_run)
        strict_flag("noise", self.noise)
        if isinstance(self.num_ranges, bool) or not isinstance(self.num_ranges, int) or self.num_ranges < 2:
            raise InvalidArgument(f"num_ranges must be at least 2, got {self.num_ranges}")
        if isinstance(self.run_bytes, bool) or not isinstance(self.run_bytes, int) or self.run_bytes < 1:
            raise InvalidArgument(f"run_bytes must be positive, got {self.run_bytes}")


@dataclass(frozen=True, kw_only=True)
class VacuumOptions(MaintenanceOptions):
    """VACUUM.

    Attributes:
        retention_hours: keep deleted files this long (default: the table's ``delta.deletedFileRetentionDuration``,
            7 days unless set).
        dry_run: list what would be deleted; delete and commit nothing.
        mode: ``"full"`` (list storage) or ``"lite"`` (read the log since the last vacuum); any case.
        enforce_retention_duration: refuse a retention below the table's.
        commit_log_entries: commit VACUUM START and VACUUM END around the deletes.
        inventory: FULL only: read the table's files from this inventory (a local path or a URI) instead of listing
            storage: CSV or Parquet with Delta's columns ``path``, ``length``, ``isDir``, ``modificationTime``, or an
            S3 Inventory report's ``manifest.json``.
        inventory_format: ``"csv"``, ``"parquet"`` or ``"s3-inventory"`` (default: from the inventory's name).
        max_files_to_delete: delete at most this many files, the oldest first (None: no limit); the stats count the
            eligible files left (``numFilesDeferred``).
        history_uri: append one row about this run to the operations history Delta table there (None: none).
    """

    operation: ClassVar[str] = "vacuum"
    text_converters: ClassVar[Mapping[str, Callable[[str, Any], Any]]] = {
        "retention_hours": real_number,
        "dry_run": flag,
        "mode": lambda _, v: optional_text(v),
        "enforce_retention_duration": flag,
        "commit_log_entries": flag,
        "inventory": lambda _, v: optional_text(v),
        "inventory_format": lambda _, v: optional_text(v),
        "max_files_to_delete": whole_number,
        "history_uri": lambda _, v: optional_text(v),
    }

    retention_hours: float | None = None
    dry_run: bool = False
    mode: str = "full"
    enforce_retention_duration: bool = True
    commit_log_entries: bool = True
    inventory: str | None = None
    inventory_format: str | None = None
    max_files_to_delete: int | None = None
    history_uri: str | None = None

    def check(self) -> None:
        history_location(self.history_uri)
        retention_ms(self.retention_hours)
        limit = self.max_files_to_delete
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise InvalidArgument(f"max_files_to_delete must be a positive whole number, got {limit!r}")
        strict_flag("dry_run", self.dry_run)
        self._set("mode", one_of("mode", self.mode, VACUUM_MODES, fold_case=True))
        strict_flag("enforce_retention_duration", self.enforce_retention_duration)
        strict_flag("commit_log_entries", self.commit_log_entries)
        if self.inventory is not None and (not isinstance(self.inventory, str) or not self.inventory.strip()):
            raise InvalidArgument(f"inventory must be a path or URI, got {self.inventory!r}")
        if self.inventory_format is not None:
            self._set(
                "inventory_format",
                one_of("inventory_format", self.inventory_format, VACUUM_INVENTORY_FORMATS, fold_case=True),
            )
        if self.inventory is not None and self.mode != "full":
            raise InvalidArgument("an inventory replaces FULL's listing: it cannot be used with mode 'lite'")


@dataclass(frozen=True, kw_only=True)
class ChangesOptions(MaintenanceOptions):
    """Listing the commits after a version (the log tail).

    Attributes:
        since: the last version already seen; -1 for from the beginning.
        until: the newest version to list (inclusive).
        on_gap: ``"raise"`` (`LogGap`) or ``"resume"`` when log cleanup removed the commits after ``since``.
        table_id: the table's ``metaData.id`` when the cursor was taken (a different id means a recreated table).
        on_recreate: ``"raise"`` (`TableRecreated`) or ``"resume"``.
        include_metadata_changes: count metadata-only commits as new data.
    """

    operation: ClassVar[str] = "changes"
    text_converters: ClassVar[Mapping[str, Callable[[str, Any], Any]]] = {
        "since": whole_number,
        "until": whole_number,
        "on_gap": lambda _, v: optional_text(v),
        "table_id": lambda _, v: optional_text(v),
        "on_recreate": lambda _, v: optional_text(v),
        "include_metadata_changes": flag,
    }

    since: int = -1
    until: int | None = None
    on_gap: str = "raise"
    table_id: str | None = None
    on_recreate: str = "raise"
    include_metadata_changes: bool = False

    def check(self) -> None:
        since, until = self.since, self.until
        if isinstance(since, bool) or not isinstance(since, int) or since < -1:
            raise InvalidArgument(f"since must be a version, or -1 for from the beginning, got {since!r}")
        if until is not None:
            if isinstance(until, bool) or not isinstance(until, int) or until < 0:
                raise InvalidArgument(f"until must be a non-negative version, got {until!r}")
            if until < since:
                raise InvalidArgument(f"until ({until}) must not be below since ({since})")
        one_of("on_gap", self.on_gap, GAP_POLICIES)
        one_of("on_recreate", self.on_recreate, GAP_POLICIES)
        if self.table_id is not None and not isinstance(self.table_id, str):
            raise InvalidArgument(f"table_id must be a string, got {self.table_id!r}")
        strict_flag("include_metadata_changes", self.include_metadata_changes)
