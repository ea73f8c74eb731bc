"""A table's state without its files, and its live files and tombstones a batch at a time (`stream_snapshot`).

What a whole-table pass (health, VACUUM, the streamed planner) reads instead of a `Snapshot` that holds every file:
the checkpoint is streamed a batch at a time (`checkpoint_stream`), the commits after it reconciled first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.arrow_util import contiguous
from airflow_provider_deltalite.engine.checkpoint_stream import (
    checkpoint_remove_paths,
    open_checkpoint,
    stream_checkpoint_file_actions,
)
from airflow_provider_deltalite.engine.commit_file import (
    empty_file_actions,
    find_non_file_actions,
    parse_commit_file_actions,
)
from airflow_provider_deltalite.engine.errors import CheckpointUnreadable
from airflow_provider_deltalite.engine.log_segment import load_log_segment
from airflow_provider_deltalite.engine.replay import reconcile_commits
from airflow_provider_deltalite.engine.snapshot import (
    INTERNAL_COLUMNS,
    Snapshot,
    TableState,
    fold_non_file,
    load_snapshot,
    partition_physical_union,
    path_normalizer,
    read_commits,
    table_state,
)
from airflow_provider_deltalite.engine.storage import Storage

# `Snapshot.pruned_by` of the snapshot a `ReplayStream` carries: it holds no file, its files come in batches.
STREAMED = "<files streamed>"


@dataclass
class ReplayStream:
    """A table's state without its files (`snapshot`: protocol, metadata, schema, properties, domains, txns; it holds
    no file and is never checkpointed), and its live files and tombstones a batch at a time (`batches`).

    What a whole-table aggregation (health) needs: memory follows a batch, not the table. The commits after the
    checkpoint are reconciled first, so each checkpoint batch arrives without the rows they supersede; their own
    surviving actions come last.
    """

    snapshot: Snapshot
    _batches: Callable[[], Iterator[tuple[pa.Table, pa.Table]]]
    _removed_paths: Callable[[], pa.Array]

    def removed_paths(self) -> pa.Array:
        """The path of every remove the checkpoint and the commits hold (a superset of the tombstones' paths; the
        checkpoint's ``remove.path`` column alone is read): what tells, while live files stream by, which of them
        share a path with a tombstone (a file kept with a new deletion vector)."""
        return self._removed_paths()

    def batches(self) -> Iterator[tuple[pa.Table, pa.Table]]:
        """(live adds, tombstones) per batch, in `Snapshot.raw_files` / `Snapshot.tombstones` layout."""
        for adds, removes in self._batches():
            yield adds.drop_columns(list(INTERNAL_COLUMNS)), removes.drop_columns(list(INTERNAL_COLUMNS))


def stream_snapshot(
    storage: Storage, version: int | None = None, *, file_fields: Iterable[str] | None = None
) -> ReplayStream:
    """The table at ``version`` (None: latest) as a `ReplayStream` (of the file actions only ``file_fields`` besides
    the keys, when given). A checkpoint that cannot be opened falls back as `load_snapshot` does, to a replay held
    in memory and handed out as one batch.

    Raises:
        TableNotFound, VersionNotFound, CorruptLog, ProtocolNotSupported: as `load_snapshot`.
        CheckpointUnreadable: from `batches`, when a checkpoint part turns out unreadable while it is read.
    """
    fields = frozenset(file_fields) if file_fields is not None else None
    segment = load_log_segment(storage, version)
    uri = storage.table_uri
    try:
        sources = open_checkpoint(storage, segment.checkpoint) if segment.checkpoint else None
    except CheckpointUnreadable:
        whole = load_snapshot(storage, segment.version, file_fields=fields)
        state = whole._state
        held = (state.live, state.tombstones)
        stones = state.tombstones.column("path")
        return ReplayStream(_without_files(storage, state), lambda: iter([held]), lambda: contiguous(stones))
    contents = read_commits(storage, segment.commits)
    non_file = (sources.non_file if sources else []) + find_non_file_actions(contents, uri)
    folded = fold_non_file(non_file, segment, uri)
    partition_columns = partition_physical_union(non_file, uri)
    adds, removes = parse_commit_file_actions(contents, partition_columns, uri)
    live, tombstones, superseded = reconcile_commits(adds, removes, path_normalizer(storage))
    empty = empty_file_actions(partition_columns)
    state = table_state(folded, *empty, segment, tuple(partition_columns), pruned_by=STREAMED, file_fields=fields)

    def batches() -> Iterator[tuple[pa.Table, pa.Table]]:
        if sources is not None:
            yield from stream_checkpoint_file_actions(storage, sources, partition_columns, superseded, fields)
        yield live, tombstones

    def removed_paths() -> pa.Array:
        paths = [pc.cast(contiguous(removes.column("path")), pa.string())]
        if sources is not None:
            paths.append(checkpoint_remove_paths(storage, sources))
        return pa.concat_arrays(paths)

    return ReplayStream(Snapshot(storage, state), batches, removed_paths)


def _without_files(storage: Storage, state: TableState) -> Snapshot:
    live, tombstones = empty_file_actions(list(state.partition_union))
    return Snapshot(storage, replace(state, live=live, tombstones=tombstones, pruned_by=STREAMED))
