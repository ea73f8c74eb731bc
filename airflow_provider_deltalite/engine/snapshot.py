"""A table at one version: protocol, metadata, schema, properties, live files and tombstones."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pyarrow as pa

from airflow_provider_deltalite.engine import actions as A
from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.arrow_util import contiguous
from airflow_provider_deltalite.engine.checkpoint_reader import read_checkpoint
from airflow_provider_deltalite.engine.column_mapping import column_mapping_mode, physical_name
from airflow_provider_deltalite.engine.commit_file import (
    NonFileAction,
    clean_commit_bytes,
    empty_file_actions,
    find_non_file_actions,
    parse_commit_file_actions,
)
from airflow_provider_deltalite.engine.conform import delta_schema_to_arrow
from airflow_provider_deltalite.engine.errors import CheckpointUnreadable, CorruptLog, InvalidArgument
from airflow_provider_deltalite.engine.features import ProtocolView, ensure_readable
from airflow_provider_deltalite.engine.history import commit_timestamp
from airflow_provider_deltalite.engine.log_path import LogFileKind
from airflow_provider_deltalite.engine.log_segment import (
    LogFile,
    LogSegment,
    build_log_segment,
    list_log,
    load_log_segment,
)
from airflow_provider_deltalite.engine.partition_filter import BoundPartitionFilter, PartitionFilter
from airflow_provider_deltalite.engine.partition_values import parse_partition_values
from airflow_provider_deltalite.engine.properties import (
    TableProperties,
)
from airflow_provider_deltalite.engine.replay import latest_non_file_state, reconcile
from airflow_provider_deltalite.engine.schema import parse_schema_string
from airflow_provider_deltalite.engine.storage import Storage

# Columns replay adds to file actions (the version and position of each action), dropped before a batch is handed out.
INTERNAL_COLUMNS = ("_version", "_seq")


@dataclass(frozen=True)
class TableState:
    """The reconciled result of replaying a log segment (everything a Snapshot is built from)."""

    version: int
    protocol: dict[str, Any]
    metadata: dict[str, Any]
    txn: dict[str, dict[str, Any]]
    domain_metadata: dict[str, dict[str, Any]]
    commit_infos: dict[int, dict[str, Any]]
    live: pa.Table
    tombstones: pa.Table
    segment: LogSegment
    # physical partition column names of every metaData replay met: the partition values parsed from file actions
    partition_union: tuple[str, ...] = ()
    # the partition predicate replay kept files by (None: every live file and tombstone of the table)
    pruned_by: str | None = None
    # the file-action fields replay read besides the key fields (None: all of them)
    file_fields: frozenset[str] | None = None


class Snapshot:
    """The state of a Delta table at one version.

    Build it with ``DeltaTable(uri).snapshot(version=None, timestamp=None)``.

    Example:
        >>> snap = DeltaTable("/data/events").snapshot()  # doctest: +SKIP
        >>> snap.version, snap.num_files, snap.partition_columns  # doctest: +SKIP
        (12, 40, ['date'])
    """

    def __init__(self, storage: Storage, state: TableState) -> None:
        self._storage = storage
        self._state = state
        self.table_uri = storage.table_uri
        self.version = state.version
        self.protocol = ProtocolView.from_action(state.protocol, storage.table_uri)
        self.metadata = state.metadata
        self.properties = TableProperties(state.metadata.get("configuration") or {}, self.table_uri)
        # A metaData without schemaString (seen in test tables) describes no columns; treat it as an empty schema.
        schema_string = state.metadata.get("schemaString") or '{"type":"struct","fields":[]}'
        self.schema = parse_schema_string(schema_string, table_uri=self.table_uri)
        self.column_mapping_mode = column_mapping_mode(self.properties.explicit)
        self.partition_columns: list[str] = list(state.metadata.get("partitionColumns") or [])
        fields = {f["name"]: f for f in self.schema["fields"]}
        missing = [c for c in self.partition_columns if c not in fields]
        if missing:
            raise CorruptLog(f"partition column '{missing[0]}' is not in the table schema", self.table_uri)
        self._partition_fields = [fields[c] for c in self.partition_columns]
        self.partition_physical_names = [physical_name(f, self.column_mapping_mode) for f in self._partition_fields]
        self.app_transactions = state.txn
        self.domain_metadata = state.domain_metadata

    @property
    def storage(self) -> Storage:
        """The storage of the table this snapshot belongs to."""
        return self._storage

    @property
    def pruned_by(self) -> str | None:
        """The partition predicate this snapshot was loaded with, or None for the whole table.

        A pruned snapshot holds only the live files (and tombstones) of the partitions the predicate may select:
        enough to plan and commit a rewrite of those partitions, never to checkpoint the table or to decide what
        VACUUM may delete.
        """
        return self._state.pruned_by

    @property
    def file_fields(self) -> frozenset[str] | None:
        """The fields of the file actions this snapshot holds besides path, deletion vector and partition values,
        or None for all of them. The others are null: a snapshot loaded for `describe` or VACUUM has no statistics,
        and is never checkpointed."""
        return self._state.file_fields

    def _require(self, field: str) -> None:
        fields = self._state.file_fields
        if fields is not None and field not in fields:
            raise InvalidArgument(
                f"this snapshot was loaded without the files' {field} (fields: {', '.join(sorted(fields))})",
                self.table_uri,
            )

    @property
    def segment(self) -> LogSegment:
        """The log files this snapshot was replayed from."""
        return self._state.segment

    # -- schema -----------------------------------------------------------------------------------------

    @cached_property
    def arrow_schema(self) -> pa.Schema:
        """The logical Arrow schema of the table's rows (partition columns included, in schema order)."""
        return delta_schema_to_arrow(self.schema)

    @cached_property
    def data_schema(self) -> pa.Schema:
        """The logical Arrow schema of the columns stored in data files (partition columns excluded)."""
        return delta_schema_to_arrow(self.schema, exclude=self.partition_columns)

    @property
    def table_id(self) -> str | None:
        """The table's `metaData.id`."""
        return self.metadata.get("id")

    # -- files ------------------------------------------------------------------------------------------

    @cached_property
    def raw_files(self) -> pa.Table:
        """Live `add` actions as replayed (raw partition value strings keyed by physical name, stats as JSON)."""
        return self._state.live.drop_columns(list(INTERNAL_COLUMNS))

    @cached_property
    def partition_values(self) -> pa.Table:
        """Typed partition values of each live file, one column per partition column (logical names)."""
        raw = contiguous(self.raw_files.column("partitionValues"))
        columns = {}
        for field, physical in zip(self._partition_fields, self.partition_physical_names, strict=True):
            columns[field["name"]] = parse_partition_values(
                raw.field(physical), field["type"], column=field["name"], table_uri=self.table_uri
            )
        if not columns:  # keep the row count: a table without columns still has one row per file
            return pa.table({"_": pa.nulls(len(raw))}).drop_columns(["_"])
        return pa.table(columns)

    @cached_property
    def stats(self) -> pa.StructArray:
        """Parsed per-file statistics (numRecords, tightBounds, minValues, maxValues, nullCount; logical names)."""
        return self._parse_stats(self.data_schema)

    def stats_for(self, schema: pa.Schema) -> pa.StructArray:
        """The statistics of the columns of ``schema`` only (a part of the data schema), parsed for this call: at a
        million files, parsing the few columns a caller needs costs a fraction of `stats`. When `stats` was parsed
        already, it is returned (its columns include those of ``schema``)."""
        if "stats" in self.__dict__:  # the cached_property ran
            return self.stats
        return self._parse_stats(schema)

    def num_records(self) -> pa.Array:
        """numRecords of each live file (null without statistics), without parsing the rest of the statistics
        unless `stats` was parsed already."""
        if "stats" in self.__dict__:
            return contiguous(self.stats.field("numRecords"))
        from airflow_provider_deltalite.engine.stats_parse import record_counts  # see `parse_file_stats`

        self._require("stats")
        return record_counts(contiguous(self.raw_files.column("stats")), self.table_uri)

    def _parse_stats(self, schema: pa.Schema) -> pa.StructArray:
        self._require("stats")
        return self.parse_file_stats(contiguous(self.raw_files.column("stats")), schema)

    def parse_file_stats(self, raw: pa.Array, schema: pa.Schema) -> pa.StructArray:
        """Parse the JSON statistics ``raw`` of some of this table's files (a batch of a `ReplayStream`) for the
        columns of ``schema`` (a part of the data schema), with this table's physical names."""
        # the statistics parser is loaded by the first caller: a compaction of files without deletion vectors, for
        # one, never parses a statistic
        from airflow_provider_deltalite.engine.stats_parse import parse_stats

        names = {
            f["name"]: physical_name(f, self.column_mapping_mode)
            for f in self.schema["fields"]
            if f["name"] not in self.partition_columns
        }
        return parse_stats(raw, schema, physical_names=names, table_uri=self.table_uri)

    @cached_property
    def files(self) -> pa.Table:
        """Live files as an Arrow table.

        Columns: path (as written in the log), size, modificationTime, dataChange, partitionValues (raw strings keyed by
        physical name), partition (typed, logical names), stats (JSON as written), stats_parsed, numRecords,
        deletionVector, tags, baseRowId, defaultRowCommitVersion, clusteringProvider.
        """
        raw = self.raw_files
        stats = self.stats
        partition = self.partition_values
        partition_struct = (
            pa.StructArray.from_arrays([contiguous(c) for c in partition.columns], names=partition.column_names)
            if partition.num_columns
            else pa.array([{}] * raw.num_rows, pa.struct([]))
        )
        table = raw.append_column("partition", partition_struct)
        table = table.append_column("stats_parsed", stats)
        return table.append_column("numRecords", stats.field("numRecords"))

    @property
    def tombstones(self) -> pa.Table:
        """Surviving `remove` actions (what VACUUM must still protect until they expire)."""
        return self._state.tombstones.drop_columns(list(INTERNAL_COLUMNS))

    @property
    def num_files(self) -> int:
        return self._state.live.num_rows

    @property
    def size_in_bytes(self) -> int:
        sizes = self._state.live.column("size")
        return int(pc.sum(sizes).as_py() or 0)

    # -- commit info ------------------------------------------------------------------------------------

    @property
    def commit_info(self) -> dict[str, Any] | None:
        """The commitInfo of this version, when its commit file was read."""
        return self._state.commit_infos.get(self.version)

    @property
    def commit_infos(self) -> dict[int, dict[str, Any]]:
        """The commitInfo actions replay read, by version: those of the commits after the checkpoint."""
        return self._state.commit_infos

    @cached_property
    def timestamp(self) -> int:
        """The version's timestamp in ms: the in-commit timestamp when the table enables them, else the file time."""
        return commit_timestamp(
            self._storage, self._state.segment, self.version, self.properties, self._state.commit_infos
        )

    def __repr__(self) -> str:
        return f"Snapshot(table={self.table_uri!r}, version={self.version}, files={self.num_files})"


def partition_physical_union(actions: Sequence[NonFileAction], table_uri: str | None) -> list[str]:
    """The physical names of every partition column any metaData in ``actions`` declares, in first-seen order."""
    names: dict[str, None] = {}
    for action in actions:
        if action.name != A.METADATA:
            continue
        meta = action.value
        try:
            schema = parse_schema_string(meta.get("schemaString") or '{"fields":[]}', table_uri=table_uri)
        except Exception:
            schema = {"fields": []}
        mode = column_mapping_mode(meta.get("configuration") or {})
        fields = {f["name"]: f for f in schema.get("fields", [])}
        for col in meta.get("partitionColumns") or []:
            names[physical_name(fields[col], mode) if col in fields else col] = None
    return list(names)


def read_commits(storage: Storage, commits: Sequence[LogFile]) -> list[tuple[int, bytes]]:
    """(version, cleaned bytes) of each of ``commits``; CorruptLog when one disappeared or is empty."""
    uri = storage.table_uri
    try:
        raw = storage.read_many([c.path for c in commits])
    except FileNotFoundError:
        raise CorruptLog("a commit file disappeared while reading the log", uri) from None
    contents = [(c.version, clean_commit_bytes(d)) for c, d in zip(commits, raw, strict=True)]
    empty = [c.version for c, (_, d) in zip(commits, contents, strict=True) if not d.strip()]
    if empty:
        raise CorruptLog(f"commit {empty[0]} is an empty file", uri)
    return contents


def fold_non_file(non_file: list[NonFileAction], segment: LogSegment, uri: str) -> dict[str, Any]:
    """The latest protocol, metaData, txns, domains and commitInfos; refuses a log without a protocol or metaData
    and a protocol this engine cannot read."""
    state = latest_non_file_state(non_file)
    if state["protocol"] is None:
        raise CorruptLog(f"no protocol action found up to version {segment.version}", uri)
    ensure_readable(ProtocolView.from_action(state["protocol"], uri), uri)
    if state["metaData"] is None:
        raise CorruptLog(f"no metaData action found up to version {segment.version}", uri)
    return state


def replay_segment(
    storage: Storage,
    segment: LogSegment,
    partition_filter: PartitionFilter | None = None,
    file_fields: frozenset[str] | None = None,
) -> TableState:
    """Read and reconcile every file of a segment into a TableState (only the partitions ``partition_filter``
    selects, and of the checkpoint's file actions only ``file_fields`` besides the keys, when given)."""
    if partition_filter is not None:
        return _replay_pruned(storage, segment, partition_filter, file_fields)
    uri = storage.table_uri
    checkpoint = read_checkpoint(storage, segment.checkpoint, file_fields) if segment.checkpoint else None
    contents = read_commits(storage, segment.commits)
    non_file = (checkpoint.non_file if checkpoint else []) + find_non_file_actions(contents, uri)
    state = fold_non_file(non_file, segment, uri)
    partition_columns = partition_physical_union(non_file, uri)
    adds, removes = parse_commit_file_actions(contents, partition_columns, uri)
    live, tombstones = reconcile(adds, removes, path_normalizer(storage), checkpoint, partition_columns, uri)
    return table_state(state, live, tombstones, segment, tuple(partition_columns), file_fields=file_fields)


def _replay_pruned(
    storage: Storage, segment: LogSegment, partition_filter: PartitionFilter, file_fields: frozenset[str] | None
) -> TableState:
    """Replay keeping only the files of the partitions the filter selects (`checkpoint_stream`).

    The commits after the checkpoint are parsed whole and reconciled as in a full replay (their keys decide what the
    checkpoint's rows lose), and only the result is cut to the selected partitions; the checkpoint is read part by
    part, its rows of other partitions dropped before they are conformed.
    """
    # the streamed checkpoint reader: loaded by the replays that prune, not by every process that opens a table
    from airflow_provider_deltalite.engine.checkpoint_stream import open_checkpoint, pruned_checkpoint_file_actions

    uri = storage.table_uri
    sources = open_checkpoint(storage, segment.checkpoint) if segment.checkpoint else None
    contents = read_commits(storage, segment.commits)
    non_file = (sources.non_file if sources else []) + find_non_file_actions(contents, uri)
    state = fold_non_file(non_file, segment, uri)
    keep = partition_filter.bind(state["metaData"], uri)
    partition_columns = partition_physical_union(non_file, uri)
    adds, removes = parse_commit_file_actions(contents, partition_columns, uri)

    def base_rows(superseded):
        if sources is None:
            return empty_file_actions(partition_columns)
        return pruned_checkpoint_file_actions(storage, sources, partition_columns, keep, superseded, file_fields)

    live, tombstones = reconcile(
        adds, removes, path_normalizer(storage), None, partition_columns, uri, base_rows=base_rows
    )
    live = in_partitions(live, keep)
    tombstones = in_partitions(tombstones, keep)
    return table_state(
        state,
        live,
        tombstones,
        segment,
        tuple(partition_columns),
        pruned_by=partition_filter.predicate,
        file_fields=file_fields,
    )


def in_partitions(rows: pa.Table, keep: BoundPartitionFilter) -> pa.Table:
    """The file actions of ``rows`` whose partition values the filter selects."""
    if not rows.num_rows:
        return rows
    mask = keep.mask_struct(rows.column("partitionValues"))
    return rows if mask.all() else pc.filter(rows, pa.array(mask))


def table_state(
    folded: dict[str, Any],
    live: pa.Table,
    tombstones: pa.Table,
    segment: LogSegment,
    partition_union: tuple[str, ...],
    pruned_by: str | None = None,
    file_fields: frozenset[str] | None = None,
) -> TableState:
    """A TableState from `latest_non_file_state`'s folded actions and the reconciled file actions."""
    return TableState(
        version=segment.version,
        protocol=folded["protocol"],
        metadata=folded["metaData"],
        txn=folded["txn"],
        domain_metadata=folded["domainMetadata"],
        commit_infos=folded["commitInfo"],
        live=live,
        tombstones=tombstones,
        segment=segment,
        partition_union=partition_union,
        pruned_by=pruned_by,
        file_fields=file_fields,
    )


def path_normalizer(storage: Storage) -> Callable[[str], str]:
    """A log path as replay keys it: relative to the table root when it lies under it, else the full path."""

    def normalize(path: str) -> str:
        try:
            return storage.path_key(path)
        except ValueError as exc:  # urllib's parser: "s3://[bucket/x" (an unclosed IPv6 host) and the like
            shown = path if len(path) <= 200 else f"{path[:200]}..."
            raise CorruptLog(
                f"the log names a data file by an invalid URI {shown!r}: {exc}", storage.table_uri
            ) from None

    return normalize


def load_snapshot(
    storage: Storage,
    version: int | None = None,
    *,
    partition_filter: PartitionFilter | None = None,
    file_fields: Iterable[str] | None = None,
) -> Snapshot:
    """Build the snapshot of ``version`` (None: latest), falling back to older checkpoints when one is unreadable.

    With ``partition_filter`` only the files of the partitions it may select are kept (`Snapshot.pruned_by`): memory
    and time then follow those partitions, not the table. With ``file_fields`` (e.g. ``("size",)``) only those
    fields of the file actions are read besides path, deletion vector and partition values (`Snapshot.file_fields`):
    statistics, the largest of them, stay unread unless named.

    Raises:
        InvalidExpression: the filter's predicate does not parse or names a column it may not.
    """
    fields = frozenset(file_fields) if file_fields is not None else None
    segment = load_log_segment(storage, version)
    bad: set[int] = set()
    reason = ""
    while True:
        try:
            return Snapshot(storage, replay_segment(storage, segment, partition_filter, fields))
        except CheckpointUnreadable as unreadable:
            if segment.checkpoint is None or segment.checkpoint.version in bad:
                raise
            bad.add(segment.checkpoint.version)
            reason = reason or unreadable.problem
            files = [
                f
                for f in list_log(storage, 0)
                if not (f.version in bad and f.parsed.kind not in (LogFileKind.COMMIT, LogFileKind.CRC))
            ]
            try:
                segment = build_log_segment(files, segment.version, storage.table_uri)
            except CorruptLog as exc:
                raise CorruptLog(
                    f"checkpoint {min(bad)} is unreadable and no older checkpoint or full log can replace it "
                    f"({reason}; {exc.problem})",
                    storage.table_uri,
                ) from None


__all__ = [
    "PartitionFilter",
    "Snapshot",
    "TableState",
    "load_snapshot",
]
