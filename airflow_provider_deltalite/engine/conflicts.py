"""Conflict rules: does a commit that won the race invalidate this transaction? (pure; no I/O)

The rules follow the reference implementation's ConflictChecker, checked in its order for every winning commit
since the transaction's read version:

1. a protocol change in the winner always conflicts (ProtocolChanged);
2. a metadata change in the winner always conflicts (MetadataChanged);
3. a txn for an appId this transaction read or writes, or a domain both write, conflicts (ConcurrentTransaction);
   ``delta.rowTracking`` has a resolver, as in the reference: a winner's new high-water mark is no conflict, the
   transaction assigns its row ids again above it (`WinningCommit.row_id_high_water_mark`);
4. added files: skipped for SnapshotIsolation (dataChange=false rewrites) and blind appends; under Serializable any
   winner add inside what this transaction read (its partition predicates, or the whole table) conflicts
   (ConcurrentAppend); like the reference, the winner's dataChange flag does not matter;
5. a winner remove of a file this transaction read, or any winner remove when it read the whole table, conflicts
   (ConcurrentDeleteRead); a remove paired with a new deletion vector for the same path counts;
6. a winner remove of a file this transaction removes conflicts (ConcurrentDeleteDelete).

Files are compared by path (resolved, so relative and absolute spellings agree), not by deletion vector.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from airflow_provider_deltalite.engine import actions as A
from airflow_provider_deltalite.engine.commit_file import clean_commit_bytes, commit_lines
from airflow_provider_deltalite.engine.commit_info import SNAPSHOT_ISOLATION
from airflow_provider_deltalite.engine.errors import (
    ConcurrentAppend,
    ConcurrentDeleteDelete,
    ConcurrentDeleteRead,
    ConcurrentTransaction,
    MetadataChanged,
    ProtocolChanged,
)
from airflow_provider_deltalite.engine.row_tracking import DOMAIN as ROW_TRACKING_DOMAIN
from airflow_provider_deltalite.engine.row_tracking import parse_high_water_mark

# domains whose concurrent changes are resolved rather than conflicting (the reference's DomainMetadata resolvers)
RESOLVED_DOMAINS = frozenset({ROW_TRACKING_DOMAIN})

# decides whether a winner's add (its raw partitionValues) falls inside what the transaction read
PartitionMatcher = Callable[[list[Mapping[str, Any]]], list[bool]]


@dataclass
class ReadSet:
    """What a transaction read: the base of conflict detection.

    Attributes:
        files: resolved paths of the files it read (and rewrites).
        predicates: partition matchers for data it read by predicate.
        whole_table: it read the whole table (any concurrent remove or add is a conflict for data changes).
        app_ids: appIds whose txn version it read.
    """

    files: set[str] = field(default_factory=set)
    predicates: list[PartitionMatcher] = field(default_factory=list)
    whole_table: bool = False
    app_ids: set[str] = field(default_factory=set)


@dataclass
class OwnChanges:
    """What the transaction is about to commit, as far as conflicts go."""

    isolation_level: str
    is_blind_append: bool
    removed_files: set[str]
    changes_metadata: bool
    changes_protocol: bool
    app_ids: set[str]
    domains: set[str]


@dataclass
class WinningCommit:
    """A commit another writer made after the read version, parsed."""

    version: int
    commit_info: dict[str, Any] | None
    adds: list[dict[str, Any]]
    removes: list[dict[str, Any]]
    protocol: dict[str, Any] | None
    metadata: dict[str, Any] | None
    txn_app_ids: set[str]
    domains: set[str]
    row_id_high_water_mark: int | None = None

    @property
    def operation(self) -> str | None:
        return (self.commit_info or {}).get("operation")

    @property
    def txn_id(self) -> str | None:
        return (self.commit_info or {}).get("txnId")


def parse_winning_commit(version: int, data: bytes, table_uri: str | None) -> WinningCommit:
    """Parse a whole commit file into the parts conflict checking needs.

    Raises:
        CorruptLog: a line is not valid JSON or not a JSON object (see `commit_file`).
    """
    commit_info = None
    adds: list[dict] = []
    removes: list[dict] = []
    protocol = metadata = None
    app_ids: set[str] = set()
    domains: set[str] = set()
    mark = None
    for _line_no, obj in commit_lines(version, clean_commit_bytes(data), table_uri):
        for name, value in obj.items():
            if not isinstance(value, dict):
                continue
            if name == A.ADD:
                adds.append(value)
            elif name == A.REMOVE:
                removes.append(value)
            elif name == A.COMMIT_INFO and commit_info is None:
                commit_info = value
            elif name == A.PROTOCOL:
                protocol = value
            elif name == A.METADATA:
                metadata = value
            elif name == A.TXN and isinstance(value.get("appId"), str):
                app_ids.add(value["appId"])
            elif name == A.DOMAIN_METADATA and isinstance(value.get("domain"), str):
                domains.add(value["domain"])
                if value["domain"] == ROW_TRACKING_DOMAIN and not value.get("removed"):
                    mark = parse_high_water_mark(value.get("configuration"), table_uri)
    return WinningCommit(version, commit_info, adds, removes, protocol, metadata, app_ids, domains, mark)


class _WinnerDetails(TypedDict):
    """The keyword arguments every ConcurrentModification raised here carries."""

    winning_version: int
    winning_operation: str | None


def check_winning_commit(
    read: ReadSet,
    own: OwnChanges,
    winner: WinningCommit,
    resolve: Callable[[str], str],
    table_uri: str | None,
) -> None:
    """Raise the typed ConcurrentModification the reference would raise, or return when the commits are compatible.

    ``resolve`` turns a path as written in the log into the key the read set uses.
    """
    where: _WinnerDetails = {"winning_version": winner.version, "winning_operation": winner.operation}
    if winner.protocol is not None:
        raise ProtocolChanged("the protocol changed since this transaction read the table", table_uri, **where)
    if winner.metadata is not None:
        raise MetadataChanged("the table metadata changed since this transaction read it", table_uri, **where)
    clash = sorted(winner.txn_app_ids & (read.app_ids | own.app_ids))
    if clash:
        raise ConcurrentTransaction(
            f"another commit wrote a transaction for application '{clash[0]}'", table_uri, **where
        )
    domain_clash = sorted((winner.domains & own.domains) - RESOLVED_DOMAINS)
    if domain_clash:
        raise ConcurrentTransaction(f"another commit changed domain '{domain_clash[0]}'", table_uri, **where)
    if own.isolation_level != SNAPSHOT_ISOLATION and not own.is_blind_append and winner.adds:
        if read.whole_table:
            raise ConcurrentAppend("files were added to the table this transaction read", table_uri, **where)
        for matcher in read.predicates:
            hits = matcher([a.get("partitionValues") or {} for a in winner.adds])
            if any(hits):
                raise ConcurrentAppend("files were added to partitions this transaction read", table_uri, **where)
    removed = [resolve(r["path"]) for r in winner.removes if isinstance(r.get("path"), str)]
    if removed and read.whole_table:
        raise ConcurrentDeleteRead("files were removed from the table this transaction read", table_uri, **where)
    read_hit = _first(p for p in removed if p in read.files)
    if read_hit is not None:
        raise ConcurrentDeleteRead(f"a file this transaction read was removed: {read_hit}", table_uri, **where)
    delete_hit = _first(p for p in removed if p in own.removed_files)
    if delete_hit is not None:
        raise ConcurrentDeleteDelete(
            f"a file this transaction removes was already removed: {delete_hit}", table_uri, **where
        )


def _first(values: Iterable[str]) -> str | None:
    return next(iter(values), None)
