"""`MaintenancePolicy`: the thresholds, budgets and cooldowns `plan_maintenance` decides with.

Every key is flat and snake_case, so a policy is a JSON object or a TOML table of scalars. The defaults come from the
systems that decide table maintenance (Delta, Iceberg, Amoro; docs/maintenance-planner.md gives each anchor);
``None`` means "the table's own setting".

Example:
    >>> MaintenancePolicy.from_mapping({"min_input_files": 10, "vacuum_mode": "lite"}).min_input_files
    10
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import json
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_provider_deltalite.engine.errors import InvalidPolicy
from airflow_provider_deltalite.maintenance.options import VACUUM_MODES

GIB = 1024**3


@dataclass(frozen=True, kw_only=True)
class MaintenancePolicy:
    """What `plan_maintenance` runs, and how much of it, with the anchor of every default.

    Thresholds (what makes an operation worth running):
        target_file_size: the size OPTIMIZE writes (None: the table's ``delta.targetFileSize``, else 1 GiB, Delta's
            ``optimize.maxFileSize``).
        min_file_size: files below it are compacted (None: as ``target_file_size``; Delta's ``optimize.minFileSize``).
        min_input_files: a partition is compacted (or clustered) only with at least this many fragments (or files not
            yet clustered): 5, Iceberg's ``min-input-files``.
        fragment_ratio: a fragment is a file below ``target_file_size / fragment_ratio``: 8, Amoro's
            ``self-optimizing.fragment-ratio`` (128 MB / 8 = 16 MB there).
        max_deleted_rows_ratio: a file whose deletion vector removes more than this share of its rows is purged:
            0.05, Delta's ``optimize.maxDeletedRowsRatio`` (and Fabric's 5%).
        zorder_columns: the columns a partitioned table is Z-ordered on (None: the columns of the newest Z-order in
            the log; no Z-order when there is none).
        max_point_query_files: cluster again when a point query must read more files than this on a clustering column
            (None: off; Snowflake exposes the figure, it publishes no threshold).
        max_commits_since_checkpoint: checkpoint when at least this many commits follow the newest checkpoint (None:
            the table's ``delta.checkpointInterval``, else 10, when Delta's writers would have written one).
        vacuum_min_reclaimable_files: VACUUM when at least this many tombstoned files are past the retention: 1.
        vacuum_mode: ``"full"`` (list storage: finds never-committed files too, Delta's default) or ``"lite"``.
        retention_hours: VACUUM's retention (None: the table's ``delta.deletedFileRetentionDuration``, else 168).

    Budgets (per run):
        max_rewrite_bytes_per_run: bytes OPTIMIZE, purge and clustering may rewrite in one run: 100 GiB, Iceberg's
            ``max-file-group-size-bytes``.
        max_files_deleted_per_run: files VACUUM may delete in one run (the oldest first): 100000.

    Cooldowns (hours since the log's last run of the operation; 0: none):
        optimize_cooldown_hours: 1, Amoro's minor-optimizing interval (shared by compaction, purge and clustering).
        vacuum_cooldown_hours: 24 (a daily VACUUM, as Databricks recommends running it).
        checkpoint_cooldown_hours: 0.
    """

    target_file_size: int | None = None
    min_file_size: int | None = None
    min_input_files: int = 5
    fragment_ratio: float = 8.0
    max_deleted_rows_ratio: float = 0.05
    zorder_columns: tuple[str, ...] | None = None
    max_point_query_files: float | None = None
    max_commits_since_checkpoint: int | None = None
    vacuum_min_reclaimable_files: int = 1
    vacuum_mode: str = "full"
    retention_hours: float | None = None
    max_rewrite_bytes_per_run: int = 100 * GIB
    max_files_deleted_per_run: int = 100_000
    optimize_cooldown_hours: float = 1.0
    vacuum_cooldown_hours: float = 24.0
    checkpoint_cooldown_hours: float = 0.0

    def __post_init__(self) -> None:
        for name, check in _CHECKS.items():
            object.__setattr__(self, name, check(name, getattr(self, name)))

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """Every policy key, in declaration order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], table_uri: str | None = None) -> MaintenancePolicy:
        """A policy from a mapping of keys to values; missing keys keep their defaults.

        Raises:
            InvalidPolicy: an unknown key (the message suggests the close one), a value of the wrong type, a negative
                budget, threshold or cooldown, ``fragment_ratio`` below 1, or a ratio outside [0, 1]; ``key`` names it.
        """
        if not isinstance(data, Mapping):
            raise InvalidPolicy(f"a policy must be a mapping of keys to values, got {type(data).__name__}", table_uri)
        known = cls.keys()
        for key in data:
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else f" (known keys: {', '.join(known)})"
                raise InvalidPolicy(f"unknown policy key {str(key)!r}{hint}", table_uri, key=str(key))
        try:
            return cls(**dict(data))
        except InvalidPolicy as exc:
            raise InvalidPolicy(exc.problem, table_uri, key=exc.key) from None

    @classmethod
    def from_file(cls, path: str | Path, table_uri: str | None = None) -> MaintenancePolicy:
        """A policy from a JSON file, or a TOML file when the name ends in ``.toml``.

        Raises:
            InvalidPolicy: the file cannot be read or parsed, or `from_mapping` refuses its content.
        """
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            raise InvalidPolicy(f"cannot read the policy file {str(path)!r}: {reason}", table_uri) from None
        try:
            data = tomllib.loads(text) if path.suffix.lower() == ".toml" else json.loads(text)
        except (tomllib.TOMLDecodeError, json.JSONDecodeError, RecursionError) as exc:
            kind = "TOML" if path.suffix.lower() == ".toml" else "JSON"
            raise InvalidPolicy(f"the policy file {str(path)!r} is not valid {kind}: {exc}", table_uri) from None
        if not isinstance(data, dict):
            raise InvalidPolicy(f"the policy file {str(path)!r} must hold one object of policy keys", table_uri)
        return cls.from_mapping(data, table_uri)

    @classmethod
    def from_value(cls, value: Any, table_uri: str | None = None) -> MaintenancePolicy:
        """A policy from what a template renders: a mapping, JSON text (or a dict as Jinja renders it without
        native rendering, ``{'min_input_files': 10}``), or the path of a policy file; None or empty: the defaults.

        Raises:
            InvalidPolicy: text that is neither JSON nor a rendered dict; as `from_mapping` and `from_file`.
        """
        if isinstance(value, Mapping):
            return cls.from_mapping(value, table_uri)
        text = None if value is None else str(value).strip()
        if not text or text == "None":
            return cls()
        if not text.startswith(("{", "[")):
            return cls.from_file(text, table_uri)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            try:
                data = ast.literal_eval(text)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                raise InvalidPolicy(
                    f"policy is not valid JSON (line {exc.lineno}, column {exc.colno})", table_uri
                ) from None
        return cls.from_mapping(data, table_uri)

    def to_dict(self) -> dict[str, Any]:
        """Every key with its value (tuples as lists): JSON-ready, and `from_mapping` reads it back."""
        return {
            name: list(value) if isinstance(value, tuple) else value
            for name, value in ((n, getattr(self, n)) for n in self.keys())
        }

    def replace(self, **changes: Any) -> MaintenancePolicy:
        """A copy with ``changes`` applied (validated like the original)."""
        return dataclasses.replace(self, **changes)


# -- per-key checks: each returns the normalised value or raises InvalidPolicy naming the key ----------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _whole(name: str, value: Any, *, minimum: int, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidPolicy(f"policy key {name!r} must be a whole number, got {value!r}", key=name)
    if value < minimum:
        bound = "must not be negative" if minimum == 0 else f"must be at least {minimum}"
        raise InvalidPolicy(f"policy key {name!r} {bound}, got {value}", key=name)
    return value


def _number(name: str, value: Any, *, minimum: float, maximum: float | None = None, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if not _is_number(value) or not math.isfinite(value):
        raise InvalidPolicy(f"policy key {name!r} must be a finite number, got {value!r}", key=name)
    if maximum is not None and not minimum <= value <= maximum:
        raise InvalidPolicy(f"policy key {name!r} must be between {minimum:g} and {maximum:g}, got {value!r}", key=name)
    if value < minimum:
        bound = "must not be negative" if minimum == 0 else f"must be at least {minimum:g}"
        raise InvalidPolicy(f"policy key {name!r} {bound}, got {value!r}", key=name)
    return float(value)


def _columns(name: str, value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [c.strip() for c in value.split(",")]
    if not isinstance(value, list | tuple) or not value or not all(isinstance(c, str) and c.strip() for c in value):
        raise InvalidPolicy(f"policy key {name!r} must be a non-empty list of column names, got {value!r}", key=name)
    return tuple(c.strip() for c in value)


def _mode(name: str, value: Any) -> str:
    text = value.strip().lower() if isinstance(value, str) else value
    if text not in VACUUM_MODES:
        raise InvalidPolicy(f"policy key {name!r} must be 'full' or 'lite', got {value!r}", key=name)
    return str(text)


_CHECKS: dict[str, Any] = {
    "target_file_size": lambda n, v: _whole(n, v, minimum=1, optional=True),
    "min_file_size": lambda n, v: _whole(n, v, minimum=1, optional=True),
    "min_input_files": lambda n, v: _whole(n, v, minimum=1),
    "fragment_ratio": lambda n, v: _number(n, v, minimum=1),
    "max_deleted_rows_ratio": lambda n, v: _number(n, v, minimum=0, maximum=1),
    "zorder_columns": _columns,
    "max_point_query_files": lambda n, v: _number(n, v, minimum=0, optional=True),
    "max_commits_since_checkpoint": lambda n, v: _whole(n, v, minimum=1, optional=True),
    "vacuum_min_reclaimable_files": lambda n, v: _whole(n, v, minimum=0),
    "vacuum_mode": _mode,
    "retention_hours": lambda n, v: _number(n, v, minimum=0, optional=True),
    "max_rewrite_bytes_per_run": lambda n, v: _whole(n, v, minimum=0),
    "max_files_deleted_per_run": lambda n, v: _whole(n, v, minimum=0),
    "optimize_cooldown_hours": lambda n, v: _number(n, v, minimum=0),
    "vacuum_cooldown_hours": lambda n, v: _number(n, v, minimum=0),
    "checkpoint_cooldown_hours": lambda n, v: _number(n, v, minimum=0),
}
