"""Benchmark: peak memory of VACUUM (FULL, local executor) on a 1,000,000-file local table (issue 19, item 5; issue
28, item 4: "VACUUM dry run of a 1M-file local table <= 500 MiB").

The table is benchmarks/vacuum.py's layout (`generate_table`) at ``--files`` data files on disk: 50% live, 30%
removed long ago (expired tombstones, kept by the checkpoint), 20% never referenced; 100 partition directories of
10,000 files; the log is two JSON commits and a checkpoint of the second (1M actions: 800k adds and removes). So the
default table has 1M files on disk and 500k live files; ``--files 2000000`` gives one of 1M live files (2M on disk,
in the same 100 partition directories, of 20,000 files each). To build it cheaply the data files are
empty (0 bytes: an inode each, no data blocks; VACUUM never reads them) and it is generated once and cached under
$TMPDIR/deltalite-bench/. Every file is 30 days old, so the default retention (7 days) deletes the removed files
and the unreferenced ones.

Runs, each a fresh child process: deltalite dry run, delta-rs 1.6.3 dry run (``DeltaTable.vacuum(dry_run=True,
full=True)``) for reference, and deltalite's real run on a hard-linked copy (``cp -al``: the same mtimes; deleting a
link leaves the cached table whole). Reported: wall, CPU seconds of the child process (user + system, imports
included: steadier than wall on a loaded machine), and peak RSS of the process (VmHWM: imports included) and of the
run alone (VmHWM after a reset once the imports are done).

Target: deltalite's process peak RSS <= 500 MiB for both runs (issue 28 names the dry run).

Where the memory goes (1M files, dry run, since VACUUM FULL compares one group of top-level directories at a time,
`vacuum.by_prefix`): ~115 MB after the imports; the log is read as a stream (a checkpoint batch at a time) and the
protected paths spilled to a temporary Arrow IPC file by top-level directory; then per group of 10 partition
directories (at most 50,000 protected paths, `by_prefix.GROUP_PATHS`) their 50k paths and their listing,
dropped before the next group; what grows is the plan (500k paths and sizes as two columns, `PlannedFiles`: ~75 MB)
and, in a dry run, its result (500k dicts, ~95 MB): 330 MB at the peak, 276-291 MB for the real run. Before (the
whole projected snapshot, one set of every protected path and a listing of the whole table): 683-703 MB dry, 588-608
MB real (2026-12-02, same machine). With ``--files 2000000`` (1M live, 1M to delete): 488 MB dry (of which ~340 MB
the plan and the result), 408 MB real; before, 1,204 MB dry; delta-rs 1,163 MB. CPU time is unchanged (dry run of
the 1M table: 7.3 s user + system against 7.5 s before, same load).

Run:  .venv/bin/python benchmarks/vacuum_memory.py [--files 1000000] [--regenerate] [--skip-deltars]
Results: a printed table and benchmarks/results/vacuum_memory.json (vacuum_memory-<files>.json for other sizes).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _harness as h

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "vacuum_memory.json"
CACHE = Path(os.environ.get("TMPDIR", tempfile.gettempdir())) / "deltalite-bench"
TARGET_MB = 500.0
CHILD_TIMEOUT_S = 1800


def child(engine: str, path: str, dry_run: bool) -> dict[str, Any]:
    import pyarrow as pa

    pa.array([0])
    importlib.import_module("airflow_provider_deltalite.maintenance.vacuum" if engine == "deltalite" else "deltalake")
    baseline = h.rss_now_mb()
    import_peak = h.status_mb("VmHWM:")
    h.reset_peak_rss()
    start = time.perf_counter()
    if engine == "deltalite":
        from airflow_provider_deltalite import DeltaTable
        from airflow_provider_deltalite.maintenance.vacuum import vacuum

        stats = vacuum(DeltaTable(path), dry_run=dry_run)
        files = stats.num_files_to_delete if dry_run else stats.objects_deleted
    else:
        import deltalake

        files = len(deltalake.DeltaTable(path).vacuum(dry_run=dry_run, full=True))
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    run_peak = h.status_mb("VmHWM:")
    return {
        "engine": engine,
        "dry_run": dry_run,
        "files": files,
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "run_peak_rss_mb": run_peak,
        # VmHWM of this process's own memory: ru_maxrss would carry the parent's peak across fork and exec (the
        # parent generated the table)
        "process_peak_rss_mb": max(import_peak, run_peak),
        "baseline_rss_mb": baseline,
    }


def prepare(files: int, regenerate: bool) -> tuple[Path, dict[str, Any]]:
    dest = CACHE / f"vacuum-memory-{files}"
    done = dest / ".complete"
    if done.exists() and not regenerate:
        return dest, json.loads(done.read_text())
    shutil.rmtree(dest, ignore_errors=True)
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    start = time.perf_counter()
    info = h.load_benchmark("vacuum").generate_table(tmp, files, body=b"")
    tmp.rename(dest)
    info["generate_s"] = round(time.perf_counter() - start, 1)
    info["checkpoint_mb"] = round(sum(p.stat().st_size for p in (dest / "_delta_log").glob("*.parquet")) / 2**20, 1)
    done.write_text(json.dumps(info))
    return dest, info


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1_000_000)
    parser.add_argument("--regenerate", action="store_true")
    parser.add_argument("--skip-deltars", action="store_true")
    parser.add_argument("--child", nargs=3, metavar=("ENGINE", "PATH", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        engine, path, mode = args.child
        print(json.dumps(child(engine, path, mode == "dry")))
        return 0

    started = time.perf_counter()
    h.compile_bytecode()
    CACHE.mkdir(parents=True, exist_ok=True)
    table, info = prepare(args.files, args.regenerate)
    print(f"table: {table}: {info}")
    expected = info["tombstoned"] + info["orphans"]
    runs = []
    plan = [("deltalite", "dry")] + ([] if args.skip_deltars else [("delta-rs", "dry")]) + [("deltalite", "real")]
    for engine, mode in plan:
        target = table
        if mode == "real":
            target = CACHE / f"vacuum-memory-copy-{os.getpid()}"
            shutil.rmtree(target, ignore_errors=True)
            subprocess.run(["cp", "-al", str(table), str(target)], check=True)
        try:
            r = h.run_child_or_exit(__file__, ["--child", engine, str(target), mode], CHILD_TIMEOUT_S)
        finally:
            if target != table:
                shutil.rmtree(target, ignore_errors=True)
        r["load_1m"] = os.getloadavg()[0]
        if r["files"] != expected:
            raise SystemExit(f"{engine} {mode} run found {r['files']} files, not {expected}")
        runs.append(r)
        print(
            f"  {engine:<10} {mode:<5} {r['files']:>8} files {r['wall_s']:7.1f} s  cpu {r['cpu_s']:6.1f} s  "
            f"run peak {r['run_peak_rss_mb']:7.0f} MB  process peak {r['process_peak_rss_mb']:7.0f} MB"
        )
    targets = [
        {
            "name": f"deltalite {'dry' if r['dry_run'] else 'real'} run: process peak RSS MB",
            "value": r["process_peak_rss_mb"],
            "max": TARGET_MB,
            "pass": r["process_peak_rss_mb"] <= TARGET_MB,
        }
        for r in runs
        if r["engine"] == "deltalite"
    ]
    for t in targets:
        print(f"{t['name']:<48} {t['value']:7.0f} (<= {TARGET_MB:.0f}) {'PASS' if t['pass'] else 'FAIL'}")
    report = {
        "benchmark": "vacuum_memory",
        "machine": h.machine_info(("deltalake", "pyarrow")),
        "table": info,
        "runs": runs,
        "targets": targets,
    }
    out = RESULTS if args.files == 1_000_000 else RESULTS.with_name(f"vacuum_memory-{args.files}.json")
    h.write_results(out, report, started)
    return 0 if all(t["pass"] for t in targets) else 2


if __name__ == "__main__":
    sys.exit(main())
