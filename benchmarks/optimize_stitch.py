"""Benchmark: OPTIMIZE by row-group stitching against delta-rs and against copying the same bytes (issue 29, item 7).

Large files. A generated table (fixed numpy seed) of ``--files`` files (default 112: 970 MiB, the size of the issue's
table) written by delta-rs 1.6 (snappy), each one row group of ROWS_PER_FILE rows (``a`` int64 0..999, ``b`` int64
random, ``c`` float64, ``s`` random text): about 9 MiB a file, so every row group is at or above the default
``min_row_group_size`` (8 MiB) and is copied. A smaller table measures mostly the interpreter and its imports, which
``cp`` does not have (24 files, 208 MiB: about 10x ``cp``, 0.27x delta-rs). Cached under
``$TMPDIR/deltalite-bench/``; every run works on a fresh copy (data files hard-linked: no engine changes a file in
place; the log copied). Configurations, each a fresh process, as users run them, bytecode compiled first:

  deltalite            ``deltalite optimize --json TABLE --target-size 1GiB --max-concurrent-tasks 2`` (the CLI's
                       ``main`` under a runner that times its import and its call): row groups copied, a new footer
  deltalite/re-encode  the same with ``--min-row-group-size 1TiB``: every row decoded and encoded (the old path)
  delta-rs             ``python -c``: ``DeltaTable(p).optimize.compact(target_size=1GiB, max_concurrent_tasks=2,
                       writer_properties=WriterProperties(compression="SNAPPY"))``
  cp                   ``cp`` (coreutils) of every data file into an empty directory: the physical floor

``process s`` is spawn to exit, ``in-process s`` the call alone, with the library imported (the runner's clock; cp:
the process): delta-rs's runner imports ``deltalake`` before its clock starts, deltalite's the modules of its
``optimize`` command (`PRELOAD`: pyarrow, numpy and the engine; pyarrow loaded first as the console script loads it,
with one OpenBLAS thread), which the CLI would import inside the call. Each compaction is checked by a separate
child: delta-rs reads the same row count and column sums as the input.

What the comparison with ``cp`` leaves out, in deltalite's favour: neither syncs (both outputs are left dirty in the
page cache, written back after the process has exited; every run starts after a ``sync``, so none is throttled by
the write-back of the one before); the inputs are in the page cache (hard links of the cached
table, read by every run before); and the table is the best case for stitching (every file one row group above the
threshold, one schema, no deletion vectors). Against it: both copy with ``copy_file_range`` on one thread, but
deltalite also reads the log, plans, writes a footer and commits, and pays Python's start and numpy's and pyarrow's
imports (0.15-0.25 s, the same for any table size: a larger table has a lower ratio). ``cp`` is CPU-bound: on a
loaded machine it waits for a core as deltalite does, so the ratio is lowest under load and highest on an idle
machine.

Small files. ``optimize_compact.py``'s table (400 files of 20,000 rows, ~0.6 MiB each, 4 partitions; its generator
and cache; at version 100, so that the compaction commits a version neither engine checkpoints): every file is below
the threshold and re-encoded. ``deltalite optimize --target-size 256MiB
--min-file-size 256MiB`` against delta-rs writing the same codec (snappy), whole processes; rows checked by
``optimize_compact.py``'s multiset digest (delta-rs and deltalite read them); the bytes written compared. A third
process, ``pyarrow floor``, is the least any pyarrow engine does for the same compaction, in the best configuration
found for it: each partition decoded file by file on a thread of its own (whole-file reads, no threads inside pyarrow)
while its task thread encodes 16 MiB row groups with the encodings deltalite chooses here (DELTA_BINARY_PACKED for
``a`` and ``b``, DELTA_LENGTH_BYTE_ARRAY for ``s``, plain ``c``), statistics on, snappy, one OpenBLAS thread (as the
``deltalite`` command runs numpy's, which pyarrow loads); no log, no Delta statistics, no commit, nothing but pyarrow
imported. The small-file target is judged on the median of the ratios of runs side by
side (deltalite / delta-rs within one rotation): this machine's speed drifts by 20-30% over minutes, which moves a
ratio of medians taken minutes apart more than it moves either engine.

Read side. A full scan and a point query (``b == x``, x a value of the table) of the stitched table's file against
delta-rs's output: pyarrow (``pq.read_table``, row-group statistics), and Spark's own Parquet reader (classic pyspark
``local[2]``, ``spark.read.parquet`` on the data files, filter pushdown and parquet-java's column-index filtering on,
vectorised reader); warmed up, then the best of 3, the two files alternating.

S3. ``S3_FILES`` of the large files on a moto_server on 127.0.0.1 (the tests' server), reached through a TCP relay in
this process that counts the bytes each way; ``deltalite optimize`` (CLI, whole process) compacts them by composing
the output from ``UploadPartCopy`` ranges. Target: bytes the client sent <= 5% of the bytes compacted.

Targets: large files deltalite <= 0.4x delta-rs and <= 2.5x cp (whole process); small files <= 1.0x delta-rs (whole
process) with output no larger; S3 bytes sent <= 5% of the bytes compacted; identical rows everywhere.

Run:  .venv/bin/python benchmarks/optimize_stitch.py [--reps 3] [--files 112] [--skip-large] [--skip-small]
      [--skip-spark] [--skip-s3] [--no-write] [--merge] [--read-cost]
      (the small-file table alone, its figures merged into the results of a whole run:
      ``--reps 5 --skip-large --skip-spark --skip-s3 --merge``)
Results: printed tables, and benchmarks/results/optimize_stitch.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import _harness as h

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "optimize_stitch.json"
CACHE = Path(tempfile.gettempdir()) / "deltalite-bench"
WORK = CACHE / f"optimize-stitch-work-{os.getpid()}"
GIB = 1024**3
SEED = 20261202
ROWS_PER_FILE = 300_000
CHILD_TIMEOUT_S = 900
SMALL_TARGET_SIZE = 256 * 1024**2
TASKS = 2
# what deltalite's runner imports before its in-process clock starts (the command's modules, pyarrow and numpy)
PRELOAD = "airflow_provider_deltalite.cli.maintenance,airflow_provider_deltalite.maintenance.optimize"
# the share of a bootstrap interval of a median of side-by-side ratios
INTERVAL = 0.9
CONFIGS = ("deltalite", "deltalite/re-encode", "delta-rs", "cp")
SMALL_CONFIGS = ("deltalite", "delta-rs", "pyarrow floor")
S3_FILES = 8
S3_BUCKET = "bench-stitch"
TARGET_VS_DELTARS = 0.4
TARGET_VS_CP = 2.5
TARGET_SMALL_VS_DELTARS = 1.0
TARGET_SMALL_BYTES = 1.0
TARGET_S3_SENT = 0.05
# Spark's Parquet reader as issue 29 asks: filter pushdown, parquet-java's column-index filtering, vectorised
SPARK_READ_CONF = {
    "spark.sql.parquet.filterPushdown": "true",
    "spark.sql.parquet.enableVectorizedReader": "true",
    "spark.hadoop.parquet.filter.columnindex.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
}


def generate_child(dest: str, files: int) -> dict[str, Any]:
    import deltalake
    import numpy as np
    import pyarrow as pa

    bench = h.load_benchmark("optimize_compact")
    rng = np.random.default_rng(SEED)
    props = deltalake.WriterProperties(compression="SNAPPY", max_row_group_size=ROWS_PER_FILE)
    for _ in range(files):
        n = ROWS_PER_FILE
        batch = pa.table(
            {
                "a": pa.array(rng.integers(0, 1000, n), pa.int64()),
                "b": pa.array(rng.integers(0, 10**12, n), pa.int64()),
                "c": pa.array(rng.standard_normal(n), pa.float64()),
                "s": bench._strings(rng, n),
            }
        )
        deltalake.write_deltalake(dest, batch, mode="append", writer_properties=props)
    return summary_child(dest)


def summary_child(path: str) -> dict[str, Any]:
    """What delta-rs reads: rows and column sums (compared before and after a compaction)."""
    import deltalake
    import pyarrow.compute as pc

    t = deltalake.DeltaTable(path).to_pyarrow_table()
    return {
        "rows": t.num_rows,
        "sum_a": pc.sum(t["a"]).as_py(),
        "sum_b": pc.sum(t["b"]).as_py(),
        "sum_c": round(pc.sum(t["c"]).as_py(), 6),
        "chars_s": pc.sum(pc.utf8_length(t["s"])).as_py(),
        "files": len(deltalake.DeltaTable(path).file_uris()),
    }


# See the module docstring ("Small files"). Writes one file per partition into OUT.
SMALL_FLOOR = """
import json, os, queue, sys, threading, time
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy's idle OpenBLAS threads spin on the tasks' cores
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
t0 = time.perf_counter()
import pyarrow as pa
import pyarrow.parquet as pq
t1 = time.perf_counter()
path, out, tasks = sys.argv[1:]
GROUP = 16 * 1024 * 1024

def decode(files, handoff):
    for f in files:
        with pa.OSFile(str(f)) as fh:
            handoff.put(pq.ParquetFile(pa.BufferReader(fh.read_buffer())).read(use_threads=False))
    handoff.put(None)

def compact(partition):
    handoff = queue.Queue(64)
    threading.Thread(target=decode, args=(sorted(partition.glob("*.parquet")), handoff), daemon=True).start()
    writer, held, size, rows = None, [], 0, 0
    def flush():
        nonlocal writer, held, size
        group = pa.concat_tables(held)
        held, size = [], 0
        if writer is None:
            writer = pq.ParquetWriter(Path(out) / (partition.name + ".parquet"), group.schema, compression="snappy",
                                      use_dictionary=False, write_statistics=True,
                                      column_encoding={"a": "DELTA_BINARY_PACKED", "b": "DELTA_BINARY_PACKED",
                                                       "s": "DELTA_LENGTH_BYTE_ARRAY"})
        writer.write_table(group, row_group_size=group.num_rows)
    while (t := handoff.get()) is not None:
        held.append(t)
        size += t.nbytes
        rows += t.num_rows
        if size >= GROUP:
            flush()
    if held:
        flush()
    writer.close()
    return rows

partitions = sorted(p for p in Path(path).iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
with ThreadPoolExecutor(int(tasks)) as pool:
    rows = sum(pool.map(compact, partitions))
t2 = time.perf_counter()
sys.stderr.write(json.dumps({"import_s": t1 - t0, "call_s": t2 - t1, "code": 0, "doc": {"rows": rows}}) + "\\n")
"""


def optimize_argv(pc: Any, config: str, table: Path, out: Path, target: int, small: bool = False) -> list[str]:
    """The process a configuration runs (``pc``: process_cost.py, whose runners these are)."""
    if config.startswith("deltalite"):
        argv = [
            sys.executable,
            "-c",
            pc.DELTALITE_RUNNER,
            "optimize",
            "--json",
            str(table),
            "--target-size",
            str(target),
        ]
        argv += ["--max-concurrent-tasks", str(TASKS)]
        if small:
            argv += ["--min-file-size", str(target)]
        if config.endswith("re-encode"):
            argv += ["--min-row-group-size", str(1 << 40)]
        return argv
    if config == "delta-rs":
        return [sys.executable, "-c", pc.DELTARS_OPTIMIZE, str(table), "snappy", str(target), str(TASKS)]
    if config == "pyarrow floor":
        return [sys.executable, "-c", SMALL_FLOOR, str(table), str(out), str(TASKS)]
    files = [str(f) for f in h.data_files(table)]
    # `run_process` reads a report from the last line of stderr; cp prints none of its own
    return ["sh", "-c", 'cp -- "$@" && echo \'{"code": 0}\' >&2', "sh", *files, str(out)]


def bytes_added(config: str, table: Path, before: set[str], out: Path, doc: dict[str, Any]) -> int:
    if config.startswith("deltalite"):
        return int(doc["filesAdded"]["totalSize"])
    if config in ("cp", "pyarrow floor"):
        return sum(f.stat().st_size for f in out.iterdir())
    return sum(f.stat().st_size for f in h.data_files(table) if f.name not in before)


def measure(pc: Any, config: str, pristine: Path, work: Path, target: int, small: bool = False) -> dict[str, Any]:
    """One run of ``config`` on a fresh copy of ``pristine``: whole-process and in-process figures, bytes written."""
    table = pc.linked_copy(pristine, work / "table")
    out = work / "cp-out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    before = {f.name for f in h.data_files(table)}
    # the gigabyte the previous run left dirty in the page cache is written back now, not while this run writes its
    # own (the kernel throttles a writer while others' dirty pages are flushed: cp's wall time swung 0.28-0.83 s)
    os.sync()
    env = pc.child_env()
    if config.startswith("deltalite"):
        env["DELTALITE_BENCH_PRELOAD"] = PRELOAD
    run = pc.run_process(optimize_argv(pc, config, table, out, target, small), env)
    run["config"] = config
    if "error" in run:
        return run
    if config == "cp":
        run["import_s"], run["call_s"] = 0.0, run["process_wall_s"]
    run["bytes_added"] = bytes_added(config, table, before, out, run.get("doc") or {})
    run["table"] = str(table)
    return run


def table_files(table: str) -> list[str]:
    import deltalake

    return [u.removeprefix("file://") for u in deltalake.DeltaTable(table).file_uris()]


def point_value(table: str) -> int:
    """A value of ``b`` that the table holds (row 123,457 of its first file): the point query finds a row."""
    import pyarrow.parquet as pq

    return int(pq.read_table(table_files(table)[0], columns=["b"]).column("b")[123_456].as_py())


def read_child(stitched: str, delta_rs: str, value: int) -> dict[str, Any]:
    """pyarrow: full scan and point query of each compacted table's data files, in-process; warmed up, best of 3."""
    import pyarrow.parquet as pq

    tables = {"deltalite": table_files(stitched), "delta-rs": table_files(delta_rs)}
    times: dict[str, dict[str, list[float]]] = {n: {"scan": [], "point": []} for n in tables}
    hits: dict[str, int] = {}
    rows: dict[str, int] = {}
    for rep in range(4):
        for name in tables if rep % 2 == 0 else reversed(list(tables)):
            t0 = time.perf_counter()
            rows[name] = pq.read_table(tables[name]).num_rows
            t1 = time.perf_counter()
            hits[name] = pq.read_table(tables[name], filters=[("b", "==", value)]).num_rows
            t2 = time.perf_counter()
            if rep:  # the first round warms the page cache and pyarrow up
                times[name]["scan"].append(t1 - t0)
                times[name]["point"].append(t2 - t1)
    return {
        name: {
            "rows": rows[name],
            "point_hits": hits[name],
            "scan_s": min(times[name]["scan"]),
            "point_s": min(times[name]["point"]),
            "row_groups": sum(pq.ParquetFile(f).metadata.num_row_groups for f in files),
        }
        for name, files in tables.items()
    }


def spark_read_child(stitched: str, delta_rs: str, value: int) -> dict[str, Any]:
    """Spark's Parquet reader (classic pyspark local[2], `SPARK_READ_CONF`): full scan (every column summed) and
    point query (the rows with ``b == value``, every column) of each table's data files; warmed up, best of 3. (The
    scan takes the largest ``b``: its sum overflows a long, an error under ANSI SQL.)"""
    from pyspark.sql import SparkSession

    tables = {"deltalite": table_files(stitched), "delta-rs": table_files(delta_rs)}
    builder = SparkSession.builder.master("local[2]").appName("optimize_stitch-read")
    for key, conf_value in SPARK_READ_CONF.items():
        builder = builder.config(key, conf_value)
    spark = builder.getOrCreate()
    try:
        times: dict[str, dict[str, list[float]]] = {n: {"scan": [], "point": []} for n in tables}
        rows: dict[str, int] = {}
        hits: dict[str, int] = {}
        for rep in range(4):
            for name in tables if rep % 2 == 0 else reversed(list(tables)):
                frame = spark.read.parquet(*tables[name])
                t0 = time.perf_counter()
                total = frame.selectExpr("count(*)", "sum(a)", "max(b)", "sum(c)", "sum(length(s))").collect()[0]
                t1 = time.perf_counter()
                found = frame.where(f"b = {value}").collect()
                t2 = time.perf_counter()
                rows[name], hits[name] = int(total[0]), len(found)
                if rep:  # the first round warms the JVM up
                    times[name]["scan"].append(t1 - t0)
                    times[name]["point"].append(t2 - t1)
        return {
            name: {
                "rows": rows[name],
                "point_hits": hits[name],
                "scan_s": min(times[name]["scan"]),
                "point_s": min(times[name]["point"]),
            }
            for name in tables
        }
    finally:
        spark.stop()


class CountingRelay:
    """A TCP relay on 127.0.0.1 to ``port`` that counts the bytes each way: what a client sends to the server is
    counted outside the client, at the socket."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sent = 0  # client -> server
        self.received = 0  # server -> client
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self) -> None:
        with self._lock:
            self.sent = self.received = 0

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.port))
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, upstream: bool) -> None:
        try:
            while True:
                data = src.recv(1 << 20)
                if not data:
                    break
                dst.sendall(data)
                with self._lock:
                    if upstream:
                        self.sent += len(data)
                    else:
                        self.received += len(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._listener.close()


def bench_s3(pc: Any, pristine: Path, files: int, reps: int) -> dict[str, Any]:
    """OPTIMIZE of ``files`` of the large files on moto S3 through a `CountingRelay`; bytes sent vs compacted."""
    import s3fs

    sys.path.insert(0, str(h.REPO))  # the tests' S3 server (moto with atomic conditional writes)
    from tests.moto_server import start_moto_server, stop_moto_server

    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="deltalite-stitch-s3-") as tmp:
        local = Path(tmp) / "table"
        subset_child = ["--subset", str(pristine), str(local), str(files)]
        h.run_child_or_exit(__file__, subset_child, CHILD_TIMEOUT_S)
        proc, options = start_moto_server(Path(tmp) / "moto.log")
        relay = CountingRelay(int(options["endpoint_url"].rsplit(":", 1)[1]))
        try:
            fs = s3fs.S3FileSystem(key=options["key"], secret=options["secret"], endpoint_url=options["endpoint_url"])
            fs.call_s3("create_bucket", Bucket=S3_BUCKET)
            for rep in range(reps):
                uri = f"s3://{S3_BUCKET}/t{rep}"
                fs.put(str(local), uri.removeprefix("s3://"), recursive=True)
                argv = [sys.executable, "-c", pc.DELTALITE_RUNNER, "optimize", "--json", uri]
                argv += ["--target-size", str(GIB), "--max-concurrent-tasks", str(TASKS)]
                for key, value in (("key", options["key"]), ("secret", options["secret"])):
                    argv += ["--storage-option", f"{key}={value}"]
                argv += ["--storage-option", f"endpoint_url={relay.endpoint}"]
                relay.reset()
                run = pc.run_process(argv, pc.child_env())
                run["client_sent_bytes"], run["client_received_bytes"] = relay.sent, relay.received
                if "error" not in run:
                    doc = run["doc"]
                    run["bytes_compacted"] = doc["filesRemoved"]["totalSize"]
                    run["files_copied"] = doc["numFilesCopied"]
                    run["sent_share"] = relay.sent / run["bytes_compacted"]
                runs.append(run)
                shown = f"{run['sent_share']:.4f}" if "sent_share" in run else run.get("error")
                print(
                    f"  s3 rep {rep}: process {run['process_wall_s']:.2f}s, sent {relay.sent / h.MIB:.2f} MiB, "
                    f"received {relay.received / h.MIB:.2f} MiB, sent / compacted {shown}, load {run['load_1m']}"
                )
        finally:
            relay.close()
            stop_moto_server(proc)
    return {"files": files, "runs": runs}


def subset_child(pristine: str, dest: str, files: int) -> dict[str, Any]:
    """A table of the first ``files`` of the large table's files (delta-rs writes it: a fresh log)."""
    import deltalake
    import pyarrow.parquet as pq

    chosen = table_files(pristine)[:files]
    props = deltalake.WriterProperties(compression="SNAPPY", max_row_group_size=ROWS_PER_FILE)
    for f in chosen:
        deltalake.write_deltalake(dest, pq.read_table(f), mode="append", writer_properties=props)
    return {"files": len(table_files(dest))}


def read_cost_child(pristine: str) -> dict[str, Any]:
    """Full-scan cost of the same rows in row groups of different sizes (pyarrow, one file, best of 5): what a
    row group costs a reader, for choosing ``min_row_group_size``."""
    import io

    import pyarrow.parquet as pq

    rows = pq.read_table([str(f) for f in h.data_files(Path(pristine))[:12]])
    out: dict[str, Any] = {}
    for group_rows in (4_096, 16_384, 32_768, 65_536, 131_072, 262_144, 524_288, 1_048_576):
        buf = io.BytesIO()
        pq.write_table(rows, buf, row_group_size=group_rows, compression="snappy")
        data = buf.getvalue()
        meta = pq.ParquetFile(io.BytesIO(data)).metadata
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            pq.read_table(io.BytesIO(data))
            times.append(time.perf_counter() - t0)
        out[str(group_rows)] = {
            "row_groups": meta.num_row_groups,
            "mib_per_group": len(data) / meta.num_row_groups / h.MIB,
            "scan_s": min(times),
        }
    return out


def print_read_cost(cost: dict[str, Any]) -> None:
    base = min(c["scan_s"] for c in cost.values())
    print(f"{'rows/group':>11s}{'MiB/group':>11s}{'groups':>8s}{'scan s':>9s}{'x best':>8s}")
    for rows, c in cost.items():
        print(
            f"{rows:>11s}{c['mib_per_group']:>11.2f}{c['row_groups']:>8d}{c['scan_s']:>9.3f}{c['scan_s'] / base:>8.2f}"
        )


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if "error" not in r]
    return {
        "process_s": h.median(r["process_wall_s"] for r in ok),
        "call_s": h.median(r.get("call_s") for r in ok),
        "import_s": h.median(r.get("import_s") for r in ok),
        "cpu_s": h.median(r["process_cpu_s"] for r in ok),
        "peak_rss_mb": h.median(r["process_peak_rss_mb"] for r in ok),
        "bytes_added": ok[-1]["bytes_added"] if ok else None,
        "errors": len(runs) - len(ok),
    }


def print_table(med: dict[str, dict[str, Any]], floor: str | None) -> None:
    header = f"{'config':22s}{'process s':>11s}{'in-process s':>14s}{'import s':>10s}{'cpu s':>8s}{'x delta-rs':>12s}"
    print(f"{header}{'x cp' if floor else '':>8s}{'RSS MB':>9s}{'MiB out':>9s}")
    for c, m in med.items():
        if m["process_s"] is None:
            print(f"{c:22s} failed")
            continue
        vs_rs = h.ratio(m["process_s"], med["delta-rs"]["process_s"]) or 0
        vs_cp = f"{h.ratio(m['process_s'], med[floor]['process_s']) or 0:>8.2f}" if floor else f"{'':>8s}"
        print(
            f"{c:22s}{m['process_s']:>11.2f}{(m['call_s'] or 0):>14.2f}{(m['import_s'] or 0):>10.2f}{m['cpu_s']:>8.2f}"
            f"{vs_rs:>12.2f}{vs_cp}{(m['peak_rss_mb'] or 0):>9.0f}{(m['bytes_added'] or 0) / h.MIB:>9.1f}"
        )


def show(label: str, rep: int, run: dict[str, Any]) -> None:
    if "error" in run:
        print(f"  {label:28s} rep {rep}: ERROR {run['error'][-300:]}")
        return
    print(
        f"  {label:28s} rep {rep}: process {run['process_wall_s']:.2f}s, in-process {run['call_s']:.2f}s, "
        f"cpu {run['process_cpu_s']:.2f}s, others {run['others_cores_during']:.1f} cores, load {run['load_1m']}"
    )


def bench_large(pc: Any, pristine: Path, info: dict[str, Any], reps: int) -> tuple[dict[str, Any], dict[str, Path]]:
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in CONFIGS}
    kept: dict[str, Path] = {}
    for rep in range(reps):
        for config in h.rotated(list(CONFIGS), rep):
            run = measure(pc, config, pristine, WORK / config.replace("/", "-"), GIB)
            if "error" not in run and config != "cp":
                after = h.run_child_or_exit(__file__, ["--summary", run["table"]], CHILD_TIMEOUT_S)
                run["identical"] = {k: v for k, v in after.items() if k != "files"} == {
                    k: v for k, v in info.items() if k != "files"
                }
                run["files_after"] = after["files"]
                if not run["identical"]:
                    run["error"] = f"wrong result: {after}"
                kept[config] = Path(run["table"])
            runs[config].append(run)
            show(config, rep, run)
    return runs, kept


def bench_small(pc: Any, reps: int) -> dict[str, Any]:
    oc = h.load_benchmark("optimize_compact")
    pristine, info, note = oc.prepare_table(False)
    print(f"small files: {note} -> {info['files']} files, {info['bytes'] / h.MIB:.0f} MiB, {info['rows']:,} rows")
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in SMALL_CONFIGS}
    for rep in range(reps):
        for config in h.rotated(list(SMALL_CONFIGS), rep):
            run = measure(pc, config, pristine, WORK / f"small-{config.replace(' ', '-')}", SMALL_TARGET_SIZE, True)
            if "error" not in run and config == "pyarrow floor":
                run["identical"] = run["doc"]["rows"] == info["rows"]  # no table to read back: the rows it wrote
            elif "error" not in run:
                check = h.run_child_or_exit(
                    oc.__file__, ["--verify-delta", run["table"], json.dumps(info["expected"])], CHILD_TIMEOUT_S
                )
                run["identical"] = bool(check.get("identical"))
                run["files_after"] = check.get("files_after")
                if not run["identical"]:
                    run["error"] = f"wrong result: {check}"
            runs[config].append(run)
            show(f"small {config}", rep, run)
    return {"table": {k: v for k, v in info.items() if k != "expected"}, "runs": runs, "pairwise": pairwise(runs)}


def pairwise(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Each configuration's whole-process time over delta-rs's in the same rotation: the runs of one rep; their
    median and its bootstrap interval (`_harness.median_interval`: this machine's speed switches between two
    levels within seconds, a fixed loop taking 65-70 or 90-100 ms, so one ratio ranges 0.7-1.3)."""
    out: dict[str, Any] = {}
    for config, mine in runs.items():
        if config == "delta-rs":
            continue
        ratios = [
            a["process_wall_s"] / b["process_wall_s"]
            for a, b in zip(mine, runs["delta-rs"], strict=True)
            if "error" not in a and "error" not in b
        ]
        out[config] = {"ratios": ratios, "median": h.median(ratios), "interval": h.median_interval(ratios, INTERVAL)}
    return out


def small_interval_note(interval: list[float] | None) -> str:
    """Where the median's interval lies against the small-file target: a median under the target whose interval
    reaches past it does not show that the target holds."""
    if interval is None:
        return ""
    lo, hi = interval
    where = "below" if hi <= TARGET_SMALL_VS_DELTARS else "above" if lo > TARGET_SMALL_VS_DELTARS else "across"
    return f"{INTERVAL:.0%} interval {lo:.3f}-{hi:.3f}, {where} the target"


def merge_previous(
    report: dict[str, Any],
    targets: list[dict[str, Any]],
    previous: dict[str, Any],
    med: dict[str, Any],
    small: dict[str, Any] | None,
    reads: dict[str, Any],
    s3: dict[str, Any] | None,
) -> list[dict[str, Any]]:
    """Fill the parts of ``report`` this run skipped from the ``previous`` results (each part keeps its own
    machine figures: ``previous_machine`` says when those were measured); the targets of both, this run's first."""
    taken: set[str] = set()
    if not med:
        taken |= {"runs", "medians", "table"}
    if small is None:
        taken.add("small_files")
    if not reads:
        taken.add("reads")
    if s3 is None:
        taken.add("s3")
    for key in taken:
        report[key] = previous.get(key)
    if taken:
        report["merged_from_previous"] = {"parts": sorted(taken), "machine": previous.get("machine")}
    prefixes = {"runs": "large:", "small_files": "small:", "s3": "s3:"}
    kept = [
        t
        for t in previous.get("targets", [])
        if any(t["target"].startswith(prefixes[k]) for k in prefixes if k in taken)
    ]
    ours = [t for t in targets if not t["target"].startswith("identical")]
    return ours + kept + [t for t in targets if t["target"].startswith("identical")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--files", type=int, default=112)
    parser.add_argument("--skip-large", action="store_true", help="no large-file table (nor its read side)")
    parser.add_argument("--skip-small", action="store_true", help="no small-file table")
    parser.add_argument("--skip-spark", action="store_true", help="no Spark read side")
    parser.add_argument("--skip-s3", action="store_true", help="no moto S3 run")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--merge", action="store_true", help="keep the results file's parts this run skips (large, small, reads, S3)"
    )
    parser.add_argument("--read-cost", action="store_true", help="only measure the full-scan cost per row-group size")
    args = parser.parse_args()
    started = time.perf_counter()
    h.compile_bytecode()
    pc = h.load_benchmark("process_cost")
    root = CACHE / f"optimize-stitch-s{SEED}-n{args.files}"
    pristine = root / "pristine"
    info = h.cached_info(root, False)
    if info is None:
        info = h.run_child_or_exit(__file__, ["--generate", str(pristine), str(args.files)], CHILD_TIMEOUT_S)
        (root / "info.json").write_text(json.dumps(info))
    input_bytes = sum(f.stat().st_size for f in h.data_files(pristine))
    if args.read_cost:
        print_read_cost(h.run_child_or_exit(__file__, ["--read-cost-child", str(pristine)], CHILD_TIMEOUT_S))
        return 0
    runs: dict[str, list[dict[str, Any]]] = {}
    kept: dict[str, Path] = {}
    med: dict[str, dict[str, Any]] = {}
    if not args.skip_large:
        print(
            f"table: {info['files']} files, {info['rows']} rows, {input_bytes / h.MIB:.0f} MiB (one row group a file)"
        )
        runs, kept = bench_large(pc, pristine, info, args.reps)
        med = {c: summarise(runs[c]) for c in CONFIGS}
        print()
        print_table(med, "cp")
    small = None
    if not args.skip_small:
        print()
        small = bench_small(pc, args.reps)
        small["medians"] = {c: summarise(small["runs"][c]) for c in SMALL_CONFIGS}
        print()
        print_table(small["medians"], None)
        for config, p in small["pairwise"].items():
            shown = ", ".join(f"{r:.2f}" for r in p["ratios"])
            note = small_interval_note(p["interval"])
            note = f" ({note})" if note else ""
            print(f"  {config} / delta-rs, run by run: {shown}; median {p['median']:.3f}{note}")
    reads: dict[str, Any] = {}
    if "deltalite" in kept and "delta-rs" in kept:
        value = h.run_child_or_exit(__file__, ["--point-value", str(pristine)], CHILD_TIMEOUT_S)["value"]
        tables = [str(kept["deltalite"]), str(kept["delta-rs"]), str(value)]
        for reader, flag in (("pyarrow", "--read"), ("spark", "--spark-read")):
            if reader == "spark" and args.skip_spark:
                continue
            result, err = h.run_child(__file__, [flag, *tables], CHILD_TIMEOUT_S)
            reads[reader] = result if result is not None else {"error": err[-600:]}
        print()
        print(f"{'read (warm, best of 3)':28s}{'scan s':>9s}{'point s':>9s}{'hits':>6s}{'row groups':>12s}")
        for reader, result in reads.items():
            if "error" in result:
                print(f"{reader:28s} failed: {result['error']}")
                continue
            for name, r in result.items():
                groups = str(r["row_groups"]) if "row_groups" in r else ""
                label = f"{reader} {name}"
                print(f"{label:28s}{r['scan_s']:>9.3f}{r['point_s']:>9.3f}{r['point_hits']:>6d}{groups:>12s}")
    s3 = None
    if not args.skip_s3:
        print()
        s3 = bench_s3(pc, pristine, S3_FILES, args.reps)
    targets = []
    if med:
        process = {c: med[c]["process_s"] for c in CONFIGS}
        targets += [
            h.target(
                "large: deltalite / delta-rs (whole process)",
                h.ratio(process["deltalite"], process["delta-rs"]),
                TARGET_VS_DELTARS,
            ),
            h.target(
                "large: deltalite / cp (whole process)", h.ratio(process["deltalite"], process["cp"]), TARGET_VS_CP
            ),
        ]
    checked = [r for c in CONFIGS if c != "cp" for r in runs.get(c, [])]
    if small is not None:
        sm = small["medians"]
        targets += [
            h.target(
                "small: deltalite / delta-rs (whole process, median of side-by-side ratios)",
                small["pairwise"]["deltalite"]["median"],
                TARGET_SMALL_VS_DELTARS,
                note=small_interval_note(small["pairwise"]["deltalite"]["interval"]),
            ),
            h.target(
                "small: bytes written / delta-rs'",
                h.ratio(sm["deltalite"]["bytes_added"], sm["delta-rs"]["bytes_added"]),
                TARGET_SMALL_BYTES,
            ),
        ]
        checked += [r for c in SMALL_CONFIGS for r in small["runs"][c]]
    if s3 is not None:
        shares = [r.get("sent_share") for r in s3["runs"]]
        worst = max(shares) if shares and None not in shares else None
        targets.append(h.target("s3: bytes sent / bytes compacted (worst run)", worst, TARGET_S3_SENT))
    targets.append(h.check("identical rows (read back by delta-rs)", all(r.get("identical") for r in checked)))
    report: dict[str, Any] = {
        "machine": h.machine_info(("pyarrow", "deltalake", "numpy", "pyspark", "moto")),
        "code": h.code_under_test(
            [
                "engine/parquet/*.py",
                "engine/rewrite*.py",
                "engine/storage/local.py",
                "cli/*.py",
            ]
        ),
        "table": {**info, "bytes": input_bytes},
        "runs": runs,
        "medians": med,
        "small_files": small,
        "reads": reads,
        "s3": s3,
        "targets": targets,
        "note": "shared 2-core machine with other work running: timings are noisy; compare ratios within one run",
    }
    if args.merge and RESULTS.exists():
        targets = merge_previous(report, targets, json.loads(RESULTS.read_text()), med, small, reads, s3)
        report["targets"] = targets  # the file keeps every part's verdict, not only this run's
    print()
    h.print_targets(targets, value_format="{:.3f}")
    shutil.rmtree(WORK, ignore_errors=True)
    return h.finish(report, targets, RESULTS, started, not args.no_write)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--generate":
        print(json.dumps(generate_child(sys.argv[2], int(sys.argv[3]))))
    elif len(sys.argv) > 1 and sys.argv[1] == "--summary":
        print(json.dumps(summary_child(sys.argv[2])))
    elif len(sys.argv) > 1 and sys.argv[1] == "--read-cost-child":
        print(json.dumps(read_cost_child(sys.argv[2])))
    elif len(sys.argv) > 1 and sys.argv[1] == "--point-value":
        print(json.dumps({"value": point_value(sys.argv[2])}))
    elif len(sys.argv) > 1 and sys.argv[1] == "--read":
        print(json.dumps(read_child(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
    elif len(sys.argv) > 1 and sys.argv[1] == "--spark-read":
        print(json.dumps(spark_read_child(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
    elif len(sys.argv) > 1 and sys.argv[1] == "--subset":
        print(json.dumps(subset_child(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
    else:
        sys.exit(main())
