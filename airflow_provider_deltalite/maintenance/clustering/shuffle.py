"""Clustering on an executor that can shuffle (Spark): the steps of `clustering` spread over many machines.

One partition is no longer one task. The input files of every partition are cut into groups of about
``GROUP_BYTES``, and the work runs in three stages:

1. **Sample** (a task per group): `sample_file` on each file; the driver merges a partition's samples in file order
   and computes its `RunPlan` (`plan_runs`): the same boundaries and split points as `cluster_files` computes.
2. **Route** (a task per group, the map side of a shuffle): `route_file` cuts each file's rows into (run, rows)
   chunks, sent as Arrow IPC to the reducer of the chunk's output file.
3. **Write** (a task per output file, the reduce side): the chunks spill to local disk by run (`RunSpill`) and the
   file is written from its runs, each sorted on its own (`write_runs`).

This is a range partitioning on the curve key (what ``repartitionByRange`` does for a DataFrame), with the
boundaries taken from the engine's own sample so that the files are the ones the local executor writes.
"""

from __future__ import annotations

import dataclasses
import shutil
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
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")


@dataclass(frozen=True)
class _FileGroup:
    """Consecutive files of one partition (picklable; the task carries only these files)."""

    task: ClusterTask
    first_index: int  # the index of the group's first file in the partition (seeds its noise and origin)
    stride: int = 1
    plan: RunPlan | None = None
    first_reducer: int = 0


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
        dataclasses.replace(g, plan=plans[g.task.task_id], first_reducer=first_reducer[g.task.task_id]) for g in groups
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
    assert group.plan is not None
    for offset, file in enumerate(group.task.files):
        for run, chunk in route_file(group.task, group.plan, file, group.first_index + offset):
            yield group.first_reducer + group.plan.file_of_run[run], _to_ipc(run, chunk)


def _to_ipc(run: int, chunk: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, chunk.schema.with_metadata({b"run": str(run).encode()}), options=_IPC_OPTIONS) as w:
        w.write_table(chunk)
    return sink.getvalue().to_pybytes()


class _WriteOutputFile:
    """The reduce side: write one output file from the chunks routed to it (a callable object, so that the
    descriptions of the output files travel with it to the executors)."""

    def __init__(self, outputs: Sequence[_OutputFile]) -> None:
        self.outputs = list(outputs)

    def __call__(self, reducer: int, payloads: Iterator[bytes]) -> tuple[dict | None, int]:
        output = self.outputs[reducer]
        scratch = tempfile.mkdtemp(prefix="deltalite-cluster-")
        try:
            spill = RunSpill(scratch)
            rows = 0
            for payload in payloads:
                reader = pa.ipc.open_stream(payload)
                run = int(reader.schema.metadata[b"run"])
                chunk = reader.read_all().replace_schema_metadata(None)
                rows += chunk.num_rows
                spill.add(run, chunk)
            adds = write_runs(output.task, spill, None)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return (adds[0] if adds else None), rows
