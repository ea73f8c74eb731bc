"""Benchmark: table health (`deltalite health --json`, `table_health`) at 100k and 1M files, and what OPTIMIZE changes.

1. The 100,000- and 1,000,000-file logs of `process_cost.py` (its generator and cache: a pyarrow checkpoint plus 10
   JSON commits that add and remove files, 100 partitions, stats on ``id``, ``value``, ``name``; no data file exists,
   none is opened). Each configuration in a fresh process per run, configurations rotated, medians reported, the
   package bytecode-compiled first:

   - ``describe``: ``deltalite describe --json TABLE``, for scale (the same log replay, no statistics parsed);
   - ``health``: ``deltalite health --json TABLE`` (no clustering columns on this table: numRecords is parsed);
   - ``health+cols``: ``deltalite health --json --columns id,name TABLE`` (clustering on a number and a string);
   - ``in-process``: a child that times ``DeltaTable(p).snapshot()`` and ``table_health(..., columns=[id, name])``
     apart, so the health computation's own cost shows beside the log replay it shares with ``describe``.

   Whole process: spawn to exit, peak RSS from ``wait4``. Targets: ``deltalite health --json`` of the 100k log at
   most 2 s whole process; the 1M log's health call at most 1.5x ten times the 100k one's (linear).
2. The issue-4 table of `optimize_compact.py` (400 files x 20,000 rows in 4 partitions): health, OPTIMIZE with its
   target size (256 MiB, also the minimum file size, so every file is a candidate), health again, the figures side by
   side. The OPTIMIZE works on a copy (data files hard-linked, log copied), removed afterwards.

Run: ``.venv/bin/python benchmarks/health.py`` (``--reps N``, ``--only logs|optimize``, ``--regenerate``,
``--profile`` for a cProfile of the in-process health of each log, ``--no-write``).
Results: printed tables, and benchmarks/results/health.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import _harness as h

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "health.json"
TARGET_100K_PROCESS_S = 2.0
TARGET_LINEAR = 1.5  # 1M health call <= 1.5 x 10 x the 100k one
CHILD_TIMEOUT_S = 900
COLUMNS = "id,name"
CODE_UNDER_TEST = ("maintenance/health/*.py", "cli/health.py", "engine/**/*.py", "table.py")

process_cost = h.load_benchmark("process_cost")


# -- children -------------------------------------------------------------------------------------------------------


def inprocess_child(path: str, columns: str, profile: bool) -> dict[str, Any]:
    import pyarrow as pa

    pa.array([0])  # pyarrow's one-time first use stays out of the timings, as in snapshot_load.py
    t0 = time.perf_counter()
    from airflow_provider_deltalite import DeltaTable
    from airflow_provider_deltalite.maintenance.health import table_health

    t1 = time.perf_counter()
    table = DeltaTable(path)
    snap = table.snapshot()
    t2 = time.perf_counter()
    if profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        health = prof.runcall(table_health, table, snapshot=snap, columns=columns.split(","))
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(20)
    else:
        health = table_health(table, snapshot=snap, columns=columns.split(","))
    t3 = time.perf_counter()
    return {
        "code": 0,
        "import_s": t1 - t0,
        "snapshot_s": t2 - t1,
        "health_s": t3 - t2,
        "call_s": t3 - t1,
        "doc": {"version": health.version, "numFiles": health.files, "files": health.files},
    }


def before_after_child(pristine: str, work: str) -> dict[str, Any]:
    from airflow_provider_deltalite import DeltaTable

    oc = h.load_benchmark("optimize_compact")
    copy = process_cost.linked_copy(Path(pristine), Path(work))
    table = DeltaTable(str(copy))
    size = oc.TARGET_SIZE
    t0 = time.perf_counter()
    before = table.health(min_file_size=size, columns=["a", "s"])
    t1 = time.perf_counter()
    stats = table.optimize(target_size=size, min_file_size=size, max_concurrent_tasks=2)
    t2 = time.perf_counter()
    after = table.health(min_file_size=size, columns=["a", "s"])
    import deltalake

    # what delta-rs lists after the OPTIMIZE: the oracle for the "after" column's files, bytes and rows
    oracle_table = deltalake.DeltaTable(str(copy))
    actions = oracle_table.get_add_actions(flatten=True)
    oracle = {
        "version": oracle_table.version(),
        "files": len(actions),
        "bytes": sum(actions.column("size_bytes").to_pylist()),
        "rows": sum(actions.column("num_records").to_pylist()),
    }
    return {
        "oracle_after": oracle,
        "before": before.to_dict(),
        "after": after.to_dict(),
        "optimize": {"files_removed": stats.num_files_removed, "files_added": stats.num_files_added},
        "health_s": t1 - t0,
        "optimize_s": t2 - t1,
    }


# -- logs -----------------------------------------------------------------------------------------------------------


def argv_of(config: str, table: Path) -> list[str]:
    runner = [sys.executable, "-c", process_cost.DELTALITE_RUNNER]
    if config == "describe":
        return [*runner, "describe", "--json", str(table)]
    if config == "health":
        return [*runner, "health", "--json", str(table)]
    if config == "health+cols":
        return [*runner, "health", "--json", "--columns", COLUMNS, str(table)]
    return [sys.executable, __file__, "--child-inprocess", str(table), COLUMNS]


def bench_log(label: str, table: Path, info: dict[str, Any], reps: int) -> dict[str, Any]:
    configs = ["describe", "health", "health+cols", "in-process"]
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in configs}
    for rep in range(reps):
        for config in h.rotated(configs, rep):
            r = process_cost.run_process(argv_of(config, table), process_cost.child_env())
            if "error" not in r:
                doc = r.pop("doc")
                files = doc.get("numFiles", doc.get("files"))
                if (doc["version"], files) != (info["version"], info["files"]):
                    r["error"] = f"saw version {doc['version']} with {files} files, expected {info}"
            runs[config].append(r)
            process_cost.show(label, config, rep, r)
    summary = {c: process_cost.summarise(rs) for c, rs in runs.items()}
    inproc = summary["in-process"]
    if inproc.get("ok"):
        ok = [r for r in runs["in-process"] if "error" not in r]
        inproc["snapshot_s"] = h.median(r["snapshot_s"] for r in ok)
        inproc["health_s"] = h.median(r["health_s"] for r in ok)
    return summary


# -- before / after OPTIMIZE ----------------------------------------------------------------------------------------

ROWS = [
    ("version", lambda d: d["version"]),
    ("files", lambda d: d["files"]),
    ("bytes", lambda d: d["bytes"]),
    ("rows", lambda d: d["rows"]),
    ("small files (< 256 MiB)", lambda d: d["smallFiles"]),
    ("small file share", lambda d: round(d["smallFileShare"], 3)),
    ("files per partition (max)", lambda d: max(p["files"] for p in d["partitions"])),
    ("point-query files on a", lambda d: _round(d["clustering"][0]["pointQueryFiles"])),
    ("overlap depth on a (avg)", lambda d: _round(d["clustering"][0]["averageDepth"])),
    ("overlap depth on a (max)", lambda d: d["clustering"][0]["maxDepth"]),
    ("point-query files on s", lambda d: _round(d["clustering"][1]["pointQueryFiles"])),
    ("tombstone files", lambda d: d["tombstones"]["files"]),
    ("tombstone bytes", lambda d: d["tombstones"]["bytes"]),
    ("reclaimable now (bytes)", lambda d: d["tombstones"]["reclaimableBytes"]),
    ("commits since checkpoint", lambda d: d["log"]["commitsSinceCheckpoint"]),
    ("log files", lambda d: d["log"]["logFiles"]),
    ("last OPTIMIZE version", lambda d: d["lastRuns"]["optimizeVersion"]),
]


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def before_after(regenerate: bool) -> dict[str, Any]:
    oc = h.load_benchmark("optimize_compact")
    pristine, info, note = oc.prepare_table(regenerate)
    print(f"\nissue-4 table: {note} -> {pristine} ({info['files']} files, {info['bytes'] / h.MIB:.0f} MiB)")
    work = process_cost.CACHE / f"health-work-{os.getpid()}"
    try:
        result, err = h.run_child(__file__, ["--child-before-after", str(pristine), str(work)], CHILD_TIMEOUT_S)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if result is None:
        return {"ok": False, "error": err}
    table = [{"metric": name, "before": get(result["before"]), "after": get(result["after"])} for name, get in ROWS]
    # the figures that can be known without our health code: the generated table before, delta-rs's listing after
    expected_before = {"version": info["version"], "files": info["files"], "bytes": info["bytes"], "rows": info["rows"]}
    measured = {k: (result["before"][k], result["after"][k]) for k in ("version", "files", "bytes", "rows")}
    agreed = all(measured[k] == (expected_before[k], result["oracle_after"][k]) for k in measured)
    if not agreed:
        print(f"  health disagrees: {measured} against {expected_before} before, {result['oracle_after']} after")
    print(f"\nhealth before and after OPTIMIZE (target and minimum size 256 MiB; optimize {result['optimize']})")
    print(f"  {'metric':<28} {'before':>14} {'after':>14}")
    for row in table:
        print(f"  {row['metric']:<28} {_shown(row['before']):>14} {_shown(row['after']):>14}")
    return {"ok": agreed, "table": table, **result}


def _shown(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:,}" if isinstance(value, int) else str(value)


# -- main -----------------------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--only", choices=("logs", "optimize"))
    parser.add_argument("--regenerate", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--child-inprocess", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--child-profile", help=argparse.SUPPRESS)
    parser.add_argument("--child-before-after", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_inprocess:
        sys.stderr.write(json.dumps(inprocess_child(*args.child_inprocess, profile=False)) + "\n")
        return 0
    if args.child_profile:
        inprocess_child(args.child_profile, COLUMNS, profile=True)
        return 0
    if args.child_before_after:
        print(json.dumps(before_after_child(*args.child_before_after)))
        return 0

    started = time.perf_counter()
    h.compile_bytecode()
    code_before = h.code_under_test(CODE_UNDER_TEST)
    report: dict[str, Any] = {
        "benchmark": "health",
        "description": __doc__.split("\n\n")[0] if __doc__ else "",
        "targets_spec": {"health_100k_process_s": TARGET_100K_PROCESS_S, "health_1m_vs_10x_100k": TARGET_LINEAR},
        "reps": args.reps,
        "machine": h.machine_info(("pyarrow", "numpy", "fsspec")),
        "code_under_test": code_before,
        "logs": {},
    }
    targets: list[dict[str, Any]] = []
    if args.only in (None, "logs"):
        for label, n in process_cost.LOG_SIZES.items():
            table, info, note = process_cost.prepare_log(label, n, args.regenerate)
            print(f"log {label}: {note} -> {table} ({info['files']:,} live files at version {info['version']})")
            summary = bench_log(label, table, info, args.reps)
            report["logs"][label] = {"table": info, **summary}
            process_cost.print_rows(f"{label}-file log", summary)
            inproc = summary["in-process"]
            if inproc.get("ok"):
                print(f"  in-process: snapshot {inproc['snapshot_s']:.2f}s, table_health {inproc['health_s']:.2f}s")
            if args.profile:
                done = subprocess.run(
                    [sys.executable, __file__, "--child-profile", str(table)],
                    capture_output=True,
                    text=True,
                    env=process_cost.child_env(),
                )
                report["logs"][label]["profile"] = done.stderr
                print(done.stderr)
        small, large = report["logs"].get("100k", {}), report["logs"].get("1M", {})
        targets.append(
            h.target(
                "health --json, 100k log, whole process",
                small.get("health", {}).get("process_wall_s"),
                TARGET_100K_PROCESS_S,
                unit=" s",
            )
        )
        ten_x = (small.get("in-process", {}).get("health_s") or 0) * 10
        targets.append(
            h.target(
                "table_health 1M / (10 x 100k), in-process",
                h.ratio(large.get("in-process", {}).get("health_s"), ten_x),
                TARGET_LINEAR,
            )
        )
    if args.only in (None, "optimize"):
        report["before_after_optimize"] = before_after(args.regenerate)
        targets.append(
            h.check(
                "before/after OPTIMIZE: files, bytes, rows as generated, then as delta-rs lists them",
                report["before_after_optimize"].get("ok"),
            )
        )
    print("\ntargets (medians of whole processes; other agents may share the machine: see 'others' cores)")
    h.print_targets(targets, width=52)
    report["targets"] = targets
    h.note_code_change(report, code_before, h.code_under_test(CODE_UNDER_TEST))
    return h.finish(report, targets, RESULTS, started, not args.no_write)


if __name__ == "__main__":
    raise SystemExit(main())
