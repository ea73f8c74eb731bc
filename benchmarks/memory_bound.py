"""Benchmark: peak memory of OPTIMIZE (compaction) and Z-order at 1 GiB and 5 GiB, deltalite vs delta-rs 1.6.3.

The claim under test: on the local executor, a task's memory is bounded by the writer and run settings, not by the
table (see `engine.rewrite` and `maintenance.clustering.runs` for the formula), so the peak RSS of the 5 GiB runs is
about that of the 1 GiB runs and below 1 GiB at the default settings with 2 concurrent tasks.

Inputs (generated once with delta-rs ``write_deltalake``, snappy, cached under ``$TMPDIR/deltalite-bench/``):

  1gib   one partition (unpartitioned), 32 appends of one ~36 MB file: 1.09 GiB of Parquet
  5gib   4 partitions ``part=p0..p3``, 40 appends of one ~36 MB file per partition: 5.4 GiB of Parquet

Rows: ``id`` int64 (unique, ascending), ``a`` int64 uniform in [0, 10**9), ``b`` float64 normal, ``s`` a random
string of 4..14 letters and spaces (snappy cannot shrink any of them much), and ``part`` on the 5 GiB table.

Runs, each in a fresh subprocess on a fresh copy of the pristine table (data files hard-linked: neither engine
changes an existing data file, it only adds files and log entries; the log is copied), 2 concurrent tasks each:

  optimize   deltalite ``optimize(t, target_size=1 GiB, min_file_size=1 GiB, executor=LocalExecutor(2))`` vs
             delta-rs ``optimize.compact(target_size=1 GiB, max_concurrent_tasks=2)`` with snappy
  zorder     deltalite ``zorder(t, ["a", "b"], executor=LocalExecutor(2))`` (1 GiB files) vs delta-rs
             ``optimize.z_order(["a", "b"], target_size=1 GiB, max_concurrent_tasks=2)`` with snappy

Peak RSS: the child's ``ru_maxrss`` (from ``wait4``) and the peak of the child's RSS sampled from /proc every 50 ms by
the parent (the harness's ``run_measured``); wall spans opening the table to the end of the commit. Then a separate
child streams the table's rows (read by delta-rs ``to_pyarrow_dataset``) into an order-independent multiset hash:
the sum and the xor of a 64-bit hash of every row's columns (strings hashed by content), and the row count; it
must equal the hash of the generated rows. Copies are removed after each run.

Run:  .venv/bin/python benchmarks/memory_bound.py [--reps 1] [--sizes 1gib 5gib] [--ops optimize zorder]
      [--engines deltalite delta-rs] [--regenerate]
Results: printed table, and benchmarks/results/memory_bound.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _harness as h

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "memory_bound.json"
CACHE = Path(tempfile.gettempdir()) / "deltalite-bench"
WORK = CACHE / f"memory-bound-work-{os.getpid()}"
MIB = h.MIB
GIB = 1024 * MIB
TARGET_SIZE = GIB
CHILD_TIMEOUT_S = 3600
GOAL_RSS_MB = 1024  # the goal: <= 1 GiB peak RSS at default settings with 2 concurrent tasks

GEN_FORMAT = 2
SEED = 20261125
ROWS_PER_FILE = 1_200_000  # about 36 MB of snappy Parquet
SIZES = {"1gib": (1, 32), "5gib": (4, 40)}  # name -> (partitions, appends); partitions 1: unpartitioned
ZORDER_COLUMNS = ["a", "b"]
MASK = (1 << 64) - 1


# -- generation ----------------------------------------------------------------------------------------------


def generate_child(dest: str, size: str) -> dict[str, Any]:
    import deltalake
    import numpy as np
    import pyarrow as pa

    partitions, appends = SIZES[size]
    rng = np.random.default_rng(SEED)
    digest = RowDigest()
    next_id = 0
    for _ in range(appends):
        n = ROWS_PER_FILE * partitions
        cols = {
            "id": pa.array(np.arange(next_id, next_id + n, dtype=np.int64)),
            "a": pa.array(rng.integers(0, 10**9, n), pa.int64()),
            "b": pa.array(rng.standard_normal(n), pa.float64()),
            "s": h.load_benchmark("optimize_compact")._strings(rng, n),
        }
        next_id += n
        if partitions > 1:
            cols["part"] = pa.array(np.repeat(np.array([f"p{k}" for k in range(partitions)], object), ROWS_PER_FILE))
        batch = pa.table(cols)
        deltalake.write_deltalake(dest, batch, partition_by=["part"] if partitions > 1 else None, mode="append")
        digest.add(batch)
    return {"expected": digest.value()}


def prepare_table(size: str, regenerate: bool) -> tuple[Path, dict[str, Any]]:
    root = CACHE / f"memory-bound-{size}-f{GEN_FORMAT}-s{SEED}"
    table = root / "pristine"
    cached = h.cached_info(root, regenerate)
    if cached is not None:
        return table, cached
    start = time.perf_counter()
    gen = h.run_child_or_exit(__file__, ["--generate", str(table), size], CHILD_TIMEOUT_S)
    check = h.run_child_or_exit(__file__, ["--verify", str(table)], CHILD_TIMEOUT_S)
    if check["digest"] != gen["expected"]:
        raise SystemExit(f"generated {size} table does not read back as generated: {check} vs {gen}")
    files = h.data_files(table)
    info = {
        "path": str(table),
        "files": len(files),
        "partitions": SIZES[size][0],
        "bytes": sum(p.stat().st_size for p in files),
        "expected": gen["expected"],
        "generated_in_s": round(time.perf_counter() - start, 1),
    }
    (root / "info.json").write_text(json.dumps(info, indent=2) + "\n")
    return table, info


def working_copy(src: Path, dest: Path) -> Path:
    """``src`` at ``dest``: data files hard-linked (never modified by either engine), the log copied."""
    shutil.rmtree(dest, ignore_errors=True)
    for path in src.rglob("*"):
        target = dest / path.relative_to(src)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif "_delta_log" in path.relative_to(src).parts:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(path, target)
    return dest


# -- multiset hash -------------------------------------------------------------------------------------------


def _mix(x: Any) -> Any:
    """splitmix64's finaliser on a uint64 array (wrapping arithmetic)."""
    import numpy as np

    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint64(30))
        x = x * np.uint64(0xBF58476D1CE4E5B9)
        x = x ^ (x >> np.uint64(27))
        x = x * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _string_hash(col: Any) -> Any:
    """A 64-bit hash of each string's bytes and length (a position-weighted sum of mixed bytes)."""
    import numpy as np
    import pyarrow as pa

    col = col.cast(pa.large_string())
    bufs = col.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64)[col.offset : col.offset + len(col) + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8)[int(offsets[0]) : int(offsets[-1])].astype(np.uint64)
    starts = offsets[:-1] - offsets[0]
    lengths = np.diff(offsets)
    position = np.arange(len(data), dtype=np.uint64) - np.repeat(starts.astype(np.uint64), lengths)
    with np.errstate(over="ignore"):
        weighted = _mix(data + (position << np.uint64(8)))
        sums = np.zeros(len(col), np.uint64)
        nonempty = lengths > 0
        if nonempty.any():
            sums[nonempty] = np.add.reduceat(weighted, starts[nonempty].astype(np.intp))
        return _mix(sums + lengths.astype(np.uint64))


class RowDigest:
    """Order-independent hash of a multiset of rows (id, a, b, s[, part]), fed batch by batch."""

    def __init__(self) -> None:
        self.rows = 0
        self.total = 0
        self.xor = 0

    def add(self, rows: Any) -> None:
        import numpy as np
        import pyarrow as pa

        rows = pa.table(rows) if not isinstance(rows, pa.Table) else rows
        if not rows.num_rows:
            return
        h64 = np.zeros(rows.num_rows, np.uint64)
        names = ["id", "a", "b", "s"] + (["part"] if "part" in rows.column_names else [])
        with np.errstate(over="ignore"):
            for k, name in enumerate(names):
                col = rows.column(name).combine_chunks()
                if pa.types.is_dictionary(col.type):
                    col = col.cast(col.type.value_type)
                if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
                    values = _string_hash(col)
                else:
                    values = col.to_numpy(zero_copy_only=False).view(np.uint64)
                h64 = _mix(h64 * np.uint64(0x9E3779B97F4A7C15) + values + np.uint64(k))
        self.rows += rows.num_rows
        self.total = (self.total + int(h64.sum(dtype=np.uint64))) & MASK
        self.xor ^= int(np.bitwise_xor.reduce(_mix(h64 ^ np.uint64(0xD6E8FEB86659FD93))))

    def value(self) -> dict[str, Any]:
        return {"rows": self.rows, "sum": f"{self.total:016x}", "xor": f"{self.xor:016x}"}


def verify_child(path: str) -> dict[str, Any]:
    import deltalake

    dt = deltalake.DeltaTable(path)
    digest = RowDigest()
    for batch in dt.to_pyarrow_dataset().to_batches(batch_size=262_144):
        digest.add(batch)
    return {"digest": digest.value(), "version": dt.version(), "files": len(dt.file_uris())}


# -- measured children ---------------------------------------------------------------------------------------


def child_run(engine: str, op: str, path: str) -> dict[str, Any]:
    import pyarrow as pa

    pa.array([0])  # pyarrow's one-time first use stays out of the timings
    result: dict[str, Any] = {"engine": engine, "op": op}
    if engine == "deltalite":
        from airflow_provider_deltalite import DeltaTable
        from airflow_provider_deltalite.executors import LocalExecutor
        from airflow_provider_deltalite.maintenance.clustering.zorder import zorder
        from airflow_provider_deltalite.maintenance.optimize import optimize

        with h.Measured() as run:
            if op == "optimize":
                stats = optimize(
                    DeltaTable(path), target_size=TARGET_SIZE, min_file_size=TARGET_SIZE, executor=LocalExecutor(2)
                )
            else:
                stats = zorder(DeltaTable(path), ZORDER_COLUMNS, target_size=TARGET_SIZE, executor=LocalExecutor(2))
        result.update(run.record, files_removed=stats.num_files_removed, files_added=stats.num_files_added)
    else:
        import deltalake

        writer = deltalake.WriterProperties(compression="SNAPPY")
        with h.Measured() as run:
            dt = deltalake.DeltaTable(path)
            if op == "optimize":
                metrics = dt.optimize.compact(target_size=TARGET_SIZE, max_concurrent_tasks=2, writer_properties=writer)
            else:
                metrics = dt.optimize.z_order(
                    ZORDER_COLUMNS, target_size=TARGET_SIZE, max_concurrent_tasks=2, writer_properties=writer
                )
        result.update(
            run.record, files_removed=metrics.get("numFilesRemoved"), files_added=metrics.get("numFilesAdded")
        )
    result["vm_hwm_mb"] = h.status_mb("VmHWM:")
    return result


# -- parent --------------------------------------------------------------------------------------------------


def measure(size: str, op: str, engine: str, table: Path, info: dict[str, Any]) -> dict[str, Any]:
    copy = working_copy(table, WORK / f"{size}-{op}-{engine}")
    try:
        busy0 = h.busy_cores(0.5)
        res, err, tree = h.run_measured(__file__, ["--run", engine, op, str(copy)], CHILD_TIMEOUT_S)
        run: dict[str, Any] = {"size": size, "op": op, "engine": engine, "busy_cores_before": round(busy0, 2), **tree}
        if res is None:
            run["error"] = err
            return run
        run.update(res)
        check, err = h.run_child(__file__, ["--verify", str(copy)], CHILD_TIMEOUT_S)
        run["verify"] = check if check is not None else {"error": err}
        run["identical"] = bool(check and check["digest"] == info["expected"])
        return run
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def summarise(runs: list[dict[str, Any]], args: Any) -> list[dict[str, Any]]:
    """Medians per (size, op, engine) over the runs that finished."""
    summary = []
    for size in args.sizes:
        for op in args.ops:
            for engine in args.engines:
                mine = [r for r in runs if (r["size"], r["op"], r["engine"]) == (size, op, engine) and "error" not in r]
                if mine:
                    summary.append(
                        {
                            "size": size,
                            "op": op,
                            "engine": engine,
                            "runs": len(mine),
                            "wall_s": statistics.median(r["wall_s"] for r in mine),
                            "maxrss_mb": statistics.median(r["child_maxrss_mb"] for r in mine),
                            "proc_peak_mb": statistics.median(r["tree_peak_rss_mb"] for r in mine),
                            "identical": all(r["identical"] for r in mine),
                        }
                    )
    return summary


def merge(paths: list[Path], dest: Path) -> None:
    """One results file from runs measured by separate invocations (say, one per engine, run side by side)."""
    reports = [json.loads(p.read_text()) for p in paths]
    runs = [r for rep in reports for r in rep.get("runs", [])]
    scope = argparse.Namespace(sizes=list(SIZES), ops=["optimize", "zorder"], engines=["deltalite", "delta-rs"])
    tables = {size: info for rep in reports for size, info in rep.get("tables", {}).items()}
    merged = {**reports[0], "tables": tables, "merged_from": [p.name for p in paths], "runs": runs}
    merged["summary"] = summarise(runs, scope)
    dest.write_text(json.dumps(merged, indent=2, default=str) + "\n")
    for row in merged["summary"]:
        print(row)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--ops", nargs="+", default=["optimize", "zorder"], choices=["optimize", "zorder"])
    parser.add_argument("--engines", nargs="+", default=["deltalite", "delta-rs"], choices=["deltalite", "delta-rs"])
    parser.add_argument("--regenerate", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--results", type=Path, default=RESULTS, help="where to write the JSON")
    parser.add_argument(
        "--merge", type=Path, nargs="+", help="only merge these results files (runs of one engine each) into --results"
    )
    args = parser.parse_args()
    if args.merge:
        merge(args.merge, args.results)
        return
    h.become_subreaper()
    h.run_child_or_exit(__file__, ["--compile"], 600)
    tables = {size: prepare_table(size, args.regenerate) for size in args.sizes}
    report: dict[str, Any] = {
        "benchmark": "memory_bound",
        "machine": h.machine_info(),
        "git_head": h.git_head(),
        "goal_rss_mb": GOAL_RSS_MB,
        "tables": {size: info for size, (_, info) in tables.items()},
    }
    runs: list[dict[str, Any]] = []
    try:
        for rep in range(args.reps):
            for size in args.sizes:
                table, info = tables[size]
                for op in args.ops:
                    for engine in h.rotated(list(args.engines), rep):  # interleaved: A, B, then B, A
                        run = measure(size, op, engine, table, info)
                        run["rep"] = rep
                        runs.append(run)
                        print(
                            f"{size:5} {op:8} {engine:9} rep {rep}: wall {run.get('wall_s', float('nan')):7.1f} s  "
                            f"ru_maxrss {run['child_maxrss_mb']:7.0f} MB  "
                            f"/proc peak {run['tree_peak_rss_mb']:7.0f} MB  "
                            f"files -{run.get('files_removed')} +{run.get('files_added')}  "
                            f"others' cores {run['others_cpu_s'] / max(run['process_s'], 1e-9):.2f}  "
                            f"identical {run.get('identical')}  {run.get('error', '')}",
                            flush=True,
                        )
                        if not args.no_write:  # after every run: a long benchmark cut short keeps what it measured
                            report.update(summary=summarise(runs, args), runs=runs)
                            args.results.write_text(json.dumps(report, indent=2, default=str) + "\n")
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
    summary = summarise(runs, args)
    print(f"\n{'size':5} {'op':8} {'engine':9} {'wall s':>8} {'ru_maxrss MB':>13} {'/proc peak MB':>14} {'rows ok':>8}")
    for row in summary:
        print(
            f"{row['size']:5} {row['op']:8} {row['engine']:9} {row['wall_s']:8.1f} {row['maxrss_mb']:13.0f} "
            f"{row['proc_peak_mb']:14.0f} {row['identical']!s:>8}"
        )
    goal = [r for r in summary if r["engine"] == "deltalite"]
    print(f"\ngoal: deltalite peak RSS <= {GOAL_RSS_MB} MB: {all(r['maxrss_mb'] <= GOAL_RSS_MB for r in goal)}")
    if not args.no_write:
        report.update(summary=summary, runs=runs)
        args.results.write_text(json.dumps(report, indent=2, default=str) + "\n")
        print(f"wrote {args.results}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--compile":
        h.compile_bytecode()
        print(json.dumps({"compiled": True}))
    elif len(sys.argv) > 1 and sys.argv[1] == "--generate":
        print(json.dumps(generate_child(sys.argv[2], sys.argv[3])))
    elif len(sys.argv) > 1 and sys.argv[1] == "--verify":
        print(json.dumps(verify_child(sys.argv[2])))
    elif len(sys.argv) > 1 and sys.argv[1] == "--run":
        print(json.dumps(child_run(sys.argv[2], sys.argv[3], sys.argv[4])))
    else:
        main()
