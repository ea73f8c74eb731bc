"""The payloads of the clustering shuffle (`clustering.shuffle`), in one process: how runs are framed on the map side
and spilled on the reduce side. Through Spark: tests/maintenance/test_zorder_spark.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from airflow_provider_deltalite.maintenance.clustering import shuffle
from airflow_provider_deltalite.maintenance.clustering.runs import ClusterTask


def _chunk(start: int, rows: int) -> pa.Table:
    values = np.arange(start, start + rows, dtype=np.int64)
    return pa.table({"v": values, "s": pa.array([f"row {v}" for v in values.tolist()])})


def test_frames_bring_each_runs_rows_back_intact_in_arrival_order(tmp_path: Path) -> None:
    # two map tasks' payloads: run 3 gets rows from both, run 1 from the first, run 7 from the second
    first = shuffle._payload([(1, [_chunk(0, 5)]), (3, [_chunk(100, 3), _chunk(200, 4)])])
    second = shuffle._payload([(3, [_chunk(300, 2)]), (7, [_chunk(700, 1)])])
    spill = shuffle._ReceivedRuns(str(tmp_path))
    spill.add_payload(first)
    spill.add_payload(second)
    spill._close()
    assert spill.rows == 5 + 3 + 4 + 2 + 1
    assert spill._runs() == [1, 3, 7]
    assert spill._read_run(3).column("v").to_pylist() == [*range(100, 103), *range(200, 204), 300, 301]
    assert spill._read_run(1).to_pylist() == [{"v": v, "s": f"row {v}"} for v in range(5)]
    assert spill._read_run(7).to_pylist() == [{"v": 700, "s": "row 700"}]


def test_a_payload_cut_short_is_refused(tmp_path: Path) -> None:
    payload = shuffle._payload([(2, [_chunk(0, 10)])])
    spill = shuffle._ReceivedRuns(str(tmp_path))
    with pytest.raises(ValueError, match=f"cut short \\({len(payload) - 1} bytes"):
        spill.add_payload(payload[:-1])


def test_a_map_task_flushes_each_output_files_runs_in_payloads_of_bounded_size() -> None:
    # runs 0..3 go to output files 0, 0, 1, 1; each chunk is 1,000 rows of 8 + 8 bytes + text
    plan = shuffle.RunPlan((), np.zeros((3, 1), np.uint64), np.zeros(3, np.uint64), (0, 0, 1, 1))
    chunk_bytes = _chunk(0, 1000).nbytes
    group = shuffle._FileGroup(None, 0, plan=plan, first_reducer=10, payload_bytes=2 * chunk_bytes)  # type: ignore[arg-type]
    buffered = {run: [_chunk(1000 * (3 * run + k), 1000) for k in range(3)] for run in range(4)}
    sent = list(shuffle._flush(group, buffered))
    assert buffered == {}
    # file 0 holds 6 chunks: payloads of 2 chunks each; so does file 1
    assert [reducer for reducer, _ in sent] == [10, 10, 10, 11, 11, 11]
    received: dict[int, list[int]] = {}
    for _, payload in sent:
        frames = _frames(payload)
        assert sum(rows for _, rows in frames) == 2000
        for run, rows in frames:
            received.setdefault(run, []).append(rows)
    assert received == {0: [2000, 1000], 1: [1000, 2000], 2: [2000, 1000], 3: [1000, 2000]}


def _frames(payload: bytes) -> list[tuple[int, int]]:
    out, at = [], 0
    while at < len(payload):
        run, rows, length = shuffle._FRAME.unpack_from(payload, at)
        out.append((run, rows))
        at += shuffle._FRAME.size + length
    return out


def test_an_output_file_no_row_reaches_is_not_written() -> None:
    task = ClusterTask(None, 0, ({"size": 1},), ("a",), "zorder", 10, 1, True, 0, 0)  # type: ignore[arg-type]
    write = shuffle._WriteOutputFile([shuffle._OutputFile(task, 0)])
    assert write(0, iter([])) == (None, 0)
