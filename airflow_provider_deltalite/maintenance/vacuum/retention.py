"""VACUUM's retention check: how long deleted files are kept, the guards in front of a shorter retention, and the
horizon that follows.

The table promises its readers and writers ``delta.deletedFileRetentionDuration`` (default 7 days): a file removed
from the table, or written but not yet committed, stays on storage at least that long. A retention given to VACUUM
that is shorter than this breaks the promise, so it is refused unless the caller turns the check off. A longer one is
honoured (it only deletes less). The reference (4.1+) also refuses tables whose ``delta.logRetentionDuration`` is
shorter than their deleted-file retention: the log of versions whose files are still kept would be cleaned up first.

Example:
    >>> window = resolve_retention(snapshot, retention_hours=None, enforce_retention_duration=True)  # doctest: +SKIP
    >>> window.retention_ms, window.horizon_ms  # doctest: +SKIP
    (604800000, 1763280000000)
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from airflow_provider_deltalite.engine.errors import RetentionTooShort
from airflow_provider_deltalite.engine.properties import DELETED_FILE_RETENTION_DURATION, LOG_RETENTION_DURATION
from airflow_provider_deltalite.engine.snapshot import Snapshot
from airflow_provider_deltalite.maintenance.option_values import HOUR_MS, retention_ms


@dataclass(frozen=True)
class RetentionWindow:
    """The retention a VACUUM runs with.

    Attributes:
        default_retention_ms: the table's ``delta.deletedFileRetentionDuration``.
        specified_retention_ms: the retention the caller asked for, or None.
        retention_ms: the retention in force (the specified one when given, else the table's).
        check_enabled: whether the retention checks were applied.
        now_ms: the clock reading the horizon is measured from.
        horizon_ms: ``now_ms - retention_ms`` (the reference's ``minRetainedTimestamp``): tombstones deleted before it
            have expired, and unreferenced files last modified before it may be deleted.
    """

    default_retention_ms: int
    specified_retention_ms: int | None
    retention_ms: int
    check_enabled: bool
    now_ms: int
    horizon_ms: int


def hours_text(ms: int) -> str:
    """``604800000`` -> ``"168 hours"`` (fractions kept: ``"0.5 hours"``)."""
    return f"{ms / HOUR_MS:g} hours"


def resolve_retention(
    snapshot: Snapshot,
    *,
    retention_hours: float | None,
    enforce_retention_duration: bool,
    now_ms: int | None = None,
) -> RetentionWindow:
    """Check the requested retention against the table and compute the horizon.

    Raises:
        InvalidArgument: ``retention_hours`` is negative or not a number.
        InvalidTableProperty: a retention property does not parse.
        RetentionTooShort: the retention is below ``delta.deletedFileRetentionDuration``, or the table's log
            retention is shorter than its file retention, and ``enforce_retention_duration`` is True.
    """
    uri = snapshot.table_uri
    specified = retention_ms(retention_hours, uri)
    default = snapshot.properties.interval_ms(DELETED_FILE_RETENTION_DURATION)
    log_retention = snapshot.properties.interval_ms(LOG_RETENTION_DURATION)
    if enforce_retention_duration:
        if specified is not None and specified < default:
            raise RetentionTooShort(
                f"a retention of {hours_text(specified)} is shorter than the table's "
                f"{DELETED_FILE_RETENTION_DURATION} of {hours_text(default)}: VACUUM would delete files that readers "
                "of recent versions, time travel and writers whose commits are still in flight may need, which breaks "
                f"their reads or corrupts their commits; use a retention of at least {hours_text(default)}, or, only "
                f"if no reader or writer can need files older than {hours_text(specified)}, turn the check off with "
                "enforce_retention_duration=False (CLI: --no-enforce-retention-duration)",
                uri,
            )
        if log_retention < default:
            raise RetentionTooShort(
                f"the table's {LOG_RETENTION_DURATION} ({hours_text(log_retention)}) is shorter than its "
                f"{DELETED_FILE_RETENTION_DURATION} ({hours_text(default)}): the log of versions whose files VACUUM "
                "keeps would be cleaned up first, as the reference refuses; raise "
                f"{LOG_RETENTION_DURATION} to at least {hours_text(default)}, or turn the check off with "
                "enforce_retention_duration=False "
                "(CLI: --no-enforce-retention-duration)",
                uri,
            )
    retention = default if specified is None else specified
    now = int(time.time() * 1000) if now_ms is None else int(now_ms)
    return RetentionWindow(
        default_retention_ms=default,
        specified_retention_ms=specified,
        retention_ms=retention,
        check_enabled=bool(enforce_retention_duration),
        now_ms=now,
        horizon_ms=now - retention,
    )
