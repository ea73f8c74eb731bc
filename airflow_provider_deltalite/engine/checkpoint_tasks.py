"""A partition-pruned replay whose checkpoint is read by independent tasks (Spark tasks, through any runner with a
``map``), so the process that plans never reads a large checkpoint itself.

The checkpoint is cut into slices: one per part of a multi-part checkpoint, one per V2 sidecar, and, for a single
Parquet file (a classic delta-rs or Spark checkpoint), one per range of row groups. Two pure functions run on the
tasks, each reading one slice with `checkpoint_stream`'s readers:

- `read_slice_non_file`: the slice's protocol, metaData, txn, domain and sidecar actions (a few rows);
- `read_slice_pruned`: the slice's adds and removes of the partitions a bound filter selects, without the rows the
  commits after the checkpoint supersede (the keys of every commit action count, whatever its partition, so a file a
  later commit removed is never resurrected).

The caller (`load_snapshot_with_tasks`) lists the log, reads the commits after the checkpoint, runs the first
function over the slices to learn the latest metaData (which binds the filter) and the sidecars, then the second,
and reconciles the small results with the commits exactly as `snapshot.load_snapshot(partition_filter=...)` does.
The caller holds the commits after the checkpoint and the kept files; a task holds one row group's partition values
and one batch of the other columns (`checkpoint_stream`).

A whole-table aggregation (health, the planner's first pass) streams the same slices instead
(`checkpoint_task_stream`).

Below ``checkpoint_task_bytes`` (`DEFAULT_CHECKPOINT_TASK_BYTES`) of checkpoint Parquet the local pruned replay is
used: starting tasks costs more than reading a small checkpoint.

Example:
    >>> snap = load_snapshot_with_tasks(storage, None, PartitionFilter("p = 'a'"), spark_executor)  # doctest: +SKIP
    >>> snap is None or snap.pruned_by  # doctest: +SKIP
    "p = 'a'"
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np
import pyarrow as pa

from airflow_provider_deltalite.engine import actions as A
from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.arrow_util import contiguous
from airflow_provider_deltalite.engine.checkpoint_reader import non_file_from_checkpoint_table
from airflow_provider_deltalite.engine.checkpoint_stream import (
    SEQ_BASE,
    SEQ_STRIDE,
    checkpoint_file_batches,
    open_checkpoint,
    open_checkpoint_part,
    present_rows,
)
from airflow_provider_deltalite.engine.commit_file import (
    NonFileAction,
    empty_file_actions,
    find_non_file_actions,
    parse_commit_file_actions,
)
from airflow_provider_deltalite.engine.errors import CheckpointUnreadable, CorruptLog
from airflow_provider_deltalite.engine.log_path import LOG_DIR, SIDECAR_DIR, LogFileKind
from airflow_provider_deltalite.engine.log_segment import CheckpointRef, load_log_segment
from airflow_provider_deltalite.engine.partition_filter import BoundPartitionFilter, PartitionFilter
from airflow_provider_deltalite.engine.replay import file_keys, reconcile
from airflow_provider_deltalite.engine.snapshot import (
    Snapshot,
    fold_non_file,
    in_partitions,
    partition_physical_union,
    path_normalizer,
    read_commits,
    table_state,
)
from airflow_provider_deltalite.engine.storage import Storage

# Checkpoint Parquet bytes from which a runner's tasks read the checkpoint. Measured on 2 loaded cores with local[2]
# (benchmarks/log_scale_spark.py, load 13-25): planning one partition locally took 3.5 s on a 62 MB checkpoint (1M
# files) and 5.3-14.8 s on a 622 MB one (10M); with tasks, 7.7 s and 17.5-32 s (two rounds of tasks cost about 7 s
# whatever the size, and two cores divide the reading by at most two). So tasks pay off only where the cluster has
# many more cores than the planning process and the checkpoint is large: from 1 GiB (about 16M files in delta-rs'
# layout), where the local read takes tens of seconds. What they always give is a flat planning process: 162 MiB of
# Python at 1M and at 10M files, against 263 and 294-335 MiB for the local plan.
DEFAULT_CHECKPOINT_TASK_BYTES = 1 << 30
# Slices per core of the runner for a single-file checkpoint: a few per core balance row groups of unequal cost.
SLICES_PER_CORE = 4

T = TypeVar("T")
R = TypeVar("R")


class CheckpointTaskRunner(Protocol):
    """What reads a checkpoint's slices: ``map_tasks`` runs a module-level function over picklable items as tasks of
    one job (results in item order), ``parallelism`` says how many run at once; ``checkpoint_task_bytes`` is the
    checkpoint size from which it is used (None: never). The Spark executor is one."""

    checkpoint_task_bytes: int | None

    @property
    def parallelism(self) -> int: ...

    def map_tasks(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]: ...


@dataclass(frozen=True)
class CheckpointSlice:
    """One task's share of a checkpoint: a Parquet file (relative to the table root), or some of its row groups.

    ``index`` orders the slices (and numbers their rows apart); ``first_row`` is the row of the file the slice starts
    at, so rows keep the sequence numbers a whole-file read gives them.
    """

    version: int
    path: str
    index: int
    row_groups: tuple[int, ...] | None = None
    first_row: int = 0

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class PrunedRead:
    """A task's work item for `read_slice_pruned`: the slice, the bound filter, and the keys of the files the
    commits after the checkpoint touch (any checkpoint row with one of them is superseded)."""

    storage: Storage
    slice: CheckpointSlice
    partition_columns: tuple[str, ...]
    keep: BoundPartitionFilter
    touched: pa.Array
    fields: frozenset[str] | None = None


def read_slice_non_file(item: tuple[Storage, CheckpointSlice]) -> tuple[int, list[NonFileAction]]:
    """Runs on a task: the non-file actions of one slice, with the slice's index.

    Only one leaf per action is decoded over the slice's rows; the whole columns only for the rows that hold one
    (writers put protocol and metaData first, so most slices decode none).

    Raises:
        CheckpointUnreadable: the file is missing or unreadable (naming it).
    """
    storage, part = item
    with open_checkpoint_part(storage, part.path, part.version) as pf:
        schema = pf.schema_arrow
        names = (A.PROTOCOL, A.METADATA, A.TXN, A.DOMAIN_METADATA, A.CHECKPOINT_METADATA, A.SIDECAR)
        columns = [c for c in names if c in schema.names and pa.types.is_struct(schema.field(c).type)]
        groups = list(range(pf.num_row_groups)) if part.row_groups is None else list(part.row_groups)
        if not columns or not groups:
            return part.index, []
        probe = pf.read_row_groups(
            groups, columns=[f"{c}.{schema.field(c).type.field(0).name}" for c in columns], use_threads=False
        )
        present = np.zeros(probe.num_rows, dtype=bool)
        for c in columns:
            present |= np.asarray(pc.is_valid(probe.column(c)).to_numpy(zero_copy_only=False), dtype=bool)
        if not present.any():
            return part.index, []
        rows = present_rows(pf, present, columns, groups)
        return part.index, non_file_from_checkpoint_table(rows, part.version)


def read_slice_pruned(read: PrunedRead) -> tuple[int, pa.Table, pa.Table]:
    """Runs on a task: the slice's adds and removes whose partitions ``read.keep`` may select and that no commit
    after the checkpoint supersedes (of their fields only ``read.fields`` and the key fields, when given), with the
    slice's index.

    Raises:
        CheckpointUnreadable: the file is missing or unreadable (naming it).
    """
    part = read.slice
    superseded = superseded_by(read.touched, path_normalizer(read.storage))
    columns = list(read.partition_columns)
    seq = SEQ_BASE + part.index * SEQ_STRIDE + part.first_row
    pieces = list(
        checkpoint_file_batches(
            read.storage, part.path, part.version, columns, read.keep, superseded, seq, read.fields, part.row_groups
        )
    )
    if not pieces:
        return (part.index, *empty_file_actions(columns))
    return part.index, pa.concat_tables([a for a, _ in pieces]), pa.concat_tables([r for _, r in pieces])


def superseded_by(touched: pa.Array, normalize: Callable[[str], str]) -> Callable[[pa.Array, pa.Array], pa.Array]:
    """Whether each (path, deletion vector) is one of the keys ``touched`` (the commits after the checkpoint)."""

    def superseded(paths: pa.Array, dvs: pa.Array) -> pa.Array:
        if not len(touched):
            return pa.repeat(False, len(paths))
        return pc.is_in(pc.cast(file_keys(paths, dvs, normalize), pa.string()), value_set=touched)

    return superseded


def checkpoint_parquet_bytes(ref: CheckpointRef) -> int:
    """The listed size of a checkpoint's own files (a V2 checkpoint's sidecars are counted once it is opened)."""
    return sum(f.info.size or 0 for f in ref.files)


def listed_checkpoint_bytes(storage: Storage, version: int | None = None) -> int:
    """The listed size of the files of the checkpoint a replay of ``version`` (None: latest) starts from, 0 without
    one: what tells, from a listing alone, whether tasks would read it (a V2 checkpoint's sidecars not counted)."""
    ref = load_log_segment(storage, version).checkpoint
    return checkpoint_parquet_bytes(ref) if ref is not None else 0


def split_row_groups(storage: Storage, path: str, version: int, index: int, slices: int) -> list[CheckpointSlice]:
    """One file's row groups in at most ``slices`` contiguous ranges of about equal row counts (its footer read)."""
    with open_checkpoint_part(storage, path, version) as pf:
        rows = [pf.metadata.row_group(rg).num_rows for rg in range(pf.num_row_groups)]
    if len(rows) <= 1:
        return [CheckpointSlice(version, path, index)]
    per = math.ceil(sum(rows) / max(1, min(slices, len(rows))))
    out: list[CheckpointSlice] = []
    group: list[int] = []
    start = acc = first = 0
    for rg, n in enumerate(rows):
        group.append(rg)
        acc += n
        if acc - start >= per or rg == len(rows) - 1:
            out.append(CheckpointSlice(version, path, index, tuple(group), first))
            group, start, first = [], acc, acc
    return out


def load_snapshot_with_tasks(
    storage: Storage,
    version: int | None,
    partition_filter: PartitionFilter,
    runner: CheckpointTaskRunner,
    file_fields: frozenset[str] | None = None,
) -> Snapshot | None:
    """The table at ``version`` (None: latest) with only the partitions ``partition_filter`` selects, its
    checkpoint read by ``runner``'s tasks; the same snapshot `load_snapshot(partition_filter=...)` builds.

    None when the checkpoint is smaller than ``runner.checkpoint_task_bytes`` (or there is none): the caller replays
    locally. A checkpoint a task finds unreadable is replayed locally too, where older checkpoints may stand in
    (`load_snapshot`), and its error, naming the file, comes from there when none can.

    Raises:
        InvalidExpression: the filter's predicate does not parse or names a column it may not.
        CorruptLog, ProtocolNotSupported, TableNotFound, VersionNotFound: as `load_snapshot`.
    """
    segment = load_log_segment(storage, version)
    try:
        checkpoint = checkpoint_for_tasks(storage, segment, runner)
        if checkpoint is None:
            return None
        return _replay(
            storage,
            segment,
            partition_filter,
            runner,
            file_fields,
            checkpoint.slices,
            checkpoint.non_file,
            checkpoint.json_parts,
        )
    except CheckpointUnreadable:
        return None  # the local replay falls back to an older checkpoint, or names the file it cannot read


@dataclass
class _TaskCheckpoint:
    """A checkpoint as the tasks read it: its slices, its non-file actions and a V2 checkpoint's JSON part, and the
    first round's results for a classic checkpoint's slices, in slice order (none for a V2 checkpoint's)."""

    slices: list[CheckpointSlice]
    non_file: list[NonFileAction]
    json_parts: list[bytes]
    found: list[tuple[Any, ...]]


def checkpoint_for_tasks(
    storage: Storage,
    segment: Any,
    runner: CheckpointTaskRunner,
    first: Callable[[tuple[Storage, CheckpointSlice]], tuple[Any, ...]] = read_slice_non_file,
) -> _TaskCheckpoint | None:
    """``segment``'s checkpoint cut into slices for ``runner``'s tasks (a classic one's non-file actions read by a
    first round of tasks, with ``first``), or None when it is smaller than ``runner.checkpoint_task_bytes`` or there
    is none. Raises `CheckpointUnreadable`."""
    threshold = getattr(runner, "checkpoint_task_bytes", None)
    ref = segment.checkpoint
    if threshold is None or ref is None:
        return None
    if ref.kind is LogFileKind.UUID_CHECKPOINT or any(f.parsed.file_format == "json" for f in ref.files):
        # the top-level file holds the non-file actions and the sidecar list: small, so read here
        sources = open_checkpoint(storage, ref)
        sidecars = [a.value for a in sources.non_file if a.name == A.SIDECAR]
        if checkpoint_parquet_bytes(ref) + sum(int(s.get("sizeInBytes") or 0) for s in sidecars) < threshold:
            return None
        slices = [CheckpointSlice(ref.version, p, i) for i, p in enumerate(sources.parquet_paths)]
        return _TaskCheckpoint(slices, sources.non_file, sources.json_parts, [])
    if checkpoint_parquet_bytes(ref) < threshold:
        return None
    slices, non_file, found = _classic_slices(storage, ref, runner, first)
    return _TaskCheckpoint(slices, non_file, [], found)


def _classic_slices(
    storage: Storage,
    ref: CheckpointRef,
    runner: CheckpointTaskRunner,
    first: Callable[[tuple[Storage, CheckpointSlice]], tuple[Any, ...]] = read_slice_non_file,
) -> tuple[list[CheckpointSlice], list[NonFileAction], list[tuple[Any, ...]]]:
    """The slices of a classic or multi-part checkpoint, its non-file actions (read by the tasks, with ``first``),
    and ``first``'s results in slice order; sidecars a classic-named V2 checkpoint lists become slices of their own
    (after those results)."""
    if len(ref.files) == 1:
        slices = split_row_groups(storage, ref.files[0].path, ref.version, 0, SLICES_PER_CORE * runner.parallelism)
    else:
        slices = [CheckpointSlice(ref.version, f.path, i) for i, f in enumerate(ref.files)]
    found = sorted(runner.map_tasks(first, [(storage, s) for s in slices]), key=lambda r: r[0])
    non_file = [a for r in found for a in r[1]]
    if not any(a.name == A.PROTOCOL for a in non_file) or not any(a.name == A.METADATA for a in non_file):
        raise CorruptLog(f"checkpoint {ref.version} has no protocol or metaData action", storage.table_uri)
    index = len(ref.files)
    for sidecar in (a.value for a in non_file if a.name == A.SIDECAR):
        path = str(sidecar.get("path", ""))
        slices.append(CheckpointSlice(ref.version, path if "/" in path else f"{LOG_DIR}/{SIDECAR_DIR}/{path}", index))
        index += 1
    return slices, non_file, found


def _replay(
    storage: Storage,
    segment: Any,
    partition_filter: PartitionFilter,
    runner: CheckpointTaskRunner,
    file_fields: frozenset[str] | None,
    slices: list[CheckpointSlice],
    checkpoint_non_file: list[NonFileAction],
    json_parts: list[bytes],
) -> Snapshot:
    """`snapshot._replay_pruned` with the checkpoint's file actions read by the runner's tasks."""
    uri = storage.table_uri
    contents = read_commits(storage, segment.commits)
    non_file = checkpoint_non_file + find_non_file_actions(contents, uri)
    state = fold_non_file(non_file, segment, uri)
    keep = partition_filter.bind(state["metaData"], uri)
    partition_columns = partition_physical_union(non_file, uri)
    adds, removes = parse_commit_file_actions(contents, partition_columns, uri)
    normalize = path_normalizer(storage)
    touched = touched_keys(adds, removes, normalize)
    reads = [PrunedRead(storage, s, tuple(partition_columns), keep, touched, file_fields) for s in slices]

    def base_rows(superseded: Callable[[pa.Array, pa.Array], pa.Array]) -> tuple[pa.Table, pa.Table]:
        found = sorted(runner.map_tasks(read_slice_pruned, reads), key=lambda r: (r[0], _first(r)))
        pieces = [(a, r) for _, a, r in found]
        if json_parts:
            seq = SEQ_BASE + len(slices) * SEQ_STRIDE
            a, r = parse_commit_file_actions([(-1, d) for d in json_parts], partition_columns, uri, seq_base=seq)
            pieces.append((_kept(a, keep, superseded), _kept(r, keep, superseded)))
        if not pieces:
            return empty_file_actions(partition_columns)
        return (
            pa.concat_tables([p[0] for p in pieces], promote_options="permissive"),
            pa.concat_tables([p[1] for p in pieces], promote_options="permissive"),
        )

    live, tombstones = reconcile(adds, removes, normalize, None, partition_columns, uri, base_rows=base_rows)
    return Snapshot(
        storage,
        table_state(
            state,
            in_partitions(live, keep),
            in_partitions(tombstones, keep),
            segment,
            tuple(partition_columns),
            pruned_by=partition_filter.predicate,
            file_fields=file_fields,
        ),
    )


def touched_keys(adds: pa.Table, removes: pa.Table, normalize: Callable[[str], str]) -> pa.Array:
    """The distinct keys (path, deletion vector) of the commits' file actions: the checkpoint rows they supersede."""
    keys = pa.concat_arrays(
        [
            contiguous(pc.cast(file_keys(adds.column("path"), adds.column("deletionVector"), normalize), pa.string())),
            contiguous(
                pc.cast(file_keys(removes.column("path"), removes.column("deletionVector"), normalize), pa.string())
            ),
        ]
    )
    return contiguous(pc.unique(keys))


def _first(result: tuple[int, pa.Table, pa.Table]) -> int:
    """The first sequence number of a slice's rows (slices of one file share its index)."""
    for table in result[1:]:
        if table.num_rows:
            return int(pc.min(table.column("_seq")).as_py())
    return 0


def _kept(rows: pa.Table, keep: BoundPartitionFilter, superseded: Callable[[pa.Array, pa.Array], pa.Array]) -> pa.Table:
    mask = keep.mask_struct(rows.column("partitionValues"))
    if rows.num_rows:
        mask &= ~np.asarray(
            superseded(rows.column("path"), rows.column("deletionVector")).to_numpy(zero_copy_only=False), dtype=bool
        )
    return rows if mask.all() else pc.filter(rows, pa.array(mask))


__all__ = [
    "DEFAULT_CHECKPOINT_TASK_BYTES",
    "CheckpointSlice",
    "CheckpointTaskRunner",
    "PrunedRead",
    "listed_checkpoint_bytes",
    "load_snapshot_with_tasks",
    "read_slice_non_file",
    "read_slice_pruned",
    "split_row_groups",
]
