"""Table properties (`metaData.configuration`) with the protocol's defaults and typed, validated accessors."""

from __future__ import annotations

import re
from collections.abc import Mapping

from airflow_provider_deltalite.engine.errors import InvalidTableProperty

# Table property keys (`metaData.configuration`).
APPEND_ONLY = "delta.appendOnly"
CHECKPOINT_INTERVAL = "delta.checkpointInterval"
CHECKPOINT_POLICY = "delta.checkpointPolicy"
CHECKPOINT_RETENTION_DURATION = "delta.checkpointRetentionDuration"
CHECKPOINT_WRITE_STATS_AS_JSON = "delta.checkpoint.writeStatsAsJson"
CHECKPOINT_WRITE_STATS_AS_STRUCT = "delta.checkpoint.writeStatsAsStruct"
COLUMN_MAPPING_MODE = "delta.columnMapping.mode"
DATA_SKIPPING_NUM_INDEXED_COLS = "delta.dataSkippingNumIndexedCols"
DATA_SKIPPING_STATS_COLUMNS = "delta.dataSkippingStatsColumns"
DATA_SKIPPING_STRING_PREFIX_LENGTH = "delta.dataSkippingStringPrefixLength"
DELETED_FILE_RETENTION_DURATION = "delta.deletedFileRetentionDuration"
ENABLE_CHANGE_DATA_FEED = "delta.enableChangeDataFeed"
ENABLE_DELETION_VECTORS = "delta.enableDeletionVectors"
ENABLE_EXPIRED_LOG_CLEANUP = "delta.enableExpiredLogCleanup"
ENABLE_IN_COMMIT_TIMESTAMPS = "delta.enableInCommitTimestamps"
ENABLE_ROW_TRACKING = "delta.enableRowTracking"
IN_COMMIT_TIMESTAMP_ENABLEMENT_VERSION = "delta.inCommitTimestampEnablementVersion"
ISOLATION_LEVEL = "delta.isolationLevel"
LOG_RETENTION_DURATION = "delta.logRetentionDuration"
ROW_TRACKING_COMMIT_VERSION_COLUMN = "delta.rowTracking.materializedRowCommitVersionColumnName"
ROW_TRACKING_ROW_ID_COLUMN = "delta.rowTracking.materializedRowIdColumnName"
ROW_TRACKING_SUSPENDED = "delta.rowTrackingSuspended"
SET_TRANSACTION_RETENTION_DURATION = "delta.setTransactionRetentionDuration"
TARGET_FILE_SIZE = "delta.targetFileSize"
UNIVERSAL_FORMAT_ENABLED_FORMATS = "delta.universalFormat.enabledFormats"

# Keys of a schema field's `metadata` (column mapping); not table properties.
COLUMN_MAPPING_PHYSICAL_NAME = "delta.columnMapping.physicalName"
COLUMN_MAPPING_ID = "delta.columnMapping.id"
COLUMN_MAPPING_NESTED_IDS = "delta.columnMapping.nested.ids"

# Defaults as the reference implementation's DeltaConfig defines them.
DEFAULTS: dict[str, str] = {
    APPEND_ONLY: "false",
    CHECKPOINT_INTERVAL: "10",
    DELETED_FILE_RETENTION_DURATION: "interval 1 week",
    LOG_RETENTION_DURATION: "interval 30 days",
    CHECKPOINT_RETENTION_DURATION: "interval 2 days",
    ENABLE_EXPIRED_LOG_CLEANUP: "true",
    CHECKPOINT_WRITE_STATS_AS_JSON: "true",
    CHECKPOINT_WRITE_STATS_AS_STRUCT: "true",
    CHECKPOINT_POLICY: "classic",
    DATA_SKIPPING_NUM_INDEXED_COLS: "32",
    ENABLE_DELETION_VECTORS: "false",
    ENABLE_CHANGE_DATA_FEED: "false",
    COLUMN_MAPPING_MODE: "none",
    ENABLE_ROW_TRACKING: "false",
    ENABLE_IN_COMMIT_TIMESTAMPS: "false",
    ISOLATION_LEVEL: "Serializable",
}

_UNIT_MS = {
    "nanosecond": 1e-6,
    "microsecond": 1e-3,
    "millisecond": 1,
    "second": 1000,
    "minute": 60_000,
    "hour": 3_600_000,
    "day": 86_400_000,
    "week": 7 * 86_400_000,
}
_INTERVAL = re.compile(r"^\s*(?:interval\s+)?(.+?)\s*$", re.IGNORECASE)
_TERM = re.compile(r"\s*(-?[0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]+)\s*")


_UNIT_ALIASES = {
    "ms": "millisecond",
    "msec": "millisecond",
    "us": "microsecond",
    "usec": "microsecond",
    "sec": "second",
    "min": "minute",
    "hr": "hour",
}


def parse_interval_ms(text: str) -> int:
    """Parse a Spark calendar interval such as ``interval 7 days`` or ``1 week 2 hours`` into milliseconds.

    Raises:
        ValueError: the text is not an interval (months and years are refused: they have no fixed length).

    Example:
        >>> parse_interval_ms("interval 1 week")
        604800000
    """
    m = _INTERVAL.match(str(text))
    body = m.group(1) if m else ""
    pos, total, terms = 0, 0.0, 0
    while pos < len(body):
        t = _TERM.match(body, pos)
        if not t:
            raise ValueError(f"not an interval: {text!r}")
        written = t.group(2).lower()
        # abbreviations first: stripping the plural "s" first would turn "ms" into "m"
        unit = _UNIT_ALIASES.get(written) or _UNIT_ALIASES.get(written.rstrip("s")) or written.rstrip("s")
        if unit not in _UNIT_MS:
            raise ValueError(f"unknown interval unit {t.group(2)!r} in {text!r}")
        total += float(t.group(1)) * _UNIT_MS[unit]
        terms += 1
        pos = t.end()
    if terms == 0:
        raise ValueError(f"not an interval: {text!r}")
    return int(total)


class TableProperties(Mapping[str, str]):
    """The table's configuration, falling back to protocol defaults; typed getters raise InvalidTableProperty.

    Example:
        >>> TableProperties({"delta.logRetentionDuration": "interval 2 days"}).interval_ms("delta.logRetentionDuration")
        172800000
    """

    def __init__(self, configuration: Mapping[str, str] | None, table_uri: str | None = None) -> None:
        self._explicit = {str(k): str(v) if v is not None else "" for k, v in (configuration or {}).items()}
        self._table_uri = table_uri

    def __getitem__(self, key: str) -> str:
        if key in self._explicit:
            return self._explicit[key]
        return DEFAULTS[key]

    def __iter__(self):
        return iter({**DEFAULTS, **self._explicit})

    def __len__(self) -> int:
        return len({**DEFAULTS, **self._explicit})

    @property
    def explicit(self) -> dict[str, str]:
        """Only the properties set on the table."""
        return dict(self._explicit)

    def _bad(self, key: str, why: str) -> InvalidTableProperty:
        return InvalidTableProperty(f"property {key}={self.get(key)!r} is invalid: {why}", self._table_uri)

    def interval_ms(self, key: str) -> int:
        """An interval property in milliseconds."""
        try:
            value = parse_interval_ms(self[key])
        except ValueError as exc:
            raise self._bad(key, str(exc)) from None
        if value < 0:
            raise self._bad(key, "negative interval")
        return value

    def integer(self, key: str) -> int:
        """An integer property."""
        try:
            return int(self[key])
        except ValueError:
            raise self._bad(key, "not an integer") from None

    def positive_integer(self, key: str) -> int:
        """An integer property that must be at least 1."""
        value = self.integer(key)
        if value < 1:
            raise self._bad(key, "must be at least 1")
        return value

    def boolean(self, key: str) -> bool:
        """A boolean property (``true``/``false``, any case)."""
        value = self.get(key, "false").strip().lower()
        if value not in ("true", "false"):
            raise self._bad(key, "not a boolean")
        return value == "true"


# -- when and how to checkpoint -------------------------------------------------------------------------------


def checkpoint_interval(properties: TableProperties) -> int:
    """``delta.checkpointInterval`` (default 10).

    Raises:
        InvalidTableProperty: the value is not a whole number of at least 1.
    """
    return properties.positive_integer(CHECKPOINT_INTERVAL)


def should_checkpoint(version: int, properties: TableProperties) -> bool:
    """Whether the reference's post-commit hook would checkpoint ``version``: not version 0, and a multiple of the
    interval.

    Raises:
        InvalidTableProperty: ``delta.checkpointInterval`` is invalid.
    """
    return version != 0 and version % checkpoint_interval(properties) == 0


def checkpoint_policy(properties: TableProperties, table_uri: str | None = None) -> str:
    """``delta.checkpointPolicy``: ``"classic"`` (default) or ``"v2"`` (any case).

    Raises:
        InvalidTableProperty: any other value.
    """
    value = properties[CHECKPOINT_POLICY].strip().lower()
    if value not in ("classic", "v2"):
        raise InvalidTableProperty(
            f"property {CHECKPOINT_POLICY}={properties[CHECKPOINT_POLICY]!r} is invalid: must be classic or v2",
            table_uri,
        )
    return value
