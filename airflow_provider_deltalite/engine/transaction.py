"""Optimistic transactions: read a snapshot, stage actions, commit `<readVersion + 1>.json` create-only.

A commit is a put-if-absent of the next version. Losing that race is normal with several writers: the transaction then
reads every commit that won since its read version, checks each against what it read and changes
(`engine/conflicts.py`), and, when none conflicts, retries at the next free version after a jittered backoff. It never
overwrites a log entry, and a retry whose earlier attempt did land (the response was lost) is recognised by its
`txnId` instead of committing twice.

On a table with row tracking, each attempt gives the new files fresh row ids above the high-water mark known then
(the read snapshot's, or a winner's) and ``defaultRowCommitVersion`` = the version it tries, and moves the mark in
the same commit (`engine/row_tracking.py`).

What a commit checks before it writes (staged actions, the retention of new files) is `engine/commit_guard.py`; the
add and remove dicts it stages are built with `engine/file_actions.py`.

Example:
    >>> table = DeltaTable("/data/events")  # doctest: +SKIP
    >>> txn = table.transaction()  # doctest: +SKIP
    >>> txn.read_files(paths)  # doctest: +SKIP
    >>> txn.remove(...); txn.add(...)  # doctest: +SKIP
    >>> txn.commit("OPTIMIZE", {"predicate": [], "auto": False}, metrics)  # doctest: +SKIP
    8
"""

from __future__ import annotations

import functools
import json
import logging
import random
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import pyarrow as pa

from airflow_provider_deltalite.engine import actions as A
from airflow_provider_deltalite.engine.commit_guard import ensure_files_outlive_vacuum, validate_staged_actions
from airflow_provider_deltalite.engine.commit_info import SERIALIZABLE, SNAPSHOT_ISOLATION, build_commit_info
from airflow_provider_deltalite.engine.conflicts import (
    OwnChanges,
    ReadSet,
    WinningCommit,
    check_winning_commit,
    parse_winning_commit,
)
from airflow_provider_deltalite.engine.errors import (
    CommitRetriesExhausted,
    DeltaLiteError,
    StorageError,
    TransactionError,
)
from airflow_provider_deltalite.engine.file_actions import dv_key
from airflow_provider_deltalite.engine.history import in_commit_timestamps_enabled
from airflow_provider_deltalite.engine.log_path import LOG_DIR, LogFileKind, version_prefix
from airflow_provider_deltalite.engine.log_segment import list_log
from airflow_provider_deltalite.engine.partition_values import parse_partition_values
from airflow_provider_deltalite.engine.row_tracking import (
    PRESERVED_TAG,
    PriorAdd,
    RowTrackingState,
    assign_row_ids,
    high_water_mark_action,
    row_tracking_state,
    without_row_ids,
)
from airflow_provider_deltalite.engine.snapshot import Snapshot, load_snapshot
from airflow_provider_deltalite.engine.snapshot_advance import advance_snapshot
from airflow_provider_deltalite.engine.storage import Storage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a transaction retries after losing the race for a version.

    Attributes:
        max_attempts: commit attempts in total (each lost race without a conflict costs one).
        base_delay_s: the first backoff ceiling; it doubles per attempt up to ``max_delay_s``, and the actual sleep is
            drawn uniformly below the ceiling ("full jitter"), so competing writers spread out.
        max_delay_s: the largest backoff ceiling.

    A storage fault while writing a version is not this policy's business: `Storage` retries every request under its
    own `StorageRetryPolicy` (storage options ``deltalite_retry_*``), the conditional commit write included.
    """

    max_attempts: int = 100
    base_delay_s: float = 0.02
    max_delay_s: float = 1.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.base_delay_s < 0 or self.max_delay_s < 0:
            raise ValueError("RetryPolicy needs max_attempts >= 1 and non-negative delays")

    def delay(self, attempt: int) -> float:
        return random.uniform(0, min(self.max_delay_s, self.base_delay_s * (2**attempt)))


@dataclass(frozen=True)
class CommitResult:
    """The outcome of a commit: the version written and how many attempts it took."""

    version: int
    attempts: int
    txn_id: str
    checkpoint_written: bool = False
    winning_commits: tuple[int, ...] = field(default=())


class Transaction:
    """One optimistic transaction on a table, started from a snapshot.

    Record what the operation read (`read_files`, `read_predicate`, `read_whole_table`, `read_app_transaction`), stage
    actions (`add`, `remove`, `set_app_transaction`, `set_domain_metadata`), then `commit`. A transaction commits at
    most once.

    Raises (from `commit`):
        ConcurrentModification (a subclass naming the winning version and operation): a real conflict.
        CommitRetriesExhausted: other writers kept winning without conflicting until the attempt limit.
        ProtocolNotSupported: the table has a writer feature deltalite does not handle for these actions.
        CreateOnlyNotSupported: the store cannot do put-if-absent and single-writer mode is off.
        TransactionError: invalid staged actions (duplicates, a remove of a file that is not live).
    """

    def __init__(
        self,
        storage: Storage,
        snapshot: Snapshot,
        *,
        retry: RetryPolicy | None = None,
        post_commit_hooks: bool = True,
    ) -> None:
        if snapshot.storage.table_uri != storage.table_uri:
            raise TransactionError(f"the snapshot belongs to another table ({snapshot.table_uri})", storage.table_uri)
        self.storage = storage
        self.snapshot = snapshot
        self.read_version = snapshot.version
        self.retry = retry or RetryPolicy()
        self.post_commit_hooks = post_commit_hooks
        self.txn_id = str(uuid.uuid4())
        self._read = ReadSet()
        self._adds: list[dict[str, Any]] = []
        self._removes: list[dict[str, Any]] = []
        self._txns: dict[str, dict[str, Any]] = {}
        self._domains: dict[str, dict[str, Any]] = {}
        self._committed: CommitResult | None = None
        # the key of a staged or read path, kept: each is keyed three to four times (read set, validation, conflicts,
        # vacuum guard), 12 ms of a 400-file compaction's commit uncached; the snapshot's paths are keyed uncached
        self._resolve: Callable[[str], str] = functools.cache(self.storage.path_key)

    @property
    def table_uri(self) -> str:
        return self.storage.table_uri

    # -- what was read -------------------------------------------------------------------------------------

    def read_files(self, paths: Iterable[str]) -> None:
        """Record files this transaction read or rewrites (paths as written in the log)."""
        self._read.files.update(self._resolve(p) for p in paths)

    def read_whole_table(self) -> None:
        """Record a read of the whole table (any concurrent add or remove then conflicts for data changes)."""
        self._read.whole_table = True

    def read_predicate(self, predicate: str | None) -> None:
        """Record a read of the rows matching ``predicate``; None or a predicate on data columns reads the whole table.

        Only partition columns narrow what concurrent adds can conflict with.
        """
        if not predicate:
            self.read_whole_table()
            return
        # imported by the transactions that read a predicate: the expression modules are 15-20 ms of a short command
        from airflow_provider_deltalite.engine.expressions import bind, expression_columns, parse_expression

        expr = bind(parse_expression(predicate), self.snapshot.arrow_schema)
        referenced = expression_columns(expr)
        if not referenced <= set(self.snapshot.partition_columns):
            self.read_whole_table()
            return
        self._read.predicates.append(self._partition_matcher(expr))

    def read_app_transaction(self, app_id: str) -> int | None:
        """The last committed version of application ``app_id`` (idempotent writers), recorded as read."""
        self._read.app_ids.add(app_id)
        txn = self.snapshot.app_transactions.get(app_id)
        # The protocol requires txn.version (a long); int() still rejects what a malformed log holds instead.
        return None if txn is None else int(cast(int, txn.get("version")))

    # -- staging -----------------------------------------------------------------------------------------

    def add(self, action: Mapping[str, Any]) -> None:
        """Stage an add action (a dict as it will appear in the log)."""
        self._ensure_open()
        if not isinstance(action.get("path"), str) or "size" not in action:
            raise TransactionError("an add needs a path and a size", self.table_uri)
        staged = dict(action)
        staged.setdefault("partitionValues", {})
        staged.setdefault("dataChange", True)
        staged.setdefault("modificationTime", int(time.time() * 1000))
        self._adds.append(staged)

    def remove(self, action: Mapping[str, Any]) -> None:
        """Stage a remove action; build it with `remove_from_add` so it carries the live deletion vector."""
        self._ensure_open()
        if not isinstance(action.get("path"), str):
            raise TransactionError("a remove needs a path", self.table_uri)
        self._removes.append(dict(action))

    def set_app_transaction(self, app_id: str, version: int) -> None:
        """Stage `txn{appId, version}` (idempotent writers record their progress with it)."""
        self._ensure_open()
        self._txns[app_id] = {"appId": app_id, "version": int(version), "lastUpdated": int(time.time() * 1000)}

    def set_domain_metadata(self, domain: str, configuration: str, removed: bool = False) -> None:
        """Stage a domainMetadata action; `delta.*` domains belong to the protocol and are refused."""
        self._ensure_open()
        if domain.startswith("delta."):
            raise TransactionError(f"domain '{domain}' is reserved for the Delta protocol", self.table_uri)
        self._domains[domain] = {"domain": domain, "configuration": configuration, "removed": removed}

    # -- commit ------------------------------------------------------------------------------------------

    def commit(
        self,
        operation: str,
        parameters: Mapping[str, Any] | None = None,
        metrics: Mapping[str, Any] | None = None,
        *,
        tags: Mapping[str, str] | None = None,
    ) -> CommitResult:
        """Validate, then write the next version create-only, retrying past non-conflicting winners."""
        self._ensure_open()
        validate_staged_actions(self.snapshot, self._adds, self._removes, self._resolve)
        data_change = any(a.get("dataChange", True) for a in [*self._adds, *self._removes])
        isolation = SNAPSHOT_ISOLATION if not data_change and not self._txns and not self._domains else SERIALIZABLE
        blind = (
            bool(self._adds)
            and not self._removes
            and data_change
            and not self._read.files
            and not self._read.predicates
            and not self._read.whole_table
        )
        own = OwnChanges(
            isolation_level=isolation,
            is_blind_append=blind,
            removed_files={self._resolve(r["path"]) for r in self._removes},
            changes_metadata=False,
            changes_protocol=False,
            app_ids=set(self._txns),
            domains=set(self._domains),
        )
        rows = row_tracking_state(self.snapshot)
        mark = rows.high_water_mark
        if rows.enabled and PRESERVED_TAG not in (tags or {}):
            # as the reference: every commit on an enabled table keeps row ids unless it says otherwise
            tags = {**(tags or {}), PRESERVED_TAG: "true"}
        prior = self._prior_row_ids() if rows.assigns_row_ids and self._adds else None
        ict_enabled = in_commit_timestamps_enabled(self.snapshot.properties, self.read_version + 1)
        previous_ict = self.snapshot.timestamp if ict_enabled else None
        version = self.read_version + 1
        winners: list[int] = []
        attempt = 0
        while True:
            attempt += 1
            now = int(time.time() * 1000)
            ict = max(now, previous_ict + 1) if previous_ict is not None else None
            info = build_commit_info(
                operation=operation,
                parameters=parameters,
                metrics=metrics,
                read_version=self.read_version,
                isolation_level=isolation,
                is_blind_append=blind,
                txn_id=self.txn_id,
                timestamp_ms=ict if ict is not None else now,
                in_commit_timestamp_ms=ict,
                tags=tags,
            )
            body = self._serialize(info, *self._row_tracked_adds(rows, prior, mark, version))
            ensure_files_outlive_vacuum(self.snapshot, self._adds, now, self._resolve)
            if self._write_version(version, body):
                return self._finish(version, attempt, winners)
            # Lost the race (or an earlier attempt of ours landed): look at every commit since the last one checked.
            latest = self._latest_version(version)
            in_flight = False
            for v, winner in zip(range(version, latest + 1), self._read_winners(version, latest), strict=True):
                if winner is None:
                    # The name was taken but holds nothing yet: a concurrent put-if-absent still in flight (S3 answers
                    # 409 ConditionalRequestConflict) or one that failed. Try this version again.
                    latest = v - 1
                    in_flight = True
                    break
                if winner.txn_id == self.txn_id:
                    return self._finish(v, attempt, winners)
                winners.append(v)
                check_winning_commit(self._read, own, winner, self._resolve, self.table_uri)
                if winner.row_id_high_water_mark is not None:
                    mark = max(mark, winner.row_id_high_water_mark)
                if ict_enabled:
                    winner_ict = (winner.commit_info or {}).get("inCommitTimestamp")
                    if isinstance(winner_ict, int):
                        previous_ict = max(previous_ict or 0, winner_ict)
            version = latest + 1
            if attempt >= self.retry.max_attempts:
                raise CommitRetriesExhausted(
                    f"gave up after {attempt} commit attempts: other writers kept committing first",
                    self.table_uri,
                    winning_version=latest,
                    winning_operation=winner.operation if winner is not None else None,
                )
            # After a lost race the next free version is known: write it at once, as the reference does. Sleeping
            # here only hands it to another writer, and under steady load a transaction that sleeps every round can
            # take longer than the file retention to land (then a concurrent VACUUM may delete its new files).
            if in_flight:
                time.sleep(self.retry.delay(attempt))

    # -- internals ---------------------------------------------------------------------------------------

    def _ensure_open(self) -> None:
        if self._committed is not None:
            raise TransactionError(
                f"this transaction already committed version {self._committed.version}", self.table_uri
            )

    def _prior_row_ids(self) -> PriorAdd:
        """Looks up the live add that a staged add re-adds (same path and deletion vector), for its row ids."""
        wanted = {(self._resolve(a["path"]), dv_key(a)) for a in self._adds}
        raw = self.snapshot.raw_files
        live: dict[tuple[str, str], dict[str, Any]] = {}
        names = ("path", "deletionVector", "baseRowId", "defaultRowCommitVersion")
        columns = [raw.column(c).to_pylist() for c in names]
        for path, dv, base, version in zip(*columns, strict=True):
            key = (self.storage.path_key(path), dv_key({"deletionVector": dv}))
            if key in wanted:
                live[key] = {"baseRowId": base, "defaultRowCommitVersion": version}

        def prior(add: Mapping[str, Any]) -> Mapping[str, Any] | None:
            return live.get((self._resolve(add["path"]), dv_key(add)))

        return prior

    def _row_tracked_adds(
        self, rows: RowTrackingState, prior: PriorAdd | None, mark: int, version: int
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The adds as the attempt at ``version`` writes them, and the row-tracking domain (when the mark moved)."""
        if not rows.supported:
            return self._adds, []
        if not rows.assigns_row_ids:
            return without_row_ids(self._adds), []
        adds, new_mark = assign_row_ids(
            self._adds,
            version=version,
            read_mark=rows.high_water_mark,
            mark=mark,
            prior=prior or (lambda _add: None),
            table_uri=self.table_uri,
        )
        return adds, [high_water_mark_action(new_mark)] if new_mark != mark else []

    def _serialize(self, info: dict[str, Any], adds: list[dict[str, Any]], row_domains: list[dict[str, Any]]) -> bytes:
        lines = [{A.COMMIT_INFO: info}]
        lines.extend({A.TXN: t} for t in self._txns.values())
        lines.extend({A.DOMAIN_METADATA: d} for d in [*row_domains, *self._domains.values()])
        lines.extend({A.REMOVE: r} for r in self._removes)
        lines.extend({A.ADD: a} for a in adds)
        return "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines).encode()

    def _write_version(self, version: int, body: bytes) -> bool:
        """True when this call created the version; False when the name exists (someone, maybe us, wrote it).

        Transient storage faults are retried in one place, `Storage` (its `StorageRetryPolicy`), for the commit write
        as for every request; this method does not loop on top of it, so a fault costs at most ``attempts`` writes,
        not ``attempts`` times some budget of ours. A retried write whose first try landed (the response was lost)
        finds the name taken: FileExistsError, and the caller's txnId check recognises the commit as its own, the one
        mechanism for that case.
        """
        path = f"{LOG_DIR}/{version_prefix(version)}.json"
        try:
            self.storage.write_create_only(path, body)
            return True
        except FileExistsError:
            return False
        except StorageError as exc:
            if type(exc) is not StorageError:  # CreateOnlyNotSupported: nothing was sent
                raise
            # The write failed for good, but its outcome is unknown: a try may have landed before the last one failed.
            # When the version exists now, the caller reads its txnId like any lost race; when it does not, say so.
            try:
                taken = self.storage.exists(path)
            except StorageError:
                raise exc.extended(
                    f"the outcome of writing version {version} is unknown: it holds this commit if its txnId is "
                    f"{self.txn_id}"
                ) from None
            if taken:
                return False
            raise exc.extended(f"version {version} was not written; nothing was committed") from None

    def _latest_version(self, at_least: int) -> int:
        commits = [f.version for f in list_log(self.storage, at_least) if f.parsed.kind is LogFileKind.COMMIT]
        return max([at_least, *commits])

    def _read_winners(self, first: int, last: int) -> list[WinningCommit | None]:
        """The commits ``first..last``, fetched together; where one is missing, read one by one (None from there)."""
        if last < first:
            return []
        paths = [f"{LOG_DIR}/{version_prefix(v)}.json" for v in range(first, last + 1)]
        try:
            bodies = self.storage.read_many(paths)
        except FileNotFoundError:
            winners: list[WinningCommit | None] = []
            for v in range(first, last + 1):
                winners.append(self._read_winner(v))
                if winners[-1] is None:
                    break
            return winners + [None] * (last - first + 1 - len(winners))
        return [parse_winning_commit(v, b, self.table_uri) for v, b in zip(range(first, last + 1), bodies, strict=True)]

    def _read_winner(self, version: int) -> WinningCommit | None:
        """The commit at ``version``, or None when it does not exist (yet) after a few short waits."""
        path = f"{LOG_DIR}/{version_prefix(version)}.json"
        for wait in (0.0, 0.05, 0.2, 0.5):
            time.sleep(wait)
            try:
                data = self.storage.read(path)
            except FileNotFoundError:
                continue
            return parse_winning_commit(version, data, self.table_uri)
        return None

    def _finish(self, version: int, attempts: int, winners: list[int]) -> CommitResult:
        checkpointed = self._post_commit(version) if self.post_commit_hooks else False
        self._committed = CommitResult(version, attempts, self.txn_id, checkpointed, tuple(winners))
        return self._committed

    def _post_commit(self, version: int) -> bool:
        """Checkpoint and clean the log when the interval says so; a failure here never fails the commit."""
        from airflow_provider_deltalite.engine.properties import should_checkpoint

        try:
            if not should_checkpoint(version, self.snapshot.properties):
                return False
            # imported only by a commit that checkpoints: most commits of a short-lived process do not
            from airflow_provider_deltalite.engine.checkpoint_writer import write_checkpoint

            # the state at our commit from the snapshot we started on and the commits since: no second full replay
            snapshot = advance_snapshot(self.snapshot, version) or load_snapshot(self.storage, version)
            write_checkpoint(snapshot)
        except (DeltaLiteError, OSError, ValueError, pa.ArrowException) as exc:
            log.warning("commit %s succeeded, but writing its checkpoint failed: %s", version, exc)
            return False
        from airflow_provider_deltalite.engine.log_cleanup import cleanup_expired_logs

        try:
            cleanup_expired_logs(snapshot)
        except (DeltaLiteError, OSError, ValueError) as exc:
            log.warning("checkpoint %s written, but log cleanup failed: %s", version, exc)
        return True

    def _partition_matcher(self, expr: Any):
        from airflow_provider_deltalite.engine.expressions import may_match_partitions

        snapshot = self.snapshot
        fields = {f["name"]: f for f in snapshot.schema["fields"]}
        names = list(zip(snapshot.partition_columns, snapshot.partition_physical_names, strict=True))

        def matches(partition_values: list[Mapping[str, Any]]) -> list[bool]:
            if not partition_values:
                return []
            columns = {}
            for logical, physical in names:
                raw = pa.array([pv.get(physical) for pv in partition_values], pa.string())
                columns[logical] = parse_partition_values(
                    raw, fields[logical]["type"], column=logical, table_uri=snapshot.table_uri
                )
            mask = may_match_partitions(expr, pa.table(columns))
            return [v is not False for v in mask.to_pylist()]

        return matches


def start_transaction(
    storage: Storage, snapshot: Snapshot | None = None, read_version: int | None = None, **options: Any
) -> Transaction:
    """Open a transaction on ``snapshot``, or on the snapshot at ``read_version`` (latest when both are None)."""
    if snapshot is None:
        snapshot = load_snapshot(storage, read_version)
    elif read_version is not None and read_version != snapshot.version:
        raise TransactionError(
            f"read_version {read_version} does not match the snapshot's version {snapshot.version}", storage.table_uri
        )
    return Transaction(storage, snapshot, **options)
