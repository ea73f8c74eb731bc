"""Benchmark: small blind-append commits per second, and writing a checkpoint of a 100,000-file snapshot.

Part 1 (commits): a fresh local table per engine; each commit appends one 10-row Parquet file to one of 4
partitions, end to end (open the latest snapshot, write the file, commit; post-commit checkpoints included):
  deltalite: DeltaTable(path).transaction() + add + commit("WRITE")
  delta-rs:  deltalake.write_deltalake(path, data, mode="append")
Part 2 (checkpoint): the generated 100k-file / 2,000-commit table of benchmarks/snapshot_load.py (table b). Each run is
a fresh subprocess that loads the latest snapshot (timed separately), then writes a checkpoint of it:
  deltalite: write_checkpoint(DeltaTable(path).snapshot())
  delta-rs:  deltalake.DeltaTable(path).create_checkpoint()
The checkpoint file and `_last_checkpoint` are restored after every run, so each run writes the same checkpoint.

Target (issue 3): deltalite's checkpoint write within 1.5x of delta-rs'.

Run:  .venv/bin/python benchmarks/commit_and_checkpoint.py [--commits 100] [--reps 5]
Results: printed tables, and benchmarks/results/commit_and_checkpoint.json.
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
RESULTS = HERE / "results" / "commit_and_checkpoint.json"
TARGET_CHECKPOINT = 1.5
CHILD_TIMEOUT_S = 600


# -- children -------------------------------------------------------------------------------------------------


def child_commits(engine: str, path: str, commits: int) -> dict[str, Any]:
    import uuid

    import pyarrow as pa
    import pyarrow.parquet as pq

    pa.array([0])  # pyarrow's one-time first use (imports pandas) stays out of the timings, as in snapshot_load
    durations = []

    def batch(i: int) -> pa.Table:
        return pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64()), "part": [f"p{i % 4}"] * 10})

    if engine == "deltalite":
        import deltalake  # the first commit creates the table; deltalite does not create tables

        from airflow_provider_deltalite import DeltaTable

        deltalake.write_deltalake(path, batch(0), partition_by=["part"])
        table = DeltaTable(path)
        for i in range(1, commits + 1):
            start = time.perf_counter()
            part = f"p{i % 4}"
            rel = f"part={part}/part-{uuid.uuid4()}.parquet"
            os.makedirs(os.path.join(path, f"part={part}"), exist_ok=True)
            pq.write_table(batch(i).drop_columns(["part"]), os.path.join(path, rel))
            txn = table.transaction()
            txn.add({"path": rel, "partitionValues": {"part": part}, "size": os.path.getsize(os.path.join(path, rel))})
            txn.commit("WRITE", {"mode": "Append"})
            durations.append(time.perf_counter() - start)
    else:
        import deltalake

        deltalake.write_deltalake(path, batch(0), partition_by=["part"])
        for i in range(1, commits + 1):
            start = time.perf_counter()
            deltalake.write_deltalake(path, batch(i), partition_by=["part"], mode="append")
            durations.append(time.perf_counter() - start)
    return {
        "engine": engine,
        "commits": commits,
        "total_s": sum(durations),
        "median_commit_ms": statistics.median(durations) * 1000,
        "commits_per_s": commits / sum(durations),
        "peak_rss_mb": h.maxrss_mb(),
    }


def child_checkpoint(engine: str, path: str) -> dict[str, Any]:
    import pyarrow as pa

    pa.array([0])
    if engine == "deltalite":
        from airflow_provider_deltalite import DeltaTable
        from airflow_provider_deltalite.engine.checkpoint_writer import write_checkpoint

        start = time.perf_counter()
        snapshot = DeltaTable(path).snapshot()
        loaded = time.perf_counter()
        info = write_checkpoint(snapshot)
        written = time.perf_counter()
        files, version = info.num_of_add_files, info.version
    else:
        import deltalake

        start = time.perf_counter()
        table = deltalake.DeltaTable(path)
        loaded = time.perf_counter()
        table.create_checkpoint()
        written = time.perf_counter()
        files, version = None, table.version()
    return {
        "engine": engine,
        "version": version,
        "files": files,
        "load_s": loaded - start,
        "checkpoint_s": written - loaded,
        "peak_rss_mb": h.maxrss_mb(),
    }


# -- parent -----------------------------------------------------------------------------------------------------


def bench_commits(commits: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for engine in ("deltalite", "delta-rs"):
        with tempfile.TemporaryDirectory(prefix="deltalite-commits-") as tmp:
            out[engine] = h.run_child_or_exit(
                __file__, ["--child-commits", engine, os.path.join(tmp, "t"), str(commits)], CHILD_TIMEOUT_S
            )
        r = out[engine]
        print(f"  commits  {engine:<10} {r['commits_per_s']:.1f} commits/s (median {r['median_commit_ms']:.1f} ms)")
    return out


def bench_checkpoint(reps: int, regenerate: bool) -> dict[str, Any]:
    path, note = h.load_benchmark("snapshot_load").prepare_generated_table(regenerate)
    print(f"  checkpoint table: {path} ({note})")
    log = path / "_delta_log"
    last = (log / "_last_checkpoint").read_bytes()
    before = set(os.listdir(log))
    runs: dict[str, list[dict[str, Any]]] = {"deltalite": [], "delta-rs": []}
    try:
        for rep in range(reps):
            for engine in ("deltalite", "delta-rs") if rep % 2 == 0 else ("delta-rs", "deltalite"):
                r = h.run_child_or_exit(__file__, ["--child-checkpoint", engine, str(path)], CHILD_TIMEOUT_S)
                runs[engine].append(r)
                timing = f"load {r['load_s']:.2f}s write {r['checkpoint_s']:.2f}s"
                print(f"  checkpoint {engine:<10} rep {rep + 1}: {timing}")
                for name in set(os.listdir(log)) - before:  # undo: the next run writes the same checkpoint
                    target = log / name
                    shutil.rmtree(target) if target.is_dir() else target.unlink()
                (log / "_last_checkpoint").write_bytes(last)
    finally:
        (log / "_last_checkpoint").write_bytes(last)
    summary = {}
    for engine, rs in runs.items():
        summary[engine] = {
            "load_s_median": statistics.median(r["load_s"] for r in rs),
            "checkpoint_s_median": statistics.median(r["checkpoint_s"] for r in rs),
            "checkpoint_s_all": [round(r["checkpoint_s"], 3) for r in rs],
            "peak_rss_mb_max": max(r["peak_rss_mb"] for r in rs),
            "version": rs[0]["version"],
            "files": rs[0]["files"],
        }
    ratio = summary["deltalite"]["checkpoint_s_median"] / summary["delta-rs"]["checkpoint_s_median"]
    return {"table": str(path), "engines": summary, "ratio_checkpoint": ratio, "pass": ratio <= TARGET_CHECKPOINT}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--regenerate", action="store_true")
    parser.add_argument("--child-commits", nargs=3, metavar=("ENGINE", "PATH", "N"), help=argparse.SUPPRESS)
    parser.add_argument("--child-checkpoint", nargs=2, metavar=("ENGINE", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_commits:
        engine, path, n = args.child_commits
        print(json.dumps(child_commits(engine, path, int(n))))
        return 0
    if args.child_checkpoint:
        print(json.dumps(child_checkpoint(*args.child_checkpoint)))
        return 0

    started = time.perf_counter()
    commits = bench_commits(args.commits)
    checkpoint = bench_checkpoint(args.reps, args.regenerate)
    print()
    print(f"{'part':<12} {'engine':<10} {'result':<44}")
    print("-" * 70)
    for engine in ("deltalite", "delta-rs"):
        c = commits[engine]
        print(
            f"{'commits':<12} {engine:<10} {c['commits_per_s']:>7.1f} commits/s"
            f"   median {c['median_commit_ms']:>6.1f} ms   peak RSS {c['peak_rss_mb']:.0f} MB"
        )
    for engine in ("deltalite", "delta-rs"):
        s = checkpoint["engines"][engine]
        print(
            f"{'checkpoint':<12} {engine:<10} write {s['checkpoint_s_median']:>6.2f} s (median of {args.reps})"
            f"   load {s['load_s_median']:.2f} s   peak RSS {s['peak_rss_mb_max']:.0f} MB"
        )
    verdict = "PASS" if checkpoint["pass"] else "FAIL"
    print(
        f"checkpoint ratio deltalite/delta-rs: {checkpoint['ratio_checkpoint']:.2f} {verdict} "
        f"(target <= {TARGET_CHECKPOINT}x; 100,000 live files, version {checkpoint['engines']['deltalite']['version']})"
    )
    report = {
        "benchmark": "commit_and_checkpoint",
        "machine": h.machine_info(),
        "commits": commits,
        "checkpoint": checkpoint,
    }
    h.write_results(RESULTS, report, started)
    return 0 if checkpoint["pass"] else 2


if __name__ == "__main__":
    sys.exit(main())
