"""Clustering one partition along a space-filling curve, with memory bounded by the output file size.

A `ClusterTask` covers all live files of one partition. Its rows are rewritten into ``num_files`` files whose rows
follow the curve:

1. **Sample** the clustering columns (only those are decoded) of each file at a fixed stride (`sample_file`), and
   derive each column's range boundaries and the split points between runs and output files (`plan_runs`).
2. **Route** every row of each file into its run by its (key, noise) against the split points (`route_file`),
   spilling each run to an Arrow IPC file in a local temporary directory, so the partition never has to fit in memory.
3. **Sort** each run by (key, noise) and write the runs of each output file as its row groups (`write_runs`); only
   one run is in memory at a time.

Everything is deterministic for the same inputs: the sample and the noise depend only on the file and its index in
the partition, and ties sort by the rows' origin. `cluster_files` runs the three steps in one process (the local
executor: one task per partition); `clustering_shuffle` runs the same steps as Spark stages, a task per group of
input files for sampling and routing and a task per output file after a shuffle, and writes the same files.

Memory of one task, whatever the size of the partition or the target file size: the largest of its steps,

* sampling: at most ``2 * sample_rows`` rows of the clustering columns, and one input row group and batch being read;
* routing: one input row group and batch being read, the batch's keys and its rows taken per run, and one open spill
  writer per run (a few KB each; the runs themselves are on local disk: as much disk as the partition's rows);
* writing: one sorted run, ``run_bytes`` (estimated from the files' sizes, `_DECODED_PER_FILE_BYTE`, and at least
  the rows' fixed-width bytes: `_decoded_bytes`; off by as much as strings compress better than that) plus 32 bytes a
  row (key, noise, origin and the sort order),
  a slice of it being written, and the writer's row groups as for a compaction (`engine.rewrite`):
  ``2 * run_bytes + 3 * (row_group_bytes + batch)`` about.

The local executor runs ``max_concurrent_tasks`` partitions at once; at the defaults (16 MiB runs and row groups, 2
tasks) a Z-order of 1.09 GiB peaked at 248 MB and one of 5.5 GiB (4 partitions) at 341 MB (benchmarks/memory_bound.py).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import uuid
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.conform import delta_schema_to_arrow
from airflow_provider_deltalite.engine.data_file_writer import WriterOptions
from airflow_provider_deltalite.engine.expressions import column_path
from airflow_provider_deltalite.engine.rewrite import (
    RewriteResult,
    TableContext,
    again_after_interrupted_uploads,
    iter_live_rows,
    rewrite_result,
    write_data_file,
)
from airflow_provider_deltalite.engine.row_tracking import num_records
from airflow_provider_deltalite.maintenance.clustering.curves import (
    aligned_splits,
    compare_keys,
    curve_keys,
    key_order,
    noise_bytes,
    range_boundaries,
    range_ids,
)
from airflow_provider_deltalite.maintenance.options import DEFAULT_RUN_BYTES

# The tags Delta gives the files of one clustering run (a "cube"); a later run reads them to skip what is in place.
TAG_CUBE_ID = "ZCUBE_ID"
TAG_COLUMNS = "ZCUBE_ZORDER_BY"
TAG_CURVE = "ZCUBE_ZORDER_CURVE"

DEFAULT_SAMPLE_ROWS = 200_000
# Parquet data files decode to roughly this many times their size in Arrow memory (a conservative estimate).
_DECODED_PER_FILE_BYTE = 3
_TAKE_ROWS = 262_144
_KEY = "__deltalite_key_"
_NOISE = "__deltalite_noise"
_ORIGIN = "__deltalite_origin"
_ORIGIN_ROW_BITS = 40  # rows per file below 2**40; files per partition below 2**24


@dataclass(frozen=True)
class ClusterTask:
    """One partition to cluster (picklable: it travels to Spark workers).

    Attributes:
        table: the table.
        task_id: the partition's number in the plan.
        files: the live add actions of the partition, in log form.
        columns: the clustering columns (logical names, dotted for nested fields).
        curve: ``zorder`` or ``hilbert``.
        num_ranges: range ids per column.
        num_files: output files.
        noise: add the noise byte against skew.
        seed: seeds the noise.
        deletion_timestamp: stamped on every remove.
        writer: Parquet encoding.
        tags: tags of the new files (columns, curve, cube id).
        sample_rows: the sample size used for boundaries and split points.
        run_bytes: the estimated in-memory size of one sorted run: what bounds the task's memory. A file is written
            from consecutive runs, each sorted on its own, as consecutive row groups.
    """

    table: TableContext
    task_id: int
    files: tuple[Mapping[str, Any], ...]
    columns: tuple[str, ...]
    curve: str
    num_ranges: int
    num_files: int
    noise: bool
    seed: int
    deletion_timestamp: int
    writer: WriterOptions = field(default_factory=WriterOptions)
    tags: Mapping[str, str] | None = None
    sample_rows: int = DEFAULT_SAMPLE_ROWS
    run_bytes: int = DEFAULT_RUN_BYTES


def column_values(rows: pa.Table, path: str) -> pa.Array:
    """The values of a (possibly nested, dotted) column; a null parent struct gives a null value."""
    parts = column_path(path)
    values: pa.Array | pa.ChunkedArray = rows.column(parts[0])
    for name in parts[1:]:
        values = pc.struct_field(values, name)
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def cluster_files(task: ClusterTask) -> RewriteResult:
    """Rewrite the partition's rows into ``task.num_files`` files ordered along the curve (see the module docs)."""
    return again_after_interrupted_uploads(lambda: _cluster_once(task))


def _cluster_once(task: ClusterTask) -> RewriteResult:
    plan = plan_runs(task, sample_partition(task))
    rows_read = 0
    scratch = tempfile.mkdtemp(prefix="deltalite-cluster-")
    try:
        spill = RunSpill(scratch)
        for index, file in enumerate(task.files):
            for run, chunk in route_file(task, plan, file, index):
                rows_read += chunk.num_rows
                spill.add(run, chunk)
        adds = write_runs(task, spill, plan.file_of_run)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return rewrite_result(task.task_id, task.files, adds, task.deletion_timestamp, rows_read)


@dataclass(frozen=True)
class RunPlan:
    """How one partition's rows are cut: per-column range boundaries, the runs' split points, each run's file.

    A row with (key, noise) at or above split ``j`` belongs to run ``j + 1`` or later; run ``r`` goes to output file
    ``file_of_run[r]`` (files are consecutive runs).
    """

    boundaries: tuple[np.ndarray, ...]
    split_keys: np.ndarray
    split_noise: np.ndarray
    file_of_run: tuple[int, ...]

    @property
    def num_files(self) -> int:
        return self.file_of_run[-1] + 1

    @property
    def num_runs(self) -> int:
        return len(self.file_of_run)


def sample_stride(task: ClusterTask) -> int:
    """Every how many rows the sample keeps one, from the row counts in the stats (1 when some count is missing)."""
    counts = [num_records(f) for f in task.files]
    known = [c for c in counts if isinstance(c, int)]
    if len(known) < len(counts):
        return 1
    return max(1, math.ceil(sum(known) / task.sample_rows))


def sample_file(task: ClusterTask, file: Mapping[str, Any], stride: int) -> pa.Table:
    """Every ``stride``-th live row of one file, clustering columns only (each file from its first row, so that
    sampling file by file on many machines picks the same rows as in one process)."""
    columns = sorted({column_path(c)[0] for c in task.columns})
    parts = []
    offset = 0
    for rows in iter_live_rows(task.table, [file], columns=columns):
        n = rows.num_rows
        first = (-offset) % stride
        if first < n:
            parts.append(pc.take(rows, pa.array(np.arange(first, n, stride))))
        offset += n
    sample = pa.concat_tables(parts) if parts else pa.table({c: pa.array([], pa.null()) for c in columns})
    return _thin(sample, 2 * task.sample_rows)


def merge_samples(task: ClusterTask, samples: Sequence[pa.Table]) -> pa.Table:
    """The partition's sample from its files' samples, in file order, at most about ``2 * sample_rows`` rows."""
    kept = [s for s in samples if s.num_rows]
    if not kept:
        return samples[0] if samples else pa.table({})
    return _thin(pa.concat_tables(kept, promote_options="permissive"), 2 * task.sample_rows)


def sample_partition(task: ClusterTask) -> pa.Table:
    stride = sample_stride(task)
    return merge_samples(task, [sample_file(task, f, stride) for f in task.files])


def _thin(sample: pa.Table, limit: int) -> pa.Table:
    # the stats undercounted (or were missing): keep evenly spaced rows, deterministically
    if sample.num_rows <= limit:
        return sample
    return pc.take(sample, pa.array(np.linspace(0, sample.num_rows - 1, limit // 2).astype(np.int64)))


def plan_runs(task: ClusterTask, sample: pa.Table) -> RunPlan:
    """Range boundaries of each column, and the run split points (`_run_splits`), from the partition's sample."""
    boundaries = tuple(range_boundaries(column_values(sample, c), task.num_ranges) for c in task.columns)
    split_keys, split_noise, file_of_run = _run_splits(task, sample, boundaries)
    return RunPlan(boundaries, split_keys, split_noise, tuple(file_of_run))


def route_file(
    task: ClusterTask, plan: RunPlan, file: Mapping[str, Any], file_index: int
) -> Iterator[tuple[int, pa.Table]]:
    """The live rows of one file, cut into (run, rows) chunks; the rows carry their key, noise and origin columns.

    The noise is seeded by (task seed, file index) and the origin is (file index, row number), so a file routes the
    same way wherever it is read, and a run sorts the same whatever order its chunks arrive in.
    """
    rng = np.random.default_rng([task.seed, file_index])
    position = 0
    for rows in iter_live_rows(task.table, [file]):
        n = rows.num_rows
        if not n:
            continue
        keys = _keys(task, rows, plan.boundaries)
        noise = _noise(task, rng, n)
        origin = (np.uint64(file_index) << np.uint64(_ORIGIN_ROW_BITS)) + np.arange(
            position, position + n, dtype=np.uint64
        )
        position += n
        table = rows
        for w in range(keys.shape[1]):
            table = table.append_column(f"{_KEY}{w}", pa.array(keys[:, w]))
        table = table.append_column(_NOISE, pa.array(noise)).append_column(_ORIGIN, pa.array(origin))
        run_of = compare_keys(keys, noise, plan.split_keys, plan.split_noise)
        if len(plan.split_noise) == 0:
            yield 0, table
            continue
        # few runs: a stable sort of small integers is a radix sort in numpy, several times faster than on int64
        order = np.argsort(run_of.astype(np.uint16) if plan.num_runs < (1 << 16) else run_of, kind="stable")
        sorted_runs = run_of[order]
        runs = np.unique(sorted_runs)
        starts = np.searchsorted(sorted_runs, runs, side="left")
        ends = np.searchsorted(sorted_runs, runs, side="right")
        for run, start, end in zip(runs.tolist(), starts.tolist(), ends.tolist(), strict=True):
            yield run, pc.take(table, pa.array(order[start:end]))


def write_runs(task: ClusterTask, spill: RunSpill, file_of_run: Sequence[int] | None) -> list[dict[str, Any]]:
    """Write every output file that received rows, each from its runs sorted one at a time; the add actions.

    ``file_of_run`` maps runs to output files (`RunPlan.file_of_run`); None when all the spilled runs form one file.
    """
    partition_values = dict(task.files[0].get("partitionValues") or {})
    adds = []
    for runs in spill.by_file(file_of_run):
        add = write_data_file(task.table, partition_values, runs, task.writer, tags=task.tags)
        if add is not None:
            adds.append(add)
    return adds


def _keys(task: ClusterTask, rows: pa.Table, boundaries: Sequence[np.ndarray]) -> np.ndarray:
    ids = [range_ids(column_values(rows, c), b) for c, b in zip(task.columns, boundaries, strict=True)]
    return curve_keys(ids, task.curve, task.num_ranges)


def _noise(task: ClusterTask, rng: np.random.Generator, rows: int) -> np.ndarray:
    if not task.noise:
        return np.zeros(rows, np.uint64)
    return rng.integers(0, 256, size=rows, dtype=np.uint8).astype(np.uint64)


def _decoded_bytes(task: ClusterTask) -> int:
    """The partition's rows in Arrow memory, estimated: `_DECODED_PER_FILE_BYTE` times the files' sizes, and at least
    what the rows' fixed-width values take (from the files' ``numRecords``). Encoded files can be far smaller than
    their rows: sequential ids or timestamps in DELTA_BINARY_PACKED take a bit or two a value, so 1.8 million rows of
    two int64 columns (28.8 MB in Arrow) came in a file of under 1 MB, and by its size alone one sorted run held all
    of them."""
    by_size = sum(int(f["size"]) for f in task.files) * _DECODED_PER_FILE_BYTE
    counts = [num_records(f) for f in task.files]
    if any(n is None for n in counts):
        return by_size
    schema = delta_schema_to_arrow(task.table.schema, exclude=task.table.partition_columns)
    return max(by_size, sum(n or 0 for n in counts) * _fixed_row_bytes(schema))


def _fixed_row_bytes(schema: pa.Schema) -> int:
    """Bytes a row takes in Arrow whatever its values: fixed-width values and the offsets of variable-width ones."""
    total = 0.0
    for f in schema:
        kind = f.type
        try:
            total += max(kind.bit_width, 1) / 8
        except ValueError:  # no fixed width: strings, binaries, lists (an offset), structs (their fields)
            total += 4 if not pa.types.is_struct(kind) else _fixed_row_bytes(pa.schema(list(kind)))
    return math.ceil(total)


def _run_splits(
    task: ClusterTask, sample: pa.Table, boundaries: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Split points of the runs, and the output file of each run.

    Files are cut at curve-cell edges (`aligned_splits`); each file's key range is cut further, evenly by the sample,
    into runs small enough (``run_bytes``) to be sorted in memory one at a time.
    """
    if sample.num_rows == 0:
        return np.zeros((0, 1), np.uint64), np.zeros(0, np.uint64), [0]
    keys = _keys(task, sample, boundaries)
    noise = noise_bytes(sample.num_rows, task.seed + 1) if task.noise else np.zeros(sample.num_rows, np.uint64)
    order = key_order(keys, noise)
    keys, noise = keys[order], noise[order]
    file_keys, file_noise = aligned_splits(keys, noise, task.num_files)
    segment_of = compare_keys(keys, noise, file_keys, file_noise)  # sorted input: non-decreasing
    per_sample_row = _decoded_bytes(task) / len(keys)
    cuts: list[tuple[tuple[int, ...], int, bool]] = [
        (tuple(int(w) for w in k), int(n), True) for k, n in zip(file_keys, file_noise, strict=True)
    ]
    starts = np.searchsorted(segment_of, np.arange(len(file_noise) + 1), side="left")
    ends = np.searchsorted(segment_of, np.arange(len(file_noise) + 1), side="right")
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        pieces = math.ceil((end - start) * per_sample_row / task.run_bytes)
        for k in range(1, pieces):
            at = start + (k * (end - start)) // pieces
            cuts.append((tuple(int(w) for w in keys[at]), int(noise[at]), False))
    cuts.sort(key=lambda c: (c[0], c[1], not c[2]))
    file_of_run = [0]
    for _, _, is_file_cut in cuts:
        file_of_run.append(file_of_run[-1] + (1 if is_file_cut else 0))
    words = keys.shape[1]
    split_keys = np.array([c[0] for c in cuts], np.uint64).reshape(-1, words)
    return split_keys, np.array([c[1] for c in cuts], np.uint64), file_of_run


class RunSpill:
    """Routed chunks appended to one Arrow IPC file per run in a local directory, read back one run at a time."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._writers: dict[int, Any] = {}

    def add(self, run: int, table: pa.Table) -> None:
        writer = self._writers.get(run)
        if writer is None:
            path = os.path.join(self.directory, f"run-{run:05d}.arrow")
            writer = self._writers[run] = pa.ipc.new_file(path, table.schema)
        writer.write_table(table)

    def by_file(self, file_of_run: Sequence[int] | None) -> Iterator[Iterator[pa.Table]]:
        """For each output file (in order), its rows: the file's runs one after the other, each sorted by (key, noise).

        ``file_of_run`` None: all runs go to one file. Only one run is in memory at a time, copied out in slices.
        """
        self._close()
        runs = self._runs()
        if file_of_run is None:
            if runs:
                yield self._file_rows(runs)
            return
        for f in sorted({file_of_run[run] for run in runs}):
            yield self._file_rows([run for run in runs if file_of_run[run] == f])

    def _close(self) -> None:
        for writer in self._writers.values():
            writer.close()

    def _runs(self) -> list[int]:
        """The runs that received rows, in order."""
        return sorted(self._writers)

    def _read_run(self, run: int) -> pa.Table:
        """One run's rows as spilled (in arrival order), its spill file deleted."""
        path = os.path.join(self.directory, f"run-{run:05d}.arrow")
        with pa.OSFile(path) as source:  # read into memory: the file is deleted right after
            table = pa.ipc.open_file(source).read_all()
        os.unlink(path)
        return table

    def _file_rows(self, runs: list[int]) -> Iterator[pa.Table]:
        for run in runs:
            table = self._read_run(run)
            origin = table.column(_ORIGIN).to_numpy()
            if len(origin) > 1 and not (origin[1:] > origin[:-1]).all():
                # chunks arrived out of file order (a shuffle): put them back, so equal (key, noise) keep file order
                table = pc.take(table, pa.array(np.argsort(origin)))
            words = sorted(n for n in table.column_names if n.startswith(_KEY))
            keys = np.column_stack([table.column(n).to_numpy() for n in words])
            order = key_order(keys, table.column(_NOISE).to_numpy())
            rows = table.drop_columns([*words, _NOISE, _ORIGIN])
            del table, keys
            for start in range(0, len(order), _TAKE_ROWS):
                yield pc.take(rows, pa.array(order[start : start + _TAKE_ROWS]))
            del rows, order
            # A sorted run is the largest allocation of the task: have the allocator give it back now rather than keep
            # it cached next to the following run's (mimalloc otherwise holds freed pages for a while).
            pa.default_memory_pool().release_unused()


def cube_tasks(
    ctx: TableContext,
    bins: Sequence[Any],
    *,
    columns: Sequence[str],
    curve: str,
    num_ranges: int,
    noise: bool,
    run_bytes: int,
    writer: WriterOptions,
    deletion_timestamp: int,
) -> list[ClusterTask]:
    """One `ClusterTask` per bin (``files``, ``num_files``), each writing a new cube: a fresh ``ZCUBE_ID``, the columns
    as a JSON list and the curve in its tags; the noise seed comes from the bin's paths, so a retry writes the same."""
    columns_tag = json.dumps(list(columns), separators=(",", ":"))
    return [
        ClusterTask(
            table=ctx,
            task_id=i,
            files=b.files,
            columns=tuple(columns),
            curve=curve,
            num_ranges=num_ranges,
            num_files=b.num_files,
            noise=noise,
            seed=zlib.crc32("\n".join(f["path"] for f in b.files).encode()),
            deletion_timestamp=deletion_timestamp,
            writer=writer,
            tags={TAG_CUBE_ID: str(uuid.uuid4()), TAG_COLUMNS: columns_tag, TAG_CURVE: curve},
            run_bytes=run_bytes,
        )
        for i, b in enumerate(bins)
    ]
