"""Benchmark: Z-ORDER of one partition of at least 1 GiB through the Spark shuffle path, and Spark Connect vs classic.

Part 1, the shuffle. Input: a generated unpartitioned table (fixed numpy seed) of files of 1,000,000 rows each
(``a`` int64 0..999, ``b`` int64 0..10^9, ``c`` float64, ``s`` string of 4..14 letters and spaces, the generator of
``optimize_compact.py``), written by delta-rs with snappy (deltalite's own codec) until the table holds at least
1 GiB (``--quick``: 200 MiB); cached under ``$TMPDIR/deltalite-bench/``. Z-order by ``(a, b)`` into
``TARGET_SIZE`` files, each run in a fresh subprocess on a fresh copy of the table:

  rdd-v0.1  the v0.1 shuffle, kept here as a baseline: `SparkExecutor` with the RDD ``map_reduce`` of commit
            515b66b (pickled (reducer, (status, payload)) records, ``partitionBy``) and that commit's map and reduce
            functions (an lz4 Arrow IPC payload per input batch and run, decoded and spilled again by the reducer),
            ``local[2]``
  exchange  today's `SparkExecutor` (a DataFrame exchange of Arrow data), ``local[2]``
  delta-rs  ``deltalake.DeltaTable(path).optimize.z_order(["a", "b"], target_size=T, max_concurrent_tasks=2,
            writer_properties=WriterProperties(compression="SNAPPY"))`` (same columns, size, codec)
  local     deltalite with ``LocalExecutor(2)`` (one task clusters the partition: no shuffle), bytecode compiled

Both Spark configurations force the shuffle path (``SHUFFLE_ABOVE_BYTES = 0``; at 1 GiB it is taken anyway).
CPU: ``cpu_s`` is the whole process tree of the measured subprocess (driver, JVM, Spark's Python workers; user+sys
from ``wait4`` of the child and of the orphans it leaves, or the /proc samples, whichever is larger), JVM start and
shutdown included; ``call_cpu_s`` is the tree's CPU during the ``zorder`` call alone (/proc utime+stime+cutime+
cstime of the child and its descendants before and after). Wall: the ``zorder`` call (Spark: session start apart).
Every run's rows are checked against the input by a separate child reading the table with delta-rs (row count and
an order-independent 64-bit sum of per-row hashes over every column).

Part 2, Spark Connect vs classic: OPTIMIZE (compaction) of ``optimize_compact.py``'s issue-4 table (400 files /
~260 MB, its generator and cache) with target and minimum size 256 MiB, through ``SparkExecutor.start("local[2]")``
and through ``SparkExecutor.start("sc://...")`` on a Spark Connect server (its own ``local[2]``) that this script
starts on 127.0.0.1 (as tests/executors/spark_cluster.py ``start_connect_server`` does, with default JIT flags);
wall time of the ``optimize`` call, session start apart.

Targets: exchange CPU/GiB <= rdd-v0.1 CPU/GiB / 3; exchange wall <= delta-rs wall; Connect wall <= 1.2x classic.

Run:  .venv/bin/python benchmarks/zorder_spark_scale.py [--quick] [--reps 1] [--only rdd|exchange|deltars|local|connect]
      [--regenerate]     (DELTALITE_BENCH_QUICK=1 is --quick)
Results: printed table, and benchmarks/results/zorder_spark_scale.json (not written in quick mode).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import _harness as h

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "zorder_spark_scale.json"
CACHE = Path(tempfile.gettempdir()) / "deltalite-bench"
WORK = CACHE / f"zorder-spark-scale-work-{os.getpid()}"

MIB = h.MIB
GIB = 1024 * MIB
TARGET_SIZE = 128 * MIB
COLUMNS = ["a", "b"]
ROWS_PER_FILE = 1_000_000
SEED = 20261124
GEN_FORMAT = 1
CHILD_TIMEOUT_S = 3600
TARGET_CPU_VS_RDD = 1 / 3
TARGET_WALL_VS_DELTARS = 1.0
TARGET_CONNECT_VS_CLASSIC = 1.2
COMPACT_SIZE = 256 * MIB

CONFIGS = {
    "rdd-v0.1": ("rdd", "local[2]"),
    "exchange": ("spark", "local[2]"),
    "delta-rs": ("deltars", "2"),
    "local": ("local", "2"),
}
ONLY = {"rdd": ["rdd-v0.1"], "exchange": ["exchange"], "deltars": ["delta-rs"], "local": ["local"], "connect": []}

_OC = h.load_benchmark("optimize_compact")

CODE_UNDER_TEST = (
    "maintenance/clustering/shuffle.py",
    "maintenance/clustering/runs.py",
    "executors/spark.py",
    "executors/spark_tasks.py",
)


# -- the v0.1 baseline: the RDD shuffle of commit 515b66b -------------------------------------------------------
# Runs in the measured child, where this script is __main__: cloudpickle ships these functions to the workers by
# value. Only map_reduce differs from today's executor; map, warm-up and the engine shipping are today's.


def _v01_map_side(fn: Callable[[Any], Iterator[tuple[int, bytes]]], items: Iterator[Any]) -> Iterator[Any]:
    from airflow_provider_deltalite.engine.errors import DeltaLiteError
    from airflow_provider_deltalite.executors.spark_errors import OK, error_record

    for item in items:
        try:
            for reducer, payload in fn(item):
                yield reducer, (OK, payload)
        except DeltaLiteError as exc:
            yield 0, error_record(exc)
            return


def _v01_reduce_side(fn: Callable[[int, Iterator[bytes]], Any], reducer: int, records: Iterator[Any]) -> Iterator[Any]:
    from airflow_provider_deltalite.engine.errors import DeltaLiteError
    from airflow_provider_deltalite.executors.spark_errors import OK, error_record

    failed: list[Any] = []

    def payloads() -> Iterator[bytes]:
        for _, (status, value) in records:
            if status != OK:
                failed.append((status, value))
                return
            yield value

    try:
        result = fn(reducer, payloads())
    except DeltaLiteError as exc:
        yield error_record(exc)
        return
    yield failed[0] if failed else (OK, result)


def _v01_identity(reducer: int) -> int:
    return reducer


# v0.1's clustering map and reduce functions (maintenance/clustering/shuffle.py at 515b66b): a payload per (input
# batch, run), each an lz4 Arrow IPC stream; the reducer decodes each and spills it to an IPC file per run.


def _v01_route_group(group: Any) -> Iterator[tuple[int, bytes]]:
    from airflow_provider_deltalite.maintenance.clustering.runs import route_file

    for offset, file in enumerate(group.task.files):
        for run, chunk in route_file(group.task, group.plan, file, group.first_index + offset):
            yield group.first_reducer + group.plan.file_of_run[run], _v01_to_ipc(run, chunk)


def _v01_to_ipc(run: int, chunk: Any) -> bytes:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression="lz4")
    with pa.ipc.new_stream(sink, chunk.schema.with_metadata({b"run": str(run).encode()}), options=options) as w:
        w.write_table(chunk)
    return sink.getvalue().to_pybytes()


class _V01WriteOutputFile:
    def __init__(self, outputs: Sequence[Any]) -> None:
        self.outputs = list(outputs)

    def __call__(self, reducer: int, payloads: Iterator[bytes]) -> tuple[dict | None, int]:
        import pyarrow as pa

        from airflow_provider_deltalite.maintenance.clustering.runs import RunSpill, write_runs

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


def rdd_executor(master: str) -> Any:
    """`SparkExecutor` with the v0.1 (515b66b) RDD ``map_reduce``: the baseline, not shipped code."""
    from airflow_provider_deltalite.executors.spark import SparkExecutor
    from airflow_provider_deltalite.executors.spark_errors import OK, error_from_record

    class RddShuffleExecutorV01(SparkExecutor):
        def map_reduce(self, map_fn: Any, items: Sequence[Any], reduce_fn: Any, num_reducers: int) -> list[Any]:
            items = list(items)
            if not items or num_reducers < 1:
                return []
            spark = self._session()
            self._ship_engine(spark)
            sc = spark.sparkContext
            shuffled = (
                sc.parallelize(items, len(items))
                .mapPartitions(functools.partial(_v01_map_side, map_fn))
                .partitionBy(num_reducers, _v01_identity)
            )
            records = shuffled.mapPartitionsWithIndex(functools.partial(_v01_reduce_side, reduce_fn)).collect()
            out = []
            for status, value in records:
                if status != OK:
                    raise error_from_record(status, value)
                out.append(value)
            return out

    return RddShuffleExecutorV01.start(master)


# -- generation and checking ----------------------------------------------------------------------------------


def generate_child(dest: str, min_bytes: int) -> dict[str, Any]:
    """Append files of ROWS_PER_FILE generated rows with delta-rs (snappy) until the table holds ``min_bytes``."""
    import deltalake
    import numpy as np

    rng = np.random.default_rng(SEED)
    writer = deltalake.WriterProperties(compression="SNAPPY")
    rows = 0
    digest = (0, 0)
    while _table_bytes(Path(dest)) < min_bytes:
        batch = _OC.generate_batch(rng, ["x"]).drop_columns(["part"])
        big = [batch]
        while sum(t.num_rows for t in big) < ROWS_PER_FILE:
            big.append(_OC.generate_batch(rng, ["x"]).drop_columns(["part"]))
        import pyarrow as pa

        table = pa.concat_tables(big)
        deltalake.write_deltalake(dest, table, mode="append", writer_properties=writer)
        rows += table.num_rows
        digest = _combine(digest, row_hash_sum(table))
    return {"expected": {"rows": rows, "hash_sum": digest[1]}}


def _table_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in h.data_files(path)) if path.exists() else 0


def _combine(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return a[0] + b[0], (a[1] + b[1]) % (1 << 64)


def row_hash_sum(table: Any) -> tuple[int, int]:
    """(rows, the sum mod 2**64 of a 64-bit hash of every row over all four columns): equal for equal multisets."""
    import numpy as np
    import pyarrow as pa

    total = 0
    for batch in table.to_batches():
        n = batch.num_rows
        if not n:
            continue
        with np.errstate(over="ignore"):
            a = batch.column("a").to_numpy().astype(np.uint64)
            b = batch.column("b").to_numpy().astype(np.uint64)
            c = batch.column("c").to_numpy().view(np.uint64)
            s = batch.column("s")
            s = s.cast(pa.large_string()) if not pa.types.is_large_string(s.type) else s
            offsets = np.frombuffer(s.buffers()[1], np.int64)[s.offset : s.offset + n + 1]
            data = np.frombuffer(s.buffers()[2], np.uint8)
            # a polynomial hash of each string: cumulative sums of byte * weight(position)
            codes = data[offsets[0] : offsets[-1]].astype(np.uint64)
            pos = np.arange(len(codes), dtype=np.uint64)
            weighted = codes * (pos * np.uint64(0x9E3779B97F4A7C15) + np.uint64(1))
            csum = np.concatenate([[np.uint64(0)], np.cumsum(weighted, dtype=np.uint64)])
            rel = offsets - offsets[0]
            sh = csum[rel[1:]] - csum[rel[:-1]]
            # the string's hash must not depend on where it sits in the buffer: take out its start position's part
            starts = rel[:-1].astype(np.uint64)
            base = np.concatenate([[np.uint64(0)], np.cumsum(codes, dtype=np.uint64)])
            plain = base[rel[1:]] - base[rel[:-1]]
            sh = sh - starts * np.uint64(0x9E3779B97F4A7C15) * plain
            x = a * np.uint64(0xBF58476D1CE4E5B9) ^ (b + np.uint64(0x94D049BB133111EB))
            x = (x ^ (x >> np.uint64(31))) * np.uint64(0xD6E8FEB86659FD93)
            x = x ^ (c * np.uint64(0x2545F4914F6CDD1D)) ^ (sh * np.uint64(0x9E3779B97F4A7C15))
            x = (x ^ (x >> np.uint64(29))) * np.uint64(0xBF58476D1CE4E5B9)
            total = (total + int(x.sum(dtype=np.uint64))) % (1 << 64)
    return int(table.num_rows), total


def verify_child(path: str, expected: dict[str, Any]) -> dict[str, Any]:
    import deltalake

    dt = deltalake.DeltaTable(path)
    rows, acc = 0, 0
    for batch in dt.to_pyarrow_dataset().to_batches(columns=["a", "b", "c", "s"]):
        import pyarrow as pa

        r, s = row_hash_sum(pa.Table.from_batches([batch]))
        rows, acc = rows + r, (acc + s) % (1 << 64)
    got = {"rows": rows, "hash_sum": acc}
    return {"version": dt.version(), "files_after": len(dt.file_uris()), "got": got, "identical": got == expected}


def prepare_table(quick: bool, regenerate: bool) -> tuple[Path, dict[str, Any], str]:
    min_bytes = 200 * MIB if quick else GIB
    root = CACHE / f"zorder-spark-scale-f{GEN_FORMAT}-s{SEED}-{min_bytes // MIB}MiB"
    table = root / "pristine"
    cached = h.cached_info(root, regenerate)
    if cached is not None:
        return table, cached, "cached"
    start = time.perf_counter()
    gen = h.run_child_or_exit(__file__, ["--generate", str(table), str(min_bytes)], CHILD_TIMEOUT_S)
    files = h.data_files(table)
    info = {
        "path": str(table),
        "files": len(files),
        "bytes": sum(p.stat().st_size for p in files),
        "rows": gen["expected"]["rows"],
        "expected": gen["expected"],
        "generated_in_s": round(time.perf_counter() - start, 1),
    }
    (root / "info.json").write_text(json.dumps(info, indent=2) + "\n")
    return table, info, f"generated in {info['generated_in_s']}s"


# -- measured children -----------------------------------------------------------------------------------------


def cpu_since(before: dict[str, float]) -> dict[str, float]:
    after = h.tree_cpu_s()
    return {
        "call_cpu_s": after["total"] - before["total"],
        "call_cpu_jvm_s": after["java"] - before["java"],
        "call_cpu_workers_s": after["workers"] - before["workers"],
    }


def child_zorder(kind: str, arg: str, path: str) -> dict[str, Any]:
    import pyarrow as pa

    pa.array([0])
    from airflow_provider_deltalite import DeltaTable
    from airflow_provider_deltalite.executors import LocalExecutor
    from airflow_provider_deltalite.maintenance.clustering import shuffle
    from airflow_provider_deltalite.maintenance.clustering.zorder import zorder

    result: dict[str, Any] = {"kind": kind, "arg": arg}
    executor: Any = None
    if kind in ("spark", "rdd"):
        from airflow_provider_deltalite.executors.spark import SparkExecutor

        shuffle.SHUFFLE_ABOVE_BYTES = 0  # the shuffle path whatever the size (quick mode)
        t0 = time.perf_counter()
        if kind == "rdd":  # the whole v0.1 shuffle: its executor and its map and reduce functions
            shuffle._route_group = _v01_route_group  # type: ignore[assignment]
            shuffle._WriteOutputFile = _V01WriteOutputFile  # type: ignore[assignment, misc]
        executor = rdd_executor(arg) if kind == "rdd" else SparkExecutor.start(arg)
        result["jvm_start_s"] = time.perf_counter() - t0
    elif kind == "local":
        executor = LocalExecutor(int(arg))
    cpu0 = h.tree_cpu_s()
    if kind == "deltars":
        import deltalake

        writer = deltalake.WriterProperties(compression="SNAPPY")
        with h.Measured() as run:
            metrics = deltalake.DeltaTable(path).optimize.z_order(
                COLUMNS, target_size=TARGET_SIZE, max_concurrent_tasks=int(arg), writer_properties=writer
            )
        result.update(files_added=metrics.get("numFilesAdded"), files_removed=metrics.get("numFilesRemoved"))
    else:
        with h.Measured() as run:
            stats = zorder(DeltaTable(path), COLUMNS, target_size=TARGET_SIZE, executor=executor)
        result.update(files_added=stats.num_files_added, files_removed=stats.num_files_removed)
    result.update(cpu_since(cpu0))
    result.update(run.record)
    if executor is not None:
        executor.close()
    return result


def child_optimize(master: str, path: str) -> dict[str, Any]:
    import pyarrow as pa

    pa.array([0])
    from airflow_provider_deltalite import DeltaTable
    from airflow_provider_deltalite.executors.spark import SparkExecutor
    from airflow_provider_deltalite.maintenance.optimize import optimize

    t0 = time.perf_counter()
    executor = SparkExecutor.start(master)
    result: dict[str, Any] = {"kind": "optimize", "arg": master.split(":")[0], "jvm_start_s": time.perf_counter() - t0}
    cpu0 = h.tree_cpu_s()
    with h.Measured() as run:
        stats = optimize(DeltaTable(path), target_size=COMPACT_SIZE, min_file_size=COMPACT_SIZE, executor=executor)
    result.update(cpu_since(cpu0))
    result.update(run.record, files_added=stats.num_files_added, files_removed=stats.num_files_removed)
    executor.close()
    return result


# -- the Connect server ------------------------------------------------------------------------------------------


def start_connect_server(work_dir: Path) -> tuple[int, str]:
    """A Spark Connect server on 127.0.0.1 running ``local[2]`` (the command of tests/executors/spark_cluster.py
    ``start_connect_server``, without its short-lived-JVM flags, so that it runs with the JIT a classic driver has)."""
    if str(h.REPO) not in sys.path:
        sys.path.insert(0, str(h.REPO))
    from tests.executors import spark_cluster as cluster

    work_dir.mkdir(parents=True, exist_ok=True)
    port = cluster.free_port()
    cmd = [
        str(cluster.spark_home() / "bin" / "spark-submit"),
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--master",
        "local[2]",
        "--conf",
        "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf",
        f"spark.connect.grpc.binding.port={port}",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.driver.host=127.0.0.1",
        "--conf",
        "spark.driver.bindAddress=127.0.0.1",
        "spark-internal",
    ]
    env = cluster.spark_env()
    env.pop("SPARK_DAEMON_MEMORY", None)
    env.pop("SPARK_DAEMON_JAVA_OPTS", None)
    # Detached (a shell that starts it in the background and exits) before this process becomes a child subreaper:
    # the server must not count as a leftover of the measured children, which `run_measured` waits for and kills.
    log = work_dir / "connect.log"
    line = " ".join(shlex.quote(c) for c in cmd)
    starter = subprocess.run(
        ["setsid", "sh", "-c", f"{line} >{shlex.quote(str(log))} 2>&1 </dev/null & echo $$"],
        env=env,
        cwd=work_dir,
        capture_output=True,
        text=True,
        check=True,
    )
    group = int(starter.stdout.strip())
    import socket

    deadline = time.monotonic() + 180
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return group, f"sc://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.3)
        if time.monotonic() > deadline:
            stop_server(group)
            raise SystemExit(f"the Spark Connect server did not listen within 180 s (its log: {log})")


def stop_server(group: int) -> None:
    """Stop the server's process group: SIGTERM, then SIGKILL after 20 s."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGTERM)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)


# -- parent ------------------------------------------------------------------------------------------------------


def one_zorder_run(config: str, pristine: Path, info: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    kind, arg = CONFIGS[config]
    table = h.fresh_copy(pristine, WORK / "table")
    child = ["--child-zorder", kind, arg, str(table)]
    run, res = h.quiet_measured_run(config, __file__, child, CHILD_TIMEOUT_S, args.max_busy, args.max_wait)
    if res is None:
        return run
    gib = info["bytes"] / GIB
    run["cpu_s_per_gib"] = run["tree_cpu_s"] / gib
    run["call_cpu_s_per_gib"] = run["call_cpu_s"] / gib
    run["new_files"] = res.get("files_added")
    run["new_bytes"] = 0
    h.record_verification(run, __file__, ["--verify", str(table), json.dumps(info["expected"])], CHILD_TIMEOUT_S)
    shutil.rmtree(WORK, ignore_errors=True)
    return run


def one_optimize_run(
    name: str, master: str, pristine: Path, expected: dict[str, Any], args: argparse.Namespace
) -> dict:
    table = h.fresh_copy(pristine, WORK / "compact")
    child = ["--child-optimize", master, str(table)]
    run, res = h.quiet_measured_run(name, __file__, child, CHILD_TIMEOUT_S, args.max_busy, args.max_wait)
    if res is None:
        return run
    run["new_files"] = res.get("files_added")
    h.record_verification(run, _OC.__file__, ["--verify-delta", str(table), json.dumps(expected)], CHILD_TIMEOUT_S)
    shutil.rmtree(WORK, ignore_errors=True)
    return run
    run.update(res)
    run["new_files"] = res.get("files_added")
    check, verr = h.run_child(_OC.__file__, ["--verify-delta", str(table), json.dumps(expected)], CHILD_TIMEOUT_S)
    run["verify"] = check if check is not None else {"error": verr}
    run["identical"] = bool(check and check.get("identical"))
    shutil.rmtree(WORK, ignore_errors=True)
    return run


def show(config: str, rep: int, r: dict[str, Any]) -> None:
    if "error" in r:
        print(f"  {config:<16} rep {rep + 1}: ERROR {r['error']}", flush=True)
        return
    per = f" = {r['cpu_s_per_gib']:.1f} cpu-s/GiB" if "cpu_s_per_gib" in r else ""
    print(
        f"  {config:<16} rep {rep + 1}: wall {r['wall_s']:.1f}s cpu(tree) {r['tree_cpu_s']:.1f}s{per} "
        f"call cpu {r['call_cpu_s']:.1f}s (jvm {r['call_cpu_jvm_s']:.1f}, py workers {r['call_cpu_workers_s']:.1f}) "
        f"tree rss {r['tree_peak_rss_mb']:.0f}MB -> {r.get('new_files')} files; "
        f"rows identical: {'yes' if r['identical'] else 'no'}  [others {r['others_cores_during']:.2f} cores]",
        flush=True,
    )


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return {"ok": False, "error": runs[0].get("error") if runs else "no run", "runs": runs}

    def med(key: str) -> float | None:
        return h.median(r.get(key) for r in ok)

    return {
        "ok": len(ok) == len(runs),
        "wall_s_median": med("wall_s"),
        "wall_s_all": [round(r["wall_s"], 2) for r in ok],
        "jvm_start_s_median": med("jvm_start_s"),
        "tree_cpu_s_median": med("tree_cpu_s"),
        "call_cpu_s_median": med("call_cpu_s"),
        "call_cpu_jvm_s_median": med("call_cpu_jvm_s"),
        "call_cpu_workers_s_median": med("call_cpu_workers_s"),
        "cpu_s_per_gib_median": med("cpu_s_per_gib"),
        "call_cpu_s_per_gib_median": med("call_cpu_s_per_gib"),
        "tree_peak_rss_mb_max": max(r["tree_peak_rss_mb"] for r in ok),
        "new_files": ok[0].get("new_files"),
        "others_cores_during_max": max(r.get("others_cores_during", 0.0) for r in ok),
        "identical": all(r.get("identical") for r in runs),
        "runs": runs,
    }


def connect_vs_classic(args: argparse.Namespace, server: tuple[int, str] | str) -> dict[str, Any]:
    """OPTIMIZE of the issue-4 table through a classic local[2] session and through the Connect server ``server``
    (a (process group, url), or the error that kept it from starting)."""
    if isinstance(server, str):
        return {"error": server}
    group, url = server
    compact, compact_info, cnote = _OC.prepare_table(False)
    print(f"compaction table: {cnote} -> {compact} ({compact_info['files']} files)")
    crun: dict[str, list[dict[str, Any]]] = {"classic local[2]": [], "connect (local[2] server)": []}
    try:
        for rep in range(max(args.reps, 3)):
            for name in h.rotated(list(crun), rep):
                master = "local[2]" if name.startswith("classic") else url
                kept, _ = h.measure_until_quiet(
                    lambda name=name, master=master: one_optimize_run(
                        name, master, compact, compact_info["expected"], args
                    ),
                    args,
                    lambda r, name=name, rep=rep: show(name, rep, r),
                )
                crun[name].append(kept)
    finally:
        stop_server(group)
    return {name: summarise(rs) for name, rs in crun.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="a ~200 MiB table (also DELTALITE_BENCH_QUICK=1)")
    parser.add_argument("--regenerate", action="store_true")
    parser.add_argument("--only", action="append", choices=sorted(ONLY))
    parser.add_argument("--no-write", action="store_true")
    h.add_contention_args(parser)
    parser.add_argument("--generate", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--child-zorder", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--child-optimize", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--verify", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.generate:
        print(json.dumps(generate_child(args.generate[0], int(args.generate[1]))))
        return 0
    if args.child_zorder:
        print(json.dumps(child_zorder(*args.child_zorder)))
        return 0
    if args.child_optimize:
        print(json.dumps(child_optimize(*args.child_optimize)))
        return 0
    if args.verify:
        print(json.dumps(verify_child(args.verify[0], json.loads(args.verify[1]))))
        return 0

    quick = args.quick or os.environ.get("DELTALITE_BENCH_QUICK") == "1"
    t_start = time.perf_counter()
    code_before = h.code_under_test(CODE_UNDER_TEST)
    server: tuple[int, str] | str = "not started"
    if not args.only or "connect" in args.only:
        try:
            server = start_connect_server(CACHE / f"connect-{os.getpid()}")
        except (SystemExit, OSError, subprocess.CalledProcessError) as exc:
            server = f"the Spark Connect server did not start: {exc}"
    subreaper = h.become_subreaper()
    CACHE.mkdir(parents=True, exist_ok=True)
    # the local configuration runs the installed package's bytecode: compile it first (as an installed wheel is)
    h.compile_bytecode()
    pristine, info, note = prepare_table(quick, args.regenerate)
    print(f"table: {note} -> {pristine} ({info['files']} files, {info['bytes'] / MIB:.0f} MiB, {info['rows']:,} rows)")
    connect: dict[str, Any] = {}
    if not args.only or "connect" in args.only:
        connect = connect_vs_classic(args, server)

    configs = [c for c in CONFIGS if not args.only or any(c in ONLY[o] for o in args.only)]
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in configs}
    discarded: dict[str, list[dict[str, Any]]] = {c: [] for c in configs}
    for rep in range(args.reps):
        for config in h.rotated(configs, rep) if configs else []:
            kept, dropped = h.measure_until_quiet(
                lambda config=config: one_zorder_run(config, pristine, info, args),
                args,
                lambda r, config=config, rep=rep: show(config, rep, r),
            )
            runs[config].append(kept)
            discarded[config].extend(dropped)
    summary = {c: summarise(runs[c]) for c in configs}

    def get(s: dict[str, Any] | None, key: str) -> float | None:
        return s.get(key) if s else None

    targets = [
        h.target(
            "exchange CPU/GiB / rdd-v0.1 CPU/GiB (tree)",
            h.ratio(
                get(summary.get("exchange"), "cpu_s_per_gib_median"),
                get(summary.get("rdd-v0.1"), "cpu_s_per_gib_median"),
            ),
            TARGET_CPU_VS_RDD,
        ),
        h.target(
            "exchange wall / delta-rs wall",
            h.ratio(get(summary.get("exchange"), "wall_s_median"), get(summary.get("delta-rs"), "wall_s_median")),
            TARGET_WALL_VS_DELTARS,
        ),
        h.target(
            "connect wall / classic wall (OPTIMIZE)",
            h.ratio(
                get(connect.get("connect (local[2] server)"), "wall_s_median"),
                get(connect.get("classic local[2]"), "wall_s_median"),
            ),
            TARGET_CONNECT_VS_CLASSIC,
        ),
    ]
    for config, s in summary.items():
        targets.append(h.check(f"{config}: rows identical to the input", s.get("identical") if s.get("ok") else None))
    print()
    gib = info["bytes"] / GIB
    head = (
        f"{'engine':<26} {'wall_s':>8} {'jvm_start':>9} {'cpu_s':>7} {'cpu/GiB':>8} {'call_cpu':>8} "
        f"{'call/GiB':>8} {'tree_MB':>8} {'files':>5} identical"
    )
    print(f"Z-order of one {gib:.2f} GiB partition by (a, b), target {TARGET_SIZE // MIB} MiB, local[2] / 2 tasks")
    print(head)
    print("-" * len(head))
    for config, s in [*summary.items(), *((k, v) for k, v in connect.items() if isinstance(v, dict))]:
        if not s.get("wall_s_median"):
            print(f"{config:<26} ERROR {s.get('error')}")
            continue
        jvm = s.get("jvm_start_s_median")
        per = s.get("cpu_s_per_gib_median")
        cper = s.get("call_cpu_s_per_gib_median")
        print(
            f"{config:<26} {s['wall_s_median']:>8.1f} {(f'{jvm:.1f}' if jvm else '-'):>9} "
            f"{s['tree_cpu_s_median']:>7.1f} "
            f"{(f'{per:.1f}' if per else '-'):>8} {s['call_cpu_s_median']:>8.1f} {(f'{cper:.1f}' if cper else '-'):>8} "
            f"{s['tree_peak_rss_mb_max']:>8.0f} {s['new_files']!s:>5} {s['identical']}"
        )
    print(
        "cpu_s = user+sys of the measured child's whole process tree (JVM start/stop included; Connect rows: the "
        "client only, the server is not in the tree); call_cpu = the tree's CPU during the measured call alone."
    )
    print()
    h.print_targets(targets, width=46)
    report: dict[str, Any] = {
        "benchmark": "zorder_spark_scale",
        "quick": quick,
        "target_size": TARGET_SIZE,
        "columns": COLUMNS,
        "input": {k: v for k, v in info.items() if k != "expected"},
        "reps": args.reps,
        "machine": h.machine_info(("pyarrow", "deltalake", "numpy", "pyspark", "pyspark-client"), java=True),
        "subreaper": subreaper,
        "code_under_test": code_before,
        "targets": targets,
        "results": summary,
        "connect_vs_classic": connect,
        "discarded_contended_runs": discarded,
        "total_runtime_s": None,
    }
    h.note_code_change(report, code_before, h.code_under_test(CODE_UNDER_TEST))
    if args.only == ["connect"] and RESULTS.exists() and not quick:
        # only the Connect comparison ran: keep the Z-order results of the file, replace the Connect part
        earlier = json.loads(RESULTS.read_text())
        earlier["connect_vs_classic"] = connect
        earlier["connect_run"] = {k: report[k] for k in ("machine", "code_under_test")}
        earlier["targets"] = [t for t in earlier["targets"] if not t["target"].startswith("connect")] + [
            t for t in targets if t["target"].startswith("connect")
        ]
        report = earlier
    return h.finish(report, targets, RESULTS, t_start, write=not (args.no_write or quick))


if __name__ == "__main__":
    sys.exit(main())
