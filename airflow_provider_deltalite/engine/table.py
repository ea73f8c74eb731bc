"""`Table`: a Delta table's storage and log, opened by URI and storage options: snapshots, history, transactions.

This is the engine's view of a table. Users open `airflow_provider_deltalite.DeltaTable`, which adds the maintenance
operations on top; everything that takes a `Table` takes a `DeltaTable` too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_provider_deltalite.engine.catalog import resolve_location
from airflow_provider_deltalite.engine.errors import (
    DeltaLiteError,
    InvalidArgument,
    InvalidExpression,
    VersionNotFound,
    redact_uri,
)
from airflow_provider_deltalite.engine.history import history_entries, in_commit_timestamps_enabled, read_commit_info
from airflow_provider_deltalite.engine.log_path import LogFileKind
from airflow_provider_deltalite.engine.log_segment import earliest_version, list_log, load_log_segment
from airflow_provider_deltalite.engine.partition_filter import PartitionFilter
from airflow_provider_deltalite.engine.row_tracking import row_tracking_state
from airflow_provider_deltalite.engine.snapshot import Snapshot, load_snapshot
from airflow_provider_deltalite.engine.storage import Storage
from airflow_provider_deltalite.engine.transaction import Transaction, start_transaction

if TYPE_CHECKING:
    from airflow_provider_deltalite.engine.snapshot_stream import ReplayStream


def parse_timestamp_ms(value: datetime | int | float | str) -> int:
    """Milliseconds since the epoch from a datetime (naive means UTC), epoch ms, or an ISO-8601 string.

    Example:
        >>> parse_timestamp_ms("2024-01-01T00:00:00Z")
        1704067200000
    """
    if isinstance(value, bool):
        raise ValueError(f"not a timestamp: {value!r}")
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return int(text)
        try:
            value = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"not a timestamp: {text!r} (use ISO-8601, e.g. 2024-01-31T12:00:00Z)") from None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return int(value.timestamp() * 1000)
    raise ValueError(f"not a timestamp: {value!r}")


class Table:
    """A Delta table at a URI: a local path, ``file://``, ``memory://``, ``s3://``, ``gs://`` or ``abfs://``; or a
    table's name in a catalog, ``glue://database/table``, resolved once here to its location (`engine.catalog`).

    Args:
        uri: where the table lives, or its catalog name.
        storage_options: fsspec options for the backend (credentials, endpoint). They are never logged. Options
            named ``deltalite_*`` configure deltalite itself (single-writer mode, storage retries; see `Storage`).
        filesystem: an fsspec filesystem to use instead of building one from ``uri`` and ``storage_options`` (a
            client configured in code, a wrapper); it must serve the URI's scheme.

    Example:
        >>> table = Table("s3://bucket/events", storage_options={"endpoint_url": "http://127.0.0.1:5000"})
        >>> snap = table.snapshot()  # doctest: +SKIP
        >>> snap.files.num_rows  # doctest: +SKIP
        >>> Table("s3://bucket/events", filesystem=s3fs.S3FileSystem(profile="lake"))  # doctest: +SKIP
        >>> Table("glue://sales/orders", {"glue_region": "eu-west-1"}).uri  # doctest: +SKIP
        's3://lake/sales/orders'

    Attributes:
        uri: the table's location (a catalog name resolved).
        catalog_name: the catalog name it was opened by (``glue://sales/orders``), else None.

    Raises:
        CatalogTableNotFound, NotADeltaTable, CatalogError: the catalog name cannot be resolved (nothing is read).
    """

    def __init__(self, uri: str, storage_options: Mapping[str, Any] | None = None, *, filesystem: Any = None) -> None:
        resolved = resolve_location(uri, storage_options) if isinstance(uri, str) else None
        if resolved is not None:
            uri, storage_options = resolved.uri, resolved.storage_options
        self.catalog_name = None if resolved is None else resolved.name
        self.storage = Storage(uri, storage_options, filesystem=filesystem)
        self.uri = self.storage.table_uri

    def planning_snapshot(
        self,
        snapshot: Snapshot | None,
        where: str | None = None,
        *,
        file_fields: Iterable[str] | None = None,
        tasks: Any = None,
    ) -> Snapshot:
        """The snapshot an operation plans from: the caller's, when it has loaded one already (one log replay per
        operation, e.g. the CLI's preflight load), or the latest; with ``where`` (a predicate on partition columns)
        only the files of the partitions it selects (`snapshot_for_partitions`, whose checkpoint ``tasks`` may read).

        Raises:
            InvalidArgument: ``snapshot`` is of another table.
        """
        if snapshot is None:
            if where:
                return self.snapshot_for_partitions(where, tasks=tasks)
            return self.snapshot(file_fields=file_fields)
        if snapshot.table_uri != self.uri:
            shown = redact_uri(snapshot.table_uri)
            raise InvalidArgument(f"the snapshot passed is of another table ({shown})", self.uri)
        return snapshot

    def snapshot_for_partitions(self, where: str, version: int | None = None, *, tasks: Any = None) -> Snapshot:
        """The table with only the live files of the partitions ``where`` may select (`Snapshot.pruned_by`).

        What a rewrite of those partitions needs, in memory that follows them rather than the table. On a table that
        assigns row ids the whole table is loaded: fresh row ids are checked against every live file's. A predicate
        that does not bind as a partition predicate gives a snapshot without files, for the operation to refuse it.
        With ``tasks`` (a `checkpoint_tasks.CheckpointTaskRunner`, e.g. the Spark executor) a checkpoint of at least
        its ``checkpoint_task_bytes`` is read by its tasks (`checkpoint_tasks.load_snapshot_with_tasks`).
        """
        try:
            found = None
            if tasks is not None and getattr(tasks, "checkpoint_task_bytes", None) is not None:
                # the Spark executor's path: a local run never loads it
                from airflow_provider_deltalite.engine.checkpoint_tasks import load_snapshot_with_tasks

                found = load_snapshot_with_tasks(self.storage, version, PartitionFilter(where), tasks)
            snapshot = found or load_snapshot(self.storage, version, partition_filter=PartitionFilter(where))
        except InvalidExpression:
            # The operation refuses this predicate in its own words (a clustered table takes none; `where` names a
            # data column): for that it needs the table's state, never its files. This snapshot holds none
            # (`pruned_by` is STREAMED), and an operation given `where` binds it again before planning on it.
            from airflow_provider_deltalite.engine.snapshot_stream import stream_snapshot

            return stream_snapshot(self.storage, version).snapshot
        try:
            whole = row_tracking_state(snapshot).assigns_row_ids
        except DeltaLiteError:
            whole = True  # the operation reports a broken row-tracking state, from the whole table
        return load_snapshot(self.storage, snapshot.version) if whole else snapshot

    def snapshot(
        self,
        version: int | None = None,
        timestamp: datetime | int | str | None = None,
        *,
        file_fields: Iterable[str] | None = None,
        where: str | None = None,
    ) -> Snapshot:
        """The table at ``version``, at the newest version committed at or before ``timestamp``, or the latest;
        with ``file_fields``, of the file actions only those fields besides path, deletion vector and partition
        values (`Snapshot.file_fields`: what describe and VACUUM read, without statistics).

        With ``where`` (a scan filter, e.g. ``"date = '2026-11-01' AND id > 10"``) only the live files of the
        partitions its partition conjuncts may select are read from the log (`Snapshot.pruned_by`); conjuncts on
        other columns keep every file (`engine.scan` skips by statistics). Memory then follows those partitions.
        Scan such a snapshot with the same filter.

        Raises:
            TableNotFound: the path does not exist or is not a Delta table.
            VersionNotFound: the version does not exist, or the timestamp is before the first commit.
            CorruptLog: the log cannot be replayed.
            ProtocolNotSupported: the table needs a reader feature deltalite does not implement.
            InvalidExpression: ``where`` does not parse or names a column the table does not have.
        """
        if version is not None and timestamp is not None:
            raise ValueError("pass either version or timestamp, not both")
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
            raise VersionNotFound(f"version must be a non-negative integer, not {version!r}", self.uri)
        if timestamp is not None:
            version = self.version_at(timestamp)
        if where:
            pruning = PartitionFilter(where, partition_columns_only=False)
            return load_snapshot(self.storage, version, partition_filter=pruning, file_fields=file_fields)
        return load_snapshot(self.storage, version, file_fields=file_fields)

    def stream(self, version: int | None = None, *, file_fields: Iterable[str] | None = None) -> ReplayStream:
        """The table at ``version`` (None: latest) as a `ReplayStream`: its state, then its live files and
        tombstones a batch at a time (of the file actions only ``file_fields`` besides the keys, when given), for
        whole-table sums in memory that follows a batch rather than the table.

        Example:
            >>> sizes = sum(len(adds) for adds, _ in Table("/data/events").stream(file_fields=["size"]).batches())
            ... # doctest: +SKIP

        Raises:
            TableNotFound, VersionNotFound, CorruptLog, ProtocolNotSupported: as `snapshot`.
        """
        # the streamed replay (and its checkpoint reader) is loaded by the commands that stream, not by every one
        from airflow_provider_deltalite.engine.snapshot_stream import stream_snapshot

        return stream_snapshot(self.storage, version, file_fields=file_fields)

    def latest_version(self) -> int:
        """The newest version in the log (listing only; no replay)."""
        return load_log_segment(self.storage, None).version

    def version_at(self, timestamp: datetime | int | str) -> int:
        """The newest version whose commit timestamp is at or before ``timestamp``."""
        try:
            target = parse_timestamp_ms(timestamp)
        except ValueError as exc:
            raise VersionNotFound(str(exc), self.uri) from None
        files = list_log(self.storage, 0)
        earliest = earliest_version(files)
        latest_snapshot = load_snapshot(self.storage, None)
        props = latest_snapshot.properties
        commits = sorted((f for f in files if f.parsed.kind is LogFileKind.COMMIT), key=lambda f: f.version)
        times: list[tuple[int, int]] = []
        previous = None
        for f in commits:
            if earliest is not None and f.version < earliest:
                continue
            ts = f.info.modification_time
            if in_commit_timestamps_enabled(props, f.version):
                info = read_commit_info(self.storage, f.version) or {}
                ts = info.get("inCommitTimestamp", ts)
            elif previous is not None and ts <= previous:
                ts = previous + 1  # file times can go backwards; the reference makes them monotonic the same way
            times.append((f.version, ts))
            previous = ts
        if not times or target < times[0][1]:
            first = times[0] if times else (earliest, None)
            when = datetime.fromtimestamp(first[1] / 1000, UTC).isoformat() if first[1] else "unknown"
            raise VersionNotFound(
                f"timestamp {datetime.fromtimestamp(target / 1000, UTC).isoformat()} is before the earliest "
                f"available version {first[0]} (committed {when})",
                self.uri,
                earliest=earliest,
                latest=latest_snapshot.version,
            )
        chosen = times[0][0]
        for version, ts in times:
            if ts <= target:
                chosen = version
            else:
                break
        return chosen

    def transaction(
        self, snapshot: Snapshot | None = None, *, read_version: int | None = None, **options: Any
    ) -> Transaction:
        """Start a transaction from ``snapshot`` (or the snapshot at ``read_version``; latest when both are None).

        Options go to `Transaction` (``retry=RetryPolicy(...)``, ``post_commit_hooks=False``).

        Raises:
            VersionNotFound: ``read_version`` is not in the log.
            TransactionError: the snapshot belongs to another table.
        """
        return start_transaction(self.storage, snapshot, read_version, **options)

    def history(self, limit: int | None = None) -> list[dict[str, Any]]:
        """commitInfo of each commit, newest first, with ``version`` filled in."""
        load_log_segment(self.storage, None)  # raises TableNotFound / CorruptLog for a path that is not a table
        return history_entries(self.storage, limit)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.storage!r})"
