"""`NewVersionTrigger`: waits in the triggerer for commits that add data to a Delta table.

One class serves two callers:

- the deferrable `NewVersionSensor`, for which it yields one event and returns;
- an `AssetWatcher`, for which it watches forever and yields one event per poll that found new data, keeping its
  cursor in Airflow's asset state store (Airflow 3.3+) so that a restarted triggerer goes on where it stopped.

What counts as new data, and the payload (`NewVersionEvent`), come from `triggers.new_data`, which the sensor shares;
this module only schedules the polls, keeps the cursor and turns errors into events.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.triggers import BaseEventTrigger
from airflow.triggers.base import TriggerEvent

from airflow_provider_deltalite.engine.errors import DeltaLiteError, InvalidArgument, TableNotFound
from airflow_provider_deltalite.triggers.new_data import check_new_data, error_event, open_table, resolve_since

if TYPE_CHECKING:
    from airflow_provider_deltalite.table import DeltaTable

# Keys of the asset state store are at most 512 characters; a longer table URI is stored under its digest.
_STATE_KEY_PREFIX = "deltalite.new_version.cursor:"
_STATE_KEY_LIMIT = 512


def _check_arguments(
    table_uri: Any, deltalite_conn_id: Any, since: Any, poll_interval: Any, flags: Mapping[str, Any]
) -> None:
    uri = table_uri if isinstance(table_uri, str) else None
    if not isinstance(table_uri, str) or not table_uri.strip():
        raise InvalidArgument(f"table_uri must be a non-empty string, got {table_uri!r}")
    if deltalite_conn_id is not None and (not isinstance(deltalite_conn_id, str) or not deltalite_conn_id):
        raise InvalidArgument(f"deltalite_conn_id must be a connection id or None, got {deltalite_conn_id!r}", uri)
    if since is not None and (isinstance(since, bool) or not isinstance(since, int) or since < -1):
        # The cursor's rules, and their message, are those of DeltaTable.changes. Imported only for a bad value:
        # the triggerer builds triggers on its event loop, and the options module takes milliseconds to import.
        from airflow_provider_deltalite.maintenance.options import ChangesOptions

        ChangesOptions.build({"since": since}, uri)
    if (
        isinstance(poll_interval, bool)
        or not isinstance(poll_interval, int | float)
        or not math.isfinite(poll_interval)
        or poll_interval <= 0
    ):
        raise InvalidArgument(f"poll_interval must be a positive number of seconds, got {poll_interval!r}", uri)
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise InvalidArgument(f"{name} must be True or False, got {value!r}", uri)


class _CursorStore:
    """The watcher's cursor in the asset state store: ``{"version": N, "table_id": id-or-None}``.

    The store belongs to the watched asset; the key names the table, so several tables can feed one asset.
    """

    def __init__(self, accessors: Any, table_uri: str) -> None:
        self._accessors = accessors
        key = f"{_STATE_KEY_PREFIX}{table_uri}"
        if len(key) > _STATE_KEY_LIMIT:
            key = f"{_STATE_KEY_PREFIX}sha256:{hashlib.sha256(table_uri.encode()).hexdigest()}"
        self.key = key

    async def load(self) -> tuple[int, str | None] | None:
        stored = await self._accessors.aget(self.key, None)
        if isinstance(stored, Mapping) and isinstance(stored.get("version"), int):
            table_id = stored.get("table_id")
            return stored["version"], table_id if isinstance(table_id, str) else None
        return None

    async def save(self, version: int, table_id: str | None) -> None:
        await self._accessors.aset(self.key, {"version": version, "table_id": table_id})


class NewVersionTrigger(BaseEventTrigger):
    """Fires when a Delta table receives new data: a commit after the cursor that adds or removes rows.

    OPTIMIZE, Z-order and other rewrites whose file actions all carry ``dataChange=false``, VACUUM's START/END commits
    and (by default) metadata-only commits do not fire it. Each poll lists only the commits after the cursor, in a
    worker thread (`asyncio.to_thread`), so the triggerer's event loop never blocks on storage.

    The event payload is the sensor's XCom (`NewVersionEvent.to_payload`) plus ``"status": "success"``::

        {"status": "success", "table_uri": ..., "baseline_version": 5, "version": 7, "versions": [7],
         "skipped": [{"version": 6, "kind": "rearrange"}], "operations": ["WRITE"], "added_files": 1,
         "added_rows": 100, "added_bytes": 2048, "timestamp": 1764000000000}

    or, when the table cannot be tailed, ``{"status": "error", "error": <class path>, "message": ...}`` (the error's
    `DeltaLiteError.to_payload`).

    **Serving a deferred task** (a task instance is attached), and whenever it is run outside the triggerer
    (``dag.test()``, a direct ``run()``): it yields one event and returns. The baseline is ``since`` (the
    sensor always passes one; None means the newest version at the first poll), and every poll lists from it, so the
    payload covers everything since the baseline. A table that does not exist keeps it waiting unless
    ``fail_if_missing``; any deltalite error (`LogGap`, `TableRecreated`, `CorruptLog`, a bad connection) becomes an
    error event, which the sensor raises as the same typed error.

    **As an AssetWatcher** (run by the triggerer with no task instance): it never returns; each poll with new data
    yields one event, which Airflow turns into one asset event. The cursor moves to the newest version each poll has
    seen and, on Airflow 3.3+, is kept in the watched asset's state store under
    ``deltalite.new_version.cursor:<table_uri>``, written as soon as it is first chosen and after every event. A
    restarted triggerer reads it back, so it neither repeats events nor misses commits made while it was down. The
    cursor is written right after the event is handed to the triggerer: a triggerer killed in the few milliseconds
    between the two can repeat that one event; it never drops one. The initial cursor, when none is stored, is
    ``since`` if given, else the newest version when the watcher first runs (history never fires; a table
    that does not exist yet starts at -1, so its first commit counts). A watcher cannot fail, so it does not stop at
    what fails a sensor: when log cleanup removed the commits after its cursor it goes on from the oldest retained
    one, and when the table was recreated, from the new table's first commit (both with a warning in the triggerer
    log; ``on_gap``/``on_recreate="resume"`` of `list_changes`). Other errors are logged (once per distinct message)
    and polling goes on: a watcher that raised would be restarted by the triggerer in a tight loop. Before Airflow 3.3
    (no state store), and when one trigger watches several assets, the cursor lives in memory only: a restart starts
    again from ``since`` or the newest version, which can skip commits made while it was down.

    The kwargs identify an AssetWatcher (Airflow hashes them), so build the trigger from values fixed when the DAG is
    parsed: never read the table's current version in a DAG file; leave ``since`` None instead.

    :param table_uri: the table: an absolute path or URI, a Glue name (``glue://database/table``), or a path
        or name relative to the connection's base URI.
    :param deltalite_conn_id: a ``deltalite`` connection (storage credentials, base URI); None to use ``table_uri``
        as given with the environment's credentials.
    :param since: the baseline: fire on commits after this version (-1: from the first commit). None: the newest
        version at the first poll.
    :param poll_interval: seconds between polls.
    :param include_rearrangements: also fire on rearrangements (OPTIMIZE, Z-order: ``dataChange=false`` rewrites).
    :param include_metadata_changes: also fire on metadata-only commits (schema, properties, protocol).
    :param fail_if_missing: serving a task, send an error event when the table does not exist instead of waiting.
    :param after_version: deprecated name of ``since`` (0.1), accepted for one release with a warning; triggers
        serialised by 0.1 carry it.

    Example:
        >>> from airflow.sdk import Asset, AssetWatcher  # doctest: +SKIP
        >>> trigger = NewVersionTrigger(table_uri="s3://lake/events", deltalite_conn_id="lake", poll_interval=30)
        >>> watcher = AssetWatcher(name="events_new_data", trigger=trigger)  # doctest: +SKIP
        >>> events = Asset("s3://lake/events", watchers=[watcher])  # doctest: +SKIP
    """

    def __init__(
        self,
        table_uri: str,
        deltalite_conn_id: str | None = None,
        since: int | None = None,
        poll_interval: float = 60.0,
        include_rearrangements: bool = False,
        include_metadata_changes: bool = False,
        fail_if_missing: bool = False,
        *,
        after_version: int | None = None,
    ) -> None:
        super().__init__()
        since = resolve_since(since, after_version, owner="NewVersionTrigger", table_uri=table_uri)
        _check_arguments(
            table_uri,
            deltalite_conn_id,
            since,
            poll_interval,
            {
                "include_rearrangements": include_rearrangements,
                "include_metadata_changes": include_metadata_changes,
                "fail_if_missing": fail_if_missing,
            },
        )
        self.table_uri = table_uri
        self.deltalite_conn_id = deltalite_conn_id
        self.since = since
        self.poll_interval = poll_interval
        self.include_rearrangements = include_rearrangements
        self.include_metadata_changes = include_metadata_changes
        self.fail_if_missing = fail_if_missing

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """The class path and exactly the constructor's keyword arguments."""
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "table_uri": self.table_uri,
                "deltalite_conn_id": self.deltalite_conn_id,
                "since": self.since,
                "poll_interval": self.poll_interval,
                "include_rearrangements": self.include_rearrangements,
                "include_metadata_changes": self.include_metadata_changes,
                "fail_if_missing": self.fail_if_missing,
            },
        )

    def _watching(self) -> bool:
        # The triggerer sets trigger_id on every trigger it runs and attaches a task instance to a deferred task's.
        return self.trigger_id is not None and self.task_instance is None

    def _cursor_store(self) -> _CursorStore | None:
        accessors = getattr(self, "asset_state_store", None)  # injected for watchers by Airflow 3.3+
        return None if accessors is None else _CursorStore(accessors, self.table_uri)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Poll every ``poll_interval`` seconds; see the class docstring for when events are yielded."""
        watching = self._watching()
        store = self._cursor_store() if watching else None
        cursor = self.since
        table_id: str | None = None
        stored = None
        if store is not None:
            try:
                stored = await store.load()
            except (ValueError, KeyError) as exc:
                # One trigger shared by several assets: the accessor cannot pick one. Keep the cursor in memory.
                self.log.warning("%s: cursor kept in memory only (%s)", self.table_uri, exc)
                store, stored = None, None
            if stored is not None:
                cursor, table_id = stored
                self.log.info("%s: resuming after version %d (from the asset state store)", self.table_uri, cursor)

        # What fails a sensor is worked around by a watcher, which has no one to report to (class docstring).
        policy = "resume" if watching else "raise"
        table: DeltaTable | None = None
        last_problem: str | None = None
        last_reported: int | None = None
        while True:
            try:
                if table is None:
                    table = await asyncio.to_thread(open_table, self.table_uri, self.deltalite_conn_id)
                if cursor is None:
                    cursor = await asyncio.to_thread(_newest_or_before_first, table)
                    self.log.info("%s: watching for new data after version %d", self.table_uri, cursor)
                if store is not None and stored is None:
                    # Stored as soon as chosen: commits made while the triggerer is down are found after a restart.
                    await store.save(cursor, table_id)
                    stored = (cursor, table_id)
                event, changes = await asyncio.to_thread(
                    check_new_data,
                    table,
                    cursor,
                    include_rearrangements=self.include_rearrangements,
                    include_metadata_changes=self.include_metadata_changes,
                    table_id=table_id,
                    on_gap=policy,
                    on_recreate=policy,
                )
            except TableNotFound as exc:
                if self.fail_if_missing and not watching:
                    yield TriggerEvent(error_event(exc))
                    return
                if last_problem != exc.problem:
                    self.log.info("%s does not exist yet; waiting for it", self.table_uri)
                    last_problem = exc.problem
            except DeltaLiteError as exc:
                if not watching:
                    yield TriggerEvent(error_event(exc))
                    return
                if last_problem != exc.problem:
                    self.log.error("%s; retrying every %s s", exc, self.poll_interval)
                    last_problem = exc.problem
            except Exception as exc:
                if not watching:
                    raise  # a bug or a storage library failure: the task fails with the traceback
                if last_problem != str(exc):
                    self.log.exception("%s: poll failed; retrying every %s s", self.table_uri, self.poll_interval)
                    last_problem = str(exc)
            else:
                last_problem = None
                if event is not None:
                    self.log.info(
                        "%s: new data in version(s) %s after version %d",
                        self.table_uri,
                        list(event.versions),
                        event.baseline_version,
                    )
                    yield TriggerEvent(event.to_trigger_event())
                    if not watching:
                        return
                elif changes.changes and changes.latest != last_reported:
                    # A deferred task lists from its baseline every poll: report each newest version once.
                    skipped = ", ".join(f"{c.version} ({c.kind}, {c.operation})" for c in changes.changes)
                    self.log.info("%s: no new data in version(s) %s; waiting", self.table_uri, skipped)
                    last_reported = changes.latest
                if watching and (changes.latest != cursor or changes.table_id != table_id):
                    # A deferred task keeps its baseline (its payload covers everything since); a watcher moves on.
                    cursor, table_id = changes.latest, changes.table_id
                    if store is not None:
                        await store.save(cursor, table_id)
            await asyncio.sleep(self.poll_interval)


def _newest_or_before_first(table: DeltaTable) -> int:
    """The newest version, or -1 when the table does not exist yet (so its first commit counts as new)."""
    try:
        return table.latest_version()
    except TableNotFound:
        return -1
