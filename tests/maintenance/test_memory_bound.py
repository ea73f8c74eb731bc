"""The memory bound of compaction and Z-order: what a task holds is set by the writer and run settings, not by the
table (the formula is in `engine.rewrite` and `maintenance.clustering.runs`; benchmarks/memory_bound.py measures it at
1 and 5 GiB)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine.data_file_writer import WriterOptions
from airflow_provider_deltalite.engine.data_files import iter_file_rows
from airflow_provider_deltalite.engine.storage import Storage
from airflow_provider_deltalite.maintenance.optimize import optimize
from tests.oracles import agreed_rows

MIB = 1024 * 1024


def _ints(path: Path, files: int, rows: int) -> Path:
    """``files`` appends of ``rows`` rows of two int64 columns: 16 bytes a row in Arrow."""
    for k in range(files):
        ids = np.arange(k * rows, (k + 1) * rows, dtype=np.int64)
        deltalake.write_deltalake(str(path), pa.table({"id": ids, "v": ids * 7 % 1001}), mode="append")
    return path


def test_a_file_streams_one_row_group_at_a_time_in_the_batches_it_always_had(tmp_path: Path) -> None:
    # 30 row groups of 100,000 random int64 (incompressible): 24 MB of compressed column chunks
    rng = np.random.default_rng(5)
    rows = pa.table({"x": rng.integers(0, 1 << 62, 3_000_000)})
    pq.write_table(rows, tmp_path / "f.parquet", row_group_size=100_000, compression="snappy")
    storage = Storage(str(tmp_path))
    schema = {"type": "struct", "fields": [{"name": "x", "type": "long", "nullable": True, "metadata": {}}]}

    def stream() -> Iterator[pa.Table]:
        return iter_file_rows(storage, "f.parquet", None, schema, mode="none", partition_columns=())

    pool = pa.default_memory_pool()
    start = pool.bytes_allocated()
    held, sizes = 0, []
    for batch in stream():
        held = max(held, pool.bytes_allocated() - start)
        sizes.append(batch.num_rows)
    # batches of 131,072 rows spanning row groups, as pyarrow's whole-file reader cuts them (so a rewrite writes the
    # same row groups), while holding one row group's chunks and a batch or two (6 MB), where that reader holds every
    # row group it has not finished (33 MB here; a 1 GiB file, about 1 GiB)
    assert sizes == [131_072] * 22 + [116_416]
    assert held < 12 * MIB
    assert pa.concat_tables(stream()).column("x").equals(rows.column("x"))


def test_compaction_writes_a_row_group_as_soon_as_the_buffer_reaches_row_group_bytes(tmp_path: Path) -> None:
    path = _ints(tmp_path / "t", files=10, rows=10_000)
    before = agreed_rows(path)
    # each input file arrives as one chunk of 160,000 bytes; 400,000 buffered bytes are reached after 3 chunks, so the
    # writer holds at most 3 chunks and writes row groups of 30,000, 30,000, 30,000 and the last 10,000 rows
    writer = WriterOptions(row_group_bytes=400_000)
    stats = optimize(DeltaTable(str(path)), target_size=64 * MIB, writer_options=writer, max_concurrent_tasks=1)
    assert (stats.num_files_removed, stats.num_files_added) == (10, 1)
    (add,) = DeltaTable(str(path)).snapshot().files.column("path").to_pylist()
    meta = pq.ParquetFile(path / add).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [30_000, 30_000, 30_000, 10_000]
    assert agreed_rows(path) == before


# Runs in a fresh interpreter, so that pyarrow's peak allocation (``max_memory``) is this rewrite's alone.
_PEAK_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import pyarrow as pa
    from airflow_provider_deltalite import DeltaTable
    from airflow_provider_deltalite.engine.data_file_writer import WriterOptions
    from airflow_provider_deltalite.executors import LocalExecutor
    from airflow_provider_deltalite.maintenance.clustering.zorder import zorder
    from airflow_provider_deltalite.maintenance.optimize import optimize

    path, op = sys.argv[1], sys.argv[2]
    writer = WriterOptions(row_group_bytes=1024 * 1024, dictionary=False)
    table = DeltaTable(path)
    if op == "optimize":
        stats = optimize(table, target_size=1 << 30, min_file_size=1 << 30, writer_options=writer,
                         executor=LocalExecutor(1))
    else:
        stats = zorder(table, ["v"], writer_options=writer, run_bytes=1024 * 1024, executor=LocalExecutor(1))
    print(json.dumps({"peak": pa.default_memory_pool().max_memory(), "added": stats.num_files_added, "op": op,
                      "removed": stats.num_files_removed}))
    """
)


def _peak(path: Path, op: str) -> dict[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", _PEAK_SCRIPT, str(path), op], capture_output=True, text=True, check=True, timeout=120
    )
    return json.loads(out.stdout.splitlines()[-1])


def test_a_rewrite_allocates_a_few_row_groups_and_a_z_order_a_few_runs_however_large_the_table(tmp_path: Path) -> None:
    # 2 files x 900,000 rows: 28.8 MB of rows in Arrow (as delta-rs writes them: a 1,048,576-row group at most)
    path = _ints(tmp_path / "t", files=2, rows=900_000)
    # compaction with 1 MiB row groups (no dictionaries: their hash tables would add a constant): the input row group
    # being read (900,000 rows, 7 MB compressed), a batch decoded from it, the writer's buffer (row_group_bytes plus a
    # batch, 3 MB) and the row group being encoded; 13 MB measured, against 28.8 MB of rows
    compacted = _peak(path, "optimize")
    assert (compacted["removed"], compacted["added"]) == (2, 1)
    assert compacted["peak"] < 16 * MIB
    # Z-order with 1 MiB runs (estimated at 3x the compressed bytes: about 2 MB each here, with their key columns):
    # the one run being sorted and written, a batch being routed, and the same reader and writer; 12 MB measured
    clustered = _peak(path, "zorder")
    assert (clustered["removed"], clustered["added"]) == (1, 1)
    assert clustered["peak"] < 16 * MIB
    read = deltalake.DeltaTable(str(path)).to_pyarrow_table()  # delta-rs reads every row back once
    assert np.array_equal(np.sort(read.column("id").to_numpy()), np.arange(1_800_000))
    assert np.array_equal(read.column("v").to_numpy(), read.column("id").to_numpy() * 7 % 1001)
