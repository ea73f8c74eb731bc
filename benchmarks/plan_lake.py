"""Benchmark: planning a lake (`measure_lake` + `plan_lake`, `deltalite maintain-lake --dry-run`) and appending to
the operations history.

Lake: ``--tables`` tables (default 200) under one directory, each a generated log (no data files: planning reads the
log only) of ``--commits`` commits (default 30) adding two files each (10-500 KiB, seeded), so every table needs a
compaction and most a checkpoint. Cached under the system temp dir.

Each run is a fresh subprocess, the package bytecode-compiled first:

  inproc:  imports done, then `measure_lake` with 1 thread and with 4 (the tables' health and plans; the results are
           checked equal; which runs first alternates per rep), then `plan_lake` over them (wall and CPU of each);
           peak RSS of the process.
  history: 20 appends of one row each to a fresh history table: deltalite's `append_history` beside delta-rs 1.6.3
           `write_deltalake(mode="append")` of the same row (same schema, snappy), the median per append.
  cli:     `deltalite maintain-lake DIR --dry-run --json`, the whole process (wall, from the parent).

Run:  .venv/bin/python benchmarks/plan_lake.py [--reps 3] [--tables 200] [--commits 30] [--regenerate] [--no-write]
Results: printed table, and benchmarks/results/plan_lake.json. No target: figures for the lead (no peer plans a lake;
the history append is compared with delta-rs's append).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import _harness as h

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "plan_lake.json"
CACHE = Path(tempfile.gettempdir()) / "deltalite-bench"
GEN_FORMAT = 1
NOW_MS = 1_780_000_000_000
APPENDS = 20
CHILD_TIMEOUT_S = 900
CODE = ["maintenance/planner/*.py", "maintenance/history/*.py", "maintenance/health/*.py", "cli/maintain_lake.py"]


def generate(root: Path, tables: int, commits: int) -> None:
    """The lake of the module docstring (seeded: the same lake every time)."""
    rng = random.Random(20261201)
    if root.exists():
        shutil.rmtree(root)
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    for t in range(tables):
        log = root / f"t{t:04d}" / "_delta_log"
        log.mkdir(parents=True)
        first = [
            {"commitInfo": {"timestamp": NOW_MS - 10**8, "operation": "CREATE TABLE", "operationParameters": {}}},
            {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
            {
                "metaData": {
                    "id": str(uuid.UUID(int=rng.getrandbits(128))),
                    "format": {"provider": "parquet", "options": {}},
                    "schemaString": json.dumps(schema),
                    "partitionColumns": [],
                    "configuration": {},
                    "createdTime": NOW_MS - 10**8,
                }
            },
        ]
        (log / f"{0:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in first))
        for v in range(1, commits + 1):
            ts = NOW_MS - 10**8 + v * 1000
            lines = [{"commitInfo": {"timestamp": ts, "operation": "WRITE", "operationParameters": {"mode": "Append"}}}]
            for f in range(2):
                rows = rng.randint(100, 5000)
                stats = {"numRecords": rows, "minValues": {"id": 0}, "maxValues": {"id": rows}, "nullCount": {"id": 0}}
                add = {"path": f"part-{v:05d}-{f}.parquet", "partitionValues": {}, "size": rng.randint(10, 500) << 10,
                       "modificationTime": ts, "dataChange": True, "stats": json.dumps(stats)}  # fmt: skip
                lines.append({"add": add})
            (log / f"{v:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in lines))


def lake_path(tables: int, commits: int, regenerate: bool) -> Path:
    root = CACHE / f"lake-{tables}-{commits}-v{GEN_FORMAT}"
    marker = root / ".complete"
    if regenerate or not marker.exists():
        print(f"generating {tables} tables of {commits} commits under {root} ...", flush=True)
        generate(root, tables, commits)
        marker.write_text("ok\n")
    return root


def child_inproc(arg: str) -> None:
    root, first = arg.rsplit(":", 1)  # which thread count runs first (rotated per rep: the first one warms caches)
    sys.path.insert(0, str(h.REPO))
    import pyarrow as pa

    from airflow_provider_deltalite.maintenance.discovery import find_delta_tables
    from airflow_provider_deltalite.maintenance.planner.lake import measure_lake, plan_lake
    from airflow_provider_deltalite.maintenance.planner.lake_policy import LakeBudget

    pa.array([0])  # pyarrow's one-time first use, outside the clock

    def timed(call):  # type: ignore[no-untyped-def]
        cpu0, wall0 = time.process_time(), time.perf_counter()
        value = call()
        return value, time.perf_counter() - wall0, time.process_time() - cpu0

    uris = find_delta_tables(root)
    runs = {}
    for workers in (1, 4) if first == "1" else (4, 1):
        runs[workers] = timed(lambda workers=workers: measure_lake(uris, max_workers=workers, now=NOW_MS))
    (one, one_s, one_cpu), (four, four_s, four_cpu) = runs[1], runs[4]
    assert [(t.table_uri, t.plan) for t in one] == [(t.table_uri, t.plan) for t in four]
    budget = LakeBudget(bytes_rewritten=sum(t.plan.total.bytes_read for t in one if t.plan) // 3)
    plan, plan_s, plan_cpu = timed(lambda: plan_lake(four, None, budget, now=NOW_MS))
    print(
        json.dumps(
            {
                "tables": len(uris),
                "chosen": len(plan.chosen_tables),
                "measure_1_thread_s": one_s,
                "measure_1_thread_cpu_s": one_cpu,
                "measure_4_threads_s": four_s,
                "measure_4_threads_cpu_s": four_cpu,
                "plan_lake_s": plan_s,
                "plan_lake_cpu_s": plan_cpu,
                "peak_rss_mb": h.maxrss_mb(),
            }
        )
    )


def child_history(engine: str) -> None:
    sys.path.insert(0, str(h.REPO))
    from datetime import UTC, datetime

    import pyarrow as pa

    from airflow_provider_deltalite.maintenance.history import ARROW_SCHEMA, append_history

    pa.array([0])
    when = datetime(2026, 12, 1, tzinfo=UTC)
    row = {"table_uri": "s3://lake/events", "operation": "optimize", "start_time": when, "end_time": when,
           "outcome": "committed", "version": 7, "bytes_read": 123456}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        uri = str(Path(tmp) / "history")
        times = []
        if engine == "deltalite":
            append_history(uri, [row])  # creates the table: not timed
            for _ in range(APPENDS):
                start = time.perf_counter()
                append_history(uri, [row])
                times.append(time.perf_counter() - start)
        else:
            import deltalake

            data = pa.Table.from_pylist([{n: row.get(n) for n in ARROW_SCHEMA.names}], schema=ARROW_SCHEMA)
            deltalake.write_deltalake(uri, data, mode="append")
            for _ in range(APPENDS):
                start = time.perf_counter()
                deltalake.write_deltalake(uri, data, mode="append")
                times.append(time.perf_counter() - start)
        rows = len(__import__("deltalake").DeltaTable(uri).to_pyarrow_table())
    assert rows == APPENDS + 1, rows
    print(json.dumps({f"{engine}_append_ms": statistics.median(times) * 1000}))


def run_cli(root: Path) -> dict[str, Any]:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "airflow_provider_deltalite", "maintain-lake", str(root), "--dry-run", "--json"],
        capture_output=True,
        text=True,
        cwd=h.REPO,
        timeout=CHILD_TIMEOUT_S,
        env={**os.environ, "PYTHONPATH": str(h.REPO)},
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"deltalite maintain-lake failed: {proc.stderr.strip()}")
    return {"cli_s": wall, "cli_tables": len(json.loads(proc.stdout)["lakePlan"]["tables"])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--commits", type=int, default=30)
    parser.add_argument("--regenerate", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--history", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_inproc(args.child)
        return 0
    if args.history:
        child_history(args.history)
        return 0
    started = time.perf_counter()
    h.compile_bytecode()
    root = lake_path(args.tables, args.commits, args.regenerate)
    before = h.code_under_test(CODE)
    runs = []
    for rep in range(args.reps):
        first = h.rotated(["1", "4"], rep)[0]
        result = h.run_child_or_exit(__file__, ["--child", f"{root}:{first}"], CHILD_TIMEOUT_S)
        for engine in h.rotated(["deltalite", "delta-rs"], rep):
            result.update(h.run_child_or_exit(__file__, ["--history", engine], CHILD_TIMEOUT_S))
        result.update(run_cli(root))
        runs.append(result)
        print(
            f"  rep {rep + 1}: measure 1 thread {result['measure_1_thread_s']:.2f}s, 4 threads "
            f"{result['measure_4_threads_s']:.2f}s; plan_lake {result['plan_lake_s']:.3f}s; "
            f"cli {result['cli_s']:.2f}s; "
            f"append deltalite {result['deltalite_append_ms']:.1f} ms, delta-rs {result['delta-rs_append_ms']:.1f} ms",
            flush=True,
        )
    keys = [k for k in runs[0] if k.endswith(("_s", "_ms")) or k == "peak_rss_mb"]
    summary = {k: h.median(r[k] for r in runs) for k in keys}
    print(f"\nplanning a lake of {runs[0]['tables']} tables ({args.commits} commits each), {args.reps} runs, medians")
    for k in keys:
        unit = "MB" if k == "peak_rss_mb" else ("ms" if k.endswith("_ms") else "s")
        print(f"  {k:<28} {summary[k]:9.3f} {unit}")
    speedup = summary["measure_1_thread_s"] / summary["measure_4_threads_s"]
    ratio = summary["deltalite_append_ms"] / summary["delta-rs_append_ms"]
    print(f"  4 threads vs 1: {speedup:.2f}x faster; history append deltalite / delta-rs: {ratio:.2f}x")
    report = {
        "benchmark": "plan_lake",
        "tables": runs[0]["tables"],
        "commits": args.commits,
        "machine": h.machine_info(),
        "code_under_test": before,
        "runs": runs,
        "medians": summary,
        "threads_speedup": speedup,
        "append_ratio_vs_deltars": ratio,
    }
    h.note_code_change(report, before, h.code_under_test(CODE))
    if not args.no_write:
        h.write_results(RESULTS, report, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
