"""`NewVersionSensor`: waits until a Delta table receives new data, ignoring OPTIMIZE, Z-order and VACUUM commits."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import BaseSensorOperator, PokeReturnValue, conf

from airflow_provider_deltalite.engine.errors import InvalidArgument, TableNotFound, VersionNotFound
from airflow_provider_deltalite.triggers.new_data import check_new_data, open_table, read_event, resolve_since
from airflow_provider_deltalite.triggers.new_version import NewVersionTrigger

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Context

    from airflow_provider_deltalite.table import DeltaTable

_JINJA = re.compile(r"{{|{%")


def parse_since(value: Any, table_uri: str | None = None) -> int | None:
    """``since`` as an int (a non-negative table version), or None; Jinja renders it to text, so a string of digits
    is accepted.

    Example:
        >>> parse_since(" 12 ")
        12

    Raises:
        InvalidArgument: a negative number, a non-integer (``3.5``, ``"abc"``, ``True``), or text such as ``"None"``
            that an upstream XCom rendered to.
    """
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*\d+\s*", value):
        return int(value)
    raise InvalidArgument(
        f"since must be a non-negative integer (a version of the table), got {value!r}", _shown(table_uri)
    )


def _shown(table_uri: Any) -> str | None:
    """The table URI for an error message, unless it is still a template."""
    return table_uri if isinstance(table_uri, str) and not _JINJA.search(table_uri) else None


def _is_deferred_value(value: Any) -> bool:
    """Whether ``value`` is only known when the task runs: a Jinja template or an XComArg."""
    if isinstance(value, str):
        return bool(_JINJA.search(value))
    return not (value is None or isinstance(value, int | float | bytes | list | tuple | dict | set))


def run_reference_time(context: Context) -> datetime:
    """The moment a run's baseline is taken at: the DAG run's ``run_after`` (Airflow 3: the end of its data interval
    for a scheduled run, the trigger time for a manual one), else its data interval end, else its start date."""
    dag_run = context.get("dag_run")
    for value in (
        getattr(dag_run, "run_after", None),
        context.get("data_interval_end"),
        getattr(dag_run, "start_date", None),
    ):
        if isinstance(value, datetime):
            return value
    raise InvalidArgument("the DAG run has no run_after, data interval end or start date; pass since")


def version_as_of(table: DeltaTable, moment: datetime) -> int:
    """The table's newest version committed at or before ``moment``; -1 when its first commit came later (the table
    was created after ``moment``, so all of it is new).

    Raises:
        TableNotFound: there is no table (yet).
        VersionNotFound: log cleanup removed the commits around ``moment``, so the version then is unknown.
    """
    try:
        return table.version_at(moment)
    except VersionNotFound as exc:
        if not exc.earliest:  # the log reaches back to version 0, and even that came after `moment`
            return -1
        raise exc.extended("pass since to say which commits count as new") from None


class NewVersionSensor(BaseSensorOperator):
    """Waits until a Delta table receives new data: a commit after the baseline that adds or removes rows.

    OPTIMIZE, Z-order and other rewrites (file actions all ``dataChange=false``), VACUUM's START/END commits and, by
    default, metadata-only commits (schema, properties, protocol) do not count. Each poke lists only the commits after
    the baseline (`maintenance.changes.list_changes`); it never lists the whole log or replays it.

    The XCom (``return_value``) is a plain dict::

        {"table_uri": "/data/events", "baseline_version": 5, "version": 7, "versions": [7],
         "skipped": [{"version": 6, "kind": "rearrange"}], "operations": ["WRITE"], "added_files": 1,
         "added_rows": 100, "added_bytes": 2048, "timestamp": 1764000000000}

    ``version`` is the newest commit that counts, ``versions`` all of them after the baseline, ``skipped`` the other
    commits before ``version``; the counts sum over ``versions``; ``timestamp`` (ms) is ``version``'s commit time.

    **The baseline** is ``since`` when given. Otherwise it is the table's version as of the DAG run's
    ``run_after`` (for a scheduled run the end of its data interval, for a manual run the moment it was triggered;
    see `run_reference_time`), found by `DeltaTable.version_at` from the commit timestamps; -1 when the table did not
    exist then, so a table created later counts from version 0. It depends only on the run and the table's history,
    never on when a poke happens: a rescheduled poke (a new process), a retry and a resumed deferral all wait for the
    same commits, and a commit that lands between the run being due and the first poke is not missed. On stores
    without in-commit timestamps a commit's time is its file's modification time as the store reports it, so keep the
    Airflow and storage clocks in sync.

    **A table that does not exist** keeps the sensor waiting (its first commit then counts) unless
    ``fail_if_missing``, which raises `TableNotFound`. A cleaned log (`LogGap`), a recreated table
    (`TableRecreated`) and an unreadable commit (`CorruptLog`) fail the task with that typed error.

    **Deferrable**: ``execute`` pokes once; when there is nothing new yet it defers to `NewVersionTrigger` with the
    baseline fixed, polling every ``poke_interval`` seconds in the triggerer, and ``execute_complete`` returns the
    trigger's payload (or raises the typed error it reports). The deferral times out after ``timeout``.

    :param table_uri: the table: an absolute path or URI, a Glue name (``glue://database/table``), or a path
        or name relative to the connection's base URI.
        (templated)
    :param deltalite_conn_id: a ``deltalite`` connection (storage credentials, base URI); None to use ``table_uri``
        as given with the environment's credentials.
    :param since: fire on commits after this version, e.g. ``"{{ ti.xcom_pull('load')['version'] }}"``; None
        derives the baseline from the run (above). A negative or non-integer value is an `InvalidArgument`: when the
        DAG is parsed for a literal, when the task runs for a template or an XComArg. (templated)
    :param include_rearrangements: also fire on rearrangements (OPTIMIZE, Z-order).
    :param include_metadata_changes: also fire on metadata-only commits.
    :param fail_if_missing: raise `TableNotFound` instead of waiting for the table to appear.
    :param deferrable: wait in the triggerer instead of a worker slot (default: ``[operators] default_deferrable``).
    :param after_version: deprecated name of ``since`` (0.1), accepted for one release with a warning.

    Other arguments are `BaseSensorOperator`'s: ``poke_interval`` (seconds between polls, in every mode), ``mode``
    (``poke`` or ``reschedule``), ``timeout``, ``soft_fail``...

    Example:
        >>> wait = NewVersionSensor(  # doctest: +SKIP
        ...     task_id="wait_for_events", table_uri="s3://lake/events", deltalite_conn_id="lake", mode="reschedule",
        ...     poke_interval=300,
        ... )
        >>> wait.output  # the payload above, for a downstream task  # doctest: +SKIP
    """

    template_fields: Sequence[str] = ("table_uri", "since")
    ui_color = "#d8ecf3"

    def __init__(
        self,
        *,
        table_uri: str,
        deltalite_conn_id: str | None = None,
        since: int | str | None = None,
        include_rearrangements: bool = False,
        include_metadata_changes: bool = False,
        fail_if_missing: bool = False,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        after_version: int | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        since = resolve_since(since, after_version, owner="NewVersionSensor", table_uri=_shown(table_uri))
        self.table_uri = table_uri
        self.deltalite_conn_id = deltalite_conn_id
        self.since = since
        self.include_rearrangements = include_rearrangements
        self.include_metadata_changes = include_metadata_changes
        self.fail_if_missing = fail_if_missing
        self.deferrable = deferrable
        if not _is_deferred_value(since):
            parse_since(since, table_uri)  # a bad literal fails the DAG file, not the run
        self._table: DeltaTable | None = None
        self._baseline: int | None = None
        self._reported: int | None = None  # newest version logged as "not counted" (poke mode re-lists each poke)

    def _open(self) -> DeltaTable:
        if self._table is None:
            self._table = open_table(self.table_uri, self.deltalite_conn_id)
        return self._table

    def baseline_version(self, context: Context) -> int:
        """The version after which commits count (see the class docstring); the same on every poke of a run.

        Raises:
            TableNotFound: the table does not exist and ``since`` is None (the caller waits or fails).
        """
        if self._baseline is None:
            after = parse_since(self.since, self.table_uri)
            self._baseline = after if after is not None else version_as_of(self._open(), run_reference_time(context))
            self.log.info("Waiting for new data in %s after version %d", self.table_uri, self._baseline)
        return self._baseline

    def poke(self, context: Context) -> bool | PokeReturnValue:
        """One look at the log: done, with the payload as XCom, when a commit after the baseline counts."""
        try:
            baseline = self.baseline_version(context)
            event, changes = check_new_data(
                self._open(),
                baseline,
                include_rearrangements=self.include_rearrangements,
                include_metadata_changes=self.include_metadata_changes,
            )
        except TableNotFound:
            if self.fail_if_missing:
                raise
            self.log.info("%s does not exist yet; waiting for it", self.table_uri)
            return False
        if event is None:
            if changes.changes and changes.latest != self._reported:
                seen = ", ".join(f"{c.version} ({c.kind}, {c.operation})" for c in changes.changes)
                self.log.info("No new data after version %d; not counted: %s", baseline, seen)
                self._reported = changes.latest
            return False
        self.log.info("New data in %s: version(s) %s", self.table_uri, list(event.versions))
        return PokeReturnValue(is_done=True, xcom_value=event.to_payload())

    def execute(self, context: Context) -> Any:
        """Validate the rendered arguments, then poke (or poke once and defer)."""
        parse_since(self.since, self.table_uri)  # rendered now: one clear error before any poke
        if not self.deferrable:
            return super().execute(context)
        result = self.poke(context)
        if isinstance(result, PokeReturnValue) and result.is_done:
            return result.xcom_value
        after = self._baseline if self._baseline is not None else parse_since(self.since)
        self.defer(
            trigger=NewVersionTrigger(
                table_uri=self.table_uri,
                deltalite_conn_id=self.deltalite_conn_id,
                # No baseline means the table did not exist at the first poke, which is after the run was due:
                # every commit it gets is new.
                since=after if after is not None else -1,
                poll_interval=self.poke_interval,
                include_rearrangements=self.include_rearrangements,
                include_metadata_changes=self.include_metadata_changes,
                fail_if_missing=self.fail_if_missing,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        """Return the trigger's payload (the XCom), or raise the error it reported."""
        new_data = read_event(event)
        self.log.info("New data in %s: version(s) %s", self.table_uri, list(new_data.versions))
        return new_data.to_payload()
