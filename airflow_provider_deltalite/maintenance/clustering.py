"""Clustering one partition along a space-filling curve, with memory bounded by the output file size.

A `ClusterTask` covers all live files of one partition. Its rows are rewritten into ``num_files`` files whose rows
follow the curve:

1. **Sample** the clustering columns (only those are decoded) at a fixed stride, and derive each column's range
   boundaries and the split points between output files from the sample's keys.
2. **Range-partition** every row into its output run by its (key, noise) against the split points, spilling each run
   to an Arrow IPC file in a local temporary directory, so the partition never has to fit in memory.
3. **Sort** each run by (key, noise) and write it as one data file; only one run is in memory at a time.

Everything is deterministic for the same inputs (the noise comes from a seeded generator over the rows in file
order), so the local and the Spark executor write the same files.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_deltalite.engine.expressions import column_path
from airflow_provider_deltalite.engine.rewrite import (
    RewriteResult,
    TableContext,
    WriterOptions,
    iter_live_rows,
    rewrite_result,
    write_data_file,
)
from airflow_provider_deltalite.maintenance.curves import (
    aligned_splits,
    compare_keys,
    curve_keys,
    key_order,
    noise_bytes,
    range_boundaries,
    range_ids,
)

DEFAULT_SAMPLE_ROWS = 200_000
DEFAULT_RUN_BYTES = 64 * 1024 * 1024
# Parquet data files decode to roughly this many times their size in Arrow memory (a conservative estimate).
_DECODED_PER_FILE_BYTE = 3
_TAKE_ROWS = 262_144
_KEY = "__deltalite_key_"
_NOISE = "__deltalite_noise"


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
    ctx = task.table
    top_level = sorted({column_path(c)[0] for c in task.columns})
    sample = _sample(task, top_level)
    boundaries = [range_boundaries(column_values(sample, c), task.num_ranges) for c in task.columns]
    split_keys, split_noise, file_of_run = _run_splits(task, sample, boundaries)
    partition_values = dict(task.files[0].get("partitionValues") or {})
    rows_read = 0
    rng = np.random.default_rng(task.seed)
    scratch = tempfile.mkdtemp(prefix="deltalite-cluster-")
    try:
        runs = _RunSpill(scratch, len(split_noise) + 1)
        for rows in iter_live_rows(ctx, task.files):
            rows_read += rows.num_rows
            if not rows.num_rows:
                continue
            keys = _keys(task, rows, boundaries)
            noise = _noise(task, rng, rows.num_rows)
            run_of = compare_keys(keys, noise, split_keys, split_noise)
            runs.add(rows, keys, noise, run_of)
        adds = []
        for file_runs in runs.by_file(file_of_run):
            add = write_data_file(ctx, partition_values, file_runs, task.writer, tags=task.tags)
            if add is not None:
                adds.append(add)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return rewrite_result(task.task_id, task.files, adds, task.deletion_timestamp, rows_read)


def _keys(task: ClusterTask, rows: pa.Table, boundaries: Sequence[np.ndarray]) -> np.ndarray:
    ids = [range_ids(column_values(rows, c), b) for c, b in zip(task.columns, boundaries, strict=True)]
    return curve_keys(ids, task.curve, task.num_ranges)


def _noise(task: ClusterTask, rng: np.random.Generator, rows: int) -> np.ndarray:
    if not task.noise:
        return np.zeros(rows, np.uint64)
    return rng.integers(0, 256, size=rows, dtype=np.uint8).astype(np.uint64)


def _sample(task: ClusterTask, columns: list[str]) -> pa.Table:
    """Every k-th live row of the clustering columns, k chosen from the row counts in the stats."""
    counts = [json.loads(f["stats"]).get("numRecords") if f.get("stats") else None for f in task.files]
    known = sum(c for c in counts if isinstance(c, int))
    stride = max(1, math.ceil(known / task.sample_rows)) if all(isinstance(c, int) for c in counts) else 1
    parts = []
    offset = 0
    kept = 0
    for rows in iter_live_rows(task.table, task.files, columns=columns):
        n = rows.num_rows
        first = (-offset) % stride
        if first < n:
            picked = rows.take(pa.array(np.arange(first, n, stride)))
            parts.append(picked)
            kept += picked.num_rows
        offset += n
        if kept > 2 * task.sample_rows:  # the stats undercounted: thin out what was kept and widen the stride
            merged = pa.concat_tables(parts)
            parts = [merged.take(pa.array(np.arange(0, merged.num_rows, 2)))]
            kept = parts[0].num_rows
            stride *= 2
    if not parts:
        return pa.table({c: pa.array([], pa.null()) for c in columns})
    return pa.concat_tables(parts)


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
    decoded = sum(int(f["size"]) for f in task.files) * _DECODED_PER_FILE_BYTE
    per_sample_row = decoded / len(keys)
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


class _RunSpill:
    """Rows appended to one Arrow IPC file per run (with their keys), read back sorted one run at a time."""

    def __init__(self, directory: str, runs: int) -> None:
        self.directory = directory
        self.runs = runs
        self._writers: dict[int, Any] = {}
        self._schema: pa.Schema | None = None

    def add(self, rows: pa.Table, keys: np.ndarray, noise: np.ndarray, run_of: np.ndarray) -> None:
        extra = {f"{_KEY}{w}": pa.array(keys[:, w]) for w in range(keys.shape[1])}
        extra[_NOISE] = pa.array(noise)
        table = rows
        for name, values in extra.items():
            table = table.append_column(name, values)
        if self.runs == 1:
            self._write(0, table)
            return
        order = np.argsort(run_of, kind="stable")
        sorted_runs = run_of[order]
        starts = np.searchsorted(sorted_runs, np.arange(self.runs), side="left")
        ends = np.searchsorted(sorted_runs, np.arange(self.runs), side="right")
        for run in np.flatnonzero(ends > starts):
            self._write(int(run), table.take(pa.array(order[starts[run] : ends[run]])))

    def _write(self, run: int, table: pa.Table) -> None:
        writer = self._writers.get(run)
        if writer is None:
            path = os.path.join(self.directory, f"run-{run:05d}.arrow")
            writer = self._writers[run] = pa.ipc.new_file(path, table.schema)
        writer.write_table(table)

    def by_file(self, file_of_run: Sequence[int]) -> Iterator[Iterator[pa.Table]]:
        """For each output file (in order), its rows: the file's runs one after the other, each sorted by (key, noise).

        Only one run is in memory at a time, and it is copied out in slices.
        """
        for writer in self._writers.values():
            writer.close()
        files = sorted({file_of_run[run] for run in self._writers})
        for f in files:
            yield self._file_rows([run for run in sorted(self._writers) if file_of_run[run] == f])

    def _file_rows(self, runs: list[int]) -> Iterator[pa.Table]:
        for run in runs:
            path = os.path.join(self.directory, f"run-{run:05d}.arrow")
            with pa.OSFile(path) as source:  # read into memory: the file is deleted right after
                table = pa.ipc.open_file(source).read_all()
            os.unlink(path)
            words = sorted(n for n in table.column_names if n.startswith(_KEY))
            keys = np.column_stack([table.column(n).to_numpy() for n in words])
            order = key_order(keys, table.column(_NOISE).to_numpy())
            rows = table.drop_columns([*words, _NOISE])
            del table, keys
            for start in range(0, len(order), _TAKE_ROWS):
                yield rows.take(pa.array(order[start : start + _TAKE_ROWS]))
