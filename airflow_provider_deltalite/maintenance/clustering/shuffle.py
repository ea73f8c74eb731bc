"""Clustering on an executor that can shuffle (Spark): the steps of `clustering` spread over many machines.

One partition is no longer one task. The input files of every partition are cut into groups of about
``GROUP_BYTES``, and the work runs in three stages:

1. **Sample** (a task per group): `sample_file` on each file; the driver merges a partition's samples in file order
   and computes its `RunPlan` (`plan_runs`): the same boundaries and split points as `cluster_files` computes.
2. **Route** (a task per group, the map side of a shuffle): `route_file` cuts each file's rows into (run, rows)
   chunks, buffered and sent to the reducer of their output file as payloads of a few MiB, each a frame per run
   (an lz4 Arrow IPC stream of one record batch).
3. **Write** (a task per output file, the reduce side): the payloads are appended as they are to a local spill file
   (`_ReceivedRuns`: no decoding on arrival), and the file is written from its runs, each decoded and sorted on its
   own (`write_runs`).

This is a range partitioning on the curve key (what ``repartitionByRange`` does for a DataFrame), with the
boundaries taken from the engine's own sample so that the files are the ones the local executor writes.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import struct
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import cast

import pyarrow as pa

from airflow_provider_deltalite.engine.errors import DeltaLiteError
from airflow_provider_deltalite.engine.rewrite import RewriteResult, rewrite_result
from airflow_provider_deltalite.maintenance.clustering.runs import (
    ClusterTask,
    RunPlan,
    RunSpill,
    cluster_files,
    merge_samples,
    plan_runs,
    route_file,
    sample_file,
    sample_stride,
    write_runs,
)
from airflow_provider_deltalite.maintenance.executor import Executor, ShuffleExecutor
from airflow_provider_deltalite.maintenance.rewrites import OptimizeProgress, left_for_vacuum

GROUP_BYTES = 64 * 1024 * 1024
# A partition up to this size is clustered by one task (`cluster_files`): the shuffle's serialisation costs more
# than it saves until one task would take long enough to hold up the whole run.
SHUFFLE_ABOVE_BYTES = 256 * 1024 * 1024
# How much routed data a map task holds before sending it on (its memory, on top of one input batch): large enough
# that a flush sends few, large payloads per output file.
FLUSH_BYTES = 64 * 1024 * 1024
PAYLOAD_BYTES = 4 * 1024 * 1024
# Payloads are lz4-compressed: Spark's exchange costs about as much CPU per byte as lz4 does (measured by
# benchmarks/zorder_spark_scale.py: uncompressed payloads cost more in all), and the reducer's spill stays small.
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")


@dataclass(frozen=True)
class _FileGroup:
    """Consecutive files of one partition (picklable; the task carries only these files)."""

    task: ClusterTask
    first_index: int  # the index of the group's first file in the partition (seeds its noise and origin)
    stride: int = 1
    plan: RunPlan | None = None
    first_reducer: int = 0
    flush_bytes: int = 0  # FLUSH_BYTES and PAYLOAD_BYTES as the driver has them (set with the plan)
    payload_bytes: int = 0


@dataclass(frozen=True)
class _OutputFile:
    """One output file: its partition's task, carrying only the first file (for the partition values)."""

    task: ClusterTask
    file_number: int  # within the partition


def wants_shuffle(tasks: Sequence[ClusterTask], executor: object) -> bool:
    """Whether to cluster through a shuffle: the executor can, and some partition is larger than
    ``SHUFFLE_ABOVE_BYTES``. Both ways write the same files; this only decides which is faster."""
    largest = max((sum(int(f.get("size") or 0) for f in t.files) for t in tasks), default=0)
    return isinstance(executor, ShuffleExecutor) and largest > SHUFFLE_ABOVE_BYTES


def cluster_tasks(
    tasks: Sequence[ClusterTask],
    executor: Executor,
    progress: Callable[[OptimizeProgress], None] | None = None,
) -> list[RewriteResult]:
    """Run the clustering tasks of one operation (Z-order or liquid clustering) on ``executor``: through the shuffle
    where `wants_shuffle` says so, else one task per bin; a failure says which new files were left for VACUUM."""
    results: list[RewriteResult] = []
    total = sum(int(f.get("size") or 0) for t in tasks for f in t.files)
    try:
        if wants_shuffle(tasks, executor):
            # Spark and large partitions: a partition's files are sampled, routed and written by many tasks
            results = cluster_with_shuffle(tasks, cast(ShuffleExecutor, executor))
            if progress is not None:
                progress(OptimizeProgress(len(tasks), len(tasks), total, total))
        else:
            for result in executor.map(cluster_files, tasks):
                results.append(result)
                if progress is not None:
                    done = sum(r.bytes_read for r in results)
                    progress(OptimizeProgress(len(results), len(tasks), done, total))
    except DeltaLiteError as exc:
        raise left_for_vacuum(exc, results, "nothing was committed") from None
    return results


def cluster_with_shuffle(tasks: Sequence[ClusterTask], executor: ShuffleExecutor) -> list[RewriteResult]:
    """Cluster every partition of ``tasks`` on ``executor``; one `RewriteResult` per task, as `cluster_files` gives."""
    groups = [g for task in tasks for g in _groups(task)]
    samples: dict[int, list[tuple[int, pa.Table]]] = {}
    for task_id, first_index, sample in executor.map(_sample_group, groups):
        samples.setdefault(task_id, []).append((first_index, sample))
    plans: dict[int, RunPlan] = {}
    outputs: list[_OutputFile] = []
    first_reducer: dict[int, int] = {}
    for task in tasks:
        ordered = [s for _, s in sorted(samples.get(task.task_id, []), key=lambda p: p[0])]
        plan = plans[task.task_id] = plan_runs(task, merge_samples(task, ordered))
        first_reducer[task.task_id] = len(outputs)
        bare = dataclasses.replace(task, files=task.files[:1])  # the first file gives the partition values
        outputs.extend(_OutputFile(bare, n) for n in range(plan.num_files))
    routed = [
        dataclasses.replace(
            g,
            plan=plans[g.task.task_id],
            first_reducer=first_reducer[g.task.task_id],
            flush_bytes=FLUSH_BYTES,
            payload_bytes=PAYLOAD_BYTES,
        )
        for g in groups
    ]
    written = executor.map_reduce(_route_group, routed, _WriteOutputFile(outputs), len(outputs))
    adds: dict[int, list[dict]] = {task.task_id: [] for task in tasks}
    rows: dict[int, int] = dict.fromkeys(adds, 0)
    for reducer, (add, count) in enumerate(written):
        task_id = outputs[reducer].task.task_id
        rows[task_id] += count
        if add is not None:
            adds[task_id].append(add)
    return [rewrite_result(t.task_id, t.files, adds[t.task_id], t.deletion_timestamp, rows[t.task_id]) for t in tasks]


def _groups(task: ClusterTask) -> Iterator[_FileGroup]:
    stride = sample_stride(task)
    start, size = 0, 0
    for index, file in enumerate(task.files):
        size += int(file.get("size") or 0)
        if size >= GROUP_BYTES or index == len(task.files) - 1:
            yield _FileGroup(dataclasses.replace(task, files=task.files[start : index + 1]), start, stride)
            start, size = index + 1, 0


def _sample_group(group: _FileGroup) -> tuple[int, int, pa.Table]:
    parts = [sample_file(group.task, f, group.stride) for f in group.task.files]
    kept = [p for p in parts if p.num_rows] or parts[:1]
    return group.task.task_id, group.first_index, pa.concat_tables(kept, promote_options="permissive")


def _route_group(group: _FileGroup) -> Iterator[tuple[int, bytes]]:
    """The map side: the group's rows cut into runs, buffered, and sent as one payload per output file and flush.

    Chunks are buffered per run until ``FLUSH_BYTES`` are held, then every buffered run goes out, each output file's
    runs together in payloads of about ``PAYLOAD_BYTES`` (`_flush`, `_payload`): a few large payloads rather than one
    per (input batch, run), whose number grows with the partition's size times its number of runs and which the
    exchange pays for each (a row, an Arrow IPC stream and its schema, a compression call per small buffer).
    """
    assert group.plan is not None
    buffered: dict[int, list[pa.Table]] = {}
    held = 0
    for offset, file in enumerate(group.task.files):
        for run, chunk in route_file(group.task, group.plan, file, group.first_index + offset):
            buffered.setdefault(run, []).append(chunk)
            held += chunk.nbytes
            if held >= group.flush_bytes:
                yield from _flush(group, buffered)
                held = 0
    yield from _flush(group, buffered)


def _flush(group: _FileGroup, buffered: dict[int, list[pa.Table]]) -> Iterator[tuple[int, bytes]]:
    """Send every buffered run: each output file's runs in payloads of about ``PAYLOAD_BYTES`` (Spark moves rows of a
    few MiB best; a row of tens of MiB costs the JVM more, and a reducer's Arrow batches are bounded by bytes)."""
    assert group.plan is not None
    by_file: dict[int, list[int]] = {}
    for run in sorted(buffered):
        by_file.setdefault(group.plan.file_of_run[run], []).append(run)
    for file_number, runs in by_file.items():
        frames: list[tuple[int, list[pa.Table]]] = []
        size = 0
        for run in runs:
            frames.append((run, []))
            for chunk in buffered[run]:
                if size >= group.payload_bytes:
                    yield group.first_reducer + file_number, _payload(frames)
                    frames, size = [(run, [])], 0
                frames[-1][1].append(chunk)
                size += chunk.nbytes
        yield group.first_reducer + file_number, _payload(frames)
    buffered.clear()


# A payload is a sequence of frames, one per run: a header (run, rows, length of what follows) and an Arrow IPC stream
# of the run's rows. The reduce side appends payloads to its spill file as they come and decodes each run once.
_FRAME = struct.Struct("<qqq")


def _payload(runs: Sequence[tuple[int, Sequence[pa.Table]]]) -> bytes:
    parts: list[bytes] = []
    for run, chunks in runs:
        if not chunks:
            continue
        sink = pa.BufferOutputStream()
        # one record batch per frame: lz4 works on larger buffers, and the reducer sorts a run of fewer chunks
        rows = pa.concat_tables(chunks).combine_chunks() if len(chunks) > 1 else chunks[0]
        with pa.ipc.new_stream(sink, rows.schema, options=_IPC_OPTIONS) as writer:
            writer.write_table(rows)
        stream = sink.getvalue()
        parts.append(_FRAME.pack(run, rows.num_rows, stream.size))
        parts.append(stream.to_pybytes())
    return b"".join(parts)


class _ReceivedRuns(RunSpill):
    """The reduce side's spill: payloads appended unchanged to one local file, each run's frames indexed, so that a
    run is decoded once, when its turn to be sorted comes (no decode and re-encode on arrival)."""

    def __init__(self, directory: str) -> None:
        super().__init__(directory)
        self._path = os.path.join(directory, "received.arrows")
        self._file = open(self._path, "wb")  # noqa: SIM115 - closed in _close, before the runs are read
        self._size = 0
        self._frames: dict[int, list[tuple[int, int]]] = {}
        self.rows = 0

    def add_payload(self, payload: bytes) -> None:
        view = memoryview(payload)
        at = 0
        while at < len(view):
            run, rows, length = _FRAME.unpack_from(view, at)
            at += _FRAME.size
            if length < 0 or at + length > len(view):
                raise ValueError(f"a shuffled payload is cut short ({len(view)} bytes, a frame ends at {at + length})")
            self._frames.setdefault(run, []).append((self._size + at, length))
            self.rows += rows
            at += length
        self._file.write(view)
        self._size += len(view)

    def _close(self) -> None:
        self._file.close()

    def _runs(self) -> list[int]:
        return sorted(self._frames)

    def _read_run(self, run: int) -> pa.Table:
        with pa.memory_map(self._path) as source:
            tables = []
            for position, length in self._frames.pop(run):
                source.seek(position)
                tables.append(pa.ipc.open_stream(source.read_buffer(length)).read_all())
        return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


class _WriteOutputFile:
    """The reduce side: write one output file from the runs routed to it (a callable object, so that the
    descriptions of the output files travel with it to the executors)."""

    def __init__(self, outputs: Sequence[_OutputFile]) -> None:
        self.outputs = list(outputs)

    def __call__(self, reducer: int, payloads: Iterator[bytes]) -> tuple[dict | None, int]:
        output = self.outputs[reducer]
        scratch = tempfile.mkdtemp(prefix="deltalite-cluster-")
        try:
            spill = _ReceivedRuns(scratch)
            try:
                for payload in payloads:
                    spill.add_payload(payload)
            finally:
                spill._close()
            adds = write_runs(output.task, spill, None)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return (adds[0] if adds else None), spill.rows
