"""A whole-table aggregation (health, the planner's first pass) whose checkpoint is read by independent tasks: the
slices of `checkpoint_tasks`, streamed by the tasks instead of pruned.

`stream_with_tasks` lists the log and runs a first round (`read_slice_first`) that reads each slice's non-file
actions and its removes' paths; it reads the commits after the checkpoint itself. The caller's own task function then
streams a slice (`stream_slice`: the batches `snapshot_stream.stream_snapshot` would yield for it, without the rows the
commits supersede) and returns its sums, which the caller merges in slice order with the commits' own actions
(`TaskStream.tail`; `maintenance.health.task_sums`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import pyarrow as pa

from airflow_provider_deltalite.engine import actions as A
from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.arrow_util import contiguous
from airflow_provider_deltalite.engine.checkpoint_stream import (
    SEQ_BASE,
    SEQ_STRIDE,
    checkpoint_file_batches,
    open_checkpoint_part,
)
from airflow_provider_deltalite.engine.checkpoint_tasks import (
    CheckpointSlice,
    CheckpointTaskRunner,
    R,
    checkpoint_for_tasks,
    read_slice_non_file,
    superseded_by,
    touched_keys,
)
from airflow_provider_deltalite.engine.commit_file import (
    NonFileAction,
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
    fold_non_file,
    partition_physical_union,
    path_normalizer,
    read_commits,
    table_state,
)
from airflow_provider_deltalite.engine.snapshot_stream import STREAMED
from airflow_provider_deltalite.engine.storage import Storage


@dataclass(frozen=True)
class SliceRead:
    """A task's work item for `stream_slice`: the slice, and the keys of the files the commits after the checkpoint
    touch (any checkpoint row with one of them is superseded)."""

    storage: Storage
    slice: CheckpointSlice
    partition_columns: tuple[str, ...]
    touched: pa.Array
    fields: frozenset[str] | None = None


def read_slice_first(item: tuple[Storage, CheckpointSlice]) -> tuple[int, list[NonFileAction], pa.Array]:
    """Runs on a task: `read_slice_non_file`'s result and the paths of the slice's removes (one leaf column read;
    superseded ones included): what a whole-table aggregation needs before its files stream by.

    Raises:
        CheckpointUnreadable: the file is missing or unreadable (naming it).
    """
    index, non_file = read_slice_non_file(item)
    storage, part = item
    with open_checkpoint_part(storage, part.path, part.version) as pf:
        if A.REMOVE not in pf.schema_arrow.names:
            return index, non_file, pa.array([], pa.string())
        groups = list(range(pf.num_row_groups)) if part.row_groups is None else list(part.row_groups)
        column = contiguous(pf.read_row_groups(groups, columns=[f"{A.REMOVE}.path"], use_threads=False)[A.REMOVE])
    return index, non_file, pc.cast(pc.filter(contiguous(column.field("path")), pc.is_valid(column)), pa.string())


def stream_slice(read: SliceRead) -> Iterator[tuple[pa.Table, pa.Table]]:
    """Runs on a task: the slice's live adds and tombstones that no commit after the checkpoint supersedes, a batch at
    a time, as `ReplayStream.batches` hands them out (the same batches: a row group's rows, `BATCH_ROWS` at a time).

    Raises:
        CheckpointUnreadable: the file is missing or unreadable (naming it).
    """
    part = read.slice
    superseded = superseded_by(read.touched, path_normalizer(read.storage))
    seq = SEQ_BASE + part.index * SEQ_STRIDE + part.first_row
    columns = list(read.partition_columns)
    internal = list(INTERNAL_COLUMNS)
    for adds, removes in checkpoint_file_batches(
        read.storage, part.path, part.version, columns, None, superseded, seq, read.fields, part.row_groups
    ):
        yield adds.drop_columns(internal), removes.drop_columns(internal)


A_ = TypeVar("A_")


@dataclass
class TaskStream:
    """`snapshot_stream.ReplayStream` with the checkpoint read by a runner's tasks: the table's state without its files
    (``snapshot``), one `SliceRead` per slice for the tasks (`fold`), and what the planning process holds itself:
    the commits' own surviving actions (``tail``, after a V2 checkpoint's JSON part's) and every removed path.

    A whole-table aggregation runs `fold` (each task streams its slice, `stream_slice`, and returns its sums), merges
    the results in slice order, then adds the ``tail`` batches: the order `ReplayStream.batches` gives.
    """

    snapshot: Snapshot
    runner: CheckpointTaskRunner
    reads: list[SliceRead]
    tail: list[tuple[pa.Table, pa.Table]] = field(default_factory=list)
    removed: pa.Array = field(default_factory=lambda: pa.array([], pa.string()))

    def removed_paths(self) -> pa.Array:
        """As `ReplayStream.removed_paths`: every remove's path, the checkpoint's (read by the first round of tasks)
        and the commits'."""
        return self.removed

    def fold(self, fn: Callable[[tuple[SliceRead, A_]], R], arg: A_) -> list[R]:
        """``fn((read, arg))`` on one task per slice (``fn`` module-level, ``arg`` picklable and shared by every
        task: sent once); the results in slice order."""
        return self.runner.map_tasks(fn, [(read, arg) for read in self.reads])


def stream_with_tasks(
    storage: Storage, version: int | None, runner: CheckpointTaskRunner, file_fields: frozenset[str] | None = None
) -> TaskStream | None:
    """The table at ``version`` (None: latest) as a `TaskStream` (of the file actions only ``file_fields`` besides the
    keys, when given), or None when the checkpoint is smaller than ``runner.checkpoint_task_bytes`` (or there is none,
    or a task finds it unreadable): the caller streams locally (`snapshot_stream.stream_snapshot`, which falls back to
    an older checkpoint or names the file).

    One round of tasks reads each slice's non-file actions and its removes' paths; the commits after the checkpoint
    are read and reconciled here, their keys handed to the tasks that stream the slices.

    Raises:
        CorruptLog, ProtocolNotSupported, TableNotFound, VersionNotFound: as `stream_snapshot`.
    """
    segment = load_log_segment(storage, version)
    try:
        checkpoint = checkpoint_for_tasks(storage, segment, runner, read_slice_first)
        if checkpoint is None:
            return None
        slices, non_file, json_parts, found = (
            checkpoint.slices,
            checkpoint.non_file,
            checkpoint.json_parts,
            checkpoint.found,
        )
        if len(slices) > len(found):  # sidecars: no non-file action to read, only their removes' paths
            found = found + runner.map_tasks(read_slice_first, [(storage, s) for s in slices[len(found) :]])
    except CheckpointUnreadable:
        return None
    uri = storage.table_uri
    contents = read_commits(storage, segment.commits)
    non_file = non_file + find_non_file_actions(contents, uri)
    folded = fold_non_file(non_file, segment, uri)
    partition_columns = partition_physical_union(non_file, uri)
    adds, removes = parse_commit_file_actions(contents, partition_columns, uri)
    normalize = path_normalizer(storage)
    live, tombstones, superseded = reconcile_commits(adds, removes, normalize)
    touched = touched_keys(adds, removes, normalize)
    removed = [pc.cast(contiguous(removes.column("path")), pa.string()), *(contiguous(r[2]) for r in found)]
    tail = []
    if json_parts:
        seq = SEQ_BASE + len(slices) * SEQ_STRIDE
        a, r = parse_commit_file_actions([(-1, d) for d in json_parts], partition_columns, uri, seq_base=seq)
        removed.append(pc.cast(contiguous(r.column("path")), pa.string()))
        a = pc.filter(a, pc.invert(superseded(a.column("path"), a.column("deletionVector"))))
        r = pc.filter(r, pc.invert(superseded(r.column("path"), r.column("deletionVector"))))
        tail.append((a, r))
    tail.append((live, tombstones))
    internal = list(INTERNAL_COLUMNS)
    empty = empty_file_actions(partition_columns)
    state = table_state(folded, *empty, segment, tuple(partition_columns), pruned_by=STREAMED, file_fields=file_fields)
    reads = [SliceRead(storage, s, tuple(partition_columns), touched, file_fields) for s in slices]
    return TaskStream(
        Snapshot(storage, state),
        runner,
        reads,
        [(a.drop_columns(internal), r.drop_columns(internal)) for a, r in tail],
        pa.concat_arrays(removed),
    )


__all__ = ["SliceRead", "TaskStream", "read_slice_first", "stream_slice", "stream_with_tasks"]
