"""What `NewVersionSensor` and `NewVersionTrigger` share: opening the table, one poll for new data, and the events.

A poll (`check_new_data`) gives a `NewVersionEvent`, the typed form of the new-data payload: the sensor returns it as
XCom, the trigger sends it as a ``"success"`` event and the sensor reads it back (`read_event`). A deltalite error
travels as an ``"error"`` event in the errors' own wire format (`error_event`, `raise_from_event`). The cursor is
called ``since`` here as on `DeltaTable.changes` and the CLI; `resolve_since` maps the 0.1 name ``after_version``.

What counts as new data, and the payload's content, come from `maintenance.changes` (`list_changes`,
`new_data_event`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from airflow.providers.common.compat.sdk import AirflowException

from airflow_provider_deltalite.engine.errors import DeltaLiteError, InvalidArgument

if TYPE_CHECKING:
    from airflow_provider_deltalite.maintenance.changes import ChangeSet
    from airflow_provider_deltalite.table import DeltaTable

try:
    from airflow.exceptions import AirflowProviderDeprecationWarning as _Deprecation
except ImportError:  # pragma: no cover - every Airflow this provider supports has it
    _Deprecation = DeprecationWarning  # type: ignore[misc, assignment]


@dataclass(frozen=True)
class NewVersionEvent:
    """New data after a baseline: the sensor's XCom and the payload of the trigger's ``"success"`` event.

    It describes the commits in ``(baseline_version, version]`` exactly.

    Attributes:
        table_uri: the table (credentials removed).
        baseline_version: the version after which commits count (-1: before the first commit).
        version: the newest commit that counts.
        versions: every commit that counts, oldest first (``version`` is the last).
        skipped: ``(version, kind)`` of the other commits before ``version`` (``kind``: rearrange, maintenance...).
        operations: ``commitInfo.operation`` of each commit in ``versions`` (None for a commit without one).
        added_files: data files the counting commits add.
        added_rows: rows they add; None when an add has no row count in its stats.
        added_bytes: bytes they add.
        timestamp: ``version``'s commit time in ms since the epoch, when known.

    Example:
        >>> event = NewVersionEvent.from_payload(payload)  # doctest: +SKIP
        >>> event.versions, event.to_payload() == payload  # doctest: +SKIP
        ((7,), True)
    """

    table_uri: str
    baseline_version: int
    version: int
    versions: tuple[int, ...]
    skipped: tuple[tuple[int, str], ...]
    operations: tuple[str | None, ...]
    added_files: int
    added_rows: int | None
    added_bytes: int
    timestamp: int | None

    def to_payload(self) -> dict[str, Any]:
        """The JSON-safe dict (the XCom): ``{table_uri, baseline_version, version, versions, skipped: [{version,
        kind}], operations, added_files, added_rows, added_bytes, timestamp}``."""
        return {
            "table_uri": self.table_uri,
            "baseline_version": self.baseline_version,
            "version": self.version,
            "versions": list(self.versions),
            "skipped": [{"version": version, "kind": kind} for version, kind in self.skipped],
            "operations": list(self.operations),
            "added_files": self.added_files,
            "added_rows": self.added_rows,
            "added_bytes": self.added_bytes,
            "timestamp": self.timestamp,
        }

    def to_trigger_event(self) -> dict[str, Any]:
        """The payload of the trigger's event: `to_payload` plus ``"status": "success"``."""
        return {"status": "success", **self.to_payload()}

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> NewVersionEvent:
        """The event a `to_payload` dict describes; other keys (the event's ``status``, keys a newer trigger may
        add) are ignored.

        Raises:
            ValueError: a key is missing or holds a value of the wrong type.
        """
        if not isinstance(payload, Mapping):
            raise ValueError(f"a new-data event must be a mapping, got {type(payload).__name__}")
        missing = [key for key in _EVENT_KEYS if key not in payload]
        if missing:
            raise ValueError(f"a new-data event needs {', '.join(missing)}")
        p = payload
        skipped = p["skipped"]
        if not isinstance(skipped, list) or not all(
            isinstance(s, Mapping) and _is_int(s.get("version")) and isinstance(s.get("kind"), str) for s in skipped
        ):
            raise ValueError(f"skipped must be a list of {{version, kind}}, got {skipped!r}")
        event = cls(
            table_uri=_typed(p, "table_uri", str),
            baseline_version=_whole(p, "baseline_version"),
            version=_whole(p, "version"),
            versions=tuple(_whole_list(p, "versions")),
            skipped=tuple((s["version"], s["kind"]) for s in skipped),
            operations=tuple(_typed(p, "operations", list)),
            added_files=_whole(p, "added_files"),
            added_rows=None if p["added_rows"] is None else _whole(p, "added_rows"),
            added_bytes=_whole(p, "added_bytes"),
            timestamp=None if p["timestamp"] is None else _whole(p, "timestamp"),
        )
        if not event.versions or event.versions[-1] != event.version:
            raise ValueError(f"versions must end with version {event.version}, got {list(event.versions)}")
        if not all(op is None or isinstance(op, str) for op in event.operations):
            raise ValueError(f"operations must be strings or null, got {list(event.operations)!r}")
        return event

    @classmethod
    def from_changes(
        cls,
        changes: ChangeSet,
        *,
        baseline_version: int,
        include_rearrangements: bool = False,
        include_metadata_changes: bool = False,
    ) -> NewVersionEvent | None:
        """The event for the commits of ``changes`` after ``baseline_version`` that count, or None when none does
        (`maintenance.changes.new_data_event` decides)."""
        from airflow_provider_deltalite.maintenance.changes import new_data_event

        payload = new_data_event(
            changes,
            baseline_version=baseline_version,
            include_rearrangements=include_rearrangements,
            include_metadata_changes=include_metadata_changes,
        )
        return None if payload is None else cls.from_payload(payload)


_EVENT_KEYS = tuple(NewVersionEvent.__dataclass_fields__)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _typed(payload: Mapping[str, Any], key: str, kind: type) -> Any:
    value = payload[key]
    if not isinstance(value, kind):
        raise ValueError(f"{key} must be a {kind.__name__}, got {value!r}")
    return value


def _whole(payload: Mapping[str, Any], key: str) -> int:
    value = payload[key]
    if not _is_int(value):
        raise ValueError(f"{key} must be an integer, got {value!r}")
    return int(value)


def _whole_list(payload: Mapping[str, Any], key: str) -> list[int]:
    value = payload[key]
    if not isinstance(value, list) or not all(_is_int(v) for v in value):
        raise ValueError(f"{key} must be a list of integers, got {value!r}")
    return value


def read_event(event: Any) -> NewVersionEvent:
    """The new-data event a ``NewVersionTrigger`` sent, checked (as the Databricks provider's
    ``validate_trigger_event`` checks its events).

    Raises:
        DeltaLiteError: the error an ``"error"`` event carries (`raise_from_event`).
        AirflowException: the event is not a dict, has another status, or its payload is malformed.
    """
    if not isinstance(event, dict):
        raise AirflowException(f"unexpected trigger event {event!r}")
    if event.get("status") != "success":
        raise_from_event(event)
    try:
        return NewVersionEvent.from_payload(event)
    except ValueError as exc:
        raise AirflowException(f"NewVersionTrigger sent a malformed event ({exc}): {event!r}") from None


def error_event(exc: DeltaLiteError) -> dict[str, Any]:
    """The payload of an error event: the error's wire format (`DeltaLiteError.to_payload`) plus ``"status": "error"``,
    enough to raise the same typed error on the worker (`raise_from_event`)."""
    return {"status": "error", **exc.to_payload()}


def raise_from_event(event: Mapping[str, Any]) -> NoReturn:
    """Raise the error an error event describes: the same deltalite error class and attributes when it is one of
    ours, else an AirflowException with the event's message."""
    # The hook's module defines InvalidConnection, which an event may carry; from_payload only finds loaded classes.
    import airflow_provider_deltalite.hooks.deltalite  # noqa: F401

    message = str(event.get("message") or f"NewVersionTrigger sent an unexpected event: {dict(event)!r}")
    try:
        error = DeltaLiteError.from_payload(event)
    except ValueError:
        raise AirflowException(message) from None
    raise error


def open_table(table_uri: str, deltalite_conn_id: str | None) -> DeltaTable:
    """The table at ``table_uri``: through the ``deltalite`` connection ``deltalite_conn_id``, or as given when None.

    The hook does both (it makes no connection lookup for None), so the sensor and the trigger open tables the same
    way an operator does.
    """
    from airflow_provider_deltalite.hooks.deltalite import DeltaLiteHook

    return DeltaLiteHook(deltalite_conn_id).get_table(table_uri)


def check_new_data(
    table: DeltaTable,
    since: int,
    *,
    include_rearrangements: bool = False,
    include_metadata_changes: bool = False,
    table_id: str | None = None,
    on_gap: str = "raise",
    on_recreate: str = "raise",
) -> tuple[NewVersionEvent | None, ChangeSet]:
    """One poll: the event for the commits after ``since`` (the baseline) that count as new data (None when none
    does), and the ChangeSet it was built from (its ``latest`` is the cursor for the next poll).

    ``table_id``, ``on_gap`` and ``on_recreate`` are `DeltaTable.changes`'s; so are the errors: `TableNotFound`,
    `LogGap`, `TableRecreated`, `CorruptLog`.

    Example:
        >>> event, changes = check_new_data(DeltaTable("/data/events"), 41)  # doctest: +SKIP
        >>> event.versions, changes.latest  # doctest: +SKIP
        ((43,), 43)
    """
    changes = table.changes(
        since,
        table_id=table_id,
        on_gap=on_gap,
        on_recreate=on_recreate,
        include_metadata_changes=include_metadata_changes,
    )
    event = NewVersionEvent.from_changes(
        changes,
        baseline_version=since,
        include_rearrangements=include_rearrangements,
        include_metadata_changes=include_metadata_changes,
    )
    return event, changes


def resolve_since(since: Any, after_version: Any, *, owner: str, table_uri: Any = None) -> Any:
    """``since``, or the deprecated ``after_version`` (0.1's name for it) with a deprecation warning.

    Raises:
        InvalidArgument: both were given.
    """
    if after_version is None:
        return since
    uri = table_uri if isinstance(table_uri, str) and table_uri.strip() else None
    if since is not None:
        raise InvalidArgument(f"{owner}: pass since, not both since and the deprecated after_version", uri)
    warnings.warn(
        f"{owner}: after_version is deprecated and will be removed in the next release; pass since (the same value)",
        _Deprecation,
        stacklevel=3,
    )
    return after_version
