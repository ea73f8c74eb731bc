"""Benchmark: Z-ORDER of a 400-file / 8M-row / ~260 MB table by two columns, deltalite vs delta-rs.

Input: the generated table of ``benchmarks/optimize_compact.py`` (its generator is imported, and its cache shared):
400 files x 20,000 rows in 4 partitions, ``a`` int64 (0..999), ``b`` int64 (0..10^9), ``c`` float64, ``s`` string,
partition column ``part``; written by delta-rs, fixed seed, cached under ``$TMPDIR/deltalite-bench/``. Z-ORDER
rewrites the table, so every measured run works on a fresh full copy of the pristine table.

Engines, each run in a fresh subprocess, Z-ordering by ``(a, b)`` with target size T = 64 MiB (every ~65 MB partition
becomes one file):

  local            deltalite ``zorder(DeltaTable(path), ["a", "b"], target_size=T, executor=LocalExecutor(2))``
  spark[2]         the same with ``SparkExecutor.start("local[2]")``; the JVM/session start is timed separately
  delta-rs         ``deltalake.DeltaTable(path).optimize.z_order(["a", "b"], target_size=T, max_concurrent_tasks=2)``
                   (delta-rs' optimize writes zstd by default; deltalite writes snappy)
  delta-rs/snappy  the same with ``WriterProperties(compression="SNAPPY")``, for reference (not in the targets)

Wall time spans opening the table to the end of the commit (spark: the ``zorder`` call, JVM start apart). Peak RSS:
``ru_maxrss`` of the child from ``wait4`` (the process alone), and the peak of the summed RSS of the child's whole
process tree (JVM and Spark's Python workers included), sampled from /proc every 50 ms; the parent is a child
subreaper, so the JVM and the worker daemon stay in the tree until they exit. Runs during which other work used more
than half a core are repeated (up to 3 times). Every run is then checked by a separate child: the table's rows (read
by delta-rs and by deltalite) must equal the input rows as a multiset (optimize_compact's ``rows_digest``).

Targets: deltalite wall <= 0.5x delta-rs wall, deltalite peak RSS <= 0.5x delta-rs peak RSS, identical rows; checked
for local (its own RSS) and for spark[2] (wall without the JVM start; RSS of the whole tree, JVM included).

Run:  .venv/bin/python benchmarks/zorder_speed.py [--reps 3] [--only local|spark|deltars ...] [--regenerate]
      [--profile]
Results: printed table, and benchmarks/results/zorder_speed.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _harness as h

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "zorder_speed.json"
CACHE = Path(tempfile.gettempdir()) / "deltalite-bench"
WORK = CACHE / "zorder-speed-work"

MIB = h.MIB
TARGET_SIZE = 64 * MIB
COLUMNS = ["a", "b"]
CHILD_TIMEOUT_S = 900
TARGET_WALL_VS_DELTARS = 0.5
TARGET_RSS_VS_DELTARS = 0.5

# configuration name -> (child kind, argument)
CONFIGS = {
    "local": ("local", "2"),
    "spark[2]": ("spark", "local[2]"),
    "delta-rs": ("deltars", "2"),
    "delta-rs/snappy": ("deltars", "2,snappy"),  # informative: same codec as deltalite; not in the targets
}
ONLY = {"local": ["local"], "spark": ["spark[2]"], "deltars": ["delta-rs", "delta-rs/snappy"]}


# The OPTIMIZE benchmark's table generator, cache and row check (that module imports only the standard library and
# the harness at load time).
_OC = h.load_benchmark("optimize_compact")


CODE_UNDER_TEST = (  # below airflow_provider_deltalite/; zorder_skipping.py records the same files
    "maintenance/clustering/zorder.py",
    "maintenance/clustering/runs.py",
    "maintenance/clustering/curves.py",
    "engine/rewrite.py",
    "engine/data_files.py",
    "maintenance/executor.py",
    "executors/spark.py",
)


# -- profiling (also used by zorder_skipping.py) -------------------------------------------------------------


# -- measured child ------------------------------------------------------------------------------------------


def child_run(kind: str, arg: str, path: str, profile: bool) -> dict[str, Any]:
    import pyarrow as pa

    pa.array([0])  # pyarrow's one-time first use (imports pandas) stays out of the timings, as in snapshot_load.py
    result: dict[str, Any] = {"kind": kind, "arg": arg}
    if kind in ("local", "spark"):
        from airflow_provider_deltalite import DeltaTable
        from airflow_provider_deltalite.executors import LocalExecutor
        from airflow_provider_deltalite.maintenance.clustering.zorder import zorder

        executor: Any
        if kind == "spark":
            from airflow_provider_deltalite.executors.spark import SparkExecutor

            t0 = time.perf_counter()
            executor = SparkExecutor.start(arg)
            result["parallelism"] = executor.parallelism
            result["jvm_start_s"] = time.perf_counter() - t0
        elif profile:
            executor = h.ProfiledLocalExecutor(int(arg))
        else:
            executor = LocalExecutor(int(arg))
        with h.Measured(profile) as run:
            stats = zorder(DeltaTable(path), COLUMNS, target_size=TARGET_SIZE, executor=executor)
        result.update(run.record)
        if kind == "spark":
            t1 = time.perf_counter()
            executor.close()
            result["close_s"] = time.perf_counter() - t1
        result.update(
            files_removed=stats.num_files_removed,
            files_added=stats.num_files_added,
            committed_version=stats.committed_version,
            z_order_stats=stats.z_order_stats,
        )
        if profile:
            h.print_profile(run.profile, executor.profiles, run.wall_s, "deltalite zorder local")
    elif kind == "deltars":
        import deltalake

        tasks, _, codec = arg.partition(",")
        writer = deltalake.WriterProperties(compression=codec.upper()) if codec else None
        with h.Measured() as run:
            metrics = deltalake.DeltaTable(path).optimize.z_order(
                COLUMNS, target_size=TARGET_SIZE, max_concurrent_tasks=int(tasks), writer_properties=writer
            )
        result.update(
            run.record,
            files_removed=metrics.get("numFilesRemoved"),
            files_added=metrics.get("numFilesAdded"),
            num_batches=metrics.get("numBatches"),
        )
    else:
        raise SystemExit(f"unknown kind {kind}")
    return result


# -- parent: process-tree sampling ---------------------------------------------------------------------------


# -- parent: runs, summary, report ---------------------------------------------------------------------------


def fresh_copy(pristine: Path) -> Path:
    shutil.rmtree(WORK, ignore_errors=True)
    return h.fresh_copy(pristine, WORK / "table")


def one_run(config: str, pristine: Path, expected: dict[str, Any], args: argparse.Namespace) -> dict:
    kind, arg = CONFIGS[config]
    table = fresh_copy(pristine)
    before = set(h.data_files(table))
    child = ["--child", kind, arg, str(table)]
    run, res = h.quiet_measured_run(config, __file__, child, CHILD_TIMEOUT_S, args.max_busy, args.max_wait)
    if res is None:
        return run
    new = [p for p in h.data_files(table) if p not in before]
    run["new_files"], run["new_bytes"] = len(new), sum(p.stat().st_size for p in new)
    h.record_verification(run, __file__, ["--verify-delta", str(table), json.dumps(expected)], CHILD_TIMEOUT_S)
    return run
    run.update(res)
    new = [p for p in h.data_files(table) if p not in before]
    run["new_files"], run["new_bytes"] = len(new), sum(p.stat().st_size for p in new)
    check, verr = h.run_child(__file__, ["--verify-delta", str(table), json.dumps(expected)], CHILD_TIMEOUT_S)
    run["verify"] = check if check is not None else {"error": verr}
    run["identical"] = bool(check and check.get("identical"))
    return run


def evaluate(summary: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    def get(config: str, key: str) -> float | None:
        s = summary.get(config)
        return s.get(key) if s and s.get("wall_s_median") is not None else None

    rs_wall, rs_rss = get("delta-rs", "wall_s_median"), get("delta-rs", "peak_rss_mb_max")
    targets = []

    def add(name: str, value: float | None, limit: float, note: str = "") -> None:
        targets.append(h.target(name, value, limit, note=note))

    add("local wall / delta-rs wall", h.ratio(get("local", "wall_s_median"), rs_wall), TARGET_WALL_VS_DELTARS)
    add("local peak RSS / delta-rs peak RSS", h.ratio(get("local", "peak_rss_mb_max"), rs_rss), TARGET_RSS_VS_DELTARS)
    add(
        "spark[2] wall / delta-rs wall",
        h.ratio(get("spark[2]", "wall_s_median"), rs_wall),
        TARGET_WALL_VS_DELTARS,
        note="zorder call only, JVM start excluded",
    )
    add(
        "spark[2] tree RSS / delta-rs peak RSS",
        h.ratio(get("spark[2]", "tree_peak_rss_mb_max"), rs_rss),
        TARGET_RSS_VS_DELTARS,
        note="driver + JVM + Python workers",
    )
    for config in ("local", "spark[2]", "delta-rs"):
        s = summary.get(config)
        value = s["identical"] if s and s.get("runs") else None
        targets.append(
            {
                "target": f"{config}: rows identical to the input",
                "value": value,
                "verdict": "n/a" if value is None else ("PASS" if value else "FAIL"),
                "note": "",
            }
        )
    return targets


def print_table(summary: dict[str, dict[str, Any]], targets: list[dict[str, Any]], reps: int) -> None:
    rs = summary.get("delta-rs", {})
    rs_wall, rs_rss = rs.get("wall_s_median"), rs.get("peak_rss_mb_max")

    def versus(config: str, s: dict[str, Any]) -> str:
        # rss/rs compares the whole tree for spark (JVM and Python workers), the process alone otherwise
        rss = s["tree_peak_rss_mb_max"] if config.startswith("spark") else s["peak_rss_mb_max"]
        vs_wall = f"{s['wall_s_median'] / rs_wall:.2f}" if rs_wall else "-"
        vs_rss = f"{rss / rs_rss:.2f}" if rs_rss else "-"
        return f"{vs_wall:>7} {vs_rss:>6}"

    h.print_engine_table(summary, CONFIGS, reps, 400, f"{'wall/rs':>7} {'rss/rs':>6}", versus)
    print(
        f"Z-order by (a, b), target_size {TARGET_SIZE // MIB} MiB, 2 workers/tasks for every engine. wall = open table "
        ".. commit (spark: the zorder call, JVM/session start apart).\n"
        "peak_rss = ru_maxrss of the child (spark: the Python driver alone); tree_rss = peak summed RSS of the child's "
        "process tree, sampled every 50 ms\n(spark: driver + JVM + Python workers); rss/rs compares tree_rss for "
        "spark, peak_rss otherwise, with delta-rs' peak_rss.\n"
        "cpu_s = user+sys of the timed part (spark: the whole process tree, JVM start included). others = the most "
        "cores other work used during a kept run.\n"
        "delta-rs writes zstd by default, deltalite snappy: delta-rs/snappy is shown for reference."
    )
    print()
    h.print_targets(targets, width=44)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--regenerate", action="store_true", help="rebuild the generated table (optimize_compact's)")
    h.add_engine_args(parser, ONLY)
    parser.add_argument("--child", nargs=3, metavar=("KIND", "ARG", "PATH"), help=argparse.SUPPRESS)
    parser.add_argument("--child-profile", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--verify-delta", nargs=2, metavar=("PATH", "EXPECTED"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child_run(*args.child, profile=args.child_profile)))
        return 0
    if args.verify_delta:
        oc = _OC
        print(json.dumps(oc.verify_delta_child(args.verify_delta[0], json.loads(args.verify_delta[1]))))
        return 0

    t_start = time.perf_counter()
    code_before = h.code_under_test(CODE_UNDER_TEST)
    oc = _OC
    subreaper = h.become_subreaper()
    CACHE.mkdir(parents=True, exist_ok=True)
    pristine, info, note = oc.prepare_table(args.regenerate)
    print(
        f"table: {note} -> {pristine} ({info['files']} files, {info['bytes'] / 1e6:.0f} MB, {info['rows']:,} rows, "
        f"version {info['version']})"
    )
    configs = [c for c in CONFIGS if not args.only or any(c in ONLY[o] for o in args.only)]
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in configs}
    discarded: dict[str, list[dict[str, Any]]] = {c: [] for c in configs}
    for rep in range(args.reps):
        for config in h.rotated(configs, rep):
            kept, dropped = h.measure_until_quiet(
                lambda config=config: one_run(config, pristine, info["expected"], args),
                args,
                lambda r, config=config, rep=rep: h.print_run(config, rep, r, width=16),
            )
            discarded[config].extend(dropped)
            runs[config].append(kept)
    summary = {c: h.summarise_runs(runs[c]) for c in configs}
    targets = evaluate(summary)
    print()
    print_table(summary, targets, args.reps)
    report: dict[str, Any] = {
        "benchmark": "zorder_speed",
        "description": (
            "Z-order by (a, b) of 400 files x 20,000 rows (4 partitions) into 64 MiB files; fresh subprocess and "
            "fresh table copy per run"
        ),
        "target_size": TARGET_SIZE,
        "columns": COLUMNS,
        "targets": targets,
        "reps": args.reps,
        "machine": h.machine_info(("pyarrow", "deltalake", "numpy", "pyspark", "pyspark-client"), java=True),
        "subreaper": subreaper,
        "code_under_test": code_before,
        "input": info,
        "results": summary,
        "discarded_contended_runs": discarded,
        "profile": None,
        "total_runtime_s": None,
    }
    if args.profile:
        print("\n=== cProfile: deltalite local (extra run, not in the timings) ===")
        table = fresh_copy(pristine)
        res, err, _ = h.run_measured(
            __file__, ["--child", "local", "2", str(table), "--child-profile"], CHILD_TIMEOUT_S
        )
        report["profile"] = h.profile_output(res, err)
    shutil.rmtree(WORK, ignore_errors=True)
    h.note_code_change(report, code_before, h.code_under_test(CODE_UNDER_TEST))
    return h.finish(report, targets, RESULTS, t_start, write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
